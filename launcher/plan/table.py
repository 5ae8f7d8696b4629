"""Showing and saving a plan: the rich table of the dry run (through the Reporter), and plan.csv."""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path
from typing import Any

from launcher.config.schema import RootConfig
from launcher.core.console import Reporter
from launcher.core.files import replacing
from launcher.core.objective import Objective
from launcher.core.units import gb_text
from launcher.plan import spread
from launcher.plan.band import HIGH_QUANTILE, LOW_QUANTILE
from launcher.plan.cost import cost_lines, forecast
from launcher.plan.inputs import stack_of
from launcher.plan.planner import PLAN_COLUMNS, Plan, PlannedTrial, each_plan_row_values
from launcher.plan.rules import Issue

MAX_TABLE_ROWS = 40
INTERVAL = (LOW_QUANTILE, HIGH_QUANTILE)
"""The quantiles of the estimator's out-of-sample log error (launcher.plan.spread) the table shows beside a
prediction: the interval whose lower end decides pruning (launcher.plan.band)."""
INTERVAL_PERCENT = round(100 * (INTERVAL[1] - INTERVAL[0]))


def write_plan_csv(plan: Plan, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with replacing(path) as tmp, tmp.open("w", newline="") as fh:  # a reader never sees half a plan
        writer = csv.writer(fh)  # rows as tuples: a dict per row cost a second at 50k trials (issue 19)
        writer.writerow(PLAN_COLUMNS)
        writer.writerows(each_plan_row_values(plan))


def print_plan(cfg: RootConfig, plan: Plan, reporter: Reporter, csv_path: Path | None = None) -> None:
    console = reporter
    common = common_warnings(plan)
    for issue in common:
        console.say(f"⚠ every kept trial ({issue.code}): {issue.message}" + (
            " (the numbers vary with tp)" if len({w.message for t in plan.trials for w in t.warnings
                                                  if w.code == issue.code}) > 1 else ""))
    console.say(_ranked_table(cfg, plan, common))
    note = interval_note(stack_of(cfg.backend))
    if note:
        console.say(note)
    if len(plan.trials) > MAX_TABLE_ROWS:
        console.say(f"... and {len(plan.trials) - MAX_TABLE_ROWS} more kept trials (see plan.csv)")
    per_nodes = best_per_node_count(plan)
    if len(per_nodes) > 1:
        console.say(_per_node_table(cfg, per_nodes))
    console.say(pruning_summary(plan))
    for line in warning_summary(plan, {w.code for w in common}):
        console.say(line)
    for line in cost_lines(forecast(cfg, plan), plan.job_seconds / 3600):
        console.say(line)
    for note in plan.notes:
        console.say(f"before a real run: {note}")
    if csv_path is not None:
        console.say(f"plan written to {csv_path}")


def interval_note(stack: str) -> str:
    """What the (low–high) beside a predicted peak and step time is, and whose residuals it comes from ('' when
    launcher/plan/spread.json is missing and the table shows no interval)."""
    sources = []
    for quantity, what in (("peak_mem", "peak memory"), ("step_time", "step time")):
        found = spread.basis(quantity, stack)
        if found is not None:
            own, n = found
            sources.append(f"{what} from {n} {own} rows" if own == stack else
                           f"{what} from all {n} rows ({stack} has fewer than {spread.MIN_ROWS})")
    if not sources:
        return ""
    return (f"(low–high): {INTERVAL_PERCENT} % interval from the estimator's leave-one-source-out errors on the "
            f"published corpus (launcher/plan/spread.json): {', '.join(sources)}. A layout is pruned as a predicted "
            "OOM only when its peak's low end is over the device's memory; 'band': predicted over "
            "plan.mem_safety_margin, but the low end fits: kept, and run smallest predicted peak first")


def with_interval(quantity: str, predicted: float, stack: str) -> str:
    """A prediction and its interval, e.g. '76.4 (67–92)' ('76.4' without spread data)."""
    bounds = spread.interval(quantity, predicted, stack, INTERVAL[0], INTERVAL[1])
    text = gb_text(predicted) if quantity == "peak_mem" else f"{predicted:.3g}"
    if bounds is None:
        return text
    return f"{text} ({_short(bounds[0])}–{_short(bounds[1])})"


def _short(value: float) -> str:
    return f"{value:.0f}" if value >= 10 else f"{value:.2g}"


def common_warnings(plan: Plan) -> list[Issue]:
    """Warnings of a kind every kept trial carries (e.g. the model's vocabulary padding): said once above the table,
    not on every row. One example message per code (the first trial's)."""
    if len(plan.trials) < 2:
        return []
    shared = {w.code for w in plan.trials[0].warnings}
    for t in plan.trials[1:]:
        shared &= {w.code for w in t.warnings}
    return [w for w in plan.trials[0].warnings if w.code in shared]


def warning_summary(plan: Plan, said: set[str]) -> list[str]:
    """One line per warning code (not per message: the numbers in a message vary with tp), with how many kept
    trials carry it and one example."""
    counts = Counter(w.code for t in plan.trials for w in t.warnings if w.code not in said)
    example = {w.code: w.message for t in reversed(plan.trials) for w in t.warnings}
    return [f"  ⚠ {code} on {n} of {len(plan.trials)} kept trials: e.g. {example[code]}"
            for code, n in counts.most_common()]


def best_per_node_count(plan: Plan) -> list[PlannedTrial]:
    """The best kept trial of each node count (plan.trials is ranked by the objective), fewest nodes first."""
    best: dict[int, PlannedTrial] = {}
    for t in plan.trials:
        best.setdefault(t.layout.nodes, t)
    return [best[n] for n in sorted(best)]


def _objective_columns(cfg: RootConfig) -> tuple[str, ...]:
    goal = Objective(cfg.plan.objective)
    if goal.needs_target:
        return ("to target", "GPU-h to target")
    return ("tok/s/GPU",) if goal.per_gpu else ()


def _objective_cells(cfg: RootConfig, t: PlannedTrial) -> list[str]:
    e = t.estimate
    goal = Objective(cfg.plan.objective)
    if goal.needs_target:
        wall_s = cfg.plan.target_tokens / e.tokens_per_s
        return [_duration(wall_s), _count(wall_s * t.layout.gpus / 3600)]
    if goal.per_gpu:
        return [f"{e.tokens_per_s / t.layout.gpus:,.0f}"]
    return []


def _duration(seconds: float) -> str:
    return f"{seconds / 86400:,.1f} d" if seconds >= 86400 else f"{seconds / 3600:.1f} h"


def _count(value: float) -> str:
    for unit, size in (("M", 1e6), ("k", 1e3)):
        if value >= size:
            return f"{value / size:.3g}{unit}"
    return f"{value:.3g}"


def _ranked_table(cfg: RootConfig, plan: Plan, common: list[Issue]) -> Any:
    from rich.table import Table

    cap = cfg.cluster.gpu_mem_gb
    stack = stack_of(cfg.backend)
    table = Table(title=f"plan: {cfg.sweep.name} — {cfg.model.name} on {cfg.cluster.name} "
                        f"({len(plan.trials)} trials, best by {cfg.plan.objective} first)")
    columns = ("#", "layout", "gpus", f"peak GB/{cap:g}", "TFLOPs/GPU", "MFU", "tokens/s",
               *_objective_columns(cfg), "step s", "note")
    for col in columns:
        table.add_column(col, justify="right" if col not in ("layout", "note") else "left", no_wrap=col == "layout")
    for rank, t in enumerate(plan.trials[:MAX_TABLE_ROWS], 1):
        e = t.estimate
        note = t.selection if t.selection != "predicted" else ""
        own = [w for w in t.warnings if w.code not in {c.code for c in common}]
        if own:
            note = f"{note} ⚠{len(own)}".strip()
        table.add_row(str(rank), t.layout.label(), str(t.layout.gpus), with_interval("peak_mem", e.peak_mem_gb, stack),
                      f"{e.tflops_per_gpu:.1f}", f"{e.mfu:.1%}", f"{e.tokens_per_s:,.0f}",
                      *_objective_cells(cfg, t), with_interval("step_time", e.step_time_s, stack), note)
    return table


def _per_node_table(cfg: RootConfig, best: list[PlannedTrial]) -> Any:
    """One row per node count: a user choosing how many nodes to train on, or paying per GPU-hour, compares these."""
    from rich.table import Table

    table = Table(title="best predicted per node count")
    for col in ("nodes", "gpus", "layout", "tokens/s", "tok/s/GPU", "MFU"):
        table.add_column(col, justify="left" if col == "layout" else "right")
    for t in best:
        e = t.estimate
        table.add_row(str(t.layout.nodes), str(t.layout.gpus), t.layout.label(), f"{e.tokens_per_s:,.0f}",
                      f"{e.tokens_per_s / t.layout.gpus:,.0f}", f"{e.mfu:.1%}")
    return table


def pruning_summary(plan: Plan) -> str:
    n_pruned = sum(plan.pruned_counts().values())
    lines = [f"grid: {plan.n_points:,} points -> {sum(plan.rejected.values()):,} rejected by constraints, "
             f"{n_pruned:,} pruned, {len(plan.trials):,} kept"]
    if n_pruned > len(plan.pruned):  # a huge grid: plan.csv holds examples of each reason, not every one
        lines[0] += f" (plan.csv lists {len(plan.pruned):,} of the pruned)"
    for code, n in plan.rejected.most_common():
        lines.append(f"  rejected {n:>6} x {code}: e.g. {plan.rejected_examples.get(code, '')}")
    for code, n in plan.pruned_counts().most_common():
        example = next(t.pruned_reason for t in plan.pruned if str(t.pruned_by) == code)
        lines.append(f"  pruned   {n:>6} x {code}: e.g. {example}")
    return "\n".join(lines)
