"""`python -m analysis <folder>` on synthetic sweep folders (no trial is run): outputs, idempotence, running from
another directory, 0 ok trials, the full-length export of a Megatron winner, the MLflow attachments."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from analysis.__main__ import main
from analysis.report.conclusion import _export
from analysis.report.plots import PLOT_FILES, SEARCH_PLOT_FILES
from launcher.run.folder import SweepFolder

SWEEP_PLOTS = {**PLOT_FILES, "search": SEARCH_PLOT_FILES["search"], "calibration": SEARCH_PLOT_FILES["calibration"]}
"""A sweep with ok trials also draws its search progress and its calibration (no network probe here)."""
from benchmarks.bench_analysis import build_sweep


def _ledger(folder: Path):
    from launcher.run.ledger import Ledger

    with Ledger(folder / "ledger.sqlite") as ledger:
        return ledger.trials()


@pytest.fixture
def elsewhere(tmp_path, monkeypatch):
    """The analysis runs from a directory that is not the launcher's working directory."""
    other = tmp_path / "elsewhere"
    other.mkdir()
    monkeypatch.chdir(other)
    return other


def test_analysis_writes_report_plots_and_export(tmp_path, elsewhere, capsys):
    folder = build_sweep(tmp_path / "work", n_trials=12, iters=20, oom_every=4, crash_every=5)
    assert main([str(folder), "--no-mlflow", "--train-iters", "500"]) == 0
    out = capsys.readouterr().out
    assert "(12 changed)" in out  # stale metrics: every trial re-judged from its log, found via relative paths
    states = {r.config_hash: r.state for r in _ledger(folder)}
    assert sorted(states.values()) == ["failed"] * 2 + ["ok"] * 7 + ["oom"] * 3  # crashed: i = 4, 9; oom: 3, 7, 11

    best = json.loads((folder / "best.json").read_text())
    assert re.search(rf"winner: .*\({best['config_hash'][:8]}\)", out)
    assert sorted(p.name for p in (folder / "plots").iterdir()) == sorted(SWEEP_PLOTS.values())

    report = (folder / "report.html").read_text()
    assert best["config_hash"][:8] in re.search(r'<p id="winner-text">(.*?)</p>', report).group(1)
    assert "<script" not in report and "&lt;script&gt;alert" in report  # the crashed trial's log, escaped
    assert report.count("data:image/png;base64,") == len(SWEEP_PLOTS)

    export = folder / "export"
    launch = (export / "launch.sh").read_text()
    assert "--warmup-iters 0" in launch and "--measure-iters 500" in launch
    sbatch = (export / "train.sbatch").read_text()
    lay = best["layout"]
    assert f"#SBATCH --nodes={lay['nodes']}\n" in sbatch
    assert "--gpus-per-node" not in sbatch  # cluster=local-cpu: a CPU cluster must not ask SLURM for GPUs
    assert f"#SBATCH --chdir={export}\n" in sbatch and sbatch.rstrip().endswith("srun bash launch.sh")
    assert not (export / "benchmark_launch.sh").exists()  # the synthetic sweep has no trials/<hash>/launch.sh


def test_second_run_changes_nothing_and_keeps_relative_log_paths(tmp_path, elsewhere, capsys):
    folder = build_sweep(tmp_path / "work", n_trials=6, iters=10)
    assert main([str(folder), "--no-mlflow"]) == 0
    before = [(r.state, r.metrics, r.log_paths) for r in _ledger(folder)]
    capsys.readouterr()
    assert main([str(folder), "--no-mlflow"]) == 0
    assert "(0 changed)" in capsys.readouterr().out
    assert [(r.state, r.metrics, r.log_paths) for r in _ledger(folder)] == before
    assert all(not Path(p).is_absolute() for _, _, paths in before for p in paths)
    assert not (elsewhere / "sweeps").exists() and not (elsewhere / "mlflow.db").exists()


def test_a_folder_renamed_by_sweep_fresh_still_finds_its_logs(tmp_path, elsewhere, capsys):
    folder = build_sweep(tmp_path / "work", n_trials=4, iters=10, oom_every=0, crash_every=0)
    kept = folder.rename(folder.with_name("tiny.20260101-000000"))  # ledger paths still say sweeps/tiny/jobs/...
    assert main([str(kept), "--no-mlflow"]) == 0
    assert "(4 changed)" in capsys.readouterr().out
    assert all(r.state == "ok" and r.metrics["tokens_per_s"] > 0 for r in _ledger(kept))


def test_a_sweep_without_an_ok_trial(tmp_path, elsewhere, capsys):
    folder = build_sweep(tmp_path / "work", n_trials=3, iters=10, oom_every=1)
    assert main([str(folder), "--no-mlflow"]) == 0
    assert "No trial finished ok" in capsys.readouterr().out
    assert "Nothing exported" in (folder / "report.html").read_text()
    assert not (folder / "export").exists() and not (folder / "best.json").exists()
    assert len(list((folder / "plots").glob("*.png"))) == len(PLOT_FILES)


def test_train_iters_must_be_positive(tmp_path, capsys):
    assert main([str(tmp_path), "--train-iters", "0"]) == 2
    assert "--train-iters" in capsys.readouterr().err


