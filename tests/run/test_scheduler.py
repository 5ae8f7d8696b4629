"""launcher.run.scheduler: order, early stop and stop rule on plain data."""

from __future__ import annotations

import math

import pytest

from launcher.run import scheduler as sch
from launcher.run.scheduler import Outcome, Planned


def planned(key, tokens_per_s, sd=0.05, peak=40.0, mem_sd=0.05, capacity=80.0, **dims) -> Planned:
    layout = {"gpus": 8, "nodes": 1, "tp": 1, "pp": 1, "dp": 8, "vpp": 1, "mbs": 1, "gbs": 64, "recompute": "none",
              "sequence_parallel": False, "zero_stage": 0, "distributed_optimizer": False, **dims}
    return Planned(key, layout, 1000, 1000 / tokens_per_s, sd, peak, mem_sd, capacity)


GRID = [planned("a", 100, mbs=1), planned("b", 98, mbs=2), planned("c", 97, mbs=2, recompute="full"),
        planned("d", 90, tp=2, dp=4, mbs=4), planned("e", 50, tp=4, dp=2), planned("f", 99, mbs=8, peak=95.0)]


def test_first_the_best_predicted_that_fits_then_by_predicted_throughput():
    picks = sch.order(GRID, [], calibrated=False)
    assert picks[0].key == "a" and picks[0].reason == "best predicted"
    # f is predicted faster but likely out of memory: last; no trial is spent spanning the grid by default
    assert [p.key for p in picks[1:]] == ["b", "c", "d", "e", "f"]


def test_a_spanning_pick_can_still_be_asked_for():
    picks = sch.order(GRID, [], calibrated=False, span=1)
    # e is far but implausible (50 % of the best); d spans tp, dp and mbs while staying plausible
    assert picks[1].key == "d" and "spans" in picks[1].reason


def test_once_learned_the_expected_gain_per_gpu_hour_decides():
    """Best measured 95: a trial predicted 94 +- 1 % has almost nothing to gain, one predicted 93 +- 50 % may well
    beat it by a lot; a likely OOM gains nothing."""
    finished = [Outcome("a", "ok", 95.0)]
    grid = [GRID[0], planned("sure", 94, sd=0.01), planned("unsure", 93, sd=0.5, tp=4, dp=2),
            planned("better", 99, sd=0.05, mbs=2), planned("huge", 120, sd=0.05, mbs=8, peak=95.0)]
    picks = sch.order(grid, finished, calibrated=True)
    assert [p.key for p in picks[:2]] == ["unsure", "better"] and {p.key for p in picks[2:]} == {"sure", "huge"}
    assert "expected gain" in picks[0].reason
    by_chance = sch.order(grid, finished, calibrated=True, rule="chance")
    assert [p.key for p in by_chance] == ["better", "unsure", "sure", "huge"]
    assert by_chance[0].chance > by_chance[1].chance > by_chance[2].chance


def test_less_exploration_prefers_the_higher_predicted_mean_over_the_wider_spread():
    """Policy.explore scales the spreads in the expected gain: at 1 the unsure trial (93 +- 50 %) goes before the
    one predicted above the best (99 +- 5 %); with the spreads halved, the better-predicted one goes first."""
    finished = [Outcome("a", "ok", 95.0)]
    grid = [GRID[0], planned("unsure", 93, sd=0.5, tp=4, dp=2), planned("better", 99, sd=0.05, mbs=2)]
    assert [p.key for p in sch.order(grid, finished, calibrated=True)] == ["unsure", "better"]
    assert [p.key for p in sch.order(grid, finished, calibrated=True, explore=0.2)] == ["better", "unsure"]
    assert sch.expected_gain(grid[1], 95, 0.02, explore=0.5) < sch.expected_gain(grid[1], 95, 0.02)


def test_the_pick_reads_its_own_spreads_when_given_them():
    """pick_sd (Policy.pick_floor off: the spreads without the sweep's miss floor) replaces step_sd in the pick:
    with both trials floored at +-50 % the one predicted above the best goes first; with their own spreads the
    unsure one (93 +- 50 %) does, as in test_less_exploration_... at explore 1."""
    import numpy as np

    finished = [Outcome("a", "ok", 95.0)]
    grid = [GRID[0], planned("unsure", 93, sd=0.5, tp=4, dp=2), planned("better", 99, sd=0.5, mbs=2)]
    assert [p.key for p in sch.order(grid, finished, calibrated=True)] == ["better", "unsure"]
    own = np.array([0.05, 0.5, 0.05])
    picks = sch.order(grid, finished, calibrated=True, pick_sd=own)
    assert [p.key for p in picks] == ["unsure", "better"]
    assert picks[0].reason == sch.order([grid[0], grid[1], planned("better", 99, sd=0.05, mbs=2)], finished,
                                        calibrated=True)[0].reason
    with pytest.raises(ValueError):
        sch.order(grid, finished, calibrated=True, pick_sd=own[:2])


