"""Which trial to run next, which running trial to stop early, and when the sweep has found its best.

Pure: plain data in (the planned trials with their current predictions, the finished ones with their measured
outcome), decisions out. The sweep loop and the replay benchmark (launcher.replay) call the same functions.

- `order`: the best predicted trial (likely to fit) first. Once the predictions have learned from measured trials
  (calibrated constants and the structured residuals, launcher.plan.residuals): by expected gain over the best
  (log throughput above best x (1 + noise tolerance), times the chance to fit) per expected GPU-second (start-up
  plus the trial's iterations, or start-up and one step for an OOM), so a wrong prior is corrected by trying what
  may win big, and cheap trials go first among equals. (Policy.rule='chance' orders by the chance to beat the best
  instead; Policy.span > 0 adds trials that span the grid before anything is learned: both measured worse.)
- `early_stop`: a running trial whose steady-state throughput, after the minimum measured iterations, is worse
  than the best finished trial by more than the noise tolerance plus its own measured spread.
- `steady`: the other side: a running trial whose mean step time is already known to the noise tolerance stops
  with its measurement (fewer measured iterations).
- `stop_rule`: the predictions, with their uncertainty (fat-tailed: Policy.stop_dof), give the unrun trials
  together (the chance that any of them beats the best) less than `threshold` to beat the best by more than the
  noise tolerance; says which trials are skipped and why. (Policy.stop_combine='max' asks only the likeliest one:
  it stopped early on large grids.)

Predictions are log-normal: a trial's step time is exp(N(log predicted, sd²)), sd from the calibration and the
residual model; its peak memory likewise (sd from the calibration). A trial is never treated as a likely OOM when
a measured trial predicted to need at least as much memory fitted. `Policy` holds these choices; the sweep loop
(launcher.run.search) and the replay use the same one (POLICY).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Optional

import numpy as np

from launcher.core.layout import CATEGORICAL, NUMERIC
from launcher.core.states import MEASURED, TrialState

SPAN_TRIALS = 0
"""Trials picked to span the grid before the predictions learn (after the best predicted one). 0: none. A spanning
pick costs a full trial, mostly on a layout nobody expects to win; the benchmark (bench_search_ablation.py) showed
it made the search worse than plan order on half of the measured sweeps."""
PLAUSIBLE_SHARE = 0.6
"""Spanning trials are drawn from those predicted within this share of the best predicted throughput."""
STOP_THRESHOLD = 0.05
"""stop_rule: the sweep ends when no unrun trial has a chance above this of beating the best."""


@dataclass(frozen=True)
class Policy:
    """How the search decides (the sweep loop and the replay use the same one)."""

    rule: str = "gain"
    """order once predictions have learned: 'gain' (expected gain per GPU-second) or 'chance' (chance to beat)."""
    span: int = SPAN_TRIALS
    """Trials picked to span the grid before the predictions learn (after the best predicted one)."""
    stop_combine: str = "any"
    """stop_rule: 'any' (the chance that any unrun trial beats the best), 'max' (the likeliest one's chance) or
    'never' (the replay's stand-in for plan.stop_when_converged=false: run everything, losers stopped early)."""
    stop_dof: float = 2.0
    """stop_rule: 0 = log-normal chances; > 0 = log-Student-t with that many degrees of freedom: the estimator is
    sometimes off by 2-3x on one layout (the CPU grids, the playbook's noisy repeats), which a normal tail calls
    impossible; with 3 the measured tables' sweeps with a final regret above 1 % went from 8 to 5 of 91; 2 (the
    fattest tail with a finite mean) left none of 98 (3 left vTrain's 24x1024 8-GPU gbs 8 grid at 7 %: its best,
    tp2 pp4 mbs4, is 1.5x its mbs2 neighbour, an interaction the additive residuals cannot express). The chance to
    fit uses the same tail: the memory model has outliers too (one H100 grid's winner was predicted 18 % over its
    measured peak, 8 % over the card, and a normal tail gave it a 2 % chance). The stop rule never changes the
    GPU-hours to the best, only those spent after it and the regret."""
    residuals: bool = True
    """Correct the predictions with the structured residuals of the measured trials (launcher.plan.residuals)."""
    min_fit_trials: int = 3
    """Measured trials before the estimator's constants are refitted (launcher.plan.calibrate)."""
    fit_probe: bool = False
    """The refit tries the constants it left undetermined again from higher starts (launcher.plan.calibrate's
    probe, PROBE_STEPS): a constant behind a max() (CPU dispatch against GPU work) has no gradient while every
    measured trial is on the other side. Issue 16, search16."""
    trust_trials: int = 0
    """Measured trials before the stop rule reads the learned predictions (trusted); 0: min_fit_trials. Apart from
    it so that the constants can be refitted earlier than the stop rule trusts them (issue 16, search16)."""
    explore: float = 0.5
    """order 'gain': the predicted spreads are scaled by this in the expected gain (1: as predicted; 0: by the
    predicted mean alone, the prior's order corrected by what was measured). Half: the spreads are the corpus's
    (residual scales, miss floor), sized for the stop rule's safety, and taken whole they buy trials of layouts
    unlike the measured ones that mostly lose (bench_search_ablation.py, issue 16 round 4: measured 21.4 % -> 20.1 %
    of exhaustive GPU-hours, sweeps worse than plan order 7 -> 6). The stop rule keeps the whole spreads."""
    pick_param_sd: bool = False
    """order, with the residual model: add the fitted constants' uncertainty (Calibration.predict's step_param_sd)
    to the spreads the pick reads, so that it explores where the constants are not yet identified (the trials
    measured so far exercise the pieces in one proportion) rather than where layout values are unfamiliar. Replay
    only (the sweep loop prices no parameter spread under the residual model); issue 16, search16: not adopted."""
    pick_select: int = 0
    """order, with the residual model: > 0: once that many trials were measured after both predicted them, the pick
    reads whichever of the calibrated constants alone and the constants + residual model has predicted the measured
    trials better out of sample so far (root mean square log error, prequential); the stop rule keeps the residual
    model. 0: always the residual model. Replay only; issue 16, search16: not adopted."""
    pick_floor: bool = False
    """order: read the spreads with the sweep's miss floor (launcher.plan.residuals.miss_floor) as the stop rule
    does (True), or without it (False: order's pick_sd). After one trial that missed badly the floor sets every unrun
    trial's spread to that miss, so the pick read the predicted mean alone (issue 16, search11: docs/search.md)."""


POLICY = Policy()


def learned(policy: Policy, applied: bool, n_measured: int) -> bool:
    """Whether the predictions have learned from the measurements (order's `calibrated`): a refit applies, or the
    residual model has at least one measured trial."""
    return applied or (policy.residuals and n_measured > 0)


def trusted(policy: Policy, applied: bool, n_holdout: int, n_measured: int) -> bool:
    """Whether the stop rule may use the predictions (stop_rule's `calibrated`): with the residual model once the
    minimum of measured trials for a fit is in; without it, once a trial measured after a fit has checked it (a fit
    that has never predicted anything out of sample may be confidently wrong)."""
    if policy.residuals:
        return n_measured >= (policy.trust_trials or policy.min_fit_trials)
    return applied and n_holdout > 0


@dataclass(frozen=True)
class Planned:
    """A planned trial and its current prediction (a-priori or calibrated)."""

    key: str
    dims: Mapping[str, Any]     # the layout (Layout.to_dict()): what spanning picks differ in
    tokens_per_step: float     # per GPU for a per-GPU objective (launcher.run.search_records.objective_share)
    step_time_s: float
    step_sd: float              # log-space sd of step_time_s
    peak_mem_gb: float
    mem_sd: float               # log-space sd of peak_mem_gb
    capacity_gb: float
    startup_s: float = 0.0      # job start-up before the first iteration (what a trial costs besides its steps)

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_per_step / self.step_time_s


class PlannedColumns:
    """Planned trials as columns (issue 19: a Planned object per trial cost ~0.3 s a poll at 50k trials): the keys,
    and numpy arrays of what Planned holds, in the trials' order; `dims(i)` gives row i's layout dict only when a
    decision reads it (the picks' reasons, spanning). `row(i)` is the Planned it stands for, field for field."""

    def __init__(self, keys: Sequence[str], tokens_per_step: np.ndarray, step_time_s: np.ndarray,
                 step_sd: np.ndarray, peak_mem_gb: np.ndarray, mem_sd: np.ndarray, capacity_gb: np.ndarray,
                 startup_s: np.ndarray, gpus: np.ndarray, dims: Callable[[int], Mapping[str, Any]]) -> None:
        self.keys = keys
        self.tokens_per_step, self.step_time_s, self.step_sd = tokens_per_step, step_time_s, step_sd
        self.peak_mem_gb, self.mem_sd, self.capacity_gb, self.startup_s = peak_mem_gb, mem_sd, capacity_gb, startup_s
        self.gpus = gpus
        """float(dims['gpus'] or 1): what trial_cost charges per second."""
        self.dims = dims

    @classmethod
    def of(cls, planned: Sequence[Planned]) -> PlannedColumns:
        """The columns of Planned objects (the per-trial path: the replay and tests hand these)."""
        rows = list(planned)
        return cls([t.key for t in rows], _column(rows, "tokens_per_step"), _column(rows, "step_time_s"),
                   _column(rows, "step_sd"), _column(rows, "peak_mem_gb"), _column(rows, "mem_sd"),
                   _column(rows, "capacity_gb"), _column(rows, "startup_s"),
                   np.fromiter((float(t.dims.get("gpus") or 1) for t in rows), dtype=float, count=len(rows)),
                   lambda i: rows[i].dims)

    def __len__(self) -> int:
        return len(self.keys)

    def row(self, i: int) -> Planned:
        return Planned(self.keys[i], self.dims(i), float(self.tokens_per_step[i]), float(self.step_time_s[i]),
                       float(self.step_sd[i]), float(self.peak_mem_gb[i]), float(self.mem_sd[i]),
                       float(self.capacity_gb[i]), float(self.startup_s[i]))

    def rows(self) -> list[Planned]:
        return [self.row(i) for i in range(len(self.keys))]

    def take(self, index: np.ndarray) -> PlannedColumns:
        """The rows at `index` (in that order)."""
        at = index.tolist()
        dims = self.dims
        return PlannedColumns([self.keys[i] for i in at], self.tokens_per_step[index], self.step_time_s[index],
                              self.step_sd[index], self.peak_mem_gb[index], self.mem_sd[index],
                              self.capacity_gb[index], self.startup_s[index], self.gpus[index],
                              lambda i: dims(at[i]))

    def with_step_sd(self, step_sd: np.ndarray) -> PlannedColumns:
        """The same rows with these log sds (order's pick_sd)."""
        if len(step_sd) != len(self.keys):
            raise ValueError(f"{len(step_sd)} spreads for {len(self.keys)} planned trials")
        return PlannedColumns(self.keys, self.tokens_per_step, self.step_time_s, np.asarray(step_sd, dtype=float),
                              self.peak_mem_gb, self.mem_sd, self.capacity_gb, self.startup_s, self.gpus, self.dims)

    def tokens_per_s(self) -> np.ndarray:
        return self.tokens_per_step / self.step_time_s


def _columns_of(planned: Sequence[Planned] | PlannedColumns) -> PlannedColumns:
    return planned if isinstance(planned, PlannedColumns) else PlannedColumns.of(planned)


@dataclass(frozen=True)
class Outcome:
    """A finished trial: state ok / stopped_early (measured), oom, or another failure."""

    key: str
    state: TrialState
    tokens_per_s: Optional[float] = None


@dataclass(frozen=True)
class Pick:
    key: str
    reason: str
    chance: float               # of beating the best by more than the tolerance (and fitting); 1.0 = unknown


@dataclass(frozen=True)
class StopDecision:
    stop: bool
    reason: str
    skipped: tuple[tuple[str, str], ...] = ()   # (key, why it is not worth running)


def _phi(x: float) -> float:
    return 0.5 * math.erfc(-x / math.sqrt(2.0))




def best_measured(finished: Sequence[Outcome]) -> Optional[float]:
    speeds = [o.tokens_per_s for o in finished if o.state in MEASURED and o.tokens_per_s]
    return max(speeds) if speeds else None


def chance_fits(trial: Planned, planned: Mapping[str, Planned], finished: Sequence[Outcome]) -> float:
    """P(peak <= capacity); 1 when a measured trial predicted to need at least as much memory fitted."""
    return _fits(trial, largest_fitted(planned, finished))


def largest_fitted(planned: Mapping[str, Planned], finished: Sequence[Outcome]) -> float:
    """The largest predicted peak of a measured trial (-inf: none): every trial needing no more fits. Once per
    decision: asking every measured trial for every planned one was quadratic in the plan."""
    peaks = [other.peak_mem_gb for o in finished if o.state in MEASURED and (other := planned.get(o.key)) is not None]
    return max(peaks, default=-math.inf)


def _largest_fitted_of(planned: PlannedColumns, finished: Sequence[Outcome]) -> float:
    """largest_fitted on columns: a key planned twice counts with its last row, as in {t.key: t} (largest_fitted's
    mapping)."""
    measured = {o.key for o in finished if o.state in MEASURED}
    if not measured:
        return -math.inf
    last = {k: i for i, k in enumerate(planned.keys) if k in measured}
    peaks = [float(planned.peak_mem_gb[last[o.key]]) for o in finished if o.state in MEASURED and o.key in last]
    return max(peaks, default=-math.inf)


def _fits(trial: Planned, largest_fitted_gb: float, dof: float = 0.0) -> float:
    if largest_fitted_gb >= trial.peak_mem_gb:
        return 1.0
    sd = max(trial.mem_sd, 1e-6)
    z = (math.log(trial.capacity_gb) - math.log(trial.peak_mem_gb)) / sd
    return _t_cdf(z, dof) if dof > 0 else _phi(z)


def chance_beats(trial: Planned, best_tokens_per_s: float, noise_tolerance: float, dof: float = 0.0) -> float:
    """P(throughput > best x (1 + tolerance)) under the log-normal prediction (dof > 0: a log-Student-t with that
    many degrees of freedom and the same scale, whose tails allow for the estimator's outliers)."""
    target = best_tokens_per_s * (1.0 + noise_tolerance)
    sd = max(trial.step_sd, 1e-6)
    z = (math.log(trial.tokens_per_s) - math.log(target)) / sd
    return _t_cdf(z, dof) if dof > 0 else _phi(z)


def _t_cdf(x: float, dof: float) -> float:
    """Student t CDF (regularized incomplete beta by its continued fraction; no scipy in the scheduler)."""
    t2 = x * x
    ib = _betainc(dof / 2.0, 0.5, dof / (dof + t2))
    return 1.0 - 0.5 * ib if x > 0 else 0.5 * ib


def _betainc(a: float, b: float, x: float) -> float:
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log(1 - x))
    if x > (a + 1) / (a + b + 2):
        return 1.0 - _betainc(b, a, 1.0 - x)
    f, c, d = 1.0, 1.0, 0.0
    for i in range(200):       # Lentz's algorithm
        m = i // 2
        if i == 0:
            num = 1.0
        elif i % 2 == 0:
            num = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
        else:
            num = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))
        d = 1.0 + num * d
        d = 1.0 / (d if abs(d) > 1e-30 else 1e-30)
        c = 1.0 + num / (c if abs(c) > 1e-30 else 1e-30)
        f *= c * d
        if abs(1.0 - c * d) < 1e-12:
            break
    return front * (f - 1.0) / a


