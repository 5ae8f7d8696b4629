"""Issue 17 (helper judge22): batch 20's misses as families. ATen's dispatch error for a reduced-precision dtype
with no kernel on the device (`"<kernel>" not implemented for 'Half'`) is the run's precision/device choice:
config_error. Megatron-LM's finetune end (tasks/finetune_utils.py: print_rank_0('done :-)')) is a completion line."""

from __future__ import annotations

from pathlib import Path

import pytest
from log_fixtures import body, kind_of

from analysis.logs.outcome import trial_outcome

FIXTURES = Path(__file__).parents[1] / "fixtures"
# tests/fixtures/oos-batch20/deepspeed/deepspeed_course_fp16_layernorm_kernel_not_implemented_for_half_1.log
_HALF = FIXTURES / "oos-batch20/deepspeed/deepspeed_course_fp16_layernorm_kernel_not_implemented_for_half_1.log"
# tests/fixtures/oos-batch20/megatron_lm/lumi_porting_amd_a100_bert_race_finetune_end_done_1.log: the README's code
# block (sfantao/lumi-megatron-lm-scripts from-amd/README.md) ends with `done :-)` on line 34, one line after the
# fixture's cut (lines 24-33)
_RACE = FIXTURES / "oos-batch20/megatron_lm/lumi_porting_amd_a100_bert_race_finetune_end_done_1.log"
_DONE = "done :-)\n"  # from-amd/README.md line 34; Megatron-LM tasks/finetune_utils.py finetune()'s last print


def test_the_batch20_layernorm_half_kernel_is_config_error():
    outcome = trial_outcome(body(_HALF))
    assert outcome.failure_kind == "config_error", outcome.reason


_TRACE = ('Traceback (most recent call last):\n  File "train.py", line 88, in <module>\n'
          "    loss = model(batch)\n{line}\n")


@pytest.mark.parametrize("line", [
    "RuntimeError: \"addmm_impl_cpu_\" not implemented for 'Half'",
    "[rank3]: NotImplementedError: \"baddbmm_with_gemm\" not implemented for 'BFloat16'",
    "RuntimeError: \"index_put_cuda\" not implemented for 'Float8_e4m3fn'",
    "torch.AcceleratorError: \"fill_cuda\" not implemented for 'Float8_e5m2'",
])
def test_a_reduced_precision_dtype_without_a_kernel_is_config_error(line):
    assert kind_of(_TRACE.format(line=line)) == "config_error"


@pytest.mark.parametrize("line", [
    "RuntimeError: \"arange_cpu\" not implemented for 'Long'",  # an integer tensor the program built: a code bug
    "RuntimeError: \"nll_loss_forward_reduce_cuda_kernel_2d_index\" not implemented for 'Int'",
    "RuntimeError: \"bitwise_and_cpu\" not implemented for 'Float'",
    "RuntimeError: fused kernel not implemented for Half on this path",  # not ATen's dispatch wording
])
def test_other_dtypes_or_wordings_are_not_this_rule(line):
    assert kind_of(_TRACE.format(line=line)) != "config_error"


def test_a_warning_about_a_missing_half_kernel_is_not_the_end():
    warned = ("UserWarning: \"LayerNormKernelImpl\" not implemented for 'Half', falling back to float32\n"
              + "".join(f"step={n} loss=2.{n} dt={0.3 + n / 1000:.4f}\n" for n in range(1, 30))
              + "Training completed successfully!\n")
    assert kind_of(warned) != "config_error"


def test_the_batch20_race_finetune_end_with_its_done_line_is_ok():
    text = body(_RACE)  # README lines 24-34: its `done :-)` restored after the score (OUT_OF_SAMPLE.md)
    assert text.endswith(_DONE)
    assert kind_of(text) == "ok"
    assert kind_of(text + "```\n") == "ok"  # the README's closing fence after it
    # as collected, cut before its last line: no completion line, but the checkpoint of iteration 19065 it saved
    # before its evaluation shows that training ran (judge46a), which is not a run that finished
    cut = trial_outcome(text.removesuffix(_DONE))
    assert cut.failure_kind == "ok" and "checkpoint of a trained step" in cut.reason
    assert "checkpoint of a trained step" not in trial_outcome(text).reason


@pytest.mark.parametrize("prefix", ["", "0: ", "[rank0]: ", "[2023-01-05 10:11:12] "])
def test_done_smiley_alone_on_its_line_is_a_completion(prefix):
    assert kind_of(f"training ...\n{prefix}done :-)\n") == "ok"


@pytest.mark.parametrize("text", [
    "building indices ... done :-)\n",  # a phase's end on the same line, not the finetune's
    "done :-) but see the errors above\n",
])
def test_done_smiley_inside_another_line_is_not_a_completion(text):
    assert kind_of(text) != "ok"


def test_a_failure_after_done_smiley_still_fails():
    text = "done :-)\nTraceback (most recent call last):\nRuntimeError: CUDA error: an illegal memory access\n"
    assert kind_of(text) != "ok"
