"""Issue 17 (helper judge40a): batch 35's misses as families. An atexit handler's ignored exception never decides a
failure; CPython's "can't find '__main__' module" is a launch naming no program; FSDP's auto-wrap class missing from
the model is a setting; make's `[target] Error n` under a Python traceback is that program's exit, not a helper
build; a training loop's own caught-OOM warning that ends the log is an OOM; a refusal to run on an uncommitted
working tree ("commit or stash") is the checkout's state, a config_error. Each: real lines with their source,
and look-alikes that must not match."""

from __future__ import annotations

from analysis.logs.classify import classify
from analysis.logs.families import first_match
from analysis.logs.families.config import CLEAN_TREE, FSDP_WRAP_CLASS, LAUNCH_TARGET, recipe_ran_program
from analysis.logs.families.memory import ends_on_caught_oom
from launcher.core.kinds import FailureKind

# ---- 1. an atexit callback's ignored exception after the run's last step
# github bigyanghimire/deepspeed-experiments final_experiments/a100/default_exp/default_run_16000.log (oos-batch35),
# shortened: DeepSpeed's Triton autotune cache (ops/transformer/inference/triton/matmul_ext.py, registered with atexit)
# fails its os.replace at exit; CPython Modules/atexitmodule.c reports it as ignored.
_STEPS = "".join(f"0: Iteration {i}: loss={7.7 - i / 100:.4f}\n0: Step_time: 1.79{i % 10}\n0: \n" for i in range(1, 12))
_ATEXIT = """0: Exception ignored in atexit callback: <function matmul_ext_update_autotune_table at 0x7fe5a1907e20>
0: Traceback (most recent call last):
0:   File "/home/u/DeepSpeed/deepspeed/ops/transformer/inference/triton/matmul_ext.py", line 105, in put
0:     os.replace(self.file_path + ".tmp", self.file_path)
0: FileNotFoundError: [Errno 2] No such file or directory: '/home/u/.triton/autotune/Fp16Matmul_2d_kernel.pickle.tmp' \
-> '/home/u/.triton/autotune/Fp16Matmul_2d_kernel.pickle'
"""


def test_atexit_ignored_exception_after_the_steps_is_no_failure() -> None:
    got = classify(_STEPS + _ATEXIT)
    assert got.kind not in (FailureKind.CONFIG_ERROR, FailureKind.CRASHED), got.reason


def test_ignored_exception_from_del_alone_still_speaks() -> None:
    # the deliberate older rule stays: "Exception ignored in: <function DeepSpeedCPUAdam.__del__ ...>" alone is how a
    # CPU Adam op that never built shows; only the atexit form is set aside unconditionally
    text = ("Exception ignored in: <function DeepSpeedCPUAdam.__del__ at 0x7f2b>\nTraceback (most recent call last):\n"
            '  File "deepspeed/ops/adam/cpu_adam.py", line 102, in __del__\n'
            "    self.ds_opt_adam.destroy_adam(self.opt_id)\n"
            "AttributeError: 'DeepSpeedCPUAdam' object has no attribute 'ds_opt_adam'\n")
    assert classify(text).kind != FailureKind.UNKNOWN


# ---- 2. CPython's runpy: the launch hands python a directory without __main__.py
# github cottonb/megatron-deepspeed output/log/gpt-0.35B-...-worker-0_2024.11.28-19.56.42.log (oos-batch35), whole;
# CPython Lib/runpy.py _get_main_module_details ("can't find %r module in %r").
_NO_MAIN = "/usr/bin/python: can't find '__main__' module in '/mnt/huangyonghua/huangyonghua/DeepSpeed'\n"


def test_cant_find_main_module_is_a_launch_config_error() -> None:
    assert first_match(_NO_MAIN, LAUNCH_TARGET) is not None
    got = classify(_NO_MAIN)
    assert got.kind == FailureKind.CONFIG_ERROR, got.reason


def test_main_module_words_without_the_interpreter_do_not_match() -> None:
    assert first_match("ImportError: can't find '__main__' module in 'x' (a test's own message)\n",
                       LAUNCH_TARGET) is None


# ---- 3. FSDP auto-wrap class not in the model
# github fyh2001/sft-recipes (oos-batch35, hf_trainer): accelerate utils/fsdp_utils.py fsdp2_prepare_auto_wrap_policy;
# the FSDP1 wording is accelerate utils/dataclasses.py set_auto_wrap_policy and transformers' trainer.
_WRAP = "[rank6]: ValueError: Could not find the transformer layer class Gemma4AudioLayer in the model.\n"
_WRAP_FSDP1 = "Exception: Could not find the transformer layer class to wrap in the model.\n"


