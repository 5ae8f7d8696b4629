"""Issue 17, batch 13 (helper judge13): configuration errors that surface as ordinary exceptions (a set-up step not
run, a setting holder that is None, the framework's input contract, a refusal with its condition), a success print
after the fatal exception, AMD RAS hardware errors. Each rule: a real excerpt (its source), a made-up look-alike, and
lines that must not match."""

from __future__ import annotations

import pytest

from analysis.logs.classify import classify
from analysis.logs.families import config
from analysis.logs.parse_generic import summary_step_times


def _traceback(frames: str, line: str) -> str:
    return f"Traceback (most recent call last):\n{frames}{line}\n"


_USER_FRAME = '  File "train.py", line 12, in <module>\n    main()\n'

# ---- a set-up step the framework requires was not run

# Megatron-LLM#77 (tests/fixtures/oos-batch13/megatron_lm/megatron_llm_llama2_finetune_tokenizer_not_initialized_1.log)
_TOKENIZER = ('  File "/home/u/Megatron-LLM/megatron/global_vars.py", line 198, in _ensure_var_is_initialized\n'
              "    assert var is not None, '{} is not initialized.'.format(name)\n")


@pytest.mark.parametrize("text", [
    _traceback(_TOKENIZER, "AssertionError: tokenizer is not initialized."),
    # batch 7 (oos-batch7/deepspeed/initialize_distributed_backend_not_initialized_1.log), already config_error
    "AssertionError: Distributed backend is not initialized. Please set dist_init_required to True or initialize "
    "before calling deepspeed.initialize()\n",
    # made up: the distributed package and another global
    _traceback(_USER_FRAME, "RuntimeError: torch.distributed has not been initialized yet"),
    _traceback(_USER_FRAME, "AssertionError: global args were never initialized"),
])
def test_a_setup_step_not_run_is_config(text):
    failure = classify(text)
    assert failure.kind == "config_error", failure.reason


@pytest.mark.parametrize("line", [
    # the program's own objects: a process group (batch 11's Megatron-DeepSpeed fork, crashed), a tensor, a cache
    "AssertionError: expert parallel group is not initialized",
    # (torch's "Default process group has not been initialized, please make sure to call init_process_group." names
    # the set-up call the launch skipped: config_error since judge31, tests/logs/test_issue17_judge31.py)
    "AssertionError: the KV cache buffer is not initialized",
    "RuntimeError: grad tensor was not initialized before backward",
    # the words without the statement
    "ValueError: initialized weights differ from the checkpoint",
])
def test_program_objects_not_initialised_are_crashes(line):
    assert classify(_traceback(_USER_FRAME, line)).kind == "crashed"


# ---- a setting holder that is None (MOSS#80, oos-batch13/accelerate/moss_finetune_no_deepspeed_plugin_...)
_MOSS = ('  File "finetune_moss.py", line 175, in train\n'
         "    accelerator.state.deepspeed_plugin.deepspeed_config['train_micro_batch_size_per_gpu'] = "
         "args.train_bsz_per_gpu\n")


@pytest.mark.parametrize("text", [
    _traceback(_MOSS, "AttributeError: 'NoneType' object has no attribute 'deepspeed_config'"),
    _traceback(_USER_FRAME, "AttributeError: 'NoneType' object has no attribute 'fsdp_plugin'"),  # made up
])
def test_a_setting_holder_that_is_none_is_config(text):
    failure = classify(text)
    assert failure.kind == "config_error", failure.reason


@pytest.mark.parametrize("line", [
    "AttributeError: 'NoneType' object has no attribute 'shape'",
    "AttributeError: 'NoneType' object has no attribute 'parameters'",  # batch 4's crashed log
    "AttributeError: 'Trainer' object has no attribute 'deepspeed_config'",  # not None: an API change, a code bug
])
def test_other_attributes_of_none_are_crashes(line):
    assert classify(_traceback(_USER_FRAME, line)).kind == "crashed"


