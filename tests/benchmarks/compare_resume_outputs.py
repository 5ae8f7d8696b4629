"""What the 50k-trial sweep writes over a first run and a resume, and what it picks, as digests: compare two trees.

    PYTHONPATH=<tree> python tests/benchmarks/compare_resume_outputs.py [--mid] > digest.json
    diff <(PYTHONPATH=/work/main python ...) <(PYTHONPATH=<branch> python ...)

bench_loop_scale.py's sweep (its grid and scripted runner) runs for 5 polls (--mid: 8), then resumes in the same
process for 5 more (--mid: 6), as the benchmark does; printed: the sha256 of the ledger's trial rows (every column but
the wall-clock times, the folder's path replaced), of its events (trial, state, detail in order), of the pick
sequence (every submission's trials in order, the resume's after a marker), of calibration.json and of plan.csv. A
change that should not change behaviour (what a resume holds in memory) must leave all of them equal
(compare_loop_outputs.py: the first run alone).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import sys
import tempfile
from pathlib import Path

import launcher  # noqa: F401  first: PYTHONPATH's tree, whatever bench_loop_scale puts on sys.path

sys.path.insert(1, str(Path(__file__).resolve().parent))

import bench_loop_scale as bench  # noqa: E402

TIME_COLUMNS = ("submitted_at", "started_at", "finished_at", "updated_at")


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def main() -> None:
    mid = "--mid" in sys.argv
    picks: list[list[str]] = []
    submit = bench.ScriptedRunner.submit

    def noted(runner: bench.ScriptedRunner, requests):  # type: ignore[no-untyped-def]
        requests = list(requests)
        picks.append([r.key for r in requests])
        return submit(runner, requests)

    bench.ScriptedRunner.submit = noted  # type: ignore[method-assign]
    with tempfile.TemporaryDirectory() as work:
        overrides = [*bench.GRID, *(bench.MID if mid else []), f"sweep.root_dir={work}", "sweep.name=scale"]
        bench.run_once(overrides, 8 if mid else 5)
        picks.append(["-- resume --"])
        bench.run_once(overrides, 6 if mid else 5)
        folder = Path(work) / "scale"
        db = sqlite3.connect(folder / "ledger.sqlite")
        columns = [r[1] for r in db.execute("PRAGMA table_info(trials)") if r[1] not in TIME_COLUMNS]
        rows = [repr(tuple(str(v).replace(work, "WORK") for v in row))
                for row in db.execute(f"SELECT {', '.join(columns)} FROM trials ORDER BY position")]
        events = [repr(row) for row in db.execute("SELECT config_hash, state, detail FROM events ORDER BY id")]
        db.close()
        out = {"trials": len(rows), "rows": sha("\n".join(rows)), "events": sha("\n".join(events)),
               "picks": sha(json.dumps(picks)), "submitted": sum(len(p) for p in picks) - 1,
               "calibration": sha((folder / "calibration.json").read_text().replace(work, "WORK")),
               "plan_csv": hashlib.sha256((folder / "plan.csv").read_bytes()).hexdigest()}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
