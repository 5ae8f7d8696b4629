"""End to end: the compute probe (plan.compute_probe) runs for real as a job before the trials, locally and on the
local SLURM cluster, its figures change the ledger's predictions, and the report and MLflow show it.

Slow (real sweeps): `python -m pytest -m slow tests/e2e/test_e2e_compute_probe.py`; the SLURM one also needs the
local cluster (tests/slurm/localcluster.sh; the fixture starts it).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_launcher
from test_e2e_local import SMALL, ledger_rows

from launcher.config.load import load_config
from launcher.plan.planner import make_plan

pytestmark = [pytest.mark.slow]

ARGS = [*SMALL, "plan.max_trials=2", "plan.network_probe=false"]
PROBE = Path("sweeps") / "tiny" / "computebench-local-cpu-cpu.json"


def predicted_step_s(work: Path) -> dict[str, float]:
    return {r["config_hash"]: json.loads(r["predicted"])["step_time_s"] for r in ledger_rows(work)}


def planned_step_s(*overrides: str) -> dict[str, float]:
    """What the plan predicts without a probe (the same config, planned in this process)."""
    return {t.config_hash: t.estimate.step_time_s for t in make_plan(load_config(list(overrides))).trials}


def assert_the_probe_was_used(work: Path, output: str) -> dict:
    probe = json.loads((work / PROBE).read_text())
    assert probe["device"] == "cpu" and probe["precision"] == "fp32"
    assert (probe["layer"] or {}).get("fwd_bwd_s", 0) > 0 or "layer" in probe["skipped"]   # loaded cores: cut short
    assert probe["gemms"] and all(g["tflops"] > 0 for g in probe["gemms"])
    assert probe["wall_s"] < 20, probe["wall_s"]
    assert "compute measured (computebench fp32 on cpu" in output and "GEMM efficiency" in output
    report = (work / "sweeps" / "tiny" / "report.html").read_text()
    assert "Compute probe" in report and "a-priori" in report
    return probe


def parent_metrics(work: Path) -> dict:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{work / 'mlflow.db'}")
    runs = client.search_runs([client.get_experiment_by_name("tiny").experiment_id], max_results=1000)
    parent = next(r for r in runs if "mlflow.parentRunId" not in r.data.tags)
    artifacts = [a.path for a in client.list_artifacts(parent.info.run_id)]
    return {"metrics": parent.data.metrics, "artifacts": artifacts}


def test_a_local_sweep_plans_with_its_compute_probe_and_reuses_it(tmp_path):
    on, off = tmp_path / "on", tmp_path / "off"
    on.mkdir()
    off.mkdir()
    proc = run_launcher(*ARGS, "plan.compute_probe=true", cwd=on)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    assert_the_probe_was_used(on, output)
    mlflow = parent_metrics(on)
    assert mlflow["metrics"]["compute_measured_eff"] > 0 and mlflow["metrics"]["compute_gemm_tflops_median"] > 0
    assert PROBE.name in mlflow["artifacts"]
    proc_off = run_launcher(*ARGS, "plan.compute_probe=false", cwd=off)
    assert proc_off.returncode == 0, (proc_off.stdout + proc_off.stderr)[-3000:]
    assert not (off / PROBE).exists()
    with_probe, without = predicted_step_s(on), predicted_step_s(off)
    both = with_probe.keys() & without.keys()
    assert both and all(with_probe[k] != pytest.approx(without[k], rel=1e-6) for k in both)
    # the resume finds the saved probe: no second probe job
    again = run_launcher(*ARGS, "plan.compute_probe=true", cwd=on)
    assert again.returncode == 0 and "compute probe: 1 GPU" not in again.stdout + again.stderr
    assert "compute measured" in again.stdout + again.stderr


@pytest.mark.slurm
@pytest.mark.timeout(900)
def test_a_slurm_sweep_runs_the_compute_probe_as_a_job_by_default(slurm_env, tmp_path):
    # plan.compute_probe unset: on with executor=slurm
    proc = run_launcher(*ARGS, "executor=slurm", cwd=tmp_path, env=slurm_env)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output[-3000:]
    assert_the_probe_was_used(tmp_path, output)
    assert "compute probe: 1 GPU of local-cpu" in output
    job_dirs = list((tmp_path / "sweeps" / "tiny" / "jobs").glob("*"))
    assert job_dirs                                                    # the probe went through sbatch like a trial
    with_probe = predicted_step_s(tmp_path)
    without = planned_step_s(*ARGS, "executor=slurm", "plan.compute_probe=false")
    both = with_probe.keys() & without.keys()
    assert both and all(with_probe[k] != pytest.approx(without[k], rel=1e-6) for k in both)
    assert parent_metrics(tmp_path)["metrics"]["compute_measured_eff"] > 0