def _distance(a: Mapping[str, Any], b: Mapping[str, Any]) -> float:
    d = 0.0
    for k in NUMERIC:  # every integer dimension of the Layout (a new one counts without a change here)
        if k in a and k in b and a[k] and b[k]:
            d += abs(math.log2(float(a[k])) - math.log2(float(b[k])))
    return d + sum(1.0 for k in CATEGORICAL if k in a and k in b and a[k] != b[k])


def _spanning(unrun: list[Planned], anchors: list[Mapping[str, Any]], count: int) -> list[Planned]:
    """Greedy farthest-point picks among `unrun`, away from the anchors and from each other."""
    picks: list[Planned] = []
    pool = list(unrun)
    for _ in range(min(count, len(pool))):
        if not anchors:
            break
        far = max(pool, key=lambda t: (min(_distance(t.dims, a) for a in anchors), t.tokens_per_s))
        picks.append(far)
        anchors = anchors + [far.dims]
        pool.remove(far)
    return picks


def expected_gain(trial: Planned, best_tokens_per_s: float, noise_tolerance: float, explore: float = 1.0) -> float:
    """E[max(0, log throughput - log(best x (1 + tolerance)))] under the log-normal prediction: how much the trial
    is expected to beat the best by (in log units), counting how likely and by how much. explore scales the spread
    (Policy.explore)."""
    sd = max(trial.step_sd * explore, 1e-6)
    mu = math.log(trial.tokens_per_s) - math.log(best_tokens_per_s * (1.0 + noise_tolerance))
    z = mu / sd
    return sd * math.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi) + mu * _phi(z)


