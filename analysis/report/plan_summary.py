"""What `python -m analysis` says about a sweep folder that holds only a plan (after a dry run): nothing ran, so there
is nothing to re-parse, sync or rank; the plan itself is summarised from plan.csv (counts by selection and by
pruning reason, the best predicted trials) with what to do next. Pure apart from reading the CSV."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from launcher.plan.compare import read_plan_csv, row_layout


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
        labels = [row_layout(r).label() for r in best]
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
    return summarize_plan(read_plan_csv(folder / "plan.csv"), str(folder))
