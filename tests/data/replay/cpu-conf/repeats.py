"""Noise between two runs of the same CPU grid: per-configuration relative step-time difference and the winners.

    python tests/data/replay/cpu-conf/repeats.py tests/data/replay/cpu_tiny_r4.csv tests/data/replay/cpu_tiny_r4_r2.csv ...

Arguments come in pairs (first run, repeat). Prints a Markdown table (one row per pair, then all pairs together).
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[4]
sys.path.insert(0, str(REPO))

from launcher.measured import MeasuredRow, read_table  # noqa: E402


def _rows(path: str) -> dict[str, MeasuredRow]:
    (sweep,) = read_table(path)
    return {row.request.layout.short(): row for row in sweep.rows}


def _winner(rows: dict[str, MeasuredRow]) -> str:
    return max((k for k, r in rows.items() if r.tokens_per_s), key=lambda k: rows[k].tokens_per_s)


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]


def _ranks(values: list[float]) -> list[int]:
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0] * len(values)
    for rank, i in enumerate(order):
        ranks[i] = rank
    return ranks


def _spearman(x: list[float], y: list[float]) -> float:
    """Rank correlation of the two runs' step times (1: same order)."""
    rx, ry = _ranks(x), _ranks(y)
    n = len(x)
    return 1 - 6 * sum((a - b) ** 2 for a, b in zip(rx, ry)) / (n * (n * n - 1))


def compare(first: str, second: str) -> tuple[dict, list[float]]:
    a, b = _rows(first), _rows(second)
    both = [k for k in a if k in b and a[k].step_time_s and b[k].step_time_s]
    ratios = [b[k].step_time_s / a[k].step_time_s for k in both]
    diffs = [abs(r - 1) for r in ratios]
    state_changed = [k for k in a if k in b and a[k].state != b[k].state]
    wa, wb = _winner(a), _winner(b)
    # Where run 1's winner lands in run 2, as a share of run 2's best throughput.
    share = b[wa].tokens_per_s / b[wb].tokens_per_s if b.get(wa) and b[wa].tokens_per_s else 0.0
    return ({"pair": f"{Path(first).stem} / {Path(second).stem}", "n": len(both), "median": statistics.median(diffs),
             "p90": _p90(diffs), "max": max(diffs), "ratio": statistics.median(ratios),
             # what is left once the whole run's slow-down (the machine's load) is divided out
             "residual": statistics.median([abs(r / statistics.median(ratios) - 1) for r in ratios]),
             "spearman": _spearman([a[k].step_time_s for k in both], [b[k].step_time_s for k in both]), "state_changed": len(state_changed),
             "only_one": len(set(a) ^ set(b)), "winner_1": wa, "winner_2": wb,
             "winner_changed": wa != wb, "share": share}, diffs)


def main(argv: list[str]) -> int:
    if len(argv) < 2 or len(argv) % 2:
        print(__doc__, file=sys.stderr)
        return 2
    print("| pair | configs in both | median \\|Δt\\|/t | p90 | max | median t2/t1 | median \\|Δ\\| after dividing it out | Spearman | state changed | "
          "winner run 1 | winner run 2 | run-1 winner in run 2 |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    every: list[float] = []
    changed = 0
    for first, second in zip(argv[::2], argv[1::2]):
        r, diffs = compare(first, second)
        every += diffs
        changed += r["winner_changed"]
        print(f"| {r['pair']} | {r['n']} | {r['median']:.1%} | {r['p90']:.1%} | {r['max']:.1%} | {r['ratio']:.2f} | {r['residual']:.1%} | "
              f"{r['spearman']:.2f} | {r['state_changed']} | "
              f"{r['winner_1']} | {r['winner_2']}{' (changed)' if r['winner_changed'] else ''} | {r['share']:.1%} |")
    print(f"| **all pairs** | {len(every)} | {statistics.median(every):.1%} | {_p90(every):.1%} | {max(every):.1%} | | | | | "
          f"winners changed: {changed} of {len(argv) // 2} | | |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
