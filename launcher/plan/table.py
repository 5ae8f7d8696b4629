"""Printing and saving a plan: the rich table of the dry run, and plan.csv."""

from __future__ import annotations

import csv
import sys
from collections import Counter
from pathlib import Path

from launcher.plan.planner import PLAN_COLUMNS, Plan, plan_rows
from launcher.schema import RootConfig

MAX_TABLE_ROWS = 40


def write_plan_csv(plan: Plan, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".csv.tmp")
    with tmp.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=PLAN_COLUMNS)
        writer.writeheader()
        writer.writerows(plan_rows(plan))
    tmp.replace(path)  # atomic: a reader never sees half a plan


def print_plan(cfg: RootConfig, plan: Plan, csv_path: Path | None = None) -> None:
    from rich.console import Console
    from rich.table import Table

    # A wide console also off a terminal (CI logs, pipes), where rich would otherwise wrap at 80 columns.
    console = Console(width=None if sys.stdout.isatty() else 160)
    cap = cfg.cluster.gpu_mem_gb
    table = Table(title=f"plan: {cfg.sweep.name} — {cfg.model.name} on {cfg.cluster.name} "
                        f"({len(plan.trials)} trials, best predicted first)")
    for col in ("#", "layout", "gpus", "peak GB", "headroom", "TFLOPs/GPU", "MFU", "tokens/s", "step s", "note"):
        table.add_column(col, justify="right" if col not in ("layout", "note") else "left",
                         no_wrap=col == "layout")
    for rank, t in enumerate(plan.trials[:MAX_TABLE_ROWS], 1):
        e = t.estimate
        note = t.selection if t.selection != "predicted" else ""
        if t.warnings:
            note = f"{note} ⚠{len(t.warnings)}".strip()
        table.add_row(str(rank), t.layout.short(), str(t.layout.gpus), f"{e.peak_mem_gb:.1f}/{cap:g}",
                      f"{e.headroom:.0%}", f"{e.tflops_per_gpu:.1f}", f"{e.mfu:.1%}", f"{e.tokens_per_s:,.0f}",
                      f"{e.step_time_s:.3g}", note)
    console.print(table)
    if len(plan.trials) > MAX_TABLE_ROWS:
        console.print(f"... and {len(plan.trials) - MAX_TABLE_ROWS} more kept trials (see plan.csv)")
    console.print(pruning_summary(plan))
    warnings = Counter(w for t in plan.trials for w in t.warnings)
    for text, n in warnings.most_common(5):
        console.print(f"  ⚠ {n} kept trial(s): {text}")
    console.print(f"cost: {len(plan.trials)} jobs, ~{plan.gpu_hours:,.1f} GPU-hours "
                  f"(~{plan.job_seconds / 3600:.2f} job-hours if run one after another)")
    for note in plan.notes:
        console.print(f"before a real run: {note}")
    if csv_path is not None:
        console.print(f"plan written to {csv_path}")


def pruning_summary(plan: Plan) -> str:
    n_pruned = sum(plan.pruned_counts().values())
    lines = [f"grid: {plan.n_points:,} points -> {sum(plan.rejected.values()):,} rejected by constraints, "
             f"{n_pruned:,} pruned, {len(plan.trials):,} kept"]
    if n_pruned > len(plan.pruned):  # a huge grid: plan.csv holds examples of each reason, not every one
        lines[0] += f" (plan.csv lists {len(plan.pruned):,} of the pruned)"
    for code, n in plan.rejected.most_common():
        lines.append(f"  rejected {n:>6} x {code}: e.g. {plan.rejected_examples.get(code, '')}")
    for code, n in plan.pruned_counts().most_common():
        example = next(t.pruned_reason for t in plan.pruned if t.pruned_reason.startswith(code))
        lines.append(f"  pruned   {n:>6} x {code}: e.g. {example}")
    return "\n".join(lines)
