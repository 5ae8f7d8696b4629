"""`python -m launcher.replay MEASURED.csv [--strategy adaptive|exhaustive|predicted|random] [--seed N] [--json]`

Replays a sweep against a table of measured outcomes instead of a cluster: the sweep loop's own scheduler
(launcher.run.scheduler), calibration (launcher.plan.calibrate), early stopping and stop rule decide what to run;
the table says what each run measured. The table format is launcher.measured's (one row per configuration; rows
with the same model, gpu and n_gpus form one sweep).

Cost of a trial: (startup + iterations x measured step time) x GPUs, iterations = warm-up + measured ones (fewer
when stopped early); an OOM costs the startup. Strategies:
- exhaustive: every configuration, in the a-priori plan's order (what a sweep does without this machinery);
- predicted: the a-priori plan's order with early stopping and the stop rule, never calibrated;
- random: every configuration in a random order (seeded): what blind search costs;
- adaptive: the scheduler's order, calibration after every trial, early stopping and the stop rule.
Per sweep and in total: GPU-hours until a configuration within 2 % of the table's best was measured, the final
regret (1 - best found / best in the table), the GPU-hours spent, and exhaustive search's GPU-hours.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from launcher.core.errors import ParasweepError
from launcher.core.states import TrialState
from launcher.measured import MeasuredRow, MeasuredSweep, read_table
from launcher.plan.calibrate import Calibration, FeatureTable, Observation, calibrate, trial_features, uncalibrated
from launcher.plan.constants import constants_for
from launcher.plan.memory import uses_flash_attention
from launcher.run import scheduler
from launcher.run.scheduler import Outcome, Planned

STRATEGIES = ("adaptive", "exhaustive", "predicted", "random")
WITHIN = 0.02
"""'Found' means a configuration within 2 % of the table's best throughput was measured."""
JSON_KEYS = ("sweep", "strategy", "trials_run", "gpu_hours", "gpu_hours_to_within_2pct", "exhaustive_gpu_hours",
             "final_regret")


@dataclass(frozen=True)
class Costs:
    """How long a replayed trial holds its GPUs (defaults: BackendConfig's startup_s, warm-up and measured
    iterations; the minimum measured iterations before an early stop)."""

    startup_s: float = 180.0
    warmup_iters: int = 3
    measure_iters: int = 5
    min_measured_iters: int = 2

    def gpu_hours(self, row: MeasuredRow, stopped_early: bool = False) -> float:
        if row.state is not TrialState.OK:
            return self.startup_s * row.gpus / 3600.0
        iters = self.warmup_iters + (self.min_measured_iters if stopped_early else self.measure_iters)
        return (self.startup_s + iters * (row.step_time_s or 0.0)) * row.gpus / 3600.0


@dataclass(frozen=True)
class Step:
    """One replayed trial, in the order run (for the best-so-far plot)."""

    key: str
    state: TrialState          # ok, stopped_early, oom
    gpu_hours: float           # cumulative, after this trial
    tokens_per_s: Optional[float]
    best_tokens_per_s: Optional[float]   # best so far, after this trial
    reason: str


@dataclass
class SweepResult:
    sweep: str
    strategy: str
    trials_run: int
    gpu_hours: float
    gpu_hours_to_within_2pct: Optional[float]
    exhaustive_gpu_hours: float
    final_regret: float
    n_rows: int = 0
    steps: list[Step] = field(default_factory=list)
    stop_reason: str = ""
    skipped: tuple[tuple[str, str], ...] = ()
    calibration: Optional[Calibration] = None

    def as_json(self) -> dict:
        return {k: getattr(self, k) for k in JSON_KEYS}


def _key(row: MeasuredRow) -> str:
    return f"line {row.line}: {row.request.layout.label()}"


