"""`python -m launcher.replay MEASURED.csv [--strategy adaptive|calibrated|exhaustive|predicted|random|oracle] [--json]`

Replays a sweep against a table of measured outcomes instead of a cluster: the sweep loop's own scheduler
(launcher.run.scheduler), calibration (launcher.plan.calibrate), early stopping and stop rule decide what to run;
the table says what each run measured. The table format is launcher.measured's (one row per configuration; rows
with the same model, gpu and n_gpus form one sweep).

Cost of a trial (`Costs`): (start-up + iterations x measured step time) x GPUs, iterations = warm-up + measured
ones; an OOM costs the start-up. Fewer measured iterations when the trial is stopped early on either side: losing
(launcher.run.scheduler.early_stop) or already steady (scheduler.steady: its figure known to the noise tolerance,
given the iteration-to-iteration noise `Costs.iteration_cv`). The start-up default is what Megatron jobs of that
size take (`megatron_startup_s`, sources there). Queue wait holds no GPU: it is not in the GPU-hours. Strategies:
- exhaustive: every configuration, in the a-priori plan's order (what a sweep does without this machinery);
- predicted: the a-priori plan's order with early stopping and the stop rule, never calibrated;
- calibrated: the scheduler's order with calibration after every trial, but every trial measured in full and no
  stop rule (what the ordering alone is worth);
- random: every configuration in a random order (seeded); `random_expected_gpu_hours` gives its exact expectation;
- oracle: knows the table: the cheapest configuration within 2 % of the best first, then by measured throughput
  (a lower bound for any order under the same cost model);
- adaptive: the scheduler's order, calibration after every trial, early stopping on both sides and the stop rule.
Per sweep and in total: GPU-hours until a configuration within 2 % of the table's best was measured, the final
regret (1 - best found / best in the table), the GPU-hours spent, and exhaustive search's GPU-hours.
The a-priori constants are the backend's (`prior_for`), or a finished sweep's calibration (`prior=`,
launcher.plan.calibrate.Prior): a sweep started from another's (plan.prior_from).
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from launcher.core import strict_json
from launcher.core.errors import ParasweepError
from launcher.core.states import TrialState
from launcher.estimate import Request
from launcher.measured import MeasuredRow, MeasuredSweep, read_table
from launcher.plan.calibrate import (
    Calibration,
    FeatureTable,
    Observation,
    Prior,
    TrialFeatures,
    calibrate,
    trial_features,
    uncalibrated,
)
from launcher.plan.constants import Constants, constants_for
from launcher.plan.memory import uses_flash_attention
from launcher.plan.residuals import ResidualModel, corrected_for_pick
from launcher.run import scheduler
from launcher.run.scheduler import POLICY, Outcome, Planned, Policy

STRATEGIES = ("adaptive", "calibrated", "exhaustive", "predicted", "random", "oracle")
WITHIN = 0.02
"""'Found' means a configuration within 2 % of the table's best throughput was measured."""
JSON_KEYS = ("sweep", "strategy", "trials_run", "gpu_hours", "gpu_hours_to_within_2pct", "exhaustive_gpu_hours",
             "final_regret")


STARTUP_BASE_S = 120.0
STARTUP_PER_DOUBLING_S = 5.0


def megatron_startup_s(nodes: int) -> float:
    """Seconds from a Megatron job's start to its first training iteration, by node count: 120 s on one node,
    +5 s per doubling of the nodes (135 s on 8 nodes, 150 s on 64).
    Sources: Megatron's own start-up, launch to the first step, 35 s on one Polaris node (ALCF Megatron-DeepSpeed
    README log, 2023-08-08: initialize 10.6 s, data iterators 30.2 s) to 116 s on 24 GPUs (the same README, Aurora,
    2024-06-21: model-and-optimizer setup 64 s, data iterators 13 s), plus ~30 s of launcher, container and Python
    imports (assumed); NCCL communicator creation 31 s on one node and 42 s on 16 (NVIDIA/nccl issue 534), "2.5-minute
    init time at large scale (above certain K GPUs)" (NVIDIA/nccl issue 1156). The first iteration's extra time
    (iteration 1 takes ~2x iteration 2: tests/fixtures/megatron-logs/alcf_mds_iter_mem_1.log) is in the warm-up."""
    return STARTUP_BASE_S + STARTUP_PER_DOUBLING_S * math.log2(max(1, nodes))


