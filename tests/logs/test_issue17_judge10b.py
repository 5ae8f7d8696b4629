"""Issue 17, batches 9-10 (helper judge10b): healthy formats and hangs read from the log's shape. Each rule: a real
excerpt (its source), a made-up look-alike, and lines that must not match."""

from __future__ import annotations

import pytest

from analysis.logs.families.stall import PY_WARNING, SETUP_PHASES
from analysis.logs.outcome import trial_outcome
from analysis.logs.parse_generic import _parse_line, read_records
from analysis.logs.steady_state import steady_state

# ---- a tab separates a record's columns

# swiss-ai/Megatron-LM#46 (tests/fixtures/oos-batch10/megatron_lm/swiss_ai_progress_txt_job_throughput_tflops_1.log)
_SWISS = ("2025-02-24 17:31:25\tJob ID: 198424\t# GPUs: 8\tStarting job\n"
          "2025-02-24 17:35:03\tJob ID: 198424\t# GPUs: 8\tSaving async checkpoint\tIteration: 100\t"
          "Job throughput: 364.8 TFLOP/s/GPU\tCumulative throughput: 387.0 TFLOP/s/GPU\t"
          "Floating-point operations: 6.76e+17\tTokens (in billions): 0.41\n")


@pytest.mark.parametrize("text", [
    _SWISS,
    # made up: another column-separated record whose previous column names a phase
    "2026-01-01 10:00:00\tevaluating\tstep: 500\tloss: 2.31\tthroughput: 120.5 TFLOP/s/GPU\n"
    "2026-01-01 10:05:00\tevaluating\tstep: 600\tloss: 2.29\tthroughput: 121.0 TFLOP/s/GPU\n",
])
def test_a_tab_separated_record_with_a_counter_and_a_throughput_is_progress(text):
    assert read_records(text).n_records >= 1
    outcome = trial_outcome(text)
    assert outcome.failure_kind == "ok", outcome.reason


def test_a_phase_named_in_the_same_column_as_the_counter_is_still_not_a_counter():
    # no tab: "saving checkpoint iteration 100" names the checkpoint's iteration, not a step record
    text = "Saving checkpoint iteration: 100 throughput: 364.8 TFLOP/s/GPU\n"
    assert read_records(text).n_records == 0


@pytest.mark.parametrize(("line", "per_gpu"), [
    ("step: 5\tthroughput: 364.8 TFLOP/s/GPU", True),
    ("step: 5 | tps 31346.32 /gpu | loss 2.1", True),
    ("step: 5\tthroughput: 364.8 TFLOP/s\tGPUs: 8", False),
])
def test_a_unit_per_gpu_in_any_case_is_per_gpu(line, per_gpu):
    parsed = _parse_line(line)
    assert parsed is not None
    assert parsed[3][0].per_gpu is per_gpu


# ---- a progress bar with two drawings and one short interval: the median of its stated rates

# meta-llama/llama-cookbook#433 (tests/fixtures/oos-batch9/pytorch/llama_cookbook_profiler_finetune_bar_s_per_it_1.log,
# bars shortened)
_LLAMA = ("Training Epoch: 1/3, step 1/96 completed (loss: 1.487619400024414):   3%|#    | 3/96 [00:14<07:03,  "
          "4.55s/it]STAGE:2024-04-29 16:31:45 648752:648752 ActivityProfilerController.cpp:314] Completed Stage: "
          "Warm Up\n"
          "Training Epoch: 1/3, step 4/96 completed (loss: 1.346050500869751):   6%|#    | 6/96 [00:25<05:51,  "
          "3.90s/it]STAGE:2024-04-29 16:31:57 648753:648753 ActivityProfilerController.cpp:320] Completed Stage: "
          "Collection\n")


