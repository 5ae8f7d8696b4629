"""Issue 17 (coordinator, stop 44, judge51: after batch 44's score, in sample). (1) A Ctrl-C whose traceback starts on
the progress bar's own line (tqdm draws with '\\r' and no newline; Python's header follows it) came right after a step.
(2) PaddlePaddle's launcher reporting an aborted worker is a crash, as torchrun's ChildFailedError. (3) datasets'
load_from_disk on a folder with no saved dataset is the configured data missing. (4) A rate keyed "<count>/sec/<per
what>" (big_vision's "img/sec/core") is not a time. Records: real lines with their source."""

from __future__ import annotations

from analysis.logs.outcome import trial_outcome
from analysis.logs.parse_generic import read_records

# github (oos-batch44) a Trainer LoRA run's wandb output.log: the bar at step 61, then the interrupt's traceback
_BAR = "  9%|#####      | {n}/681 [02:05<21:35,  2.09s/it]"
_FRAMES = ('  File "/opt/app/train.py", line 88, in <module>\n    trainer.train()\n'
           '  File "/opt/venv/site-packages/torch/autograd/graph.py", line 825, in _engine_run_backward\n'
           "    return Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass\n"
           "KeyboardInterrupt\n")


def _bars(last: int) -> str:
    return "\r".join(_BAR.format(n=n) for n in range(1, last + 1))


_DICTS = "".join(f"{{'loss': 0.53{k}, 'grad_norm': 0.068, 'learning_rate': 4.8e-05, 'epoch': {e}}}\n"
                 for k, e in enumerate(("0.09", "0.18", "0.26")))
_CARETS = '  File "/opt/venv/site-packages/transformers/trainer.py", line 2245, in train\n' \
          "    return inner_training_loop(\n           ^^^^^^^^^^^^^^^^^^^^\n"


def test_a_traceback_on_the_bars_own_line_follows_a_step() -> None:
    # the Trainer's loss dicts (stdout) land after the header (stderr): the streams interleave
    text = _bars(61) + "Traceback (most recent call last):\n" + _DICTS + _CARETS + _FRAMES
    assert trial_outcome(text).failure_kind == "cancelled"


def test_an_interrupt_after_a_save_on_its_own_line_is_still_a_stall() -> None:
    text = _bars(61) + "\nSaving model checkpoint to /out/checkpoint-61\nTraceback (most recent call last):\n" + _FRAMES
    assert trial_outcome(text).failure_kind == "hang"


# https://github.com/PaddlePaddle/PaddleClas/issues/727 (oos-batch44): paddle.distributed.launch, three of four ranks
def test_paddles_launcher_reporting_an_aborted_worker_is_a_crash() -> None:
    text = ("W0516 22:13:52.367004 35724 nccl_context.cc:142] Socket connect worker 127.0.0.1:52199 failed, try again "
            "after 3 seconds.\nINFO 2021-05-16 22:14:00,648 launch_utils.py:307] terminate all the procs\n"
            "ERROR 2021-05-16 22:14:00,649 launch_utils.py:545] ABORT!!! Out of all 4 trainers, the trainer process "
            "with rank=[1, 2, 3] was aborted. Please check its log.\n")
    assert trial_outcome(text).failure_kind == "crashed"


# github aethv/web3-modal-training (oos-batch44): a LoRA run pointed at a tokenized dataset that was never saved
def test_load_from_disk_on_an_empty_folder_is_the_data_missing() -> None:
    text = ("Traceback (most recent call last):\n  File \"train.py\", line 40, in <module>\n"
            "FileNotFoundError: No such files: '/data/tokenized_dataset/train/dataset_info.json', nor "
            "'/data/tokenized_dataset/train/state.json' found. Expected to load a `Dataset` object or a `DatasetDict` "
            "object.\n")
    assert trial_outcome(text).failure_kind == "config_error"


# github (oos-batch44) a JAX ViT-B/16 fine-tune on TPU with big_vision's train.py: glog lines every 10 steps, 1.6 s a step
_VIT = ("I0103 22:{m:02d}:{s:09.6f} 140262765472832 logging_writer.py:35] [{n}] img_sec_core_train={r}, "
        "train_loss=0.33{k}\n"
        "I0103 22:{m:02d}:{s:09.6f} 140262765472832 train.py:201] Step: {n}/3000 1.7%, img/sec/core: {r}, ETA: 1.37h\n")


def test_images_per_second_per_core_is_no_step_time() -> None:
    text = "".join(_VIT.format(m=24 + int(16.03 * k) // 60, s=(16.03 * k) % 60, n=10 * k, k=k, r=40.3 - k % 2 / 10)
                   for k in range(1, 15))
    steps = [it.step_time_s for it in read_records(text).iterations]
    assert steps and all(abs(s - 1.603) < 0.01 for s in steps[2:])


def test_seconds_per_step_keys_are_still_times() -> None:
    text = "".join(f"step {n} | loss 2.1 | sec/step 0.81\n" for n in range(1, 12))
    assert all(abs(it.step_time_s - 0.81) < 1e-9 for it in read_records(text).iterations)
