"""Issue 17, batch 12 (helper judge12): configuration files that do not resolve, project helpers that fail to build,
version and launch refusals, DeepSpeed config values left as strings. Each rule: a real excerpt (its source), a
made-up look-alike, and lines that must not match."""

from __future__ import annotations

import pytest

from analysis.logs.classify import classify
from analysis.logs.families import config, first_match
from analysis.logs.parse_generic import read_records, summary_step_times
from analysis.logs.steady_state import steady_state

# ---- the configuration file the launcher was given does not exist

# Qwen-7B-Chat finetune (tests/fixtures/oos-batch12/deepspeed/qwen7b_chat_finetune_ds_config_zero3_path_not_found_1.log)
_DS_PATH = ("ValueError: Expected a string path to an existing deepspeed config, or a dictionary, or a base64 encoded "
            "string. Received: finetune/ds_config_zero3.json\n")
# FastChat (oos-batch12/deepspeed/fastchat_train_lora_ds_config_path_typo_base64_unicode_error_1.log): the path is
# then decoded as base64 and the log ends in that decode's error
_DS_BASE64 = ('f"Expected a string path to an existing deepspeed config, or a dictionary, or a base64 encoded string. '
              'Received: {config_file_or_dict}"\n'
              'config_decoded = base64.urlsafe_b64decode(config_file_or_dict).decode("utf-8")\n'
              "UnicodeDecodeError: 'utf-8' codec can't decode byte 0xfe in position 0: invalid start byte\n")


@pytest.mark.parametrize("text", [
    _DS_PATH, _DS_BASE64,
    # made up: DeepSpeed's own check and a FileNotFoundError naming a config file
    "AssertionError: DeepSpeed configuration file: ./ds_zero2.json is not an existing file\n",
    "Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n"
    "FileNotFoundError: [Errno 2] No such file or directory: 'configs/train_config.yaml'\n",
])
def test_a_config_file_that_does_not_resolve_is_config(text):
    failure = classify(text)
    assert failure.kind == "config_error", failure.reason


@pytest.mark.parametrize("line", [
    "FileNotFoundError: [Errno 2] No such file or directory: '/data/wiki/shard_00017.bin'",
    "FileNotFoundError: [Errno 2] No such file or directory: '/ckpt/iter_0001000/model.pt'",
    "ValueError: Expected a string, got 3",
])
def test_other_missing_files_are_not_this_family(line):
    text = f"Traceback (most recent call last):\n  File \"x.py\", line 1\n{line}\n"
    assert first_match(text, config.CONFIG_FILE) is None


# ---- a project's own C++ helpers that fail to build

# Megatron-LM (oos-batch12/megatron_lm/core_datasets_helpers_cpp_compile_failed_1.log)
_HELPERS = ("make: Entering directory '/workspace/megatron-lm/megatron/core/datasets'\n"
            "make: Leaving directory '/workspace/megatron-lm/megatron/core/datasets'\n"
            "ERROR:megatron.core.datasets.utils:Failed to compile the C++ dataset helper functions\n")
# NeMo Automodel (oos-batch12/nemo/automodel_megatron_pretrain_gpt2_helpers_makefile_missing_1.log), shortened
_NO_MAKEFILE = ("make: Entering directory '/databricks/python3/lib/python3.11/site-packages/nemo_automodel/components/"
                "datasets/llm/megatron'\nmake: *** No targets specified and no makefile found.  Stop.\n"
                "make: Leaving directory '/databricks/python3/lib/python3.11/site-packages/nemo_automodel/components/"
                "datasets/llm/megatron'\n")


@pytest.mark.parametrize("text", [
    _HELPERS, _NO_MAKEFILE,
    # made up in GNU make's shapes
    "make[1]: *** [Makefile:9: helpers.cpython-310-x86_64-linux-gnu.so] Error 1\n",
    "rank0: make: *** No rule to make target 'helpers.cpp', needed by 'helpers.so'.  Stop.\n",
])
def test_helpers_that_fail_to_build_are_config(text):
    assert classify(text).kind == "config_error"


@pytest.mark.parametrize("line", [
    "make: Entering directory '/workspace/megatron-lm/megatron/core/datasets'",
    "make: Nothing to be done for 'default'.",
    "echo 'make: *** is how make reports errors'",
])
def test_make_chatter_is_not_a_build_failure(line):
    assert first_match(f"{line}\n", config.HELPERS_BUILD) is None


# ---- version and launch refusals

