"""Early stop of a running trial (launcher.run.early_stop); in the sweep loop: tests/run/test_search_loop.py."""

from __future__ import annotations

import pytest

from launcher.run.early_stop import stop_early


def test_stop_early_needs_the_minimum_iterations_and_keeps_the_partial_measurement():
    args = dict(noise_tolerance=0.02, min_measured_iters=3, measure_iters=5)
    assert stop_early([2.0, 2.0], 1000, 1000.0, **args) is None                 # too few steps to judge
    assert stop_early([1.0, 1.0, 1.0], 1000, 1000.0, **args) is None            # as fast as the best
    assert stop_early([2.0] * 5, 1000, 1000.0, **args) is None                  # done measuring: let it report
    stopped = stop_early([2.0, 2.1, 1.9], 1000, 1000.0, **args)
    assert stopped.metrics["tokens_per_s"] == pytest.approx(500.0) and stopped.metrics["n_measured"] == 3
