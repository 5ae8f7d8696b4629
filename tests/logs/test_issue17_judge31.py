"""Issue 17 (helper judge31): batch 27's misses as families. A resume asked for with nothing to resume from (HF
Trainer), a distributed backend never initialised (DeepSpeed's comm.py, torch's c10d), a missing module of the
program's own package (a code bug, not a missing install), and an interrupt seen only from inside its traceback
(cancelled, not a stall). Each: a real line with its source, look-alikes that must not match."""

from __future__ import annotations

import pytest
from log_fixtures import body

from analysis.logs.classify import classify
from analysis.logs.families import config


def _traceback(frames: str, line: str) -> str:
    return f"Traceback (most recent call last):\n{frames}{line}\n"


_USER_FRAME = '  File "train.py", line 12, in <module>\n    main()\n'
_BATCH27 = "oos-batch27/"

# ---- 1. resume_from_checkpoint=True and no checkpoint-N folder in output_dir
# huggingface/transformers src/transformers/trainer.py@2cda12cbf6e476183e68ec476551fa7e3717394a, Trainer.train:
#     raise ValueError(f"No valid checkpoint found in output directory ({args.output_dir})")
_TRAINER_FRAME = ('  File "/env/lib/python3.10/site-packages/transformers/trainer.py", line 1166, in train\n'
                  '    raise ValueError(f"No valid checkpoint found in output directory ({args.output_dir})")\n')


@pytest.mark.parametrize("text", [
    _traceback(_TRAINER_FRAME, "ValueError: No valid checkpoint found in output directory (outputs/run1)"),
    _traceback(_USER_FRAME, "RuntimeError: No checkpoint found in /ckpt/run7"),  # made up: the same refusal
])
def test_a_resume_with_nothing_to_resume_from_is_config(text):
    failure = classify(text)
    assert failure.kind == "config_error", failure.reason
    assert "resuming from a checkpoint" in failure.reason


def test_the_trainer_log_of_batch_27_is_config():
    failure = classify(body(_BATCH27 + "hf_trainer/c_nezha_mlm_pretrain_resume_true_no_valid_checkpoint_in_output_dir_"
                                       "1.log"))
    assert failure.kind == "config_error", failure.reason


@pytest.mark.parametrize("text", [
    # a fork that prints the sentence and trains from scratch (no exception): the run goes on
    "No valid checkpoint found in output directory (out)\nContinuing training from scratch\n"
    + "".join(f"{{'loss': 2.{i}, 'learning_rate': 1e-05, 'epoch': 0.{i}}}\n" for i in range(9)),
    # an exception that says it starts fresh is a warning's wording, not a refusal
    "UserWarning: No checkpoint found, starting from scratch\n"
    + "".join(f"{{'loss': 2.{i}, 'learning_rate': 1e-05, 'epoch': 0.{i}}}\n" for i in range(9)),
])
def test_a_printed_no_checkpoint_is_not_a_refused_resume(text):
    assert classify(text).kind != "config_error"


# ---- 2. the distributed backend was never initialised
# deepspeedai/DeepSpeed deepspeed/comm/comm.py@09ce632b6559b0a7e0d2ae6e439f95946d9cd280, get_rank:
#     assert cdb is not None and cdb.is_initialized(
#     ), 'DeepSpeed backend not set, please initialize it using init_process_group()'
_DS_COMM = ('  File "/env/lib/python3.8/site-packages/deepspeed/comm/comm.py", line 553, in get_rank\n'
            "    assert cdb is not None and cdb.is_initialized(), 'DeepSpeed backend not set, please initialize it "
            "using init_process_group()'\n")


@pytest.mark.parametrize("text", [
    _traceback(_DS_COMM, "AssertionError: DeepSpeed backend not set, please initialize it using init_process_group()"),
    # torch torch/distributed/distributed_c10d.py _get_default_group (ValueError in torch >= 2.2, RuntimeError before)
    _traceback(_USER_FRAME, "ValueError: Default process group has not been initialized, please make sure to call "
                            "init_process_group."),
    _traceback(_USER_FRAME, "RuntimeError: Default process group has not been initialized, please make sure to call "
                            "init_process_group."),
])
def test_a_backend_never_initialised_is_config(text):
    failure = classify(text)
    assert failure.kind == "config_error", failure.reason


@pytest.mark.parametrize("line", [
    "AssertionError: expert parallel group is not initialized",  # the program's own group (batch 11, crashed)
    "RuntimeError: grad tensor was not set before init_process_group was called",  # no "not set ... init" order
    "AssertionError: DeepSpeed backend not set",  # no set-up call named
])
def test_look_alikes_of_a_skipped_init_are_not_this_family(line):
    assert config.SETUP_CALL_SKIPPED.search(line) is None


# ---- 3. a missing module of the program's own package
# Python imports a dotted name's parents first (importlib._bootstrap._find_and_load), so "No module named
# 'pkg.sub.mod'" says pkg.sub was found; with pkg/sub/ files in the frames, the repository lacks its own module.
_OWN = ('  File "/work/proj/train.py", line 3, in <module>\n    from proj.data.loader import build\n'
        '  File "/work/proj/proj/data/loader.py", line 5, in <module>\n'
        "    from proj.data.finetune_dataset import ChatDataset\n")


def test_a_missing_module_of_the_programs_own_package_is_a_crash():
    failure = classify(_traceback(_OWN, "ModuleNotFoundError: No module named 'proj.data.finetune_dataset'"))
    assert failure.kind == "crashed", failure.reason
    assert "own package 'proj.data'" in failure.reason


