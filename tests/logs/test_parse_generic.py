"""The generic step-record reader (analysis.logs.parse_generic): its grammar (key: value, key=value, key value unit,
| key value |, glued units, thousands separators), its counters, the order of its step-time sources, progress
bars, and its bounds. Every line here is written for the test in a common trainer shape; none is copied from a
fixture."""

from __future__ import annotations

import time

import pytest

from analysis.logs import parse_generic
from analysis.logs.outcome import trial_outcome
from analysis.logs.parse_generic import normalise_key, read_records
from analysis.logs.read_log import read_log
from analysis.logs.steady_state import steady_state


def step_s(text: str, **kw) -> float:
    reading = read_records(text, **kw)
    assert reading.iterations, reading
    return steady_state(reading.iterations).median_step_time_s


@pytest.mark.parametrize("line, expected_s", [
    ("step: {i}  loss: 2.5  step_time: 0.250s  lr: 1e-4", 0.25),        # key: value with a glued unit
    ("step={i} loss=2.5 time_ms=250.0 lr=1e-4", 0.25),                   # key=value, unit in the key
    ("iter {i}: loss 2.5, time 250.00ms", 0.25),                          # key value unit
    ("| global_step {i} | loss 2.5 | iteration time (ms) 250.0 |", 0.25),  # | key value |, unit in parentheses
    ("Iteration {i} | dt 0.25 s | tokens/s 1,234,567 | loss 2.5", 0.25),  # thousands separators elsewhere
    ("[train] iter: [{i}/1000], data_time: 0.01(0.01), batch_time: 0.25(0.26), loss: 2.5(2.6)", 0.25),
    ("global step {i}: seconds per step: 0.25 | TFLOPs: 123.4TFLOPs", 0.25),
])
def test_record_grammar_finds_the_stated_step_time(line, expected_s):
    text = "\n".join(line.format(i=i) for i in range(1, 30))
    assert step_s(text) == pytest.approx(expected_s)


def test_keys_are_normalised():
    assert normalise_key("CurrSamplesPerSec=") == "curr samples per sec"
    assert normalise_key(" iter_time_ms:") == "iter time ms"
    assert normalise_key(" Loss: ") == "loss"


def test_tflops_loss_memory_and_per_gpu_tokens_are_kept():
    text = "\n".join(f"step {i} | loss {3 - i / 100:.3f} | step_time 1.5 s | tps 40,000(5000.00/gpu) | "
                     f"tflops 312.5 | mem 61.2 GiB" for i in range(1, 20))
    reading = read_records(text)
    it = reading.iterations[-1]
    assert it.tflops_per_gpu == 312.5 and it.tokens_per_gpu_per_s == 5000.0 and it.loss == pytest.approx(2.81)
    assert reading.peak_mem_gb == pytest.approx(61.2 * 2**30 / 1e9)
    assert reading.losses[-1] == pytest.approx(2.81)


def test_a_stated_step_time_beats_rates_and_timestamps():
    text = "\n".join(f"2025-01-01 00:00:{i:02d},000 step {i} loss 1.0 time 0.5s samples/s 64.0"
                     for i in range(1, 40))
    reading = read_records(text, samples_per_step=256)
    assert reading.source.startswith("stated step time")
    assert steady_state(reading.iterations).median_step_time_s == pytest.approx(0.5)


def test_a_clock_that_grows_gives_its_differences():
    text = "\n".join(f"step:{i}/1000 train_loss:2.0 train_time:{i * 120 + 5000}ms step_avg:{(i * 120 + 5000) / i:.2f}ms"
                     for i in range(100, 400, 10))
    reading = read_records(text)
    assert reading.source.startswith("clock difference")
    assert steady_state(reading.iterations).median_step_time_s == pytest.approx(0.120)


def test_a_running_average_is_used_when_nothing_better_exists():
    text = "\n".join(f"step {i} loss 2.0 avg_step_time 0.75s" for i in range(1, 20))
    reading = read_records(text)
    assert reading.source.startswith("running average") and steady_state(reading.iterations).median_step_time_s == 0.75


