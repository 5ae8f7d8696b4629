"""Embedded-workload log parser. The logs below were captured on this machine (CPU, gloo) with
`python -m torch.distributed.run --nproc-per-node 2 -m launcher.workload --dp 2 --gbs 4 --mbs 1
--warmup-iters 2 --measure-iters 4` (torchrun's OMP banner left out)."""

from __future__ import annotations

import json

import pytest

from analysis.logs.parse_workload import WorkloadLog, parse_workload
from analysis.logs.steady_state import steady_state

STEPS = """\
[parasweep] init done in 3.92 s
[parasweep] iteration 1/6 | phase warmup | step time (ms): 543.94 | lm loss: 6.985079 | tokens/s: 941.3
[parasweep] iteration 2/6 | phase warmup | step time (ms): 370.79 | lm loss: 6.994291 | tokens/s: 1380.8
[parasweep] iteration 3/6 | phase measure | step time (ms): 358.73 | lm loss: 6.959026 | tokens/s: 1427.3
[parasweep] iteration 4/6 | phase measure | step time (ms): 317.57 | lm loss: 7.035891 | tokens/s: 1612.2
[parasweep] iteration 5/6 | phase measure | step time (ms): 313.51 | lm loss: 7.062619 | tokens/s: 1633.1
[parasweep] iteration 6/6 | phase measure | step time (ms): 294.76 | lm loss: 7.000532 | tokens/s: 1737.0
"""
RESULT = (
    'PARASWEEP_RESULT {"step_time_s": 0.31553926950005007, "tokens_per_s": 1622.6189558314825, "tflops_per_gpu": '
    '0.017865112589414502, "model_tflops_per_gpu": 0.017865112589414502, "mfu": null, "peak_mem_gb": '
    '0.08632659912109375, "peak_mem_gb_per_rank": [0.08431243896484375, 0.08632659912109375], "losses": '
    '[6.985078811645508, 6.994290828704834, 6.959026336669922, 7.035891056060791, 7.062619209289551, '
    '7.0005316734313965], "world_size": 2, "n_params": 3445248, "config": {"tp": 1, "pp": 1, "dp": 2, "vpp": 1, '
    '"mbs": 1, "gbs": 4, "microbatches": 2, "recompute": "none", "sequence_parallel": false, "zero_stage": 0, '
    '"distributed_optimizer": false, "precision": "fp32", "backend": "gloo", "device": "cpu"}}\n'
)


def test_real_workload_log():
    log = parse_workload(STEPS + RESULT)
    assert isinstance(log, WorkloadLog) and log.problem is None
    assert [it.phase for it in log.iterations] == ["warmup"] * 2 + ["measure"] * 4
    got = [(it.iteration, it.step_time_s, it.loss, it.tokens_per_s) for it in log.iterations]
    assert got == [pytest.approx(row, rel=1e-12) for row in [
        (1, 0.54394, 6.985079, 941.3), (2, 0.37079, 6.994291, 1380.8), (3, 0.35873, 6.959026, 1427.3),
        (4, 0.31757, 7.035891, 1612.2), (5, 0.31351, 7.062619, 1633.1), (6, 0.29476, 7.000532, 1737.0)]]
    # world_size 2 in the result -> per-GPU tokens
    assert log.iterations[2].tokens_per_gpu_per_s == pytest.approx(1427.3 / 2)
    assert log.result["step_time_s"] == 0.31553926950005007 and log.result["mfu"] is None
    assert log.result["config"]["dp"] == 2 and log.result["world_size"] == 2


def test_steady_state_of_workload_uses_only_measured_steps_and_agrees_with_its_result():
    log = parse_workload(STEPS + RESULT)
    stats = steady_state(log.iterations)
    assert (stats.n_total, stats.n_warmup, stats.n_used, stats.first_used_iteration) == (6, 2, 4, 3)
    # the workload reports the median of its measured steps; the parser must get the same number back
    assert stats.median_step_time_s == pytest.approx(log.result["step_time_s"], rel=1e-4)


def test_no_result_line_is_not_a_problem_but_no_result():
    log = parse_workload(STEPS)
    assert (log.result, log.problem, len(log.iterations)) == (None, None, 6)


@pytest.mark.parametrize("tail, expected_problem", [
    (RESULT[:200] + "\n", "is not valid JSON"),  # killed mid-print
    ("PARASWEEP_RESULT {step_time_s: 1}\n", "is not valid JSON"),
    ("PARASWEEP_RESULT [1, 2]\n", "must be a JSON object, got list"),
    ('PARASWEEP_RESULT {"tokens_per_s": 5.0}\n', "lacks numeric step_time_s"),
    ('PARASWEEP_RESULT {"step_time_s": "fast", "tokens_per_s": "NaN"}\n', "lacks numeric step_time_s, tokens_per_s"),
    ("PARASWEEP_RESULT " + "[" * 100_000 + "\n", "cannot be decoded (RecursionError)"),
    ("PARASWEEP_RESULT\n", "is not valid JSON"),
])
def test_garbled_result_gives_problem_with_line_number(tail, expected_problem):
    log = parse_workload(STEPS + tail, source="job_0/log.out")
    assert log.result is None
    assert expected_problem in log.problem and "job_0/log.out:8:" in log.problem
    assert len(log.iterations) == 6  # the step lines are still usable


def test_last_usable_result_wins_over_a_truncated_later_copy():
    text = STEPS + RESULT + RESULT[:80] + "\n"
    log = parse_workload(text)
    assert log.problem is None and log.result["tokens_per_s"] == pytest.approx(1622.6189558314825)


def test_prefixed_lines_from_torchrun_tee_are_read():
    text = "".join(f"[default0]:{line}\n" for line in (STEPS + RESULT).splitlines())
    log = parse_workload(text)
    assert len(log.iterations) == 6 and log.result == json.loads(RESULT.split(" ", 1)[1])


def test_truncated_last_step_line_keeps_its_step_time():
    log = parse_workload(STEPS + "[parasweep] iteration 7/9 | phase measure | step time (ms): 301.00 | lm lo")
    assert log.iterations[-1].iteration == 7 and log.iterations[-1].step_time_s == pytest.approx(0.301)


def test_step_line_without_step_time_is_dropped_with_a_note():
    notes: list[str] = []
    log = parse_workload("[parasweep] iteration 1/6 | phase warmup | lm loss: 6.9 | tokens/s: 941.3\n", notes=notes)
    assert log.iterations == () and "no step time field" in notes[0]


def test_non_finite_result_numbers_are_kept_for_the_plausibility_check():
    log = parse_workload('PARASWEEP_RESULT {"step_time_s": 0.5, "tokens_per_s": 1e30, "mfu": NaN}\n')
    assert log.problem is None and log.result["tokens_per_s"] == 1e30
