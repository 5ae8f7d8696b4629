"""Planner speed: expand + check a 100,000-point grid, and the 70b dry run end to end.

    python tests/benchmarks/bench_plan.py

Targets (issue 2): grid expansion + constraint checks < 2 s; `python -m launcher +sweep=70b dry_run=true` < 3 s.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from launcher.config import load_config  # noqa: E402
from launcher.plan.rules import Checker  # noqa: E402
from launcher.plan.grid import expand, grid_size  # noqa: E402
from launcher.schema import GridConfig  # noqa: E402

# 5 nodes x 5 tp x 5 pp x 5 mbs x 5 gbs (= 3,125) x 2 vpp x 2 recompute x 2 sp x 2 zero x 2 distopt = 100,000 points.
GRID = GridConfig(nodes=[4, 8, 16, 32, 64], tp=[1, 2, 4, 8, 16], pp=[1, 2, 4, 8, 16], vpp=[1, 2],
                  mbs=[1, 2, 4, 8, 16], gbs=[256, 512, 768, 1024, 2048], recompute=["selective", "full"],
                  sequence_parallel=[False, True], zero_stage=[0, 1], distributed_optimizer=[False, True], dp=None)


def bench_grid(cfg) -> tuple[int, float, int]:
    start = time.perf_counter()
    n = valid = 0
    checker = Checker(cfg.model, cfg.cluster, cfg.backend.name)  # one per plan, as the planner keeps it
    for layout in expand(GRID, cfg.cluster):
        n += 1
        if checker.check(layout).ok:
            valid += 1
    return n, time.perf_counter() - start, valid


def bench_dry_run() -> float:
    with tempfile.TemporaryDirectory() as work:
        start = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "launcher", "+sweep=70b", "dry_run=true"], cwd=work,
                              env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True)
        elapsed = time.perf_counter() - start
    assert proc.returncode == 0, proc.stderr
    return elapsed


def main() -> None:
    cfg = load_config(["+sweep=70b", "dry_run=true"])
    print(f"grid points (product): {grid_size(GRID, cfg.cluster):,}")
    runs = [bench_grid(cfg) for _ in range(3)]
    n, best_s, valid = min(runs, key=lambda r: r[1])
    print(f"expand + check {n:,} points: best of 3 = {best_s:.2f} s ({best_s / n * 1e6:.1f} us/point; "
          f"{valid:,} valid)  target < 2 s")
    dry = sorted(bench_dry_run() for _ in range(3))
    print(f"python -m launcher +sweep=70b dry_run=true: median of 3 = {dry[1]:.2f} s (min {dry[0]:.2f})  target < 3 s")


if __name__ == "__main__":
    main()
