"""The SLURM preflight against fake SLURM commands on PATH: each failure is one message naming what failed and the
fix (exit 2 from the command line), before the sweep folder, the ledger or MLflow exist."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from launcher.__main__ import main
from launcher.core.errors import SubmissionError
from launcher.run import slurm_preflight
from launcher.run.slurm_preflight import Shape, check_reachable, largest_shapes, sbatch_test_argv

UP = "echo 'Slurmctld(primary) at ctl is UP'"
PARTITIONS = ("echo 'PartitionName=debug Nodes=n[1-2] State=UP TotalNodes=2'; "
              "echo 'PartitionName=maint Nodes=n3 State=DOWN TotalNodes=1'")
ACCEPT = "echo \"$@\" >> \"$(dirname \"$0\")/sbatch.calls\"; echo 'sbatch: Job 7 to start at now'"


def fake_slurm(folder: Path, monkeypatch, *, ping: str = UP, show: str = PARTITIONS, sbatch: str = ACCEPT,
               leave_out: tuple[str, ...] = ()) -> Path:
    """sbatch, sacct, scancel and scontrol as shell scripts in `folder`, alone on PATH (with the tools they use)."""
    folder.mkdir(parents=True, exist_ok=True)
    scontrol = f'if [ "$1" = ping ]; then {ping}; else {show}; fi'
    for name, body in (("sbatch", sbatch), ("sacct", "true"), ("scancel", "true"), ("scontrol", scontrol)):
        if name in leave_out:
            continue
        path = folder / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)
    tools = folder / "tools"  # what the scripts use, and no real SLURM command (this machine may have them)
    tools.mkdir(exist_ok=True)
    for tool in ("sleep", "dirname"):
        link = tools / tool
        if not link.exists():
            link.symlink_to(shutil.which(tool) or f"/bin/{tool}")
    monkeypatch.setenv("PATH", f"{folder}:{tools}")
    monkeypatch.delenv("SLURM_CONF", raising=False)
    return folder


def slurm_cfg(load, *overrides: str):
    return load("+sweep=tiny", "executor=slurm", "cluster.partition=debug", *overrides)


ONE_NODE = (Shape(1, 2),)


def failure(cfg, shapes=ONE_NODE) -> str:
    with pytest.raises(SubmissionError) as info:
        check_reachable(cfg, shapes)
    assert info.value.exit_code == 2
    return str(info.value)


def test_a_reachable_cluster_passes_and_is_asked_about_the_largest_shape(load, tmp_path, monkeypatch):
    bin_dir = fake_slurm(tmp_path / "bin", monkeypatch)
    cfg = slurm_cfg(load, "executor.timeout_min=7", "executor.account=proj", "+executor.sbatch_args={mail-type: FAIL}")
    check_reachable(cfg, [Shape(1, 2), Shape(2, 2), Shape(1, 1)])
    (call,) = (bin_dir / "sbatch.calls").read_text().splitlines()
    args = call.split()
    assert "--test-only" in args and "--nodes=2" in args and "--gpus-per-node=2" in args
    assert {"--time=7", "--partition=debug", "--account=proj", "--mail-type=FAIL", "--exclusive"} <= set(args)


def test_largest_shapes_keeps_only_what_nothing_covers():
    assert largest_shapes([Shape(1, 8), Shape(2, 8), Shape(2, 4), Shape(1, 2)]) == [Shape(2, 8)]
    assert largest_shapes([Shape(4, 1), Shape(1, 8), Shape(4, 1)]) == [Shape(1, 8), Shape(4, 1)]
    assert largest_shapes([]) == []


def test_a_missing_command_is_named(load, tmp_path, monkeypatch):
    fake_slurm(tmp_path / "bin", monkeypatch, leave_out=("scontrol",))
    message = failure(slurm_cfg(load))
    assert "scontrol not found on PATH" in message and "executor=local" in message


def test_slurm_conf_pointing_at_nothing_fails_at_once(load, tmp_path, monkeypatch):
    fake_slurm(tmp_path / "bin", monkeypatch, ping="sleep 30")  # what the real commands do: retry for a minute
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "missing" / "slurm.conf"))
    started = time.monotonic()
    message = failure(slurm_cfg(load))
    assert time.monotonic() - started < 5
    assert f"SLURM_CONF={tmp_path / 'missing' / 'slurm.conf'} is not a file" in message and "unset it" in message


def test_a_controller_that_is_down_is_named(load, tmp_path, monkeypatch):
    fake_slurm(tmp_path / "bin", monkeypatch, ping="echo 'Slurmctld(primary) at ctl is DOWN'; exit 1")
    message = failure(slurm_cfg(load))
    assert "controller does not answer" in message and "is DOWN" in message and "scontrol ping" in message


def test_a_controller_that_does_not_answer_times_out(load, tmp_path, monkeypatch):
    fake_slurm(tmp_path / "bin", monkeypatch,
               ping="echo 'error: Unable to contact slurm controller, retrying' >&2; exec sleep 30")
    monkeypatch.setattr(slurm_preflight, "PING_TIMEOUT_S", 0.5)
    started = time.monotonic()
    message = failure(slurm_cfg(load))
    assert time.monotonic() - started < 10
    assert "did not answer within 0.5 s" in message


def test_a_missing_partition_lists_the_existing_ones(load, tmp_path, monkeypatch):
    fake_slurm(tmp_path / "bin", monkeypatch)
    message = failure(load("+sweep=tiny", "executor=slurm", "cluster.partition=gpu"))
    assert "partition 'gpu' (cluster.partition) does not exist" in message
    assert "debug, maint" in message and "cluster.partition=NAME" in message


def test_a_partition_that_is_down_is_named(load, tmp_path, monkeypatch):
    fake_slurm(tmp_path / "bin", monkeypatch)
    message = failure(load("+sweep=tiny", "executor=slurm", "cluster.partition=maint"))
    assert "partition 'maint' (cluster.partition) is DOWN" in message


def test_a_job_slurm_would_refuse_names_the_shape_and_sbatchs_words(load, tmp_path, monkeypatch):
    fake_slurm(tmp_path / "bin", monkeypatch, sbatch="echo 'allocation failure: Requested node configuration is not "
                                                     "available' >&2; exit 1")
    message = failure(slurm_cfg(load, "executor.timeout_min=9"), [Shape(3, 8)])
    assert "3 node(s) x 8 GPU(s), 9 min on partition 'debug'" in message
    assert "Requested node configuration is not available" in message and "grid.nodes" in message


def test_the_sbatch_test_carries_every_option_the_jobs_carry(load):
    cfg = slurm_cfg(load, "executor.qos=high", "executor.constraint=a100", "executor.reservation=bench",
                    "executor.exclude_nodes=[n9,n3]", "executor.mem_gb=64", "executor.cpus_per_task=4",
                    "executor.exclusive=false")
    args = sbatch_test_argv(cfg, Shape(2, 0))
    assert {"--qos=high", "--constraint=a100", "--reservation=bench", "--exclude=n3,n9", "--mem=64G",
            "--cpus-per-task=4", "--nodes=2"} <= set(args)
    assert "--exclusive" not in args and not any(a.startswith("--gpus-per-node") for a in args)


def test_the_command_line_refuses_before_anything_is_created(in_tmp, tmp_path, monkeypatch, capsys):
    fake_slurm(tmp_path / "bin", monkeypatch, ping="echo 'Slurmctld(primary) at ctl is DOWN'; exit 1")
    code = main(["+sweep=tiny", "executor=slurm"])
    err = capsys.readouterr().err
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and "SLURM preflight failed" in err, err
    assert not (in_tmp / "sweeps" / "tiny" / "ledger.sqlite").exists()
    assert not (in_tmp / "mlflow.db").exists() and not (in_tmp / "mlruns").exists()


def test_the_local_executor_has_no_preflight(load, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no SLURM at all
    slurm_preflight.check_slurm(load("+sweep=tiny"), None)  # type: ignore[arg-type]  # never looked at
