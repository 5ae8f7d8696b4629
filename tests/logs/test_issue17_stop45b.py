"""Issue 17 (coordinator, stop 45, judge53: after batch 46's score, in sample). (1) The dynamic loader's failure in the
words of the library that called it (cuDNN's sub-library loader, PaddlePaddle's DynamicLoader) is the environment's.
(2) torch's refusals that name their own fix (CUDA in a forked DataLoader worker, torch.save into a missing folder) are
configuration errors. (3) A completion line below a caught Ctrl-C is the script's handler winding up: stopped by hand.
(4) A loss field's `:` is its own: "loss: 4.35, grad_norm: nan" is a finite loss. (5) Megatron's record restating a
loss scale of 1 does not hide the scaler's overflow at that floor above it. (6) PaddleOCR's "x"-padded NaN loss.
Records: real lines with their source."""

from __future__ import annotations

import pytest

from analysis.logs.outcome import trial_outcome


# PaddlePaddle/PaddleX#846 and PaddlePaddle/PaddleSpeech#194 (oos-batch46)
@pytest.mark.parametrize("line", [
    "Could not load library libcudnn_cnn_train.so.8. Error: /home/u/anaconda3/envs/py38/bin/../lib/"
    "libcudnn_ops_train.so.8: symbol _Z22cudnnGenericOpTensorNd version libcudnn_ops_train.so.8 not defined in file "
    "libcudnn_ops_train.so.8 with link time reference",
    "F0327 16:29:22.784910 13135 DynamicLoader.cpp:104] Check failed: nullptr != *dso_handle Failed to find dynamic "
    "library: libcudnn.so (libcudnn.so: cannot open shared object file: No such file or directory) ",
])
def test_a_library_that_cannot_be_loaded_is_the_environment(line: str) -> None:
    log = "epoch 0 start\n" + line + "\nPlease make sure libcudnn_cnn_train.so.8 is in your library path!\n"
    assert trial_outcome(log).failure_kind == "config_error"


# github wenwenqqq/sd-demo and a BranchAndBoundBisim fork's wandb output.log (oos-batch46)
@pytest.mark.parametrize("line", [
    "RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, you must use the "
    "'spawn' start method",
    "RuntimeError: Parent directory models does not exist.",
])
def test_a_refusal_that_names_its_setting_is_a_configuration_error(line: str) -> None:
    log = ("Traceback (most recent call last):\n"
           '  File "/home/u/train.py", line 208, in train\n'
           '    torch.save({"weights": NN.state_dict()}, f"models/model-{run_id}.pt")\n'
           f"{line}\n")
    assert trial_outcome(log).failure_kind == "config_error"


# github alxndrTL/arena nohup2.out (oos-batch46): records to iteration 1932 of 8200, the workers' KeyboardInterrupt
# tracebacks, the script's own "Training interrupted." and "Training is done. Took 184.50 minutes."
_ARENA_RECORD = ("Iter {n}/8200. train loss : 5.488. valid loss : 5.572. lr : 0.00162. uptime : 03h04min. "
                 "ETA : 09h53min.\n")
_WORKER = ("Process ForkProcess-{k}:\nTraceback (most recent call last):\n"
           '  File "/usr/lib/python3.10/multiprocessing/queues.py", line 102, in get\n'
           "    with self._rlock:\nKeyboardInterrupt\n")


def test_a_completion_line_below_a_caught_interrupt_is_a_stop_by_hand() -> None:
    records = "".join(_ARENA_RECORD.format(n=n) for n in range(1902, 1938, 6))
    workers = "".join(_WORKER.format(k=k) for k in range(1, 4))
    log = records + workers + "Training interrupted.\nTraining is done. Took 184.50 minutes.\n"
    assert trial_outcome(log).failure_kind == "cancelled"
    # the same lines with the completion above the interrupt: the run finished first, then was interrupted
    finished = records + "Training is done. Took 184.50 minutes.\n" + workers
    assert trial_outcome(finished).failure_kind != "cancelled"


# OpenDriveLab/Birds-eye-view-Perception#13 mmdet log (oos-batch46): a finite loss beside an overflowed step's gradient norm
def test_a_nan_in_the_field_after_the_loss_is_not_the_loss() -> None:
    record = ("2022-12-05 16:36:20,525 - mmdet - INFO - Epoch [12][{n}/3953]\tlr: 3.604e-06, eta: 3:00:08, time: "
              "2.939, data_time: 0.832, memory: 19582, loss_cls: 0.2205, loss_bbox: 0.4785, loss: 4.3531, "
              "grad_norm: {g}\n")
    log = "".join(record.format(n=n, g="31.5" if n % 100 else "nan") for n in range(50, 900, 50))
    assert trial_outcome(log).failure_kind != "diverged"
    assert trial_outcome(log.replace("loss: 4.3531", "loss: nan")).failure_kind == "diverged"