def steady_iters(cv: float, noise_tolerance: float, min_iters: int, max_iters: int) -> int:
    """Measured iterations after which a trial whose iterations vary by `cv` (relative sd) is steady
    (launcher.run.scheduler.steady: mean known to `noise_tolerance`); at most max_iters."""
    for n in range(max(scheduler.STEADY_MIN_ITERS, min_iters), max_iters):
        if scheduler.half_width(n, cv) <= noise_tolerance:
            return n
    return max_iters


@dataclass(frozen=True)
class Costs:
    """How long a replayed trial holds its GPUs. startup_s None: megatron_startup_s(nodes). Warm-up and measured
    iterations: BackendConfig's; min_measured_iters: before an early stop (plan.early_stop_min_iters).
    iteration_cv: iteration-to-iteration noise of a step time (relative sd), for the steady stop."""

    startup_s: Optional[float] = None
    warmup_iters: int = 3
    measure_iters: int = 5
    min_measured_iters: int = 2
    iteration_cv: float = 0.01

    def startup(self, row: MeasuredRow) -> float:
        return megatron_startup_s(row.request.layout.nodes) if self.startup_s is None else self.startup_s

    def measured_iters(self, state: TrialState, noise_tolerance: float = 0.02, steady: bool = False) -> int:
        """Measured iterations of a trial that ended `state`: all of them, the minimum when stopped early, or as
        many as the steady stop needs (`steady`)."""
        if state is TrialState.STOPPED_EARLY:
            return self.min_measured_iters
        if state is not TrialState.OK:
            return 0
        if steady:
            return steady_iters(self.iteration_cv, noise_tolerance, self.min_measured_iters, self.measure_iters)
        return self.measure_iters

    def gpu_hours(self, row: MeasuredRow, stopped_early: bool = False, measured_iters: Optional[int] = None) -> float:
        if row.state is not TrialState.OK:
            return self.startup(row) * row.gpus / 3600.0
        if measured_iters is None:
            measured_iters = self.min_measured_iters if stopped_early else self.measure_iters
        iters = self.warmup_iters + measured_iters
        return (self.startup(row) + iters * (row.step_time_s or 0.0)) * row.gpus / 3600.0


