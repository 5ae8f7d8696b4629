"""Before a SLURM sweep marks anything: is SLURM reachable, and does it accept the sweep's largest job?

Without this, a SLURM that is installed but not reachable (no controller, SLURM_CONF pointing at a missing file)
showed up only at submit time: every trial marked, submitted, refused and recorded as failed (or each command
retrying for 60 s per call), and a report and an MLflow experiment written about nothing. Here every problem is
one SubmissionError (exit 2) naming what failed and the fix, raised before the sweep folder, the ledger or MLflow
is touched. The checks, in order, each with a short timeout:

1. SLURM's commands are on PATH (sbatch, sacct, scancel, scontrol);
2. SLURM_CONF, when set, is a file (SLURM's commands retry a missing one for 60 s);
3. the controller answers `scontrol ping`;
4. the partition exists and is up (`scontrol show partition`);
5. `sbatch --test-only` accepts each largest trial shape (nodes x GPUs per node, the time limit, the account,
   qos, constraint, reservation and extra sbatch options the jobs will carry): nothing is queued.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

from launcher.config.schema import RootConfig
from launcher.core.errors import SubmissionError
from launcher.core.layout import Layout
from launcher.core.names import ExecutorKind
from launcher.run import network
from launcher.run.executor import job_options

COMMANDS = ("sbatch", "sacct", "scancel", "scontrol")
"""What the launcher runs itself for executor=slurm (scontrol: this preflight)."""
PING_TIMEOUT_S = 10.0
"""A controller that does not answer a ping within this is as good as down for a sweep."""
TEST_ONLY_TIMEOUT_S = 30.0
"""sbatch retries an unreachable controller for about 18 s before giving up (measured on SLURM 22.05)."""
FIX_REACH = ("run on a login node of the cluster (or load its slurm module / export its SLURM_CONF), check that "
             "slurmctld is up (`scontrol ping`), or use executor=local")


@dataclass(frozen=True, order=True)
class Shape:
    """One job's request: what `sbatch --test-only` is asked about."""

    nodes: int
    gpus_per_node: int

    def label(self) -> str:
        return f"{self.nodes} node(s) x {self.gpus_per_node} GPU(s)"


def largest_shapes(shapes: Iterable[Shape]) -> list[Shape]:
    """The shapes no other shape covers on both counts (usually one): if SLURM takes these, it takes the rest."""
    unique = sorted(set(shapes))
    return [s for s in unique if not any(o != s and o.nodes >= s.nodes and o.gpus_per_node >= s.gpus_per_node
                                         for o in unique)]


def sweep_shapes(cfg: RootConfig, layouts: Sequence[Layout]) -> list[Shape]:
    """What the sweep will ask SLURM for: every planned trial's shape (`layouts`: the plan's kept trials'), and the
    network probe's job."""
    shapes = [Shape(layout.nodes, layout.gpus_per_node) for layout in layouts]
    if network.probe_enabled(cfg) and layouts:
        shapes.append(Shape(network.probe_nodes(cfg, max(layout.nodes for layout in layouts)),
                            cfg.cluster.gpus_per_node))
    return shapes


def check_slurm(cfg: RootConfig, layouts: Callable[[], Sequence[Layout]]) -> None:
    """Raise SubmissionError on the first check that fails (module docstring); nothing for executor=local.
    `layouts`: gives the plan's kept trials' (asked only for executor=slurm: a stored plan reads them from the
    ledger)."""
    if cfg.executor.name is not ExecutorKind.slurm:
        return
    check_reachable(cfg, sweep_shapes(cfg, layouts()))


def check_reachable(cfg: RootConfig, shapes: Iterable[Shape]) -> None:
    """The checks of the module docstring, in order; the first that fails raises SubmissionError."""
    missing = [cmd for cmd in COMMANDS if shutil.which(cmd) is None]
    if missing:
        _fail(f"{', '.join(missing)} not found on PATH", FIX_REACH)
    conf = os.environ.get("SLURM_CONF")
    if conf and not Path(conf).is_file():
        _fail(f"SLURM_CONF={conf} is not a file (SLURM's commands would retry it for a minute each)",
              "point SLURM_CONF at the cluster's slurm.conf, or unset it to use the installed one")
    _ping()
    if cfg.cluster.partition:
        _check_partition(cfg.cluster.partition)
    for shape in largest_shapes(shapes):
        _test_only(cfg, shape)


