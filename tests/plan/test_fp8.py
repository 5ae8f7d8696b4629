"""FP8: the config accepts it only where it runs (Megatron-LM on Transformer Engine, a GPU with FP8 tensor cores),
Megatron-LM renders Transformer Engine's delayed-scaling recipe, and the plan prices the FP8 GEMMs."""

from __future__ import annotations

import pytest

from launcher.config.load import load_config
from launcher.core.errors import ConfigError
from launcher.plan.planner import make_plan

MLM_70B = ["+sweep=70b", "dry_run=true", "backend=megatron_lm", "grid.zero_stage=[0]", "grid.nodes=[8]",
           "grid.tp=[8]", "grid.pp=[4]", "grid.mbs=[1]", "grid.recompute=[selective]", "plan.max_trials=0"]


def plan_of(*overrides: str):
    return make_plan(load_config([*MLM_70B, *overrides]))


@pytest.mark.parametrize("overrides, field, text", [
    (["backend=torch"], "backend.precision", "embedded workload has no FP8"),
    (["backend=megatron_deepspeed"], "backend.precision", "Megatron-DeepSpeed's FP8"),
    (["backend.megatron.transformer_impl=local", "backend.flash_attention=false"],
     "backend.megatron.transformer_impl", "Transformer Engine"),
])
def test_fp8_outside_transformer_engine_in_megatron_lm_is_refused_at_load(overrides, field, text):
    with pytest.raises(ConfigError) as err:
        load_config([*MLM_70B, *overrides, "backend.precision=fp8"])
    assert err.value.field == field and text in err.value.fix


@pytest.mark.parametrize("cluster, text", [("a100-80g", "a100-80g (A100-SXM4-80GB) has no FP8 tensor cores"),
                                           ("v100-32g", "v100-32g (V100-SXM2-32GB) has no FP8"),
                                           ("local-cpu", "CPU stand-in has no FP8")])
def test_fp8_on_a_gpu_without_fp8_tensor_cores_is_refused_by_the_plan(cluster, text):
    with pytest.raises(ConfigError) as err:
        plan_of(f"cluster={cluster}", "backend.precision=fp8", "grid.nodes=[1]", "grid.tp=[1]", "grid.pp=[1]")
    assert err.value.field == "backend.precision" and text in err.value.fix


def test_fp8_on_an_unknown_gpu_asks_for_its_datasheet_entry():
    with pytest.raises(ConfigError) as err:
        plan_of("cluster=h100-80g", "cluster.gpu=MI300X", "cluster.name=mi300x", "backend.precision=fp8")
    assert "not in the datasheet table" in err.value.fix


def test_fp8_on_h100_plans_faster_steps_than_bf16():
    """The boundary: the same layout on the same H100s, bf16 -> fp8, runs its linear layers at the FP8 peak."""
    bf16 = plan_of("cluster=h100-80g", "backend.precision=bf16").trials[0].estimate
    fp8 = plan_of("cluster=h100-80g", "backend.precision=fp8").trials[0].estimate
    assert fp8.step_time_s < 0.85 * bf16.step_time_s
    assert fp8.model_tflops_per_gpu > bf16.model_tflops_per_gpu
