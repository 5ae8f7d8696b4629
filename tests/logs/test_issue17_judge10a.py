"""Issue 17, batches 9-10 (helper judge10a), the error side: a lone error line judged as the exception it names, a
CUDA driver/runtime OOM code, a validation message quoted cut short, and the DeepSpeed launcher's kills of its ranks.
Each rule: a real excerpt (its source), a made-up look-alike, and lines that must not match."""

from __future__ import annotations

import pytest

from analysis.logs.classify import classify
from analysis.logs.families import error_end, raised

# ---- a lone error line, judged as the exception it names (families.error_end.as_exception)

# alibaba/Pai-Megatron-Patch#124 (tests/fixtures/oos-batch10/megatron_lm/pai_qwen14b_converted_ckpt_model_optim_rng_
# missing_1.log)
_PAI = ("[Errno 2] No such file or directory: '/mtn/workplace/qwen-ckpts/qwen-14b-hf-to-megatron-tp2-pp1/release/"
        "mp_rank_00/model_optim_rng.pt'")


@pytest.mark.parametrize(("line", "expected"), [
    (_PAI, "FileNotFoundError: " + _PAI),
    ("[Errno 13] Permission denied: '/ckpt/latest'", "PermissionError: [Errno 13] Permission denied: '/ckpt/latest'"),
    ("[Errno 28] No space left on device", "OSError: [Errno 28] No space left on device"),
    ("assertion error：Not sure how", "AssertionError: Not sure how"),  # full-width colon
    ("Runtime error: the tensor was freed", "RuntimeError: the tensor was freed"),
    ("CUDA runtime error: device-side assert", "CudaRuntimeError: device-side assert"),
    ("error: data loader worker died", "Error: data loader worker died"),
])
def test_a_lone_error_line_names_its_exception(line, expected):
    assert error_end.as_exception(line) == expected


@pytest.mark.parametrize("line", [
    "no error: all good", "error: 0.12", "Error: 0 of 12 checks failed", "0 error(s), 2 warning(s)",
    "training finished with error: none", "the error is: small", "ValueError: typed already",
    "warning error: deprecated flag", "[Errno] missing number",
])
def test_lines_that_are_not_a_lone_error_line(line):
    assert error_end.as_exception(line) is None


def test_a_lone_missing_file_is_judged_as_its_file_not_found_error():
    # the same rule as "FileNotFoundError: [Errno 2] ..." typed (patterns.CONFIG): a path the run names is missing
    assert classify(_PAI + "\n").kind == "config_error"
    assert classify("[Errno 2] No such file or directory: '/data/train.jsonl'\n").kind == "config_error"


def test_a_lone_error_line_that_names_no_known_cause_is_a_crash():
    failure = classify("loading\nassertion error：the sampler ran dry\n")
    assert failure.kind == "crashed" and "AssertionError" in failure.reason
    assert classify("loading\nthe docs mention a runtime error: sometimes\n").kind == "unknown"


# ---- a CUDA driver/runtime status whose number is the out-of-memory code (families.memory)

# THUDM/slime#274 (tests/fixtures/oos-batch10/megatron_lm/slime_qwen30b_a3b_torch_memory_saver_cu_mem_create_oom_1.log)
_SLIME = ("[torch_memory_saver.cpp] CUresult error: 2 (out of memory) file=csrc/utils.h func=cu_mem_create "
          "line=187")


@pytest.mark.parametrize("text", [
    _SLIME,
    "CUresult error: 2 func=cuMemMap",  # made up: the code without its name
    "allocator: CUDA_ERROR_OUT_OF_MEMORY while mapping 2 GiB",
    "cudaErrorMemoryAllocation: out of memory",
])
def test_a_cuda_driver_out_of_memory_code_is_an_oom(text):
    assert classify(f"step 1\n{text}\n").kind == "oom"