def test_of_two_equally_promising_trials_the_cheaper_runs_first():
    finished = [Outcome("a", "ok", 95.0)]
    fast = planned("fast", 100, sd=0.1, mbs=2)
    slow_start = Planned("slow_start", fast.dims, fast.tokens_per_step, fast.step_time_s, 0.1, 40.0, 0.05, 80.0, 600.0)
    quick_start = Planned("quick_start", fast.dims, fast.tokens_per_step, fast.step_time_s, 0.1, 40.0, 0.05, 80.0,
                          60.0)
    picks = sch.order([GRID[0], slow_start, quick_start], finished, calibrated=True)
    assert [p.key for p in picks] == ["quick_start", "slow_start"]
    assert sch.trial_cost(quick_start, 1.0, 8) == pytest.approx(8 * (60 + 8 * fast.step_time_s))
    assert sch.trial_cost(quick_start, 0.0, 8) == pytest.approx(8 * (60 + fast.step_time_s))   # OOM: start-up + 1 step


def test_expected_gain_grows_with_the_prediction_and_with_its_spread_below_the_best():
    base = planned("x", 90, sd=0.1)
    assert sch.expected_gain(planned("y", 95, sd=0.1), 100, 0.02) > sch.expected_gain(base, 100, 0.02) > 0
    assert sch.expected_gain(planned("z", 90, sd=0.3), 100, 0.02) > sch.expected_gain(base, 100, 0.02)
    sure_win = planned("w", 200, sd=1e-6)
    assert sch.expected_gain(sure_win, 100, 0.0) == pytest.approx(math.log(2.0), rel=1e-6)


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


def test_many_small_chances_together_keep_the_search_going():
    """30 trials with ~2 % each: no single one reaches 5 %, but together one of them likely beats the best."""
    finished = [Outcome("a", "ok", 100.0)]
    grid = [GRID[0]] + [planned(f"t{i}", 92, sd=0.05, mbs=2, pp=i + 2) for i in range(30)]
    assert max(sch.chance_beats(t, 100.0, 0.02) for t in grid[1:]) < sch.STOP_THRESHOLD
    assert sch.stop_rule(grid, finished, calibrated=True, combine="max").stop
    decision = sch.stop_rule(grid, finished, calibrated=True)
    assert not decision.stop and "together" in decision.reason


@pytest.mark.parametrize("times, steady", [
    ([1.0, 1.001, 0.999], True),              # 3 iterations within 0.1 %: known far better than 2 %
    ([1.0, 1.0], False),                      # fewer than 3: never
    ([1.0, 1.1, 0.9, 1.05], False),           # 8 % spread: the mean is known to +-13 % only
    ([1.0, 1.02, 0.99, 1.01, 1.0], True),     # 1 % spread over 5: +-1.4 %
])
def test_steady(times, steady):
    reason = sch.steady(times, noise_tolerance=0.02, min_measured_iters=2)
    assert (reason is not None) == steady
    if steady:
        assert "steady after" in reason


def test_learned_and_trusted_follow_the_policy():
    policy = sch.Policy()
    assert not sch.learned(policy, applied=False, n_measured=0) and sch.learned(policy, False, 1)
    assert not sch.learned(sch.Policy(residuals=False), False, 1) and sch.learned(sch.Policy(residuals=False), True, 3)
    assert not sch.trusted(policy, True, 5, 2) and sch.trusted(policy, False, 0, 3)
    old = sch.Policy(residuals=False)
    assert not sch.trusted(old, True, 0, 5) and sch.trusted(old, True, 1, 4)


def test_the_stop_rule_can_wait_longer_than_the_refit():
    early = sch.Policy(min_fit_trials=1, trust_trials=3)
    assert not sch.trusted(early, True, 0, 2) and sch.trusted(early, True, 0, 3)
    assert sch.trusted(sch.Policy(min_fit_trials=1), True, 0, 1)        # 0: the refit's minimum


