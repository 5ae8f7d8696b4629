"""The poll's column paths (issue 19: a poll of a 50k-trial plan under 0.5 s) against the per-trial paths they
replace, on generated trials with ties: scheduler.order on PlannedColumns against a Python sort of the scalar
scores (chance_fits, chance_beats, expected_gain, trial_cost) with the same stable order for equal keys,
Search.planned_columns against Search.planned, and the calibrated memory rule's numpy pre-pass against the rule
asked trial by trial."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from launcher.core.states import TrialState
from launcher.plan.planner import make_plan
from launcher.run import scheduler as sch
from launcher.run.loop import _records
from launcher.run.memory_prune import calibrated_ooms
from launcher.run.predictions import Predictions
from launcher.run.scheduler import Outcome, Planned, PlannedColumns
from launcher.run.search import Search


def generated(n: int, seed: int) -> list[Planned]:
    """Trials drawn from few values, so that many share every score (ties), some over the capacity."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(n):
        gpus = int(rng.choice([8, 16, 32]))
        dims = {"gpus": gpus, "tp": int(rng.choice([1, 2, 4])), "mbs": int(rng.choice([1, 2]))}
        out.append(Planned(f"t{i}", dims, float(rng.choice([4096.0, 8192.0]) / (1 if i % 2 else gpus)),
                           float(rng.choice([0.5, 1.0, 2.0])), float(rng.choice([0.0, 0.05, 0.3])),
                           float(rng.choice([30.0, 70.0, 79.0, 90.0])), float(rng.choice([0.02, 0.1])), 80.0,
                           float(rng.choice([0.0, 60.0]))))
    return out


def finished_of(trials: list[Planned], seed: int) -> list[Outcome]:
    rng = np.random.default_rng(seed)
    picked = rng.choice(len(trials), size=12, replace=False).tolist()
    return [Outcome(trials[i].key, TrialState.OK if j % 3 else TrialState.OOM,
                    trials[i].tokens_per_s * float(rng.uniform(0.8, 1.2)) if j % 3 else None)
            for j, i in enumerate(picked)]


def per_trial_order(planned: list[Planned], finished: list[Outcome], *, calibrated: bool, rule: str,
                    noise_tolerance: float, iterations: int, explore: float, candidates=None) -> list[str]:
    """order's ranking as a Python sort of the scalar scores (sorted is stable: equal keys keep the plan order)."""
    done = {o.key for o in finished}
    unrun = [t for t in planned if t.key not in done and (candidates is None or t.key in candidates)]
    largest = sch.largest_fitted({t.key: t for t in planned}, finished)
    best = sch.best_measured(finished)
    fits = {t.key: sch._fits(t, largest) for t in unrun}
    if not (calibrated and best is not None):
        return [t.key for t in sorted(unrun, key=lambda t: -t.tokens_per_s * fits[t.key])]
    chance = {t.key: fits[t.key] * sch.chance_beats(t, best, noise_tolerance) for t in unrun}
    if rule == "gain":
        value = {t.key: fits[t.key] * sch.expected_gain(t, best, noise_tolerance, explore)
                 / max(sch.trial_cost(t, fits[t.key], iterations), 1e-9) for t in unrun}
        return [t.key for t in sorted(unrun, key=lambda t: (-value[t.key], -chance[t.key]))]
    return [t.key for t in sorted(unrun, key=lambda t: (-chance[t.key], -t.tokens_per_s * fits[t.key]))]


