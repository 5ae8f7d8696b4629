"""launcher.run.view: the in-memory view of the ledger equals a full read of the file after any sequence of
writes, through its own connection (only the changed rows are read again) or another one (everything is)."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from launcher.core.record import TrialRecord
from launcher.core.states import TrialState
from launcher.run.ledger import Ledger
from launcher.run.view import LedgerView


def rec(key: str, pos: int) -> TrialRecord:
    return TrialRecord(key, pos, {"gpus": 2, "nodes": 1, "tp": 1, "pp": 1, "dp": 2, "mbs": 1 + pos % 4, "gbs": 8},
                       {"step_time_s": 1.0 + pos, "peak_mem_gb": 10.0})


STATES = (TrialState.PLANNED, TrialState.SUBMITTED, TrialState.RUNNING, TrialState.OK, TrialState.OOM,
          TrialState.PRUNED)


def random_write(rng: random.Random, led: Ledger, other: Ledger, keys: list[str]) -> None:
    """One of the writes the sweep makes: a state change, a batch, many rows, new trials, or another process."""
    key = rng.choice(keys)
    kind = rng.randrange(6)
    if kind == 0:
        led.update(key, "x", state=rng.choice(STATES), attempts=rng.randrange(3), metrics={"n": rng.random()})
    elif kind == 1:
        led.update_each([(k, "y", {"job_id": str(rng.randrange(99))}) for k in rng.sample(keys, 3)])
    elif kind == 2:
        led.update_many({k: {"calibrated": {"step_time_s": rng.random()}} for k in rng.sample(keys, 5)})
    elif kind == 3:
        new = f"n{len(keys)}"
        r = rec(new, rng.randrange(-5, 60))   # a repeat may sort anywhere by position
        led.add_trials([replace(r, repeat_of=rng.choice(keys)) if rng.random() < 0.5 else r])
        keys.append(new)
    elif kind == 4:   # another connection (python -m analysis re-judging, a second launcher's ledger handle)
        other.update(key, "z", state=rng.choice(STATES), reason=f"r{rng.random()}")
    # kind 5: nothing written: the view must not change


def test_the_view_equals_a_full_read_after_random_writes(tmp_path):
    rng = random.Random(19)
    path = tmp_path / "ledger.sqlite"
    with Ledger(path) as led, Ledger(path) as other:
        keys = [f"t{i}" for i in range(40)]
        led.add_trials([rec(k, i) for i, k in enumerate(keys)])
        view = LedgerView(led)
        for step in range(300):
            random_write(rng, led, other, keys)
            if rng.random() < 0.5:   # sometimes several writes between two reads
                continue
            full = led.trials()
            assert view.trials() == full, step
            wanted = {TrialState.PLANNED, TrialState.OOM}
            assert view.trials(wanted) == [r for r in full if r.state in wanted]
            assert view.count(wanted) == len(view.trials(wanted))
            assert view.ran() == [r for r in full if r.attempts]
            family = set(rng.sample(keys, 3))
            assert view.family(family) == [r for r in full if (r.repeat_of or r.config_hash) in family]
            assert view.counts() == {s: n for s in TrialState if (n := sum(r.state is s for r in full))}
            assert view.get(key := rng.choice(keys)) == led.get(key)


def test_the_view_reads_only_what_its_connection_changed(tmp_path):
    with Ledger(tmp_path / "ledger.sqlite") as led:
        led.add_trials([rec(f"t{i}", i) for i in range(10)])
        view = LedgerView(led)
        first = view.trials()
        led.update("t3", state=TrialState.OK)
        second = view.trials()
        assert second[3].state is TrialState.OK and second[3] is not first[3]
        assert all(a is b for i, (a, b) in enumerate(zip(first, second)) if i != 3)   # not decoded again


def test_every_trial_is_one_read_only_snapshot_until_a_row_changes(tmp_path):
    with Ledger(tmp_path / "ledger.sqlite") as led:
        led.add_trials([rec(f"t{i}", i) for i in range(4)])
        view = LedgerView(led)
        snap = view.trials()
        assert view.trials() is snap and snap == led.trials()
        with pytest.raises(TypeError, match="read-only"):
            snap.append(rec("x", 9))
        with pytest.raises(TypeError, match="read-only"):
            snap[0] = rec("x", 9)
        led.update("t1", "x", state=TrialState.OK)
        again = view.trials()
        assert again is not snap and again == led.trials() and snap[1].state is TrialState.PLANNED
