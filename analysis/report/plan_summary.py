"""What `python -m analysis` says about a sweep folder that holds only a plan (after a dry run): nothing ran, so there
is nothing to re-parse, sync or rank; the plan itself is summarised from plan.csv (counts by selection and by
pruning reason, the best predicted trials) with what to do next. Pure apart from reading the CSV."""

from __future__ import annotations

import csv
from collections import Counter
from pathlib import Path

from launcher.core.layout import NAMES, Layout, dimension


def read_plan(path: Path) -> list[dict]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def _value(name: str, text: str) -> object:
    """A CSV cell back to the dimension's type (plan.csv writes True/False and integers as text)."""
    kind = dimension(name).type
    if kind is bool:
        return text == "True"
    return int(text) if kind is int else text


def _layout(row: dict) -> Layout:
    """A plan.csv row's layout (a column an older plan.csv lacks takes the dimension's default)."""
    return Layout.from_dict({k: _value(k, row[k]) for k in NAMES if row.get(k) not in (None, "")})


def _number(text: object) -> float:
    try:
        return float(str(text))
    except (TypeError, ValueError):
        return 0.0


def summarize_plan(rows: list[dict], folder: str, top: int = 10) -> str:
    kept = [r for r in rows if r.get("selection") != "pruned"]
    by_selection = Counter(r.get("selection", "") for r in kept)
    reasons = Counter((r.get("pruned_reason") or "").split(":")[0] for r in rows if r.get("selection") == "pruned")
    lines = [f"{folder} holds a plan only (a dry run: nothing ran, so nothing to re-parse, sync or rank): "
             f"{len(kept)} trials planned ({', '.join(f'{n} {k}' for k, n in by_selection.most_common())})"
             + (f", {sum(reasons.values())} pruned ({', '.join(f'{n} {k}' for k, n in reasons.most_common())})"
                if reasons else "")]
    best = sorted(kept, key=lambda r: -_number(r.get("tokens_per_s", "")))[:top]
    if best:
        labels = [_layout(r).label() for r in best]
        width = max(len(label) for label in labels)
        lines.append(f"best predicted (of {len(kept)}):")
        for i, (r, label) in enumerate(zip(best, labels), 1):
            lines.append(f"  {i:>2}  {r['config_hash'][:8]}  {label:<{width}} "
                         f"{_number(r.get('tokens_per_s')):>12,.0f} tokens/s  {_number(r.get('peak_mem_gb')):>7.1f} GB"
                         f"  MFU {_number(r.get('mfu')):.1%}")
    lines.append(f"to measure them, run the sweep's command again without dry_run=true; the whole plan is in "
                 f"{Path(folder) / 'plan.csv'}")
    return "\n".join(lines)


def planned_only(folder: Path) -> str:
    return summarize_plan(read_plan(folder / "plan.csv"), str(folder))
