"""A trial's identity (its config hash) is what a resumed sweep and `python -m analysis` find it by: it must not
change when the code around it does (enums for names, frozen config objects, packages moved, a new estimator that
ranks the trials differently). The hashes below were computed by the release before the typed core; a sweep folder it
wrote resumes with these hashes."""

from __future__ import annotations

import pytest

from launcher.core.layout import Layout
from launcher.plan.grid import expand
from launcher.plan.planner import trial_context

_70B = {"gpus": 256, "nodes": 32, "cp": 1, "vpp": 1, "gbs": 1024, "sequence_parallel": True, "zero_stage": 1,
        "distributed_optimizer": False}
_TINY = {"gpus": 4, "nodes": 1, "cp": 1, "vpp": 1, "sequence_parallel": False, "zero_stage": 0,
         "distributed_optimizer": False, "recompute": "none"}
PINNED = {
    # the 70b sweep as it was then: its iterations and recompute modes (its grid and iterations have changed since)
    ("+sweep=70b", "dry_run=true", "backend.warmup_iters=3", "backend.measure_iters=7",
     "grid.recompute=[none,selective,full]"): (
        "llama2-70b/80x8192x64x8x28672x4096x32000|a100-80g|megatron_deepspeed/bf16/3+7/1234",
        {"1d64007a2d3b": Layout(**_70B, tp=4, pp=8, dp=8, mbs=2, recompute="none"),
         "c2dd450a3cfb": Layout(**_70B, tp=4, pp=4, dp=16, mbs=1, recompute="none"),
         "76d73164b487": Layout(**_70B, tp=4, pp=8, dp=8, mbs=2, recompute="selective")}),
    ("+sweep=tiny",): (
        "tiny/4x256x4x4x1024x128x1024|local-cpu|torch/fp32/2+4/1234",
        {"8837e147865a": Layout(**_TINY, tp=1, pp=1, dp=4, mbs=64, gbs=256),
         "5a6f43db344d": Layout(**_TINY, tp=1, pp=1, dp=4, mbs=2, gbs=8),
         "2767d3c652a7": Layout(**_TINY, tp=2, pp=1, dp=2, mbs=2, gbs=8)}),
}


@pytest.mark.parametrize("overrides", list(PINNED))
def test_trial_context_and_hashes_are_those_of_earlier_sweeps(load, overrides):
    cfg = load(*overrides)
    context, layouts = PINNED[overrides]
    assert trial_context(cfg) == context
    grid = set(expand(cfg.grid, cfg.cluster))
    for config_hash, layout in layouts.items():
        assert layout in grid
        assert layout.config_hash(context) == config_hash, layout.label()