@pytest.mark.parametrize("text", [
    "[torch_memory_saver.cpp] CUresult error: 1 (invalid argument) func=cu_mem_create",
    "CUresult error: 700 (an illegal memory access was encountered)",
])
def test_other_cuda_driver_codes_are_not_an_oom(text):
    assert classify(f"step 1\n{text}\n").kind != "oom"


# ---- a framework's validation message quoted cut short (families.raised.cut_at)

# bigscience-workshop/Megatron-DeepSpeed#386 (tests/fixtures/oos-batch10/megatron_deepspeed/bigscience_start_fast_
# deepspeed_config_given_twice_assertion_1.log); DeepSpeed deepspeed/__init__.py initialize()
_BIGSCIENCE = ("assertion error：Not sure how to proceed, we were given deepspeed configs in the deepspeed arguments "
               "and deepspeed.")


@pytest.mark.parametrize("text", [
    _BIGSCIENCE,
    "AssertionError: Not sure how to proceed, we were given deepspeed configs in the",  # made up: cut earlier
    "AssertionError: Not sure how to proceed, we were given deepspeed configs in the deepspeed arguments and "
    "deepspeed.initialize() function call",  # whole
])
def test_a_validation_message_cut_at_the_line_end_is_a_config_error(text):
    failure = classify(f"{text}\n")
    assert failure.kind == "config_error" and "DeepSpeed check" in failure.reason


@pytest.mark.parametrize("text", [
    # the lead words, then words the message does not have
    "AssertionError: Not sure how to proceed, we were given deepspeed configs in the deepspeed arguments and the cli",
    # the whole lead, but not on an error line
    "INFO Not sure how to proceed, we were given deepspeed configs in the deepspeed arguments",
    # fewer than CUT_MIN_WORDS words of the message
    "AssertionError: Not sure how to proceed, we were",
])
def test_a_cut_message_needs_its_lead_an_error_line_and_the_messages_own_words(text):
    assert "DeepSpeed check" not in classify(f"{text}\n").reason


def test_cut_at_reads_the_words_after_the_lead():
    tpl = next(t for t in raised.templates() if t.text.startswith("Not sure how to proceed, we were given deepspeed"))
    assert raised.cut_at("x: " + tpl.text, tpl) and raised.cut_at(_BIGSCIENCE, tpl)
    assert not raised.cut_at(_BIGSCIENCE + " and more", tpl)


# ---- the DeepSpeed launcher's kills of its ranks (families.orchestrator.LAUNCHER_KILLS)

# deepspeedai/DeepSpeed#3938 (tests/fixtures/oos-batch10/deepspeed/load_checkpoint_optim_states_host_oom_sigkill_1.log)
_DS3938 = "\n".join([
    "[2023-07-25 00:37:49,180] [INFO] [torch_checkpoint_engine.py:27:load] [Torch] Loading checkpoint from /opt/ml/"
    "model/checkpoint-10/global_step10/bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt...",
    "[2023-07-25 00:38:05,103] [INFO] [launch.py:315:sigkill_handler] Killing subprocess 230",
    "[2023-07-25 00:38:08,243] [INFO] [launch.py:315:sigkill_handler] Killing subprocess 231"])
# liucongg/ChatGLM-Finetuning#102 (tests/fixtures/oos-batch9/deepspeed/chatglm_finetuning_killed_loading_checkpoint_
# shards_1.log)
_CHATGLM = ("Loading checkpoint shards:   0%|          | 0/7 [00:00<?, ?it/s][2023-09-10 11:45:59,207] [INFO] "
            "[launch.py:428:sigkill_handler] Killing subprocess 6293\n"
            "[2023-09-10 11:45:59,501] [INFO] [launch.py:428:sigkill_handler] Killing subprocess 6294")
_STEPS = "\n".join(f"iteration {i}/100 | lm loss: 2.{i} | elapsed time per iteration (ms): 100.0" for i in (10, 20))


@pytest.mark.parametrize("text", [_DS3938, _CHATGLM, _STEPS + "\nKilling subprocess 4242"])
def test_the_launchers_kills_without_a_return_code_are_a_crash_not_an_oom(text):
    failure = classify(text + "\n")
    assert failure.kind == "crashed" and "launcher killed its ranks" in failure.reason