def trial_cost(trial: Planned, fits: float, iterations: int) -> float:
    """Expected GPU-seconds of running the trial: start-up plus `iterations` steps when it fits, the start-up and
    the first step (where it runs out of memory) when it does not."""
    gpus = float(trial.dims.get("gpus") or 1)
    return gpus * (trial.startup_s + max(fits * iterations, 1.0) * trial.step_time_s)


def order(planned: Sequence[Planned] | PlannedColumns, finished: Sequence[Outcome], *, calibrated: bool,
          noise_tolerance: float = 0.02, span: int = SPAN_TRIALS, rule: str = "gain",
          iterations: int = 8, candidates: Optional[Collection[str]] = None,
          head: Optional[int] = None, explore: float = 1.0, pick_sd: Optional[np.ndarray] = None) -> list[Pick]:
    """Every unrun trial, the one to run next first. calibrated: the predictions have learned from the measured
    trials (their spreads are the posterior's). rule 'gain': by expected gain over the best per expected GPU-second
    (`iterations` steps per trial); 'chance': by the chance to beat the best. `candidates`: only these trials are
    picked (the others still count: what fitted, the best); `head`: only the first `head` picks (the sweep loop
    submits a few a poll: scoring is vectorised on columns (PlannedColumns), Planned objects and reasons are made
    for the picks returned). `pick_sd`: the log sds the pick reads instead of the planned trials' step_sd, one per
    row of `planned` (Policy.pick_floor: the spreads without the miss floor; the stop rule keeps step_sd)."""
    columns = _columns_of(planned)
    if pick_sd is not None:
        columns = columns.with_step_sd(pick_sd)
    done = {o.key for o in finished}
    best = best_measured(finished)
    learned = calibrated and best is not None
    spans = bool(span) and not learned       # spanning picks depend on every unrun trial: filter afterwards
    largest = _largest_fitted_of(columns, finished)
    keep = [k not in done for k in columns.keys] if done else None
    if candidates is not None and not spans:
        keep = [k in candidates for k in columns.keys] if keep is None else \
            [u and k in candidates for u, k in zip(keep, columns.keys)]
    unrun = columns if keep is None else columns.take(np.flatnonzero(np.array(keep, dtype=bool)))
    fits_v = _fits_vector(unrun, largest)
    if learned:
        assert best is not None
        chance_v = fits_v * _phi_vector(_beats_z(unrun, best, noise_tolerance))
        if rule == "gain":
            value_v = fits_v * _gain_vector(unrun, best, noise_tolerance, explore) / np.maximum(
                _cost_vector(unrun, fits_v, iterations), 1e-9)
            ranked = [unrun.row(i) for i in _first(np.lexsort((-chance_v, -value_v)), head)]
        else:
            ranked = [unrun.row(i) for i in _first(np.lexsort((-_tokens(unrun) * fits_v, -chance_v)), head)]
        fits = {t.key: _fits(t, largest) for t in ranked}
        chance = {t.key: fits[t.key] * chance_beats(t, best, noise_tolerance) for t in ranked}
        if rule == "gain":
            gain = {t.key: fits[t.key] * expected_gain(t, best, noise_tolerance, explore) for t in ranked}
            return [Pick(t.key, f"expected gain {gain[t.key]:.2%} per "
                                f"{trial_cost(t, fits[t.key], iterations) / 3600:.3g} GPU-h (chance "
                                f"{chance[t.key]:.1%} to beat the best by > {noise_tolerance:.0%})", chance[t.key])
                    for t in ranked]
        return [Pick(t.key, f"chance {chance[t.key]:.1%} to beat the best by > {noise_tolerance:.0%}",
                     chance[t.key]) for t in ranked]
    if not spans:
        return _plain_order(unrun, finished, fits_v, head)
    return _spanning_order(unrun.rows(), columns, finished, fits_v, span, candidates, head)


