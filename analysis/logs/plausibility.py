"""Is a measurement physically possible? A trial whose log reports impossible numbers is judged
`invalid_measurement` and never ranked: a broken timer or counter (1e30 tokens/s, a negative peak memory, NaN MFU)
would otherwise win the sweep and be exported as the best layout.

Impossible, in order of the checks:
- a step time, throughput or rate that is not a finite positive number
- memory that is negative, not finite, or above the device's capacity by more than CAPACITY_TOLERANCE (allocator
  statistics and the cluster's nominal capacity differ by a few percent: GB vs GiB rounding, reserved context)
- MFU above 1, or TFLOPs/GPU above the cluster's peak by more than PEAK_TOLERANCE (no kernel beats the datasheet)
- tokens/s above tokens per step / step time by more than a factor TOKENS_TOLERANCE (both come from the same run; a
  factor 1.5 leaves room for mean-vs-median and per-step noise, not for a counter gone wrong). Only too many tokens
  is impossible here: a run that reports fewer than it did can only lose the ranking, never win it.
"""

from __future__ import annotations

import math
from typing import Any, TypeGuard

CAPACITY_TOLERANCE = 0.05
PEAK_TOLERANCE = 0.05
TOKENS_TOLERANCE = 1.5
_POSITIVE = ("step_time_s", "tokens_per_s", "samples_per_s", "tokens_per_gpu_per_s")
_MEMORY = ("peak_mem_gb", "peak_mem_reserved_gb")
_TFLOPS = ("tflops_per_gpu", "model_tflops_per_gpu")


def _is_number(value: object) -> TypeGuard[float]:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _finite(value: object) -> TypeGuard[float]:
    return _is_number(value) and math.isfinite(value)


def _bounded(metrics: dict[str, Any], keys: tuple[str, ...], limit: float | None, tolerance: float,
             above: str) -> str | None:
    """The first of `keys` that is not a finite number >= 0, or is above `limit` (when known) by more than
    `tolerance`."""
    for key in keys:
        value = metrics.get(key)
        if not _is_number(value):
            continue
        if not math.isfinite(value) or value < 0:
            return f"{key} = {value!r} (must be a finite number >= 0)"
        if _finite(limit) and limit > 0 and value > limit * (1 + tolerance):
            return f"{key} = {value:.4g} is " + above.format(limit=limit, tolerance=tolerance)
    return None


def implausible(metrics: dict[str, Any], *, capacity_gb: float | None = None, peak_tflops: float | None = None,
                tokens_per_step: float | None = None) -> str | None:
    """Why these measurements cannot be true, in one sentence; None when they can."""
    for key in _POSITIVE:
        value = metrics.get(key)
        if _is_number(value) and not (math.isfinite(value) and value > 0):
            return f"{key} = {value!r} (must be a finite positive number)"
    why = _bounded(metrics, _MEMORY, capacity_gb, CAPACITY_TOLERANCE,
                   "above the device capacity {limit:g} GB (+{tolerance:.0%})")
    if why is not None:
        return why
    mfu = metrics.get("mfu")
    # MFU is relative to the cluster's peak: its upper bound holds only where that peak is a physical bound (a GPU
    # datasheet), not for a nominal one (the CPU stand-in: peak_tflops None here).
    if _is_number(mfu) and not (math.isfinite(mfu) and mfu >= 0 and (peak_tflops is None or mfu <= 1)):
        return f"mfu = {mfu!r} (model FLOPs utilisation must be between 0 and 1)"
    why = _bounded(metrics, _TFLOPS, peak_tflops, PEAK_TOLERANCE,
                   "above the cluster's peak {limit:g} TFLOP/s per GPU (+{tolerance:.0%})")
    if why is not None:
        return why
    step_s, tokens_per_s = metrics.get("step_time_s"), metrics.get("tokens_per_s")
    if (_finite(tokens_per_step) and tokens_per_step > 0 and _finite(step_s) and _finite(tokens_per_s)
            and tokens_per_s * step_s > TOKENS_TOLERANCE * tokens_per_step):
        return (f"tokens_per_s = {tokens_per_s:.4g} is more than {tokens_per_step:g} tokens per step / "
                f"{step_s:.4g} s per step = {tokens_per_step / step_s:.4g} allows")
    return None
