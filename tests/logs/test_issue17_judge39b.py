"""Issue 17 (helper judge39b): batch 34's remaining misses as families, in sample. A tqdm bar split over a line break
before its `[elapsed<remaining, rate]`; NeMo 1's
rate-less training bar, whole or cut by a checkpoint message; darknet's value-first iteration records; a logger's
"| INFO |" level column that named an unnamed "[25/103]" counter; each with a real line and its source, and look-alikes that must not match."""

from __future__ import annotations

from analysis.logs.outcome import trial_outcome
from analysis.logs.parse_generic import read_records, training_bars
from analysis.logs.parse_nemo import rateless_bar_starts

# ---- 1. a tqdm bar split over a line break (huggingface/optimum-habana PR 1963, the FLUX DreamBooth LoRA run's tail
# as the description quotes it: the bar's counter ends one line, its bracket starts the next)
_SPLIT_BAR = ("05/01/2025 17:29:03 - INFO - main - Saved state to dog_lora_flux/checkpoint-500\n"
              "Steps: 100%|" + "\u2588" * 40 + "| 500/500 \n"
              "[54:01<00:00,  5.19s/it, loss=0.393, lr=0.0001]\n")


def test_a_bar_split_before_its_bracket_is_one_drawing():
    bars = training_bars(_SPLIT_BAR)
    assert [(d.n, d.rate_s_per_it) for d in bars] == [(500, 5.19)]
    out = trial_outcome(_SPLIT_BAR)
    assert out.failure_kind == "ok" and out.metrics["step_time_s"] == 5.19


def test_two_unrelated_lines_are_not_joined_into_a_bar():
    # the first line ends with a count but not the bar's right edge '|': not the same drawing
    assert training_bars("epoch 3/4 \n[00:10<00:20,  2.00s/it, loss=1.2]\n") == []
    assert training_bars("loss 0.5 | step 7\n[00:10<00:20,  2.00s/it]\n") == []


# ---- 2. NeMo 1's MegatronProgressBar drawings (no rate) cut by Lightning ModelCheckpoint's message (NVIDIA-NeMo issue
# 8505, the H100 reference run of megatron_gpt FP8 pre-training)
_CKPT = ("Epoch 0: :   5%|\u258b             | 15900/301500 [1:22:Epoch 0, global step 15900: 'val_loss' reached 3.04824 "
         "(best 3.04824), saving model to '/data/nemo_experiments/megatron_gpt/checkpoints/megatron_gpt--val_loss=3.05-"
         "step=15900-consumed_samples=3052800.0.ckpt' as top 3\n"
         "[NeMo I 2024-02-26 06:39:06 nlp_overrides:412] Removing checkpoint: /data/nemo_experiments/megatron_gpt/"
         "checkpoints/megatron_gpt--val_loss=3.05-step=15000-consumed_samples=2880000.0.ckpt\n"
         "Epoch 0: :   5%|\u258a             | 16200/301500 [1:24:Epoch 0, global step 16200: 'val_loss' reached 3.04690 "
         "(best 3.04690), saving model to '/data/nemo_experiments/megatron_gpt/checkpoints/megatron_gpt--val_loss=3.05-"
         "step=16200-consumed_samples=3110400.0.ckpt' as top 3\n"
         "[NeMo I 2024-02-26 06:40:41 nlp_overrides:412] Removing checkpoint: /data/nemo_experiments/megatron_gpt/"
         "checkpoints/megatron_gpt--val_loss=3.05-step=15300-consumed_samples=2937600.0.ckpt\n")


def test_rateless_nemo_bars_cut_by_checkpoint_messages_show_training_ran():
    assert len(rateless_bar_starts(_CKPT)) == 2
    out = trial_outcome(_CKPT)
    assert out.failure_kind == "ok" and "step_time_s" not in out.metrics


