"""A trial's identity (its config hash) is what a resumed sweep and `python -m analysis` find it by: it must not
change when the code around it does (enums for names, frozen config objects, packages moved). The values below were
computed by the release before the typed core; a sweep folder it wrote resumes with these hashes."""

from __future__ import annotations

import pytest

from launcher.plan.planner import make_plan, trial_context

PINNED = {
    ("+sweep=70b", "dry_run=true"): ("llama2-70b/80x8192x64x8x28672x4096x32000|a100-80g|megatron_deepspeed/bf16/3+7/1234",
                                     ["1d64007a2d3b", "c2dd450a3cfb", "76d73164b487"]),
    ("+sweep=tiny",): ("tiny/4x256x4x4x1024x128x1024|local-cpu|torch/fp32/2+4/1234",
                       ["8837e147865a", "5a6f43db344d", "2767d3c652a7"]),
}


@pytest.mark.parametrize("overrides", list(PINNED))
def test_trial_context_and_hashes_are_those_of_earlier_sweeps(load, overrides):
    cfg = load(*overrides)
    context, hashes = PINNED[overrides]
    assert trial_context(cfg) == context
    assert [t.config_hash for t in make_plan(cfg).trials[:3]] == hashes
