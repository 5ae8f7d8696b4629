"""End to end on this machine: the real tiny sweep (torch workload, submitit local executor, sqlite MLflow).

Slow (minutes): run alone with `python -m pytest -m slow tests/e2e/test_e2e_local.py`.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from conftest import REPO, run_launcher

pytestmark = pytest.mark.slow

# A smaller tiny sweep for the fault tests: 4 layouts (tp/pp pairs) at mbs 1, plus the real OOM.
# the kill/resume and evidence checks count trials: the winner's confirmation runs (analysis.confirm_top) are
# tested on the whole tiny sweep and in tests/run. One warm-up and two measured steps (the tiny sweep runs 2 + 4):
# these tests check what is recorded, not how steady the figure is, and a CPU trial's steps are half its run time.
FEW_STEPS = ["backend.warmup_iters=1", "backend.measure_iters=2"]
SMALL = ["+sweep=tiny", "grid.mbs=[1]", "grid.include=[{gpus: 4, tp: 1, pp: 1, mbs: 64, gbs: 256}]",
         "analysis.confirm_top=0", *FEW_STEPS]


def ledger_rows(work: Path, name: str = "tiny") -> list[dict]:
    """The ledger's trials as a reader outside the launcher sees them ([] until the launcher has created it)."""
    db = sqlite3.connect(work / "sweeps" / name / "ledger.sqlite")
    db.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in db.execute("SELECT * FROM trials ORDER BY position")]
    except sqlite3.OperationalError:  # the file exists but the launcher has not created its tables yet
        return []
    finally:
        db.close()


def ledger_events(work: Path, name: str = "tiny") -> list[dict]:
    db = sqlite3.connect(work / "sweeps" / name / "ledger.sqlite")
    db.row_factory = sqlite3.Row
    rows = [dict(r) for r in db.execute("SELECT * FROM events ORDER BY id")]
    db.close()
    return rows


def child_runs(uri: str, experiment: str = "tiny") -> list:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    exp = client.get_experiment_by_name(experiment)
    runs = client.search_runs([exp.experiment_id], max_results=1000)
    return [r for r in runs if "mlflow.parentRunId" in r.data.tags]


def test_tiny_sweep_runs_the_whole_loop(tiny_sweep):
    work, proc = tiny_sweep
    rows = ledger_rows(work)
    states = Counter(r["state"] for r in rows)
    assert len(rows) >= 8 and states["oom"] >= 1 and states["ok"] >= 6, states
    layouts = [r for r in rows if r["state"] == "ok"]  # the ledger has a column per layout dimension
    assert any(l["tp"] > 1 for l in layouts) and any(l["pp"] > 1 for l in layouts) and any(l["dp"] > 1 for l in layouts)
    oom = next(r for r in rows if r["state"] == "oom")
    assert "DefaultCPUAllocator" in oom["reason"]  # a real allocator failure, not a prediction
    best = json.loads((work / "sweeps" / "tiny" / "best.json").read_text())
    by_config: dict[str, list[float]] = {}  # the finalists were measured again: a figure is a median
    for r in rows:
        if r["state"] == "ok":
            by_config.setdefault(r["repeat_of"] or r["config_hash"], []).append(
                json.loads(r["metrics"])["tokens_per_s"])
    fastest = max(by_config, key=lambda key: statistics.median(by_config[key]))
    # the winner is the fastest median, or the fastest is tied with it within the measured noise (and the decision
    # says so): then the winner is the one with the most planned memory headroom
    decision = best["decision"]
    assert best["config_hash"] == fastest or (not decision["confirmed"] and fastest in decision["tied_with"])
    assert decision["noise_df"] >= 1 and decision["noise_band"] >= 0.02  # the repeats measured the noise
    assert best["n_runs"] >= 2  # analysis.confirm_top: the winner never stands on a single run
    assert "launcher.workload" in best["command"] and "--tp" in best["command"]
    assert "/#/experiments/" in proc.stdout and "/runs" in proc.stdout


