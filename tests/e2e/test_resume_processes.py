"""Resume never doubles a trial: a real local sweep whose trials sleep instead of training (tests/fake_torchrun.py
stands in for torchrun: ranks in their own sessions, each leaving a double-forked helper), with the launcher killed
by SIGKILL at several points and started again, while a thread samples the process table every 0.2 s."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from conftest import REPO, run_launcher
from proc_table import Sampler, trial_processes

from launcher.run.interruption import NOT_COUNTED


def fake_python(tmp_path: Path) -> Path:
    """backend.python: the launch script execs it exactly as it would exec `python -m torch.distributed.run`."""
    path = tmp_path / "fake-python"
    path.write_text(f"#!/bin/sh\nexec {sys.executable} {REPO / 'tests' / 'fake_torchrun.py'} \"$@\"\n")
    path.chmod(0o755)
    return path


def sweep_args(tmp_path: Path, seconds: float) -> list[str]:
    return ["+sweep=tiny", "grid.gpus=[2]", "grid.zip=[]", "grid.tp=[1]", "grid.pp=[1]", "grid.mbs=[1,2,4]",
            "grid.gbs=[8]", "grid.include=[]", f"backend.python={fake_python(tmp_path)}",
            f"backend.extra_args=[--fake-seconds,{seconds}]", "executor.max_concurrent=2", "retry.max_attempts=1",
            "monitor.poll_interval_s=0.2", "tracking.enabled=false"]


def _query(work: Path, sql: str) -> list[tuple]:
    path = work / "sweeps" / "tiny" / "ledger.sqlite"
    if not path.exists():
        return []
    db = sqlite3.connect(path, timeout=30)
    try:
        return db.execute(sql).fetchall()
    except sqlite3.OperationalError:  # tables not created yet
        return []
    finally:
        db.close()


def states(work: Path) -> Counter:
    return Counter(row[0] for row in _query(work, "SELECT state FROM trials"))


def events(work: Path) -> Counter:
    """How many times trials entered each state, over the whole sweep (all launchers)."""
    return Counter(row[0] for row in _query(work, "SELECT state FROM events"))


def start_launcher(args: list[str], cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "launcher", *args], cwd=cwd, start_new_session=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)


def kill_when(proc: subprocess.Popen, ready, how: str, timeout_s: float = 120) -> None:
    deadline = time.time() + timeout_s
    while time.time() < deadline and proc.poll() is None and not ready():
        time.sleep(0.05)
    if proc.poll() is not None:
        # It reached the kill point and ended between two looks (on a loaded machine one look at the ledger can take
        # longer than the rest of the sweep): nothing left to kill, but it must have ended well. The test's end
        # still checks that no trial ran twice.
        assert proc.returncode == 0, f"the launcher to kill ({how}) ended by itself with exit {proc.returncode}"
        return
    if how == "group":  # the launcher and submitit's controllers (what `kill -9 -PGID` does)
        os.killpg(proc.pid, signal.SIGKILL)
    elif how == "ctrl-c":  # a terminal's Ctrl-C: SIGINT to the launcher and its controllers, which stop the trials
        os.killpg(proc.pid, signal.SIGINT)
    else:
        os.kill(proc.pid, signal.SIGKILL)
    proc.wait()


def test_a_killed_launcher_never_doubles_a_trial_and_leaves_nothing_behind(tmp_path):
    args = sweep_args(tmp_path, seconds=3)
    def more(state: str):  # a kill point: this launcher made `state` happen once more
        before = events(tmp_path)[state]
        return lambda: events(tmp_path)[state] > before

    kill_points = [  # (when, how): each launcher is killed, then the next one resumes
        (lambda: more("running"), "ctrl-c"),    # the trials it started are stopped with it (cancelled)
        (lambda: more("submitted"), "group"),   # in the middle of (re)submitting
        (lambda: more("running"), "launcher"),  # the launcher alone, its trials running
        (lambda: more("ok"), "group"),          # after a trial finished, others running
    ]
    with Sampler(tmp_path / "sweeps") as sampler:
        for when, how in kill_points:
            ready = when()
            kill_when(start_launcher(args, tmp_path), ready, how)
        final = run_launcher(*args, cwd=tmp_path, timeout_s=300)
    assert final.returncode == 0, final.stdout[-3000:] + final.stderr[-3000:]
    assert sampler.samples > 20 and sampler.max_copies, "the sampler saw no trial process"
    assert not sampler.doubles, sampler.doubles[:3]
    assert trial_processes(tmp_path / "sweeps") == {}, "processes left after the sweep ended"
    db = sqlite3.connect(tmp_path / "sweeps" / "tiny" / "ledger.sqlite")
    rows = db.execute("SELECT state, attempts, repeat_of FROM trials").fetchall()
    db.close()
    # retry.max_attempts=1: a trial interrupted by the launcher's death or cancelled by a Ctrl-C keeps its attempt,
    # so all still end ok: the 3 planned trials and the confirmation's repeats (analysis.confirm_top).
    assert [state for state, _, repeat_of in rows if not repeat_of] == ["ok"] * 3, rows
    assert all(state == "ok" and attempts == 1 for state, attempts, _ in rows), rows
    given_back = [d for (d,) in _query(tmp_path, "SELECT detail FROM events") if NOT_COUNTED in d]
    assert any("SIGINT" in d for d in given_back), given_back  # the Ctrl-C'd trials, cancelled, kept their attempt


@pytest.mark.slow
def test_sigterm_stops_and_records_the_trials_and_the_same_command_resumes(tmp_path):
    """`kill PID`, `timeout` and SLURM signal the launcher alone (not its local jobs' controllers, as a Ctrl-C
    does): the launcher stops its trials itself, records them as interrupted, says so in one line, exits 143."""
    args = sweep_args(tmp_path, seconds=4)
    proc = subprocess.Popen([sys.executable, "-m", "launcher", *args], cwd=tmp_path, start_new_session=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None and states(tmp_path)["running"] < 2:
        time.sleep(0.05)
    assert states(tmp_path)["running"] == 2, states(tmp_path)
    started = time.monotonic()
    os.kill(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    stop_s = time.monotonic() - started
    assert proc.returncode == 143, err[-3000:]
    assert err.strip().splitlines()[-1] == ("terminated by SIGTERM: 2 live trial(s) stopped and recorded as "
                                            "interrupted (their attempts not counted); run the same command again "
                                            "to resume"), err[-3000:]
    assert "Traceback" not in err
    assert stop_s < 20, stop_s  # inside SLURM's default KillWait (30 s)
    assert trial_processes(tmp_path / "sweeps") == {}, "trials left running unsupervised"
    rows = _query(tmp_path, "SELECT state, attempts, reason FROM trials")
    stopped = [(state, attempts) for state, attempts, reason in rows if reason.startswith(NOT_COUNTED)]
    assert stopped == [("cancelled", 0)] * 2, rows
    final = run_launcher(*args, cwd=tmp_path, timeout_s=300)
    assert final.returncode == 0, final.stdout[-3000:] + final.stderr[-3000:]
    rows = _query(tmp_path, "SELECT state, attempts FROM trials")
    assert rows and all(row == ("ok", 1) for row in rows), rows
