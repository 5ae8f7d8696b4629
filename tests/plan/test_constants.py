"""launcher.plan.constants: the refittable constants, the software stacks' a-priori values; precision 'auto'
(launcher.core.names)."""

from __future__ import annotations

import pytest

from launcher.core.errors import ConfigError
from launcher.core.names import is_cpu_standin, resolve_precision
from launcher.estimate import load_cluster_preset
from launcher.plan.constants import DEFAULT, MEGATRON_DEEPSPEED, TORCH_AUTOCAST, Constants, constants_for


@pytest.mark.parametrize("preset, expected", [("local-cpu", "fp32"), ("h100-80g", "bf16"), ("a100-40g", "bf16"),
                                              ("v100-32g", "bf16")])
def test_auto_precision_follows_the_hardware(preset, expected):
    assert resolve_precision("auto", load_cluster_preset(preset).gpu) == expected


@pytest.mark.parametrize("configured", ["bf16", "fp16", "fp32"])
def test_a_configured_precision_is_kept(configured):
    assert resolve_precision(configured, load_cluster_preset("h100-80g").gpu) == configured
    assert resolve_precision(configured, load_cluster_preset("local-cpu").gpu) == configured


def test_unknown_precision_is_refused():
    with pytest.raises(ValueError):
        resolve_precision("tf32", "H100")


@pytest.mark.parametrize("gpu, standin", [("cpu", True), ("CPU", True), (" Cpu ", True), ("A100", False),
                                          ("cpu-like", False)])
def test_the_cpu_stand_in_is_one_test_whatever_the_case(gpu, standin):
    assert is_cpu_standin(gpu) is standin


def test_constants_are_validated_and_frozen():
    with pytest.raises(ConfigError) as err:
        Constants(gemm_eff_max=0.0)
    assert err.value.field == "constants.gemm_eff_max"
    with pytest.raises(ConfigError):
        Constants(layer_dispatch_s=-1e-3)
    with pytest.raises(ConfigError):
        Constants(hbm_eff=float("nan"))
    with pytest.raises(AttributeError):
        DEFAULT.gemm_eff_max = 0.5   # type: ignore[misc]
    assert DEFAULT.with_values(net_eff=1.0).net_eff == 1.0 and DEFAULT.net_eff != 1.0
    assert hash(DEFAULT.with_values()) == hash(DEFAULT)


def test_each_backend_has_its_stack():
    assert constants_for("torch") is TORCH_AUTOCAST
    assert constants_for("megatron_deepspeed") is MEGATRON_DEEPSPEED
    assert constants_for("megatron_lm") is DEFAULT and constants_for("") is DEFAULT
    # Megatron-LM fuses the gradient accumulation into the GEMM; autocast and DeepSpeed's bf16 optimizer move
    # bytes per parameter per micro-batch in kernels of their own; autocast also issues its kernels more slowly
    assert min(TORCH_AUTOCAST.microbatch_param_bytes, MEGATRON_DEEPSPEED.microbatch_param_bytes) > 0
    assert DEFAULT.microbatch_param_bytes == 0
    assert TORCH_AUTOCAST.layer_dispatch_s > DEFAULT.layer_dispatch_s
