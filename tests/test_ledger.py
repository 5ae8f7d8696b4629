import multiprocessing
import os
import signal

import pytest

from launcher.run.ledger import Ledger, TrialRecord


def rec(h, pos=0, **kw):
    return TrialRecord(h, pos, {"tp": 1, "pp": 1, "dp": 1, "mbs": 1, "gbs": 8}, {"tokens_per_s": 10.0}, **kw)


def test_add_is_idempotent_and_keeps_existing_state(tmp_path):
    with Ledger(tmp_path / "l.sqlite") as led:
        assert led.add_trials([rec("a"), rec("b", 1)]) == 2
        led.update("a", state="ok", metrics={"tokens_per_s": 5.0})
        assert led.add_trials([rec("a"), rec("b", 1), rec("c", 2)]) == 1
        assert [r.state for r in led.trials()] == ["ok", "planned", "planned"]
        assert led.get("a").metrics == {"tokens_per_s": 5.0}


def test_update_journals_state_changes(tmp_path):
    with Ledger(tmp_path / "l.sqlite") as led:
        led.add_trials([rec("a")])
        led.update("a", "attempt 1", state="submitted", attempts=1, job_id="42")
        led.update("a", state="ok")
        assert [e["state"] for e in led.events("a")] == ["planned", "submitted", "ok"]
        assert led.get("a").attempts == 1 and led.get("a").job_id == "42"


def test_rejects_unknown_fields_and_states(tmp_path):
    with Ledger(tmp_path / "l.sqlite") as led:
        led.add_trials([rec("a")])
        with pytest.raises(ValueError, match="unknown state"):
            led.update("a", state="exploded")
        with pytest.raises(ValueError, match="unknown trial fields"):
            led.update("a", colour="red")


def test_reopen_sees_committed_data(tmp_path):
    path = tmp_path / "l.sqlite"
    with Ledger(path) as led:
        led.add_trials([rec("a")])
        led.set_meta("parent", "r1")
        led.update("a", state="running", log_paths=["x.log"])
    with Ledger(path) as led:
        assert led.get_meta("parent") == "r1"
        assert led.get("a").log_paths == ["x.log"] and led.get("a").state == "running"


def _hammer(path, n):
    led = Ledger(path)
    for i in range(n):
        led.update("a", state="running" if i % 2 else "submitted", attempts=i)


def test_sigkill_mid_write_leaves_a_consistent_ledger(tmp_path):
    path = tmp_path / "l.sqlite"
    with Ledger(path) as led:
        led.add_trials([rec("a")])
    proc = multiprocessing.get_context("fork").Process(target=_hammer, args=(path, 100000))
    proc.start()
    import time

    deadline = time.time() + 60
    while time.time() < deadline:  # kill it mid-stream, once it has committed a few updates
        with Ledger(path) as led:
            if len(led.events("a")) >= 5:
                break
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGKILL)
    proc.join()
    with Ledger(path) as led:
        assert led.integrity_ok()
        r = led.get("a")
        # The last committed update is whole: state and attempts were written together.
        assert r.state == ("running" if r.attempts % 2 else "submitted")
        events = led.events("a")
        assert len(events) >= 2