def _spanning_order(unrun: list[Planned], planned: PlannedColumns, finished: Sequence[Outcome], fits_v: np.ndarray,
                    span: int, candidates: Optional[Collection[str]], head: Optional[int]) -> list[Pick]:
    """order before the predictions learned, with Policy.span trials that span the grid (on Planned objects:
    the farthest-point picks read every unrun trial's layout)."""
    by_key = {t.key: t for t in planned.rows()}
    fits = {t.key: float(f) for t, f in zip(unrun, fits_v)}
    ranked = sorted(unrun, key=lambda t: -t.tokens_per_s * fits[t.key])
    picks: list[Pick] = []
    measured = [by_key[o.key].dims for o in finished if o.key in by_key]
    if not any(o.state in MEASURED for o in finished) and ranked:
        picks.append(Pick(ranked[0].key, "best predicted", 1.0))
        measured.append(ranked[0].dims)
        ranked = ranked[1:]
    n_measured = sum(1 for o in finished if o.state in MEASURED) + len(picks)
    if span and n_measured <= span and ranked:
        top = ranked[0].tokens_per_s * fits[ranked[0].key]
        plausible = [t for t in ranked if fits[t.key] >= 0.5 and t.tokens_per_s >= PLAUSIBLE_SHARE * top]
        for t in _spanning(plausible, measured, span + 1 - n_measured):
            picks.append(Pick(t.key, "spans the grid (calibration)", 1.0))
            ranked.remove(t)
    picks += [Pick(t.key, "predicted throughput", 1.0) for t in ranked]
    if candidates is not None:
        picks = [p for p in picks if p.key in candidates]
    return picks[:head] if head is not None else picks


