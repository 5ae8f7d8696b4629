"""The MLflow store is created once, under a lock, never half-made; a half-made one is moved aside (issue 19, case 1
and the store half of case 6)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from analysis.report.tracking import Tracker
from analysis.report.tracking_link import TrackingLink, sweep_tracking_uri
from analysis.report.tracking_store import absolute_uri, ready_store, store_lock
from launcher.core.console import Reporter
from launcher.core.record import TrialRecord
from launcher.core.states import TrialState
from launcher.run.folder import SweepFolder
from launcher.run.ledger import Ledger

REPO = Path(__file__).resolve().parents[2]
OPEN = ("import sys; from analysis.report.tracking import Tracker; "
        "t = Tracker.connect(sys.argv[1], sys.argv[2]); print('experiment', t.experiment_id, flush=True)")


def revision(db: Path) -> str:
    with sqlite3.connect(db) as con:
        return con.execute("SELECT version_num FROM alembic_version").fetchone()[0]


def tables(db: Path) -> set[str]:
    with sqlite3.connect(db) as con:
        return {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def opener(uri: str, experiment: str, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", OPEN, uri, experiment], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})


@pytest.fixture(scope="module")
def head_store(tmp_path_factory) -> Path:
    """A store made by this MLflow, once for the module (creating one takes seconds)."""
    db = tmp_path_factory.mktemp("head") / "mlflow.db"
    with store_lock(db):
        assert ready_store(db) == ""
    return db


def test_a_store_left_half_made_is_moved_aside_and_a_new_one_created(head_store, tmp_path):
    db = tmp_path / "mlflow.db"
    db.write_bytes(head_store.read_bytes())
    with sqlite3.connect(db) as con:  # what a kill in the middle of MLflow's migrations leaves
        con.execute("UPDATE alembic_version SET version_num = 'df50e92ffc5e'")
        con.execute("CREATE TABLE _alembic_tmp_tags (x INTEGER)")
    tracker = Tracker.connect(f"sqlite:///{db}", "exp")
    (kept,) = tmp_path.glob("mlflow.db.broken-*")
    assert "moved aside" in tracker.note.lower() and kept.name in tracker.note
    assert revision(db) == revision(head_store) and "_alembic_tmp_tags" not in tables(db)
    assert "_alembic_tmp_tags" in tables(kept)  # nothing of it lost
    parent = tracker.parent_run("s", "u", "", params={}, tags={})
    assert tracker.client.get_run(parent).info.run_name == "sweep s"


def test_a_healthy_store_is_used_as_it_is(head_store, tmp_path):
    db = tmp_path / "mlflow.db"
    db.write_bytes(head_store.read_bytes())
    before = db.stat().st_ino
    tracker = Tracker.connect(f"sqlite:///{db}", "exp")
    assert tracker.note == "" and db.stat().st_ino == before and not list(tmp_path.glob("*.broken-*"))


def test_what_a_killed_creator_left_is_removed_and_the_store_created_whole(tmp_path):
    db = tmp_path / "mlflow.db"
    (tmp_path / "mlflow.db.creating-dead").write_bytes(b"SQLite format 3\0 half")  # a creator killed mid-way
    tracker = Tracker.connect(f"sqlite:///{db}", "exp")
    assert tracker.note == "" and not list(tmp_path.glob("*.creating-*")) and "runs" in tables(db)


def test_a_busy_store_is_never_taken_for_a_broken_one(head_store, tmp_path, monkeypatch):
    """Not being able to copy the store (locked by a writer) is not a schema problem: it stays where it is."""
    from analysis.report import tracking_store

    monkeypatch.setattr(tracking_store, "COPY_BUSY_WAIT_S", 0.1)
    db = tmp_path / "mlflow.db"
    db.write_bytes(head_store.read_bytes())
    with sqlite3.connect(db) as con:
        con.execute("UPDATE alembic_version SET version_num = 'df50e92ffc5e'")
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        with pytest.raises(OSError, match="cannot copy"), store_lock(db):
            ready_store(db)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert db.exists() and not list(tmp_path.glob("*.broken-*"))


def test_the_store_of_a_sweep_is_the_same_from_any_working_directory(load, tmp_path, monkeypatch):
    cfg = load("+sweep=tiny")
    first, other = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    other.mkdir()
    with Ledger(tmp_path / "ledger.sqlite") as ledger:
        monkeypatch.chdir(first)
        assert sweep_tracking_uri(cfg, ledger) == f"sqlite:///{first / 'mlflow.db'}"
        monkeypatch.chdir(other)  # a resume from elsewhere: the same store
        assert sweep_tracking_uri(cfg, ledger) == f"sqlite:///{first / 'mlflow.db'}"
        moved = load("+sweep=tiny", "tracking.uri=sqlite:///elsewhere.db")  # a deliberate move is followed
        assert sweep_tracking_uri(moved, ledger) == f"sqlite:///{other / 'elsewhere.db'}"
    assert absolute_uri("http://h:5000") == "http://h:5000"


def test_a_replaced_store_gets_every_trial_again(load, tmp_path, in_tmp):
    cfg = load("+sweep=tiny", f"tracking.uri=sqlite:///{tmp_path / 'mlflow.db'}")
    folder = SweepFolder(tmp_path / "sweeps" / "tiny")
    with Ledger(folder.ledger) as ledger:
        ledger.add_trials([TrialRecord("a", 0, {"gpus": 1, "nodes": 1, "tp": 1, "pp": 1, "dp": 1, "mbs": 1,
                                                       "gbs": 1}, state=TrialState.OK,
                                       metrics={"tokens_per_s": 1.0})])
        link = TrackingLink.open(cfg, ledger, folder, Reporter.quiet())
        link.sync_pending()
        assert ledger.get("a").synced
        (tmp_path / "mlflow.db").rename(tmp_path / "old.db")  # replaced by hand
        TrackingLink.open(cfg, ledger, folder, Reporter.quiet())
        assert not ledger.get("a").synced and ledger.get("a").mlflow_run_id == ""


@pytest.mark.slow
def test_three_processes_creating_one_store_at_once_all_get_it(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    procs = [opener(uri, f"s{n}", tmp_path) for n in "ABC"]
    outputs = [p.communicate(timeout=600)[0] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], outputs
    assert sorted(o.split("experiment ")[1].split()[0] for o in outputs) == ["1", "2", "3"]


@pytest.mark.slow
def test_a_process_killed_while_creating_the_store_leaves_none_half_made(tmp_path):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    first = opener(uri, "x", tmp_path)
    seen = ""
    while first.poll() is None and "Updating database tables" not in seen:
        seen += first.stdout.readline()
    time.sleep(0.3)
    first.send_signal(signal.SIGKILL)
    first.wait()
    again = opener(uri, "x", tmp_path)
    out = again.communicate(timeout=600)[0]
    assert again.returncode == 0 and "experiment 1" in out, out
    assert not list(tmp_path.glob("*.broken-*"))  # nothing half-made to move aside
