"""Ledger.add_trials' `inserted`: the new trials as the ledger holds them, equal (types included) to what reading
them back gives, so that a new sweep's view starts from them (launcher.run.view) instead of decoding 50k rows;
trials the ledger held already are not in it."""

from __future__ import annotations

import dataclasses

from launcher.core.record import TrialRecord
from launcher.core.states import PruneReason, TrialState
from launcher.plan.planner import make_plan
from launcher.run.ledger import Ledger
from launcher.run.loop import _each_record
from launcher.run.view import LedgerView

LAYOUT = {"gpus": 2, "nodes": 1, "tp": 1, "pp": 1, "dp": 2, "mbs": 1, "gbs": 8, "sequence_parallel": False}


def typed(r: TrialRecord) -> dict:
    return {f.name: (type(getattr(r, f.name)), getattr(r, f.name)) for f in dataclasses.fields(r)}


def test_inserted_trials_are_what_the_ledger_reads_back(tmp_path, load):
    cfg = load("+sweep=70b", "backend=torch", "cluster.nodes=8", "grid.nodes=[1,8]", "grid.tp=[2,8]",
               "grid.pp=[1,2,4]", "grid.mbs=[1,2]", "grid.gbs=[64,512]", "grid.zero_stage=[0,3]",
               "plan.keep_borderline=0.05", "plan.max_trials=0")
    plan = make_plan(cfg, features=True)
    assert plan.pruned, "the plan must hold pruned trials (their reason is an enum until stored)"
    inserted: list[TrialRecord] = []
    with Ledger(tmp_path / "ledger.sqlite") as led:
        assert led.add_trials(_each_record(plan), inserted=inserted) == len(inserted)
        back = led.trials()
        assert [typed(r) for r in inserted] == [typed(r) for r in back]
        assert any(r.pruned_by == PruneReason.PREDICTED_OOM for r in inserted)
        seeded, read = LedgerView(led, inserted), LedgerView(led)
        assert seeded.trials() == read.trials() == back
        led.update(back[0].config_hash, "x", state=TrialState.SUBMITTED, synced=True)   # then only what changes
        assert seeded.trials() == read.trials() == led.trials()


def test_only_the_new_trials_are_inserted(tmp_path):
    old = TrialRecord("a", 0, dict(LAYOUT), {"step_time_s": 1.0})
    new = TrialRecord("b", 1, dict(LAYOUT, mbs=2), {"step_time_s": 2.0}, state=TrialState.PRUNED,
                      pruned_by=PruneReason.PREDICTED_OOM, synced=1)  # type: ignore[arg-type]
    with Ledger(tmp_path / "ledger.sqlite") as led:
        led.add_trials([old])
        inserted: list[TrialRecord] = []
        assert led.add_trials([dataclasses.replace(old, selection="other"), new], inserted=inserted) == 1
        assert [typed(r) for r in inserted] == [typed(led.get("b"))]
        assert new.pruned_by is PruneReason.PREDICTED_OOM and new.synced == 1   # the caller's record as it was


def test_adopted_records_are_stored_in_place(tmp_path):
    """adopt=True: `inserted` holds the given records themselves (one object per trial), in their stored form."""
    new = TrialRecord("b", 1, dict(LAYOUT, mbs=2), {"step_time_s": 2.0}, state=TrialState.PRUNED,
                      pruned_by=PruneReason.PREDICTED_OOM, synced=1)  # type: ignore[arg-type]
    with Ledger(tmp_path / "ledger.sqlite") as led:
        inserted: list[TrialRecord] = []
        assert led.add_trials([new], inserted=inserted, adopt=True) == 1
        assert inserted[0] is new
        assert [typed(r) for r in inserted] == [typed(led.get("b"))]


def test_a_plans_records_share_their_batch_class_memory_breakdown(tmp_path, load):
    """A plan's records hold their batch class's memory breakdown dict (its layouts' estimates share it; a copy per
    trial was ~17 MB of a 50k-trial plan), as a ledger read shares it: a new sweep and a resumed one hold alike,
    and the rows hold each trial's own breakdown."""
    from launcher.plan.batch_class import batch_class

    cfg = load("+sweep=70b", "backend=torch", "cluster.nodes=8", "grid.nodes=[1,8]", "grid.tp=[2,8]",
               "grid.pp=[1,2,4]", "grid.mbs=[1,2]", "grid.gbs=[64,512]", "plan.keep_borderline=0.05",
               "plan.max_trials=0")
    plan = make_plan(cfg, features=True)
    records = list(_each_record(plan))
    by_class: dict = {}
    for r in records:
        by_class.setdefault(batch_class(r.layout), []).append(r.predicted["mem_breakdown_gb"])
    assert any(len(parts) > 1 for parts in by_class.values())
    assert all(p is parts[0] for parts in by_class.values() for p in parts)
    with Ledger(tmp_path / "ledger.sqlite") as led:
        led.add_trials(records)
        assert [r.predicted for r in led.trials()] == [r.predicted for r in records]
