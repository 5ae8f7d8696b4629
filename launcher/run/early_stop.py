"""Early stop of a running trial (fed with analysis.logs.progress's step times through the sweep loop's hooks):
`stop_early`, whether its partial measurement is known worse than the best; `stop_steady`, whether it is already
known to the noise tolerance (then it ends ok, with fewer iterations); with the partial measurement the ledger keeps
(`partial_metrics`) and the best trial's throughput in the running trial's terms (`comparable_best`)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

from launcher.core.objective import Objective
from launcher.run import scheduler


@dataclass(frozen=True)
class StopEarly:
    reason: str
    metrics: dict



def stop_early(step_times_s: Sequence[float], tokens_per_step: int, best_tokens_per_s: Optional[float], *,
               noise_tolerance: float, min_measured_iters: int, measure_iters: int) -> Optional[StopEarly]:
    """scheduler.early_stop, with the partial measurement the ledger keeps for a stopped trial. A trial that has
    logged all its `measure_iters` is about to report its result (peak memory included): it runs to the end."""
    if len(step_times_s) >= measure_iters:
        return None
    why = scheduler.early_stop(step_times_s, tokens_per_step, best_tokens_per_s, noise_tolerance=noise_tolerance,
                               min_measured_iters=min_measured_iters)
    return None if why is None else StopEarly(why, partial_metrics(step_times_s, tokens_per_step))


def stop_steady(step_times_s: Sequence[float], tokens_per_step: int, *, noise_tolerance: float,
                min_measured_iters: int, measure_iters: int) -> Optional[StopEarly]:
    """scheduler.steady, with the measurement the ledger keeps: the trial is recorded ok with fewer measured
    iterations (its figure is known to the noise tolerance). A trial that has logged all its `measure_iters` is
    about to report its full result: it runs to the end."""
    if len(step_times_s) >= measure_iters:
        return None
    why = scheduler.steady(step_times_s, noise_tolerance=noise_tolerance, min_measured_iters=min_measured_iters)
    return None if why is None else StopEarly(why, partial_metrics(step_times_s, tokens_per_step))


def partial_metrics(step_times_s: Sequence[float], tokens_per_step: int) -> dict:
    """A running trial's measurement so far: median step time and its throughput, spread, iterations."""
    times = sorted(step_times_s)
    n = len(times)
    median_s = times[n // 2] if n % 2 else 0.5 * (times[n // 2 - 1] + times[n // 2])
    mean_s = sum(times) / n
    std_s = math.sqrt(sum((t - mean_s) ** 2 for t in times) / (n - 1)) if n > 1 else 0.0
    return {"step_time_s": median_s, "tokens_per_s": tokens_per_step / median_s, "step_time_std_s": std_s,
            "n_measured": n}


def comparable_best(best_tokens_per_s: float, best_gpus: int, trial_gpus: int, objective: Objective | str) -> float:
    """The best trial's throughput in the running trial's terms: per GPU objectives compare per GPU."""
    return Objective(objective).comparable(best_tokens_per_s, best_gpus, trial_gpus)