@dataclass(frozen=True)
class Step:
    """One replayed trial, in the order run (for the best-so-far plot)."""

    key: str
    state: TrialState          # ok, stopped_early, oom
    gpu_hours: float           # cumulative, after this trial
    tokens_per_s: Optional[float]
    best_tokens_per_s: Optional[float]   # best so far, after this trial
    reason: str
    measured_iters: int = 0    # measured iterations it ran (0: an OOM)


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

    def __init__(self, sweep: MeasuredSweep, costs: Costs, prior: Prior,
                 residual_model: Optional[ResidualModel] = None, pick_model: Optional[ResidualModel] = None) -> None:
        self.rows = list(sweep.rows)
        self.costs = costs
        self.keys = [_key(r) for r in self.rows]
        self.by_key = dict(zip(self.keys, self.rows))
        self.index = {k: i for i, k in enumerate(self.keys)}
        self.features = [_features(r) for r in self.rows]
        self.table = FeatureTable(self.features)
        self.dims = [r.request.layout.to_dict() for r in self.rows]
        self.prior = prior
        self.residual_model = residual_model
        self.pick_model = pick_model
        self.finished: list[Outcome] = []
        self.observations: list[Observation] = []
        self.steps: list[Step] = []
        self.spent = 0.0
        self.checks: list[tuple[float, float]] = []
        """(log measured / predicted step time, predicted log sd) of trials measured after a learned prediction."""

    def planned(self, cal: Calibration, residuals: bool = False) -> list[Planned]:
        return self.predicted(cal, residuals)[0]

    def predicted(self, cal: Calibration, residuals: bool = False, model: Optional[ResidualModel] = None,
                  param_pick: bool = False) -> tuple[list[Planned], Optional[np.ndarray]]:
        """Every row as the scheduler reads it, and (with the residual model: `model`, default the replay's) the log
        sds the pick reads instead of their step_sd (launcher.plan.residuals.corrected_for_pick, as the sweep loop's
        Search.predictions)."""
        p = cal.predict(self.table)
        step, sd, pick_sd = p.step_time_s, p.step_sd, None
        if residuals:
            measured = {self.index[o.key]: float(self.by_key[o.key].step_time_s or 0.0) for o in self.finished
                        if o.state in scheduler.MEASURED}
            step, sd, pick_sd = corrected_for_pick(p.step_time_s, self.dims, measured,
                                                  model or self.residual_model, checks=self.checks)
            if param_pick and p.step_param_sd is not None:     # Policy.pick_param_sd
                pick_sd = np.sqrt(pick_sd ** 2 + p.step_param_sd ** 2)
        return [Planned(k, self.dims[i], r.tokens_per_step, float(step[i]), float(sd[i]),
                        float(p.peak_mem_gb[i]), float(p.mem_sd[i]), r.request.cluster.gpu_mem_gb,
                        self.costs.startup(r))
                for i, (k, r) in enumerate(zip(self.keys, self.rows))], pick_sd

    def run(self, key: str, reason: str, early_stopping: bool, noise_tolerance: float,
            predicted_s: Optional[float] = None, steady: bool = False,
            prediction: Optional[Planned] = None) -> None:
        row = self.by_key[key]
        if prediction is not None and row.state is TrialState.OK and row.step_time_s:   # what the search expected
            self.checks.append((math.log(row.step_time_s / prediction.step_time_s), prediction.step_sd))
        best = scheduler.best_measured(self.finished)
        state, stopped = row.state, None
        if row.state is TrialState.OK and early_stopping:
            measured = [row.step_time_s or 0.0] * self.costs.min_measured_iters  # the table holds steady-state times
            stopped = scheduler.early_stop(measured, row.tokens_per_step, best, noise_tolerance=noise_tolerance,
                                           min_measured_iters=self.costs.min_measured_iters)
            state = TrialState.STOPPED_EARLY if stopped else TrialState.OK
        iters = self.costs.measured_iters(state, noise_tolerance, steady)
        self.spent += self.costs.gpu_hours(row, measured_iters=iters)
        self.finished.append(Outcome(key, state, row.tokens_per_s))
        measured_s = row.step_time_s if row.state is TrialState.OK else None
        self.observations.append(Observation(self.features[self.index[key]], measured_s, row.peak_mem_gb,
                                             predicted_s))
        self.steps.append(Step(key, state, self.spent, row.tokens_per_s, scheduler.best_measured(self.finished),
                               stopped or reason, iters))


_FEATURES: dict[int, tuple[Request, TrialFeatures]] = {}
"""id(request) -> (the request, its trial_features): a benchmark replays one grid under six strategies and its
perturbed truths share the measured rows' requests; the features (~10 ms a row) were a tenth of its time. The
request is kept with them, so an id is never reused while it is cached."""
FEATURES_CACHED = 50_000


def _features(row: MeasuredRow) -> TrialFeatures:
    cached = _FEATURES.get(id(row.request))
    if cached is not None and cached[0] is row.request:
        return cached[1]
    q = row.request
    features = trial_features(q.model, q.cluster, q.layout, q.precision, _flash(row), backend=q.backend)
    if len(_FEATURES) >= FEATURES_CACHED:
        _FEATURES.clear()
    _FEATURES[id(q)] = (q, features)
    return features


def _flash(row: MeasuredRow) -> bool:
    q = row.request
    return uses_flash_attention(q.precision) if q.flash_attention is None else q.flash_attention


def prior_for(sweep: MeasuredSweep) -> Prior:
    """The a-priori constants a replay of `sweep` starts from: its backend's. Hook for honesty: when the estimator's
    constants are fitted on a corpus that holds `sweep.source_id`, this must return constants fitted without that
    source (leave one source out). Today's constants (launcher.plan.constants) are fitted on Narayanan et al. 2021
    Table 1 and the project's own H100 sweeps (tests/data/replay/h100_single_gpu.csv replays them in sample), not on
    the published replay tables."""
    return Prior.of(constants_for(sweep.rows[0].request.backend))