def test_rates_need_a_known_batch_except_steps_per_second():
    steps = "\n".join(f"update {i}: loss=2.0, ups=4.00" for i in range(1, 20))
    assert step_s(steps) == pytest.approx(0.25)
    samples = "\n".join(f"step {i} loss 2.0 samples/s 128.0" for i in range(1, 20))
    assert read_records(samples).iterations == ()  # samples/s alone is not a step time
    assert read_records(samples).n_records == 19  # but it is progress
    assert step_s(samples, samples_per_step=64) == pytest.approx(0.5)
    tokens = "\n".join(f"step {i} loss 2.0 tokens/s 400,000" for i in range(1, 20))
    assert step_s(tokens, tokens_per_step=1_000_000) == pytest.approx(2.5)
    per_gpu = "\n".join(f"step {i} loss 2.0 tokens per gpu per second 50,000" for i in range(1, 20))
    assert read_records(per_gpu, tokens_per_step=1_000_000).iterations == ()  # per GPU: needs the world size
    assert step_s(per_gpu, tokens_per_step=1_000_000, world_size=8) == pytest.approx(2.5)
    batch_field = "\n".join(f"step {i} loss 2.0 bsz 32 samples/s 64.0" for i in range(1, 20))
    assert step_s(batch_field) == pytest.approx(0.5)  # the record's own batch size


@pytest.mark.parametrize("unit", ["img/s", "images/sec", "imgs/s"])
def test_an_image_rate_is_a_sample_rate(unit):
    # ALCF ai-science-training-series (TensorFlow ResNet-34 on ILSVRC, oos-batch39):
    # "Finished step 2 of 5004 in epoch 0,loss=97.494, acc=0.000 (986.164 img/s)."; tf_cnn_benchmarks: "images/sec"
    text = "\n".join(f"Finished step {i} of 5004 in epoch 0,loss=7.0, acc=0.000 (640.0 {unit})." for i in range(1, 20))
    assert read_records(text).iterations == ()  # a sample rate alone is no step time
    assert step_s(text, samples_per_step=128) == pytest.approx(0.2)


def test_timestamps_when_nothing_else_says_how_long_a_step_took():
    millis = "\n".join(f"[2025-02-03 10:00:{i * 0.8:06.3f}] step {i} loss 1.0 lr 1e-4"
                       for i in range(1, 60)).replace(".", ",", 0)
    assert step_s(millis) == pytest.approx(0.8, rel=1e-3)
    seconds = "\n".join(f"2025-02-03 10:{i * 3 // 60:02d}:{i * 3 % 60:02d} | INFO | step {i} | loss 1.0"
                        for i in range(1, 60))
    assert step_s(seconds) == pytest.approx(3.0)
    too_coarse = "\n".join(f"2025-02-03 10:00:{i // 4:02d} step {i} loss 1.0" for i in range(1, 30))
    assert read_records(too_coarse).iterations == ()  # 0.25 s steps, 1 s timestamps: no reading, no guess


def test_several_ranks_printing_the_same_step_count_once():
    lines = []
    for i in range(1, 20):
        for rank in range(4):
            lines.append(f"[rank{rank}]: step {i} loss 2.0 step_time {1.0 + rank / 100:.2f}s")
    reading = read_records("\n".join(lines))
    assert len(reading.iterations) == 19 and steady_state(reading.iterations).median_step_time_s == 1.0


def test_evaluation_lines_do_not_mix_with_training_lines():
    lines = []
    for i in range(1, 41):
        lines.append(f"iter {i}: loss 2.0, time 400.0ms")
        if i % 10 == 0:
            lines.append(f"step {i}: train loss 2.0, val loss 2.1")
    reading = read_records("\n".join(lines))
    assert len(reading.iterations) == 40 and steady_state(reading.iterations).median_step_time_s == 0.4


def test_iterations_of_one_optimizer_step_are_added_up():
    lines = []
    for it in range(1, 41):
        step = it // 4
        lines.append(f"iter {it} step {step}: loss 2.0, iter time: {300.0 if it % 4 else 400.0:.2f}ms")
    assert step_s("\n".join(lines)) == pytest.approx(1.3)


def test_epoch_step_pairs_that_restart_each_epoch():
    lines = [f"Epoch [{e}/3] Step [{s}/50] loss: 1.0 time: 0.200" for e in range(1, 4) for s in range(1, 51)]
    reading = read_records("\n".join(lines))
    assert len(reading.iterations) == 150 and steady_state(reading.iterations).median_step_time_s == 0.2


def test_file_names_and_config_dumps_are_not_step_records():
    text = ("'epoch=3-step=400.ckpt'\n  max_steps: 10000\n  warmup_steps = 500\n  save_steps 1000\n"
            "gradient_accumulation_steps: 8\nsteps_per_print ........ 10\n")
    assert read_records(text).n_records == 0


