"""Issue 17, batches 1-14 (helper judge14b): a time stated once per logging interval that is the interval's cost,
... Each rule: real lines from a fixture (cited), a made-up look-alike, and lines that must not change."""

from __future__ import annotations

import pytest

from analysis.logs.parse_generic import read_records

# ---- a per-interval cost over N batches (GluonNLP run_squad.py's "Time cost=" is time.time() - log_start_time)
# tests/fixtures/oos-batch14/other/gluonnlp_squad_finetune_block_api_time_cost_records_1.log (gluon-nlp#1261)
_GLUON = """\
2020-07-11 00:37:18,464 - root - INFO - Epoch: 1, Batch: 3900/8164, Loss span/answer/total=0.7729/0.1773/0.9502, LR=0.00001868, grad_norm=21.5925. Time cost=90.67, Throughput=52.94 samples/s ETA=1.70h
2020-07-11 00:38:47,375 - root - INFO - Epoch: 1, Batch: 4200/8164, Loss span/answer/total=0.7711/0.1762/0.9473, LR=0.00001841, grad_norm=20.0461. Time cost=88.91, Throughput=53.99 samples/s ETA=1.67h
2020-07-11 00:40:14,275 - root - INFO - Epoch: 1, Batch: 4500/8164, Loss span/answer/total=0.7453/0.1691/0.9144, LR=0.00001814, grad_norm=30.3925. Time cost=86.90, Throughput=55.24 samples/s ETA=1.64h
2020-07-11 00:41:35,982 - root - INFO - Epoch: 1, Batch: 4800/8164, Loss span/answer/total=0.7216/0.1741/0.8957, LR=0.00001787, grad_norm=18.9427. Time cost=81.71, Throughput=58.75 samples/s ETA=1.61h
"""  # noqa: E501


def test_an_interval_cost_matching_the_clock_span_is_divided_by_the_steps_between_records():
    reading = read_records(_GLUON)
    assert "interval's cost" in reading.source
    times = sorted(it.step_time_s for it in reading.iterations)
    assert times == pytest.approx(sorted(v / 300 for v in (90.67, 88.91, 86.90, 81.71)))


def test_a_step_time_stated_per_record_k_steps_apart_stays_a_step_time():
    # made up: Megatron-style records 100 iterations apart, 1.5 s per iteration, 150 s between timestamps
    text = "".join(f"2024-01-01 00:{10 + 150 * i // 60:02d}:{150 * i % 60:02d},000 iteration {100 * (i + 1)}/1000 | "
                   f"elapsed time per iteration (ms): 1500.0 | lm loss: 2.5\n" for i in range(4))
    reading = read_records(text)
    assert "interval's cost" not in reading.source
    assert [it.step_time_s for it in reading.iterations] == pytest.approx([1.5] * 4)