def test_the_package_run_earlier_in_the_log_counts():
    earlier = _traceback('  File "/work/proj/proj/data/loader.py", line 40, in build\n    warn()\n',
                         "UserWarning: slow path")
    text = earlier + _traceback(_USER_FRAME, "ModuleNotFoundError: No module named 'proj.data.finetune_dataset'")
    assert classify(text).kind == "crashed"


@pytest.mark.parametrize("frames, line", [
    # a missing top-level package: not installed
    (_OWN, "ModuleNotFoundError: No module named 'proj'"),
    # a module of a top-level package: one folder name is often a sub-folder of another package (NeMo's
    # nemo/collections/nlp/modules/common/megatron/ with "No module named 'megatron.core'", batch 4, config_error)
    ('  File "/opt/NeMo/nemo/collections/nlp/modules/common/megatron/transformer.py", line 27, in <module>\n'
     "    from megatron.core import parallel_state\n", "ModuleNotFoundError: No module named 'megatron.core'"),
    # a submodule of an installed package: the installed version lacks it
    ('  File "/env/lib/python3.10/site-packages/peft/tuners/lora.py", line 9, in <module>\n'
     "    from transformers.models.qwen2.modeling import X\n",
     "ModuleNotFoundError: No module named 'transformers.models.qwen2'"),
    ('  File "/env/lib/python3.10/site-packages/transformers/models/qwen2/x.py", line 9, in <module>\n    import y\n',
     "ModuleNotFoundError: No module named 'transformers.models.qwen2.modeling'"),
    # the package's files are nowhere in the log (Pai-Megatron-Patch#119 as excerpted: only the entry script)
    ('  File "pretrain_megatron_chatglm.py", line 22, in <module>\n'
     "    from megatron_patch.data.finetune_dataset import ChatGLMDataset\n",
     "ModuleNotFoundError: No module named 'megatron_patch.data.finetune_dataset'"),
])
def test_missing_installs_stay_config(frames, line):
    failure = classify(_traceback(frames, line))
    assert failure.kind == "config_error", failure.reason


# ---- 4. an interrupt is a stall only with evidence of one
_GEMMA = _BATCH27 + "hf_trainer/a_gemma2_lora_trainer_keyboard_interrupt_in_training_step_1.log"
_FRAMES = ('  File "/env/lib/python3.10/site-packages/torch/nn/modules/module.py", line 1514, in _wrapped_call_impl\n'
           "    def _wrapped_call_impl(self, *args, **kwargs):\n")


def test_an_excerpt_that_begins_in_the_interrupts_traceback_is_cancelled():
    failure = classify(body(_GEMMA))
    assert failure.kind == "cancelled", failure.reason
    assert classify(_FRAMES + "KeyboardInterrupt\n").kind == "cancelled"  # made up: frames only, then the interrupt


@pytest.mark.parametrize("name", [
    "megatron-logs/fused_kernel_compile_stuck_ctrl_c_1.log",  # stuck after a set-up line, then Ctrl-C
    "oos-batch5/deepspeed/peft_zero3_stuck_after_checkpoint_ctrl_c_1.log",  # stuck after a checkpoint save
])
def test_real_stalls_before_an_interrupt_stay_hangs(name):
    assert classify(body(name)).kind == "hang"


def test_a_run_line_above_the_traceback_keeps_the_stall_reading():
    text = "compiling fused kernels ...\n" + _traceback(_FRAMES, "KeyboardInterrupt")
    assert classify(text).kind == "hang"


# ---- 5. a caught dispatch error logged as the log's last line
# PyTorch ATen/Dispatch.h (AT_DISPATCH_* default case: TORCH_CHECK_NOT_IMPLEMENTED(false, '"', name, "\" not implemented
# for '", toString(type), "'")) prints the sentence only as a raised error's text.
_HAIGPT = _BATCH27 + "pytorch/a_gpt2_chitchat_cpu_float16_layernorm_not_implemented_for_half_1.log"
_START = "2024-02-12 17:50:45,768 - INFO - loading training dataset and validating dataset\n" \
         "2024-02-12 17:50:50,231 - INFO - starting training\n"


def test_a_caught_no_kernel_error_ending_the_log_is_config():
    failure = classify(body(_HAIGPT))
    assert failure.kind == "config_error", failure.reason
    made_up = _START + "2024-02-12 17:50:50,867 - ERROR - \"addmm_impl_cpu_\" not implemented for 'BFloat16'\n"
    assert classify(made_up).kind == "config_error"


@pytest.mark.parametrize("text", [
    # a fallback notice, a warning record: the run goes on
    _START + "2024-02-12 17:50:50,867 - INFO - \"LayerNormKernelImpl\" not implemented for 'Half', falling back to "
             "float32\n",
    _START + "2024-02-12 17:50:50,867 - WARNING - \"LayerNormKernelImpl\" not implemented for 'Half'\n",
    # an integer dtype: a tensor the program built with the wrong type, not a precision setting
    _START + "2024-02-12 17:50:50,867 - INFO - \"LayerNormKernelImpl\" not implemented for 'Long'\n",
])
def test_look_alikes_of_a_caught_no_kernel_error_are_not_config(text):
    assert classify(text).kind != "config_error"


def test_the_message_in_the_middle_of_a_running_log_is_not_the_end():
    steps = "".join(f"2024-02-12 17:51:{i:02d},000 - INFO - epoch 1 step {i} loss 3.{i}\n" for i in range(10))
    text = _START + "2024-02-12 17:50:50,867 - INFO - \"LayerNormKernelImpl\" not implemented for 'Half'\n" + steps
    assert classify(text).kind != "config_error"