def _as_prior(prior: Prior | Constants | None, sweep: MeasuredSweep) -> Prior:
    if prior is None:
        return prior_for(sweep)
    return prior if isinstance(prior, Prior) else Prior.of(prior)


def _within(rows: Sequence[MeasuredRow]) -> float:
    """The throughput that counts as found: within 2 % of the table's best."""
    speeds = [r.tokens_per_s for r in rows if r.tokens_per_s]
    return (1 - WITHIN) * max(speeds)


def oracle_order(sweep: MeasuredSweep, costs: Costs, noise_tolerance: float = 0.02, steady: bool = True) -> list[str]:
    """The table's keys as an oracle runs them: the cheapest configuration within 2 % of the best first, then by
    measured throughput, out-of-memory rows last."""
    rows = list(sweep.rows)
    found = _within(rows)
    iters = costs.measured_iters(TrialState.OK, noise_tolerance, steady)
    first = min((r for r in rows if r.tokens_per_s and r.tokens_per_s >= found),
                key=lambda r: costs.gpu_hours(r, measured_iters=iters))
    rest = sorted((r for r in rows if r is not first), key=lambda r: -(r.tokens_per_s or 0.0))
    return [_key(r) for r in [first, *rest]]


def random_expected_gpu_hours(sweep: MeasuredSweep, costs: Costs = Costs()) -> float:
    """Expected GPU-hours of random order until a configuration within 2 % of the best is measured, exactly: each
    of the g such configurations is equally likely to come first among them, and any other configuration precedes
    all of them with probability 1 / (g + 1)."""
    found = _within(sweep.rows)
    good = [costs.gpu_hours(r) for r in sweep.rows if r.tokens_per_s and r.tokens_per_s >= found]
    other = [costs.gpu_hours(r) for r in sweep.rows if not (r.tokens_per_s and r.tokens_per_s >= found)]
    return sum(other) / (len(good) + 1) + sum(good) / len(good)


