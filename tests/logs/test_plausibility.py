"""Impossible measurements: each check, and what passes."""

import math

import pytest

from analysis.logs.plausibility import implausible

GOOD = {"step_time_s": 2.0, "tokens_per_s": 4096.0, "tflops_per_gpu": 400.0, "model_tflops_per_gpu": 380.0,
        "mfu": 0.38, "peak_mem_gb": 70.0, "peak_mem_reserved_gb": 76.0}
LIMITS = dict(capacity_gb=80.0, peak_tflops=989.0, tokens_per_step=8192)


def test_a_real_measurement_passes():
    assert implausible(GOOD, **LIMITS) is None
    assert implausible({}, **LIMITS) is None
    assert implausible(GOOD) is None  # no limits known: only the limit-free checks


@pytest.mark.parametrize("key, value, words", [
    ("step_time_s", 0.0, "finite positive"), ("step_time_s", -1.0, "finite positive"),
    ("step_time_s", math.nan, "finite positive"), ("tokens_per_s", math.inf, "finite positive"),
    ("tokens_per_s", 1e30, "is more than"), ("peak_mem_gb", -0.5, ">= 0"), ("peak_mem_gb", 84.5, "above the device"),
    ("peak_mem_reserved_gb", math.nan, ">= 0"), ("mfu", 1.2, "between 0 and 1"), ("mfu", math.nan, "between 0"),
    ("tflops_per_gpu", 1100.0, "above the cluster's peak"), ("model_tflops_per_gpu", -3.0, ">= 0"),
])
def test_impossible_values(key, value, words):
    why = implausible({**GOOD, key: value}, **LIMITS)
    assert why is not None and key in why and words in why


def test_tolerances():
    assert implausible({**GOOD, "peak_mem_gb": 83.9}, **LIMITS) is None  # within 5 % of the nominal capacity
    assert implausible({**GOOD, "tflops_per_gpu": 1030.0}, **LIMITS) is None
    assert implausible({**GOOD, "tokens_per_s": 4096.0 * 1.4}, **LIMITS) is None  # mean vs median
    assert implausible({**GOOD, "tokens_per_s": 10.0}, **LIMITS) is None  # under-reporting cannot win a ranking
    assert implausible({**GOOD, "mfu": 1.0}, **LIMITS) is None