def test_fsdp_wrap_class_missing_is_config_error() -> None:
    for text in (_WRAP, _WRAP_FSDP1):
        assert first_match(text, FSDP_WRAP_CLASS) is not None
        got = classify("Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n" + text)
        assert got.kind == FailureKind.CONFIG_ERROR, got.reason


def test_fsdp_wrap_words_in_prose_do_not_match() -> None:
    assert first_match("Tip: if it could not find the transformer layer class in the model, set it\n",
                       FSDP_WRAP_CLASS) is None


# ---- 4. make's recipe failure under a Python traceback
# https://github.com/yl4579/StyleTTS2/issues/141 (oos-batch35): `make train_2` runs train_second.py, which raises.
_MAKE_PY = """Traceback (most recent call last):
  File "/workspace/tts/train_second.py", line 676, in main
    logger.info('Validation loss: %.3f' % (loss_test / iters_test))
ZeroDivisionError: division by zero
make: *** [Makefile:8: train_2] Error 1
"""
# GNU make under a compiler error (Megatron-LM megatron/core/datasets Makefile, the helpers build): still a build.
_MAKE_CC = """helpers.cpp:12:10: fatal error: pybind11/pybind11.h: No such file or directory
compilation terminated.
make: *** [Makefile:9: default] Error 1
"""


def test_make_recipe_after_a_traceback_is_the_program_crash() -> None:
    assert recipe_ran_program(_MAKE_PY, _MAKE_PY.index("make: ***"))
    got = classify(_MAKE_PY)
    assert got.kind == FailureKind.CRASHED, got.reason
    assert "ZeroDivisionError" in got.reason


def test_make_recipe_after_a_compiler_error_stays_a_build_failure() -> None:
    assert not recipe_ran_program(_MAKE_CC, _MAKE_CC.index("make: ***"))
    assert classify(_MAKE_CC).kind == FailureKind.CONFIG_ERROR
    alone = "make: *** [Makefile:12: helpers] Error 1\n"
    got = classify(alone)
    assert got.kind == FailureKind.CONFIG_ERROR, got.reason


# ---- 5. a training loop's caught-OOM warning that ends the log
# github bruceZhang995/gpt2-chinese-from-Tangyudi log/train.log (oos-batch35): GPT2-Chinese's train.py logs
# `logger.info("WARNING: ran out of memory")` in its `except RuntimeError`; fairseq's old trainer and ParlAI print
# '| WARNING: ran out of memory, skipping batch'.
_CAUGHT = "".join(f"2022-07-06 11:54:04,{700 + i} - INFO - WARNING: ran out of memory\n" for i in range(5))


def test_log_ending_on_caught_oom_is_oom() -> None:
    head = "2022-07-06 11:53:42,219 - INFO - using device:cuda:0\n2022-07-06 11:54:04,001 - INFO - start training\n"
    got = classify(head + _CAUGHT)
    assert got.kind == FailureKind.OOM, got.reason
    assert ends_on_caught_oom("| WARNING: ran out of memory, skipping batch. if this happens frequently, decrease "
                              "batchsize or truncate the inputs to the model.\n") is not None


def test_caught_oom_followed_by_steps_is_not_the_end() -> None:
    text = _CAUGHT + "2022-07-06 11:54:05,100 - INFO - epoch 1, step 10, loss 3.21\n"
    assert ends_on_caught_oom(text) is None
    # ComfyUI's VAE fallback warning is a retry, not a training loop's skipped batch
    assert ends_on_caught_oom("Warning: Ran out of memory when regular VAE decoding, retrying with tiled VAE "
                              "decoding.\n") is None


# ---- 6. a refusal to run on a dirty working tree
# github elena-lyulina/Megatron-LM-Attention-Benchmark attn_bench/logs/1719525.err (oos-batch35), the raise of its
# attn_bench/utils/git_info.py; git's own wt-status.c require_clean_work_tree as `git pull --rebase` prints it.
_DIRTY = """[default0]:  File "/scratch/attn_bench/utils/git_info.py", line 69, in check_git_working_tree
[default0]:    raise RuntimeError(
[default0]:RuntimeError: Working tree is dirty with 106 diff lines (limit: 100). Commit or stash your changes before \
running the benchmark.
"""
_GIT = "error: cannot pull with rebase: You have unstaged changes.\nerror: Please commit or stash them.\n"


def test_dirty_working_tree_refusal_is_config_error() -> None:
    for text in (_DIRTY, _GIT):
        assert first_match(text, CLEAN_TREE) is not None
        got = classify(text)
        assert got.kind == FailureKind.CONFIG_ERROR, got.reason


def test_commit_or_stash_as_a_warning_or_hint_does_not_match() -> None:
    for text in ("WARNING: working tree has local changes; commit or stash them for a reproducible run\n",
                 "hint: commit or stash your changes before switching branches\n"):
        assert first_match(text, CLEAN_TREE) is None