def test_progress_bar_elapsed_column_beats_its_lagging_rate():
    bars = [f"Epoch 0:  {n * 5}%|#   | {n}/20 [00:{8 + 3 * (n - 1):02d}<01:00,  {9.0 - n:.2f}s/it, loss=1.0]"
            for n in range(1, 9)]
    reading = read_records("\n".join(bars))
    assert reading.source == "progress bar elapsed time"
    assert steady_state(reading.iterations).median_step_time_s == pytest.approx(3.0)


def test_progress_bar_without_a_usable_elapsed_span_uses_its_last_rate():
    bars = [f"  {n * 2}%|#  | {n}/500 [00:00<00:04, {40 + n * 2:.2f}it/s]" for n in range(5, 12)]
    reading = read_records("\r".join(bars).replace("\r", "\n"))
    assert reading.source == "progress bar rate (last drawing)"
    assert reading.iterations[-1].step_time_s == pytest.approx(1 / 62.0)


def test_progress_bar_postfix_step_time_and_skipped_bars():
    text = ("Map: 100%|####| 5000/5000 [00:20<00:00, 250.00it/s]\n"
            "Validation: 100%|####| 50/50 [00:10<00:00, 5.00it/s]\n"
            "Training:  10%|#   | 100/1000 [01:40<15:00, 1.00s/it, loss=2.1, step_time=0.95s]\n")
    reading = read_records(text)
    assert reading.source == "progress bar postfix step time" and reading.iterations[-1].step_time_s == 0.95


def test_step_records_win_over_a_progress_bar():
    lines = []
    for i in range(1, 30):
        lines.append(f"{i}/100 [00:{i:02d}<01:00, 1.50s/it]")
        lines.append(f"step {i} loss 2.0 time 0.9s")
    assert step_s("\n".join(lines)) == pytest.approx(0.9)


def test_read_log_uses_the_generic_reader_only_after_the_framework_readers():
    megatron = " iteration 5/ 100 | elapsed time per iteration (ms): 1234.5 | lm loss: 2.0E+00 | step time 9.9 s |\n"
    assert read_log(megatron * 3).format == "megatron"
    generic = "\n".join(f"step {i} loss 2.0 time 0.5s" for i in range(1, 10))
    reading = read_log(generic)
    assert reading.format == "generic" and reading.step_source.startswith("stated step time")
    only_rates = "\n".join(f"step {i} loss 2.0 samples/s 10.0" for i in range(1, 10))
    reading = read_log(only_rates)
    assert reading.format == "" and reading.n_records == 9 and reading.progress_offset is not None


@pytest.mark.parametrize("text", ["", "\x00" * 100, "step " * 10_000, "step 1 loss nan time inf\n" * 100,
                                  "iter 1e309: loss 1e309, time -1e309ms\n" * 50, "[" * 100_000 + "step 1 time 1s",
                                  "\n".join(f"step {i} time {'9' * 400}" for i in range(100))])
def test_hostile_inputs_never_raise(text):
    reading = read_records(text, tokens_per_step=10**30, world_size=0)
    assert all(it.step_time_s > 0 for it in reading.iterations)


def test_a_twenty_megabyte_generic_log_reads_a_bounded_number_of_lines(monkeypatch):
    line = "2025-01-01 00:00:00,000 - INFO - step: {i}  loss: 2.345  grad_norm: 0.5  tps: 12,345  step_time: 0.5s\n"
    text = "".join(line.format(i=i) for i in range(220_000))
    assert len(text) > 20e6
    parsed: list[int] = []
    real_record = parse_generic._record
    monkeypatch.setattr(parse_generic, "_record", lambda line, pos: parsed.append(pos) or real_record(line, pos))
    start = time.process_time()
    reading = read_records(text)
    # The per-line work is bounded by MAX_HEAD_LINES + MAX_TAIL_LINES, not by the log's size; the 20 MB / 5 s target
    # is measured by tests/benchmarks/bench_judge.py. The CPU-time bound only guards against work growing with the
    # square of the log (minutes here), loose enough that a loaded CI machine cannot fail it.
    assert 0 < len(parsed) <= parse_generic.MAX_HEAD_LINES + parse_generic.MAX_TAIL_LINES
    assert parsed[0] == 0 and parsed[-1] == text.rindex("2025-01-01")  # the head and the very last record
    assert time.process_time() - start < 20
    assert reading.iterations and steady_state(reading.iterations).median_step_time_s == 0.5