def test_the_launchers_return_code_or_signal_line_decides_instead():
    code = classify(_DS3938 + "\n[2023-07-25 00:38:09,243] [ERROR] [launch.py:321:sigkill_handler] ['python', "
                              "'train.py'] exits with return code = -9\n")
    assert code.kind == "oom" and "exit code -9" in code.reason  # judge56: the rank's own SIGKILL, the OOM killer's
    stopped = classify(_DS3938 + "\n[2023-07-25 00:38:09,243] [INFO] [launch.py:330:sigkill_handler] Main process "
                                 "received SIGTERM, exiting\n")
    assert stopped.kind == "cancelled"


@pytest.mark.parametrize("text", [
    "the launcher prints Killing subprocess 12 when a rank fails",  # prose
    "Killing subprocess 12 of 16 took 3 s",  # not the launcher's whole line
])
def test_words_about_kills_are_not_the_launchers_kills(text):
    assert classify(f"{text}\n").kind == "unknown"


# ---- the loss scale collapsed, in any format (families.divergence.loss_scale_collapsed)

# huggingface/transformers#14834 (tests/fixtures/oos-batch9/hf_trainer/hf_gpt2_fp16_deepspeed_loss_scale_1_overflow_
# every_step_1.log)
_HF14834 = "\n".join([
    "[2021-12-19 16:54:45,098] [INFO] [unfused_optimizer.py:275:_update_scale] Grad overflow on iteration: 445299",
    "[2021-12-19 16:54:45,098] [INFO] [unfused_optimizer.py:277:_update_scale] Reducing dynamic loss scale from 1 to 1",
    "[2021-12-19 16:54:45,098] [INFO] [unfused_optimizer.py:202:step] [deepspeed] fp16 dynamic loss scale overflow! "
    "Skipping step. Attempted loss scale: 1, reducing to 1"])
# openai/guided-diffusion#50 (tests/fixtures/oos-batch9/other/guided_diffusion_imagenet128_fp16_found_nan_loss_scale_
# 1.log)
_GUIDED = "\n".join(["| loss          | nan       |", "-----------------------------"]
                    + [f"Found NaN, decreased lg_loss_scale to -{16199 + i}.354" for i in range(5)])


@pytest.mark.parametrize("text", [
    _HF14834,
    _GUIDED,
    # made up: apex's record after record, halving down to 4
    "\n".join(f"DLL 2020-06-03 02:4{i}:05.331474 - PARAMETER loss_scale : {2.0 ** (5 - i)}" for i in range(4)),
    # made up: another scaler's wording, clamped at 1 on an overflow
    "step 900 loss 2.1\ngradient overflow, lowering loss scale from 1.0 to 1.0",
])
def test_a_collapsed_loss_scale_is_a_divergence(text):
    assert classify(text + "\n").kind == "diverged"


@pytest.mark.parametrize("text", [
    # Megatron bf16 records: loss scale 1.0 on every record, no overflow word, "nan iterations" a counter
    "\n".join(f" iteration {i}/100 | lm loss: 2.{i} | loss scale: 1.0 | number of skipped iterations: 0 | "
              f"number of nan iterations: 0 | elapsed time per iteration (ms): 100.0" for i in range(10, 14)),
    # a start-up search that stops high (DeepSpeed 2**16 down to 2**12)
    "\n".join(f"[deepspeed] OVERFLOW! Rank 0 Skipping step. Attempted loss scale: {2 ** (16 - i)}, reducing to "
              f"{2 ** (15 - i)}" for i in range(4)) + "\nstep=100, skipped=4, lr=[1e-4]",
    # the scale fell to 1 and a clean window raised it again
    "Reducing dynamic loss scale from 2 to 1\nOVERFLOW! Skipping step. Attempted loss scale: 2, reducing to 1\n"
    "Increasing dynamic loss scale from 1 to 2",
    # a config dump: loss_scale 0 means dynamic
    '"fp16": {"enabled": true, "loss_scale": 0, "initial_scale_power": 16}',
    # fairseq: a scale under 1 that still falls is above fairseq's floor (1e-4)
    "| WARNING: overflow detected, setting loss scale to: 0.25",
])
def test_a_loss_scale_that_did_not_collapse_is_not_a_divergence(text):
    assert classify(text + "\n").kind != "diverged"


