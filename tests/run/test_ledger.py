import multiprocessing
import os
import signal

import pytest

from launcher.core.layout import Layout
from launcher.core.record import TrialRecord
from launcher.core.states import TrialState
from launcher.run.ledger import Ledger


def rec(h, pos=0, **kw):
    return TrialRecord(h, pos, {"gpus": 1, "nodes": 1, "tp": 1, "pp": 1, "dp": 1, "mbs": 1, "gbs": 8},
                       {"tokens_per_s": 10.0}, **kw)


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


# --- derived columns, the first release's format, files that are not ledgers ---------------------------------

import json
import sqlite3

from launcher.run.ledger import LedgerError

# The first release's trials table: the layout as one JSON column, where the job ran in `nodes`.
V1_TRIALS = """CREATE TABLE trials (config_hash TEXT PRIMARY KEY, position INTEGER NOT NULL, layout TEXT NOT NULL,
    predicted TEXT NOT NULL DEFAULT '{}', selection TEXT NOT NULL DEFAULT 'predicted', repeat_of TEXT NOT NULL DEFAULT '',
    state TEXT NOT NULL, job_id TEXT NOT NULL DEFAULT '', job_dir TEXT NOT NULL DEFAULT '', job_state TEXT NOT NULL
    DEFAULT '', exit_code INTEGER, job_error TEXT NOT NULL DEFAULT '', nodes TEXT NOT NULL DEFAULT '', attempts INTEGER
    NOT NULL DEFAULT 0, log_paths TEXT NOT NULL DEFAULT '[]', metrics TEXT NOT NULL DEFAULT '{}', failure_kind TEXT
    NOT NULL DEFAULT '', reason TEXT NOT NULL DEFAULT '', excluded_nodes TEXT NOT NULL DEFAULT '[]', mlflow_run_id
    TEXT NOT NULL DEFAULT '', synced INTEGER NOT NULL DEFAULT 0, submitted_at REAL NOT NULL DEFAULT 0, finished_at
    REAL NOT NULL DEFAULT 0, updated_at REAL NOT NULL);
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE events (id INTEGER PRIMARY KEY AUTOINCREMENT, ts REAL NOT NULL, config_hash TEXT NOT NULL,
    state TEXT NOT NULL, detail TEXT NOT NULL DEFAULT '');"""
V1_LAYOUT = {"gpus": 4, "nodes": 1, "tp": 2, "pp": 2, "dp": 1, "vpp": 1, "mbs": 2, "gbs": 8, "recompute": "full",
             "sequence_parallel": True, "zero_stage": 0, "distributed_optimizer": False}


def test_layout_dimensions_are_columns(tmp_path):
    with Ledger(tmp_path / "l.sqlite") as led:
        led.add_trials([rec("a")])
    db = sqlite3.connect(tmp_path / "l.sqlite")
    assert db.execute("SELECT gpus, tp, pp, dp, mbs, gbs, state FROM trials").fetchall() == [(1, 1, 1, 1, 1, 8, "planned")]


def test_a_first_release_ledger_is_converted_and_keeps_its_trials(tmp_path):
    path = tmp_path / "l.sqlite"
    db = sqlite3.connect(path)
    db.executescript(V1_TRIALS)
    db.execute("INSERT INTO trials(config_hash, position, layout, state, nodes, metrics, reason, attempts, updated_at) "
               "VALUES('h1', 0, ?, 'ok', 'n[1-2]', '{\"tokens_per_s\": 5.0}', '', 1, 1.0)", (json.dumps(V1_LAYOUT),))
    db.execute("INSERT INTO trials(config_hash, position, layout, state, reason, updated_at) VALUES('h2', 1, ?, "
               "'pruned', 'predicted_oom: 90.1 GB > 90% of 80 GB', 1.0)", (json.dumps({**V1_LAYOUT, "mbs": 8}),))
    db.commit()
    db.close()
    with Ledger(path) as led:
        ok, pruned = led.trials()
        assert ok.layout == Layout.from_dict(V1_LAYOUT) and ok.node_list == "n[1-2]" and ok.attempts == 1
        assert ok.state is TrialState.OK and ok.metrics == {"tokens_per_s": 5.0}
        assert pruned.pruned_by == "predicted_oom" and pruned.layout.mbs == 8
        assert led.integrity_ok()
    with Ledger(path) as led:  # converted once: opening it again changes nothing
        assert len(led.trials()) == 2


