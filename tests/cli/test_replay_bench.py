"""launcher.replay_bench (the search benchmark's machinery) on small tables: the baselines' ordering where it is
certain, random order's exact expectation, perturbed truths from a seed, grouping and the uninformative flag."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest

from launcher import replay_bench as rb
from launcher.measured import MeasuredSweep, read_table
from launcher.replay import WITHIN, Costs, random_expected_gpu_hours, replay_sweep

DATA = Path(__file__).resolve().parents[1] / "data" / "replay"
SMALL = ["h100_single_gpu.csv", "bloom_tr11_a100.csv", "tiny_cpu.csv"]


def small_cases():
    return rb.corpus([DATA / name for name in SMALL])


def test_groups_and_cost_models_follow_the_source_and_backend():
    groups = {c.sweep.name: c.group for c in small_cases()}
    assert groups["h100one"] == "own-gpu" and groups["bloom-181b"] == "published/bloom"
    assert groups["tiny-4gpu"] == "cpu-local"
    tiny = next(c for c in small_cases() if c.sweep.name == "tiny-4gpu")
    bloom = next(c for c in small_cases() if c.sweep.name == "bloom-181b")
    assert (tiny.costs.startup_s, tiny.costs.warmup_iters, tiny.costs.measure_iters) == (10.0, 2, 4)
    assert bloom.costs.startup_s is None and (bloom.costs.warmup_iters, bloom.costs.measure_iters) == (5, 10)


def test_random_expectation_is_exact_on_a_tiny_table():
    sweep = read_table(DATA / "h100_single_gpu.csv")[2]           # h100mlm: 4 rows, one OOM
    sweep = MeasuredSweep(sweep.name, sweep.rows[:4])
    costs = Costs(startup_s=60)
    best = max(r.tokens_per_s for r in sweep.rows if r.tokens_per_s)
    totals = []
    for order in itertools.permutations(sweep.rows):
        spent = 0.0
        for r in order:
            spent += costs.gpu_hours(r)
            if r.tokens_per_s and r.tokens_per_s >= (1 - WITHIN) * best:
                break
        totals.append(spent)
    assert random_expected_gpu_hours(sweep, costs) == pytest.approx(sum(totals) / len(totals), rel=1e-12)


@pytest.mark.parametrize("steady", [False, True])
def test_the_oracle_needs_no_more_than_any_strategy(steady):
    for case in small_cases():
        result = rb.evaluate(case, steady_stop=steady)
        oracle = result.to_within["oracle"]
        for strategy, hours in result.to_within.items():
            assert hours is None or oracle <= hours + 1e-12, (case.sweep.name, strategy)
        assert result.regret["exhaustive"] == 0.0 and result.spent["random"] == result.exhaustive_gpu_hours
        assert result.share("oracle") <= result.share("random") <= 1.0


def test_perturbed_truths_come_from_the_seed_and_differ_between_draws():
    cases = [c for c in small_cases() if c.sweep.name in ("h100two", "bloom-181b")]
    first, again = rb.perturbed(cases, 3, seed=5), rb.perturbed(cases, 3, seed=5)
    steps = [[r.step_time_s for r in c.sweep.rows] for c in first]
    assert steps == [[r.step_time_s for r in c.sweep.rows] for c in again]
    assert steps[0] != steps[1] and all(c.group.startswith("perturbed/") for c in first)
    assert steps != [[r.step_time_s for r in c.sweep.rows] for c in rb.perturbed(cases, 3, seed=6)]
    for case in first:                              # the grid is the measured one; only the outcomes change
        measured = next(c for c in cases if c.sweep.name == case.sweep.name)
        assert [r.request for r in case.sweep.rows] == [r.request for r in measured.sweep.rows]
        assert any(r.state == "ok" for r in case.sweep.rows)


def test_a_tight_memory_makes_perturbed_ooms_and_no_spread_reproduces_the_estimator():
    case = next(c for c in small_cases() if c.sweep.name == "h100two")
    exact = rb.perturb(case.sweep, np.random.default_rng(0), rb.Spread(0.0, 0.0, 0.0, 0.0, 0.0))
    for row, truth in zip(case.sweep.rows, exact.rows):
        estimate = row.request.estimate()
        assert truth.state == ("ok" if estimate.peak_mem_gb <= row.request.cluster.gpu_mem_gb else "oom")
        if truth.state == "ok":
            assert truth.step_time_s == pytest.approx(estimate.step_time_s, rel=1e-9)


def _result(group, shares, regret=0.0):
    case = rb.Case(read_table(DATA / "tiny_cpu.csv")[0], group, Costs())
    r = rb.Result(case, 100.0)
    for strategy, share in shares.items():
        r.to_within[strategy], r.spent[strategy], r.regret[strategy] = share * 100.0, 100.0, regret
    return r


def test_ties_are_uninformative_and_the_headline_weighs_groups_equally():
    tie = _result("a", {"adaptive": 0.30, "oracle": 0.295, "exhaustive": 0.30, "random": 0.305})
    assert not tie.informative
    many = [_result("a", {"adaptive": 0.1, "oracle": 0.05, "exhaustive": 0.2, "random": 0.5}) for _ in range(9)]
    one = [_result("b", {"adaptive": 0.5, "oracle": 0.05, "exhaustive": 0.2, "random": 0.5}, regret=0.03)]
    a, b = rb.summarise(many + [tie], "a"), rb.summarise(one, "b")
    assert (a.sweeps, a.informative) == (10, 9) and a.mean_share["adaptive"] == pytest.approx(0.1)
    assert b.regret_over_1pct == 1 and b.worse_than_plan == 1 and a.worse_than_plan == 0
    headline = rb.balanced([a, b], ["adaptive"])
    assert headline["adaptive"] == pytest.approx(0.3)       # (0.1 + 0.5) / 2: one vote per group, not per sweep
    never = _result("c", {"adaptive": 0.2})
    never.to_within["adaptive"] = None
    assert never.share("adaptive") == 1.0


def test_a_replay_can_start_from_another_prior():
    from launcher.plan.calibrate import Prior
    from launcher.plan.constants import constants_for

    sweep = read_table(DATA / "h100_single_gpu.csv")[0]
    slow = Prior(constants_for("torch").with_values(gemm_eff_max=0.2))
    result = replay_sweep(sweep, "exhaustive", prior=slow)
    default = replay_sweep(sweep, "exhaustive")
    assert result.calibration.constants.gemm_eff_max == 0.2 and default.calibration.constants.gemm_eff_max != 0.2


def test_scale_pairs_are_one_model_at_two_gpu_counts_and_transfer_starts_from_the_small_ones_fit():
    cases = rb.corpus([DATA / "pub_vtrain.csv"])
    pairs = rb.scale_pairs(cases)
    assert len(pairs) == 16
    for small, large in pairs:
        a, b = small.sweep.rows[0], large.sweep.rows[0]
        assert (a.request.model, a.request.layout.gbs) == (b.request.model, b.request.layout.gbs)
        assert (a.gpus, b.gpus) == (4, 8)
    small, large = pairs[0]
    prior = rb.transfer_prior(small)
    assert prior.source == small.sweep.name and prior.constants != rb.prior_for(large.sweep).constants
    t = rb.evaluate_transfer(small, large)
    assert 0.0 < t.cold <= 1.0 and 0.0 < t.warm <= 1.0 and (t.small, t.large) == (small.sweep.name, large.sweep.name)
    known = (rb.evaluate(small, ("adaptive",)), rb.evaluate(large, ("adaptive",)))
    assert rb.evaluate_transfer(small, large, known=known) == t     # the benchmark's reuse changes no figure


def test_the_gap_breakdown_adds_up_to_the_adaptive_searchs_hours_to_within_2pct():
    for case in small_cases():
        result = rb.evaluate(case, ("adaptive", "oracle"))
        assert set(result.gaps) == set(rb.GAP_KINDS)
        assert sum(result.gaps.values()) == pytest.approx(result.to_within["adaptive"], rel=1e-9)
        assert result.gaps["the within-2 % one"] > 0


def _shares(case):
    result = rb.evaluate(case)
    return {s: (result.to_within[s], result.spent[s], result.regret[s], result.trials[s]) for s in rb.STRATEGIES}


def test_worker_processes_change_nothing_but_the_time():
    """The benchmark's default runs one worker per core: the same results, in the order of the cases, as in one
    process (Workers hands the costliest case out first, so the order it runs them in is not the cases')."""
    cases = small_cases()
    with rb.Workers(1) as one:
        alone = one.map(_shares, cases)
    with rb.Workers(2) as two:
        parallel = two.map(_shares, cases, cost=rb.replay_cost)
    assert parallel == alone
    assert len({rb.replay_cost(c) for c in cases}) > 1       # the costs reorder the work
    assert rb.default_jobs() >= 1
