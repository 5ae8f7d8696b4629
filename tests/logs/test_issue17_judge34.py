"""Issue 17 (helper judge34): the in-sample step-time misses as families. A timer breakdown line (DeepSpeed's
wall_clock_breakdown global timers, Megatron-LM's Timers.log) states a step's phases, not its total: forward + backward
+ the update is the step's time, read only where nothing else in the log times a step. Each: a real line with its
source, look-alikes that must not match."""

from __future__ import annotations

import pytest
from log_fixtures import body

from analysis.logs.outcome import trial_outcome
from analysis.logs.parse_generic import read_records
from analysis.logs.read_log import read_log
from analysis.logs.timer_breakdown import breakdown_step_times, phases_ms, step_ms

# ---- 1. a timer breakdown line: forward + backward + update
# deepspeedai/DeepSpeed deepspeed/utils/timer.py SynchronizedWallClockTimer.log: string = "time (ms)", then
# " | {}: {:.2f}".format(name, elapsed_time); runtime/engine.py DeepSpeedEngine.step logs the global timers
# (fwd, bwd, bwd_inner, bwd_allreduce, step) at each gradient-accumulation boundary. Megatron-LM's 2019 Timers.log
# (DeepSpeedExamples Megatron-LM pretrain_gpt2.py: timers.log(['forward', 'backward', 'optimizer', 'batch generator',
# 'data loader'], normalizer=args.log_interval)).
_REAL = [
    # oos-batch26, DeepSpeed#650 (description): the Megatron-LM GPT-2 example's timers, 10B ZeRO-2 on 32 V100s
    ("oos-batch26/megatron_deepspeed/a_zero2_tutorial_gpt2_10b_32_v100_slow_optimizer_timer_line_1.log",
     207.71 + 3509.10 + 38738.77),
    # oos-batch26, DeepSpeed#650 (comment): DeepSpeed's global timers, older names
    ("oos-batch26/megatron_deepspeed/a_zero2_tutorial_gpt2_10b_nvlink_cluster_wall_clock_breakdown_line_1.log",
     1370.73 + 5053.64 + 11437.30),
]


@pytest.mark.parametrize("path, total_ms", _REAL)
def test_a_real_breakdown_line_is_a_step(path, total_ms):
    text = body(path)
    reading = read_records(text)
    assert reading.source.startswith("timer breakdown")
    assert [it.step_time_s for it in reading.iterations] == [pytest.approx(total_ms / 1000)]
    out = trial_outcome(text)
    assert out.failure_kind == "ok" and out.metrics["step_time_s"] == pytest.approx(total_ms / 1000)


def test_the_current_global_timer_names_and_a_rank_prefix():
    # DeepSpeed 0.19: FORWARD_GLOBAL_TIMER = 'fwd' ... STEP_GLOBAL_TIMER = 'step'; bwd_inner and bwd_allreduce run
    # inside bwd and are not added again
    line = ("[2024-05-01 10:00:01,000] [INFO] [logging.py:96:log_dist] [Rank 0] rank=0 time (ms) | fwd: 120.50 | "
            "bwd: 300.25 | bwd_inner: 250.00 | bwd_allreduce: 50.00 | step: 79.25")
    assert step_ms(phases_ms(line)) == pytest.approx(500.0)
    text = "\n".join(line.replace("10:00:01", f"10:00:{i:02d}") for i in range(1, 9)) + "\n"
    assert [round(s, 6) for _, s in breakdown_step_times(text)] == [0.5] * 8


@pytest.mark.parametrize("line", [
    # the micro-step line (one micro-batch, not a step: oos-batch1 DeepSpeed#255, oos-batch12 min_max_gpt)
    "time (ms) | fwd_microstep: 230.74 | bwd_microstep: 331.51 | bwd_inner_microstep: 149.39 | "
    "bwd_allreduce_microstep: 182.01 | step_microstep: 0.05",
    "time (ms) | forward_microstep: 194.98 | backward_microstep: 337.91 | backward_inner_microstep: 337.86 | "
    "backward_allreduce_microstep: 0.02 | step_microstep: 0.03",
    # one phase alone: ZeRO's optimizer timers (oos-batch8)
    "time (ms) | update_optims: 21766.25 | unscale_grads: 506.45 | optimizer_step: 22850.66",
    # Megatron-LM's per-micro-batch pipeline timers (megatron-logs/megatronlm_bert_iter_mem_1.log)
    "time (ms) | forward-compute: 58.16 | backward-compute: 42.66 | backward-params-all-reduce: 21.43 | "
    "optimizer: 12.00",
    # the global timers before the first step ran (oos-batch8 flops profiler): all zero
    "time (ms) | forward: 0.00 | backward: 0.00 | backward_inner: 0.00 | backward_allreduce: 0.00 | step: 0.0",
    # a phase missing, or two names for one phase
    "time (ms) | forward: 100.00 | backward: 200.00",
    "time (ms) | forward: 100.00 | fwd: 90.00 | backward: 200.00 | step: 5.00",
    # the same words without the timer's heading
    "forward: 100.00 | backward: 200.00 | step: 5.00",
])
def test_look_alikes_are_no_step(line):
    assert breakdown_step_times(line + "\n") == []


def test_any_other_step_time_wins_over_the_breakdown():
    # a log that states its iteration time: the breakdown (which leaves out the data loader) is not read
    megatron = ("time (ms) | forward: 100.00 | backward: 200.00 | optimizer: 50.00 | batch generator: 1.00\n"
                " iteration       10/     100 | elapsed time per iteration (ms): 400.0 | learning rate: 1.0E-04 | "
                "lm loss: 5.0E+00 |\n") * 3
    assert read_log(megatron).iterations[-1].step_time_s == pytest.approx(0.4)
    # a summary's stated step time
    summary = "time (ms) | forward: 100.00 | backward: 200.00 | step: 50.00\naverage step time: 0.42 s\n"
    assert read_records(summary).iterations[-1].step_time_s == pytest.approx(0.42)