@pytest.mark.parametrize("content", [b"not a database at all" * 100, b""])
def test_a_corrupt_ledger_is_a_clear_error(tmp_path, content):
    path = tmp_path / "l.sqlite"
    path.write_bytes(content)
    if content:
        with pytest.raises(LedgerError, match="not a usable parasweep ledger"):
            Ledger(path)
    else:  # an empty file is a new ledger
        Ledger(path).close()


def test_another_program_s_sqlite_file_is_refused(tmp_path):
    path = tmp_path / "l.sqlite"
    sqlite3.connect(path).execute("CREATE TABLE songs (title TEXT)").connection.commit()
    with pytest.raises(LedgerError, match="another program's sqlite file"):
        Ledger(path)


def test_analysis_never_creates_a_ledger(tmp_path):
    with pytest.raises(LedgerError, match="does not exist"):
        Ledger(tmp_path / "l.sqlite", create=False)
    assert not (tmp_path / "l.sqlite").exists()


def test_a_ledger_without_the_search_columns_opens_and_gains_them(tmp_path):
    """A ledger written before the search (no `calibrated` column, no stopped_early state) opens, keeps its trials
    and takes the new fields."""
    path = tmp_path / "l.sqlite"
    with Ledger(path) as led:
        led.add_trials([rec("a"), rec("b")])
        led.update("a", state="ok", metrics={"tokens_per_s": 5.0})
    db = sqlite3.connect(path)
    db.execute("ALTER TABLE trials DROP COLUMN calibrated")
    db.commit()
    db.close()
    with Ledger(path) as led:
        a, b = led.trials()
        assert a.state is TrialState.OK and a.metrics == {"tokens_per_s": 5.0} and a.calibrated == {}
        led.update_many({"b": {"calibrated": {"step_time_s": 1.5, "n_fit": 3}}})
        led.update("b", "stopped early", state="stopped_early")
        assert led.get("b").calibrated == {"step_time_s": 1.5, "n_fit": 3} and led.get("b").state.finished


def test_update_many_changes_no_state(tmp_path):
    with Ledger(tmp_path / "l.sqlite") as led:
        led.add_trials([rec("a")])
        with pytest.raises(ValueError, match="no state"):
            led.update_many({"a": {"state": "ok"}})


def test_update_each_writes_all_or_none_and_journals_each(tmp_path):
    with Ledger(tmp_path / "l.sqlite") as led:
        led.add_trials([rec("a"), rec("b", 1)])
        led.update_each([("a", "attempt 1", {"state": "submitted", "attempts": 1}), ("b", "job 7", {"job_id": "7"})])
        assert led.get("a").state is TrialState.SUBMITTED and led.get("b").job_id == "7"
        assert [e["detail"] for e in led.events()][-2:] == ["attempt 1", "job 7"]
        with pytest.raises(ValueError, match="unknown state"):
            led.update_each([("a", "", {"state": "ok"}), ("b", "", {"state": "exploded"})])
        assert led.get("a").state is TrialState.SUBMITTED   # the first of a refused batch is not written either


