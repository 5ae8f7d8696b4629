"""Process ownership end to end on the real workload (torchrun + torch ranks) and on the real local SLURM cluster.

Slow: `python -m pytest -m slow tests/e2e/test_e2e_processes.py`.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, run_launcher
from proc_table import Sampler, trial_processes

pytestmark = pytest.mark.slow

ONE_TRIAL = ["+sweep=tiny", "grid.gpus=[2]", "grid.zip=[]", "grid.tp=[1]", "grid.pp=[2]", "grid.mbs=[1]",
             "grid.include=[]", "tracking.enabled=false", "retry.max_attempts=1",
             "analysis.confirm_top=0"]  # one trial, no confirmation runs


def rows(work: Path) -> list[dict]:
    path = work / "sweeps" / "tiny" / "ledger.sqlite"
    if not path.exists():
        return []
    db = sqlite3.connect(path, timeout=30)
    db.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in db.execute("SELECT * FROM trials ORDER BY position")]
    except sqlite3.OperationalError:
        return []
    finally:
        db.close()


def test_a_hanging_trial_is_stopped_at_its_time_limit_with_every_process(tmp_path):
    # executor.timeout_min=1: the keeper stops the trial at 60 - 30 s (submitit's warning time); the hang monitor
    # is set far later so that the time limit is what ends it.
    args = [*ONE_TRIAL, "executor.timeout_min=1", "monitor.hang_timeout_min=30",
            "backend.extra_args=[--fault,hang]"]
    with Sampler(tmp_path / "sweeps") as sampler:
        proc = run_launcher(*args, cwd=tmp_path, timeout_s=400)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]  # no ok trial
    (row,) = rows(tmp_path)
    assert row["failure_kind"] == "time_limit", row
    assert sampler.max_copies and max(sampler.max_copies.values()) == 1
    assert trial_processes(tmp_path / "sweeps") == {}, "processes of the stopped trial are still alive"
    keeper = json.loads(next((tmp_path / "sweeps" / "tiny" / "jobs").glob("*/*_keeper.json")).read_text())
    assert keeper["stopped"]["why"] == "time_limit" and keeper["stopped"]["killed"] >= 1, keeper


def test_real_workload_survives_a_killed_launcher_and_is_reattached(tmp_path):
    """killpg(SIGKILL) of the launcher while torchrun's ranks run: the trial keeps running under its keeper, the new
    launcher follows it to its end (one attempt, one copy), and nothing is left afterwards."""
    # 40 measured steps (~20 s on this CPU): the kill lands while the ranks train, however late the launcher's poll
    # marks the trial running (a 4-step trial can end within seconds of that under a loaded machine).
    args = [*ONE_TRIAL, "backend.measure_iters=40"]
    launcher = subprocess.Popen([sys.executable, "-m", "launcher", *args], cwd=tmp_path, start_new_session=True,
                                env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
    with Sampler(tmp_path / "sweeps") as sampler:
        deadline = time.time() + 300
        while time.time() < deadline and not (any(r["state"] == "running" for r in rows(tmp_path))
                                              and ranks_up(tmp_path / "sweeps")):
            time.sleep(0.2)
        assert ranks_up(tmp_path / "sweeps"), "the trial's ranks did not start"
        os.killpg(launcher.pid, signal.SIGKILL)
        launcher.wait()
        assert trial_processes(tmp_path / "sweeps"), "the trial died with the launcher"
        rerun = run_launcher(*args, cwd=tmp_path, timeout_s=400)
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    (row,) = rows(tmp_path)
    assert row["state"] == "ok" and row["attempts"] == 1, row
    assert not sampler.doubles and trial_processes(tmp_path / "sweeps") == {}


def ranks_up(root: Path, ranks: int = 2) -> bool:
    """The trial's script, torchrun and its ranks carry the trial marker (its environment): `ranks` more than the
    script and torchrun means ranks have started, and the keeper, which left the launcher's session before it started
    the script, is up."""
    return len(sum(trial_processes(root).values(), [])) >= 2 + ranks


# -- SLURM: what the job step does, and what the keeper adds ---------------------------------------------------
TREE = """\
sleep 300 &
setsid sleep 301 &
( setsid bash -c 'sleep 302 &' & )
sleep 303
"""


@pytest.mark.slurm
def test_scancel_kills_every_process_of_a_slurm_trial(slurm_env, tmp_path, monkeypatch):
    """The local cluster tracks a step's processes with proctrack/linuxproc (by parentage): a double-forked daemon
    (re-parented to init) escapes it. Under the keeper (a subreaper) it is re-parented to the keeper instead, so
    scancel reaches it."""
    from submitit.slurm.slurm import SlurmExecutor

    from launcher.run.jobside import run_trial

    for key, value in slurm_env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    script = tmp_path / "trial.sh"
    script.write_text(TREE)
    executor = SlurmExecutor(folder=str(tmp_path / "jobs" / "%j"), max_num_timeout=0)
    executor.update_parameters(nodes=1, ntasks_per_node=1, time=5, job_name="parasweep-test")
    job = executor.submit(run_trial, str(script))
    deadline = time.time() + 120
    while time.time() < deadline and len(sum(trial_processes(tmp_path).values(), [])) < 5:
        time.sleep(0.2)
    assert len(sum(trial_processes(tmp_path).values(), [])) >= 5, "the trial did not start"
    subprocess.run(["scancel", str(job.job_id)], check=True, env={**os.environ, **slurm_env})
    deadline = time.time() + 60
    while time.time() < deadline and trial_processes(tmp_path):
        time.sleep(0.5)
    assert trial_processes(tmp_path) == {}, "processes of the cancelled trial are still alive"