def _plain_order(unrun: PlannedColumns, finished: Sequence[Outcome], fits_v: np.ndarray,
                 head: Optional[int]) -> list[Pick]:
    """order before the predictions learned, without spanning picks: the best predicted first (when nothing is
    measured yet), then by predicted throughput times the chance to fit."""
    ranked = [unrun.keys[i] for i in _first(np.argsort(-_tokens(unrun) * fits_v, kind="stable"), head)]
    first = not any(o.state in MEASURED for o in finished) and ranked
    return [Pick(key, "best predicted" if first and i == 0 else "predicted throughput", 1.0)
            for i, key in enumerate(ranked)]


# -- the scores of many trials at once: numpy arrays, with the scalar functions' math (math.log/exp/erfc element by
# element: the same floats as chance_fits, chance_beats, expected_gain and trial_cost, hence the same order) ---------
def _elementwise(fn: Callable[[float], float], x: np.ndarray) -> np.ndarray:
    return np.frompyfunc(fn, 1, 1)(x).astype(float)


def _phi_vector(x: np.ndarray) -> np.ndarray:
    return 0.5 * _elementwise(math.erfc, -x / math.sqrt(2.0))


def _column(trials: Sequence[Planned], name: str) -> np.ndarray:
    return np.fromiter((getattr(t, name) for t in trials), dtype=float, count=len(trials))


