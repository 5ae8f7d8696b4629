"""Issue 17 (helper judge33): batch 29's misses as families. LLaMA-Factory's trainer_log.jsonl states no step time,
only a cumulative "elapsed_time" as a duration string ("6:36:26", "4 days, 7:18:24"): the step time is the elapsed
advance over the steps' advance, over a long baseline. Each: a real line with its source, look-alikes that must not
match."""

from __future__ import annotations

import json

import pytest
from log_fixtures import body

from analysis.logs.families.divergence import loss_jumped, series_diverged
from analysis.logs.outcome import trial_outcome
from analysis.logs.parse_generic import read_records, trainer_log_step_time
from analysis.logs.read_log import read_log
from analysis.logs.steady_state import steady_state

_BATCH29 = "oos-batch29/"


# ---- 1. LLaMA-Factory's trainer_log.jsonl
# hiyouga/LLaMA-Factory src/llamafactory/train/callbacks.py@b230bbb02a4f743842243eee932cfbbd4f3d26c3, LogCallback:
#     self.elapsed_time = str(timedelta(seconds=int(elapsed_time)))
#     logs = dict(current_steps=self.cur_steps, total_steps=self.max_steps, loss=..., lr=..., epoch=...,
#                 percentage=..., elapsed_time=self.elapsed_time, remaining_time=self.remaining_time)
#     f.write(json.dumps(logs) + "\n")
def _hms(seconds: int) -> str:
    days, rest = divmod(seconds, 86400)
    clock = f"{rest // 3600}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days} day{'s' if days > 1 else ''}, {clock}" if days else clock


def _record(step: int, elapsed_s: int, total: int = 9000) -> str:
    return json.dumps({"current_steps": step, "total_steps": total, "loss": 1.2, "lr": 1e-5, "epoch": 1.0,
                       "percentage": round(step / total * 100, 2), "elapsed_time": _hms(elapsed_s),
                       "remaining_time": _hms(int((total - step) * 3.0))}) + "\n"


@pytest.mark.parametrize("start_s, step_s", [(100, 3.1), (86_000, 2.4), (3 * 86400 + 5, 42.8)])
def test_elapsed_advance_over_steps_is_the_step_time(start_s, step_s):
    text = "".join(_record(10 * i, start_s + int(10 * i * step_s)) for i in range(1, 40))
    reading = read_records(text)
    assert reading.source.startswith("trainer_log")
    assert steady_state(reading.iterations).median_step_time_s == pytest.approx(step_s, rel=0.02)


def test_records_written_twice_count_once_and_a_restart_starts_a_new_baseline():
    first = "".join(_record(10 * i, 50 * i) for i in range(1, 20))  # 5 s a step, then the job restarts
    resumed = "".join(rec + rec for rec in (_record(100 + 10 * i, 20 * i) for i in range(1, 20)))  # 2 s, two ranks
    found = trainer_log_step_time(first + resumed)
    assert found is not None and found[2] == pytest.approx(2.0)


@pytest.mark.parametrize("text", [
    # a baseline too short for whole seconds
    "".join(_record(i, 3 * i) for i in range(1, 10)),
    # one record alone
    _record(100, 3600),
    # an elapsed time without a step counter (a progress file of another tool)
    "".join(json.dumps({"completed_tests": i, "elapsed_time": _hms(600 * i)}) + "\n" for i in range(1, 10)),
    # the remaining time only: an estimate, never read
    "".join(json.dumps({"current_steps": 10 * i, "remaining_time": _hms(9000 - 60 * i)}) + "\n" for i in range(1, 9)),
])
def test_look_alikes_give_no_trainer_log_time(text):
    assert trainer_log_step_time(text) is None


def test_a_clock_time_in_another_log_is_still_no_field():
    text = "".join(f"2024-05-01 10:{i:02d}:00 step {i} loss 1.0\n" for i in range(1, 20))
    assert not read_records(text).source.startswith("trainer_log")


@pytest.mark.parametrize("path, step_s", [
    ("hf_trainer/c_qwen25_7b_medical_qlora_llamafactory_trainer_log_6750_of_6750_1.log", 3.10),
    ("deepspeed/c_qwen25_3b_full_sft_llamafactory_zero_two_gpus_7_epochs_complete_1.log", 14.84),
    ("hf_trainer/c_mistral_v02_translator_lora_llamafactory_trainer_log_8660_of_8660_1.log", 2.40),
    ("hf_trainer/c_luojiu_7b_lora_llamafactory_trainer_log_8712_of_8712_four_days_1.log", 42.8),
])
def test_the_llamafactory_logs_of_batch_29_read_their_step_time(path, step_s):
    reading = read_log(body(_BATCH29 + path))
    assert steady_state(reading.iterations).median_step_time_s == pytest.approx(step_s, rel=0.05)


