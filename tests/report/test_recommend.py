"""analysis.report.recommend: each rule triggers exactly at its threshold; the proposed command composes with Hydra."""

from __future__ import annotations

import shlex

import pytest

from analysis.report.recommend import (
    ESTIMATE_OFF,
    LARGE_HEADROOM,
    SMALL_HEADROOM,
    SweepFacts,
    extend_sweep_command,
    include_entry,
    next_mbs_layout,
    recommend,
    split_overrides,
)
from launcher.core.layout import Layout

FACTS = SweepFacts(capacity_gb=80.0, gpus_per_node=8, command="python -m launcher +sweep=tiny",
                   includes=({"gpus": 4, "tp": 1, "pp": 1, "mbs": 64, "gbs": 256},),
                   grid_first={"cp": 1, "vpp": 1, "recompute": "none", "sequence_parallel": False, "zero_stage": 0,
                               "distributed_optimizer": False})


def layout(tp=1, pp=1, dp=2, mbs=4, gbs=8, **extra) -> dict:
    return {"gpus": tp * pp * dp, "nodes": 1, "tp": tp, "pp": pp, "dp": dp, "cp": 1, "vpp": 1, "mbs": mbs, "gbs": gbs,
            "recompute": "none", "sequence_parallel": False, "zero_stage": 0, "distributed_optimizer": False, **extra}


def trial(lay=None, headroom=0.5, tokens=1000.0, state="ok", predicted_tokens=None, step_s=1.0,
          predicted_step_s=None, chash="best") -> dict:
    predicted = {}
    if predicted_tokens:
        predicted = {"tokens_per_s": predicted_tokens, "step_time_s": predicted_step_s or tokens / predicted_tokens}
    return {"config_hash": chash, "state": state, "layout": lay or layout(), "failure_kind": "",
            "metrics": {"tokens_per_s": tokens, "headroom": headroom, "step_time_s": step_s,
                        "peak_mem_gb": 80 * (1 - headroom)} if state == "ok" else {},
            "predicted": predicted}


def kinds(best: dict, others=(), **kw) -> list[str]:
    ranked = [best, *[t for t in others if t["state"] == "ok"]]
    return [r.kind for r in recommend(ranked, [best, *others], FACTS, **kw)]


@pytest.mark.parametrize("headroom, expected", [(LARGE_HEADROOM + 0.001, True), (LARGE_HEADROOM, False)])
def test_large_headroom_proposes_the_doubled_mbs(headroom, expected):
    assert ("grow_mbs" in kinds(trial(headroom=headroom))) is expected


@pytest.mark.parametrize("headroom, expected", [(SMALL_HEADROOM - 0.001, True), (SMALL_HEADROOM, False)])
def test_small_headroom_warns_of_a_production_oom(headroom, expected):
    safer = trial(headroom=0.2, tokens=900.0, chash="safer")
    recs = recommend([trial(headroom=headroom), safer], [trial(headroom=headroom), safer], FACTS)
    low = [r for r in recs if r.kind == "low_headroom"]
    assert bool(low) is expected
    if expected:
        assert low[0].severity == "warning" and "safer" in low[0].message and recs[0] is low[0]  # warnings first


def test_next_mbs_raises_gbs_to_a_multiple_of_mbs_times_dp():
    assert next_mbs_layout(layout(dp=2, mbs=4, gbs=8))["gbs"] == 16
    assert next_mbs_layout(layout(dp=2, mbs=4, gbs=64)) == layout(dp=2, mbs=8, gbs=64)
    assert next_mbs_layout(layout(pp=2, dp=1, mbs=1, gbs=6, vpp=2))["gbs"] == 8  # m must stay a multiple of pp


def test_the_proposed_command_composes_and_adds_the_layout_to_the_same_sweep(load):
    from launcher.plan.grid import expand

    rec = next(r for r in recommend([trial()], [trial()], FACTS) if r.kind == "grow_mbs")
    argv = shlex.split(rec.command)
    assert argv[:4] == ["python", "-m", "launcher", "+sweep=tiny"]
    cfg = load(*argv[3:])
    assert cfg.sweep.name == "tiny" and not cfg.sweep.fresh
    layouts = [lay.to_dict() for lay in expand(cfg.grid, cfg.cluster)]
    assert Layout.from_dict(layout(dp=2, mbs=8, gbs=16)).to_dict() in layouts   # the proposal
    assert any(lay["mbs"] == 64 and lay["gbs"] == 256 for lay in layouts)  # earlier includes are kept