@pytest.mark.parametrize(("text", "expected_s"), [
    (_LLAMA, 4.225),
    # made up: two it/s drawings 8 s apart (elapsed 8 s over 20 steps would say 0.4 s; the rates say 0.5)
    ("Train: 10%|#  | 20/200 [00:12<01:30,  2.10it/s]\nTrain: 20%|#  | 40/200 [00:20<01:20,  1.90it/s]\n",
     (1 / 2.10 + 1 / 1.90) / 2),
])
def test_two_bar_drawings_one_short_interval_give_the_median_of_their_rates(text, expected_s):
    reading = read_records(text)
    assert reading.source == "progress bar stated rates"
    assert steady_state(reading.iterations).median_step_time_s == pytest.approx(expected_s, rel=0.01)


def test_two_drawings_a_long_interval_apart_still_give_their_rates_but_three_give_the_elapsed_column():
    # deepspeedai/DeepSpeed (LLaVA-NeXT), tests/fixtures/oos-batch8/deepspeed/llava_next_zero3_cache_flush_callback_
    # s_per_it_1.log: one 217 s step (a cache flush) between the two drawings; the bar states 6.53 then 13.60 s/it
    two = (" 1%|8  | 41/4870 [04:27<8:45:34,  6.53s/it]\nCache cleared \n"
           " 1%|8  | 42/4870 [08:04<18:14:03, 13.60s/it]\n")
    reading = read_records(two)
    assert steady_state(reading.iterations).median_step_time_s == pytest.approx((6.53 + 13.60) / 2)
    # made up: three drawings, 60 s apart each, 30 steps each: the elapsed column, not the lagging rate
    three = ("Train: 10%|#  | 30/300 [01:00<09:00,  3.00s/it]\nTrain: 20%|#  | 60/300 [02:00<08:00,  2.50s/it]\n"
             "Train: 30%|#  | 90/300 [03:00<07:00,  2.30s/it]\n")
    reading = read_records(three)
    assert reading.source == "progress bar elapsed time"
    assert steady_state(reading.iterations).median_step_time_s == pytest.approx(2.0)


# ---- a record repeated with a duration field is progress

# huggingface/accelerate#485 (tests/fixtures/oos-batch10/accelerate/nlp_example_two_gpu_epoch_time_loguru_records_1.log)
_LOGURU = "\n".join(f"2022-07-02 07:42:{s:02d}.937 | INFO     | __main__:training_function:68 - time : 0:00:10.{d}"
                    for s, d in ((9, 736053), (9, 742042), (20, 206601), (20, 203795), (30, 194762)))


@pytest.mark.parametrize("text", [
    _LOGURU,
    # made up: a script's per-epoch line with a time in seconds
    "\n".join(f"[train] epoch finished, took: {t}s" for t in (61.2, 60.8, 60.9, 61.0)),
])
def test_a_record_repeated_with_a_duration_is_progress(text):
    outcome = trial_outcome(text)
    assert outcome.failure_kind == "ok", outcome.reason
    assert "step_time_s" not in outcome.metrics  # a per-epoch duration is not a step time


@pytest.mark.parametrize("text", [
    _LOGURU.split("\n", 3)[0] + "\n" + _LOGURU.split("\n", 3)[1],  # twice only
    "\n".join(f"Waiting for the other ranks, time: {t}s" for t in (30, 60, 90, 120)),  # a wait loop
    "\n".join(f"W: connection retry, timeout: {t}s" for t in (5, 10, 15, 20)),
    "\n".join(f"PULSE: job is running for 0:{m:02d}:00.000" for m in (10, 20, 30, 40)),
])
def test_lines_that_are_not_repeated_duration_records(text):
    assert trial_outcome(text).failure_kind != "ok"


# ---- the configuration echo before the first step is a start-up phase (a log that stops there is a hang)

# facebookresearch/mmf#756 (tests/fixtures/oos-batch10/other/mmf_visualbert_more_than_two_gpus_hangs_loading_datasets_1.log)
_MMF = ("2021-01-29T00:44:18 | mmf.utils.env: Importing from /home/g-luo/remote_home/foil_mmf\n"
        "2021-01-29T00:44:19 | mmf.utils.configuration: Overriding option model to visual_bert_foil\n"
        "2021-01-29T00:44:19 | mmf.utils.configuration: Overriding option checkpoint.resume_pretrained to False\n"
        "/home/g-luo/anaconda3/envs/mmf/lib/python3.7/site-packages/omegaconf/dictconfig.py:252: UserWarning: Keys "
        "with dot (model.bert) are deprecated and will have different semantic meaning the next major version of "
        "OmegaConf (2.1)\n"
        "See the compact keys issue for more details: https://github.com/omry/omegaconf/issues/152\n")