def test_mlflow_has_one_parent_and_one_child_per_trial(tiny_sweep):
    work, _ = tiny_sweep
    uri = f"sqlite:///{work / 'mlflow.db'}"
    children = child_runs(uri)
    rows = ledger_rows(work)
    assert len(children) == len(rows)
    assert {c.data.tags["parasweep.config_hash"] for c in children} == {r["config_hash"] for r in rows}
    parents = {c.data.tags["mlflow.parentRunId"] for c in children}
    assert len(parents) == 1
    ok_child = next(c for c in children if c.data.tags["status"] == "ok")
    assert {"tp", "pp", "dp", "mbs", "gbs", "model", "cluster"} <= set(ok_child.data.params)
    assert {"tokens_per_s", "predicted_tokens_per_s", "peak_mem_gb", "headroom_pct", "mfu_pct",
            "tokens_per_s_per_gpu"} <= set(ok_child.data.metrics)
    assert "failure_kind" not in ok_child.data.tags  # an ok run's kind would only say 'ok'
    best = [c for c in children if c.data.tags.get("parasweep.best") == "true"]
    assert len(best) == 1


ALLOCATOR = "DefaultCPUAllocator: can't allocate memory"


def assert_oom_judged_from_the_allocator_line(work: Path, uri: str) -> None:
    """One trial, one judgement (analysis/logs/joblog.py): the mbs-64 trial's evidence is the allocator line of its
    .err in the ledger, the report's failure section and MLflow, never the wrappers' tracebacks at the .err's end;
    `python -m analysis.classify` on its job folder says oom as text and as JSON."""
    oom = next(r for r in ledger_rows(work) if r["state"] == "oom")
    evidence = json.loads(oom["evidence"])[0]
    assert evidence["file"].endswith("_log.err") and ALLOCATOR in evidence["text"]
    job_dir = work / oom["job_dir"]
    assert (job_dir / evidence["file"]).read_text().splitlines()[evidence["line"] - 1].strip() == evidence["text"]

    report = (work / "sweeps" / "tiny" / "report.html").read_text()
    section = report[report.index(f"<b>{oom['config_hash']}</b>"):]
    section = section[:section.index("</pre>")]
    marked = section[section.index("<mark>") + 6:section.index("</mark>")]
    assert "can&#x27;t allocate memory" in marked and "lines around the evidence in" in section
    assert "trial script" not in marked and "ChildFailedError" not in marked

    child = next(c for c in child_runs(uri) if c.data.tags["parasweep.config_hash"] == oom["config_hash"])
    assert ALLOCATOR in child.data.tags["failure_evidence"]
    assert child.data.tags["failure_evidence"].startswith(f"{evidence['file']}:{evidence['line']}: ")

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for extra in ((), ("--json",)):
        proc = subprocess.run([sys.executable, "-m", "analysis.classify", str(job_dir), *extra], capture_output=True,
                              text=True, env=env, timeout=120)
        assert proc.returncode == 0, proc.stderr
        kind = json.loads(proc.stdout)["kind"] if extra else proc.stdout.splitlines()[0].rsplit(": ", 1)[1]
        assert kind == "oom", proc.stdout


def test_the_oom_trial_shows_the_allocator_line_everywhere(tiny_sweep):
    work, _ = tiny_sweep
    assert_oom_judged_from_the_allocator_line(work, f"sqlite:///{work / 'mlflow.db'}")


def test_rerun_resumes_without_rerunning_anything(tiny_sweep):
    work, _ = tiny_sweep
    before = ledger_rows(work)
    proc = run_launcher("+sweep=tiny", cwd=work)
    assert proc.returncode == 0, proc.stderr[-2000:]
    after = ledger_rows(work)
    assert [(r["config_hash"], r["attempts"], r["state"]) for r in after] == \
        [(r["config_hash"], r["attempts"], r["state"]) for r in before]
    assert len(child_runs(f"sqlite:///{work / 'mlflow.db'}")) == len(after)
    assert "resuming sweep tiny" in proc.stdout


def _wait_for(predicate, timeout_s: float, what: str):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if predicate():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}")