def test_command_txt_overrides_are_requoted_and_fresh_is_dropped():
    # written as the launcher writes command.txt (shlex.join), read back token for token
    argv = ["python", "-m", "launcher", "+sweep=tiny", "grid.include=[{gpus: 2, mbs: 4}]", "sweep.fresh=true",
            "grid.tp=[1, 2]"]
    command = shlex.join(argv)
    assert split_overrides(command) == argv
    out = extend_sweep_command(command, [{"gpus": 2, "tp": 1, "sequence_parallel": True}])
    assert shlex.split(out) == ["python", "-m", "launcher", "+sweep=tiny", "grid.tp=[1, 2]",
                                "grid.include=[{gpus: 2, tp: 1, sequence_parallel: true}]"]


def test_include_entry_leaves_out_the_grid_fallbacks():
    assert include_entry(layout(recompute="full"), FACTS.grid_first) == {
        "gpus": 2, "tp": 1, "pp": 1, "mbs": 4, "gbs": 8, "recompute": "full"}


def test_no_proposal_when_the_larger_mbs_was_already_tried():
    oomed = trial(layout(mbs=8, gbs=16), state="oom", chash="oomed")
    oomed["failure_kind"] = "oom"
    rec = next(r for r in recommend([trial()], [trial(), oomed], FACTS) if r.kind == "grow_mbs")
    assert rec.command == "" and "mbs 8" in rec.message and "oom" in rec.message


@pytest.mark.parametrize("pp, gbs, expected", [(2, 14, True), (2, 16, False), (1, 2, False)])
def test_pipeline_bubble_below_four_microbatches_per_stage(pp, gbs, expected):
    best = trial(layout(pp=pp, dp=1, mbs=2, gbs=gbs), headroom=0.2)   # m = gbs/2: 7 < 8 warns, 8 does not
    assert ("pipeline_bubble" in kinds(best)) is expected


@pytest.mark.parametrize("tp, expected", [(16, True), (8, False)])
def test_tensor_parallel_across_nodes(tp, expected):
    assert ("tp_across_nodes" in kinds(trial(layout(tp=tp, dp=1), headroom=0.2))) is expected


@pytest.mark.parametrize("error, expected", [(ESTIMATE_OFF + 0.01, True), (ESTIMATE_OFF - 0.01, False)])
def test_estimate_off_beyond_the_threshold(error, expected):
    best = trial(headroom=0.2, predicted_tokens=1000.0 * (1 + error))
    assert ("estimate_off" in kinds(best)) is expected


def _term(best: dict, breakdown: dict) -> str:
    rec = next(r for r in recommend([best], [best], FACTS, time_breakdown_s=breakdown) if r.kind == "estimate_off")
    return rec.message.rsplit("The term that looks off: ", 1)[1]


def test_the_suspect_term_follows_the_predicted_breakdown():
    slow = dict(headroom=0.2, tokens=500.0, step_s=2.0, predicted_tokens=1000.0, predicted_step_s=1.0)
    compute = {"compute": 0.9, "tp_comm": 0.05, "optimizer": 0.05}
    assert _term(trial(**slow), compute) == "compute efficiency."
    comm = {"compute": 0.5, "tp_comm": 0.1, "dp_comm": 0.3, "optimizer": 0.1}
    assert _term(trial(**slow), comm) == "communication (mostly DP)."
    bubble = {"compute": 0.6, "bubble": 0.3, "tp_comm": 0.1}
    assert _term(trial(layout(pp=2, dp=1, gbs=64), **slow), bubble) == "pipeline bubble."
    assert _term(trial(layout(pp=1), **slow), bubble) == "compute efficiency."  # no bubble without a pipeline
    # Faster than predicted by 0.5 s: a 0.3 s bubble cannot explain it, the 0.6 s of compute can.
    fast = dict(headroom=0.2, tokens=2000.0, step_s=0.5, predicted_tokens=1000.0, predicted_step_s=1.0)
    assert _term(trial(layout(pp=2, dp=1, gbs=64), **fast), bubble) == "compute efficiency."


def test_memory_estimate_off_names_the_largest_term():
    best = trial(headroom=0.5)
    best["predicted"] = {"peak_mem_gb": 20.0}
    recs = recommend([best], [best], FACTS, mem_breakdown_gb={"weights": 5.0, "activations": 12.0})
    assert any("activations" in r.message for r in recs if r.kind == "estimate_off")


def test_nothing_to_recommend_without_an_ok_trial():
    assert recommend([], [trial(state="oom")], FACTS) == []