# Trainer output shapes beyond the frameworks with their own parser, written for the test in each shape.
SHAPES = {
    "composer block": ("".join(f"[batch={i}/1000]:\n\t Train time/batch: {i}\n\t Train time/train: {i * 4e-4:.4f}\n"
                               "\t Train throughput/batches_per_sec: 0.8\n\t Train loss/train/total: 2.3\n"
                               for i in range(1, 30)), 1.25),
    "verl dashes": ("\n".join(f"step:{i} - actor/loss:0.1 - timing_s/gen:5.0 - timing_s/update_actor:3.0 - "
                              f"timing_s/step:12.5 - perf/throughput:1000" for i in range(1, 20)), 12.5),
    "keras epoch lines": ("\n".join(f"Epoch {e}/3\n250/250 [==============================] - 30s 120ms/step - "
                                    "loss: 0.4" for e in range(1, 4)), 0.12),
    "mmengine iter": ("\n".join(f"2024/01/01 10:00:{i % 60:02d} - mmengine - INFO - Iter(train) [ {i * 10}/10000]  "
                                "lr: 1e-4  eta: 1:00:00  time: 0.5000  data_time: 0.01  loss: 1.2"
                                for i in range(1, 30)), 0.5),
    "deepspeed pipe engine": ("\n".join(f"steps: {i * 10} loss: 6.8 iter time (s): 1.234 samples/sec: 51.8"
                                        for i in range(1, 30)), 1.234),
    "t5x bracketed step": ("\n".join(f"I0101 10:00:{i:02d}.123456 140 train.py:55] [{i * 100}] train/loss=2.1, "
                                     "timing/seconds_per_step=0.350, timing/steps_per_second=2.857"
                                     for i in range(1, 40)), 0.35),
}


@pytest.mark.parametrize("name", list(SHAPES))
def test_trainer_shapes_end_to_end(name):
    from analysis.logs.outcome import trial_outcome
    text, expected_s = SHAPES[name]
    out = trial_outcome(text)
    assert out.failure_kind == "ok" and out.metrics["step_time_s"] == pytest.approx(expected_s), out


# ---- formats found missing by out-of-sample batch 2 (OUT_OF_SAMPLE.md); each line is written for the test

@pytest.mark.parametrize("line, expected_s", [
    # mmengine: the epoch and "[i/n]" counters after "Epoch(train)", no "step"/"iter" word on the line
    ("2025/03/01 10:00:00 - mmengine - INFO - Epoch(train)  [7][{i:4d}/5000]  lr: 1.0e-03  eta: 1:02:03  "
     "time: 0.4200  data_time: 0.0021  memory: 9000  loss: 3.2100", 0.42),
    # timm / DeiT / BEiT MetricLogger: "Epoch: [e]  [i/n]", running averages in parentheses
    ("Epoch: [3]  [{i:4d}/2500]  eta: 0:10:00  lr: 0.000100  loss: 4.1000 (4.2000)  time: 0.3100  data: 0.0002  "
     "max mem: 12000", 0.31),
    # a magnitude suffix: 2.5K ms is 2,500 ms
    ("iteration: {i} / 90000 | elapsed_time_per_iteration_ms: 2.5K | tokens_per_sec: 400K | lm_loss: 2.1", 2.5),
    # an iterations-per-second rate spelled It/sec (MLX-style), turned into seconds per step
    ("Iter {i}: Train loss 1.20, Learning Rate 1.0e-05, It/sec 0.500, Tokens/sec 200.0, Peak mem 4.1 GB", 2.0),
    ("step {i} | loss 2.2 | iters/sec 4.0", 0.25),
    # JSON-per-line summaries with quoted values (fairseq's end-of-epoch stats)
    ('{{"epoch": {i}, "train_loss": "5.1", "train_ups": "0.25", "train_num_updates": "{n}", "train_lr": "1e-4"}}',
     4.0),
])
def test_formats_of_other_trainers(line, expected_s):
    text = "\n".join(line.format(i=i, n=100 * i) for i in range(1, 30))
    assert step_s(text) == pytest.approx(expected_s, rel=1e-3)


def test_magnitude_suffixes_scale_numbers_but_units_stay_units():
    reading = read_records("\n".join(f"step {i} | tokens/s 1.5M | mem 8GB | time 12.0K ms" for i in range(1, 20)))
    it = reading.iterations[-1]
    assert it.tokens_per_s == pytest.approx(1.5e6)
    assert it.step_time_s == pytest.approx(12.0)  # 12,000 ms
    assert reading.peak_mem_gb == pytest.approx(8.0)  # GB is a unit, not G (giga) + B


def test_progress_bar_of_unknown_length_gives_elapsed_per_step():
    # Lightning/NeMo with max_steps=-1: the total is "?" and no rate is drawn
    text = "Epoch 0: :   0%|          | 300/? [10:00<00:00, v_num=1, reduced_train_loss=]\n"
    reading = read_records(text)
    assert reading.source == "progress bar elapsed / steps"
    assert reading.iterations[-1].step_time_s == pytest.approx(2.0)
    assert not read_records("answer: 3/? [unknown]\n").iterations


