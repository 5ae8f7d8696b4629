"""Issue 17 (in sample, coordinator, stop 42). (1) NCCL failing to create its shared-memory segment under /dev/shm
is the job's environment (the container's /dev/shm), a configuration error, not the network's: families.config's
ENVIRONMENT row for NCCL's shmutils.cc lines. (2) An Ascend NPU kernel that faulted on the device (CANN runtime's
"Kernel task happen error ... [aicore exception]") is a crash, as CUDA's illegal memory access is (patterns.HARD_CRASH);
HCCL's notify-wait timeout stays a communication error. (3) The raised-message tables now hold the checks of older
releases (families.harvest reads every release tag): a refusal worded as an older DeepSpeed, Megatron-LM, LLaMA-Factory
or transformers release words it is a configuration error. (4) After batch 40's score (in sample): a table border `|`
beside bare `|` rows goes (logtext.strip_table_borders) and the log_history reader skips the blank rows
between; a trainer_state.json's entries are read over a generic reading of fewer records; CANN's `hccl fftsplus task
timeout`; Cobalt's wall-time line; a FileNotFoundError naming only a path; PaddlePaddle 1.x's "Insufficient GPU memory
to allocation"; Primus's `value/average` step times. Records: real lines with their source."""

from __future__ import annotations

import pytest

from analysis.logs import logtext
from analysis.logs.outcome import trial_outcome
from analysis.logs.parse_megatron import number

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


# --- after batch 40's score ----------------------------------------------------------------------------------------


# https://huggingface.co/JorangHorse/whisper-base-mk5/blob/ae4558cb/checkpoint-1000/trainer_state.json (oos-batch40):
# the Hub's file page as a docs page renders it, each line a table row ending in ` |`, a bare `|` row between.
_STATE = ['{', '"best_metric": 0.0,', '"global_step": 1000,', '"log_history": [',
          '{', '"epoch": 0.66,', '"learning_rate": 5.000000000000001e-07,', '"loss": 0.7072,', '"step": 25', '},',
          '{', '"epoch": 1.32,', '"learning_rate": 1.0000000000000002e-06,', '"loss": 0.6511,', '"step": 50', '},',
          '{', '"epoch": 1.97,', '"learning_rate": 1.5e-06,', '"loss": 0.5902,', '"step": 75', '},']


def _barred(lines: list[str]) -> str:
    return "|\n" + "".join(f"{line} |\n|\n" for line in lines)


def test_a_table_border_ending_every_line_goes_and_the_trainer_state_reads_as_training() -> None:
    assert logtext.strip_table_borders(_barred(_STATE)).splitlines()[1] == "{"
    assert trial_outcome(_barred(_STATE)).failure_kind == "ok"


def test_the_border_goes_under_lines_a_capture_adds_around_it() -> None:
    banner = "".join(f"+ export NCCL_DEBUG=WARN{i}\n" for i in range(40))  # unbordered lines, a quarter of the text
    assert trial_outcome(banner + _barred(_STATE)).failure_kind == "ok"


def test_a_bar_ending_some_lines_is_the_logs_own() -> None:
    text = "".join(f"{line}\n" for line in _STATE) + "| step | loss |\n|---|---|\n| 25 | 0.7072 |\n"
    assert logtext.strip_table_borders(text) == text


def test_megatrons_closing_pipes_are_the_logs_own() -> None:
    records = "".join(f" iteration {10 * i}/1000 | elapsed time per iteration (ms): 500.0 | lm loss: 2.1E+00 |\n"
                      for i in range(1, 6))
    assert logtext.strip_table_borders(records) == records


# https://huggingface.co/cosimoiaia/Loquace-20B checkpoint-3000/trainer_state.json (oos-batch40): three entries,
# the loss 1.3674, then 39667.712, then 0.0; its top-level "global_step" beside no time once read as one record.
_LOQUACE = "\n".join([
    '{',
    '"best_metric": null,',
    '"best_model_checkpoint": null,',
    '"epoch": 0.4707820867415995,',
    '"global_step": 3000,',
    '"is_hyper_param_search": false,',
    '"is_local_process_zero": true,',
    '"is_world_process_zero": true,',
    '"log_history": [',
    '{',
    '"epoch": 0.16,',
    '"learning_rate": 0.0002,',
    '"loss": 1.3674,',
    '"step": 1000',
    '},',
    '{',
    '"epoch": 0.31,',
    '"learning_rate": 0.0002,',
    '"loss": 39667.712,',
    '"step": 2000',
    '},',
    '{',
    '"epoch": 0.47,',
    '"learning_rate": 0.0002,',
    '"loss": {last},',
    '"step": 3000',
    '}',
    '],',
    '"max_steps": 3000,',
    '"num_train_epochs": 1,',
    '"total_flos": 4.834313788425339e+17,',
    '"trial_name": null,',
    '"trial_params": null',
    '}',
]) + "\n"


def test_a_trainer_states_entries_are_read_over_one_generic_record() -> None:
    assert trial_outcome(_LOQUACE.replace("{last}", "0.0")).failure_kind == "diverged"
    assert trial_outcome(_LOQUACE.replace("39667.712", "1.2").replace("{last}", "1.1")).failure_kind == "ok"


@pytest.mark.parametrize(("line", "kind"), [
    # https://github.com/hiyouga/LlamaFactory/issues/5347 (oos-batch40): CANN's report under a generic EI9999 code
    ("EI9999  The error from device(chipId:5, dieId:0), serial number is 3, hccl fftsplus task timeout occurred "
     "during task execution, stream_id:7, sq_id:7, task_id:5990, stuck notify num:1, timeout:1836.", "comm_error"),
    # argonne-lcf ai-science-training-series copy (oos-batch40): ThetaGPU's job.cobaltlog
    ("Wed Nov 09 22:47:05 2022 +0000 (UTC) Info: maximum execution time exceeded; initiating job termination",
     "time_limit"),
    # https://github.com/X-LANCE/SLAM-LLM (oos-batch40): fairseq's import_user_module for a --user-dir not there
    ("Traceback (most recent call last):\n  File \"/workspace/fairseq/fairseq/utils.py\", line 481, in "
     "import_user_module\n    raise FileNotFoundError(module_path)\nFileNotFoundError: /fairseq/EAT", "config_error"),
    # https://github.com/PaddlePaddle/models/issues/1260 (oos-batch40): Paddle 1.x's allocator at start
    ("Insufficient GPU memory to allocation. at [/paddle/paddle/fluid/platform/gpu_info.cc:120]", "oom"),
])
def test_batch_40s_families(line: str, kind: str) -> None:
    assert trial_outcome(line + "\n").failure_kind == kind


def test_a_file_not_found_naming_a_system_or_step_path_is_not_a_missing_setting() -> None:
    for path in ("/dev/shm/nccl-9D6bNG", "/ckpt/global_step40/model.pt"):
        text = f"Traceback (most recent call last):\n  File \"a.py\", line 1, in <module>\nFileNotFoundError: {path}\n"
        assert trial_outcome(text).failure_kind != "config_error"


def test_primus_value_and_running_average_reads_the_value() -> None:
    assert number("32208.7/32208.7") == 32208.7 and number("55245.7") == 55245.7
    assert number("1/2") == 1.0 and number("abc/2") is None
