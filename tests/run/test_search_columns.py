"""The search's per-poll work on columns (issue 19: a poll of a 50k-trial plan under 0.5 s): the predictions kept as
columns (Predictions) with a dict made only for a trial asked for, the scheduler's inputs and the calibrated memory
rule read from those columns, and a repeated question answered without a pass over the trials. Each is checked
against the per-trial path it replaces, on the tiny sweep's real plan with several global batch sizes (so batch
classes hold several trials). The step times priced once per batch class: tests/run/test_feature_tables.py."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from launcher.core.states import TrialState
from launcher.plan.planner import make_plan
from launcher.run.loop import _records
from launcher.run.memory_prune import calibrated_ooms
from launcher.run.predictions import Predictions
from launcher.run.scheduler import POLICY
from launcher.run.search import Search
from launcher.run.search_records import estimated, outcomes


@pytest.fixture
def plan(load):
    cfg = load("+sweep=tiny", "grid.gbs=[8,16,32]")
    return cfg, _records(make_plan(cfg))


def measured(records, n: int = 5, factor: float = 1.5):
    """The n trials predicted to need the least memory measured `factor` x slower than predicted (the others
    are then not covered by a measured trial that fitted: the memory rule judges them)."""
    out = list(records)
    for i in sorted(range(len(out)), key=lambda i: out[i].predicted["peak_mem_gb"])[:n]:
        r = out[i]
        out[i] = replace(r, state=TrialState.OK, metrics={"step_time_s": factor * r.predicted["step_time_s"],
                                                          "peak_mem_gb": r.predicted["peak_mem_gb"]})
    return out


def per_trial_dicts(search: Search, records) -> dict[str, dict]:
    """Search.predictions as first written: a dict per estimated trial, from the table and corrected arrays."""
    from launcher.plan.residuals import corrected
    from launcher.run.search import checks

    trials = [r for r in records if estimated(r)]
    step, sd, peak, mem_sd = search._prediction(trials)
    measured_s = {i: float(r.metrics["step_time_s"]) for i, r in enumerate(trials)
                  if r.state.finished and r.metrics.get("step_time_s")}
    step, sd = corrected(step, [r.layout.to_dict() for r in trials], measured_s, checks=checks(records))
    seq_len = search.cfg.model.seq_len
    return {r.config_hash: {"step_time_s": s, "step_sd": d, "tokens_per_s": r.layout.gbs * seq_len / s,
                            "peak_mem_gb": p, "mem_sd": m, "n_fit": search.calibration.n_trials}
            for r, s, d, p, m in zip(trials, step.tolist(), sd.tolist(), peak.tolist(), mem_sd.tolist())}


def test_the_predictions_as_columns_are_the_per_trial_dicts(plan):
    cfg, records = plan
    records = measured(records)
    search = Search(cfg)
    search.refit(records)
    got = search.predictions(records)
    assert isinstance(got, Predictions) and search.calibration.applied
    fresh = Search(cfg)
    fresh.refit(records)
    assert dict(got) == per_trial_dicts(fresh, records)
    assert list(got) == [r.config_hash for r in records if estimated(r)] and len(got) == len(list(got))


def test_the_scheduler_inputs_and_the_memory_rule_read_the_columns_as_they_read_dicts(plan):
    cfg, records = plan
    records = measured(records, n=3)
    search = Search(cfg)
    search.refit(records)
    columns = search.predictions(records)
    dicts = {key: dict(p) for key, p in columns.items()}
    assert search.planned(records, columns) == search.planned(records, dicts)
    peaks = sorted(p["peak_mem_gb"] for p in dicts.values())
    for capacity_gb in (peaks[0] * 0.9, peaks[len(peaks) // 2], peaks[-1] * 2):   # some, half, none pruned
        assert calibrated_ooms(records, columns, capacity_gb, 0.9, 0.1) == \
            calibrated_ooms(records, dicts, capacity_gb, 0.9, 0.1)
    assert calibrated_ooms(records, columns, peaks[len(peaks) // 2], 0.9)     # the rule is exercised


def test_a_prediction_set_by_the_loop_is_the_one_read(plan):
    """The loop adds the trials the calibration brought back to the search's predictions (MutableMapping)."""
    cfg, records = plan
    search = Search(cfg)
    got = search.predictions(records)
    key = records[0].config_hash
    mine = {**got[key], "step_time_s": 123.0}
    got[key] = mine
    got["back"] = {"step_time_s": 1.0}
    assert got[key] is mine and got["back"] == {"step_time_s": 1.0} and "back" in got
    assert list(got)[-1] == "back" and len(got) == len(list(got))
    assert search.planned(records, got)[0].step_time_s == 123.0
    with pytest.raises(TypeError):
        del got[key]


def test_the_same_records_again_are_answered_without_a_pass_and_a_change_recomputes(plan):
    cfg, records = plan
    search = Search(cfg)
    first = search.predictions(records)
    assert search.predictions(list(records)) is first     # the same record objects, a new list
    assert search._outcomes(records) == outcomes(records) == []
    changed = measured(records, n=1)                      # one row replaced (as the view does)
    again = search.predictions(changed)
    fresh = Search(cfg)
    assert again is not first and dict(again) == dict(fresh.predictions(changed))
    assert search._outcomes(changed, "tokens_per_s") == outcomes(changed) and len(outcomes(changed)) == 1
    pruned = replace(changed[-1], state=TrialState.PRUNED)
    assert search.predictions([*changed[:-1], pruned]).get(pruned.config_hash) is None
    assert POLICY.residuals     # the spread of the fitted constants is not priced: the residual model's is used


