"""End to end on a real SLURM cluster (tests/slurm/localcluster.sh: 2 nodes, slurmdbd, fake GPUs).

Slow; needs root and the Debian slurm packages (the fixture installs and starts the cluster):
`python -m pytest -m slurm tests/e2e/test_e2e_slurm.py`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from conftest import REPO, run_launcher
from test_e2e_local import SMALL, assert_oom_judged_from_the_allocator_line, child_runs, ledger_events, ledger_rows

pytestmark = [pytest.mark.slow, pytest.mark.slurm]

# The probes (plan.network_probe, plan.compute_probe) are on by default with executor=slurm: each is a job of its own
# before the trials. Tests whose point is the trials switch them off; the probes as jobs are asserted in
# test_tiny_sweep_on_slurm_matches_the_local_record (network) and tests/e2e/test_e2e_compute_probe.py (compute).
NO_PROBES = ["plan.network_probe=false", "plan.compute_probe=false"]


def slurm(args: list[str], env: dict) -> str:
    return subprocess.run(args, env={**os.environ, **env}, capture_output=True, text=True, check=True).stdout


def sacct_states(env: dict, job_ids: list[str]) -> dict[str, str]:
    out = slurm(["sacct", "-X", "-n", "--parsable2", "-o", "JobID,State", "-j",
                 ",".join(sorted({j.split("_")[0] for j in job_ids}))], env)
    return {line.split("|")[0]: line.split("|")[1].split()[0] for line in out.splitlines() if "|" in line}


def parent_run(uri: str, experiment: str = "tiny"):
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    runs = client.search_runs([client.get_experiment_by_name(experiment).experiment_id], max_results=1000)
    return next(r for r in runs if "mlflow.parentRunId" not in r.data.tags)


def test_tiny_sweep_on_slurm_matches_the_local_record(slurm_env, tiny_sweep, tmp_path):
    # cluster.nodes=2: the network probe (plan.network_probe, on by default with executor=slurm) spans both nodes.
    # plan.compute_probe=false: the local record it is compared with has no compute probe either.
    proc = run_launcher(*SMALL, "executor=slurm", "cluster.nodes=2", "plan.compute_probe=false", cwd=tmp_path,
                        env=slurm_env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = ledger_rows(tmp_path)
    states = Counter(r["state"] for r in rows)
    assert states["ok"] >= 3 and states["oom"] >= 1, states
    job_ids = [r["job_id"] for r in rows]
    assert any("_" in j for j in job_ids)  # a wave of several trials is one array: its tasks are e.g. 57_1
    assert len({j.split("_")[0] for j in job_ids}) > 1  # waves of what 2 nodes run at once, not one array
    assert set(sacct_states(slurm_env, job_ids)) >= set(job_ids)
    slurm_children = child_runs(f"sqlite:///{tmp_path / 'mlflow.db'}")
    local_children = child_runs(f"sqlite:///{tiny_sweep[0] / 'mlflow.db'}")
    assert len(slurm_children) == len(rows)
    s_ok = next(c for c in slurm_children if c.data.tags["status"] == "ok")
    l_ok = next(c for c in local_children if c.data.tags["status"] == "ok")
    assert set(s_ok.data.params) == set(l_ok.data.params)
    # calibrated_* and *_vs_calibrated_pct metrics exist only for trials submitted after the calibration applied,
    # which depends on how the waves fell on each executor
    def uncalibrated(metrics: dict) -> set:
        return {name for name in metrics if not name.startswith("calibrated_") and "_vs_calibrated" not in name}

    assert uncalibrated(s_ok.data.metrics) == uncalibrated(l_ok.data.metrics)
    assert set(s_ok.data.tags) - {"mlflow.user"} >= set(l_ok.data.tags) - {"mlflow.user", "parasweep.best",
                                                                          "mlflow.note.content"}  # the winner's
    # The network probe ran as a job across both nodes, inside each node and between them, and the sweep used it.
    probe = json.loads((tmp_path / "sweeps" / "tiny" / "netbench-local-cpu-2n.json").read_text())
    assert probe["nodes"] == 2 and sorted(probe["hosts"]) == ["n1", "n2"], probe["hosts"]
    assert probe["summary"]["inter_node_gbytes_per_s"] > 0 and probe["summary"]["intra_node_gbytes_per_s"] > 0
    assert {m["scope"] for m in probe["measurements"]} == {"intra_node", "inter_node"}
    assert "inter-node" in proc.stdout + proc.stderr
    parent = parent_run(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert parent.data.metrics["network_inter_node_gbytes_per_s"] == pytest.approx(  # logged to 6 significant
        probe["summary"]["inter_node_gbytes_per_s"], rel=1e-5)                        # digits (tracking.py)
    # The OOM trial's SLURM job folder (jobs/<array job>_<task>/) is judged like the local one.
    assert_oom_judged_from_the_allocator_line(tmp_path, f"sqlite:///{tmp_path / 'mlflow.db'}")


def _single_process_losses(layout: dict, tmp_path: Path) -> list[float]:
    args = ["--layers", "4", "--hidden", "256", "--heads", "4", "--kv-heads", "4", "--ffn-hidden", "1024",
            "--seq-len", "128", "--vocab", "1024", "--tp", "1", "--pp", "1", "--dp", "1", "--mbs", str(layout["mbs"]),
            "--gbs", str(layout["gbs"]), "--warmup-iters", "2", "--measure-iters", "4", "--seed", "1234",
            "--precision", "fp32"]
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1",
                           "-m", "launcher.workload", *args], cwd=tmp_path, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    line = next(l for l in proc.stdout.splitlines() if l.startswith("PARASWEEP_RESULT"))
    return json.loads(line.split(" ", 1)[1])["losses"]


def test_two_node_trial_matches_single_process(slurm_env, tmp_path):
    args = ["+sweep=tiny", "executor=slurm", "cluster.nodes=2", "cluster.gpus_per_node=2", "grid.gpus=null",
            "grid.nodes=[2]", "grid.zip=[]", "grid.tp=[2]", "grid.pp=[2]", "grid.mbs=[1]", "grid.include=[]",
            "tracking.enabled=false", "analysis.confirm_top=0", *NO_PROBES]  # one trial, no confirmation runs
    proc = run_launcher(*args, cwd=tmp_path, env=slurm_env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (row,) = ledger_rows(tmp_path)
    assert row["state"] == "ok" and row["node_list"] == "n[1-2]"
    assert (row["nodes"], row["tp"], row["pp"], row["dp"]) == (2, 2, 2, 1)
    logs = "\n".join((tmp_path / p).read_text() for p in json.loads(row["log_paths"]))  # relative to the cwd
    result = json.loads(next(l for l in logs.splitlines() if l.startswith("PARASWEEP_RESULT")).split(" ", 1)[1])
    assert result["world_size"] == 4
    reference = _single_process_losses(row, tmp_path)
    assert len(result["losses"]) == len(reference)
    assert max(abs(a - b) for a, b in zip(result["losses"], reference)) < 1e-4


def test_scancel_half_and_kill_the_launcher_then_resume(slurm_env, tmp_path):
    args = [*SMALL, "executor=slurm", "executor.max_concurrent=1", "executor.queue_all=true",  # every job id at once
            *NO_PROBES]
    env = {**os.environ, "PYTHONPATH": str(REPO), **slurm_env}
    launcher = subprocess.Popen([sys.executable, "-m", "launcher", *args], cwd=tmp_path, env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    ledger = tmp_path / "sweeps" / "tiny" / "ledger.sqlite"
    deadline = time.time() + 300
    while time.time() < deadline:
        rows = ledger_rows(tmp_path) if ledger.exists() else []
        if rows and all(r["job_id"] for r in rows) and any(r["state"] == "running" for r in rows):
            break
        time.sleep(0.5)
    else:
        raise AssertionError("jobs were not all submitted")
    jobs = sorted(r["job_id"] for r in rows)
    victims = jobs[: len(jobs) // 2]
    subprocess.run(["scancel", *victims], env=env, check=True)
    os.killpg(launcher.pid, signal.SIGKILL)
    launcher.wait()
    time.sleep(3)
    states = sacct_states(slurm_env, victims)
    # A pending array task cancelled by scancel leaves no sacct record at all; a running one shows CANCELLED.
    cancelled = {j for j in victims if states.get(j, "CANCELLED") == "CANCELLED"}
    assert cancelled, f"no job was cancelled before it finished: {states}"

    rerun = run_launcher(*args, cwd=tmp_path, env=slurm_env)
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    after = ledger_rows(tmp_path)
    assert all(r["state"] in ("ok", "oom") for r in after), [(r["config_hash"], r["state"]) for r in after]
    by_first_job = {}
    for e in ledger_events(tmp_path):
        if e["detail"].startswith("job ") and e["config_hash"] not in by_first_job:
            by_first_job[e["config_hash"]] = e["detail"].split()[1]
    for r in after:
        first_job = by_first_job[r["config_hash"]]
        if first_job in cancelled:
            # Retried as a new job; unless its log shows its outcome before the scancel reached it: it ran out of
            # memory (the plan's borderline trial does, in its first second), or it had logged its whole measurement
            # (under load the launcher marks a short CPU trial running late, and the scancel can land while the job
            # winds down): then that is its outcome, and it is not rerun.
            retried = r["attempts"] == 2 and r["job_id"] not in cancelled
            first_outcome = r["attempts"] == 1 and r["job_id"] == first_job
            failed_first = first_outcome and r["state"] == "oom"
            measured_first = first_outcome and r["state"] == "ok" and r["reason"].startswith("finished with a result")
            assert retried or failed_first or measured_first, {k: r[k] for k in ("config_hash", "state", "attempts",
                                                                                 "job_id", "reason")}
    children = child_runs(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert Counter(c.data.tags["parasweep.config_hash"] for c in children) == Counter(r["config_hash"] for r in after)


def test_time_limit_is_classified(slurm_env, tmp_path):
    args = ["+sweep=tiny", "executor=slurm", "grid.gpus=[1]", "grid.zip=[]", "grid.tp=[1]", "grid.pp=[1]",
            "grid.mbs=[1]", "grid.include=[]", "tracking.enabled=false", "executor.timeout_min=1",
            "executor.signal_delay_s=0", "monitor.hang_timeout_min=30", "retry.max_attempts=1",
            "backend.extra_args=[--fault,hang]", *NO_PROBES]
    proc = run_launcher(*args, cwd=tmp_path, env=slurm_env, timeout_s=600)
    (row,) = ledger_rows(tmp_path)
    assert (row["state"], row["failure_kind"], row["job_state"]) == ("timeout", "time_limit", "TIMEOUT"), row
    assert proc.returncode == 1  # nothing finished ok: nothing to select


def test_hang_is_cancelled_within_timeout_plus_a_poll(slurm_env, tmp_path):
    hang_timeout_s, poll_s = 20, 2
    args = ["+sweep=tiny", "executor=slurm", "grid.gpus=[1]", "grid.zip=[]", "grid.tp=[1]", "grid.pp=[1]",
            "grid.mbs=[1]", "grid.include=[]", "tracking.enabled=false", "executor.timeout_min=10",
            f"monitor.hang_timeout_min={hang_timeout_s / 60}", f"monitor.poll_interval_s={poll_s}",
            "retry.max_attempts=1", "backend.extra_args=[--fault,hang]", *NO_PROBES]
    run_launcher(*args, cwd=tmp_path, env=slurm_env, timeout_s=600)
    (row,) = ledger_rows(tmp_path)
    assert (row["state"], row["failure_kind"]) == ("hang", "hang"), row
    hang_event = next(e for e in ledger_events(tmp_path) if e["state"] == "hang")
    last_output = max((tmp_path / p).stat().st_mtime for p in json.loads(row["log_paths"]))
    # Detected within hang_timeout plus one poll (plus the poll that saw the last output grow).
    assert hang_event["ts"] - last_output <= hang_timeout_s + 2 * poll_s + 3
    deadline = time.time() + 60  # scancel is asynchronous: wait for accounting to record it
    while sacct_states(slurm_env, [row["job_id"]]).get(row["job_id"]) != "CANCELLED" and time.time() < deadline:
        time.sleep(1)
    assert sacct_states(slurm_env, [row["job_id"]])[row["job_id"]] == "CANCELLED"


def test_a_wrong_partition_is_refused_before_anything_is_recorded(slurm_env, tmp_path):
    started = time.monotonic()
    proc = run_launcher("+sweep=tiny", "executor=slurm", "cluster.partition=nope", cwd=tmp_path, env=slurm_env,
                        timeout_s=120)
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    (line,) = proc.stderr.strip().splitlines()
    assert "partition 'nope' (cluster.partition) does not exist on this cluster (its partitions: debug)" in line
    assert not (tmp_path / "sweeps" / "tiny" / "ledger.sqlite").exists()
    assert not (tmp_path / "mlflow.db").exists() and not list((tmp_path / "sweeps").glob("*/jobs/*"))
    assert time.monotonic() - started < 60


def test_a_job_larger_than_the_cluster_is_refused_by_sbatch_test_only(slurm_env, tmp_path):
    # 4 nodes asked of the 2-node cluster: the partition exists, the controller answers, SLURM would refuse the job
    proc = run_launcher("+sweep=tiny", "executor=slurm", "cluster.nodes=4", "cluster.gpus_per_node=1",
                        "grid.gpus=null", "grid.nodes=[4]", "grid.zip=[]", "grid.tp=[1]", "grid.pp=[1]",
                        "grid.mbs=[1]", "grid.include=[]", cwd=tmp_path, env=slurm_env, timeout_s=120)
    assert proc.returncode == 2, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "largest job (4 node(s) x 1 GPU(s)" in proc.stderr and "sbatch --test-only" in proc.stderr, proc.stderr
    assert not (tmp_path / "sweeps" / "tiny" / "ledger.sqlite").exists()


def test_slurm_conf_pointing_at_a_missing_file_is_refused_at_once(slurm_env, tmp_path):
    # SLURM's own commands retry a missing slurm.conf for 60 s each: the launcher used to hang past a minute.
    started = time.monotonic()
    proc = run_launcher("+sweep=tiny", "executor=slurm", cwd=tmp_path, timeout_s=120,
                        env={**slurm_env, "SLURM_CONF": str(tmp_path / "missing.conf")})
    assert proc.returncode == 2 and "is not a file" in proc.stderr, proc.stderr[-3000:]
    assert time.monotonic() - started < 30
    assert not (tmp_path / "sweeps" / "tiny" / "ledger.sqlite").exists()


@pytest.mark.parametrize("detach", [False, True], ids=["cancel", "detach_on_term"])
def test_sigterm_cancels_the_jobs_or_leaves_them_for_the_next_run(slurm_env, tmp_path, detach):
    from test_resume_processes import fake_python

    from launcher.run.interruption import NOT_COUNTED

    args = ["+sweep=tiny", "executor=slurm", "grid.gpus=[1]", "grid.zip=[]", "grid.tp=[1]", "grid.pp=[1]",
            "grid.mbs=[1]", "grid.include=[]", "tracking.enabled=false", "analysis.confirm_top=0",
            *NO_PROBES, "monitor.poll_interval_s=1", f"backend.python={fake_python(tmp_path)}",
            "backend.extra_args=[--fake-seconds,15]", *(["executor.detach_on_term=true"] if detach else [])]
    launcher = subprocess.Popen([sys.executable, "-m", "launcher", *args], cwd=tmp_path, start_new_session=True,
                                env={**os.environ, "PYTHONPATH": str(REPO), **slurm_env},
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and launcher.poll() is None:
        rows = ledger_rows(tmp_path) if (tmp_path / "sweeps" / "tiny" / "ledger.sqlite").exists() else []
        if rows and rows[0]["state"] == "running":
            break
        time.sleep(0.2)
    launcher.send_signal(signal.SIGTERM)
    _, err = launcher.communicate(timeout=60)
    assert launcher.returncode == 143, err[-3000:]
    (row,) = ledger_rows(tmp_path)
    job_id = row["job_id"]
    if not detach:
        assert err.strip().splitlines()[-1].startswith("terminated by SIGTERM: 1 live trial(s) stopped"), err
        assert (row["state"], row["attempts"]) == ("cancelled", 0) and row["reason"].startswith(NOT_COUNTED), row
        deadline = time.time() + 60  # scancel is asynchronous: wait for accounting to record it
        while sacct_states(slurm_env, [job_id]).get(job_id) != "CANCELLED" and time.time() < deadline:
            time.sleep(1)
        assert sacct_states(slurm_env, [job_id])[job_id] == "CANCELLED"
        return
    assert err.strip().splitlines()[-1] == ("terminated by SIGTERM: 1 SLURM job(s) left running "
                                            "(executor.detach_on_term=true); run the same command again to "
                                            "re-attach to them"), err
    assert row["state"] == "running" and sacct_states(slurm_env, [job_id])[job_id] in ("RUNNING", "PENDING")
    rerun = run_launcher(*args, cwd=tmp_path, env=slurm_env, timeout_s=300)
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    (row,) = ledger_rows(tmp_path)
    assert (row["state"], row["attempts"], row["job_id"]) == ("ok", 1, job_id), row  # re-attached, not resubmitted
