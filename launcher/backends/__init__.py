"""Backends: the programs a trial runs, behind one protocol.

    backend = get_backend(cfg.backend.name)
    problems = backend.problems(cfg.backend, cfg.model)        # settings a real run still needs (paths, tokenizer)
    spec = backend.render(model, cluster, cfg.backend, layout, trial_dir="/sweeps/x/trials/abc", env={...})
    # the lead writes spec.files into trial_dir, then runs spec.script once per node

What a backend refuses is not found by rendering: it is the rules table (launcher.plan.rules) filtered to the
backend. Backends are named by launcher.core.names.BackendName (an enum: nothing compares their names as text).
Pure: nothing here runs a process or writes a file.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from launcher.backends import megatron_deepspeed, megatron_lm, torch_workload
from launcher.backends.launch import LaunchSpec, one_line_command
from launcher.config.schema import BackendConfig, ClusterConfig, ModelConfig
from launcher.core.errors import ConfigError
from launcher.core.layout import Layout
from launcher.core.names import BackendName
from launcher.plan.rules import Issue

__all__ = ["Backend", "LaunchSpec", "get_backend", "render_launch", "launch_command", "problems_of", "require_runnable",
           "REGISTRY"]


class Backend(Protocol):
    name: BackendName
    log_format: str
    """How analysis reads the job's log: 'workload' (the embedded GPT's result line) or 'megatron' (iteration,
    memory and throughput lines)."""
    reports_planner_flops: bool
    """True when the program's FLOP rates follow the planner's conventions (the embedded workload prints both);
    False: the measured rates are the predicted FLOPs over the measured step time (analysis/logs/judge.py)."""

    def problems(self, backend: BackendConfig, model: ModelConfig) -> list[ConfigError]:
        """Settings a real run still needs (checkout, data, tokenizer files, placeholders): empty when it can run."""

    def refusals(self, model: ModelConfig, cluster: ClusterConfig, layout: Layout) -> tuple[Issue, ...]:
        """Why the program cannot run this layout (the rules it enforces), empty when it can."""

    def render(self, model: ModelConfig, cluster: ClusterConfig, backend: BackendConfig, layout: Layout, *,
               trial_dir: str, env: Mapping[str, str] = ..., mem_limit_mb: int = 0) -> LaunchSpec:
        """The trial's per-node launch. Raises ConfigError for a refused layout or a setting it cannot run."""

    def full_length(self, backend: BackendConfig, iterations: int) -> BackendConfig:
        """The settings of a full-length training run of `iterations` steps at the benchmarked configuration."""

    def full_length_note(self, backend: BackendConfig, iterations: int) -> str:
        """What changed from the benchmark in that run, and what a production run still has to add."""


REGISTRY: dict[BackendName, Backend] = {b.name: b for b in (torch_workload.BACKEND, megatron_deepspeed.BACKEND,
                                                             megatron_lm.BACKEND)}
assert set(REGISTRY) == set(BackendName), "every BackendName has its Backend"


def get_backend(name: BackendName | str) -> Backend:
    try:
        return REGISTRY[BackendName(name)]
    except ValueError:
        raise ConfigError("backend.name", name, f"use one of {', '.join(REGISTRY)}") from None


def problems_of(backend: BackendConfig, model: ModelConfig) -> list[ConfigError]:
    """What the configured program still needs before it can really run (checkout, data, tokenizer files): a real
    run stops on the first (require_runnable); a dry run plans anyway and lists them as notes."""
    return get_backend(backend.name).problems(backend, model)


def require_runnable(backend: BackendConfig, model: ModelConfig) -> None:
    """Raise the first thing the program still needs before a real run (nothing when it can run)."""
    problems = problems_of(backend, model)
    if problems:
        raise problems[0]


def render_launch(model: ModelConfig, cluster: ClusterConfig, backend: BackendConfig, layout: Layout, *,
                  trial_dir: str, env: Mapping[str, str] | None = None, mem_limit_mb: int = 0) -> LaunchSpec:
    """The trial's launch for backend.name (see Backend.render)."""
    return get_backend(backend.name).render(model, cluster, backend, layout, trial_dir=trial_dir, env=env or {},
                                            mem_limit_mb=mem_limit_mb)


def launch_command(spec: LaunchSpec) -> str:
    """A one-line human command for the trial (best.json / export); see launch.one_line_command."""
    return one_line_command(spec)
