"""launcher.plan.constants: the refittable constants, the software stacks' a-priori values, precision 'auto'."""

from __future__ import annotations

import pytest

from launcher.errors import ConfigError
from launcher.estimate import load_cluster_preset
from launcher.plan.constants import (DEFAULT, MEGATRON_DEEPSPEED, TORCH_AUTOCAST, Constants, constants_for,
                                     resolve_precision)


@pytest.mark.parametrize("preset, expected", [("local-cpu", "fp32"), ("h100-80g", "bf16"), ("a100-40g", "bf16"),
                                              ("v100-32g", "bf16")])
def test_auto_precision_follows_the_hardware(preset, expected):
    assert resolve_precision("auto", load_cluster_preset(preset)) == expected


@pytest.mark.parametrize("configured", ["bf16", "fp16", "fp32"])
def test_a_configured_precision_is_kept(configured):
    assert resolve_precision(configured, load_cluster_preset("h100-80g")) == configured
    assert resolve_precision(configured, load_cluster_preset("local-cpu")) == configured


def test_unknown_precision_names_the_field_and_the_choices():
    with pytest.raises(ConfigError) as err:
        resolve_precision("tf32", load_cluster_preset("h100-80g"))
    assert err.value.field == "backend.precision" and "auto" in str(err.value)


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
