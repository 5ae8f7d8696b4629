"""Writing a trial's launch files (launch.sh, ds_config.json, ...) into sweeps/<name>/trials/<hash>/."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

from launcher.backends import LaunchSpec, render_launch
from launcher.layout import Layout
from launcher.ledger import TrialRecord
from launcher.schema import RootConfig


def trial_dir(folder: Path, config_hash: str) -> Path:
    return folder / "trials" / config_hash


def mem_limit_mb(cfg: RootConfig) -> int:
    """On the CPU stand-in the workload enforces the per-rank capacity itself (a real allocator OOM)."""
    return int(cfg.cluster.gpu_mem_gb * 1e9 / 2**20) if cfg.cluster.gpu == "cpu" else 0  # the workload counts MiB


def spec_for(cfg: RootConfig, folder: Path, layout: dict, config_hash: str) -> LaunchSpec:
    backend = cfg.backend
    if cfg.executor.name == "local" and backend.python == "python":
        backend = replace(backend, python=sys.executable)  # local jobs use this very interpreter
    env = dict(cfg.executor.env)
    spec = render_launch(cfg.model, cfg.cluster, backend, Layout.from_dict(layout),
                         trial_dir=str(trial_dir(folder, config_hash).resolve()), mem_limit_mb=mem_limit_mb(cfg))
    if env:
        spec = replace(spec, env={**env, **spec.env})
    return spec


def write(cfg: RootConfig, folder: Path, record: TrialRecord) -> Path:
    """Render and write the trial's files; returns the launch script each node runs."""
    spec = spec_for(cfg, folder, record.layout, record.config_hash)
    out = trial_dir(folder, record.config_hash)
    out.mkdir(parents=True, exist_ok=True)
    for name, content in spec.files.items():
        (out / name).write_text(content)
    script = out / "launch.sh"
    script.write_text(_with_env(spec))
    script.chmod(0o755)
    return script


def _with_env(spec: LaunchSpec) -> str:
    if not spec.env:
        return spec.script
    from launcher.backends.launch import env_exports

    lines = spec.script.split("\n")
    insert_at = 1 if lines and lines[0].startswith("#!") else 0
    return "\n".join(lines[:insert_at] + [env_exports(spec.env)] + lines[insert_at:])