def _tokens(trials: PlannedColumns) -> np.ndarray:
    return trials.tokens_per_s()


def _fits_vector(trials: PlannedColumns, largest_fitted_gb: float) -> np.ndarray:
    peak = trials.peak_mem_gb
    known = largest_fitted_gb >= peak
    peak_asked = np.where(known, 1.0, peak)      # as _fits: no chance is computed where a measured trial tells
    sd = np.maximum(trials.mem_sd, 1e-6)
    z = (_elementwise(math.log, trials.capacity_gb) - _elementwise(math.log, peak_asked)) / sd
    return np.where(known, 1.0, _phi_vector(z))


def _beats_z(trials: PlannedColumns, best_tokens_per_s: float, noise_tolerance: float) -> np.ndarray:
    target = best_tokens_per_s * (1.0 + noise_tolerance)
    sd = np.maximum(trials.step_sd, 1e-6)
    return (_elementwise(math.log, _tokens(trials)) - math.log(target)) / sd


def _gain_vector(trials: PlannedColumns, best_tokens_per_s: float, noise_tolerance: float,
                 explore: float = 1.0) -> np.ndarray:
    sd = np.maximum(trials.step_sd * explore, 1e-6)
    mu = _elementwise(math.log, _tokens(trials)) - math.log(best_tokens_per_s * (1.0 + noise_tolerance))
    z = mu / sd
    return sd * _elementwise(math.exp, -0.5 * z * z) / math.sqrt(2.0 * math.pi) + mu * _phi_vector(z)