# ---- 2. a smoothed loss initialised at zero climbs during warm-up: no divergence
# mlcommons/training_results_v0.6 NVIDIA/benchmarks/ssd/implementations/pytorch/train.py@e045ad7b72314d95cb8128331193e49bbc8e0bec,
# train300_mlperf_coco: `avg_loss = 0.0`, then each step `avg_loss = 0.999*avg_loss + 0.001*loss.item()`, printed as
# "Iteration: {:6d}, Loss function: {:5.3f}, Average Loss: {:.3f}".
def _ema_from_zero(n_printed: int, every: int = 20) -> list[float]:
    avg, out = 0.0, []
    for step in range(n_printed * every):
        loss = 3.0 + 20.0 / (1 + step / 50)  # a falling training loss
        avg = 0.999 * avg + 0.001 * loss
        if step % every == 0:
            out.append(round(avg, 3))
    return out


def test_an_average_initialised_at_zero_is_no_jump():
    series = _ema_from_zero(300)
    assert series[0] < 0.1 < series[-1] and series[-1] > 1.0
    assert loss_jumped(series) is None
    assert series_diverged(series) is None


@pytest.mark.parametrize("series", [
    [2.28, 11.05, 11.0, 10.9],  # GPT-NeoX#947: a real first loss, then the jump
    [0.05, 0.02, 0.01, 0.012, 5.0, 5.1, 5.0],  # near zero, fell, then jumped: rising after it had fallen
    [0.5, 0.4, 0.3, 9.0, 9.5, 9.2],
])
def test_a_jump_after_a_fall_or_from_a_real_first_loss_still_diverges(series):
    assert loss_jumped(series) is not None


def test_a_smoothed_warmup_that_ends_in_nan_still_diverges():
    assert series_diverged([*_ema_from_zero(50), float("nan")]) is not None


def test_the_mlperf_ssd_log_of_batch_29_is_ok():
    text = body(_BATCH29 + "pytorch/b_mlperf_v06_nvidia_dgx1_ssd_run_stop_success_1.log")
    assert trial_outcome(text).failure_kind == "ok"


# ---- 3. a training phase's records rank before an evaluation phase's
# mlcommons/training_results_v0.6 NVIDIA/benchmarks/gnmt/implementations/pytorch/seq2seq/inference/inference.py@
# e045ad7b72314d95cb8128331193e49bbc8e0bec, Translator.evaluate: log += f'TEST '; ... f'[{i}/{len(self.loader)}]\t';
# f'Time {batch_time.val:.3f} ({batch_time.avg:.3f})\t'; f'Decoder iters {iterations.val:.1f} (...)\t'; f'Tok/s ...'
def _gnmt_log(prefix: str = "0: ") -> str:
    train = "".join(f"{prefix}TRAIN [0][{10 * i}/1938]\tTime 0.1{i % 3}0 (0.150)\tData 1.6e-04 (4.0e-04)\t"
                    f"Tok/s 90000 (91000)\tLoss/tok 4.{i % 7} (4.5)\tLR 2.0e-03\n" for i in range(1, 60))
    test = "".join(f"{prefix}TEST [0][{i}/3]\tTime 0.7{i}0 (0.750)\tDecoder iters 1{i}0.0 (140.0)\t"
                   f"Tok/s 20000 (21000)\n" for i in range(3))
    return train + test


@pytest.mark.parametrize("prefix", ["0: ", ""])
def test_the_training_records_are_read_not_the_test_batches(prefix):
    step_s = steady_state(read_records(_gnmt_log(prefix)).iterations).median_step_time_s
    assert 0.1 <= step_s <= 0.13


def test_the_mlperf_gnmt_log_of_batch_29_reads_training_times():
    reading = read_log(body(_BATCH29 + "pytorch/b_mlperf_v06_nvidia_dgx1_gnmt_reaches_bleu_1.log"))
    assert steady_state(reading.iterations).median_step_time_s < 0.3  # the TRAIN lines, not TEST's 0.71 s
