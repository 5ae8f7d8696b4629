"""Issue 17 (coordinator, stop 44, judge50a: after batch 43's score, in sample). (1) An interrupt that the clock places
within a couple of step intervals of the last step record came while the run was moving: cancelled, not a stall,
whatever lines stand between. (2) A check naming the only choices it supports is a configuration rule. (3) The launch
command is wrong: CPython's usage error for an option it does not know, a launcher's "Script not found: /path". (4)
LLVM's fatal error aborts the process: a native fault. (5) A generic reader's step records bound where the log alone is
searched for failures, as Megatron's do: a caught error or a warning that the run trained past is not its end. Records:
real lines with their source."""

from __future__ import annotations

import pytest

from analysis.logs.outcome import trial_outcome

# github wx971025/deepspeed_chatYuanV2 (oos-batch43) DeepSpeed-Chat step 1 training.log: DeepSpeed's timer line every
# 10 steps, a sample print, the launcher's sigkill_handler line and the KeyboardInterrupt under the backward's frames.
_TIMER = ("[2023-05-15 13:{clock}] [INFO] [timer.py:199:stop] epoch=0/micro_step={n}/global_step={n}, "
          "RunningAvgSamplesPerSec=4.37, CurrSamplesPerSec=4.40, MemAllocated=6.61GB, MaxMemAllocated=11.5GB\n"
          "Human: 从一篇短文中提取出所有的数字并排序。 Assistant: <|endoftext|>{pad}\n")
_INTERRUPT = ("[2023-05-15 13:{clock}] [INFO] [launch.py:428:sigkill_handler] Killing subprocess 3889720\n"
              "Traceback (most recent call last):\n"
              '  File "/home/u/deepspeed/runtime/fp16/loss_scaler.py", line 62, in backward\n'
              "    scaled_loss.backward(retain_graph=retain_graph)\n"
              '  File "/home/u/torch/autograd/__init__.py", line 200, in backward\n'
              "    Variable._execution_engine.run_backward(  # Calls into the C++ engine to run the backward pass\n"
              "KeyboardInterrupt\n")


def _dschat(interrupt_clock: str) -> str:
    steps = "".join(_TIMER.format(clock=f"{8 + n // 100:02d}:{(n % 100) * 0.46:06.3f}".replace(".", ","), n=n,
                                  pad="<pad>" * (n % 7)) for n in range(400, 450, 10))
    return steps + _INTERRUPT.format(clock=interrupt_clock)


def test_an_interrupt_while_steps_are_still_coming_is_a_stop_by_hand() -> None:
    # the last timer line at 13:12:18.40 (4.6 s a print), the launcher's line 1.2 s later
    outcome = trial_outcome(_dschat("12:19,600"))
    assert outcome.failure_kind == "cancelled"
    assert "stopped by hand while running" in outcome.reason


def test_an_interrupt_long_after_the_last_step_is_still_a_stall() -> None:
    outcome = trial_outcome(_dschat("25:00,000"))  # 12 minutes without a step
    assert outcome.failure_kind == "hang"


def test_a_heartbeat_whose_counter_does_not_advance_is_no_step_clock() -> None:
    beats = "".join(f"[2023-05-15 13:00:{s:02d},000] [INFO] waiting at step 40 for the collective\n"
                    for s in range(0, 50, 10))
    outcome = trial_outcome(beats + "still waiting\n" + _INTERRUPT.format(clock="00:51,000"))
    assert outcome.failure_kind != "cancelled" or "while running" not in outcome.reason


# github AIGCodeOS/aigcode_zeta_optimizer (oos-batch43) MindSpeed-LLM nohup log: Megatron-LM's DistributedOptimizer
# check (megatron/core/optimizer/distrib_optimizer.py) with the optimizer the run chose.
@pytest.mark.parametrize("line", [
    "[rank11]: AssertionError: Only Adam and HybridDeviceOptimizer currently supported, due to checkpointing "
    "requirements.",
    "ValueError: only fp16 and bf16 are supported for this kernel configuration",
    "NotImplementedError: This scheduler only supports cosine and linear decay",
])
def test_a_check_naming_the_only_supported_choices_is_a_configuration_error(line: str) -> None:
    assert trial_outcome(line + "\n").failure_kind == "config_error"


