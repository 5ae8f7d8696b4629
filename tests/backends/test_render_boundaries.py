"""Boundary tests: each dimension value where the rendering changes, on both sides of the boundary (cp 1 vs 2,
vpp 1 vs 2, sequence parallel off vs on, ZeRO stage 0 vs 1, distributed optimizer off vs on). A condition such as
`cp > 1` mistyped as `cp > 2` passes every test that only renders cp=4; these do not."""

from __future__ import annotations

import json

import pytest
from backend_helpers import a100_80g, backend_config, golden_layout, llama2_70b

from launcher.backends import render_launch

TRIAL = "/scratch/sweeps/70b/trials/t0001"


def argv(backend: str, **layout_changes) -> list[str]:
    settings = dict(python="python", precision="bf16", path="/shared/Megatron", tokenizer_type="NullTokenizer")
    if backend == "megatron_deepspeed":
        settings.update(data_path="/d/text_document", launcher="deepspeed")
    spec = render_launch(llama2_70b(), a100_80g(), backend_config(backend, **settings), golden_layout(**layout_changes),
                         trial_dir=TRIAL)
    return spec.program_argv


def value_of(args: list[str], flag: str) -> str | None:
    return args[args.index(flag) + 1] if flag in args else None


@pytest.mark.parametrize("cp, rendered", [(1, None), (2, "2"), (4, "4")])
def test_megatron_lm_context_parallelism_from_cp_2(cp, rendered):
    # tp 2 x pp 4 x cp x dp = 64 GPUs, tp x cp within a node of 8; the sequence splits into 2*cp chunks.
    args = argv("megatron_lm", tp=2, cp=cp, dp=8 // cp)
    assert value_of(args, "--context-parallel-size") == rendered


@pytest.mark.parametrize("backend, flag", [("megatron_lm", "--num-layers-per-virtual-pipeline-stage"),
                                           ("megatron_deepspeed", None)])
def test_interleaving_from_vpp_2(backend, flag):
    if flag is None:  # Megatron-DeepSpeed has no interleaved schedule: the rules refuse vpp > 1 there
        from launcher.core.errors import ConfigError

        with pytest.raises(ConfigError, match="vpp"):
            argv(backend, vpp=2, distributed_optimizer=False, zero_stage=1)
        return
    assert value_of(argv(backend, vpp=1), flag) is None
    assert value_of(argv(backend, vpp=2), flag) == str(80 // (4 * 2))


@pytest.mark.parametrize("backend", ["megatron_lm", "megatron_deepspeed"])
@pytest.mark.parametrize("on", [False, True])
def test_sequence_parallel_on_and_off(backend, on):
    extra = dict(vpp=1, distributed_optimizer=False, zero_stage=1) if backend == "megatron_deepspeed" else {}
    assert ("--sequence-parallel" in argv(backend, sequence_parallel=on, **extra)) is on


@pytest.mark.parametrize("zero_stage, distributed_optimizer, flagged", [(0, False, False), (1, False, True),
                                                                         (0, True, True)])
def test_megatron_lm_distributed_optimizer_from_zero_1(zero_stage, distributed_optimizer, flagged):
    args = argv("megatron_lm", zero_stage=zero_stage, distributed_optimizer=distributed_optimizer)
    assert ("--use-distributed-optimizer" in args) is flagged


@pytest.mark.parametrize("zero_stage", [0, 1])
def test_megatron_deepspeed_zero_stage_reaches_ds_config(zero_stage):
    settings = dict(python="python", precision="bf16", path="/shared/Megatron", tokenizer_type="NullTokenizer",
                    data_path="/d/text_document", launcher="deepspeed")
    spec = render_launch(llama2_70b(), a100_80g(), backend_config("megatron_deepspeed", **settings),
                         golden_layout(vpp=1, distributed_optimizer=False, zero_stage=zero_stage), trial_dir=TRIAL)
    config = json.loads(spec.files["ds_config.json"])
    assert config["zero_optimization"]["stage"] == zero_stage
