"""How far apart two measured throughputs must be before one configuration beats another: a one-sided test at
CONFIDENCE on the log of tokens/s, with the noise measured in the sweep itself, never assumed.

Two sources of noise are measured:
- between runs: the same configuration run again (analysis.repeats) gives another figure. Their variance in log
  space, pooled over every configuration that was measured more than once, is the sweep's run-to-run noise (df =
  the number of repeats behind it). It holds for every configuration measured on that machine, so a configuration
  measured once is as uncertain as one run of a repeated one, not exact.
- within a run: the per-step times the workload logs (step_time_std_s over n_measured steps). The variance of a
  run's median step is about pi/2 * cv^2 / n. It is the floor of a run's noise: a quiet spell between two repeats
  cannot make a run more precise than its own steps.

A run's variance is the larger of the two; a configuration's figure (the median of its n runs) has that over n.
A beats B when log(A / B) exceeds log(1 + noise_tolerance) plus the one-sided Student-t quantile (df of the pooled
variance; of the steps when no configuration was repeated) times the standard error of the difference. Otherwise
they are tied within noise. noise_tolerance stays the smallest difference worth acting on, not a noise estimate.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

CONFIDENCE = 0.95
"""One-sided confidence of "A beats B"; T_95 below holds the quantiles for it."""

T_95 = {1: 6.314, 2: 2.920, 3: 2.353, 4: 2.132, 5: 2.015, 6: 1.943, 7: 1.895, 8: 1.860, 9: 1.833, 10: 1.812,
        12: 1.782, 15: 1.753, 20: 1.725, 30: 1.697, 60: 1.671}
"""One-sided 95% quantiles of Student's t by degrees of freedom (standard tables); between two rows the smaller df's
(larger, so conservative) value is used, beyond 60 the normal's 1.645."""
Z_95 = 1.645
MEDIAN_EFFICIENCY = math.pi / 2
"""Var(median of n) ~ pi/2 * sigma^2 / n for roughly normal steps: the workload reports the median step."""


@dataclass(frozen=True)
class Run:
    """One measurement of one configuration: its throughput and the spread of its own steps."""

    tokens_per_s: float
    step_cv: float = 0.0
    """Standard deviation / median of its measured step times (0: not logged)."""
    n_steps: int = 0
    """Steps behind that spread (0: not logged)."""

    @property
    def within_var(self) -> float:
        """Variance of log(tokens/s) of this run from its own steps' spread (0 when they were not logged)."""
        if self.n_steps < 2 or self.step_cv <= 0:
            return 0.0
        return MEDIAN_EFFICIENCY * self.step_cv ** 2 / self.n_steps


@dataclass(frozen=True)
class SweepNoise:
    """The run-to-run noise a sweep measured: the pooled variance of log(tokens/s) over the repeated
    configurations."""

    between_var: float
    df: int
    """Degrees of freedom of between_var: sum over the repeated configurations of (runs - 1); 0: none repeated."""

    @property
    def between_sd(self) -> float:
        return math.sqrt(self.between_var)


def t_quantile(df: int) -> float:
    """The one-sided CONFIDENCE quantile of Student's t with df degrees of freedom (df >= 1)."""
    if df < 1:
        raise ValueError(f"t_quantile: df={df}; needs at least 1 degree of freedom")
    rows = [k for k in sorted(T_95) if k <= df]
    return T_95[rows[-1]] if df <= max(T_95) else Z_95


def pooled(groups: Iterable[Sequence[Run]]) -> SweepNoise:
    """Pool the between-run variance of log(tokens/s) over the configurations measured more than once."""
    squares, df = 0.0, 0
    for runs in groups:
        logs = [math.log(r.tokens_per_s) for r in runs if r.tokens_per_s > 0]
        if len(logs) < 2:
            continue
        mean = sum(logs) / len(logs)
        squares += sum((y - mean) ** 2 for y in logs)
        df += len(logs) - 1
    return SweepNoise(squares / df if df else 0.0, df)


def _config_var(runs: Sequence[Run], noise: SweepNoise) -> float:
    """Variance of log of a configuration's median over its runs: each run's is the larger of the sweep's
    between-run variance and its own steps' variance."""
    if not runs:
        return 0.0
    per_run = [max(noise.between_var, r.within_var) for r in runs]
    return sum(per_run) / len(runs) ** 2


def _df(a: Sequence[Run], b: Sequence[Run], noise: SweepNoise) -> int:
    """The pooled between-run df; with no repeat in the sweep, the steps behind the two figures."""
    if noise.df:
        return noise.df
    return sum(max(r.n_steps - 1, 0) for r in (*a, *b))


def band(a: Sequence[Run], b: Sequence[Run], noise: SweepNoise, noise_tolerance: float) -> float:
    """The share by which a's median must exceed b's for a to beat b at CONFIDENCE: exp(log(1 + tolerance) +
    t * standard error of the difference of the logs) - 1. Just the tolerance where nothing measured a spread."""
    se = math.sqrt(_config_var(a, noise) + _config_var(b, noise))
    df = _df(a, b, noise)
    if se <= 0 or df < 1:
        return noise_tolerance
    return math.exp(math.log1p(noise_tolerance) + t_quantile(df) * se) - 1.0


def beats(a_score: float, b_score: float, share: float) -> bool:
    """Does a score beat b by more than `share` (a band)?"""
    return b_score > 0 and a_score / b_score - 1.0 > share