def test_fewer_trials_after_a_prune_are_the_last_prediction_gathered_or_a_new_one(plan, monkeypatch):
    """The loop prunes between two questions of a poll: the remaining trials' predictions are the last ones
    gathered while their layouts keep every value the residual design has a column for (the posterior of a trial
    depends on the measured rows and the columns alone), predicted again when a value disappears; either way
    what a fresh search predicts for them."""
    from launcher.run import search as search_module

    cfg, records = plan
    records = measured(records)
    search = Search(cfg)
    search.refit(records)
    search.predictions(records)
    planned = [i for i, r in enumerate(records) if r.state is TrialState.PLANNED]
    calls = []
    real = search_module.corrected_for_pick
    monkeypatch.setattr(search_module, "corrected_for_pick", lambda *a, **k: calls.append(1) or real(*a, **k))

    def pruned(indices):
        return [replace(r, state=TrialState.PRUNED) if i in indices else r for i, r in enumerate(records)]

    def fresh(rs):
        other = Search(cfg)
        other.refit(rs)
        return dict(other.predictions(rs))

    def row(r):
        return {k: v for k, v in r.layout.to_dict().items() if k not in ("gbs", "nodes", "gpus")}

    twin = next(i for i in planned if sum(row(r) == row(records[i]) for r in records) > 1)
    fewer = pruned({twin})                                                       # its layout values all stay
    got = dict(search.predictions(fewer))
    assert not calls and got == fresh(fewer)                                      # gathered
    ran = [r.layout.to_dict() for r in records if r.state is not TrialState.PLANNED]
    dim, value = next((d, v) for i in planned for d, v in row(records[i]).items()
                      if all(x.get(d) != v for x in ran))                         # a value only planned trials have
    gone = pruned({i for i in planned if records[i].layout.to_dict().get(dim) == value})
    calls.clear()
    got = dict(search.predictions(gone))
    assert calls and got == fresh(gone)                                           # predicted again


@pytest.mark.parametrize("pick_floor", [False, True])
def test_the_pick_reads_the_spreads_without_the_miss_floor_the_rest_keeps_them(plan, monkeypatch, pick_floor):
    """Trials measured 1.5x slower than the search predicted them at +-5 %: the sweep's miss floor (log 1.5) is
    under every spread the ledger and the stop rule read; the pick (Policy.pick_floor False) reads the residual
    spreads without it, on the columns' path and on the per-trial path (a prediction the loop set keeps its own)."""
    from launcher.plan.residuals import ResidualModel, corrected
    from launcher.run import scheduler
    from launcher.run.search import checks

    cfg, records = plan
    records = [replace(r, calibrated={"step_time_s": r.predicted["step_time_s"], "step_sd": 0.05})
               if r.state is TrialState.OK else r for r in measured(records)]
    search = Search(cfg, policy=replace(POLICY, pick_floor=pick_floor))
    search.refit(records)
    got = search.predictions(records)
    step, sd, _, _, _ = got.arrays()
    assert np.all(sd >= np.log(1.5) - 1e-12) and np.all(got.pick_sd() <= sd)
    assert np.any(got.pick_sd() < np.log(1.5) - 0.1)                               # the floor decided some sds
    trials = [r for r in records if estimated(r)]
    raw, _, _, _ = search._prediction(trials)
    measured_s = {i: float(r.metrics["step_time_s"]) for i, r in enumerate(trials) if r.state is TrialState.OK}
    assert np.allclose(got.pick_sd(), corrected(raw, [r.layout.to_dict() for r in trials], measured_s,
                                                ResidualModel(miss_floor=False), checks=checks(records))[1])
    asked = []
    real = scheduler.order
    monkeypatch.setattr(scheduler, "order", lambda *a, **k: asked.append(k["pick_sd"]) or real(*a, **k))
    search.order(records)
    assert asked[-1] is None if pick_floor else asked[-1] is got.pick_sd()
    key = next(k for k in got.row_keys() if k not in {r.config_hash for r in records if r.state.finished})
    got[key] = {**got[key]}                                  # set by the loop: the per-trial path, its own sd
    search.order(records)
    if not pick_floor:
        rows = search.planned_columns(records, got)
        expect = [sd[got.row_keys().index(k)] if k == key else got.pick_sd()[got.row_keys().index(k)]
                  for k in rows.keys]
        assert np.allclose(asked[-1], expect)


def test_what_is_kept_per_place_follows_the_trials_when_the_places_change(plan):
    """Search keeps each trial's table row, static row and residual row id per place of the records (RecordFlags):
    other trials at the same places, a shorter list and a trial pruned must give a fresh Search's predictions."""
    cfg, records = plan
    records = measured(records)
    search = Search(cfg)
    search.refit(records)
    search.predictions(records)
    swapped = list(records)
    swapped[0], swapped[-1] = swapped[-1], swapped[0]     # the same length, other trials at two places
    pruned = [*swapped[1:4], replace(swapped[4], state=TrialState.PRUNED), *swapped[5:]]
    for now in (swapped, swapped[1:], pruned):
        search.refit(now)
        fresh = Search(cfg)
        fresh.refit(now)
        got, want = search.predictions(now), fresh.predictions(now)
        assert list(got) == list(want) and dict(got) == dict(want)