def test_stop_rule_keeps_going_while_a_trial_may_still_win():
    finished = [Outcome("a", "ok", 100.0)]
    grid = [*GRID, planned("g", 99, sd=0.3, pp=2, dp=4)]     # 99 predicted, but 30 % uncertain
    decision = sch.stop_rule(grid, finished, calibrated=True)
    assert not decision.stop and "chance" in decision.reason


def test_a_band_trial_that_would_win_keeps_the_sweep_going_under_fat_memory_tails():
    """Real case (one H100, Qwen2.5-3B shape at seq 2048, 26 Nov 2026): the winner, micro-batch 8 with full
    recompute, was predicted at 92.6 GB of 85.5 (+8 %, a 4 % memory spread) and measured 78.2 GB. Under a normal
    memory tail it has a ~2 % chance to fit and the sweep stopped without it (4.6 % regret); the memory tail is as fat
    as the step time's (the stop rule's dof), because the estimator's memory errors have outliers too."""
    finished = [Outcome("a", "ok", 100.0)]
    grid = [planned("a", 100, peak=73.0, capacity=85.5),
            planned("band", 106, sd=0.04, peak=92.6, mem_sd=0.04, capacity=85.5, mbs=8, recompute="full")]
    assert sch.stop_rule(grid, finished, calibrated=True, dof=0.0).stop
    decision = sch.stop_rule(grid, finished, calibrated=True, dof=2.0)
    assert not decision.stop and "band" in decision.reason
    # far over the card, it is still skipped as out of memory
    far = [grid[0], planned("far", 106, sd=0.04, peak=140.0, mem_sd=0.04, capacity=85.5, mbs=16)]
    decision = sch.stop_rule(far, finished, calibrated=True, dof=2.0)
    assert decision.stop and "out of memory" in dict(decision.skipped)["far"]


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


def _reference_order(grid, finished, calibrated, rule="gain", tolerance=0.02, iterations=8):
    """order as it was written trial by trial (the scalar functions): the vectorised one must give the same."""
    by_key = {t.key: t for t in grid}
    done = {o.key for o in finished}
    unrun = [t for t in grid if t.key not in done]
    fits = {t.key: sch.chance_fits(t, by_key, finished) for t in unrun}
    best = sch.best_measured(finished)
    if calibrated and best is not None:
        chance = {t.key: fits[t.key] * sch.chance_beats(t, best, tolerance) for t in unrun}
        if rule == "gain":
            value = {t.key: fits[t.key] * sch.expected_gain(t, best, tolerance)
                     / max(sch.trial_cost(t, fits[t.key], iterations), 1e-9) for t in unrun}
            return [t.key for t in sorted(unrun, key=lambda t: (-value[t.key], -chance[t.key]))]
        return [t.key for t in sorted(unrun, key=lambda t: (-chance[t.key], -t.tokens_per_s * fits[t.key]))]
    return [t.key for t in sorted(unrun, key=lambda t: -t.tokens_per_s * fits[t.key])]


@pytest.mark.parametrize("seed", range(6))
def test_the_vectorised_order_is_the_trial_by_trial_order_and_its_head(seed):
    import random

    rng = random.Random(seed)
    grid = [planned(f"k{i}", rng.choice([50, 80, 90, 95, 99, 100, 120]) * rng.uniform(0.9, 1.1) ** rng.randrange(2),
                    sd=rng.choice([0.01, 0.05, 0.3]), peak=rng.choice([30.0, 60.0, 79.0, 95.0]),
                    tp=rng.choice([1, 2, 4]), mbs=rng.choice([1, 2, 4])) for i in range(300)]
    grid += [planned("twin", 99, sd=0.05), planned("twin2", 99, sd=0.05)]   # exact ties keep the plan's order
    finished = [Outcome(t.key, rng.choice(["ok", "ok", "oom", "stopped_early"]), rng.uniform(60, 110))
                for t in rng.sample(grid, 30)]
    finished = [Outcome(o.key, o.state, o.tokens_per_s if o.state != "oom" else None) for o in finished]
    for calibrated, rule in ((True, "gain"), (True, "chance"), (False, "gain")):
        full = [p.key for p in sch.order(grid, finished, calibrated=calibrated, rule=rule)]
        assert full == _reference_order(grid, finished, calibrated, rule)
        some = {t.key for t in rng.sample(grid, 100)}
        head = sch.order(grid, finished, calibrated=calibrated, rule=rule, candidates=some, head=7)
        assert [p.key for p in head] == [k for k in full if k in some][:7]
        assert [p.reason for p in head] == [p.reason for p in sch.order(grid, finished, calibrated=calibrated,
                                                                        rule=rule) if p.key in some][:7]