# ---- the framework's input contract (DeepSpeed#3003, oos-batch13/deepspeed/pipeline_engine_load_micro_batch_...)
_DS_FRAME = ('  File "/env/lib/python3.8/site-packages/deepspeed/runtime/pipe/engine.py", line 798, in '
             "_exec_load_micro_batch\n")


@pytest.mark.parametrize("statement", [
    "    assert isinstance(batch[0], tuple)",
    "    assert len(inputs) == 2",  # made up, the arity of the input
])
def test_a_framework_assert_on_the_input_structure_is_config(statement):
    failure = classify(_traceback(_DS_FRAME + statement + "\n", "AssertionError"))
    assert failure.kind == "config_error", failure.reason
    assert "API" in failure.reason


@pytest.mark.parametrize("frames", [
    # the same check in the user's own script: the user's code
    '  File "train.py", line 40, in step\n    assert isinstance(batch[0], tuple)\n',
    # a framework assertion about something else than the input
    _DS_FRAME + "    assert self.is_last_stage()\n",
])
def test_other_bare_asserts_are_crashes(frames):
    assert classify(_traceback(frames, "AssertionError")).kind == "crashed"


def test_contract_error_reads_the_quoted_statement():
    assert config.contract_error("AssertionError", _DS_FRAME + "    assert isinstance(batch[0], tuple)\n")
    assert config.contract_error("AssertionError: batch", _DS_FRAME + "    assert isinstance(batch, tuple)\n") is None


# ---- a refusal with its condition (llm-foundry#215, oos-batch13/other/llm_foundry_mpt125m_torch2_fsdp_...)
@pytest.mark.parametrize("text", [
    "Traceback (most recent call last):\n...\nRuntimeError: Cannot writeback when the parameter shape changes\n"
    "Expects torch.Size([1769472]) but got torch.Size([2304, 768])\n",
    _traceback(_USER_FRAME, "ValueError: cannot enable offload while the optimizer is fused"),  # made up
])
def test_a_refusal_with_its_condition_is_config(text):
    failure = classify(text)
    assert failure.kind == "config_error", failure.reason


@pytest.mark.parametrize("line", [
    # no condition (other families decide it: the forked-CUDA refusal is patterns.CONFIG's since judge53)
    "RuntimeError: Cannot insert a Tensor that requires grad as a constant",
    "RuntimeError: cannot allocate when the pool is empty",  # a condition, no configuration quantity
])
def test_refusal_look_alikes_are_not_config(line):
    assert classify(_traceback(_USER_FRAME, line)).kind != "config_error"


# ---- a success print after the fatal exception (textgen#7016, oos-batch13/hf_trainer/textgen_multi_gpu_lora_...)
_TEXTGEN = ("    loss = loss / num_items_in_batch\n"
            "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:1 and "
            "cuda:0!\n"
            "23:30:37-256709 INFO     Training complete, saving\n"
            "23:30:39-950875 INFO     Training complete!\n")


@pytest.mark.parametrize("text", [
    _TEXTGEN,
    # made up: a full traceback, then a trainer's summary print
    "Traceback (most recent call last):\n" + _USER_FRAME
    + "KeyError: 'input_ids'\nTraining finished.\n",
])
def test_a_success_print_after_the_fatal_exception_is_a_crash(text):
    failure = classify(text)
    assert failure.kind == "crashed", failure.reason


@pytest.mark.parametrize("text", [
    # steps continue after the exception: the run got past it
    "Traceback (most recent call last):\n" + _USER_FRAME + "ValueError: bad sample 17, skipped\n"
    "{'loss': 1.73, 'grad_norm': 0.9, 'learning_rate': 1e-05, 'epoch': 0.5}\nTraining complete!\n",
    # an exception Python reports as ignored
    "Exception ignored in: <function _del at 0x7f>\nTraceback (most recent call last):\n" + _USER_FRAME
    + "TypeError: 'NoneType' object is not callable\nTraining complete!\n",
])
def test_a_finished_run_stays_ok(text):
    failure = classify(text)
    assert failure.kind == "ok", failure.reason


