"""Writing a trial's launch files (launch.sh, ds_config.json, ...) into sweeps/<name>/trials/<hash>/."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Optional

from launcher.backends import LaunchSpec, render_launch
from launcher.config.schema import BackendConfig, RootConfig
from launcher.core.layout import Layout
from launcher.core.names import is_cpu_standin
from launcher.core.record import TrialRecord
from launcher.run.folder import SweepFolder


def mem_limit_mb(cfg: RootConfig) -> int:
    """On the CPU stand-in the workload enforces the per-rank capacity itself (a real allocator OOM)."""
    if not is_cpu_standin(cfg.cluster.gpu):
        return 0
    return int(cfg.cluster.gpu_mem_gb * 1e9 / 2**20)  # the workload counts MiB


def spec_for(cfg: RootConfig, layout: Layout, out_dir: Path, backend: Optional[BackendConfig] = None) -> LaunchSpec:
    """The launch of one layout, run from `out_dir`, with the executor's environment exported by the script itself
    (so the script also runs on its own). `backend` overrides cfg.backend (e.g. a full-length run's iterations)."""
    backend = backend or cfg.backend
    if not backend.python:  # the launcher's own interpreter, as submitit runs itself on the nodes
        backend = replace(backend, python=sys.executable)
    return render_launch(cfg.model, cfg.cluster, backend, layout, trial_dir=str(out_dir.resolve()),
                         env=cfg.executor.env, mem_limit_mb=mem_limit_mb(cfg))


def write(cfg: RootConfig, folder: SweepFolder, record: TrialRecord) -> Path:
    """Render and write the trial's files; returns the launch script each node runs."""
    out = folder.trial(record.config_hash)
    spec = spec_for(cfg, record.layout, out)
    out.mkdir(parents=True, exist_ok=True)
    for name, content in spec.files.items():
        (out / name).write_text(content)
    script = out / "launch.sh"
    script.write_text(spec.script)
    script.chmod(0o755)
    return script
