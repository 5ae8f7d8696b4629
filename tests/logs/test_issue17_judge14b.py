"""Issue 17, batches 1-14 (helper judge14b): step times (an interval's cost, a run summary, a wrapped record), hangs and
divergence. Each rule: real lines from a fixture (cited), a made-up look-alike, and lines that must not change."""

from __future__ import annotations

import pytest

from analysis.logs.classify import classify
from analysis.logs.families import divergence
from analysis.logs.parse_generic import WRAP_MIN_CHARS, read_records, summary_step_times, training_bars

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


# ---- a bare millisecond duration with no timestamps is the step's (llama2.c train.py: dt per iteration)
# tests/fixtures/oos-batch4/pytorch/modded_llama2_first_run_step_ms_1.log (a llama2.c-derived loop), lines 3-6
_LLAMA2C = """\
step 0: train loss 11.6275, val loss 11.6275
0 | loss 11.6250 | lr 3.000000e-04 | 104573.61ms
10 | loss 9.3750 | lr 3.000000e-04 | 13597.70ms
20 | loss 7.5000 | lr 3.000000e-04 | 13614.83ms
30 | loss 6.9062 | lr 3.000000e-04 | 13643.21ms
"""


def test_a_bare_millisecond_duration_is_a_step_time():
    reading = read_records(_LLAMA2C)
    assert reading.source == "bare millisecond duration per step"
    assert [it.step_time_s for it in reading.iterations][1:] == pytest.approx([13.5977, 13.61483, 13.64321])


def test_a_bare_duration_in_seconds_k_steps_apart_stays_unread():
    # made up: the same loop printing seconds (an interval or a step: nothing tells without timestamps)
    text = _LLAMA2C.replace("ms\n", "s\n")
    assert read_records(text).source != "bare millisecond duration per step"
    assert not read_records(text).iterations


# ---- a bar's own running loss=nan beside a finite logged train loss (Lightning 1.x postfix, NeMo Megatron)
# tests/fixtures/oos-batch4/nemo/neuron_nemo_megatron_bar_loss_nan_reduced_finite_1.log (neuronx-nemo-megatron#28):
# drawings redrawn on one line, each without its closing "]"
_NEURON = ("Loss=3.920, gradient_norm=1.070, parameter_norm=1536.0, global_step=563.0, consumed_samples=1.44e+5, "
           "throughput=19.00, Epoch 0:   3%|▎         | 565/20101 [2:12:19<76:15:08, 14.05s/it, loss=nan, v_num=, "
           "val_loss_step=11.30, reduced_train_loss=3.910, gradient_norm=1.010, parameter_norm=1552.0, "
           "global_step=564.0, consumed_samples=1.45e+5, throughput=19.00, Epoch 0:   3%|▎         | 566/20101 "
           "[2:12:32<76:14:33, 14.05s/it, loss=nan, v_num=, val_loss_step=11.30, reduced_train_loss=3.910, "
           "gradient_norm=1.010, parameter_norm=1552.0, global_step=564.0, consumed_samples=1.45e+5, "
           "throughput=19.00, Epoch 0:   3%|▎         | 567/20101 [2:12:45<76:14:00, 14.05s/it, loss=nan, v_num=, "
           "val_loss_step=11.30, reduced_train_loss=4.000, gradient_norm=1.010, parameter_norm=1544.0, "
           "global_step=565.0, consumed_samples=1.45e+5, throughput=19.00,\n")


def test_a_bar_running_loss_nan_beside_a_finite_train_loss_is_healthy():
    assert classify(_NEURON).kind == "ok"
    # the previous drawing's postfix (consumed_samples=...) is not this bar's description: the bar is read
    assert len(training_bars(_NEURON)) == 3


@pytest.mark.parametrize("line", [
    # the logged train loss itself NaN (Lightning, made up), and a bar with only its own loss=nan
    "Epoch 2:  40%|████      | 40/100 [00:20<00:30,  2.00it/s, loss=nan, v_num=3, reduced_train_loss=nan]",
    "Epoch 2:  40%|████      | 40/100 [00:20<00:30,  2.00it/s, loss=nan, v_num=3]",
])
def test_a_bar_whose_train_loss_is_nan_is_divergence(line):
    assert classify(line + "\n").kind == "diverged"


def test_postfix_pairs_do_not_hide_a_validation_bar():
    # made up: a validation bar after a training postfix on the same line stays a validation bar (skipped)
    text = ("Epoch 0:  50%|█████     | 5/10 [00:10<00:10,  2.00s/it, loss=2.1, v_num=1, Validation DataLoader 0:  "
            "50%|█████     | 1/2 [00:01<00:01,  1.00s/it]\n")
    assert [b.n for b in training_bars(text)] == [5]


# ---- a duration whose key follows it: "153 s elapsed" is a clock (OpenNMT's legacy report)
# tests/fixtures/oos-batch12/pytorch/pytorch_examples_opennmt_multi_gpu_pr_epoch_records_1.log (pytorch/examples#80)
_ONMT = """\
Epoch  1,    50/  156 batches; perplexity: 1109740.55; 3038 tokens/s;     26 s elapsed
Epoch  1,   100/  156 batches; perplexity: 14303.51; 3002 tokens/s;     49 s elapsed
Epoch  1,   150/  156 batches; perplexity: 4059.63; 2937 tokens/s;     72 s elapsed
Train perplexity: 43706.5
"""


def test_seconds_elapsed_after_the_value_is_a_clock():
    reading = read_records(_ONMT)
    assert reading.source.startswith("clock difference")
    assert [it.step_time_s for it in reading.iterations] == pytest.approx([0.46, 0.46])
    # made up: a bare duration with no "elapsed" after it is not a clock
    assert not read_records(_ONMT.replace(" elapsed", "")).source.startswith("clock difference")
