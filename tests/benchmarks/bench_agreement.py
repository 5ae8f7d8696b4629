"""How far two labellers agree on the held-out logs, and how the classifier scores against each of them.

    python tests/benchmarks/bench_agreement.py [--labels tests/fixtures/second_labeller.tsv]

tests/fixtures/second_labeller.tsv holds, for every log of held-out batches 43-51, the collector's label (first_kind,
as in the batch's INDEX.tsv), a second label given blind by the written rule docs/labelling.md (second_kind, with the
other kind it could be when the labeller found it borderline, and the deciding fact), and the verdict of the code
frozen before that batch was collected (frozen_kind, recorded when the batch was scored: its confusions in
OUT_OF_SAMPLE.md). The second labeller saw only the log text (no SOURCE note, no label, no verdict, no source).

Prints, overall, for the four frameworks and per batch: how often the two labels agree (the ceiling any classifier
can reach against one labeller when scored against the other), and the accuracy of the frozen verdicts and of the
classifier as it is now against the first label, the second label and the logs both labellers agree on. Only the
frozen figures are out of sample; the current code has been fitted on every one of these batches since.
"""

from __future__ import annotations

import argparse
import csv
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_oos import Case, classify  # noqa: E402  (the same public command bench_oos scores through)

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
FOUR_FRAMEWORKS = ("megatron_lm", "megatron_deepspeed", "deepspeed", "nemo")


@dataclass(frozen=True)
class Row:
    batch: int
    path: str
    framework: str
    first: str
    second: str
    second_other: str
    frozen: str


def read_labels(path: Path) -> list[Row]:
    with open(path, newline="") as f:
        return [Row(int(r["batch"]), r["path"], r["framework"], r["first_kind"], r["second_kind"],
                    r["second_other"], r["frozen_kind"]) for r in csv.DictReader(f, delimiter="\t")]


def current_verdicts(rows: list[Row]) -> dict[tuple[int, str], str]:
    """The classifier as it is now, through the public command, one call per batch folder."""
    by_batch: dict[int, list[Row]] = defaultdict(list)
    for r in rows:
        by_batch[r.batch].append(r)
    out: dict[tuple[int, str], str] = {}
    for batch, group in sorted(by_batch.items()):
        folder = FIXTURES / f"oos-batch{batch}"
        verdicts = classify(folder, [Case(r.path, r.framework, r.first, None) for r in group])
        out.update({(batch, p): v.kind for p, v in verdicts.items()})
    return out


def _pct(right: int, total: int) -> str:
    return f"{right}/{total} ({100 * right / total:.0f}%)" if total else "0/0"


def summary(rows: list[Row], current: dict[tuple[int, str], str]) -> dict[str, str]:
    agreed = [r for r in rows if r.first == r.second]

    def now(r: Row) -> str:
        return current[(r.batch, r.path)]

    return {
        "labellers agree": _pct(len(agreed), len(rows)),
        "first among second's readings": _pct(sum(r.first in (r.second, r.second_other) for r in rows), len(rows)),
        "frozen vs first": _pct(sum(r.frozen == r.first for r in rows), len(rows)),
        "frozen vs second": _pct(sum(r.frozen == r.second for r in rows), len(rows)),
        "frozen on agreed": _pct(sum(r.frozen == r.first for r in agreed), len(agreed)),
        "now vs first": _pct(sum(now(r) == r.first for r in rows), len(rows)),
        "now vs second": _pct(sum(now(r) == r.second for r in rows), len(rows)),
        "now on agreed": _pct(sum(now(r) == r.first for r in agreed), len(agreed)),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labels", type=Path, default=FIXTURES / "second_labeller.tsv")
    args = parser.parse_args(argv)
    rows = read_labels(args.labels)
    current = current_verdicts(rows)
    groups = {"all": rows, "four frameworks": [r for r in rows if r.framework in FOUR_FRAMEWORKS]}
    groups.update({f"batch {b}": [r for r in rows if r.batch == b] for b in sorted({r.batch for r in rows})})
    for name, group in groups.items():
        print(f"{name} ({len(group)} logs)")
        for label, figure in summary(group, current).items():
            print(f"  {label:32s} {figure}")
    print("where the labellers disagree (first -> second):")
    for (first, second), n in Counter((r.first, r.second) for r in rows if r.first != r.second).most_common():
        print(f"  {n:4d}  {first} -> {second}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
