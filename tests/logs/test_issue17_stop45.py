"""Issue 17 (coordinator, stop 45, judge52: in sample, written while batch 46 was collected and blind to it). A Ctrl-C
after a line that is not a step is a stall only where the log shows the job had stopped moving: the clock silent for
five minutes before the interrupt, or a last line that opens a set-up or wait phase. Without either, the job was
stopped by hand while at work. Records: real lines with their source."""

from __future__ import annotations

import pytest

from analysis.logs.outcome import trial_outcome

# github zainsarwar865/gpt-neox (oos-batch21) stderr of a 1-GPU MoE run: a dataset warning, then rank 0's
# KeyboardInterrupt inside DeepSpeed's timer synchronize (the optimizer step) and the launcher's own.
_NEOX_STDERR = (
    "Loading extension module fused_adam...\n"
    "/u/z/gpt-neox/megatron/data/gpt2_dataset.py:222: UserWarning: The torch.cuda.*DtypeTensor constructors are no "
    "longer recommended.\n"
    "  counts = torch.cuda.LongTensor([1])\n"
    "[rank0]: Traceback (most recent call last):\n"
    '[rank0]:   File "/u/z/gpt-neox/train.py", line 34, in <module>\n'
    "[rank0]:     main()\n"
    '[rank0]:   File "/u/z/envs/lib/python3.12/site-packages/deepspeed/utils/timer.py", line 40, in get_elapsed_msec\n'
    "[rank0]:     self.end_event.synchronize()\n"
    "[rank0]: KeyboardInterrupt\n")

# huggingface/accelerate#2724 (oos-batch5) peft + ZeRO-3 Trainer run: steps, a checkpoint save, a ZeRO-3 trace-cache warning, then
# nothing for ten minutes until the Ctrl-C the DeepSpeed launcher stamps.
_SAVE_THEN_SILENCE = (
    "[INFO|trainer.py:1836] 2024-05-26 14:56:06,884 >> Epoch: [0],Step [4/5],Elapsed Time: 00:01:02\n"
    "[INFO|trainer.py:2915] 2024-05-26 14:56:22,776 >> Saving model checkpoint to ../output/tmp-checkpoint-5\n"
    "Invalidate trace cache @ step 0: expected module 0, but got module 274\n"
    "^C[2024-05-26 {clock}] [INFO] [launch.py:315:sigkill_handler] Killing subprocess 22523\n"
    "Traceback (most recent call last):\n"
    '  File "/opt/conda/bin/deepspeed", line 6, in <module>\n'
    "    main()\n"
    "KeyboardInterrupt\n")


def test_an_interrupt_with_no_sign_of_a_stall_is_a_stop_by_hand() -> None:
    outcome = trial_outcome(_NEOX_STDERR)
    assert outcome.failure_kind == "cancelled"
    assert "nothing says the run had stopped moving" in outcome.reason


def test_ten_minutes_of_silence_before_the_interrupt_is_a_stall() -> None:
    outcome = trial_outcome(_SAVE_THEN_SILENCE.format(clock="15:06:40,046"))
    assert outcome.failure_kind == "hang"
    assert "no line for 617 s" in outcome.reason


# oos-batch45 (a NeMo 2.0 GPT-125M example log committed to NVIDIA/NeMo): set-up records, a Lightning warning,
# then Lightning's own notice of the Ctrl-C, 11 s later; no step record above it.
_NEMO_SET_UP = ("[NeMo I 2024-07-30 17:38:49 utils:220] Setting up optimizer with config OptimizerConfig(optimizer='adam')\n"
                "[NeMo W 2024-07-30 17:38:52 nemo_logging:349] /usr/local/lib/python3.10/dist-packages/"
                "pytorch_lightning/trainer/connectors/logger_connector/result.py:439: It is recommended to use "
                "`self.log('val_loss', ..., sync_dist=True)`\n"
                "[NeMo W 2024-07-30 {clock} nemo_logging:349] /usr/local/lib/python3.10/dist-packages/"
                "pytorch_lightning/trainer/call.py:54: Detected KeyboardInterrupt, attempting graceful shutdown...\n")


def test_a_short_silence_before_an_interrupt_with_no_step_is_no_stall() -> None:
    assert trial_outcome(_NEMO_SET_UP.format(clock="17:39:03")).failure_kind == "cancelled"
    assert trial_outcome(_NEMO_SET_UP.format(clock="17:49:03")).failure_kind == "hang"  # ten minutes


# github NVIDIA/Megatron-LM#82 (oos-batch3): stuck compiling the fused kernels right after the arguments' banner
# (megatron arguments.py validate_args prints "using torch.float16 for parameters ..."), then ^C.
@pytest.mark.parametrize("banner", [
    "using torch.float16 for parameters ...",
    "using world size: 1, data-parallel-size: 1, tensor-model-parallel size: 1, pipeline-model-parallel size: 1 ",
    "Loading extension module fused_adam...",
])
def test_an_interrupt_after_a_set_up_phase_line_is_a_stall(banner: str) -> None:
    log = (f"{banner}\n^CTraceback (most recent call last):\n"
           '  File "pretrain_gpt.py", line 149, in <module>\n'
           "    pretrain(train_valid_test_datasets_provider, model_provider, forward_step,\n"
           "KeyboardInterrupt\n")
    outcome = trial_outcome(log)
    assert outcome.failure_kind == "hang"
    assert "set-up" in outcome.reason


# A missing input is a configuration error whatever library reports it: h5py's wording of ENOENT (github
# addison-nm/BioM3-dev run logs, oos-batch45) and Hugging Face datasets' download of a file its repository does not hold
# (oos-batch21's unlearning run).
@pytest.mark.parametrize("line", [
    "FileNotFoundError: [Errno 2] Unable to open file (unable to open file: name = './data/Stage2_embedding.hdf5', "
    "errno = 2, error message = 'No such file or directory', flags = 0, o_flags = 0)",
    "FileNotFoundError: Couldn't find file at https://huggingface.co/datasets/cais/wmdp-corpora/resolve/daf89fa9/"
    "./data_cache/downloads/11a09952",
])
def test_a_missing_input_file_is_a_configuration_error(line: str) -> None:
    log = ("Traceback (most recent call last):\n"
           '  File "/home/u/run_stage2.py", line 88, in <module>\n'
           "    main(args)\n"
           f"{line}\n")
    assert trial_outcome(log).failure_kind == "config_error"
