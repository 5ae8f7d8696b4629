"""Backends: render how one trial is launched (a per-node bash script, files for the trial folder, environment).

    spec = render_launch(model, cluster, backend, layout, trial_dir="/sweeps/x/trials/abc")
    # the lead writes spec.files into trial_dir, then runs spec.script once per node

Pure functions: nothing here runs a process or writes a file.
"""

from __future__ import annotations

from typing import Callable

from launcher.backends import megatron_deepspeed, megatron_lm, torch_workload
from launcher.backends.launch import LaunchSpec, one_line_command
from launcher.errors import ConfigError
from launcher.layout import Layout
from launcher.schema import BackendConfig, ClusterConfig, ModelConfig

__all__ = ["LaunchSpec", "render_launch", "launch_command", "RENDERERS"]

Renderer = Callable[..., LaunchSpec]
RENDERERS: dict[str, Renderer] = {
    "torch": torch_workload.render,
    "megatron_deepspeed": megatron_deepspeed.render,
    "megatron_lm": megatron_lm.render,
}


def render_launch(model: ModelConfig, cluster: ClusterConfig, backend: BackendConfig, layout: Layout, *,
                  trial_dir: str, mem_limit_mb: int = 0) -> LaunchSpec:
    """The trial's launch for backend.name. Raises ConfigError for a setting the program cannot run."""
    renderer = RENDERERS.get(backend.name)
    if renderer is None:
        raise ConfigError("backend.name", backend.name, f"use one of {', '.join(RENDERERS)}")
    return renderer(model, cluster, backend, layout, trial_dir=trial_dir, mem_limit_mb=mem_limit_mb)


def launch_command(spec: LaunchSpec) -> str:
    """A one-line human command for the trial (best.json / export); see launch.one_line_command."""
    return one_line_command(spec)