# ---- a compiled module that failed to load, its path first (families.config.ENVIRONMENT)

# deepspeedai/DeepSpeed#4532 (tests/fixtures/oos-batch10/deepspeed/rtx4090_cpu_adam_jit_import_error_1.log), cut
_DS4532 = ('  File "<frozen importlib._bootstrap>", line 219, in _call_with_frames_removed\n'
           "ImportError: /home/witai4090/.cache/torc")


@pytest.mark.parametrize("text", [
    _DS4532,
    "ImportError: /opt/conda/lib/python3.10/site-packages/fused_adam.so: undefined symbol: _ZN3c10",
    "ImportError: ~/.cache/torch_extensions/py311_cu118/fused_adam/fused_adam.so: cannot open shared object file",
    "ImportError: DLL load failed while importing _C: The specified module could not be found.",
])
def test_an_import_error_that_starts_with_a_library_path_is_the_environment(text):
    failure = classify(text + "\n")
    assert failure.kind == "config_error" and "environment" in failure.reason


@pytest.mark.parametrize("text", [
    "ImportError: attempted relative import with no known parent package",
    "ImportError: cannot import name 'fused_adam' from 'deepspeed.ops' (/opt/deepspeed/ops/__init__.py)",  # path late
])
def test_import_errors_without_a_library_path_are_not_a_load_failure(text):
    assert "package set does not provide" not in classify(text + "\n").reason


# ---- fp16 AMP with fp16 trainable weights (families.config.PRECISION)

# Baichuan-13B LoRA (tests/fixtures/oos-batch10/hf_trainer/baichuan13b_lora_fp16_unscale_fp16_gradients_peft_version_
# 1.log)
_BAICHUAN = ('    raise ValueError("Attempting to unscale FP16 gradients.")\n'
             "ValueError: Attempting to unscale FP16 gradients.\n"
             "  0%|          | 0/6931 [00:01<?, ?it/s]")


@pytest.mark.parametrize("text", [_BAICHUAN, "[rank1]: ValueError: Attempting to unscale FP16 gradients."])
def test_unscaling_fp16_gradients_is_a_precision_setting(text):
    failure = classify(text + "\n")
    assert failure.kind == "config_error" and "fp16 trainable weights" in failure.reason


def test_other_grad_scaler_errors_are_not_the_precision_setting():
    failure = classify("ValueError: unscale_() has already been called on this optimizer since the last update().\n")
    assert "fp16 trainable weights" not in failure.reason


# ---- a validation message that ends a log alone, quoted without its type (families.raised.stated_in)

# Snowflake-AI-Research/Arctic-Platform#78 (tests/fixtures/oos-batch8/deepspeed/arctic_worker_bf16_default_with_fp16_
# assert_1.log); DeepSpeed runtime/config.py
@pytest.mark.parametrize("text", [
    "bfloat16 and fp16 modes cannot be simultaneously enabled",
    "loading the worker\n[rank0]: bfloat16 and fp16 modes cannot be simultaneously enabled",  # made up: a prefix
])
def test_a_validation_message_that_ends_the_log_is_a_config_error(text):
    failure = classify(text + "\n")
    assert failure.kind == "config_error" and "DeepSpeed check" in failure.reason


@pytest.mark.parametrize("text", [
    "WARNING bfloat16 and fp16 modes cannot be simultaneously enabled",  # a warning
    "bfloat16 and fp16 modes cannot be simultaneously enabled\niteration 1/10 | lm loss: 2.0 | elapsed time per "
    "iteration (ms): 100.0",  # the run went on
    "bfloat16 and fp16 modes are both off",  # other words
])
def test_a_validation_message_that_does_not_end_the_run_is_not_a_config_error(text):
    assert classify(text + "\n").kind != "config_error"


