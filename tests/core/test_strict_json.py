"""Strict JSON: non-finite floats become null; the output parses with a strict reader."""

import json
import math

import pytest

from launcher.core.strict_json import dumps, finite


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


def test_every_json_the_project_writes_goes_through_strict_json():
    """json.dumps writes NaN and Infinity (not JSON) by default: outside strict_json itself, only the ledger's
    columns (read back by the ledger alone) and the config hash's payload (no floats) may call it."""
    import ast
    from pathlib import Path

    repo = Path(__file__).resolve().parents[2]
    allowed = {"launcher/core/strict_json.py", "launcher/run/ledger.py", "launcher/core/layout.py"}
    calls = []
    for path in sorted([*repo.glob("launcher/**/*.py"), *repo.glob("analysis/**/*.py")]):
        rel = path.relative_to(repo).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("dump", "dumps") and isinstance(node.func.value, ast.Name)
                    and node.func.value.id == "json" and rel not in allowed):
                calls.append(f"{rel}:{node.lineno}")
    assert calls == []