@pytest.mark.parametrize("text", [
    # Pai-Megatron-Patch (oos-batch12/megatron_lm/pai_megatron_qwen2_v100_te_flash_attn_max_version_assert_1.log)
    "AssertionError: FlashAttention maximum version 2.5.8 is supported.\n\nDuring handling of the above exception, "
    "another exception occurred:\n\nTraceback (most recent call last):\n"
    '  File "./Megatron-LM/megatron/core/transformer/spec_utils.py", line 99, in build_module\n',
    # LLaMA-Factory (oos-batch12/hf_trainer/llamafactory_train_py_without_torchrun_multi_gpu_valueerror_1.log)
    "ValueError: Please launch distributed training with `llamafactory-cli` or `torchrun`.\n",
    # X-R1 (oos-batch12/deepspeed/x_r1_v100_flash_attention_ampere_only_accelerate_ds_launcher_1.log): the deciding
    # line, then the launcher's traceback cut in its frames
    "[rank0]: RuntimeError: FlashAttention only supports Ampere GPUs or newer.\nTraceback (most recent call last):\n"
    '  File "/envs/xr1/lib/python3.11/site-packages/torch/distributed/run.py", line 910, in run\n'
    "    elastic_launch(\n",
    # Dolly (oos-batch12/deepspeed/dolly_trainer_deepspeed_083_cuda_91_vs_118_mismatch_1.log), shortened
    "Exception: >- DeepSpeed Op Builder: Installed CUDA version 9.1 does not match the version torch was compiled "
    "with 11.8, unable to compile cuda/cpp extensions without a matching cuda version.\n"
    "Traceback (most recent call last):\n  File \"/usr/lib/python3.8/runpy.py\", line 194, in _run_module_as_main\n",
    # made up in the same shapes
    "ImportError: this recipe requires transformers>=4.45.0, but 4.38.2 is installed\n",
    "AssertionError: FlashAttention minimum version 2.1.1 is required.\n",
    "RuntimeError: Please relaunch this script with torchrun --nproc_per_node=8\n",
    "ValueError: No recipe 'llama3_8b_pretrain_16gpu' found\n",
])
def test_version_and_launch_refusals_are_config(text):
    assert classify(text).kind == "config_error"


@pytest.mark.parametrize("line", [
    "INFO: this example requires torch to be built with CUDA for the fast path",
    "Launching training on 8 GPUs with torchrun",
    "WARNING: flash-attn 2.6.3 found; the maximum version tested is 2.5.8",
    "the new launch script requires less memory",
])
def test_refusal_look_alikes(line):
    assert first_match(f"{line}\n", config.VERSION_REFUSAL) is None


# ---- a DeepSpeed config value left as a string

# ner_crf (oos-batch12/deepspeed/ner_crf_custom_loop_auto_gradient_clipping_str_compare_1.log)
_AUTO = ('  File "/data/envs/pytorch/lib/python3.8/site-packages/deepspeed/runtime/engine.py", line 1257, in '
         "_take_model_step\n    if self.gradient_clipping() > 0.0:\n"
         "TypeError: '>' not supported between instances of 'str' and 'float'\n")


def test_a_string_config_value_compared_in_deepspeed_runtime_is_config():
    assert classify(_AUTO).kind == "config_error"
    assert classify(config.STR_COMPARE_EXAMPLE).kind == "config_error"


@pytest.mark.parametrize("text", [
    # the same TypeError in the user's own code is a bug of that code
    '  File "train.py", line 40, in main\n    if best > score:\n'
    "TypeError: '>' not supported between instances of 'str' and 'float'\n",
    # DeepSpeed's runtime comparing two numbers of the wrong kind is not a string config value
    '  File "/venv/site-packages/deepspeed/runtime/engine.py", line 10, in f\n    if a > b:\n'
    "TypeError: '>' not supported between instances of 'NoneType' and 'int'\n",
])
def test_other_comparison_errors_are_not_config(text):
    assert config.config_value_typed_as_string(text, 0) is None


# ---- a lone NCCL IB async event: comm_error when it names a fatal verbs event in NCCL's WARN form

@pytest.mark.parametrize("line", [
    # NCCL#905 (oos-batch12/lightning/multinode_hang_nccl_ib_async_event_port_error_1.log), the whole log
    "NCCL WARN NET/IB : Got async event : port error",
    # made up in net_ib.cc's full prefix
    "gpu-12:88:120 [3] NCCL WARN NET/IB : mlx5_0:1 Got async event : local catastrophic error",
])
def test_a_fatal_ib_async_event_is_comm_error(line):
    assert classify(f"{line}\n").kind == "comm_error"


@pytest.mark.parametrize("line", [
    "NCCL WARN NET/IB : Got async event : port active",
    "NCCL WARN NET/IB : Got async event : GID table change",
    "NCCL INFO NET/IB : Got async event : port error",  # not NCCL's WARN form
])
def test_benign_ib_events_are_not_comm_error(line):
    assert classify(f"{line}\n").kind != "comm_error"


# ---- an error line, then a traceback cut before its own exception line: the earlier line is the error's statement

_CUT_AFTER_ERROR = ("[rank0]: ValueError: micro batch size 3 must divide the global batch size 16\n"
                    "Traceback (most recent call last):\n"
                    '  File "/venv/lib/python3.10/site-packages/torch/distributed/run.py", line 910, in run\n'
                    "    elastic_launch(\n")


