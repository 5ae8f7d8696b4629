"""Which trial to run next, which running trial to stop early, and when the sweep has found its best.

Pure: plain data in (the planned trials with their current predictions, the finished ones with their measured
outcome), decisions out. The sweep loop and the replay benchmark (launcher.replay) call the same functions.

- `order`: the most informative trials first. Until the calibration is applied: the best predicted, then a few
  that span the grid's dimensions (farthest from everything measured, among the plausible ones) so that the
  calibration is well posed, then the rest by predicted throughput. Once calibrated: by the chance of beating the
  best measured throughput by more than the noise tolerance (times the chance of fitting in memory), ties by
  predicted throughput.
- `early_stop`: a running trial whose steady-state throughput, after the minimum measured iterations, is worse
  than the best finished trial by more than the noise tolerance plus its own measured spread.
- `stop_rule`: the calibrated model, with its uncertainty, gives no unrun trial a chance above `threshold` to beat
  the best by more than the noise tolerance; says which trials are skipped and why.

Predictions are log-normal: a trial's step time is exp(N(log predicted, sd²)), sd from the calibration
(launcher.plan.calibrate.Prediction); its peak memory likewise. A trial is never treated as a likely OOM when a
measured trial predicted to need at least as much memory fitted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence

SPAN_TRIALS = 1
"""Trials picked to span the grid before the calibration applies (after the best predicted one)."""
PLAUSIBLE_SHARE = 0.6
"""Spanning trials are drawn from those predicted within this share of the best predicted throughput."""
STOP_THRESHOLD = 0.05
"""stop_rule: the sweep ends when no unrun trial has a chance above this of beating the best."""
_NUMERIC = ("gpus", "nodes", "tp", "pp", "dp", "vpp", "mbs", "gbs", "zero_stage")
_CATEGORICAL = ("recompute", "sequence_parallel", "distributed_optimizer")


@dataclass(frozen=True)
class Planned:
    """A planned trial and its current prediction (a-priori or calibrated)."""

    key: str
    dims: Mapping[str, Any]     # the layout (Layout.to_dict()): what spanning picks differ in
    tokens_per_step: int
    step_time_s: float
    step_sd: float              # log-space sd of step_time_s
    peak_mem_gb: float
    mem_sd: float               # log-space sd of peak_mem_gb
    capacity_gb: float
    startup_s: float = 0.0      # job start-up before the first iteration (what a trial costs besides its steps)

    @property
    def tokens_per_s(self) -> float:
        return self.tokens_per_step / self.step_time_s


@dataclass(frozen=True)
class Outcome:
    """A finished trial: state ok / stopped_early (measured), oom, or another failure."""

    key: str
    state: str
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


MEASURED = ("ok", "stopped_early")


def best_measured(finished: Sequence[Outcome]) -> Optional[float]:
    speeds = [o.tokens_per_s for o in finished if o.state in MEASURED and o.tokens_per_s]
    return max(speeds) if speeds else None


def chance_fits(trial: Planned, planned: Mapping[str, Planned], finished: Sequence[Outcome]) -> float:
    """P(peak <= capacity); 1 when a measured trial predicted to need at least as much memory fitted."""
    for o in finished:
        other = planned.get(o.key)
        if o.state in MEASURED and other is not None and other.peak_mem_gb >= trial.peak_mem_gb:
            return 1.0
    sd = max(trial.mem_sd, 1e-6)
    return _phi((math.log(trial.capacity_gb) - math.log(trial.peak_mem_gb)) / sd)


def chance_beats(trial: Planned, best_tokens_per_s: float, noise_tolerance: float) -> float:
    """P(throughput > best x (1 + tolerance)) under the log-normal prediction."""
    target = best_tokens_per_s * (1.0 + noise_tolerance)
    sd = max(trial.step_sd, 1e-6)
    return _phi((math.log(trial.tokens_per_s) - math.log(target)) / sd)


def _distance(a: Mapping[str, Any], b: Mapping[str, Any]) -> float:
    d = 0.0
    for k in _NUMERIC:
        if k in a and k in b and a[k] and b[k]:
            d += abs(math.log2(float(a[k])) - math.log2(float(b[k])))
    return d + sum(1.0 for k in _CATEGORICAL if k in a and k in b and a[k] != b[k])


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


def order(planned: Sequence[Planned], finished: Sequence[Outcome], *, calibrated: bool,
          noise_tolerance: float = 0.02, span: int = SPAN_TRIALS) -> list[Pick]:
    """Every unrun trial, the one to run next first."""
    by_key = {t.key: t for t in planned}
    done = {o.key for o in finished}
    unrun = [t for t in planned if t.key not in done]
    fits = {t.key: chance_fits(t, by_key, finished) for t in unrun}
    best = best_measured(finished)
    if calibrated and best is not None:
        chance = {t.key: fits[t.key] * chance_beats(t, best, noise_tolerance) for t in unrun}
        ranked = sorted(unrun, key=lambda t: (-chance[t.key], -t.tokens_per_s * fits[t.key]))
        return [Pick(t.key, f"chance {chance[t.key]:.1%} to beat the best by > {noise_tolerance:.0%}",
                     chance[t.key]) for t in ranked]
    ranked = sorted(unrun, key=lambda t: -t.tokens_per_s * fits[t.key])
    picks: list[Pick] = []
    measured = [by_key[o.key].dims for o in finished if o.key in by_key]
    if not any(o.state in MEASURED for o in finished) and ranked:
        picks.append(Pick(ranked[0].key, "best predicted", 1.0))
        measured.append(ranked[0].dims)
        ranked = ranked[1:]
    n_measured = sum(1 for o in finished if o.state in MEASURED) + len(picks)
    if n_measured <= span and ranked:
        top = ranked[0].tokens_per_s * fits[ranked[0].key]
        plausible = [t for t in ranked if fits[t.key] >= 0.5 and t.tokens_per_s >= PLAUSIBLE_SHARE * top]
        for t in _spanning(plausible, measured, span + 1 - n_measured):
            picks.append(Pick(t.key, "spans the grid (calibration)", 1.0))
            ranked.remove(t)
    return picks + [Pick(t.key, "predicted throughput", 1.0) for t in ranked]


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


def stop_rule(planned: Sequence[Planned], finished: Sequence[Outcome], *, calibrated: bool,
              noise_tolerance: float = 0.02, threshold: float = STOP_THRESHOLD,
              max_trials: int = 0) -> StopDecision:
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
    if not calibrated or best is None:
        return StopDecision(False, "not calibrated yet" if best is not None else "nothing measured yet")
    skipped = []
    for t in unrun:
        fits = chance_fits(t, by_key, finished)
        beats = chance_beats(t, best, noise_tolerance)
        if fits * beats >= threshold:
            return StopDecision(False, f"{t.key} still has a {fits * beats:.1%} chance to beat the best")
        if fits < 0.5:
            why = f"predicted out of memory ({t.peak_mem_gb:.3g} of {t.capacity_gb:g} GB: {fits:.0%} chance to fit)"
        else:
            why = (f"predicted {t.tokens_per_s:,.0f} tokens/s (±{t.step_sd:.0%}): {beats:.1%} chance to beat the "
                   f"best {best:,.0f} by > {noise_tolerance:.0%}")
        skipped.append((t.key, why))
    return StopDecision(True, f"converged: no unrun trial has a {threshold:.0%} chance to beat the best by > "
                              f"{noise_tolerance:.0%}", tuple(skipped))