def _cost_vector(trials: PlannedColumns, fits: np.ndarray, iterations: int) -> np.ndarray:
    return trials.gpus * (trials.startup_s + np.maximum(fits * iterations, 1.0) * trials.step_time_s)


def _first(indices: np.ndarray, head: Optional[int]) -> list[int]:
    return (indices if head is None else indices[:head]).tolist()


def early_stop(step_times_s: Sequence[float], tokens_per_step: int, best_tokens_per_s: Optional[float], *,
               noise_tolerance: float = 0.02, min_measured_iters: int = 2) -> Optional[str]:
    """Why a running trial should stop now (None: keep it running). step_times_s: its measured (post-warm-up)
    iterations so far. Not a failure: the caller records it as stopped_early with this partial measurement."""
    if best_tokens_per_s is None or len(step_times_s) < max(1, min_measured_iters):
        return None
    times = sorted(step_times_s)
    median = times[len(times) // 2] if len(times) % 2 else 0.5 * (times[len(times) // 2 - 1] + times[len(times) // 2])
    mean = sum(times) / len(times)
    spread = (math.sqrt(sum((t - mean) ** 2 for t in times) / (len(times) - 1)) / mean) if len(times) > 1 else 0.0
    tokens_per_s = tokens_per_step / median
    if tokens_per_s < best_tokens_per_s * (1.0 - noise_tolerance - spread):
        return (f"{tokens_per_s:,.0f} tokens/s after {len(times)} measured iterations, more than "
                f"{noise_tolerance:.0%} + its spread {spread:.1%} below the best {best_tokens_per_s:,.0f}")
    return None


_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
         2.120, 2.110, 2.101, 2.093, 2.086)
