"""The memory band (launcher.plan.band): the rule that decides which predicted peaks are kept or pruned."""

from __future__ import annotations

import math

import pytest

from launcher.plan.band import MemoryFit, SpreadFactors, calibrated_intervals, calibrated_low_gb, memory_fit

CAP_GB = 80.0


@pytest.mark.parametrize(("peak_gb", "low_gb", "keep_borderline", "expected"), [
    (70.0, 60.0, 0.0, MemoryFit.FITS),          # under 90 % of 80 GB
    (72.0, 72.0, 0.0, MemoryFit.FITS),          # at the margin exactly
    (79.0, 70.0, 0.0, MemoryFit.BAND),          # over the margin, the low end fits: uncertain, kept
    (95.0, 80.0, 0.0, MemoryFit.BAND),          # predicted over the device, but the low end is at capacity
    (95.0, 80.5, 0.0, MemoryFit.OOM),           # the whole interval over the device: pruned
    (95.0, 80.5, 0.3, MemoryFit.BORDERLINE),    # ... unless plan.keep_borderline keeps it (95 <= 1.2 x 80)
    (97.0, 81.0, 0.3, MemoryFit.OOM),           # ... within that allowance only
])
def test_the_lower_end_of_the_interval_decides_pruning(peak_gb, low_gb, keep_borderline, expected):
    fit = memory_fit(peak_gb, low_gb, CAP_GB, 0.9, keep_borderline)
    assert fit is expected
    assert fit.kept is (expected is not MemoryFit.OOM)


def test_spread_factors_turn_the_stored_quantiles_into_intervals():
    f = SpreadFactors.of("parasweep_workload")
    assert f.mem_low < 1.0 < f.mem_high and f.step_low < f.step_high   # its step times run faster than predicted
    i = f.intervals(10.0, 2.0)
    assert i.peak_mem_gb_low == pytest.approx(10.0 * f.mem_low)
    assert i.step_time_s_high == pytest.approx(2.0 * f.step_high)
    d = i.as_dict(tokens_per_s=1000.0, step_time_s=2.0)    # the slow end of the step is the low end of tokens/s
    assert d["tokens_per_s_low"] == pytest.approx(1000.0 / f.step_high)
    assert d["tokens_per_s_high"] == pytest.approx(1000.0 / f.step_low)


def test_calibrated_intervals_are_log_normal_at_the_calibrations_sd():
    assert calibrated_low_gb(1.0, 0.1) == pytest.approx(math.exp(-1.6448536 * 0.1))
    assert calibrated_low_gb(1.0, 0.0) == 1.0
    i = calibrated_intervals(1.0, 0.1, 2.0, None)
    assert i.peak_mem_gb_high == pytest.approx(math.exp(1.6448536 * 0.1)) and i.step_time_s_low == 2.0
