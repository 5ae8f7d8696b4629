"""Steady-state statistics of a benchmark run: drop warm-up and outlier iterations, then summarise.

Warm-up is DETECTED, not a fixed count: the first iterations include CUDA/NCCL initialisation, allocator growth
and kernel autotuning (e.g. the fixture alcf_mds_iter_mem_1.log: 21.1 s, then 10.2 s; megatronlm_old_iter_mem_1.log:
16.5 s, then 2.0 s), and how many of them are slow depends on the stack. Rules, in order:
1. If the workload labelled its steps (phase "measure"), only the measured steps are candidates.
2. Leading candidates slower than WARMUP_FACTOR x the median of the later half are warm-up; detection stops at
   the first normal step and never takes more than half the candidates (a longer warm-up means the run was too
   short to measure, and the reference median has to come from an untouched later half).
3. Among the rest, steps slower than OUTLIER_FACTOR x their median are outliers (evaluation, checkpoint save,
   a straggler) and are left out of the mean/std; the median is robust to them anyway. Fast steps are never
   dropped: a step cannot be faster than the hardware allows, so a fast step is a real measurement.
Steps whose time is zero, negative or not finite are not measurements at all: they are dropped before anything
else (n_invalid counts them) and never divided by. Sums use plain float arithmetic, which saturates at inf
instead of raising, so a hostile 1e300 s step cannot make the summary fail.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from analysis.logs.parse_megatron import Iteration
from launcher.core.errors import ParseError

WARMUP_FACTOR = 1.25
OUTLIER_FACTOR = 1.5
MEASURE_PHASE = "measure"
# Warm-up (CUDA/NCCL initialisation, autotuning, allocator growth) is in a run's first records; a record later than
# this many logging intervals after step 0 is not warm-up (a resumed run's first record is the exception it misses).
MAX_WARMUP_RECORD_INDEX = 20


@dataclass(frozen=True)
class SteadyState:
    """Summary of the steady-state iterations (n_used of n_total; the rest were warm-up or outliers)."""

    n_total: int
    n_warmup: int  # labelled warm-up steps plus detected ones
    n_used: int
    n_outliers: int
    median_step_time_s: float
    mean_step_time_s: float
    std_step_time_s: float  # sample standard deviation; 0.0 for one step
    cv_step_time: float  # std / mean: how noisy the measurement is
    median_tflops_per_gpu: float | None
    median_tokens_per_gpu_per_s: float | None
    median_tokens_per_s: float | None
    median_samples_per_s: float | None
    first_used_iteration: int
    last_loss: float | None
    n_invalid: int = 0  # steps dropped because their time was zero, negative or not finite


def detect_warmup(step_times_s: Sequence[float], factor: float = WARMUP_FACTOR) -> int:
    """How many leading steps are warm-up (rule 2 of the module docstring)."""
    n = len(step_times_s)
    if n < 2:
        return 0
    limit_s = factor * statistics.median(step_times_s[n // 2:])
    k = 0
    while k < n // 2 and step_times_s[k] > limit_s:
        k += 1
    return k


def starts_the_run(ordered: Sequence[Iteration]) -> bool:
    """Can the first of these records (sorted by step) be a warm-up record: is it among the run's first
    MAX_WARMUP_RECORD_INDEX records, counted by the spacing of the step counters? An excerpt that opens at step
    11550 with a record every 10 steps (PaddleOCR#2083) shows the 1155th record: its slow first record is the run's
    noise, not start-up work, and dropping it biases the median low."""
    steps = [it.iteration for it in ordered]
    gaps = [b - a for a, b in zip(steps, steps[1:]) if b > a]
    if not gaps:
        return True
    return steps[0] <= MAX_WARMUP_RECORD_INDEX * statistics.median(gaps)


def _median_of(values: list[float | None]) -> float | None:
    present = [v for v in values if v is not None and not math.isnan(v)]
    return statistics.median(present) if present else None


def usable(step_time_s: float) -> bool:
    """Can this step time be a measurement? (finite and positive)"""
    return math.isfinite(step_time_s) and step_time_s > 0


def _mean_std(times_s: list[float]) -> tuple[float, float]:
    """Mean and sample standard deviation; inf instead of OverflowError for absurd values (statistics.fmean and
    stdev raise on overflow)."""
    mean = sum(times_s) / len(times_s)
    if len(times_s) < 2 or not math.isfinite(mean):
        return mean, 0.0 if len(times_s) < 2 else math.inf
    squares = sum((t - mean) * (t - mean) for t in times_s)
    return mean, math.sqrt(squares / (len(times_s) - 1))


def steady_state(iterations: Sequence[Iteration], *, warmup_factor: float = WARMUP_FACTOR,
                 outlier_factor: float = OUTLIER_FACTOR) -> SteadyState:
    """Summarise `iterations` (any order; sorted by iteration number here). Raises ParseError only when no
    iteration has a usable step time (callers that must not raise check `any(usable(...))` first)."""
    valid = [it for it in iterations if usable(it.step_time_s)]
    if not valid:
        raise ParseError("no iterations to summarise: the log has no iteration lines with a usable step time "
                         "(did the job die before its first logged step? see its failure kind)")
    ordered = sorted(valid, key=lambda it: it.iteration)
    measured = [it for it in ordered if it.phase == MEASURE_PHASE]
    candidates = measured or ordered  # a run that died in its warm-up phase is summarised as is
    n_warmup = (detect_warmup([it.step_time_s for it in candidates], warmup_factor)
                if starts_the_run(candidates) else 0)
    steady = candidates[n_warmup:]
    median_s = statistics.median(it.step_time_s for it in steady)
    used = [it for it in steady if it.step_time_s <= outlier_factor * median_s]
    times_s = [it.step_time_s for it in used]
    mean_s, std_s = _mean_std(times_s)
    losses = [it.loss for it in used if it.loss is not None]
    return SteadyState(
        n_total=len(ordered), n_warmup=len(ordered) - len(candidates) + n_warmup, n_used=len(used),
        n_outliers=len(steady) - len(used), median_step_time_s=median_s,
        mean_step_time_s=mean_s, std_step_time_s=std_s,
        cv_step_time=std_s / mean_s if 0 < mean_s < math.inf else 0.0,
        median_tflops_per_gpu=_median_of([it.tflops_per_gpu for it in used]),
        median_tokens_per_gpu_per_s=_median_of([it.tokens_per_gpu_per_s for it in used]),
        median_tokens_per_s=_median_of([it.tokens_per_s for it in used]),
        median_samples_per_s=_median_of([it.samples_per_s for it in used]),
        first_used_iteration=used[0].iteration, last_loss=losses[-1] if losses else None,
        n_invalid=len(iterations) - len(valid),
    )
