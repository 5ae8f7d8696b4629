"""Issue 17 (in sample, coordinator, stop 42). (1) NCCL failing to create its shared-memory segment under /dev/shm
is the job's environment (the container's /dev/shm), a configuration error, not the network's: families.config's
ENVIRONMENT row for NCCL's shmutils.cc lines. (2) An Ascend NPU kernel that faulted on the device (CANN runtime's
"Kernel task happen error ... [aicore exception]") is a crash, as CUDA's illegal memory access is (patterns.HARD_CRASH);
HCCL's notify-wait timeout stays a communication error. (3) The raised-message tables now hold the checks of older
releases (families.harvest reads every release tag): a refusal worded as an older DeepSpeed, Megatron-LM, LLaMA-Factory
or transformers release words it is a configuration error. Records: real lines with their source."""

from __future__ import annotations

import pytest

from analysis.logs.outcome import trial_outcome

# https://github.com/modelscope/ms-swift/issues/2776 (oos-batch33): rank 0's error block, as torch prints NCCL's
# last error under the DistBackendError.
_NCCL_SYSTEM_ERROR = (
    "[rank0]:     work = default_pg.broadcast([tensor], opts)\n"
    "[rank0]: torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/NCCLUtils.hpp:275, "
    "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.20.5\n"
    "[rank0]: ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. \n"
    "[rank0]: Last error:\n")
_SHM_SEGMENT = "[rank0]: Error while creating shared memory segment /dev/shm/nccl-9D6bNG (size 9637888)\n"
# NCCL_DEBUG=WARN's own lines for the same failure (misc/shmutils.cc, as a NCCL issue thread quotes them).
_SHM_EXTEND = ("3d3e22c3066f:168:168 [0] misc/shmutils.cc:72 NCCL WARN Error: failed to extend /dev/shm/nccl-UbzKZ9 "
               "to 9637892 bytes\n")


def test_nccl_failing_to_create_its_dev_shm_segment_is_a_configuration_error() -> None:
    outcome = trial_outcome(_NCCL_SYSTEM_ERROR + _SHM_SEGMENT)
    assert outcome.failure_kind == "config_error"
    assert "/dev/shm/nccl-9D6bNG" in outcome.evidence[0].text
    assert trial_outcome(_SHM_EXTEND + _NCCL_SYSTEM_ERROR).failure_kind == "config_error"


def test_the_same_nccl_system_error_without_the_shm_line_stays_a_communication_error() -> None:
    assert trial_outcome(_NCCL_SYSTEM_ERROR + "[rank0]: socket timed out\n").failure_kind == "comm_error"


# https://github.com/deepspeedai/DeepSpeed/issues/4892 (oos-batch39): bing_bert SQuAD on Ascend NPUs.
_AICORE = (
    "EZ9999: Inner Error!\n"
    "EZ9999  Kernel task happen error, retCode=0x26, [aicore exception].[FUNC:PreCheckTaskErr][FILE:task_info.cc]"
    "[LINE:1518]\n"
    "        TraceBack (most recent call last):\n"
    "        The error from device(2), serial number is 37, there is an aicore error, core id is 0, error code = 0x10\n")
# https://github.com/hiyouga/LLaMA-Factory (oos-batch7, llamafactory_multi_npu_hccl_notify_wait_timeout_1.log).
_NOTIFY_WAIT = (
    "npuSynchronizeDevice:/usr1/02/workspace/j_vqN6BFvg/pytorch/torch_npu/csrc/core/npu/NPUStream.cpp:370 NPU error, "
    "error code is 107020.\n"
    "EI0002: The wait execution of the Notify register times out. Reason: The Notify register has not received the "
    "Notify record from remote rank [4294967295].\n")


def test_an_ascend_kernel_fault_is_a_crash() -> None:
    outcome = trial_outcome(_AICORE)
    assert outcome.failure_kind == "crashed"
    assert "aicore exception" in outcome.evidence[0].text


def test_hccls_notify_wait_timeout_is_still_a_communication_error() -> None:
    assert trial_outcome(_NOTIFY_WAIT).failure_kind == "comm_error"


# Refusals worded as only an older release words them, each read from that release's source by the harvester and
# none caught by the generic configuration rules before (the same test on stop 41's code says crashed):
@pytest.mark.parametrize("line", [
    # DeepSpeed v0.5-v0.6 runtime/zero/config.py (a pydantic validator's message, reworded since)
    "AssertionError: DeepSpeedZeroConfig: 'stage' must be defined before 'overlap_comm'",
    # Megatron-LM core_v0.4.0 megatron/core/model_parallel_config.py __post_init__ (its typo is the release's)
    "AssertionError: Can not use sequence paralllelism without tensor parallelism",
    # NeMo v1.x megatron_gpt_model.py __init__
    "AssertionError: Distributed optimizers require O2. Please set megatron_amp_O2 to True in the model config.",
    # LLaMA-Factory v0.6 src/llmtuner/hparams/finetuning_args.py __post_init__
    "ValueError: Cannot use LoRA with GaLore together.",
    # transformers 4.3x trainer.py __init__
    "ValueError: You cannot perform fine-tuning on purely quantized models. Please attach trainable adapters on top "
    "of the quantized model to correctly perform fine-tuning. Please see: https://huggingface.co/docs/transformers/peft",
])
def test_an_older_releases_refusal_is_a_configuration_error(line: str) -> None:
    text = ("Traceback (most recent call last):\n  File \"train.py\", line 12, in <module>\n    main()\n" + line + "\n")
    assert trial_outcome(text).failure_kind == "config_error"


def test_the_same_words_as_a_warning_are_no_verdict() -> None:
    text = ("[2024-05-01 10:00:00,000] [WARNING] Cannot use LoRA with GaLore together.\n"
            " iteration      100/    1000 | elapsed time per iteration (ms): 850.2 | lm loss: 2.1\n")
    assert trial_outcome(text).failure_kind != "config_error"
