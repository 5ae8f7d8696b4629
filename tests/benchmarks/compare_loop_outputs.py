"""What the 50k-trial sweep writes before and after its first polls, as digests: compare two trees' behaviour.

    PYTHONPATH=<tree> python tests/benchmarks/compare_loop_outputs.py [--small | --mid] [--polls N] > digest.json
    diff <(PYTHONPATH=/work/main python ...) <(PYTHONPATH=<branch> python ...)

Runs bench_loop_scale.py's sweep (its grid and scripted runner) for N polls in a temporary folder, then prints the
sha256 of plan.csv and calibration.json and of the ledger's trial rows (every column but the wall-clock times, the
folder's path replaced): a change that should not change behaviour (a faster planner or ledger insert) must leave
all three equal. The launcher imported is the one first on PYTHONPATH (this script does not put its own tree there).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import sys
import tempfile
from pathlib import Path

import launcher  # noqa: E402,F401  first: PYTHONPATH's tree, whatever bench_loop_scale puts on sys.path

sys.path.insert(1, str(Path(__file__).resolve().parent))

import bench_loop_scale as bench  # noqa: E402

TIME_COLUMNS = ("submitted_at", "started_at", "finished_at", "updated_at")


def ledger_digest(path: Path, root: str) -> tuple[int, str]:
    """(rows, sha256 of the trial rows ordered by config hash, times left out, the folder's path as ROOT)."""
    with sqlite3.connect(path) as db:
        names = [row[1] for row in db.execute("PRAGMA table_info(trials)") if row[1] not in TIME_COLUMNS]
        rows = db.execute(f"SELECT {', '.join(names)} FROM trials ORDER BY config_hash").fetchall()
    digest = hashlib.sha256()
    for row in rows:
        digest.update(repr(row).replace(root, "ROOT").encode())
    return len(rows), digest.hexdigest()


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else "missing"


def main() -> None:
    polls = int(sys.argv[sys.argv.index("--polls") + 1]) if "--polls" in sys.argv else 5
    grid = bench.SMALL if "--small" in sys.argv else bench.MID if "--mid" in sys.argv else []
    with tempfile.TemporaryDirectory() as work:
        bench.run_once([*bench.GRID, *grid, f"sweep.root_dir={work}", "sweep.name=scale"], polls)
        folder = Path(work) / "scale"
        rows, ledger = ledger_digest(folder / "ledger.sqlite", work)
        print(json.dumps({"launcher": bench.loop.__file__.rsplit("/launcher/", 1)[0], "rows": rows,
                          "ledger": ledger, "plan.csv": file_digest(folder / "plan.csv"),
                          "calibration.json": file_digest(folder / "calibration.json")}, indent=1))


if __name__ == "__main__":
    main()
