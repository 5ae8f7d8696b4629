"""raised_messages.tsv rows harvested (families.harvest; its own tests are in test_harvest.py) from the validation
code of Megatron-LM, DeepSpeed, Megatron-DeepSpeed, NeMo (with Megatron-Bridge, NeMo-RL, Automodel): matched on the
lines the frameworks print, and not on look-alikes."""

from __future__ import annotations

import pytest

from analysis.logs.classify import classify
from analysis.logs.families import raised as R
from launcher.core.kinds import FailureKind


@pytest.mark.parametrize(("framework", "line"), [
    ("Megatron-LM", "[rank0]: AssertionError: global batch size (512) is not divisible by micro batch size (3) "
                    "times data parallel size (8)"),
    ("DeepSpeed", "[rank3]: AssertionError: Number of experts (6) should be divisible by expert parallel size (4)"),
    ("DeepSpeed", "AssertionError: ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism"),
    ("Megatron-DeepSpeed", "AssertionError: DeepSpeed's sequence parallel does not work with tensor parallel or "
                           "pipeline parallel"),
    ("NeMo", "AssertionError: Global batch size must be divisible by the product of micro batch size and data "
             "parallel size"),
    ("NeMo", "ValueError: Virtual pipeline model parallel is only supported when using megatron_amp_O2"),
    ("Megatron-Bridge", "[rank0]: ValueError: MFSDP V2 does not support FP8 or FP4."),
    ("NeMo-RL", "ValueError: World size (8) must be divisible by PP * CP * TP (3). The data parallel size (DP = "
                "world_size / (PP * CP * TP)) must be a positive integer. Current DP would be 8/3 = 2.666667, which is "
                "not an integer. Please adjust your cluster size or parallelism parameters."),
])
def test_a_new_row_is_a_config_error_on_the_line_the_framework_prints(framework: str, line: str) -> None:
    text = "iteration 0 starting\nTraceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n" \
        + line + "\n"
    hit = R.first_raised(text)
    assert hit is not None
    assert hit[1].framework == framework
    assert classify(text).kind is FailureKind.CONFIG_ERROR


@pytest.mark.parametrize("text", [
    # the same words on a warning or info record: the run goes on
    "[NeMo W 2025-01-02 10:00:00 api:88] WARNING: Global batch size must be divisible by the product of micro "
    "batch size and data parallel size\n iteration 10/100 | loss 2.1\n",
    "[2025-01-02 10:00:00] [INFO] ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism; using ZeRO-1\n",
    # a healthy log that names the options in prose
    "Using MFSDP V2 with bf16 (FP8 or FP4 are not used)\n step 1 loss 3.2\n step 2 loss 3.1\n",
    # an error line of another kind with some of the same words
    "RuntimeError: CUDA error: an illegal memory access was encountered (pipeline parallelism stage 2)\n",
])
def test_look_alikes_do_not_match(text: str) -> None:
    assert R.first_raised(text) is None


@pytest.mark.parametrize("glue", [("", ""), ("[rank0]: AssertionError: ", " (see docs)"), ("x", "y")])
def test_a_window_holding_a_templates_anchor_or_lead_tries_that_template(glue: tuple[str, str]) -> None:
    before, after = glue  # the anchor glued to letters on either side still offers its inner words
    for tpl in R.templates():
        for fragment in (tpl.anchor, tpl.lead):
            if fragment:
                assert tpl in R._candidates(before + fragment + after), (tpl.text, fragment)


def test_a_window_without_a_templates_words_does_not_try_it() -> None:
    tried = R._candidates("RuntimeError: CUDA error: an illegal memory access was encountered")
    assert len(tried) < len(R.templates()) // 10