@pytest.mark.parametrize("line", [
    "ValueError: only contiguous tensors are supported",  # the program's own tensor
    "NotImplementedError: only float32 weights are supported",
    "AssertionError: only the default stream is supported",
])
def test_a_limit_on_the_programs_own_objects_stays_a_crash(line: str) -> None:
    assert trial_outcome(line + "\n").failure_kind == "crashed"


# github AIMLTOP/deepspeed-on-aws (oos-batch43): a launcher built `python -u --hostfile ...` without the script
_USAGE = ("Unknown option: --\nusage: /opt/conda/bin/python [option] ... [-c cmd | -m mod | file | -] [arg] ...\n"
          "Try `python -h' for more information.\n")


def test_the_interpreters_usage_error_is_the_launch_command() -> None:
    outcome = trial_outcome(_USAGE * 2 + "Killing subprocess 163\n")
    assert outcome.failure_kind == "config_error" and "launch command" in outcome.reason


def test_a_programs_own_usage_line_is_not_the_interpreters() -> None:
    text = "usage: train.py [-h] [--lr LR]\ntrain.py: error: argument --lr: invalid float value: 'x'\n"
    outcome = trial_outcome(text)
    assert "launch command" not in outcome.reason


# github AMD-AGI/Primus slurm-38306.out (oos-batch43, PR #311's branch)
def test_a_launchers_script_not_found_record_is_the_launch_command() -> None:
    text = ("[primus-run-slurm] NNODES=1\n[primus-slurm-entry][ERROR] Script not found: "
            "/var/spool/slurm-llnl/job38306/primus-cli-container.sh\n")
    assert trial_outcome(text).failure_kind == "config_error"


def test_a_missing_file_said_without_error_level_is_not_the_launch() -> None:
    text = "[INFO] checkpoint not found: /ckpt/latest, starting from scratch\niteration 1 | loss 9.1\n"
    outcome = trial_outcome(text)
    assert "launch command" not in outcome.reason


# https://github.com/verl-project/verl/issues/1633 (oos-batch43): Triton's MLIR lowering aborts a Ray worker on a V100
def test_llvms_fatal_error_is_a_native_fault() -> None:
    text = "python3 -m verl.trainer.main_ppo trainer.total_epochs=15\n\n" \
           "(WorkerDict pid=804460) LLVM ERROR: Failed to compute parent layout\n"
    assert trial_outcome(text).failure_kind == "crashed"


# github X-7D1C11010/Dual_D train_dual_d.log (oos-batch43): torch's capability warning on an RTX 5090, then 75 epochs
_WARNING = ("/envs/lib/python3.11/site-packages/torch/cuda/__init__.py:235: UserWarning: \n"
            "NVIDIA GeForce RTX 5090 with CUDA capability sm_120 is not compatible with the current PyTorch "
            "installation.\n\n  warnings.warn(\n")
_EPOCH = ("2026-07-13 19:{m:02d}:{s:02d} | Epoch {n:03d}/100 | loss {loss:.4f} | cls 1.1436 | train_acc 1.0000 | "
          "val_acc 0.9750 | val_f1 0.9817 | time 10.4s\n")


def _epochs(first: int, last: int) -> str:
    return "".join(_EPOCH.format(m=29 + n // 6, s=(n * 10) % 60, n=n, loss=2.5 + 1 / n) for n in range(first, last))


def test_a_warning_the_run_trained_past_is_not_its_end() -> None:
    assert trial_outcome(_WARNING + _epochs(1, 40)).failure_kind == "ok"


# github XBisATrouble/DCGAN_GPU nohup.out (oos-batch43): a sample-image save that fails and is caught, steps go on
_DCGAN = "[{n:8d} Epoch:[ 1/25] [{i:5d}/20018] time: {t:.4f}, d_loss: 1.42980337, g_loss: 0.42191070\n"


def test_a_caught_error_between_step_records_is_not_the_end() -> None:
    steps = [_DCGAN.format(n=32592 + k, i=12573 + k, t=125488.97 + 3.7 * k) for k in range(20)]
    text = "".join(steps[:10]) + "module 'scipy.misc' has no attribute 'imsave'\none pic error!...\n" \
        + "".join(steps[10:])
    assert trial_outcome(text).failure_kind == "ok"
    # the same message after the last step record still ends the run
    assert trial_outcome("".join(steps) + "module 'scipy.misc' has no attribute 'imsave'\n").failure_kind \
        == "config_error"
