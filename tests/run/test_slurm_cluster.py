"""The local multi-node SLURM cluster (tests/slurm/localcluster.sh) behaves like a real one.

What the sweeps rely on: K idle nodes with gpu:8 GRES, per-node hostnames, job arrays with a
concurrency limit, multi-node torchrun rendezvous, cancellation visible in sacct, and submitit.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest
from slurm.cluster import parse_exports, skip_reason

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(600)]

NODES = 2
TERMINAL_FAILURES = ("FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "CANCELLED", "BOOT_FAIL", "DEADLINE")


# ---------------------------------------------------------------- helpers
def run(args: list[str], env: dict[str, str], timeout_s: float = 60.0) -> str:
    proc = subprocess.run(args, env={**os.environ, **env}, capture_output=True, text=True,
                          timeout=timeout_s, check=False)
    assert proc.returncode == 0, f"{args} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def wait_until(predicate: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {timeout_s} s waiting for {what}"
        time.sleep(0.5)


def sacct_rows(job_id: str, env: dict[str, str], fields: str = "JobID,State") -> list[dict[str, str]]:
    """Allocation-level sacct rows (-X) of a job, or of every task of an array job."""
    names = fields.split(",")
    out = run(["sacct", "-n", "-X", "-P", "-j", job_id, "-o", fields], env)
    return [dict(zip(names, line.split("|"))) for line in out.splitlines() if line.strip()]


def wait_for_states(job_id: str, env: dict[str, str], expected_ids: set[str], timeout_s: float,
                    fields: str = "JobID,State") -> list[dict[str, str]]:
    """Wait until sacct lists exactly `expected_ids`, all in a final state; return the rows."""
    rows: list[dict[str, str]] = []

    def done() -> bool:
        nonlocal rows
        rows = sacct_rows(job_id, env, fields)
        states = {r["JobID"]: r["State"] for r in rows}
        return set(states) == expected_ids and all(
            s == "COMPLETED" or s.startswith(TERMINAL_FAILURES) for s in states.values())

    wait_until(done, timeout_s, f"job {job_id} to finish (last sacct rows: {rows})")
    return rows


def sbatch(args: list[str], env: dict[str, str]) -> str:
    return run(["sbatch", "--parsable", "-p", "debug", *args], env).strip().split(";")[0]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def max_concurrent(intervals: list[tuple[datetime, datetime]]) -> int:
    """Most intervals [start, end) open at one instant (a start coinciding with an end does not overlap)."""
    return max(sum(1 for s, e in intervals if s <= t < e) for t, _ in intervals)


# ---------------------------------------------------------------- pure helpers (no cluster)
def test_skip_only_when_slurm_absent_and_not_required() -> None:
    assert skip_reason(None, {}) is not None
    assert skip_reason(None, {"PARASWEEP_REQUIRE_SLURM": "1"}) is None
    assert skip_reason("/usr/bin/sinfo", {}) is None


def test_parse_exports_reads_only_export_lines() -> None:
    text = "noise\nexport SLURM_CONF=/x/slurm.conf\nexport A='b=c'\n"
    assert parse_exports(text) == {"SLURM_CONF": "/x/slurm.conf", "A": "b=c"}


def test_max_concurrent_counts_touching_intervals_as_sequential() -> None:
    t = [datetime(2024, 1, 1, 0, 0, s) for s in range(6)]
    assert max_concurrent([(t[0], t[2]), (t[2], t[4]), (t[1], t[3])]) == 2


# ---------------------------------------------------------------- the cluster
def test_sinfo_shows_idle_nodes_with_fake_gpus(slurm_env: dict[str, str]) -> None:
    def nodes() -> dict[str, tuple[str, str]]:
        out = run(["sinfo", "-h", "-N", "-p", "debug", "-o", "%N|%T|%G"], slurm_env)
        return {n: (state, gres) for n, state, gres in (line.split("|") for line in out.split())}

    # Jobs of earlier tests may still be completing.
    wait_until(lambda: all(state == "idle" for state, _ in nodes().values()), 60, "nodes to be idle")
    assert nodes() == {f"n{k}": ("idle", "gpu:8") for k in range(1, NODES + 1)}
    assert run(["sinfo", "-h", "-o", "%P"], slurm_env).split() == ["debug*"]


def test_srun_on_two_nodes_sees_each_node_hostname(slurm_env: dict[str, str]) -> None:
    out = run(["srun", "-p", "debug", "-N2", "--ntasks-per-node=1", "hostname"], slurm_env)
    assert sorted(out.split()) == ["n1", "n2"]


def test_array_job_tasks_complete_with_concurrency_limit(slurm_env: dict[str, str], tmp_path: Path) -> None:
    job_id = sbatch(["--array=0-3%2", "-o", f"{tmp_path}/%A_%a.out",
                     "--wrap", "echo task=$SLURM_ARRAY_TASK_ID; sleep 2"], slurm_env)
    rows = wait_for_states(job_id, slurm_env, {f"{job_id}_{i}" for i in range(4)}, 120,
                           "JobID,State,Start,End")
    assert {r["State"] for r in rows} == {"COMPLETED"}, rows
    for i in range(4):
        assert (tmp_path / f"{job_id}_{i}.out").read_text().strip() == f"task={i}"
    intervals = [(datetime.fromisoformat(r["Start"]), datetime.fromisoformat(r["End"])) for r in rows]
    # 2 nodes x 8 CPUs could run all 4 at once: only the %2 limit keeps it at 2.
    assert max_concurrent(intervals) <= 2, rows


ALLREDUCE_PY = """
import socket
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
value = torch.tensor([10.0 ** rank])
dist.all_reduce(value)
print(f"rank={rank} world={dist.get_world_size()} host={socket.gethostname()} sum={value.item():g}", flush=True)
dist.destroy_process_group()
"""


def torchrun_command() -> str:
    torchrun = Path(sys.executable).with_name("torchrun")
    return str(torchrun) if torchrun.exists() else f"{sys.executable} -m torch.distributed.run"


def test_torchrun_gloo_all_reduce_across_two_nodes(slurm_env: dict[str, str], tmp_path: Path) -> None:
    (tmp_path / "allreduce.py").write_text(ALLREDUCE_PY)
    port = free_port()  # other work on this machine may hold a fixed port such as 29500
    (tmp_path / "job.sh").write_text(f"""#!/bin/bash
MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n1)
srun {torchrun_command()} --nnodes 2 --nproc-per-node 1 --rdzv-backend c10d \\
    --rdzv-endpoint "$MASTER_ADDR:{port}" --rdzv-id "$SLURM_JOB_ID" {tmp_path}/allreduce.py
""")
    job_id = sbatch(["-N2", "--ntasks-per-node=1", "-t", "5", "-o", f"{tmp_path}/out.txt",
                     f"{tmp_path}/job.sh"], slurm_env)
    rows = wait_for_states(job_id, slurm_env, {job_id}, 300)
    output = (tmp_path / "out.txt").read_text()
    assert rows[0]["State"] == "COMPLETED", output
    ranks = sorted(re.findall(r"rank=(\d) world=(\d) host=(\S+) sum=(\S+)", output))
    # Each rank adds 10**rank, so 11 proves both contributions arrived on both ranks.
    assert [(rank, world, total) for rank, world, _, total in ranks] == [("0", "2", "11"), ("1", "2", "11")], output
    assert {host for _, _, host, _ in ranks} == {"n1", "n2"}, output


def test_scancel_of_running_job_shows_cancelled(slurm_env: dict[str, str]) -> None:
    job_id = sbatch(["-o", "/dev/null", "--wrap", "sleep 300"], slurm_env)

    def running() -> bool:
        return run(["squeue", "-h", "-j", job_id, "-o", "%T"], slurm_env).strip() == "RUNNING"

    wait_until(running, 60, f"job {job_id} to run")
    run(["scancel", job_id], slurm_env)
    rows = wait_for_states(job_id, slurm_env, {job_id}, 60)
    assert rows[0]["State"].startswith("CANCELLED"), rows


def test_submitit_round_trip(slurm_env: dict[str, str], tmp_path: Path,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    import submitit  # heavy: only where used

    for key, value in slurm_env.items():
        monkeypatch.setenv(key, value)  # submitit calls sbatch/sacct with this process's environment

    def answer() -> int:  # nested, so cloudpickle ships it by value (the job cannot import this module)
        return 42

    executor = submitit.AutoExecutor(folder=tmp_path, cluster="slurm")
    executor.update_parameters(slurm_partition="debug", timeout_min=5, slurm_signal_delay_s=30)
    job = executor.submit(answer)
    assert job.result() == 42
    # The result pickle can land before slurmdbd has recorded the end of the job: wait for accounting.
    wait_until(lambda: job.get_info(mode="force")["State"] == "COMPLETED", 60, "sacct to say COMPLETED")
