"""What every backend shares: refusals from the rules table, the checks before rendering, full-length runs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from launcher.backends.launch import LaunchSpec
from launcher.config.schema import BackendConfig, ClusterConfig, ModelConfig
from launcher.core.errors import ConfigError
from launcher.core.layout import Layout
from launcher.core.names import BackendName
from launcher.plan.rules import Issue, check


class BackendBase:
    """Subclasses set `name` and implement `launch` (and `problems` when they have settings to check)."""

    name: BackendName
    log_format = "megatron"
    reports_planner_flops = False

    def problems(self, backend: BackendConfig, model: ModelConfig) -> list[ConfigError]:
        return []

    def refusals(self, model: ModelConfig, cluster: ClusterConfig, layout: Layout) -> tuple[Issue, ...]:
        return check(model, cluster, layout, backend=self.name).reasons

    def render(self, model: ModelConfig, cluster: ClusterConfig, backend: BackendConfig, layout: Layout, *,
               trial_dir: str, env: Mapping[str, str] = {}, mem_limit_mb: int = 0) -> LaunchSpec:
        """Refuse what the rules refuse and what the settings cannot run (the planner has already filtered the
        layouts; this guards direct callers), then render."""
        refused = self.refusals(model, cluster, layout)
        if refused:
            raise ConfigError(f"layout.{refused[0].code}", layout.label(), refused[0].message)
        problems = self.problems(backend, model)
        if problems:
            raise problems[0]
        return self.launch(model, cluster, backend, layout, trial_dir=trial_dir, env=dict(env),
                           mem_limit_mb=mem_limit_mb)

    def launch(self, model: ModelConfig, cluster: ClusterConfig, backend: BackendConfig, layout: Layout, *,
               trial_dir: str, env: dict[str, str], mem_limit_mb: int) -> LaunchSpec:
        raise NotImplementedError

    def full_length(self, backend: BackendConfig, iterations: int) -> BackendConfig:
        """No warm-up, `iterations` measured steps: Megatron renders it as --train-iters N --exit-interval N, the
        embedded workload as --warmup-iters 0 --measure-iters N; everything else is the benchmarked setup."""
        return replace(backend, warmup_iters=0, measure_iters=iterations)

    def full_length_note(self, backend: BackendConfig, iterations: int) -> str:
        return (f"--train-iters {iterations} --exit-interval {iterations} (benchmark: {backend.warmup_iters}+"
                f"{backend.measure_iters}); kept from the benchmark: no evaluation, constant --lr, no --save/--load: "
                "add checkpointing, an LR schedule and evaluation before a production run")
