"""Issue 17 (helper judge42a): batch 37's configuration misses as families. A bare AssertionError whose quoted
assert statement is a layout rule (divisibility or comparison of the run's sizes); a library's refusal of a precision
the GPU lacks (torch autocast's bf16 check, Transformer Engine's FP8 capability check); one installed package calling
another's function with a signature the installed version does not have. Each: real lines with their source, and a
near line that must stay a crash."""

from __future__ import annotations

from analysis.logs.outcome import trial_outcome

# ---- 1. a message-less assert whose quoted statement is a layout rule
# https://github.com/intelligent-machine-learning/dlrover/issues/533 (oos-batch37): dlrover's copy of nanoGPT's
# train.py; CPython's traceback (Lib/traceback.py) quotes the asserting line above the bare AssertionError.
_DLROVER = """rank 0 is initialized local_rank = 0
Traceback (most recent call last):
  File "model_zoo/pytorch/nanogpt/train.py", line 379, in <module>
    train()
  File "model_zoo/pytorch/nanogpt/train.py", line 178, in train
    assert gradient_accumulation_steps % world_size == 0
AssertionError
"""


def test_bare_divisibility_assert_on_world_size_is_config_error() -> None:
    assert trial_outcome(_DLROVER).failure_kind == "config_error"


def test_bare_layout_comparison_assert_is_config_error() -> None:
    text = _DLROVER.replace("assert gradient_accumulation_steps % world_size == 0",
                            "assert world_size == tp_size * pp_size * dp_size")
    assert trial_outcome(text).failure_kind == "config_error"


def test_bare_modulus_assert_on_a_program_counter_stays_a_crash() -> None:
    for stmt in ("assert idx % len(buf) == 0", "assert step % log_interval == 0", "assert world_size > 0"):
        text = _DLROVER.replace("assert gradient_accumulation_steps % world_size == 0", stmt)
        assert trial_outcome(text).failure_kind == "crashed", stmt


# ---- 2. a library refuses a precision the GPU does not have
# https://github.com/openvla/openvla/issues/103 (oos-batch37): torch/amp/autocast_mode.py's bf16 check on a
# Quadro RTX 8000 (Turing).
_OPENVLA = """  File "/home/u/openvla/vla-scripts/finetune.py", line 254, in finetune
    with torch.autocast("cuda", dtype=torch.bfloat16):
  File "/home/u/miniconda3/envs/openvla/lib/python3.10/site-packages/torch/amp/autocast_mode.py", line 306, in __init__
    raise RuntimeError(
RuntimeError: Current CUDA Device does not support bfloat16. Please switch dtype to float16.
"""


def test_autocast_bf16_refusal_is_config_error() -> None:
    assert trial_outcome(_OPENVLA).failure_kind == "config_error"


def test_te_fp8_capability_refusal_is_config_error() -> None:
    # Transformer Engine pytorch/fp8.py check_fp8_support, asserted by fp8_autocast on an A100 (sm_80)
    text = _OPENVLA.replace("RuntimeError: Current CUDA Device does not support bfloat16. Please switch dtype to "
                            "float16.", "AssertionError: Device compute capability 8.9 or higher required for FP8 "
                            "execution.")
    assert trial_outcome(text).failure_kind == "config_error"


def test_bf16_words_in_a_warning_are_not_a_refusal() -> None:
    text = "[W] the current device does not support bfloat16 natively, falling back\nstep 1 loss 2.0\n"
    assert trial_outcome(text).failure_kind != "config_error"


# ---- 3. one installed package calls another with a signature the installed version does not have
# https://github.com/NVIDIA/TransformerEngine/issues/1473 (oos-batch37): TE 1.13 calls torch.is_autocast_enabled
# (device_type) under torch 2.1 (CPython Objects/methodobject.c, METH_NOARGS "takes no arguments").
_TE = """  File "/usr/local/lib/python3.10/site-packages/transformer_engine/pytorch/ops/_common.py", line 136, in maybe_autocast_dtype
    if torch.is_autocast_enabled(device_type):
TypeError: torch.is_autocast_enabled() takes no arguments (1 given)
"""


def test_library_calling_torch_with_a_foreign_signature_is_config_error() -> None:
    assert trial_outcome(_TE).failure_kind == "config_error"
    # the stored excerpt cuts the path before the package's directory
    cut = _TE.replace("  File \"/usr/local/lib/python3.10/site-packages", "")
    assert trial_outcome(cut).failure_kind == "config_error"


def test_users_script_calling_torch_with_a_wrong_signature_stays_a_crash() -> None:
    text = _TE.replace("/usr/local/lib/python3.10/site-packages/transformer_engine/pytorch/ops/_common.py",
                       "/home/u/project/train.py")
    assert trial_outcome(text).failure_kind == "crashed"


def test_torch_calling_torch_is_no_package_mismatch() -> None:
    text = _TE.replace("transformer_engine/pytorch/ops/_common.py", "torch/amp/autocast_mode.py")
    assert trial_outcome(text).failure_kind == "crashed"