# ---- an exception whose message stands on the next line (families.error_end.EXCEPTION_LINE)

# areal-project/AReaL#1468 (tests/fixtures/oos-batch8/megatron_lm/areal_mcore017_dist_opt_flattened_range_not_
# supported_1.log)
@pytest.mark.parametrize("text", [
    "megatron.core.dist_checkpointing.core.CheckpointingException:\nShardedTensor.flattened_range is not supported.",
    "RuntimeError:\n  the worker died",  # made up
])
def test_an_exception_line_with_its_message_on_the_next_line_is_a_crash(text):
    assert classify(text + "\n").kind == "crashed"


@pytest.mark.parametrize("line", ["Exceptions:", "Error:", "see ValueError: below", "ValueErrors:"])
def test_lines_that_are_not_an_exception_with_a_message_below(line):
    assert error_end.EXCEPTION_LINE.match(line) is None


# ---- an error line whose own words say an allocation failed (families.memory.OOM_AS_MESSAGE,
# SIZED_ALLOCATION_FAILED); tests/fixtures/oos-batch6/deepspeed/linly_tencentpretrain_zero3_cpu_alloc_fail_1.log is
# the kind of log ('DefaultCPUAllocator: can't allocate memory: you tried to allocate ...'), these are made up
@pytest.mark.parametrize("text", [
    "RuntimeError: out of memory",
    "[rank0]: RuntimeError: out of memory.",
    "error: out of memory",
    "RuntimeError: failed to allocate 2147483648 bytes",
    "ERROR: unable to allocate 3.2 GiB of pinned memory",
    "allocator: couldn't allocate memory block of 2.5 GiB",
])
def test_an_error_line_that_says_its_allocation_failed_is_an_oom(text):
    assert classify(f"step 1\n{text}\n").kind == "oom"


@pytest.mark.parametrize("text", [
    "ValueError: out of memory budget: requested 12 layers",  # a word of a longer message
    "hint: if you cannot allocate 2 GB, reduce the batch",  # advice
    "W: could not allocate 512 MB for the cache, falling back to pageable memory",  # a warning it falls back from
    "the run went out of memory. Try a smaller batch",  # prose, not an error line
])
def test_words_about_memory_that_are_not_a_failed_allocation(text):
    assert classify(f"step 1\n{text}\n").kind != "oom"


# ---- a line that states a failure in its first words (families.error_end.FAILED_LINE); made up, in the shapes of
# the batches' lone error lines
@pytest.mark.parametrize("line", [
    "Failed to load checkpoint from /ckpt/iter_0001000",
    "training failed: the sampler ran dry",
    "Assertion failed: x > 0, file sampler.c, line 42",  # the MSVC/BSD assert(3) format
    "fatal: the data loader worker died",
])
def test_a_failure_statement_ends_a_log_alone_as_a_crash(line):
    failure = classify(f"loading\n{line}\n")
    assert failure.kind == "crashed" and "failure statement" in failure.reason


@pytest.mark.parametrize("text", [
    "loading\nFailed to connect to wandb, retrying in 5 s",  # a retry notice
    "loading\nfailed: 0",  # a count
    "loading\nno failed: tests",
    "loading\ntests: 3 failed: see above",  # not in the line's first words
])
def test_lines_that_are_not_a_failure_statement_ending_the_run(text):
    assert "failure statement" not in classify(text + "\n").reason


def test_a_failure_statement_after_a_runs_progress_does_not_undo_it():
    # like a logger's ERROR record: after the run's step records it is weaker evidence than the progress
    text = "iteration 10/100 | lm loss: 2.0 | elapsed time per iteration (ms): 100.0\nFailed to upload the metrics\n"
    assert classify(text, progress_offset=0).kind == "ok"
    assert classify("loading\nFailed to upload the metrics\n").kind == "crashed"
