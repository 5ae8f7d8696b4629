"""The main job's cost: `python -m launcher +sweep=tiny` wall time, and the launcher's own overhead per trial.

    python tests/benchmarks/bench_sweep.py

Targets (issue 3): the tiny sweep (>= 8 trials, >= 1 real OOM, tp/pp/dp > 1 layouts) in < 5 minutes on this
2-core machine; launcher overhead (plan, submit, poll, parse, MLflow) < 0.5 s per trial, measured apart from the
trials' own run time (the sweep prints it: time spent in the launcher loop's work, not in waiting for jobs).
"""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def main() -> None:
    with tempfile.TemporaryDirectory() as work:
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "launcher", "+sweep=tiny"], cwd=work, capture_output=True,
                              text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
        wall_s = time.perf_counter() - start
        if proc.returncode != 0:
            sys.exit(proc.stdout[-3000:] + proc.stderr[-3000:])
        db = sqlite3.connect(Path(work) / "sweeps" / "tiny" / "ledger.sqlite")
        states = Counter(s for (s,) in db.execute("SELECT state FROM trials"))
        runs = db.execute("SELECT SUM(finished_at - submitted_at) FROM trials WHERE attempts > 0").fetchone()[0]
    overhead = re.search(r"launcher overhead: ([\d.]+) s per trial", proc.stdout)
    print(f"python -m launcher +sweep=tiny: {wall_s:.1f} s wall  target < 300 s")
    print(f"trials by state: {dict(states)}; trials' own run time summed: {runs:.1f} s")
    print(f"launcher overhead: {overhead.group(1) if overhead else '?'} s per trial  target < 0.5 s")


if __name__ == "__main__":
    main()
