"""launcher.replay_bench's history section: each sweep of a source group replayed warm from the group's other
sweeps of its setup (plan.prior_from=sweeps/), never from itself or a repeat of its own grid."""

from __future__ import annotations

from pathlib import Path

import pytest

from launcher import replay_bench as rb

DATA = Path(__file__).resolve().parents[1] / "data" / "replay"


def test_the_repeats_are_the_r2_tables_and_their_originals():
    cases = rb.corpus(sorted(DATA.glob("cpu_*.csv")) + [DATA / "tiny_cpu.csv"])
    pairs = {tuple(sorted((a.sweep.name, b.sweep.name))) for a in cases for b in cases
             if a is not b and rb.repeats(a, b)}
    named = {tuple(sorted((rb.corpus([path.with_name(path.name.replace("_r2.csv", ".csv"))])[0].sweep.name,
                           rb.corpus([path])[0].sweep.name)))
             for path in DATA.glob("cpu_*_r2.csv")     # the tables named as repeats of a table, with it ('_r2'
             if path.with_name(path.name.replace("_r2.csv", ".csv")).exists()}   # alone is also '2 ranks')
    assert len(named) == 5 and pairs == named


def test_a_sweep_is_never_its_own_history_nor_a_repeat_of_its_grid():
    cases = rb.corpus(sorted(DATA.glob("cpu_*.csv")) + [DATA / "tiny_cpu.csv"])
    groups = rb.history_groups(cases)
    members = groups[("cpu-local", ("local-cpu", "cpu", "torch", "fp32"))]
    assert all(c.group == "cpu-local" for c in members) and len(members) >= 3
    for case in members:
        names = {h.sweep.name for h in rb.history_of(case, members)}
        assert case.sweep.name not in names
        assert not any(rb.repeats(case, h) for h in rb.history_of(case, members))
        assert len(names) >= len(members) - 2
    assert all(len(v) >= rb.HISTORY_MIN_SWEEPS for v in groups.values())
    assert not any(g == "cpu-slurm" for g, _ in groups)           # two sweeps: no history group


def test_each_sweep_is_replayed_from_the_others_final_calibrations():
    cases = rb.corpus([DATA / f"h100_gpu4_{n}.csv" for n in ("q05", "q3", "q3s2")])
    cold = [rb.evaluate(c) for c in cases]
    work = rb.history_work(cold, one=1)
    assert sorted(r.case.sweep.name for r, _, _ in work) == sorted(c.sweep.name for c in cases)
    own_ones = 0
    for result, priors, n in work:
        others = [r.calibration for r in cold if r is not result and r.calibration and r.calibration.applied]
        assert n == len(others) >= 1 and len(priors) == 2
        assert priors[0].prior.constants == rb.history_prior(result.case, others).constants
        if result.calibration and result.calibration.applied:     # its own calibration is not in its pool
            own_ones += 1
            assert priors[0].prior.constants != rb.history_prior(result.case, others + [result.calibration]).constants
    assert own_ones >= 2
    history = [rb.history_result(r, rb.warm_replays(r.case, priors), n) for r, priors, n in work]
    assert all(0 < h.warm_all <= 1 and 0 < h.warm_one <= 1 for h in history)
    table = rb.history_table(history)
    assert "own-gpu" in table and "warm (all)" in table


def test_the_cpu_grids_a_priori_misses_per_layout_value_are_alike():
    """The premise of a setup's history: the CPU stand-in's per-value misses (tp above all) recur from grid to
    grid."""
    cases = rb.corpus(sorted(DATA.glob("cpu_*.csv")) + [DATA / "tiny_cpu.csv"])
    pairs, median, low, high = rb.effect_consistency(cases)["cpu-local"]
    assert pairs >= 50 and low <= median <= high and median > 0.3


def test_a_scatter_sd_start_carries_the_history_s_effects_and_their_sds():
    cases = rb.corpus([DATA / f"h100_gpu4_{n}.csv" for n in ("q05", "q3", "q3s2")])
    cold = [rb.evaluate(c) for c in cases]
    case, history = cold[0].case, cold[1:]
    means = rb.history_start(case, history, "a-priori effects, centred")
    start = rb.history_start(case, history, "a-priori effects, centred, scatter sd")
    # the same pooled means up to float rounding: a column one sweep moved is that sweep's estimate in
    # pooled_effect_priors and its inverse-variance mean (m * w / w) in pooled_effects, one ulp apart for some
    # values (numpy 2.4's fits gave such a value)
    assert [n for n, _ in start.effects] == [n for n, _ in means.effects]
    assert [m for _, m in start.effects] == pytest.approx([m for _, m in means.effects], rel=1e-12, abs=1e-15)
    assert start.effect_sds and not means.effect_sds
    assert {n for n, _ in start.effect_sds} == {n for n, _ in start.effects}
    share, regret = rb.warm_replays(case, [start])[0]
    assert 0 < share <= 1 and regret >= 0


def test_fixed_orders_start_with_plan_order_and_none_beats_the_oracle():
    cases = rb.corpus([DATA / "h100_gpu2_g17.csv", DATA / "cpu_tiny_r2.csv"])
    for case in cases:
        result = rb.evaluate(case, ("exhaustive", "oracle"))
        shares = rb.fixed_order_shares(case)
        assert set(shares) == set(rb.FIXED_ORDERS)
        assert shares["plan order"] == pytest.approx(result.share("exhaustive"))
        assert all(result.share("oracle") - 1e-9 <= s <= 1 for s in shares.values())
        keys = rb.fixed_order_keys(case)
        assert all(sorted(k) == sorted(keys["plan order"]) for k in keys.values())
    g17 = rb.fixed_order_shares(cases[0])
    assert min(g17.values()) < g17["plan order"]            # an order the plan also gives can beat plan order
