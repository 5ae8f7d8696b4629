"""Export of the winner into sweeps/<name>/export/: launch.sh, its side files (ds_config.json), the one-line
command, and train.sbatch, a full-length training job at that configuration on the sweep's cluster.

Pure text builders (`sbatch_script`, `slurm_time`, `time_limit_s`) and one writer (`write_export`). The launch
text is rendered by the caller (the launcher's backends) and arrives here as plain strings.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from launcher.core.files import write_atomic
from launcher.core.layout import as_layout
from launcher.core.names import is_cpu_standin

TIME_MARGIN = 1.2          # the measured step time is a short benchmark's median: leave 20% for variance and I/O
MIN_TIME_S = 10 * 60       # never ask SLURM for less than 10 minutes
LAUNCH = "launch.sh"
SBATCH = "train.sbatch"
COMMAND = "command.txt"
BENCHMARK = "benchmark_launch.sh"


@dataclass(frozen=True)
class SbatchSpec:
    job_name: str
    partition: str
    nodes: int
    gpus_per_node: int
    """GPUs to request per node (0: none, on a CPU cluster; see gpus_to_request)."""
    time_s: float
    workdir: str                      # --chdir: the export folder, where launch.sh lies
    exclusive: bool = True
    account: str = ""
    qos: str = ""
    constraint: str = ""
    reservation: str = ""
    cpus_per_task: int = 0
    mem_gb: int = 0
    exclude: Sequence[str] = ()
    extra: dict = field(default_factory=dict)      # executor.sbatch_args, e.g. {"mail-type": "FAIL"}
    setup: Sequence[str] = ()                      # executor.setup: module load, venv activation
    srun_args: Sequence[str] = ()
    comments: Sequence[str] = ()                   # what the reader must know (what changed from the benchmark)


def gpus_to_request(cluster: dict, gpus_per_node: int) -> int:
    """GPUs per node for #SBATCH --gpus-per-node: none on a CPU cluster (cluster.gpu 'cpu', e.g. local-cpu, whose
    ranks are processes that launch.sh starts itself); asking for GPUs there leaves the job pending forever."""
    return 0 if is_cpu_standin(str(cluster.get("gpu", ""))) else gpus_per_node


def slurm_time(seconds: float) -> str:
    """SLURM's D-HH:MM:SS, rounded up to whole minutes."""
    minutes = max(1, math.ceil(seconds / 60))
    days, minutes = divmod(minutes, 24 * 60)
    hours, minutes = divmod(minutes, 60)
    return f"{days}-{hours:02d}:{minutes:02d}:00"


def time_limit_s(step_time_s: Optional[float], iters: int, startup_s: float) -> float:
    """start-up + iters x measured step time x TIME_MARGIN, at least MIN_TIME_S."""
    if not step_time_s:
        return MIN_TIME_S
    return max(MIN_TIME_S, startup_s + iters * step_time_s * TIME_MARGIN)


def run_comments(best: dict, layout_label: str, sweep: str, cluster: dict, backend: dict, train_iters: int,
                 sbatch_path: str, changed: str) -> list[str]:
    """What a reader of train.sbatch must know: what runs, what the benchmark measured, what changed from it
    (`changed`: the backend's own words)."""
    b, m = backend, best["metrics"]
    step_s = m.get("step_time_s") or 0.0
    return [f"parasweep: full-length training run of the winner of sweep {sweep}: trial {best['config_hash']}, "
            f"{layout_label}, {as_layout(best['layout']).gpus} x {cluster['gpu']} on cluster {cluster['name']}.",
            f"Benchmark measured {m.get('tokens_per_s', 0):,.0f} tokens/s, {step_s:.3g} s/step, peak "
            f"{m.get('peak_mem_gb') or 0:.3g} of {cluster['gpu_mem_gb']:g} GB per GPU.",
            f"Changed from the benchmark trial: {changed}.",
            f"--time: start-up {b['startup_s']:g} s + {train_iters} iterations x {step_s:.3g} s x {TIME_MARGIN:g} "
            f"margin (at least {MIN_TIME_S // 60} min).",
            f"Submit with: sbatch {sbatch_path}"]


def _one_line(text: object) -> str:
    """A config value on an #SBATCH or comment line: a newline would end it and start a shell command."""
    return " ".join(str(text).split())


def sbatch_script(spec: SbatchSpec) -> str:
    """#SBATCH header (one task per node: launch.sh starts the node's ranks itself), setup, `srun bash launch.sh`."""
    options = [("job-name", spec.job_name), ("partition", spec.partition), ("nodes", spec.nodes),
               ("ntasks-per-node", 1)]
    options += [("gpus-per-node", spec.gpus_per_node)] if spec.gpus_per_node > 0 else []
    options += [("time", slurm_time(spec.time_s))]
    optional = [("account", spec.account), ("qos", spec.qos), ("constraint", spec.constraint),
                ("reservation", spec.reservation), ("cpus-per-task", spec.cpus_per_task),
                ("mem", f"{spec.mem_gb}G" if spec.mem_gb else ""), ("exclude", ",".join(spec.exclude))]
    options += [(k, v) for k, v in optional if v]
    options += [("output", f"{spec.workdir}/train-%j.out"), ("chdir", spec.workdir)]
    options += sorted((str(k), v) for k, v in spec.extra.items())
    lines = ["#!/bin/bash"] + [f"# {_one_line(c)}" if c else "#" for c in spec.comments]
    lines += [f"#SBATCH --{k}={_one_line(v)}" for k, v in options]
    if spec.exclusive:
        lines.append("#SBATCH --exclusive")
    lines += ["", "set -euo pipefail", *spec.setup]
    srun = shlex.join(["srun", *spec.srun_args, "bash", LAUNCH])  # each argument one word, never shell code
    lines += [f"# One task per node; {LAUNCH} finds its node rank and the rendezvous host from SLURM.", srun, ""]
    return "\n".join(lines)


def write_export(out_dir: Path, *, launch_script: str, files: dict[str, str], command: str, sbatch_text: str,
                 benchmark_script: Optional[str] = None) -> dict[str, Path]:
    """Write the export files; returns name -> path in the order a reader needs them (what to submit first)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    texts = {SBATCH: sbatch_text, LAUNCH: launch_script, **files, COMMAND: command.rstrip("\n") + "\n"}
    if benchmark_script is not None:
        texts[BENCHMARK] = benchmark_script
    written = {}
    for name, text in texts.items():
        path = out_dir / name
        write_atomic(path, text, mode=0o755 if name.endswith(".sh") or name == SBATCH else None)
        written[name] = path
    return written
