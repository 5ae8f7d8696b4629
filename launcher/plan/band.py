"""The memory band: whether a predicted peak fits, is uncertain (kept), or is out of memory (pruned).

A prediction is a point and an interval (launcher.plan.spread: the estimator's leave-one-source-out errors before a
sweep has measured anything; the calibration's log-space sd after). The rule, for the planner and for the sweep
loop after each calibration refit alike:

- **fits**: the point is at most `plan.mem_safety_margin` of the device's memory (the margin is where "predicted to
  fit" ends: it leaves room for what the estimator does not count);
- **band** (uncertain: kept): the point is above the margin but the interval's LOWER end is at most the device's
  memory: the estimator cannot tell, so the trial runs; a real OOM there costs its start-up and feeds the
  calibration's memory fit;
- **borderline** (kept): the lower end is over the device's memory, but the point is within `plan.keep_borderline`
  (a share of capacity) above the margin: the user asked to run predicted OOMs that far (e.g. to see a real one);
- **oom** (pruned): the interval's lower end is over the device's memory, and not borderline.

Without spread data (launcher/plan/spread.json missing) the interval is the point itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import Optional

from launcher.plan import spread

LOW_QUANTILE = 0.05
HIGH_QUANTILE = 0.95
"""The 90 % interval: its lower end decides pruning, both ends are shown (dry run, plan.csv, report, MLflow)."""
BROUGHT_BACK = "brought_back"
"""The selection (TrialRecord.selection) of a planner-pruned trial the calibrated model brought back
(launcher.run.bringback); plan.csv keeps the plan's own verdict."""
Z_90 = 1.6448536269514722
"""The standard normal's 0.95 quantile: a log-normal prediction's 90 % interval is x·exp(±Z_90·sd)."""


class MemoryFit(Enum):
    FITS = "fits"
    BAND = "band"
    BORDERLINE = "borderline"
    OOM = "oom"

    @property
    def kept(self) -> bool:
        return self is not MemoryFit.OOM


def memory_fit(peak_gb: float, low_gb: float, capacity_gb: float, margin: float,
               keep_borderline: float = 0.0) -> MemoryFit:
    """The rule above for one predicted peak `peak_gb` whose interval starts at `low_gb`."""
    if peak_gb <= margin * capacity_gb:
        return MemoryFit.FITS
    if low_gb <= capacity_gb:
        return MemoryFit.BAND
    if peak_gb <= (margin + keep_borderline) * capacity_gb:
        return MemoryFit.BORDERLINE
    return MemoryFit.OOM


@dataclass(frozen=True, slots=True)
class Intervals:
    """A prediction's 90 % intervals: peak memory (GB) and step time (s); tokens/s follows from the step time."""

    peak_mem_gb_low: float
    peak_mem_gb_high: float
    step_time_s_low: float
    step_time_s_high: float

    def as_dict(self, tokens_per_s: float, step_time_s: float) -> dict[str, float]:
        """The ledger's keys (TrialRecord.predicted / calibrated): tokens/s's interval is the step time's turned
        over (the slow end of the step time is the low end of the throughput)."""
        return {"peak_mem_gb_low": self.peak_mem_gb_low, "peak_mem_gb_high": self.peak_mem_gb_high,
                "step_time_s_low": self.step_time_s_low, "step_time_s_high": self.step_time_s_high,
                "tokens_per_s_low": tokens_per_s * step_time_s / self.step_time_s_high,
                "tokens_per_s_high": tokens_per_s * step_time_s / self.step_time_s_low}


@dataclass(frozen=True)
class SpreadFactors:
    """exp(quantile) of the a-priori spread of one stack, looked up once per plan (not once per grid point)."""

    mem_low: float = 1.0
    mem_high: float = 1.0
    step_low: float = 1.0
    step_high: float = 1.0

    @classmethod
    def of(cls, stack: str) -> SpreadFactors:
        mem = spread.interval("peak_mem", 1.0, stack, LOW_QUANTILE, HIGH_QUANTILE)
        step = spread.interval("step_time", 1.0, stack, LOW_QUANTILE, HIGH_QUANTILE)
        mem = mem or (1.0, 1.0)
        step = step or (1.0, 1.0)
        return cls(mem[0], mem[1], step[0], step[1])

    def intervals(self, peak_gb: float, step_time_s: float) -> Intervals:
        return Intervals(self.mem_low_gb(peak_gb), peak_gb * self.mem_high, step_time_s * self.step_low,
                         step_time_s * self.step_high)

    def mem_low_gb(self, peak_gb: float) -> float:
        """The lower end of the peak's interval (what the memory rule reads: known before the step time)."""
        return peak_gb * self.mem_low


def calibrated_intervals(peak_gb: float, mem_sd: float, step_time_s: float, step_sd: Optional[float]) -> Intervals:
    """The 90 % intervals of a calibrated prediction (log-normal, log-space sds from the calibration's residuals)."""
    step_sd = step_sd or 0.0
    return Intervals(peak_gb * math.exp(-Z_90 * mem_sd), peak_gb * math.exp(Z_90 * mem_sd),
                     step_time_s * math.exp(-Z_90 * step_sd), step_time_s * math.exp(Z_90 * step_sd))


def calibrated_low_gb(peak_gb: float, mem_sd: float) -> float:
    """The lower end of a calibrated peak's 90 % interval."""
    return peak_gb * math.exp(-Z_90 * max(mem_sd, 0.0))