# github liguodongiot/llm-action llama-note.md, a Megatron-DeepSpeed LLaMA fp16 run (oos-batch46): the scaler overflows at its floor of 1 while
# Megatron's records restate "loss scale: 1.0"
_MEGATRON = (" iteration {n:8d}/    2500 | consumed samples: {s:12d} | elapsed time per iteration (ms): 1205.4 | "
             "learning rate: 1.371E-04 | global batch size:    32 | lm loss: 1.340131E+01 | loss scale: {scale} | "
             "grad norm: 2.104 | number of skipped iterations:   1 | number of nan iterations:   0 |\n")
_FLOOR = ("[2023-08-15 07:22:31,763] [INFO] [logging.py:96:log_dist] [Rank 0] Overflow detected. Skipping step. "
          "Attempted loss scale: 1, reducing to 1\n")


def test_an_overflow_at_the_floor_behind_a_record_restating_the_scale_is_a_divergence() -> None:
    log = "".join(_FLOOR + _MEGATRON.format(n=n, s=32 * n, scale="1.0") for n in range(2495, 2501))
    assert trial_outcome(log).failure_kind == "diverged"
    # a bf16 run's records read "loss scale: 1.0" with no scaler line: nothing overflowed
    bf16 = "".join(_MEGATRON.format(n=n, s=32 * n, scale="1.0") for n in range(2495, 2501))
    assert trial_outcome(bf16).failure_kind != "diverged"


# PaddlePaddle/PaddleOCR#7057 (oos-batch46): ppocr's stats logger pads every value with "x"
def test_an_x_padded_nan_loss_is_a_nan_loss() -> None:
    record = ("[2023/10/06 13:24:{sec:02d}] ppocr INFO: epoch: [1/500], global_step: {n}, lr: 0.000043, acc: 0.000000, "
              "CTCLoss: {v}, SARLoss: {v}, loss: {v}, avg_reader_cost: 0.25367 s, avg_batch_cost: 0.80017 s, "
              "ips: 159.96559 samples/s, eta: 5 days, 0:36:35\n")
    log = "".join(record.format(sec=n // 10, n=n, v="nanxxx") for n in range(150, 210, 10))
    assert trial_outcome(log).failure_kind == "diverged"
    finite = "".join(record.format(sec=n // 10, n=n, v="2.315400") for n in range(150, 210, 10))
    assert trial_outcome(finite).failure_kind != "diverged"


# github xuziqiang98/BranchAndBoundBisim wandb output.log (oos-batch46): update records, then the evaluation's own
# counter, then a Ctrl-C while Ray's pool.starmap waits on its results
_BNB = ("update 16/16 loss 0.4210 time 1.23s\n"
        "RUNNING 21\nRUNNING 22\nRUNNING 23\n"
        "Traceback (most recent call last):\n"
        '  File "/home/u/main.py", line 116, in eval_model\n'
        "    d = pool.starmap(__make_and_optimize,args)\n"
        '  File "/usr/lib/python3.10/threading.py", line 1116, in _wait_for_tstate_lock\n'
        "    if lock.acquire(block, timeout):\n"
        "KeyboardInterrupt\n")


def test_an_interrupt_while_a_counter_still_counts_up_is_a_stop_by_hand() -> None:
    assert trial_outcome(_BNB).failure_kind == "cancelled"
    # the same print repeated without growing (a wait's heartbeat) is no progress
    stuck = _BNB.replace("RUNNING 21\nRUNNING 22\n", "RUNNING 23\nRUNNING 23\n")
    assert trial_outcome(stuck).failure_kind == "hang"


# github HaibaraAiChan/cifar10_deepspeed_moe_offloading (oos-batch46): DeepSpeed's ZeRO-2 MoE set-up check
# (runtime/zero/stage_1_and_2.py _configure_moe_settings, harvested since judge53)
def test_deepspeeds_moe_set_up_check_is_a_configuration_error() -> None:
    log = ("Traceback (most recent call last):\n"
           '  File "/env/lib/python3.8/site-packages/deepspeed/runtime/zero/stage_1_and_2.py", line 535, in '
           "_configure_moe_settings\n"
           "    assert any([self.is_moe_group(group) for group in self.optimizer.param_groups]), \"The model has moe "
           "layers, but None of the param groups are marked as MoE. Create a param group with 'moe' key set to True "
           "before creating optimizer\"\n"
           "AssertionError: The model has moe layers, but None of the param groups are marked as MoE. Create a param "
           "group with 'moe' key set to True before creating optimizer\n")
    assert trial_outcome(log).failure_kind == "config_error"
