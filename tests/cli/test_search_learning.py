"""tests/benchmarks/bench_search_learning.py: the learning curve's columns are what they say (before the refit the
search's posterior is the residual model alone on the prior; with a refit from the first trial it is the k-trial
refit with the residual model), and bench_search's --policy reaches the search."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from benchmarks.bench_search import policy_of
from benchmarks.bench_search_learning import curve

from launcher import replay_bench as rb
from launcher.run.scheduler import POLICY

DATA = Path(__file__).resolve().parents[1] / "data" / "replay"


def _case(name: str) -> rb.Case:
    return next(c for c in rb.corpus([DATA / "pub_vtrain.csv"]) if c.sweep.name == name)


def test_the_posterior_is_the_residual_model_alone_until_the_refit_and_the_refit_after():
    case = _case("vtrain-single-20x1024-8gpu-gbs8")
    seq, rows, full = curve(case, POLICY)
    assert rows and all(r["posterior"] == r["resid"] for r in rows if r["k"] < POLICY.min_fit_trials)
    assert all(1 <= r[v] <= r["unrun"] for r in rows for v in ("posterior", "refit-k", "refit-k+res", "resid"))
    assert [r["key"] for r in rows] == seq[:len(rows)] and len(seq) == len(rows) + 1    # the winner ends it
    assert full.applied and "dispatch" in full.supported
    early = replace(POLICY, min_fit_trials=1, trust_trials=3)
    seq1, rows1, _ = curve(case, early)
    assert all(r["posterior"] == r["refit-k+res"] for r in rows1[:1])
    assert len(seq1) != len(seq)       # the early refit changes which trials the search runs


def test_policy_overrides_keep_the_fields_types():
    p = policy_of(["min_fit_trials=1", "pick_param_sd=true", "explore=0.25"])
    assert (p.min_fit_trials, p.pick_param_sd, p.explore) == (1, True, 0.25)
    assert policy_of([]) == POLICY
