"""Out-of-sample accuracy of the failure classifier on a batch of real logs it was not built from.

    python tests/benchmarks/bench_oos.py tests/fixtures/oos-batch1 [--tolerance 0.05] [--json]

A batch folder holds the logs (any layout under it) and INDEX.tsv with the columns path (relative to the folder),
framework, kind (the true label), step_time_s (the steady-state seconds per step a human reads off the log, or
empty), evidence and source. Each log is judged from the file alone, through the public command
(`python -m analysis.classify --json LOG ...`, no --exit-code or --slurm-state), so the script runs unchanged
against a later version of the classifier. Prints accuracy overall, per framework and per true kind, the
confusions (expected -> got, with the file and the classifier's reason) and the step-time agreement of the
labelled healthy logs (within --tolerance, relative).
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Case:
    path: str
    framework: str
    kind: str
    step_time_s: float | None


@dataclass(frozen=True)
class Verdict:
    kind: str
    reason: str
    step_time_s: float | None


def read_index(folder: Path) -> list[Case]:
    index = folder / "INDEX.tsv"
    if not index.is_file():
        sys.exit(f"error: {index} does not exist; a batch folder needs an INDEX.tsv (path, framework, kind, "
                 "step_time_s, evidence, source)")
    with open(index, newline="") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    missing = [r["path"] for r in rows if not (folder / r["path"]).is_file()]
    if missing:
        sys.exit(f"error: INDEX.tsv lists files that do not exist under {folder}: {missing[:5]}")
    return [Case(r["path"], r["framework"], r["kind"], float(r["step_time_s"]) if r["step_time_s"] else None)
            for r in rows]


def without_note(src: Path, dst: Path) -> None:
    """The log as it was pasted: the fixture's first line is our `# SOURCE:` note, whose wording (it often says what
    went wrong) must not reach the classifier (it did up to batch 2: 2 of 61 logs were named from the note)."""
    data = src.read_bytes()
    if data.startswith(b"# SOURCE:"):
        data = data.split(b"\n", 1)[1] if b"\n" in data else b""
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_bytes(data)


def classify(folder: Path, cases: list[Case]) -> dict[str, Verdict]:
    """One call of the public command for the whole batch (each log without its note): it prints one JSON object
    per log, in order."""
    with tempfile.TemporaryDirectory(prefix="bench_oos.") as tmp:
        files = []
        for c in cases:
            without_note(folder / c.path, Path(tmp) / c.path)
            files.append(str(Path(tmp) / c.path))
        proc = subprocess.run([sys.executable, "-m", "analysis.classify", "--json", *files], cwd=REPO,
                              capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        sys.exit(f"error: analysis.classify exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    if len(rows) != len(cases):
        sys.exit(f"error: analysis.classify printed {len(rows)} verdicts for {len(cases)} logs")
    return {c.path: Verdict(str(r["kind"]), str(r.get("reason", "")), r.get("step_time_s"))
            for c, r in zip(cases, rows)}


def accuracy_by(cases: list[Case], verdicts: dict[str, Verdict], key: str) -> dict[str, tuple[int, int]]:
    """{group: (right, total)} for the groups of `key` (framework or kind)."""
    out: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for c in cases:
        group = out[getattr(c, key)]
        group[0] += verdicts[c.path].kind == c.kind
        group[1] += 1
    return {k: (v[0], v[1]) for k, v in sorted(out.items())}


def step_time_rows(cases: list[Case], verdicts: dict[str, Verdict], tolerance: float) -> list[dict]:
    rows = []
    for c in cases:
        if c.kind != "ok" or c.step_time_s is None:
            continue
        got = verdicts[c.path].step_time_s
        rel = None if got is None else abs(got - c.step_time_s) / c.step_time_s
        rows.append({"path": c.path, "expected_s": c.step_time_s, "got_s": got, "rel_error": rel,
                     "agrees": rel is not None and rel <= tolerance})
    return rows


def _pct(right: int, total: int) -> str:
    return f"{right}/{total} ({100.0 * right / total:.0f}%)" if total else "0/0"


def report(cases: list[Case], verdicts: dict[str, Verdict], tolerance: float) -> dict:
    right = sum(verdicts[c.path].kind == c.kind for c in cases)
    return {
        "logs": len(cases),
        "correct": right,
        "by_framework": accuracy_by(cases, verdicts, "framework"),
        "by_kind": accuracy_by(cases, verdicts, "kind"),
        "confusions": [{"path": c.path, "expected": c.kind, "got": verdicts[c.path].kind,
                        "reason": verdicts[c.path].reason} for c in cases if verdicts[c.path].kind != c.kind],
        "step_time": step_time_rows(cases, verdicts, tolerance),
        "tolerance": tolerance,
    }


def print_report(rep: dict) -> None:
    print(f"overall: {_pct(rep['correct'], rep['logs'])}")
    for title, key in (("per framework", "by_framework"), ("per true kind", "by_kind")):
        print(f"\n{title}:")
        for group, (right, total) in rep[key].items():
            print(f"  {group:20s} {_pct(right, total)}")
    print(f"\nconfusions ({len(rep['confusions'])}):")
    for row in rep["confusions"]:
        print(f"  {row['expected']:>19s} -> {row['got']:<19s} {row['path']}  [{row['reason'][:90]}]")
    steps = rep["step_time"]
    agree = sum(r["agrees"] for r in steps)
    print(f"\nstep time within {100 * rep['tolerance']:.0f}% on labelled healthy logs: {_pct(agree, len(steps))}")
    for r in steps:
        got = "none" if r["got_s"] is None else f"{r['got_s']:.4g} s"
        err = "" if r["rel_error"] is None else f" ({100 * r['rel_error']:+.1f}%)"
        print(f"  {'ok  ' if r['agrees'] else 'MISS'} expected {r['expected_s']:.4g} s, got {got}{err}  {r['path']}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder", type=Path, help="batch folder with INDEX.tsv, e.g. tests/fixtures/oos-batch1")
    p.add_argument("--tolerance", type=float, default=0.05, help="relative step-time tolerance (default 0.05)")
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    args = p.parse_args(argv)
    folder = args.folder.resolve()
    cases = read_index(folder)
    rep = report(cases, classify(folder, cases), args.tolerance)
    if args.json:
        print(json.dumps(rep, indent=1))
    else:
        print_report(rep)
    return 0


if __name__ == "__main__":
    sys.exit(main())
