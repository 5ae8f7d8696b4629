"""Issue 17, batches 1-14 (helper judge14b): step times (an interval's cost, a run summary, a wrapped record), hangs and
divergence. Each rule: real lines from a fixture (cited), a made-up look-alike, and lines that must not change."""

from __future__ import annotations

import pytest

from analysis.logs.classify import classify
from analysis.logs.families import divergence
from analysis.logs.parse_generic import WRAP_MIN_CHARS, read_records, summary_step_times

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


# ---- a run summary: "Training Summary (N steps):" and its "Total wall-clock:" (torchtitan experiments/rl)
# tests/fixtures/oos-batch14/torchtitan/torchtitan_simple_rl_vllm_compat_five_steps_summary_1.log (torchtitan#2398)
_TITAN_SUMMARY = """\
Step   0 | Loss: -0.0036 | Reward: +0.075 | Samples: 160
  Phase                Time    Peak Mem
  total:             41.44s
================================================================================
Training Summary (5 steps):
  Total wall-clock:               196.29s
  Cumul. rollout:                  31.32s  ( 16.0%)
  Cumul. train:                   126.13s  ( 64.3%)
"""


def test_a_summary_wall_clock_over_its_stated_steps():
    source, found = summary_step_times(_TITAN_SUMMARY)
    assert source == "summary wall clock / steps"
    assert [s for _, s in found] == pytest.approx([196.29 / 5])
    # made up: the same summary in minutes; a wall clock without a step count in its heading is no step time
    assert summary_step_times("Run summary (40 iterations)\n  total wall clock: 2.0 min\n")[1][0][1] == \
        pytest.approx(3.0)
    assert summary_step_times("Training Summary:\n  Total wall-clock: 196.29s\n") == ("", [])


# ---- a record wrapped by the console (veRL's one-line metrics record, ray's driver output)
# tests/fixtures/oos-batch14/other/verl_sglang_gh200_grpo_step2_timing_record_1.log (verl#1208), shortened: the
# fixture's first line is cut at 1000 characters in the middle of "response_length/clip_ratio"
_VERL = ("(TaskRunner pid=16292) step:2 - global_seqlen/min:538646.000 - actor/kl_loss:0.001 - "
         + " - ".join(f"critic/score/m{i}:0.{i:03d}" for i in range(12)) + " - response_length/cl\n"
         "ip_ratio:0.004 - prompt_length/mean:102.534 - timing_s/gen:74.020 - timing_s/update_actor:14.302 - "
         "timing_s/step:96.551 - timing_per_token_ms/adv:0.001\n")


def test_a_wrapped_record_line_is_joined_to_its_continuation():
    assert len(_VERL.splitlines()[0]) >= WRAP_MIN_CHARS
    reading = read_records(_VERL)
    assert [it.step_time_s for it in reading.iterations] == pytest.approx([96.551])


@pytest.mark.parametrize("nxt", [
    "2020-07-11 00:37:18,464 - root - INFO - timing_s/step:96.551",  # a logger line of its own
    "(TaskRunner pid=16292) timing_s/step:96.551",  # a process prefix: a new line
    "step:3 - timing_s/step:96.551",  # a record itself
    "  timing_s/step:96.551",  # indented: not a cut
])
def test_a_line_that_starts_a_line_of_its_own_is_not_a_continuation(nxt):
    first = _VERL.splitlines()[0]
    reading = read_records(first + "\n" + nxt + "\n")
    assert all(it.step_time_s != pytest.approx(96.551) for it in reading.iterations if it.iteration == 2)


# ---- Megatron prints a grad norm only for a step it applied: a NaN one is a NaN update
# tests/fixtures/oos-batch14/nemo/bridge_dsv4_pro_fp8mx_gb300_grad_norm_nan_1.log (Megatron-Bridge#5306), the record
# broken over lines as pasted, the next record cut
_BRIDGE_NAN = """\
iteration 5/50 | elapsed time per iteration: 21392.5 ms |
learning rate: 1.350000E-04 | global batch size: 4096 |
loss scale: 1.0 | grad norm: nan |
number of skipped iterations: 0 | number of nan iterations: 0

iteration 6/50 | elapsed time per iteration: 21313.4 ms |
"""


def test_a_nan_grad_norm_in_megatrons_last_record_is_divergence():
    assert classify(_BRIDGE_NAN).kind == "diverged"
    found = divergence.megatron_grad_norm_diverged(_BRIDGE_NAN)
    assert found is not None and found[0] == 0


def _megatron_line(i: int, rest: str) -> str:
    return (f" iteration {i:8d}/    1000 | consumed samples: {i * 64:10d} | elapsed time per iteration (ms): 812.4 | "
            f"learning rate: 1.0E-04 | global batch size: 64 | lm loss: 2.5E+00 | {rest}")