# ---- AMD RAS hardware errors (ROCm#4021, oos-batch13/other/axolotl_mi300x_dmesg_uncorrectable_hardware_error_1.log)
@pytest.mark.parametrize("line", [
    "[ 8390.785329] amdgpu 0000:68:00.0: {1}uncorrectable hardware error(ERREVENT_ATHUB_INTERRUPT) detected!",
    "[ 8390.823777] amdgpu 0000:9e:00.0: {1}[Hardware Error]: Accelerator Check Architecture events logged",
    # made up, in amdgpu_ras.c's other wordings
    "amdgpu 0000:c1:00.0: amdgpu: 2 uncorrectable hardware errors detected in umc block",
    "amdgpu 0000:8a:00.0: amdgpu: RAS poison consumption detected in gfx block, GPU reset",
])
def test_amd_ras_errors_are_node_failures(line):
    failure = classify(f"training...\n{line}\n")
    assert failure.kind == "node_failure", failure.reason


@pytest.mark.parametrize("line", [
    "amdgpu 0000:c1:00.0: amdgpu: 3 correctable hardware errors detected in umc block",
    "amdgpu 0000:c1:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:8 pasid:32770)",
    "amdgpu: RAS: optional ras ta ucode is not available",
])
def test_amd_look_alikes_are_not_node_failures(line):
    assert classify(f"{line}\n", exit_code=0).kind != "node_failure"


# ---- a stated average step time with spaces for its separator (FLAVA, facebookresearch/multimodal PR#301,
# oos-batch13/pytorch/flava_native_900m_max_steps_average_iteration_time_1.log)
@pytest.mark.parametrize("line, step_s", [
    ("[03:46:06] Average iteration time 1.2317395744039052          utils.py:81", 1.2317395744039052),
    ("mean step time   0.84 s", 0.84),  # made up
])
def test_an_average_iteration_time_without_a_colon_is_a_step_time(line, step_s):
    source, found = summary_step_times(f"epoch: 0 step 300 loss: 8.844\n{line}\n")
    assert source == "summary step time"
    assert found[-1][1] == pytest.approx(step_s)


@pytest.mark.parametrize("line", [
    "iteration time limit reached",  # no number
    "data time 0.12 | step 4",  # a part of the step, not the step
])
def test_step_time_look_alikes(line):
    assert summary_step_times(f"{line}\n") == ("", [])


# ---- healthy formats: VITS's epoch lines (jaywalnut310/vits#197, oos-batch13/other/vits_rtx4090_epoch_records_...)
# and NeMo-RL's per-step results block (nemo-platform PR#943, oos-batch13/nemo/nemo_platform_nemorl_dpo_smoke_...)
_VITS = "".join(f"2023-12-07 18:{39 + 2 * i}:10,448\tModel\tINFO\t====> Epoch: {42 + i}\n" for i in range(4))
_NEMO_RL = ("Step 2/2\n\n📊 Training Results:\n  • loss: 0.6931\n  • accuracy: 0.0000\n"
            "  • Training FLOPS: 1.11 TFLOPS\n")


@pytest.mark.parametrize("text", [
    _VITS, _NEMO_RL,
    "==> Epoch 1\n==> Epoch 2\n==> Epoch 3\n",  # made up
])
def test_healthy_epoch_lines_and_results_blocks_are_ok(text):
    failure = classify(text)
    assert failure.kind == "ok", failure.reason


@pytest.mark.parametrize("text", [
    "====> Epoch: 1\n====> Epoch: 2\n",  # two bare counters: too few
    "Epoch: 3\nEpoch: 3\nEpoch: 3\n",  # a counter that does not rise (ranks repeating one line)
    "Epoch 1 loading shards\nEpoch 2 loading shards\nEpoch 3 loading shards\n",  # words after the counter
    "Training Results: see the wiki\n",  # the header's words inside a sentence
])
def test_epoch_and_results_look_alikes_are_not_ok(text):
    assert classify(text).kind != "ok"


def test_a_crash_after_bare_epoch_lines_is_a_crash():
    text = _VITS + "Traceback (most recent call last):\n" + _USER_FRAME + "RuntimeError: CUDA error: an illegal memory " \
                                                                         "access was encountered\n"
    assert classify(text).kind == "crashed"
