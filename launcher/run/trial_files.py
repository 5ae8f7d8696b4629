"""Writing a trial's launch files (launch.sh, ds_config.json, ...) into sweeps/<name>/trials/<hash>/."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Optional

from launcher.backends import LaunchSpec, render_launch
from launcher.layout import Layout
from launcher.run.ledger import TrialRecord
from launcher.schema import BackendConfig, RootConfig


def trial_dir(folder: Path, config_hash: str) -> Path:
    return folder / "trials" / config_hash


def mem_limit_mb(cfg: RootConfig) -> int:
    """On the CPU stand-in the workload enforces the per-rank capacity itself (a real allocator OOM)."""
    return int(cfg.cluster.gpu_mem_gb * 1e9 / 2**20) if cfg.cluster.gpu == "cpu" else 0  # the workload counts MiB


def spec_for(cfg: RootConfig, layout: dict, out_dir: Path, backend: Optional[BackendConfig] = None) -> LaunchSpec:
    """The launch of one layout, run from `out_dir`, with the executor's environment exported by the script itself
    (so the script also runs on its own). `backend` overrides cfg.backend (e.g. a full-length run's iterations)."""
    backend = backend or cfg.backend
    if cfg.executor.name == "local" and backend.python == "python":
        backend = replace(backend, python=sys.executable)  # local jobs use this very interpreter
    spec = render_launch(cfg.model, cfg.cluster, backend, Layout.from_dict(layout), trial_dir=str(out_dir.resolve()),
                         mem_limit_mb=mem_limit_mb(cfg))
    if not cfg.executor.env:
        return spec
    from launcher.backends.launch import env_exports

    # Right after `set -euo pipefail`: before the launcher and the program read the environment.
    script = spec.script.replace("set -euo pipefail\n", "set -euo pipefail\n" + env_exports(cfg.executor.env), 1)
    return replace(spec, script=script, env={**cfg.executor.env, **spec.env})


def write(cfg: RootConfig, folder: Path, record: TrialRecord) -> Path:
    """Render and write the trial's files; returns the launch script each node runs."""
    out = trial_dir(folder, record.config_hash)
    spec = spec_for(cfg, record.layout, out)
    out.mkdir(parents=True, exist_ok=True)
    for name, content in spec.files.items():
        (out / name).write_text(content)
    script = out / "launch.sh"
    script.write_text(spec.script)
    script.chmod(0o755)
    return script
