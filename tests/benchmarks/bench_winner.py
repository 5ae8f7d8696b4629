"""Is the tiny sweep's winner one you can trust? Run `python -m launcher +sweep=tiny` N times, each in a fresh
folder, and count the runs that name the most frequent winner or say "tied within noise".

    python tests/benchmarks/bench_winner.py [N] [--keep DIR] [extra launcher overrides ...]

Target (issue 20): every run names the same winner or says it is tied within noise (N of N). A run that names
another winner with a stated margin is a failure: its margin was noise. Each run's winner, its median tokens/s, the
spread, the margin and the decision are printed as they finish, then the count. `--keep DIR` keeps each run's
folder (DIR/run-<i>) for a look at its ledger and report. Without a ten-minute budget per run on this loaded 2-core
machine, give a smaller N and say so.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TIED = "tied within noise"


def one_run(work: Path, overrides: list[str]) -> dict:
    """One tiny sweep in `work`: its winner and decision from best.json and the printed text."""
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "launcher", "+sweep=tiny", "tracking.enabled=false", *overrides],
                          cwd=work, capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    wall_s = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"the sweep in {work} failed:\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}")
    best = json.loads((work / "sweeps" / "tiny" / "best.json").read_text())
    winner_line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("winner: ")), "")
    decision = best.get("decision", {})
    return {"label": _label(best["layout"]), "config_hash": best["config_hash"], "wall_s": wall_s,
            "tokens_per_s": best["measured"]["tokens_per_s"], "n_runs": best.get("n_runs", 1),
            "spread": best["measured"].get("tokens_per_s_spread", 0.0), "margin": decision.get("margin"),
            "band": decision.get("noise_band"), "noise_sd": decision.get("noise_sd"),
            "noise_df": decision.get("noise_df"), "tied_with": len(decision.get("tied_with", [])),
            "tied": TIED in winner_line.lower(),
            "text": winner_line}


def _label(layout: dict) -> str:
    return " ".join(f"{k}{layout[k]}" for k in ("gpus", "tp", "pp", "dp", "mbs", "gbs"))


def main(argv: list[str]) -> int:
    n = int(argv[0]) if argv and argv[0].isdigit() else 10
    rest = argv[1:] if argv and argv[0].isdigit() else argv
    keep = None
    if "--keep" in rest:
        i = rest.index("--keep")
        keep, rest = Path(rest[i + 1]), rest[:i] + rest[i + 2:]
    results = []
    for i in range(1, n + 1):
        with tempfile.TemporaryDirectory() as tmp:
            work = keep / f"run-{i}" if keep else Path(tmp)
            work.mkdir(parents=True, exist_ok=True)
            r = one_run(work, rest)
        results.append(r)
        margin = "" if r["margin"] is None else f", margin {r['margin']:+.1%}"
        if r["band"] is not None:
            margin += (f" vs band {r['band']:.1%} (run-to-run noise {r['noise_sd'] or 0:.1%} over {r['noise_df']} "
                       f"repeats; tied with {r['tied_with']})")
        print(f"run {i}/{n}: {'TIED' if r['tied'] else 'winner'} {r['label']} ({r['config_hash'][:8]}) "
              f"{r['tokens_per_s']:,.0f} tokens/s, median of {r['n_runs']}, spread {r['spread']:.0%}{margin}; "
              f"{r['wall_s']:.0f} s", flush=True)
    named = Counter(r["label"] for r in results if not r["tied"])
    modal, count = named.most_common(1)[0] if named else ("-", 0)
    tied = sum(r["tied"] for r in results)
    agree = count + tied
    in_best = Counter(r["label"] for r in results)
    print(f"\n{n} runs of the tiny sweep: {tied} said tied within noise, {sum(named.values())} named a winner "
          f"({dict(named)}); {agree} of {n} name the same winner ({modal}) or say tied  target {n} of {n}")
    print(f"best.json named {len(in_best)} configuration(s): {dict(in_best)}")
    return 0 if agree == n else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
