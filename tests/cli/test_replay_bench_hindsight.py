"""The hindsight bounds of launcher.replay_bench (search15): the search's own calibration and residual model fitted on
every trial of a sweep (hind-loo: but the winners), its order run under the search's costs. On synthetic truths built from the estimator: when
the model family can express the truth (a level, a bias per layout value) the bound is the oracle's share even where
plan order is not; when it cannot (one configuration faster than any additive effect says) it stays above it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from launcher import replay_bench as rb
from launcher.measured import MeasuredSweep

DATA = Path(__file__).resolve().parents[1] / "data" / "replay"
BOTH = rb.STRATEGIES + rb.HINDSIGHT


def _estimated():
    """The 18-configuration 4-rank CPU grid (tp, pp, dp, mbs vary, every row fits) with the estimator's step times
    as its truth."""
    case = rb.corpus([DATA / "cpu_tiny_r4.csv"])[0]
    exact = rb.perturb(case.sweep, np.random.default_rng(0), rb.Spread(0.0, 0.0, 0.0, 0.0, 0.0))
    assert all(r.state == "ok" for r in exact.rows)
    return case, exact.rows


def _truth(case, rows, multipliers):
    rows = tuple(replace(r, step_time_s=r.step_time_s * m) for r, m in zip(rows, multipliers))
    return replace(case, sweep=MeasuredSweep("synthetic", rows))


def _best_predicted(rows):
    return max(rows, key=lambda r: r.tokens_per_s)


def test_a_truth_the_model_family_expresses_gives_the_oracles_share_where_plan_order_misses():
    case, rows = _estimated()
    slow_tp = _best_predicted(rows).request.layout.tp
    # the sweep 30 % slower than predicted, and the predicted best's tp 60 % slower still: a level and a per-value
    # effect, both in the model (calibration + residuals); plan order then runs a loser first
    truth = _truth(case, rows, [1.3 * (1.6 if r.request.layout.tp == slow_tp else 1.0) for r in rows])
    result = rb.evaluate(truth, BOTH)
    assert result.positions["plan order"] > 1 and result.share("exhaustive") > result.share("oracle") * 1.5
    assert result.positions["hindsight order"] == 1
    for bound in ("hindsight", "hind-gain", "hind-loo"):     # hind-loo: learnt from the other layouts of its tp
        assert result.share(bound) == pytest.approx(result.share("oracle"), rel=1e-9)
        assert result.regret[bound] == 0.0
    # the per-value effect is the residual model's to express: the fitted constants alone still run the loser first
    assert result.share("hind-const") > result.share("oracle") * 1.5


def test_a_level_alone_is_the_constants_to_express():
    case, rows = _estimated()
    result = rb.evaluate(_truth(case, rows, [1.4] * len(rows)), BOTH)
    for bound in rb.HINDSIGHT:
        assert result.share(bound) == pytest.approx(result.share("oracle"), rel=1e-9)


def test_a_truth_the_model_family_cannot_express_leaves_the_bound_above_the_oracle():
    case, rows = _estimated()
    ranked = sorted(rows, key=lambda r: -r.tokens_per_s)
    bumped = ranked[6]          # a mid-table layout made 1.7x faster: an interaction of its values, no one effect's
    truth = _truth(case, rows, [0.6 if r is bumped else 1.0 for r in rows])
    result = rb.evaluate(truth, BOTH)
    assert result.positions["hindsight order"] > 1
    for bound in rb.HINDSIGHT:
        assert result.share(bound) > result.share("oracle") * 1.5
        assert result.to_within[bound] >= result.to_within["oracle"]
    # in sample the fit memorises part of the bump; without the winner's own measurement it sees none of it
    assert result.positions["loo order"] > result.positions["hindsight order"]
    assert result.positions["loo order"] == result.positions["plan order"]


def test_the_bounds_never_beat_the_oracle_and_leave_the_informative_flag_alone():
    for case in rb.corpus([DATA / name for name in ("h100_single_gpu.csv", "tiny_cpu.csv", "cpu_deep_r4_vpp.csv")]):
        with_bounds, without = rb.evaluate(case, BOTH), rb.evaluate(case)
        assert with_bounds.informative == without.informative
        assert {s: with_bounds.to_within[s] for s in rb.STRATEGIES} == without.to_within
        for bound in rb.HINDSIGHT:
            assert with_bounds.to_within[bound] >= with_bounds.to_within["oracle"] - 1e-12
            assert with_bounds.positions[bound] >= 1


def test_the_reports_count_what_they_say():
    case, rows = _estimated()
    results = [rb.evaluate(_truth(case, rows, [1.3 * (1.6 if r.request.layout.tp == tp else 1.0) for r in rows]),
                           BOTH) for tp in (1, 2)]
    table = rb.hindsight_table(results)
    assert "HEADLINE" in table and "1.00x" in table          # both sweeps: hindsight = oracle
    histogram = rb.position_histogram(results)              # informative sweeps only
    first = next(line for line in histogram.splitlines() if line.startswith("1 "))
    informative = [r for r in results if r.informative]
    counts = [int(t) for t in first.split()[1:] if t.isdigit()]   # one per column, in order
    assert informative and counts == [sum(r.positions[k] == 1 for r in informative)
                                      for k in ("plan order", "hindsight order", "loo order", "adaptive", "hind-gain")]
    losses = rb.policy_losses(results)
    assert [t[2] - t[3] for t in losses] == sorted((t[2] - t[3] for t in losses), reverse=True)