def test_sigkill_mid_sweep_then_resume(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "launcher", *SMALL], cwd=tmp_path, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)

    def some_done_and_one_running():
        if not (tmp_path / "sweeps" / "tiny" / "ledger.sqlite").exists():
            return False
        states = Counter(r["state"] for r in ledger_rows(tmp_path))
        return states["ok"] + states["oom"] >= 2 and states["running"] >= 1

    try:
        _wait_for(some_done_and_one_running, 600, "two finished trials and one running")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the launcher and its local jobs, at once
        proc.wait()
    before = {r["config_hash"]: r for r in ledger_rows(tmp_path)}
    done_before = {h for h, r in before.items() if r["state"] in ("ok", "oom")}

    rerun = run_launcher(*SMALL, cwd=tmp_path)
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    db = sqlite3.connect(tmp_path / "sweeps" / "tiny" / "ledger.sqlite")
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    db.close()
    after = {r["config_hash"]: r for r in ledger_rows(tmp_path)}
    assert set(after) == set(before)
    assert all(r["state"] in ("ok", "oom") for r in after.values()), {h: r["state"] for h, r in after.items()}
    for h in done_before:  # nothing that had finished ran again
        assert after[h]["attempts"] == before[h]["attempts"] and after[h]["job_id"] == before[h]["job_id"]
    ok_events = Counter(e["config_hash"] for e in ledger_events(tmp_path) if e["state"] == "ok")
    assert max(ok_events.values()) == 1
    children = child_runs(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert Counter(c.data.tags["parasweep.config_hash"] for c in children) == Counter(set(after))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_unreachable_tracking_server_then_sync_later(tmp_path):
    port = _free_port()
    uri = f"http://127.0.0.1:{port}"
    # one trial, no confirmation runs, few steps: the test is about the tracking server, not the figure
    args = ["+sweep=tiny", "grid.gpus=[2]", "grid.zip=[]", "grid.tp=[1]", "grid.pp=[2]", "grid.mbs=[1]",
            "grid.include=[]", f"tracking.uri={uri}", "analysis.confirm_top=0", *FEW_STEPS]
    proc = run_launcher(*args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stderr.count("unreachable") == 1  # warned once
    rows = ledger_rows(tmp_path)
    assert rows and all(r["state"] == "ok" and not r["synced"] for r in rows)

    server = subprocess.Popen([sys.executable, "-m", "mlflow", "server", "--backend-store-uri",
                               f"sqlite:///{tmp_path / 'server.db'}", "--host", "127.0.0.1", "--port", str(port),
                               "--workers", "1"], cwd=tmp_path, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True,
                              env={**os.environ, "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"})  # no job runner
    try:
        import urllib.request

        def up():
            try:
                return urllib.request.urlopen(f"{uri}/health", timeout=2).status == 200
            except OSError:
                return False

        _wait_for(up, 120, "mlflow server")
        sync = subprocess.run([sys.executable, "-m", "analysis", str(tmp_path / "sweeps" / "tiny")], cwd=tmp_path,
                              env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                              timeout=300)
        assert sync.returncode == 0, sync.stderr[-2000:]
        assert all(r["synced"] for r in ledger_rows(tmp_path))
        assert len(child_runs(uri)) == len(rows)
        again = subprocess.run([sys.executable, "-m", "analysis", str(tmp_path / "sweeps" / "tiny")],
                               cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True,
                               text=True, timeout=300)
        assert again.returncode == 0 and len(child_runs(uri)) == len(rows)  # idempotent
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)


def test_fresh_keeps_the_old_folder(tmp_path):
    # one trial, no confirmation runs, few steps: the test is about the sweep folders, not the figure
    args = ["+sweep=tiny", "grid.gpus=[1]", "grid.zip=[]", "grid.tp=[1]", "grid.pp=[1]", "grid.mbs=[1]",
            "grid.include=[]", "tracking.enabled=false", "analysis.confirm_top=0", *FEW_STEPS]
    assert run_launcher(*args, cwd=tmp_path).returncode == 0
    proc = run_launcher(*args, "sweep.fresh=true", cwd=tmp_path)
    assert proc.returncode == 0
    folders = sorted(p.name for p in (tmp_path / "sweeps").iterdir() if p.is_dir())
    assert folders[0] == "tiny" and len(folders) == 2 and folders[1].startswith("tiny.")
    assert (tmp_path / "sweeps" / folders[1] / "ledger.sqlite").exists()


def test_repeats_rank_by_the_median(tmp_path):
    args = ["+sweep=tiny", "grid.gpus=[2]", "grid.zip=[]", "grid.tp=[1]", "grid.pp=[1,2]", "grid.mbs=[1]",
            "grid.include=[]", "analysis.repeats=3", "analysis.confirm_top=1", "tracking.enabled=false",
            *FEW_STEPS]  # the ranking takes the median of whatever the three runs measured
    proc = run_launcher(*args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = ledger_rows(tmp_path)
    repeats = [r for r in rows if r["repeat_of"]]
    # confirm_top=1: the winner is measured 3 times; if its median falls behind, the new winner is measured too
    measured = {r["repeat_of"] for r in repeats}
    assert len(measured) in (1, 2) and len(repeats) == 2 * len(measured) and len(rows) == 2 + len(repeats)
    best = json.loads((tmp_path / "sweeps" / "tiny" / "best.json").read_text())
    assert best["n_runs"] == 3 and best["config_hash"] in measured and "tokens_per_s_spread" in best["measured"]
    group = [r for r in rows if r["config_hash"] == best["config_hash"] or r["repeat_of"] == best["config_hash"]]
    tokens = sorted(json.loads(r["metrics"])["tokens_per_s"] for r in group)
    assert best["measured"]["tokens_per_s"] == tokens[1]  # the median of three
    assert "(n=3)" in proc.stdout


def test_garbled_log_fails_that_trial_and_the_sweep_goes_on(tmp_path):
    # one trial per pp: the winner's confirmation runs would add rows of pp 1; few steps: the garbled line is the
    # result line, printed after the last step whatever their number
    args = ["+sweep=tiny", "grid.gpus=[2]", "grid.zip=[]", "grid.tp=[1]", "grid.pp=[1,2]", "grid.mbs=[1]",
            "grid.include=[]", "retry.max_attempts=1", "backend.extra_args=[--fault,garble,--fault-if,'pp=2']",
            "analysis.confirm_top=0", *FEW_STEPS]
    proc = run_launcher(*args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = {r["pp"]: r for r in ledger_rows(tmp_path)}
    assert rows[1]["state"] == "ok"
    assert rows[2]["state"] == "failed" and rows[2]["reason"].startswith("unparseable log")
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    run = next(c for c in child_runs(uri) if c.data.tags["parasweep.config_hash"] == rows[2]["config_hash"])
    assert run.data.tags["status"] == "failed" and run.info.status == "FAILED"
    artifacts = [a.path for a in MlflowClient(tracking_uri=uri).list_artifacts(run.info.run_id, "logs")]
    assert any(a.endswith("_log.out.log") for a in artifacts), artifacts


def test_a_budget_below_the_cost_stops_the_sweep_at_it_and_a_larger_one_runs_the_rest(tmp_path):
    """4 trials of ~0.007 predicted GPU-hours each against plan.max_gpu_hours=0.01: the first runs, then the sweep
    stops at the budget and says so; the same command with a larger budget runs the rest."""
    args = ["+sweep=tiny", "grid.gpus=[2]", "grid.zip=[]", "grid.tp=[1]", "grid.pp=[1,2]", "grid.mbs=[1,2]",
            "grid.include=[]", "analysis.confirm_top=0", "tracking.enabled=false",
            *FEW_STEPS]  # still 4 x ~0.006 predicted GPU-hours (dry run: 0.0248 in all): the budget holds some back
    dry = run_launcher(*args, "plan.max_gpu_hours=0.01", "dry_run=true", cwd=tmp_path)
    assert "exhaustive: 4 jobs" in dry.stdout and "adaptive search" in dry.stdout
    assert "plan.max_gpu_hours=0.01 is below the expected" in dry.stdout
    proc = run_launcher(*args, "plan.max_gpu_hours=0.01", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "GPU-hour budget reached" in proc.stdout and "/0.01 GPU-h" in proc.stdout
    rows = ledger_rows(tmp_path)
    held = [r for r in rows if r["pruned_by"] == "gpu_budget"]
    assert held and all(r["state"] == "pruned" for r in held) and len(held) < len(rows)
    assert "GPU-hours" in (tmp_path / "sweeps" / "tiny" / "report.html").read_text()
    more = run_launcher(*args, "plan.max_gpu_hours=1", cwd=tmp_path)
    assert more.returncode == 0, more.stdout[-2000:] + more.stderr[-2000:]
    assert not [r for r in ledger_rows(tmp_path) if r["pruned_by"] == "gpu_budget" or r["state"] == "planned"]