# deepspeedai/DeepSpeed#635 (tests/fixtures/oos-batch8/deepspeed/megatron_gpt2_3d_topology_pipe_hang_1.log, cut)
_TOPOLOGY = ("Using topology: {ProcessCoord(pipe=0, data=0, model=0): 0, ProcessCoord(pipe=0, data=0, model=1): 1, "
             "ProcessCoord(pipe=0, data=1, model=0): 2}\n")


@pytest.mark.parametrize("text", [
    _MMF,
    _MMF.rsplit("\n", 3)[0] + "\n",  # the same without the trailing warning
    _TOPOLOGY,
    # made up: an argparse dump, then a warning with its source line
    "Namespace(batch_size=8, lr=0.0001, model='gpt2', world_size=16)\n"
    "/usr/lib/python3/site-packages/torch/cuda/__init__.py:88: UserWarning: CUDA initialization: something\n"
    "  return torch._C._cuda_getDeviceCount() > 0\n",
])
def test_a_log_that_stops_after_its_configuration_echo_is_a_hang(text):
    outcome = trial_outcome(text)
    assert outcome.failure_kind == "hang", outcome.reason


@pytest.mark.parametrize("text", [
    "Overriding option model to visual_bert\n[mmf] step: 10 loss: 2.1 time: 0.5s\n"
    "[mmf] step: 20 loss: 2.0 time: 0.5s\n",                     # steps after the echo: no hang
    "Overriding option model to visual_bert\nRuntimeError: CUDA error: out of memory\n",  # an error after it
    "the user is overriding the default\n",                     # prose, not an echo of an option
    "Namespace is a word\n",
])
def test_configuration_echo_lines_that_do_not_end_a_stalled_log(text):
    assert trial_outcome(text).failure_kind != "hang"


def test_the_echo_rows_match_their_examples_and_the_warning_shape():
    echo = [r for r in SETUP_PHASES if "configuration echo" in r.label]
    assert len(echo) == 3 and all(r.needle in r.example and r.matches(r.example) for r in echo)
    assert PY_WARNING.match("/x/dictconfig.py:252: UserWarning: Keys with dot")
    assert not PY_WARNING.match("WARNING: dictconfig is old")


# ---- a free-standing rate of steps written with a slash: "Steps/second"

# tensorflow/lingvo (tests/fixtures/oos-batch4/other/lingvo_librispeech_cpu_steps_per_second_1.log)
_LINGVO = "\n".join(f"I0308 16:14:{s:02d}.943696 140304032200448 trainer.py:371] Steps/second: {r}, Examples/second: "
                    f"0.73{s}" for s, r in ((9, "0.014225"), (19, "0.014223"), (29, "0.014221")))


@pytest.mark.parametrize(("text", "expected_s"), [
    (_LINGVO, 1 / 0.014223),
    ("iterations/sec: 2.5\niterations/sec: 2.5\n", 0.4),  # made up
    ("train steps/s = 4.0\n", 0.25),
])
def test_a_slash_written_rate_of_steps_is_read(text, expected_s):
    outcome = trial_outcome(text)
    assert outcome.metrics.get("step_time_s") == pytest.approx(expected_s, rel=0.01), outcome.reason


@pytest.mark.parametrize("text", ["max_steps/second_stage: 3\n", "Examples/second: 0.73\n", "steps/sec_limit: 5\n"])
def test_lines_that_are_not_a_rate_of_steps(text):
    assert "step_time_s" not in trial_outcome(text).metrics


@pytest.mark.parametrize("text", [
    "\n".join(f'{{"train_loss": 2.{i}, "epoch_time": 61.{i}}}' for i in range(4)),  # made up: JSON lines
    "\n".join(f"INFO - finished pass, time: 12.{i}" for i in range(4)),             # made up: a bare number
])
def test_a_repeated_record_whose_duration_is_a_key_suffix_or_a_bare_number_is_progress(text):
    outcome = trial_outcome(text)
    assert outcome.failure_kind == "ok", outcome.reason


