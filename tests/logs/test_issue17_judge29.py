"""Issue 17 (helper judge29): batch 25's miss as a family. torch's own argument parser
(torch/csrc/utils/python_arg_parser.cpp) rejects a call with wrong types ("zeros_like(): argument 'input'
(position 1) must be Tensor, not tuple"): a program's bug, never a configuration rule the user broke
(families.config.TORCH_ARG_PARSER); a report's bullet naming the exception ("- error: TypeError: ...") is the
exception line itself (families.error_end.EXCEPTION_LINE)."""

from __future__ import annotations

from pathlib import Path

import pytest
from log_fixtures import body, kind_of

from analysis.logs.families import config as F_CONFIG
from analysis.logs.families import error_end as F_END

FIXTURES = Path(__file__).parents[1] / "fixtures" / "oos-batch25"
_ZEROS = FIXTURES / "megatron_lm/conceptlm_v22_vq_olmo3_16g_ab_step2_zeros_like_tuple_typeerror_1.log"
_REAL = "- error: TypeError: zeros_like(): argument 'input' (position 1) must be Tensor, not tuple"


def test_batch25_zeros_like_typeerror_is_a_crash() -> None:
    assert _REAL in body(_ZEROS)
    assert kind_of(body(_ZEROS)) == "crashed"


@pytest.mark.parametrize("line", [
    "zeros_like(): argument 'input' (position 1) must be Tensor, not tuple",
    "add(): argument 'other' must be Tensor, not NoneType",
    "cat() received an invalid combination of arguments - got (Tensor, int), but expected one of:",
    "forward() takes 2 positional arguments but 3 were given",
])
def test_torch_arg_parser_wordings_match(line: str) -> None:
    assert F_CONFIG.TORCH_ARG_PARSER.search(line) is not None


@pytest.mark.parametrize("line", [
    "tensor_model_parallel_size must be a divisor of num_attention_heads",
    "argument --micro-batch-size must be positive, not 0",  # argparse-like rule, no torch call
    "num_layers must be divisible by pipeline size",
])
def test_config_rules_are_not_arg_parser_errors(line: str) -> None:
    assert F_CONFIG.TORCH_ARG_PARSER.search(line) is None


def test_bullet_names_the_exception() -> None:
    assert F_END.error_record(_REAL) == F_END.error_record(_REAL[len("- error: "):])
    assert F_END.error_record("- error: no such thing happened") is None
    assert F_END.EXCEPTION_LINE.match("- note: TypeError: x") is None


def test_a_config_rule_after_a_bullet_stays_config() -> None:
    text = "step 1\n- error: AssertionError: num_layers (30) must be divisible by pipeline size (4)\n"
    assert kind_of(text) == "config_error"

