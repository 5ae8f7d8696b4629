"""Issue 17 (coordinator, stop 46, judge56: in sample, written while batch 48 was collected and blind to it). A job's
own SIGKILL with no error above it (the shell's "Killed", a launcher's return code -9, exit status 137, a data-loader
worker "killed by signal: Killed") is the kernel's OOM killer at work, so `oom` (host memory); a launcher killing its
surviving ranks after one failed, a worker dying of a bus error, and an error standing above the kill stay crashes.
Records: real lines with their source."""

from __future__ import annotations

import pytest

from analysis.logs.classify import classify

# github hyeok-jong/BYOL_v1 train.out (oos-batch47): per-epoch records, then the shell's report of the SIGKILL.
_EPOCHS = "".join(f"Epoch [{i}/1200] loss 3.{90 - i:02d} time 147.2s\n" for i in range(1, 11))
# databrickslabs/dolly#166 (oos-batch1): the DeepSpeed launcher's report of a rank's own exit status.
_DS_MINUS_9 = ("[2023-05-15 13:14:32,960] [ERROR] [launch.py:434:sigkill_handler] ['/local_disk0/env/bin/python', "
               "'-u', '-m', 'training.trainer', '--local_rank=0', '--epochs', '2'] exits with return code = -9\n")
# torchrun's ChildFailedError summary (torch/distributed/elastic/multiprocessing/errors/__init__.py), as
# nvidia-cosmos/cosmos-predict2.5#72 (oos-batch30) shows it.
_TORCHRUN_MINUS_9 = (
    "torch.distributed.elastic.multiprocessing.errors.ChildFailedError: \n"
    "============================================================\n"
    "scripts/train.py FAILED\n"
    "------------------------------------------------------------\n"
    "Root Cause (first observed failure):\n"
    "[0]:\n"
    "  time      : 2025-12-12_10:01:02\n"
    "  host      : node01\n"
    "  rank      : 2 (local_rank: 2)\n"
    "  exitcode  : -9 (pid: 4242)\n"
    "  error_file: <N/A>\n"
    "  traceback : Signal 9 (SIGKILL) received by PID 4242\n"
    "============================================================\n")


@pytest.mark.parametrize("text", [
    _EPOCHS + "Killed\n",
    "finetune/finetune_qlora_single_gpu.sh: line 39: 2810536 Killed\n",  # QwenLM/Qwen#384 (oos-batch34)
    # InternLandMark/LandMark#65 (tests/fixtures/torch-logs): the shell's word glued to the bar the child left open
    "Training with a single process on 1 GPUs.\n 31%|##  | 331/1063 [01:06<03:59,  3.06it/s]Killed\n",
    "./run.sh: line 5: 12345 Killed                  python train.py --config c.yaml\n",  # bash's job report
    _EPOCHS + _DS_MINUS_9,
    _EPOCHS + _TORCHRUN_MINUS_9,
    # PaddlePaddle/PaddleDetection#7252 (oos-batch46) and PyTorch's data-loader signal handler
    "SystemError: (Fatal) DataLoader process (pid 1104) exited is killed by signal: Killed. (at "
    "/paddle/paddle/fluid/imperative/data_loader.cc:181)\n",
    _EPOCHS + "RuntimeError: DataLoader worker (pid 3867) is killed by signal: Killed.\n",
])
def test_a_sigkill_with_no_error_above_it_is_the_host_oom_killers(text):
    failure = classify(text)
    assert failure.kind == "oom", failure.reason


@pytest.mark.parametrize("exit_code", [-9, 137])
def test_a_job_status_of_sigkill_alone_is_host_memory(exit_code):
    failure = classify(_EPOCHS, exit_code=exit_code)
    assert failure.kind == "oom" and "SIGKILL" in failure.reason


@pytest.mark.parametrize("text", [
    # the launcher's own kills after a rank failed (deepspeedai/DeepSpeed#3938, oos-batch10), with no return code
    "[2023-07-25 00:38:05,103] [INFO] [launch.py:315:sigkill_handler] Killing subprocess 230\n",
    # a worker out of shared memory (oos-batch4's voxceleb_trainer)
    _EPOCHS + "RuntimeError: DataLoader worker (pid 3867) is killed by signal: Bus error. It is possible that "
              "dataloader's workers are out of shared memory. Please try to raise your shared memory limit.\n",
    # the rank's own error above the -9 another rank got
    _EPOCHS + "Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n"
              "ValueError: bad batch\n" + _DS_MINUS_9,
])
def test_kills_with_a_cause_of_their_own_stay_crashes(text):
    assert classify(text).kind == "crashed"


@pytest.mark.parametrize("line", [
    "the watchdog reports the worker was not Killed",  # ends on the word, not the shell's report
    "[rank0] step 10 loss 2.0 (was Killed? no)",
])
def test_look_alikes_of_the_shells_report_are_not_kills(line):
    assert classify(_EPOCHS + line + "\n").kind != "oom"


def test_a_user_stop_is_not_taken_for_the_oom_killer():
    # SLURM's cancellation (scancel sends SIGTERM, then SIGKILL) names itself
    text = _EPOCHS + "slurmstepd: error: *** JOB 4242 ON node01 CANCELLED AT 2026-01-01T00:00:00 ***\nKilled\n"
    assert classify(text).kind == "cancelled"