@pytest.mark.parametrize("text", [
    "\n".join(f"INFO - time: 10:0{i}:00" for i in range(4)),                         # a clock, not a duration
    "\n".join(f"INFO - runtime: {i}" for i in range(4)),                              # an integer, no unit
])
def test_repeated_lines_without_a_duration_are_not_progress(text):
    assert trial_outcome(text).failure_kind != "ok"


# ---- per-batch time units, a unit that starts the next key, a counter with a throughput

# tensorflow/models#1264 (tests/fixtures/oos-batch8/other/tf_cifar10_multigpu_train_sec_per_batch_1.log)
_CIFAR = "\n".join(f"2017-03-28 14:51:{s:02d}.380095: step {n}, loss = 2.85 (729.8 examples/sec; {t} sec/batch)"
                   for s, n, t in ((4, 660, "0.175"), (6, 670, "0.177"), (7, 680, "0.175")))


@pytest.mark.parametrize(("text", "expected_s"), [
    (_CIFAR, 0.175),
    # made up: PyTorch word_language_model's record, the unit written as the key
    ("\n".join(f"| epoch   1 |   {b}/ 2983 batches | lr 20.00 | ms/batch 10.{b // 200} | loss  5.73 | ppl   308.45"
               for b in range(200, 1200, 200)), 0.0103),
    # Oneflow-Inc/libai#551 (tests/fixtures/oos-batch10/other/libai_gpt2_npu910b3_events_s_per_iter_1.log): the step's
    # s/iter, not its data_time's
    ("\n".join(f"[09/10 10:4{i}:56 lb.utils.events]:  eta: 21:00:38  iteration: {i * 20 + 19}/10000  consumed_samples: "
               f"80  total_loss: 9.895  time: {t} s/iter  data_time: 0.0021 s/iter total_throughput: 0.53 samples/s"
               for i, t in enumerate(("7.5187", "7.6570", "7.7011"))), 7.657),
    # made up: a per-iteration unit spelled out
    ("\n".join(f"Iter {s} | loss 2.1 | 450.2 ms/iter" for s in range(10, 60, 10)), 0.4502),
    # made up: a unit-like word that starts the next key is not the previous number's unit
    ("\n".join(f"global_step={s} loss=2.1 sec_per_step=0.812" for s in range(10, 60, 10)), 0.812),
])
def test_per_batch_units_and_unit_like_key_words(text, expected_s):
    outcome = trial_outcome(text)
    assert outcome.metrics.get("step_time_s") == pytest.approx(expected_s, rel=0.01), outcome.reason


@pytest.mark.parametrize("text", [
    "Saving checkpoint Iteration: 100 Job throughput: 364.8 TFLOP/s/GPU\n",   # made up: swiss-ai's, blanks for tabs
    "checkpoint save, step: 500, throughput: 10234.5 tokens/s\n",
])
def test_a_counter_with_a_throughput_is_progress_whatever_else_the_line_says(text):
    assert trial_outcome(text).failure_kind == "ok"


@pytest.mark.parametrize("text", [
    "Saving checkpoint at iteration 100\n",                            # no throughput: a save phase
    "max_step: 100 throughput target: high\n",                        # a config line, no counter value
    "\n".join(f" > building dataset index done in 0.{i}5 seconds" for i in range(4)),  # set-up repeated
])
def test_a_save_or_setup_line_is_not_progress(text):
    assert trial_outcome(text).failure_kind != "ok"


@pytest.mark.parametrize("value", ["1e-320", "0", "nan", "inf"])
def test_a_rate_of_steps_whose_inverse_is_not_a_time_is_not_read_and_judging_does_not_fail(value):
    outcome = trial_outcome(f"Steps/second: {value}\n")
    assert not outcome.reason.startswith("judging failed"), outcome.reason
    assert "step_time_s" not in outcome.metrics