def _fail(what: str, fix: str) -> NoReturn:
    raise SubmissionError(f"SLURM preflight failed, nothing was submitted or recorded: {what}. Fix: {fix}")


def _run(argv: Sequence[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    """argv, its output captured; a timeout or a command that cannot start becomes the preflight's failure."""
    try:
        return subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired as exc:
        said = _first_line(_text(exc.stderr) or _text(exc.stdout))
        _fail(f"`{' '.join(argv[:3])}` did not answer within {timeout_s:g} s" + (f" ({said})" if said else ""),
              FIX_REACH)
    except OSError as exc:
        _fail(f"`{argv[0]}` could not run ({exc.strerror})", FIX_REACH)


def _ping() -> None:
    proc = _run(["scontrol", "ping"], PING_TIMEOUT_S)
    out = proc.stdout + proc.stderr
    if proc.returncode != 0 or "DOWN" in out or "UP" not in out:
        said = _first_line(out) or f"exit {proc.returncode}"
        _fail(f"the SLURM controller does not answer (`scontrol ping`: {said})", FIX_REACH)


def _check_partition(partition: str) -> None:
    proc = _run(["scontrol", "show", "partition", "-o"], PING_TIMEOUT_S)
    table = {}
    for line in proc.stdout.splitlines():
        fields = dict(part.split("=", 1) for part in line.split() if "=" in part)
        if "PartitionName" in fields:
            table[fields["PartitionName"]] = fields.get("State", "UP")
    if proc.returncode != 0 and not table:
        _fail(f"`scontrol show partition` failed: {_first_line(proc.stderr + proc.stdout)}", FIX_REACH)
    if partition not in table:
        known = ", ".join(sorted(table)) or "none"
        _fail(f"partition {partition!r} (cluster.partition) does not exist on this cluster (its partitions: {known})",
              "set cluster.partition=NAME to one of them (or in your cluster config)")
    if table[partition] != "UP":
        _fail(f"partition {partition!r} (cluster.partition) is {table[partition]}: it starts no jobs",
              "ask the cluster's admins, or set cluster.partition=NAME to a partition that is UP")


def sbatch_test_argv(cfg: RootConfig, shape: Shape) -> list[str]:
    """`sbatch --test-only` with the options a trial's array job gets (launcher.run.executor.SlurmRunner)."""
    ex = cfg.executor
    argv = ["sbatch", "--test-only", f"--nodes={shape.nodes}", "--ntasks-per-node=1", f"--time={ex.timeout_min}",
            "--job-name=parasweep-preflight", "--output=/dev/null"]
    if shape.gpus_per_node:
        argv.append(f"--gpus-per-node={shape.gpus_per_node}")
    options = {"partition": cfg.cluster.partition, "reservation": ex.reservation, **job_options(ex),
               **{key: str(value) for key, value in ex.sbatch_args.items()}}
    argv += [f"--{key}={value}" for key, value in options.items() if value]
    if ex.exclusive:
        argv.append("--exclusive")
    return [*argv, "--wrap=true"]


def _test_only(cfg: RootConfig, shape: Shape) -> None:
    proc = _run(sbatch_test_argv(cfg, shape), TEST_ONLY_TIMEOUT_S)
    if proc.returncode == 0:
        return
    said = "; ".join(line.strip() for line in proc.stderr.splitlines() if line.strip())[:400]
    _fail(f"SLURM would refuse the sweep's largest job ({shape.label()}, {cfg.executor.timeout_min} min on partition "
          f"{cfg.cluster.partition!r}): `sbatch --test-only` said: {said or f'exit {proc.returncode}'}",
          "fit the grid to the partition (grid.nodes / grid.gpus, cluster.nodes, cluster.gpus_per_node), shorten "
          "executor.timeout_min to the partition's MaxTime, or fix executor.account / qos / constraint / "
          "reservation / sbatch_args")


def _text(data: object) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else str(data or "")


def _first_line(text: str) -> str:
    return next((line.strip() for line in text.splitlines() if line.strip()), "")[:300]