class _Replay:
    """The state of one replayed sweep: features of every row, what ran, what it cost."""

    def __init__(self, sweep: MeasuredSweep, costs: Costs) -> None:
        self.rows = list(sweep.rows)
        self.costs = costs
        self.keys = [_key(r) for r in self.rows]
        self.by_key = dict(zip(self.keys, self.rows))
        self.features = [trial_features(r.request.model, r.request.cluster, r.request.layout, r.request.precision,
                                        _flash(r), backend=r.request.backend) for r in self.rows]
        self.table = FeatureTable(self.features)
        self.prior = constants_for(self.rows[0].request.backend)
        self.finished: list[Outcome] = []
        self.observations: list[Observation] = []
        self.steps: list[Step] = []
        self.spent = 0.0

    def planned(self, cal: Calibration) -> list[Planned]:
        p = cal.predict(self.table)
        return [Planned(k, r.request.layout.to_dict(), r.tokens_per_step, float(p.step_time_s[i]), float(p.step_sd[i]),
                        float(p.peak_mem_gb[i]), float(p.mem_sd[i]), r.request.cluster.gpu_mem_gb)
                for i, (k, r) in enumerate(zip(self.keys, self.rows))]

    def run(self, key: str, reason: str, early_stopping: bool, noise_tolerance: float,
            predicted_s: Optional[float] = None) -> None:
        row = self.by_key[key]
        best = scheduler.best_measured(self.finished)
        state, stopped = row.state, None
        if row.state is TrialState.OK and early_stopping:
            measured = [row.step_time_s or 0.0] * self.costs.min_measured_iters  # the table holds steady-state times
            stopped = scheduler.early_stop(measured, row.tokens_per_step, best, noise_tolerance=noise_tolerance,
                                           min_measured_iters=self.costs.min_measured_iters)
            state = TrialState.STOPPED_EARLY if stopped else TrialState.OK
        self.spent += self.costs.gpu_hours(row, stopped_early=bool(stopped))
        self.finished.append(Outcome(key, state, row.tokens_per_s))
        index = self.keys.index(key)
        measured_s = row.step_time_s if row.state is TrialState.OK else None
        self.observations.append(Observation(self.features[index], measured_s,
                                             row.peak_mem_gb, predicted_s))
        self.steps.append(Step(key, state, self.spent, row.tokens_per_s, scheduler.best_measured(self.finished),
                               stopped or reason))


def _flash(row: MeasuredRow) -> bool:
    q = row.request
    return uses_flash_attention(q.precision) if q.flash_attention is None else q.flash_attention


def replay_sweep(sweep: MeasuredSweep, strategy: str = "adaptive", *, seed: int = 0, costs: Costs = Costs(),
                 noise_tolerance: float = 0.02, threshold: float = scheduler.STOP_THRESHOLD,
                 max_trials: int = 0) -> SweepResult:
    if strategy not in STRATEGIES:
        raise ParasweepError(f"--strategy {strategy!r}: use one of {', '.join(STRATEGIES)}")
    rp = _Replay(sweep, costs)
    speeds = [r.tokens_per_s for r in rp.rows if r.tokens_per_s]
    if not speeds:
        raise ParasweepError(f"sweep {sweep.name!r} has no ok row: nothing to find")
    best = max(speeds)
    a_priori = uncalibrated(rp.prior)
    static: list[str] = []
    if strategy in ("exhaustive", "predicted"):
        static = [p.key for p in scheduler.order(rp.planned(a_priori), [], calibrated=False, span=0)]
    elif strategy == "random":
        static = list(rp.keys)
        random.Random(seed).shuffle(static)
    stop = scheduler.StopDecision(False, "")
    while len(rp.finished) < len(rp.rows):
        if max_trials and len(rp.finished) >= max_trials:
            stop = scheduler.stop_rule(rp.planned(a_priori), rp.finished, calibrated=False, max_trials=max_trials)
            break
        if strategy in ("exhaustive", "random"):
            rp.run(static[len(rp.finished)], strategy, False, noise_tolerance)
            continue
        cal = calibrate(rp.observations, rp.prior) if strategy == "adaptive" else a_priori
        planned = rp.planned(cal)
        # The stop rule trusts a calibration once a trial measured after a fit has checked it.
        calibrated = (cal.applied and cal.n_holdout > 0) or strategy == "predicted"
        stop = scheduler.stop_rule(planned, rp.finished, calibrated=calibrated, noise_tolerance=noise_tolerance,
                                   threshold=threshold)
        if stop.stop:
            break
        if strategy == "predicted":
            done = {o.key for o in rp.finished}
            key, reason = next(k for k in static if k not in done), "a-priori order"
        else:
            pick = scheduler.order(planned, rp.finished, calibrated=cal.applied, noise_tolerance=noise_tolerance)[0]
            key, reason = pick.key, pick.reason
        predicted = next(p.step_time_s for p in planned if p.key == key) if cal.applied else None
        rp.run(key, reason, True, noise_tolerance, predicted)
    found = next((s.gpu_hours for s in rp.steps if s.tokens_per_s and s.tokens_per_s >= (1 - WITHIN) * best), None)
    best_found = scheduler.best_measured(rp.finished) or 0.0
    exhaustive = sum(costs.gpu_hours(r) for r in rp.rows)
    final_cal = calibrate(rp.observations, rp.prior) if strategy == "adaptive" else a_priori
    return SweepResult(sweep.name, strategy, len(rp.finished), rp.spent, found, exhaustive, 1.0 - best_found / best,
                       len(rp.rows), rp.steps, stop.reason if stop.stop else "every configuration ran", stop.skipped,
                       final_cal)