def replay_sweep(sweep: MeasuredSweep, strategy: str = "adaptive", *, seed: int = 0, costs: Costs = Costs(),
                 noise_tolerance: float = 0.02, threshold: float = scheduler.STOP_THRESHOLD,
                 max_trials: int = 0, prior: Prior | Constants | None = None, until_found: bool = False,
                 steady_stop: bool = True, policy: Policy = POLICY,
                 residual_model: Optional[ResidualModel] = None,
                 pick_model: Optional[ResidualModel] = None) -> SweepResult:
    """Replay one sweep. prior: the calibration's starting point (default `prior_for(sweep)`); until_found: end as
    soon as a configuration within 2 % of the best was measured (the benchmark's baselines, whose GPU-hours spent
    are known without running on); steady_stop: the adaptive strategy (and the oracle) stop a trial once its figure
    is steady (scheduler.steady); residual_model: the search's (default launcher.plan.residuals.MODEL, the loop's;
    the benchmark passes prior sds fitted without the sweep's own source group, launcher.plan.prior_sds);
    pick_model: another residual model for the pick alone (the stop rule and the checks keep residual_model's)."""
    if strategy not in STRATEGIES:
        raise ParasweepError(f"--strategy {strategy!r}: use one of {', '.join(STRATEGIES)}")
    rp = _Replay(sweep, costs, _as_prior(prior, sweep), residual_model, pick_model)
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
    elif strategy == "oracle":
        static = oracle_order(sweep, costs, noise_tolerance, steady_stop)
    stop = scheduler.StopDecision(False, "")
    learns = strategy in ("adaptive", "calibrated")
    previous: Optional[Calibration] = None
    prequential: list[tuple[float, ...]] = []   # log errors of the constants alone and the posterior, out of sample
    while len(rp.finished) < len(rp.rows):
        if until_found and any(s.tokens_per_s and s.tokens_per_s >= (1 - WITHIN) * best for s in rp.steps):
            break
        if max_trials and len(rp.finished) >= max_trials:
            stop = scheduler.stop_rule(rp.planned(a_priori), rp.finished, calibrated=False, max_trials=max_trials)
            break
        if strategy in ("exhaustive", "random", "oracle"):
            rp.run(static[len(rp.finished)], strategy, False, noise_tolerance,
                   steady=strategy == "oracle" and steady_stop)
            continue
        cal = calibrate(rp.observations, rp.prior, min_trials=policy.min_fit_trials, start=previous,
                        probe=policy.fit_probe) if learns \
            else a_priori
        previous = cal
        planned, pick_sd = rp.predicted(cal, residuals=learns and policy.residuals, param_pick=policy.pick_param_sd)
        for_pick = planned
        if pick_model is not None and learns and policy.residuals:
            for_pick, pick_sd = rp.predicted(cal, residuals=True, model=pick_model, param_pick=policy.pick_param_sd)
        bare = rp.planned(cal) if learns and policy.residuals and policy.pick_select else None
        if bare is not None and len(prequential) >= policy.pick_select and _rms(prequential, 0) < _rms(prequential, 1):
            for_pick, pick_sd = bare, None        # Policy.pick_select: the constants alone predict better so far
        n_measured = sum(1 for o in rp.finished if o.state in scheduler.MEASURED)
        learned = scheduler.learned(policy, cal.applied, n_measured) if learns else False
        if strategy != "calibrated":
            trusted = scheduler.trusted(policy, cal.applied, cal.n_holdout, n_measured) if learns else True
            stop = scheduler.stop_rule(planned, rp.finished, calibrated=trusted, noise_tolerance=noise_tolerance,
                                       threshold=threshold, combine=policy.stop_combine, dof=policy.stop_dof)
            if stop.stop:
                break
        if strategy == "predicted":
            done = {o.key for o in rp.finished}
            key, reason = next(k for k in static if k not in done), "a-priori order"
        else:
            pick = scheduler.order(for_pick, rp.finished, calibrated=learned, noise_tolerance=noise_tolerance,
                                   span=policy.span, rule=policy.rule,
                                   explore=policy.explore, pick_sd=None if policy.pick_floor else pick_sd,
                                   iterations=costs.warmup_iters + costs.measure_iters)[0]
            key, reason = pick.key, pick.reason
        predicted = (float(cal.predict(rp.table.subset([rp.index[key]])).step_time_s[0])
                     if cal.applied else None)
        checked = next(p for p in planned if p.key == key) if learned else None
        row = rp.by_key[key]
        if bare is not None and checked is not None and row.state is TrialState.OK and row.step_time_s:
            prequential.append(tuple(math.log(row.step_time_s / q.step_time_s)
                                     for q in (next(b for b in bare if b.key == key), checked)))
        rp.run(key, reason, strategy != "calibrated", noise_tolerance, predicted,
               steady=strategy == "adaptive" and steady_stop, prediction=checked)
    found = next((s.gpu_hours for s in rp.steps if s.tokens_per_s and s.tokens_per_s >= (1 - WITHIN) * best), None)
    best_found = scheduler.best_measured(rp.finished) or 0.0
    exhaustive = sum(costs.gpu_hours(r) for r in rp.rows)
    final_cal = calibrate(rp.observations, rp.prior, min_trials=policy.min_fit_trials, start=previous,
                        probe=policy.fit_probe) if learns \
        else a_priori
    if stop.stop:
        reason = stop.reason
    elif len(rp.finished) < len(rp.rows):
        reason = "a configuration within 2 % of the best was found (until_found)"
    else:
        reason = "every configuration ran"
    return SweepResult(sweep.name, strategy, len(rp.finished), rp.spent, found, exhaustive, 1.0 - best_found / best,
                       len(rp.rows), rp.steps, reason, stop.skipped, final_cal)


def _rms(errors: Sequence[tuple[float, ...]], which: int) -> float:
    return math.sqrt(sum(e[which] ** 2 for e in errors) / len(errors)) if errors else 0.0


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
            print(strict_json.dumps(r.as_json()))
        print(strict_json.dumps(totals(results)))
    else:
        print(report(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
