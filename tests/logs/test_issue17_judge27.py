"""Issue 17 (helper judge27): batch 23's misses as families. A launch whose program file does not exist (CPython's
own `python: can't open file '...': [Errno 2] No such file or directory`, Modules/main.c) is config_error
(families.config.LAUNCH_TARGET); NCCL's duplicate-GPU check (src/init.cc) is config_error by its tail too, `rank N
and rank M both on CUDA device X`, when a log quotes it without its `Duplicate GPU detected :` head
(families.config.DUPLICATE_GPU)."""

from __future__ import annotations

from pathlib import Path

import pytest
from log_fixtures import body, kind_of

from analysis.logs.classify import classify
from analysis.logs.outcome import measurements

FIXTURES = Path(__file__).parents[1] / "fixtures"
# tests/fixtures/oos-batch23/megatron_deepspeed/...: the DeepSpeed launcher starts python on a wrong script path
_UCLLM = FIXTURES / "oos-batch23/megatron_deepspeed/ucllm_gpt_0p125b_deepspeed_launcher_pretrain_gpt_py_not_found_1.log"
# tests/fixtures/oos-batch23/deepspeed/...: a blog quotes NCCL's message without its head
_DEEPSEEK = FIXTURES / "oos-batch23/deepspeed/deepseek_v3_lora_zero3_24_a100_duplicate_gpu_rank_mapping_across_nodes_1.log"
_LAUNCHER_END = ("[2024-03-31 10:17:17,380] [ERROR] [launch.py:321:sigkill_handler] ['python', '-u', 'pretrain_gpt.py'] "
                 "exits with return code = 2\n")
_STEPS = "".join(f" iteration {n:8d}/ 1000 | elapsed time per iteration (ms): 250.1 | lm loss: 5.{n:02d}E+00 |\n"
                 for n in range(1, 30))


def test_the_batch23_wrong_script_path_is_config_error():
    assert kind_of(body(_UCLLM)) == "config_error"


@pytest.mark.parametrize("line", [
    # the fixture's line 11 (CPython 3, %R of the path)
    "/home/u/miniconda3/envs/.venv/bin/python: can't open file '/home/u/Megatron-DeepSpeed-MoE/pretrain_gpt.py': "
    "[Errno 2] No such file or directory",
    "python3.11: can't open file '/workspace/train.py': [Errno 2] No such file or directory",
    "python: can't open file 'pretrain_gpt.py': [Errno 2] No such file or directory",  # Python 2's form
    "[rank0]: /usr/bin/python3: can't open file \"/ws/it's.py\": [Errno 2] No such file or directory",
])
def test_python_cannot_open_the_launched_script(line):
    assert kind_of(f"launching 8 processes\n{line}\n{_LAUNCHER_END}") == "config_error"


@pytest.mark.parametrize("line", [
    "ld: can't open file 'libfoo.so': [Errno 2] No such file or directory",  # another tool, not the interpreter
    "python: can't open file '/workspace/train.py': [Errno 13] Permission denied",  # not a missing file
    "WARNING: tokenizer can't open file '/cache/vocab.json', downloading it",
])
def test_look_alikes_are_not_a_missing_program(line):
    assert kind_of(f"launching 8 processes\n{line}\n{_LAUNCHER_END}") != "config_error"


def test_the_batch23_headless_duplicate_gpu_quote_is_config_error():
    assert kind_of(body(_DEEPSEEK)) == "config_error"


@pytest.mark.parametrize("line", [
    "Error: rank 27 and rank 19 both on CUDA device 53000 (PCI 53:00.0)",  # the fixture's line 2
    "[rank3]: ncclInvalidUsage: rank 3 and rank 0 both on CUDA device ac000",
    "node1:1:1 [1] init.cc:1136 NCCL WARN Duplicate GPU detected : rank 1 and rank 0 both on CUDA device 1000",
])
def test_nccl_duplicate_gpu_by_its_tail(line):
    assert kind_of(f"{line}\n") == "config_error"


@pytest.mark.parametrize("line", [
    "Error: tensors a and b both on CUDA device 0 expected on cpu",  # names no two ranks
    "RuntimeError: rank 3 and rank 0 disagree on the CUDA device count",
])
def test_look_alikes_are_not_the_duplicate_gpu_check(line):
    assert kind_of(f"{line}\n") != "config_error"