def test_an_error_line_above_a_cut_traceback_decides():
    failure = classify(_CUT_AFTER_ERROR)
    assert failure.kind == "config_error", failure.reason
    assert "micro batch size 3" in failure.reason


def test_the_crash_reason_is_the_error_line_above_a_cut_traceback():
    cut = _CUT_AFTER_ERROR.split("\n", 1)[1]
    failure = classify("[rank0]: RuntimeError: expected scalar type Half but found Float\n" + cut)
    assert failure.kind == "crashed" and "expected scalar type Half" in failure.reason, failure.reason
    assert failure.evidence[0][0] == 1


def test_a_cut_traceback_with_no_error_just_above_keeps_its_header():
    cut = _CUT_AFTER_ERROR.split("\n", 1)[1]
    assert classify(cut).reason == "crashed: Traceback (most recent call last):"
    # an error line further up than the lines just above the header is not this traceback's statement
    far = "RuntimeError: expected scalar type Half but found Float\n" + "loading shard\n" * 4 + cut
    assert "expected scalar type" not in classify(far).reason


# ---- TF Estimator's step records: "loss = X, step = N (Y sec)", Y the seconds since the previous record

# malaya-speech conformer (oos-batch12/other/malaya_speech_conformer_large_retrain_tf_estimator_steps_1.log), records
_TF_ESTIMATOR = ("INFO:tensorflow:loss = 1024.6841, step = 30 (55.249 sec)\n"
                 "INFO:tensorflow:global_step/sec: 0.0232102\n"
                 "INFO:tensorflow:loss = 866.8332, step = 31 (43.085 sec)\n"
                 "INFO:tensorflow:global_step/sec: 0.01788\n"
                 "INFO:tensorflow:loss = 943.23486, step = 32 (55.929 sec)\n"
                 "INFO:tensorflow:global_step/sec: 0.0183138\n"
                 "INFO:tensorflow:loss = 793.621, step = 33 (54.605 sec)\n")


def test_tf_estimator_records_give_the_interval_over_its_steps():
    stats = steady_state(read_records(_TF_ESTIMATOR).iterations)
    assert stats.median_step_time_s == pytest.approx(54.6, rel=0.05)
    # made up, one step apart in a longer run
    every_step = "".join(f"INFO:tensorflow:loss = {3.0 - k / 100:.2f}, step = {k} (0.5{k % 10} sec)\n"
                         for k in range(1, 40))
    assert steady_state(read_records(every_step).iterations).median_step_time_s == pytest.approx(0.545, rel=0.05)
    # records 100 steps apart without timestamps: the bare duration may be one step's or the interval's
    # (parse_generic._intervals), so no step time is read rather than a guess
    every_100 = "".join(f"INFO:tensorflow:loss = {3.0 - k / 10:.2f}, step = {k * 100} (25.{k} sec)\n"
                        for k in range(1, 9))
    assert read_records(every_100).iterations == ()


def test_a_running_average_in_parentheses_is_not_an_interval():
    # a time field, then its running average in parentheses: the average must not be read as a second time
    text = "".join(f"step {k} loss 2.{k} time 1.{k} s (1.50 s)\n" for k in range(1, 9))
    stats = steady_state(read_records(text).iterations)
    assert stats.median_step_time_s == pytest.approx(1.45, rel=0.05)


# ---- RETURNN's epoch summaries: "Trained N steps, H:MM:SS elapsed (P% computing time)"

# RETURNN DDP (oos-batch12/other/returnn_torch_ddp_epoch_summaries_some_slow_1.log), two of its per-rank lines
_RETURNN = ("Trained 904 steps, 0:10:02 elapsed (92.1% computing time)\n"
            "Trained 910 steps, 0:10:51 elapsed (84.6% computing time)\n")


def test_returnn_epoch_summaries_give_a_summary_time():
    source, times = summary_step_times(_RETURNN)
    assert source == "summary epoch time / steps"
    assert times[-1][1] == pytest.approx(651 / 910)
    # made up: an hour-long epoch
    assert summary_step_times("Trained 1979 steps, 1:46:48 elapsed (99.7% computing time)\n")[1][-1][1] == \
        pytest.approx(6408 / 1979)


@pytest.mark.parametrize("line", [
    "Trained 0 steps, 0:00:01 elapsed",
    "Trained the model for 3 epochs, 0:10:02 elapsed",
    "Trained 904 steps",
])
def test_other_trained_lines_give_no_summary_time(line):
    assert summary_step_times(f"{line}\n")[1] == []


def test_a_zero_run_time_is_no_summary_step_time():
    # found by tests/logs/test_judge_fuzz.py ("format tokens"): judging failed on a step time of 0 s
    assert summary_step_times("'train_runtime': 0\nglobal_step=1\n")[1] == []
    assert summary_step_times("'train_runtime': 50.0\nglobal_step=100\n")[1][-1][1] == pytest.approx(0.5)