def test_not_a_sweep_folder(tmp_path, capsys):
    assert main([str(tmp_path), "--no-mlflow"]) == 2
    assert "config.yaml" in capsys.readouterr().err


def test_megatron_winner_exports_a_full_length_run(load, tmp_path):
    cfg = load("model=gpt-1.7b", "cluster=a100-80g", "backend=megatron_deepspeed", "executor=slurm",
               "sweep.name=big", "executor.setup=[module load cuda]",
               "backend.megatron.path=/shared/Megatron-DeepSpeed", "backend.megatron.data_path=/data/gpt2_text_document",
               "backend.megatron.vocab_file=/data/gpt2-vocab.json", "backend.megatron.merge_file=/data/gpt2-merges.txt")
    layout = dict(gpus=16, nodes=2, tp=2, pp=2, dp=4, vpp=1, mbs=1, gbs=64, recompute="selective",
                  sequence_parallel=False, zero_stage=1, distributed_optimizer=False)
    best = {"config_hash": "abcdef123456", "layout": layout,
            "metrics": {"tokens_per_s": 90000.0, "step_time_s": 1.5, "peak_mem_gb": 50.0}}
    written = _export(cfg, SweepFolder(tmp_path), best, train_iters=1000)
    export = tmp_path / "export"
    launch = written["launch.sh"].read_text()
    assert re.search(r"--train-iters 1000\b", launch) and re.search(r"--exit-interval 1000\b", launch)
    assert f"--deepspeed_config {export}/ds_config.json" in launch
    assert json.loads(written["ds_config.json"].read_text())["steps_per_print"] == 1000
    sbatch = written["train.sbatch"].read_text()
    for line in ("--nodes=2", "--gpus-per-node=8", "--ntasks-per-node=1", "--partition=benchmark", "--exclusive",
                 "--job-name=big-train-abcdef12", "--time=0-00:33:00"):  # 180 s + 1000 x 1.5 s x 1.2 = 1980 s
        assert f"#SBATCH {line}\n" in sbatch
    assert "--train-iters 1000 --exit-interval 1000 (benchmark: 5+10)" in sbatch
    assert sbatch.index("module load cuda") < sbatch.index("srun bash launch.sh")
    assert "--train-iters 1000" in written["command.txt"].read_text()


def test_plots_and_report_are_attached_to_the_parent_run(tmp_path, elsewhere, capsys):
    from mlflow.tracking import MlflowClient

    from launcher.run.ledger import Ledger

    folder = build_sweep(tmp_path / "work", n_trials=4, iters=10, oom_every=0, crash_every=0)
    with Ledger(folder / "ledger.sqlite") as ledger:  # one trial still running: the sweep is under way
        live = ledger.trials()[-1]
        ledger.update(live.config_hash, state="running", job_state="")
    assert main([str(folder)]) == 0
    assert "MLflow sync" in capsys.readouterr().out
    with Ledger(folder / "ledger.sqlite") as ledger:
        parent = ledger.get_meta("mlflow_parent_run_id")
    client = MlflowClient(f"sqlite:///{tmp_path / 'work' / 'mlflow.db'}")  # the launcher's relative sqlite URI
    assert sorted(Path(a.path).name for a in client.list_artifacts(parent, "plots")) == sorted(SWEEP_PLOTS.values())
    assert {Path(a.path).name for a in client.list_artifacts(parent, "report")} == {"report.html", "train.sbatch"}
    assert client.get_run(parent).info.status == "RUNNING"  # the launcher, still at work, finishes it
    assert not (elsewhere / "mlflow.db").exists()

    with Ledger(folder / "ledger.sqlite") as ledger:
        ledger.update(live.config_hash, state="ok", job_state="COMPLETED")
    assert main([str(folder)]) == 0
    assert client.get_run(parent).info.status == "FINISHED"
    assert len(client.list_artifacts(parent, "plots")) == len(SWEEP_PLOTS)  # replaced, not duplicated


def test_after_a_dry_run_the_analysis_reports_the_plan(tmp_path):
    """The README says `python -m analysis sweeps/<name>` works any time: after a dry run there is only plan.csv."""
    import csv
    import os
    import subprocess
    import sys

    from conftest import REPO, run_launcher

    assert run_launcher("+sweep=70b", "dry_run=true", cwd=tmp_path, timeout_s=300).returncode == 0
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-m", "analysis", "sweeps/70b"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = list(csv.DictReader((tmp_path / "sweeps" / "70b" / "plan.csv").open()))
    kept = [r for r in rows if r["selection"] != "pruned"]
    best = max(kept, key=lambda r: float(r["tokens_per_s"]))
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("sweeps/70b holds a plan only") and f"{len(kept)} trials planned" in lines[0]
    assert best["config_hash"][:8] in lines[2] and f"{float(best['tokens_per_s']):,.0f} tokens/s" in lines[2]
    assert "without dry_run=true" in lines[-1]
    assert not (tmp_path / "sweeps" / "70b" / "ledger.sqlite").exists() and not (tmp_path / "mlflow.db").exists()
