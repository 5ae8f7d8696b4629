"""What a plan is expected to cost in GPU-hours before any of it is spent: running every kept trial (exhaustive),
what the adaptive search typically spends (shares measured by the replay benchmark), the re-measurement of the
finalists (analysis.confirm_top), and the budget (plan.max_gpu_hours) it is held to. Pure: a config and a plan in,
numbers and lines of text out (the dry run prints them; the sweep loop enforces the budget, launcher.run.budget).
"""

from __future__ import annotations

from dataclasses import dataclass

from launcher.config.schema import RootConfig
from launcher.plan.planner import Plan, job_duration_s

ADAPTIVE_SHARE_TO_BEST = 0.166
"""GPU-hours the adaptive search (launcher/run/search.py) spent until it had measured a configuration within 2 % of
the best, as a share of running every trial: the group-balanced mean over the measured replay tables. Source:
`python tests/benchmarks/bench_search.py --draws 3 --jobs 2`, docs/search.md "Results", 26 Nov 2026 (16.6 %; 20.9 %
on the perturbed truths). Update it with that benchmark."""
ADAPTIVE_SHARE_TO_STOP = 0.70
"""GPU-hours the adaptive search spent until its stop rule (plan.stop_when_converged=true) ended the sweep, as a share
of running every trial. Source: `python tests/benchmarks/bench_replay.py`, summary line "spent 69.7 %", commit
262a639 of 2026-11-23 (bench_search does not report it)."""


@dataclass(frozen=True)
class CostForecast:
    """Predicted GPU-hours (job start-up plus the benchmark iterations, times the trial's GPUs)."""

    jobs: int
    exhaustive_gpu_hours: float
    """Every kept trial of the plan, once."""
    adaptive_gpu_hours: float
    """The adaptive search's typical spend: ADAPTIVE_SHARE_TO_STOP of exhaustive with the stop rule on; without it
    every trial runs (early stops aside), so the exhaustive figure."""
    to_best_gpu_hours: float
    """Typically spent when the best configuration is first measured (ADAPTIVE_SHARE_TO_BEST of exhaustive)."""
    confirm_gpu_hours: float
    """Re-measuring the finalists: analysis.confirm_top of the best predicted trials, repeats - 1 more runs each."""
    budget_gpu_hours: float
    """plan.max_gpu_hours (0: no budget)."""
    stop_rule: bool

    @property
    def expected_gpu_hours(self) -> float:
        """What the sweep as configured is expected to spend: the adaptive search plus the confirmation."""
        return self.adaptive_gpu_hours + self.confirm_gpu_hours


def forecast(cfg: RootConfig, plan: Plan) -> CostForecast:
    a = cfg.analysis
    top = plan.trials[: a.confirm_top]
    confirm = sum(job_duration_s(cfg, t.estimate) * t.layout.gpus for t in top) / 3600.0 * max(0, a.repeats - 1)
    stop_rule = cfg.plan.stop_when_converged
    adaptive = plan.gpu_hours * (ADAPTIVE_SHARE_TO_STOP if stop_rule else 1.0)
    return CostForecast(len(plan.trials), plan.gpu_hours, adaptive, plan.gpu_hours * ADAPTIVE_SHARE_TO_BEST,
                        confirm if a.confirm_top else 0.0, cfg.plan.max_gpu_hours, stop_rule)


def gpu_hours(value: float) -> str:
    """GPU-hours with the digits that matter: 2,143 / 56.2 / 0.0312."""
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def cost_lines(cost: CostForecast, job_hours: float) -> list[str]:
    """The dry run's cost section: exhaustive, adaptive, confirmation, budget."""
    lines = ["cost (predicted GPU-hours: start-up + benchmark iterations x GPUs):",
             f"  exhaustive: {cost.jobs} jobs, ~{gpu_hours(cost.exhaustive_gpu_hours)} GPU-hours "
             f"(~{job_hours:.2f} job-hours if run one after another)"]
    if cost.stop_rule:
        lines.append(f"  adaptive search: ~{gpu_hours(cost.adaptive_gpu_hours)} GPU-hours until its stop rule "
                     f"({ADAPTIVE_SHARE_TO_STOP:.0%} of exhaustive in the replay benchmark); the best typically "
                     f"measured after ~{gpu_hours(cost.to_best_gpu_hours)} ({ADAPTIVE_SHARE_TO_BEST:.0%})")
    else:
        lines.append(f"  adaptive search: every trial runs (plan.stop_when_converged=false; early stops aside), the "
                     f"best typically measured after ~{gpu_hours(cost.to_best_gpu_hours)} GPU-hours "
                     f"({ADAPTIVE_SHARE_TO_BEST:.0%} of exhaustive in the replay benchmark); with "
                     f"plan.stop_when_converged=true it typically stops at ~"
                     f"{gpu_hours(cost.exhaustive_gpu_hours * ADAPTIVE_SHARE_TO_STOP)} ({ADAPTIVE_SHARE_TO_STOP:.0%})")
    if cost.confirm_gpu_hours:
        lines.append(f"  confirming the winner: ~{gpu_hours(cost.confirm_gpu_hours)} GPU-hours more (analysis."
                     "confirm_top finalists measured analysis.repeats times)")
    lines.append("  " + budget_line(cost))
    return lines


def budget_line(cost: CostForecast) -> str:
    expected = cost.expected_gpu_hours
    if not cost.budget_gpu_hours:
        return (f"budget: none (plan.max_gpu_hours=0); expected spend ~{gpu_hours(expected)} GPU-hours: set "
                "plan.max_gpu_hours to stop the sweep there")
    budget = cost.budget_gpu_hours
    if expected <= budget:
        return (f"budget: plan.max_gpu_hours={budget:g}, above the expected ~{gpu_hours(expected)} GPU-hours "
                "(the sweep stops if it reaches it)")
    return (f"budget: plan.max_gpu_hours={budget:g} is below the expected ~{gpu_hours(expected)} GPU-hours: the "
            "sweep stops at the budget, best predicted trials first (raise it, or narrow the grid or "
            "plan.max_trials)")
