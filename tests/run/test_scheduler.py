"""launcher.run.scheduler: order, early stop and stop rule on plain data."""

from __future__ import annotations

import pytest

from launcher.run import scheduler as sch
from launcher.run.scheduler import Outcome, Planned


def planned(key, tokens_per_s, sd=0.05, peak=40.0, mem_sd=0.05, capacity=80.0, **dims) -> Planned:
    layout = {"gpus": 8, "nodes": 1, "tp": 1, "pp": 1, "dp": 8, "vpp": 1, "mbs": 1, "gbs": 64, "recompute": "none",
              "sequence_parallel": False, "zero_stage": 0, "distributed_optimizer": False, **dims}
    return Planned(key, layout, 1000, 1000 / tokens_per_s, sd, peak, mem_sd, capacity)


GRID = [planned("a", 100, mbs=1), planned("b", 98, mbs=2), planned("c", 97, mbs=2, recompute="full"),
        planned("d", 90, tp=2, dp=4, mbs=4), planned("e", 50, tp=4, dp=2), planned("f", 99, mbs=8, peak=95.0)]


def test_first_the_best_predicted_then_one_that_spans_the_grid():
    picks = sch.order(GRID, [], calibrated=False)
    assert picks[0].key == "a" and picks[0].reason == "best predicted"
    # f is predicted faster but likely out of memory; e is far but implausible (50 % of the best); d spans tp, dp
    # and mbs while staying plausible
    assert picks[1].key == "d" and "spans" in picks[1].reason
    assert [p.key for p in picks[2:]] == ["b", "c", "e", "f"]   # then by throughput x chance to fit


def test_once_calibrated_the_chance_to_beat_the_best_decides():
    """Best measured 95: a trial predicted 94 +- 1 % has no chance, one predicted 93 +- 50 % may well beat it."""
    finished = [Outcome("a", "ok", 95.0)]
    grid = [GRID[0], planned("sure", 94, sd=0.01), planned("unsure", 93, sd=0.5, tp=4, dp=2),
            planned("better", 99, sd=0.05, mbs=2), planned("huge", 120, sd=0.05, mbs=8, peak=95.0)]
    picks = sch.order(grid, finished, calibrated=True)
    assert [p.key for p in picks] == ["better", "unsure", "sure", "huge"]   # huge: 95 GB on 80 GB, no chance
    assert picks[0].chance > picks[1].chance > picks[2].chance


def test_a_trial_that_needs_no_more_memory_than_a_fitted_one_fits():
    grid = [planned("big", 100, peak=79.0, mem_sd=0.2), planned("small", 90, peak=78.0, mem_sd=0.2)]
    assert sch.chance_fits(grid[1], {t.key: t for t in grid}, []) < 0.6
    assert sch.chance_fits(grid[1], {t.key: t for t in grid}, [Outcome("big", "ok", 100.0)]) == 1.0
    assert sch.chance_fits(grid[1], {t.key: t for t in grid}, [Outcome("big", "oom")]) < 0.6


@pytest.mark.parametrize("times, best, stops", [
    ([1.0, 1.0], 1200.0, True),                  # 1000 tokens/s vs 1200: far below
    ([1.0, 1.0], 1015.0, False),                 # within the 2 % tolerance
    ([0.9, 1.1, 1.0], 1100.0, False),            # 10 % below, but its own spread is 10 %
    ([1.0], 1200.0, False),                      # fewer than the minimum measured iterations
    ([1.0, 1.0], None, False),                   # nothing finished to compare with
])
def test_early_stop(times, best, stops):
    reason = sch.early_stop(times, 1000, best, noise_tolerance=0.02, min_measured_iters=2)
    assert (reason is not None) == stops
    if stops:
        assert "below the best" in reason


def test_stop_rule_waits_for_a_calibration_and_lists_what_it_skips():
    finished = [Outcome("a", "ok", 100.0), Outcome("b", "ok", 98.0), Outcome("c", "stopped_early", 90.0)]
    assert not sch.stop_rule(GRID, finished, calibrated=False).stop
    decision = sch.stop_rule(GRID, finished, calibrated=True)
    assert decision.stop and "converged" in decision.reason
    skipped = dict(decision.skipped)
    assert set(skipped) == {"d", "e", "f"}
    assert "out of memory" in skipped["f"] and "chance to beat" in skipped["e"]


def test_stop_rule_keeps_going_while_a_trial_may_still_win():
    finished = [Outcome("a", "ok", 100.0)]
    grid = [*GRID, planned("g", 99, sd=0.3, pp=2, dp=4)]     # 99 predicted, but 30 % uncertain
    decision = sch.stop_rule(grid, finished, calibrated=True)
    assert not decision.stop and "chance" in decision.reason


def test_max_trials_is_a_hard_cap():
    finished = [Outcome("a", "ok", 100.0), Outcome("b", "failed")]
    decision = sch.stop_rule(GRID, finished, calibrated=False, max_trials=2)
    assert decision.stop and "max_trials" in decision.reason and len(decision.skipped) == 4


def test_nothing_left_to_run_stops():
    finished = [Outcome(t.key, "ok", t.tokens_per_s) for t in GRID]
    assert sch.stop_rule(GRID, finished, calibrated=False).stop
    assert sch.order(GRID, finished, calibrated=True) == []


def test_every_dimension_of_the_layout_counts_in_the_distance():
    """The spanning pick's distance is derived from the Layout: a layout that differs in any one dimension (cp and
    vpp included) is away from the other. Dropping a dimension from it fails here."""
    from launcher.core.layout import CATEGORICAL, DIMENSIONS, NUMERIC, Layout

    base = Layout(gpus=8, nodes=1, tp=2, pp=2, dp=2, cp=1, vpp=1, mbs=1, gbs=8, zero_stage=1)
    other = {"recompute": "full", "sequence_parallel": True, "distributed_optimizer": True}  # ints: doubled
    assert set(NUMERIC) | set(CATEGORICAL) == {d.name for d in DIMENSIONS}
    for d in DIMENSIONS:
        value = other.get(d.name, getattr(base, d.name) * 2 if d.type is int else None)
        moved = base.replace(**{d.name: value}).to_dict()
        assert sch._distance(base.to_dict(), moved) > 0, d.name
