"""A plan beside the one a sweep recorded: reading plan.csv back and saying how a new plan differs from it.

A dry run in a folder that holds a ledger (a sweep that ran, or runs) must not replace that sweep's plan.csv: it
writes plan.dry-run.csv beside it (launcher/__main__.py) and says here, in a few lines, which kept trials the two
plans share and which only one of them has. Pure apart from reading the CSV."""

from __future__ import annotations

import csv
from pathlib import Path

from launcher.core.layout import NAMES, Layout, dimension
from launcher.plan.planner import Plan

EXAMPLES = 3
"""Labels named per side of a difference; the rest are counted."""


def read_plan_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def _value(name: str, text: str) -> object:
    """A CSV cell back to the dimension's type (plan.csv writes True/False and integers as text)."""
    kind = dimension(name).type
    if kind is bool:
        return text == "True"
    return int(text) if kind is int else text


def row_layout(row: dict[str, str]) -> Layout:
    """A plan.csv row's layout (a column an older plan.csv lacks takes the dimension's default)."""
    return Layout.from_dict({k: _value(k, row[k]) for k in NAMES if row.get(k) not in (None, "")})


def _named(labels: list[str]) -> str:
    shown = ", ".join(labels[:EXAMPLES])
    return shown + (f" and {len(labels) - EXAMPLES} more" if len(labels) > EXAMPLES else "")


def plan_difference(plan: Plan, recorded: list[dict[str, str]], recorded_name: str) -> list[str]:
    """How the kept trials of `plan` (a dry run) differ from those of a recorded plan.csv (its rows), by config
    hash (the layout with its model, cluster and backend): the counts, and a few labels of each side's own."""
    old = {r["config_hash"]: r for r in recorded if r.get("config_hash") and r.get("selection") != "pruned"}
    new = {t.config_hash: t for t in plan.trials}
    both = old.keys() & new.keys()
    only_new = [t.layout.label() for key, t in new.items() if key not in old]
    only_old = [row_layout(r).label() for key, r in old.items() if key not in new]
    if not only_new and not only_old:
        return [f"the same {len(both)} kept trials as the recorded {recorded_name}"]
    lines = [f"compared with the recorded {recorded_name} ({len(old)} kept trials): {len(both)} in both"]
    if only_new:
        lines.append(f"  {len(only_new)} only in this dry run: {_named(only_new)}")
    if only_old:
        lines.append(f"  {len(only_old)} only in the recorded plan: {_named(only_old)}")
    return lines
