"""Replay benchmark: how many GPU-hours each search strategy needs to find a configuration within 2 % of the best,
on every measured table in tests/data/replay/ (launcher.replay, the sweep loop's scheduler and calibration).

    python tests/benchmarks/bench_replay.py

Target (issue 10): adaptive search reaches a configuration within 2 % of the best using at most 35 % of exhaustive
search's GPU-hours in total over the replay tables, with final regret <= 2 % on every table.

Cost model: launcher.replay.Costs defaults (startup 180 s, 3 warm-up + 5 measured iterations, early stop after 2
measured) except for the tiny CPU sweep, which is replayed with its own settings (conf/backend/torch.yaml:
startup 10 s, 2 + 4 iterations).
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from launcher.measured import read_table  # noqa: E402
from launcher.replay import STRATEGIES, Costs, replay_sweep, report, totals  # noqa: E402

TABLES = {
    "h100_single_gpu.csv": Costs(),
    "tiny_cpu.csv": Costs(startup_s=10.0, warmup_iters=2, measure_iters=4),
    "bloom_tr11_a100.csv": Costs(),
}
RANDOM_SEEDS = range(10)


def main() -> None:
    overall = {}
    for strategy in STRATEGIES:
        results = []
        for name, costs in TABLES.items():
            for sweep in read_table(REPO / "tests" / "data" / "replay" / name):
                if strategy == "random":   # the mean over seeds: what blind search costs on average
                    runs = [replay_sweep(sweep, strategy, seed=s, costs=costs) for s in RANDOM_SEEDS]
                    mean = runs[0]
                    mean.gpu_hours_to_within_2pct = sum(r.gpu_hours_to_within_2pct for r in runs) / len(runs)
                    results.append(mean)
                else:
                    results.append(replay_sweep(sweep, strategy, costs=costs))
        overall[strategy] = (results, totals(results))
        print(f"\n=== {strategy}" + (f" (GPU-h to 2 %: mean over seeds {list(RANDOM_SEEDS)})"
                                     if strategy == "random" else ""))
        print(report(results).split("\n" + results[0].sweep + ":")[0])
    print("\n=== summary over all tables")
    exhaustive = overall["exhaustive"][1]["exhaustive_gpu_hours"]
    for strategy, (_results, t) in overall.items():
        share = t["gpu_hours_to_within_2pct"] / exhaustive
        print(f"{strategy:<11} GPU-h to within 2 %: {t['gpu_hours_to_within_2pct']:9.2f} ({share:5.1%} of exhaustive "
              f"search's {exhaustive:.2f});  spent {t['gpu_hours']:9.2f} ({t['gpu_hours'] / exhaustive:5.1%});  "
              f"worst final regret {t['final_regret']:.1%}")
    results, t = overall["adaptive"]
    share = t["gpu_hours_to_within_2pct"] / exhaustive
    worst = max(r.final_regret for r in results)
    print(f"\nadaptive: {share:.1%} of exhaustive GPU-hours to within 2 % (target <= 35 %): "
          f"{'met' if share <= 0.35 else 'MISSED'}; worst final regret {worst:.1%} (target <= 2 % on every table): "
          f"{'met' if worst <= 0.02 else 'MISSED'}")


if __name__ == "__main__":
    main()
