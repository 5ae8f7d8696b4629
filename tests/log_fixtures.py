"""The real log excerpts in tests/fixtures/*-logs (each names its source first) and their index, INDEX.tsv."""

from __future__ import annotations

import csv
from pathlib import Path

ROOT = Path(__file__).parent / "fixtures"
FIXTURES = ROOT / "megatron-logs"
ALL_LOGS = sorted(p.name for p in FIXTURES.glob("*.log"))  # the Megatron/NCCL/SLURM folder's files
CORPUS_FILES = sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("*-logs/*.log"))


def corpus() -> list[dict]:
    """INDEX.tsv rows: path (relative to tests/fixtures), kind, reason (a substring the verdict's reason must
    contain), step_time_s (the steady-state step time the log gives, or empty), context (exit_code=N,
    slurm_state=S, ... the job facts the verdict is judged with; empty: the log alone), source."""
    with open(ROOT / "INDEX.tsv", newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def context(row: dict) -> dict:
    """A row's context column as trial_outcome keyword arguments."""
    out: dict = {}
    for item in row["context"].split():
        key, _, value = item.partition("=")
        out[key] = int(value) if key == "exit_code" else value if key == "slurm_state" else float(value)
    return out


def body(name: str | Path) -> str:
    """The log without the fixture's leading '# SOURCE ...' comment lines (they describe the errors they contain).
    `name` is a file of megatron-logs/, a path relative to tests/fixtures, or a Path."""
    path = name if isinstance(name, Path) else ROOT / name if "/" in name else FIXTURES / name
    lines = path.read_text().splitlines(keepends=True)
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    return "".join(lines)


def kind_of(text: str) -> str:
    """The failure kind the sweep records for a log alone (the verdict with the log's own measurements)."""
    from analysis.logs.outcome import measurements, trial_outcome

    return trial_outcome(text, measured=measurements(text)).failure_kind
