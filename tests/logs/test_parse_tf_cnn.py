"""analysis.logs.parse_tf_cnn: tf_cnn_benchmarks' step table (judge59, oos-batch48's two tf_cnn_benchmarks runs, in
sample). Rows in the shape benchmark_cnn.py's benchmark_one_step logs them; the batch from print_info's "Batch size:
N global" or the command line."""

from __future__ import annotations

import pytest

from analysis.logs.outcome import trial_outcome
from analysis.logs.parse_tf_cnn import parse_tf_cnn
from analysis.logs.read_log import read_log
from analysis.logs.steady_state import steady_state

# tensorflow/benchmarks#63's run (oos-batch48): --batch_size=64 on one GPU, rows every 10 steps
_ROWS = "Step\tImg/sec\tloss\n1\timages/sec: 140.0 +/- 0.0 (jitter = 0.0)\t8.186\n" + "".join(
    f"{s}\timages/sec: 139.{5 - s // 50} +/- 0.0 (jitter = 0.3)\t7.9{s // 10}\n" for s in range(10, 101, 10))
_TOTAL = "-" * 64 + "\ntotal images/sec: 138.95\n" + "-" * 64 + "\n"


def _median(text: str) -> float:
    reading = read_log(text)
    assert reading.format == "tf_cnn", reading
    return steady_state(reading.iterations).median_step_time_s


def test_rows_with_the_command_lines_batch_give_the_step_time():
    text = "python tf_cnn_benchmarks.py --model=resnet50 --batch_size=64 --local_parameter_device=gpu\n\n" + _ROWS
    assert _median(text + _TOTAL) == pytest.approx(64 / 139.5, rel=2e-3)


def test_the_global_batch_line_wins_over_the_per_device_flag():
    # print_info: "Batch size:  256 global" / "64 per device" on four GPUs
    text = "python tf_cnn_benchmarks.py --num_gpus=4 --batch_size=64\nBatch size:  256 global\n             64 per device\n"
    assert _median(text + _ROWS) == pytest.approx(256 / 139.5, rel=2e-3)


def test_num_gpus_multiplies_the_per_device_batch():
    rows = _ROWS.replace("\t", "        ")  # a paste that turned the tabs into spaces
    assert _median("python3 tf_cnn_benchmarks.py --num_gpus=2 --batch_size=32 --model=resnet50\n" + rows) \
        == pytest.approx(64 / 139.5, rel=2e-3)


def test_without_a_batch_size_no_step_time_is_made_up():
    notes: list[str] = []
    assert parse_tf_cnn(_ROWS, notes=notes) == [] and "no batch size" in notes[0]


def test_the_losses_are_read():
    iterations = parse_tf_cnn("--batch_size=64\n" + _ROWS)
    assert iterations[0].loss == pytest.approx(8.186) and iterations[-1].iteration == 100


def test_a_finished_benchmark_is_healthy():
    outcome = trial_outcome("python tf_cnn_benchmarks.py --batch_size=64\n\n" + _ROWS + _TOTAL)
    assert outcome.failure_kind == "ok" and outcome.metrics["step_time_s"] == pytest.approx(64 / 139.5, rel=2e-3)