def test_tf_slim_parenthesised_sec_per_step_is_the_step_time():
    # batch 4 other/tf_object_detection_global_step_sec_per_step_1.log: TF-Slim's learning.py train_step record
    text = "".join(f"INFO:tensorflow:global step {i}: loss = 3.{i:02d} ({16.9 + i % 3 * 0.02:.3f} sec/step)\n"
                   for i in range(1, 12))
    outcome = trial_outcome(text)
    step_s = outcome.metrics.get("step_time_s")
    assert outcome.failure_kind == "ok" and step_s is not None and abs(step_s - 16.92) < 0.05
    # look-alike: a running average in parentheses after a time field of the same unit stays an average
    look = "".join(f"step {i} | time {1.0 + i % 2 * 0.5:.2f} sec/step (1.25 sec/step)\n" for i in range(1, 12))
    assert abs(trial_outcome(look).metrics["step_time_s"] - 1.25) > 0.1


# ---- judge37b (oos-batch33's step-time misses, in sample)

def test_litgpt_iteration_time_times_the_iterations_of_one_optimizer_step():
    # Lightning-AI/litgpt litgpt/pretrain.py `fit`: "Epoch N | iter I step S | ... | iter time: T ms (step) ..." every
    # log_interval iterations; iter time is one micro-batch iteration, a step is I/S of them (litgpt#1607's lines)
    lines = [f"Epoch 34 | iter {3050700 + 50 * k} step {610140 + 10 * k} | loss train: 2.846, val: 2.861 | "
             f"iter time: {111.0 + k % 3 * 0.5:.2f} ms (step) remaining time: 0:01:54" for k in range(12)]
    assert step_s("\n".join(lines)) == pytest.approx(5 * 0.1115, rel=0.01)
    # litgpt/finetune/lora.py's format (litgpt#1055): "Ep 1 | iter 120 | step 30: ... | iter time: 164.51 ms (opt.step)"
    lora = [f"Ep 1 | iter {4 * k} | step {k}: loss train (curr): 1.162, val (prev val iter): None | "
            f"iter time: 160.00 ms (opt.step)" for k in range(1, 13)]
    assert step_s("\n".join(lora)) == pytest.approx(0.64)


def test_an_iteration_time_without_accumulation_or_every_iteration_logged_is_unchanged():
    # one iteration per step: the iteration is the step
    same = [f"Epoch 1 | iter {k} step {k} | loss train: 2.8, val: n/a | iter time: 250.00 ms (step)" for k in range(1, 13)]
    assert step_s("\n".join(same)) == pytest.approx(0.25)
    # a step's time stated as such is not scaled by the counters' ratio
    stated = [f"iter {4 * k} step {k}: loss 2.0, step time: 640.00ms" for k in range(1, 13)]
    assert step_s("\n".join(stated)) == pytest.approx(0.64)
    # older lit-gpt counts iter_num from 0: a record between steps has no whole ratio (litgpt#303, batch 64 of 1)
    assert step_s("iter 3436 step 53: loss 2.9911, iter time: 400.10ms") == pytest.approx(0.4001)


def test_a_cumulative_clock_printed_to_hundredths_of_an_hour_is_read_over_long_windows():
    # Abhisheksasidharann/IAIRO-SLM pretraining/train_250m_final_full_4p65B_v1.py: "... | time={hours:.2f}h" every 10
    # steps of 5.9 s: record to record the clock moves 0.01 or 0.02 h (3.6 or 7.2 s a step)
    lines = []
    for k in range(60):
        step, hours = 1520 + 10 * k, 0.08 + 10 * k * 5.9 / 3600
        lines.append(f"step= {step}/8870 | tokens=0.797B | loss=3.1187 | ppl=22.617 | tok/s=88,349 | lr=2.844e-04 | "
                     f"grad=0.516 | time={hours:.2f}h")
    assert step_s("\n".join(lines)) == pytest.approx(5.9, rel=0.05)
    # with the batch known, the rate is the finer source: tokens per step / tok/s
    assert step_s("\n".join(lines), tokens_per_step=524288) == pytest.approx(524288 / 88349, rel=0.001)


def test_a_fine_cumulative_clock_is_still_read_record_to_record():
    lines = [f"step {k} | loss 2.0 | elapsed {k * 0.25:.3f}s" for k in range(1, 40)]
    assert step_s("\n".join(lines)) == pytest.approx(0.25)
