"""Steady-state statistics: warm-up detection, outlier removal, medians. Fixture values read from the logs."""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from analysis.logs.parse_megatron import Iteration, parse_iterations
from analysis.logs.steady_state import detect_warmup, steady_state
from launcher.core.errors import ParseError

FIXTURES = Path(__file__).parent.parent / "fixtures" / "megatron-logs"


def body(name: str) -> str:
    lines = (FIXTURES / name).read_text().splitlines(keepends=True)
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    return "".join(lines)


def its(*step_times_s: float, phase: str | None = None) -> list[Iteration]:
    return [Iteration(i + 1, t, tflops_per_gpu=100.0 / t, loss=10.0 - i, phase=phase)
            for i, t in enumerate(step_times_s)]


# fixture -> (n_total, n_warmup, n_used, median step s, median TFLOPs, median samples/s, first used, last loss)
FIXTURE_STATS = {
    # 21.1 s then 10.2 s: the first step carries initialisation -> detected as warm-up
    "alcf_mds_iter_mem_1.log": (2, 1, 1, 10.1543, 98.29, 3.151, 2, 17.66422),
    # 16.5 s then 2.0 s (fp16 loss-scale search + allocator) -> warm-up
    "megatronlm_old_iter_mem_1.log": (2, 1, 1, 1.9939, None, None, 10, None),
    # steady runs: nothing dropped
    "bigscience_mds_iter_wrapped_1.log": (5, 0, 5, 106.25, 147.58, 19.276, 42780, 2.127643),
    "bigscience_mds_iter_ok_1.log": (11, 0, 11, 106.33, 147.46, 19.260, 31214, 2.235667),
    "bigscience_mds_iter_fp16_losscale_1.log": (8, 0, 8, (22.1485 + 22.1817) / 2, None, None, 29020, 6.849044),
    "megatronlm_iter_ok_1.log": (3, 0, 3, 5.4707, 238.7, None, 71, 1.798953),
    "mds_iter_ok_1.log": (2, 0, 2, (14.2875 + 14.5414) / 2, (69.85 + 68.63) / 2, (53.753 + 52.815) / 2, 199,
                          5.897035),
}


@pytest.mark.parametrize("name", sorted(FIXTURE_STATS))
def test_fixture_steady_state(name):
    s = steady_state(parse_iterations(body(name)))
    got = (s.n_total, s.n_warmup, s.n_used, s.median_step_time_s, s.median_tflops_per_gpu, s.median_samples_per_s,
           s.first_used_iteration, s.last_loss)
    expected = FIXTURE_STATS[name]
    assert got[:3] == expected[:3] and got[6] == expected[6]
    for value, want in zip(got[3:6] + got[7:], expected[3:6] + expected[7:]):
        assert value == (None if want is None else pytest.approx(want, rel=1e-9))


def test_wrapped_fixture_mean_and_std():
    s = steady_state(parse_iterations(body("bigscience_mds_iter_wrapped_1.log")))
    times = [105.16, 105.17, 106.25, 110.17, 111.14]
    assert s.mean_step_time_s == pytest.approx(statistics.fmean(times))
    assert s.std_step_time_s == pytest.approx(statistics.stdev(times))
    assert s.cv_step_time == pytest.approx(statistics.stdev(times) / statistics.fmean(times))


def test_no_iterations_raises_parse_error():
    with pytest.raises(ParseError, match="no iterations"):
        steady_state([])


def test_warmup_detected_then_checkpoint_outlier_dropped():
    s = steady_state(its(5.0, 3.0, 1.0, 1.0, 1.1, 0.9, 1.0, 4.0, 1.0, 1.0))
    assert (s.n_warmup, s.n_outliers, s.n_used, s.first_used_iteration) == (2, 1, 7, 3)
    assert s.median_step_time_s == 1.0 and s.mean_step_time_s == pytest.approx(1.0)
    assert s.std_step_time_s == pytest.approx(statistics.stdev([1.0, 1.0, 1.1, 0.9, 1.0, 1.0, 1.0]))
    assert s.median_tflops_per_gpu == pytest.approx(100.0)


def test_warmup_stops_at_first_normal_step_later_spike_is_an_outlier():
    s = steady_state(its(3.0, 1.0, 2.5, 1.0, 1.0, 1.0))
    assert (s.n_warmup, s.n_outliers, s.n_used) == (1, 1, 4)


def test_mild_slowdown_is_not_warmup():
    # 20 % slower first step: within WARMUP_FACTOR, kept (the median is robust to it anyway)
    assert detect_warmup([1.2, 1.0, 1.0, 1.0]) == 0
    assert detect_warmup([1.3, 1.0, 1.0, 1.0]) == 1


def test_warmup_never_takes_more_than_half():
    assert detect_warmup([10.0, 10.0, 10.0, 1.0]) == 2
    assert detect_warmup([10.0, 1.0]) == 1
    assert detect_warmup([10.0]) == 0


def test_fast_steps_are_never_dropped():
    s = steady_state(its(1.0, 1.0, 0.2, 1.0, 1.0))
    assert (s.n_warmup, s.n_outliers, s.n_used) == (0, 0, 5)


def test_single_iteration():
    s = steady_state(its(2.0))
    assert (s.n_used, s.median_step_time_s, s.std_step_time_s, s.cv_step_time) == (1, 2.0, 0.0, 0.0)


def test_order_of_input_does_not_matter():
    a = steady_state(its(5.0, 1.0, 1.0, 1.2, 1.0))
    b = steady_state(list(reversed(its(5.0, 1.0, 1.0, 1.2, 1.0))))
    assert a == b and a.n_warmup == 1


def test_labelled_warmup_is_excluded_even_when_fast():
    data = its(0.5, 0.5, phase="warmup") + [Iteration(3, 1.0, phase="measure"), Iteration(4, 1.1, phase="measure")]
    s = steady_state(data)
    assert (s.n_total, s.n_warmup, s.n_used, s.median_step_time_s) == (4, 2, 2, pytest.approx(1.05))


def test_run_that_died_in_warmup_is_summarised_from_what_there_is():
    s = steady_state(its(3.0, 1.0, 1.0, phase="warmup"))
    assert (s.n_total, s.n_warmup, s.n_used) == (3, 1, 2)


def test_missing_throughput_fields_give_none():
    s = steady_state([Iteration(1, 1.0), Iteration(2, 1.0)])
    assert (s.median_tflops_per_gpu, s.median_tokens_per_gpu_per_s, s.median_tokens_per_s, s.last_loss) == (
        None, None, None, None)