def test_a_bulk_add_and_a_read_by_state_match_the_trial_by_trial_ledger(tmp_path):
    """add_trials writes a plan in one statement and Ledger.trials(states) filters in sqlite: the same rows, events
    and records as one INSERT OR IGNORE per trial and a filter in Python (a hash twice in one call: added once)."""
    import random

    rng = random.Random(3)
    records = [rec(f"h{i}", i, state=rng.choice(["planned", "pruned"]), selection=rng.choice(["predicted", "band"]),
                   evidence=[{"file": "x.log", "line": i, "text": "t"}] if i % 3 else [],
                   metrics={"tokens_per_s": float(i)} if i % 2 else {}, synced=bool(i % 2), exit_code=i % 4 or None)
               for i in range(60)]
    with Ledger(tmp_path / "l.sqlite") as led:
        assert led.add_trials([*records[:30], records[5]]) == 30
        assert led.add_trials(records) == 30
        assert [e["detail"] for e in led.events()] == ["added"] * 60
        assert [e["config_hash"] for e in led.events()] == [r.config_hash for r in records]
        read = led.trials()
        assert [(r.config_hash, r.state, r.selection, r.evidence, r.metrics, r.synced, r.exit_code, r.layout)
                for r in read] == [(r.config_hash, r.state, r.selection, r.evidence, r.metrics, r.synced,
                                    r.exit_code, r.layout) for r in records]
        assert led.trials(["pruned"]) == [r for r in read if r.state is TrialState.PRUNED]
        assert led.get("h7") == read[7]
        assert sorted(led.get_many(["h2", "h1"]), key=lambda r: r.position) == read[1:3]


def test_records_read_back_share_their_json_keys_and_equal_json_loads(tmp_path):
    """Ledger._loads interns the decoded objects' keys: two trials' predictions share their key strings (a resumed
    50k-trial sweep held a copy of every name per trial), nested ones too, and the values are json.loads' (a
    repeated key: its first place, its last value)."""
    predicted = {"peak_mem_gb": 50.5, "mem_breakdown_gb": {"weights": 1.0, "grads": 2.0}, "tokens_per_s": 10.0}
    with Ledger(tmp_path / "l.sqlite") as led:
        led.add_trials([TrialRecord(h, i, rec(h).layout, dict(predicted)) for i, h in enumerate("ab")])
        text = '{"x": 1, "y": [{"k": 2}], "x": 3}'
        led._db.execute("UPDATE trials SET metrics = ? WHERE config_hash = 'b'", (text,))
        a, b = led.trials()
    assert a.predicted == b.predicted == predicted
    assert list(b.metrics.items()) == list(json.loads(text).items())
    for key_a, key_b in zip(a.predicted, b.predicted):
        assert key_a is key_b
    assert next(iter(a.predicted["mem_breakdown_gb"])) is next(iter(b.predicted["mem_breakdown_gb"]))


def test_a_read_shares_one_memory_breakdown_per_exact_content(tmp_path):
    """Ledger reads keep one `mem_breakdown_gb` dict per distinct content (trials of a batch class hold the same:
    ~25 MB of a resumed 50k-trial sweep) and give it to every record holding it, and one float object for the time
    breakdown's 0.0 terms; exact: 1, 1.0 and True, 0.0 and -0.0 never merge, and every prediction writes back as
    its row's JSON text."""
    parts = [{"weights": 1.0, "gathered": 0.0}, {"weights": 1.0, "gathered": 0.0}, {"weights": 1.0, "gathered": -0.0},
             {"weights": 1, "gathered": 0.0}, {"weights": True, "gathered": 0.0}, {"gathered": 0.0, "weights": 1.0}]
    with Ledger(tmp_path / "l.sqlite") as led:
        led.add_trials([TrialRecord(f"h{i}", i, rec(f"h{i}").layout, {
            "step_time_s": 1.0, "mem_breakdown_gb": p, "time_breakdown_s": {"bubble": 0.0, "cp": -0.0, "dp": 0}})
            for i, p in enumerate(parts)])
        texts = [row[0] for row in led._db.execute("SELECT predicted FROM trials ORDER BY position")]
        read = led.trials()
        again = led.trials()
    got = [r.predicted["mem_breakdown_gb"] for r in read]
    assert got[0] is got[1] is again[0].predicted["mem_breakdown_gb"]
    assert len({id(p) for p in got}) == 5
    assert [json.dumps(r.predicted) for r in read] == texts
    assert [list(map(type, p.values())) for p in got] == [list(map(type, p.values())) for p in parts]
    assert read[0].predicted is not read[1].predicted       # only the part is shared, the prediction is the trial's
    times = [r.predicted["time_breakdown_s"] for r in read]
    assert times[0] is not times[1] and times[0]["bubble"] is times[1]["bubble"]   # a zero term: one float object
    assert [list(map(type, t.values())) for t in times] == [[float, float, int]] * len(parts)