"""Student t 97.5 % quantiles for 1..20 degrees of freedom (then 1.96)."""
STEADY_MIN_ITERS = 3
"""A trial is never called steady on fewer measured iterations: two steps that agree by chance say little."""


def half_width(n: int, cv: float) -> float:
    """Relative 95 % half-width of the mean of n iterations whose relative sd is cv."""
    t = _T975[n - 2] if n - 2 < len(_T975) else 1.96
    return t * cv / math.sqrt(n)


def steady(step_times_s: Sequence[float], *, noise_tolerance: float = 0.02,
           min_measured_iters: int = 2) -> Optional[str]:
    """Why a running trial may stop now with its measurement (None: keep it running): its mean step time is known
    to within the noise tolerance (95 % half-width), so more iterations would not change what the sweep concludes.
    The other side of early_stop: the caller records it as ok, with this measurement."""
    n = len(step_times_s)
    if n < max(STEADY_MIN_ITERS, min_measured_iters):
        return None
    mean = sum(step_times_s) / n
    cv = math.sqrt(sum((t - mean) ** 2 for t in step_times_s) / (n - 1)) / mean
    width = half_width(n, cv)
    if width <= noise_tolerance:
        return (f"steady after {n} measured iterations: mean step {mean:.4g} s known to ±{width:.1%} (95 %), within "
                f"the {noise_tolerance:.0%} noise tolerance")
    return None


def stop_rule(planned: Sequence[Planned], finished: Sequence[Outcome], *, calibrated: bool,
              noise_tolerance: float = 0.02, threshold: float = STOP_THRESHOLD,
              max_trials: int = 0, combine: str = "any", dof: float = 0.0) -> StopDecision:
    """Whether the sweep may end now, and which unrun trials that leaves out (with the reason for each)."""
    by_key = {t.key: t for t in planned}
    done = {o.key for o in finished}
    unrun = [t for t in planned if t.key not in done]
    if not unrun:
        return StopDecision(True, "every planned trial ran")
    if max_trials and len(finished) >= max_trials:
        return StopDecision(True, f"plan.max_trials={max_trials} reached",
                            tuple((t.key, f"over plan.max_trials={max_trials}") for t in unrun))
    best = best_measured(finished)
    if combine == "never":
        return StopDecision(False, "the stop rule is off")
    if not calibrated or best is None:
        return StopDecision(False, "not calibrated yet" if best is not None else "nothing measured yet")
    skipped = []
    none_beats = 1.0
    largest = largest_fitted(by_key, finished)
    for t in unrun:
        fits = _fits(t, largest, dof)
        beats = chance_beats(t, best, noise_tolerance, dof)
        none_beats *= 1.0 - fits * beats
        if fits * beats >= threshold:
            return StopDecision(False, f"{t.key} still has a {fits * beats:.1%} chance to beat the best")
        if combine == "any" and 1.0 - none_beats >= threshold:
            return StopDecision(False, f"the unrun trials still have a {1.0 - none_beats:.1%} chance together to "
                                       f"beat the best")
        if fits < 0.5:
            why = f"predicted out of memory ({t.peak_mem_gb:.3g} of {t.capacity_gb:g} GB: {fits:.0%} chance to fit)"
        else:
            why = (f"predicted {t.tokens_per_s:,.0f} tokens/s (±{t.step_sd:.0%}): {beats:.1%} chance to beat the "
                   f"best {best:,.0f} by > {noise_tolerance:.0%}")
        skipped.append((t.key, why))
    return StopDecision(True, f"converged: no unrun trial has a {threshold:.0%} chance to beat the best by > "
                              f"{noise_tolerance:.0%}", tuple(skipped))