@pytest.mark.parametrize("last", [
    # a finite grad norm after a NaN one: the last printed decides (made up)
    "loss scale: 1.0 | grad norm: 1.234 | number of skipped iterations: 0 | number of nan iterations: 0 |",
    # fp16: the interval skipped iterations (the loss scaler's search), not an applied NaN (made up)
    "loss scale: 65536.0 | grad norm: inf | number of skipped iterations: 2 | number of nan iterations: 0 |",
])
def test_a_grad_norm_later_finite_or_skipped_is_not_divergence(last):
    text = "\n".join([_megatron_line(10, "loss scale: 1.0 | grad norm: nan | number of skipped iterations: 0 |"),
                      _megatron_line(20, last)]) + "\n"
    assert divergence.megatron_grad_norm_diverged(text) is None


# ---- loss scalers' overflow notes and DeepSpeed's optimizer timers are steps that ran
@pytest.mark.parametrize("text", [
    # tests/fixtures/oos-batch8/other/fairseq_wmt_en_fr_big_fp16_overflow_notes_1.log (fairseq), last lines
    "2020-04-05 18:45:14 | INFO | fairseq.optim.adam | using FusedAdam\n"
    "2020-04-05 18:47:19 | INFO | fairseq.trainer | NOTE: overflow detected, setting loss scale to: 64.0\n"
    "2020-04-05 18:49:04 | INFO | fairseq.trainer | NOTE: overflow detected, setting loss scale to: 32.0\n",
    # tests/fixtures/oos-batch4/other/simpletransformers_lm_notebook_apex_overflow_1.log (apex amp in a notebook)
    "HBox(children=(FloatProgress(value=0.0, max=9917241.0), HTML(value='')))\n\n"
    "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0\n\n"
    "HBox(children=(FloatProgress(value=0.0, max=1266566.0), HTML(value='')))\n",
    # tests/fixtures/oos-batch8/deepspeed/min_max_gpt_gradient_checkpointing_loss_and_timer_1.log (min-max-gpt)
    "x.size() torch.Size([128, 512, 512])\n"
    "[2024-03-08 16:52:38,294] [INFO] [run_trainer.py:68:train] loss : 10.528924942016602\n"
    "[2024-03-08 16:52:55,712] [INFO] [logging.py:96:log_dist] [Rank 0] time (ms) | optimizer_step: 147\n",
])
def test_overflow_notes_and_optimizer_timers_are_progress(text):
    assert classify(text).kind == "ok"


@pytest.mark.parametrize("text", [
    # the scale collapsing below 1 is still divergence (fairseq's floor is 1e-4; made up)
    "".join(f"2020-04-05 18:{40 + i}:00 | INFO | fairseq.trainer | NOTE: overflow detected, setting loss scale to: "
            f"{2.0 ** -i}\n" for i in range(1, 6)),
    # an overflow note followed by the framework's fatal error is not ok (made up)
    "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 32768.0\n"
    "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
    "RuntimeError: CUDA error: an illegal memory access was encountered\n",
])
def test_overflow_notes_do_not_hide_failures(text):
    assert classify(text).kind != "ok"


# ---- DeepSpeed lowering a loss scale that was already down to a few units
# tests/fixtures/oos-batch8/deepspeed/fp16_model_does_not_learn_grad_overflow_loss_scale_1.log (DeepSpeed#697)
_DS697 = """\
[2021-01-26 22:04:03,811] [INFO] [timer.py:166:stop] 0/150, SamplesPerSec=29.515393227502443
[2021-01-26 22:04:09,190] [INFO] [fused_optimizer.py:314:_update_scale] 
Grad overflow on iteration 3
[2021-01-26 22:04:09,191] [INFO] [fused_optimizer.py:316:_update_scale] Reducing dynamic loss scale from 8.0 to 4.0
[2021-01-26 22:04:09,191] [INFO] [logging.py:60:log_dist] [Rank 0] Overflow detected. Skipping step. Attempted loss scale: 8.0, reducing to 4.0
[2021-01-26 22:04:09,191] [INFO] [timer.py:166:stop] 0/160, SamplesPerSec=28.925970601141177
"""  # noqa: W291, E501


def test_an_overflow_lowering_a_scale_of_a_few_units_is_divergence():
    found = divergence.loss_scale_collapsed(_DS697)
    assert found is not None and "2^3" in found[1]
    assert classify(_DS697).kind == "diverged"


@pytest.mark.parametrize("line", [
    # the start-up search and a healthy run's occasional overflow (DeepSpeed's wording; made up values)
    "[INFO] [logging.py:60:log_dist] [Rank 0] Overflow detected. Skipping step. Attempted loss scale: 65536, "
    "reducing to 32768",
    "[INFO] [fused_optimizer.py:316:_update_scale] Reducing dynamic loss scale from 1024.0 to 512.0",
    # a scale of 8 stated without the one before it (apex, fairseq) is not this rule's
    "Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to 8.0",
])
def test_overflows_at_ordinary_scales_are_not_collapse(line):
    assert divergence.loss_scale_collapsed(line + "\n") is None
