"""Strict JSON: non-finite floats become null; the output parses with a strict reader."""

import json
import math

import pytest

from analysis.report.strict_json import dumps, finite


def strict_loads(text: str):
    def refuse(name):
        raise ValueError(f"non-standard JSON constant {name}")
    return json.loads(text, parse_constant=refuse)


def test_non_finite_floats_become_null_at_any_depth():
    obj = {"a": math.nan, "b": [1.0, math.inf, {"c": -math.inf}], "d": (2, math.nan), "e": "NaN", "f": 1e308}
    assert strict_loads(dumps(obj, sort_keys=True)) == {"a": None, "b": [1.0, None, {"c": None}], "d": [2, None],
                                                       "e": "NaN", "f": 1e308}
    assert finite(math.nan) is None and finite(3) == 3


def test_anything_else_non_standard_is_refused():
    with pytest.raises(TypeError):
        dumps({"x": object()})