def test_a_duplicate_gpu_tail_after_healthy_steps_still_decides():
    # NCCL runs the check when a communicator is made; a sub-group made mid-run fails the same way
    assert kind_of(_STEPS + "Error: rank 5 and rank 1 both on CUDA device 1a000\n") == "config_error"


# ---- Keras' Progbar at an epoch's end, verbose=2 before tf.keras added the per-step time (families.completion)
# tests/fixtures/oos-batch23/other/...: 650 epochs of ` - 15s - loss: ...` lines, the script's messages, `Done!`
_KERAS = FIXTURES / "oos-batch23/other/keras_gate_detector_650_epochs_completed_kfold_1.log"
_TRACEBACK = 'Traceback (most recent call last):\n  File "train.py", line 88, in <module>\nKeyError: \'labels\'\n'


def test_the_batch23_keras_run_is_ok_without_a_step_time():
    text = body(_KERAS)
    assert kind_of(text) == "ok"
    assert measurements(text)[0].get("step_time_s") is None  # an epoch's seconds are not a step's


@pytest.mark.parametrize("line", [
    " - 15s - loss: 4.1070e-04 - acc: 0.5884 - val_loss: 9.4085e-04 - val_acc: 0.6114",  # the fixture's form
    "15s - loss: 0.2123 - acc: 0.9312",  # Keras 2.0: '%ds' without the leading ' - '
    "1875/1875 - 3s - loss: 0.2934 - accuracy: 0.9151",  # tf.keras 2.2-2.3 prefixes the count
])
def test_keras_verbose2_epoch_lines_are_progress(line):
    epochs = "".join(f"Epoch {e}/5\n{line}\n" for e in range(1, 6))
    assert kind_of(epochs) == "ok"
    assert kind_of(epochs + _TRACEBACK) == "crashed"  # a failure after them still decides


@pytest.mark.parametrize("line", [
    " 12s - eta: 30s",  # a timer that names no loss
    "retrying in 15s - loss: connection dropped",  # not at the line's start, no value
    " - 15s - loss: nanometre scale",  # no number after the key
])
def test_look_alikes_are_not_keras_epochs(line):
    assert kind_of("".join(f"{line}\n" for _ in range(5))) != "ok"


# ---- a resume whose checkpoint was saved with other settings than the run's (families.config.RESUME_SETTINGS)
# tests/fixtures/oos-batch23/megatron_lm/...: every rank raises the fork's recipe check in load_checkpoint
_PIER = FIXTURES / "oos-batch23/megatron_lm/pier_toy_gpt_resume_refused_checkpoint_recipe_differs_num_query_groups_1.log"
_LOAD = ('Traceback (most recent call last):\n  File "/ws/megatron/training/checkpointing.py", line 1301, in '
         'load_checkpoint\n{line}\n')


def test_the_batch23_recipe_check_is_config_error():
    assert kind_of(body(_PIER)) == "config_error"


@pytest.mark.parametrize("line", [
    "[rank2]: ValueError: checkpoint recipe differs: ['num_query_groups']",  # the fixture's line 23
    # Megatron-LM checkpointing.py check_checkpoint_args (_compare)
    "AssertionError: num_layers value from checkpoint (24) is not equal to the input argument value (12).",
    "RuntimeError: Checkpoint args mismatch: {'hidden_size': (4096, 2048)}",
    "ValueError: checkpoint config does not match the model config: ['num_attention_heads']",
])
def test_a_checkpoint_saved_with_other_settings_is_config_error(line):
    assert kind_of(_LOAD.format(line=line)) == "config_error"


@pytest.mark.parametrize("line", [
    # a tensor that differs from the checkpoint's names no setting
    "RuntimeError: Error(s) in loading state_dict for GPTModel: size mismatch for checkpoint tensor "
    "'embedding.weight'",
    "ValueError: checkpoint file is corrupted: header differs",  # the file, not its settings
    "INFO: checkpoint config differs from the run's (ignored: use_checkpoint_args is off)",  # not an exception
])
def test_look_alikes_are_not_a_settings_mismatch(line):
    # other rules may judge these lines; this family must not be the one that does
    assert "saved with other model or training settings" not in classify(_LOAD.format(line=line)).reason