def test_rateless_bars_that_are_not_training_steps_do_not_count():
    assert rateless_bar_starts("Epoch 0: :   0%|          | 0/301500 [00:00<?]\n") == []  # no step done
    assert rateless_bar_starts("Validation DataLoader 0:  50%|\u2588\u2588  | 5/10 [00:01<00:01]\n") == []
    # a rate-less "Epoch 0: 100%|" without NeMo's doubled colon is not NeMo's bar (issue 17 batch 6's validation stall)
    assert rateless_bar_starts("Epoch 0: 100%|##########| 50/50 [00:10<00:00]\nValidation: 0it [00:00, ?it/s]\n") == []


# ---- 3. darknet's iteration records, value first (DZPeru/fishv4 log_train.txt, YOLOv4-tiny under AlexeyAB/darknet,
# whose src/detector.c prints "\n %d: %f, %f avg loss, %f rate, %lf seconds, %d images, %f hours left\n")
_DARKNET = "".join(
    f" {n}: {loss}, {avg} avg loss, 0.002610 rate, {secs} seconds, {imgs} images, {left} hours left\n"
    f"Loaded: 0.000036 seconds\n\n (next mAP calculation at 1175 iterations) \n"
    f" Last accuracy mAP@0.5 = 40.34 %, best = 40.34 % \n"
    for n, loss, avg, secs, imgs, left in (
        (1110, "0.485933", "0.860935", "0.572688", 53280, "0.165733"),
        (1111, "0.986495", "0.873491", "0.607034", 53328, "0.165492"),
        (1112, "1.157843", "0.901926", "0.581551", 53376, "0.165336"),
        (1113, "1.412448", "0.952978", "0.606615", 53424, "0.165117")))


def test_darknet_records_time_each_iteration_by_its_seconds():
    reading = read_records(_DARKNET)
    assert [it.iteration for it in reading.iterations] == [1110, 1111, 1112, 1113]
    assert [it.step_time_s for it in reading.iterations] == [0.572688, 0.607034, 0.581551, 0.606615]
    assert reading.losses[0] == 0.485933  # the iteration's loss, not the running "avg loss"
    out = trial_outcome(_DARKNET)
    assert out.failure_kind == "ok" and abs(out.metrics["step_time_s"] - 0.594) < 0.02


def test_darknet_pjreddie_format_and_lookalikes():
    # pjreddie/darknet examples/detector.c: "%ld: %f, %f avg, %f rate, %lf seconds, %ld images"
    pj = "".join(f"{n}: 3.1, 3.2 avg, 0.001000 rate, 2.{n % 10}00000 seconds, {n * 64} images\n" for n in range(1, 5))
    assert [it.step_time_s for it in read_records(pj).iterations] == [2.1, 2.2, 2.3, 2.4]
    # the value before its key is darknet's alone: "Loaded: 0.000036 seconds" is no step record
    assert read_records("Loaded: 0.000036 seconds\nLoaded: 0.000040 seconds\n").iterations == ()


# ---- 4. Python logging's "%(asctime)s | %(levelname)s | %(message)s" before an unnamed "[n/N] loss=" counter
# (BrahimMaarouf/vixora-radiology logs/train.log, train.py's logger.info(f"  [{batch_idx+1}/{n_batches}] loss=..."),
# one optimizer step per batch: the clock's advance per step is the step time)
_LEVEL = """2026-04-25 15:54:05,873 | INFO | Epoch 1/50  |  LR=3.00e-04
2026-04-25 15:54:07,900 | INFO |   [25/103] loss=2.1338
2026-04-25 15:54:08,836 | INFO |   [50/103] loss=1.9446
2026-04-25 15:54:09,771 | INFO |   [75/103] loss=2.4064
2026-04-25 15:54:10,728 | INFO |   [100/103] loss=2.3465
2026-04-25 15:54:10,869 | INFO | [TRAIN] loss=2.0150  macro_F1=0.3323
"""


def test_a_logger_level_column_does_not_name_the_counter():
    reading = read_records(_LEVEL)
    assert [it.iteration for it in reading.iterations] == [50, 75, 100]
    assert reading.source == "timestamp difference"
    assert all(abs(it.step_time_s - 0.0378) < 0.0378 * 0.05 for it in reading.iterations)
    # a named number after the level column keeps its own name
    assert read_records(_LEVEL.replace("|   [", "| step [")).iterations[0].iteration == 50
