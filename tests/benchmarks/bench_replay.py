"""The replay benchmark's old command: runs tests/benchmarks/bench_search.py (the search benchmark of issue 16:
every measured replay table and perturbed truths, the adaptive search next to its baselines, grouped by source).

    python tests/benchmarks/bench_replay.py [bench_search.py options]

Its first version (issue 10) reported one GPU-hour-weighted share over three tables (17.3 %), where exhaustive
search in plan order, the oracle and the adaptive search tied: the figure sat at its floor, decided by two tables
of 7 and 4 configurations. bench_search.py reports per source group, with the oracle, random order (exact
expectation), plan order and the calibrated order in the same run.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_search import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