@pytest.mark.parametrize("seed", [1, 2, 3])
@pytest.mark.parametrize("rule", ["gain", "chance"])
@pytest.mark.parametrize("calibrated", [False, True])
def test_the_order_of_columns_is_the_sort_of_the_per_trial_scores_ties_included(seed, rule, calibrated):
    trials = generated(400, seed)
    finished = finished_of(trials, seed)
    kwargs = dict(calibrated=calibrated, rule=rule, noise_tolerance=0.02, iterations=8, explore=0.5)
    want = per_trial_order(trials, finished, **kwargs)
    assert len(set(want)) == len(want) > 300
    columns = PlannedColumns.of(trials)
    assert [p.key for p in sch.order(columns, finished, **kwargs)] == want
    assert sch.order(columns, finished, **kwargs) == sch.order(trials, finished, **kwargs)   # the reasons too
    candidates = {t.key for t in trials[::3]}
    head = [p.key for p in sch.order(columns, finished, candidates=candidates, head=7, **kwargs)]
    assert head == per_trial_order(trials, finished, candidates=candidates, **kwargs)[:7]
    ties = [t.tokens_per_s for t in trials]
    assert len(set(ties)) < len(ties) / 10     # the generated trials tie on their scores: the order of ties counts


def test_the_columns_give_back_the_planned_trials_field_for_field():
    trials = generated(50, 4)
    columns = PlannedColumns.of(trials)
    assert columns.rows() == trials and len(columns) == 50
    picked = np.array([7, 3, 3, 49])
    assert columns.take(picked).rows() == [trials[i] for i in picked.tolist()]


@pytest.fixture
def plan(load):
    cfg = load("+sweep=tiny", "grid.gbs=[8,16,32]")
    return cfg, _records(make_plan(cfg))


def some_measured(records, n: int = 4):
    out = list(records)
    for i in range(0, len(out), max(1, len(out) // n))[:n]:
        r = out[i]
        out[i] = replace(r, state=TrialState.OK, metrics={"step_time_s": 1.3 * r.predicted["step_time_s"],
                                                          "peak_mem_gb": r.predicted["peak_mem_gb"]})
    return out


def test_the_searchs_columns_are_its_planned_trials(plan):
    cfg, records = plan
    records = some_measured(records)
    search = Search(cfg)
    search.refit(records)
    predictions = search.predictions(records)
    columns = search.planned_columns(records, predictions)
    assert columns.rows() == search.planned(records, predictions) and len(columns) > 10
    assert isinstance(columns.gpus, np.ndarray) and columns.keys is predictions.row_keys()   # the arrays' path
    predictions[records[1].config_hash] = {**predictions[records[1].config_hash], "step_time_s": 9.0}
    again = search.planned_columns(records, predictions)   # a prediction set since: the per-trial path
    assert again.rows() == search.planned(records, predictions) and again.row(1).step_time_s == 9.0
    assert set(predictions.keyset()) == set(predictions) and all(k in predictions.keyset() for k in predictions)


def test_the_memory_rules_numpy_pass_prunes_what_the_per_trial_rule_prunes(plan):
    """Peaks at the rule's very thresholds (the fit margin, the borderline, the lower end at the capacity) and a
    NaN: the pre-pass may only drop what the rule keeps."""
    cfg, records = plan
    search = Search(cfg)
    got = search.predictions(records)
    keys = got.row_keys()
    capacity, margin, borderline = 80.0, 0.9, 0.1
    z = 1.6448536269514722
    peaks = [margin * capacity, (margin + borderline) * capacity, capacity / math.exp(-z * 0.05), float("nan"),
             capacity * 1.5, capacity * 0.5, capacity * 1.02]
    step, sd, tokens, _, _ = got.arrays()
    n = len(keys)
    peak = np.array([peaks[i % len(peaks)] for i in range(n)])
    mem_sd = np.where(np.arange(n) % 2 == 0, 0.05, 0.0)
    columns = Predictions(list(keys), step, sd, tokens, peak, mem_sd, 0)
    dicts = {k: dict(columns[k]) for k in keys}
    want = calibrated_ooms(records, dicts, capacity, margin, borderline)
    assert calibrated_ooms(records, columns, capacity, margin, borderline) == want and want
    assert len(want) < sum(r.state is TrialState.PLANNED for r in records)