def totals(results: Sequence[SweepResult]) -> dict:
    found = [r.gpu_hours_to_within_2pct for r in results]
    return {"total": True, "sweep": "total", "strategy": results[0].strategy if results else "",
            "trials_run": sum(r.trials_run for r in results), "gpu_hours": sum(r.gpu_hours for r in results),
            "gpu_hours_to_within_2pct": None if any(f is None for f in found) else sum(found),
            "exhaustive_gpu_hours": sum(r.exhaustive_gpu_hours for r in results),
            "final_regret": max((r.final_regret for r in results), default=0.0)}


def _hours(x: Optional[float]) -> str:
    return "never" if x is None else f"{x:,.3g}"


def report(results: Sequence[SweepResult]) -> str:
    lines = [f"{'sweep':<28} {'strategy':<10} {'trials':>9} {'GPU-h to 2%':>12} {'GPU-h spent':>12} "
             f"{'exhaustive':>11} {'share':>6} {'regret':>7}"]
    for r in [*results, None]:
        t = totals(results) if r is None else r.as_json() | {"n": r.n_rows}
        share = (t["gpu_hours_to_within_2pct"] / t["exhaustive_gpu_hours"]
                 if t["gpu_hours_to_within_2pct"] is not None and t["exhaustive_gpu_hours"] else None)
        n = sum(x.n_rows for x in results) if r is None else r.n_rows
        lines.append(f"{t['sweep']:<28} {t['strategy']:<10} {t['trials_run']:>4} of {n:<3} "
                     f"{_hours(t['gpu_hours_to_within_2pct']):>12} {_hours(t['gpu_hours']):>12} "
                     f"{_hours(t['exhaustive_gpu_hours']):>11} {'-' if share is None else f'{share:.0%}':>6} "
                     f"{t['final_regret']:>7.1%}")
    for r in results:
        lines.append(f"{r.sweep}: {r.stop_reason}" + (f"; {len(r.skipped)} skipped" if r.skipped else ""))
        lines += [f"    skipped {key}: {why}" for key, why in r.skipped]
    return "\n".join(lines)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m launcher.replay", description=__doc__.split("\n\n")[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("table", type=Path, help="measured table (CSV, see launcher/measured.py)")
    parser.add_argument("--strategy", default="adaptive", choices=STRATEGIES)
    parser.add_argument("--seed", type=int, default=0, help="random strategy's order")
    parser.add_argument("--json", action="store_true", help="one JSON object per sweep, then the total")
    parser.add_argument("--startup-s", type=float, default=Costs.startup_s)
    parser.add_argument("--warmup-iters", type=int, default=Costs.warmup_iters)
    parser.add_argument("--measure-iters", type=int, default=Costs.measure_iters)
    parser.add_argument("--min-measured-iters", type=int, default=Costs.min_measured_iters,
                        help="measured iterations before a trial may be stopped early")
    parser.add_argument("--noise-tolerance", type=float, default=0.02)
    parser.add_argument("--threshold", type=float, default=scheduler.STOP_THRESHOLD,
                        help="stop rule: end when no unrun trial has a higher chance to beat the best")
    parser.add_argument("--max-trials", type=int, default=0, help="hard cap per sweep (0: none)")
    args = parser.parse_args(argv)
    costs = Costs(args.startup_s, args.warmup_iters, args.measure_iters, args.min_measured_iters)
    try:
        sweeps = read_table(args.table)
        results = [replay_sweep(s, args.strategy, seed=args.seed, costs=costs, noise_tolerance=args.noise_tolerance,
                                threshold=args.threshold, max_trials=args.max_trials) for s in sweeps]
    except ParasweepError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        for r in results:
            print(json.dumps(r.as_json()))
        print(json.dumps(totals(results)))
    else:
        print(report(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
