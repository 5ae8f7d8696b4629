"""Strict JSON out: no NaN or Infinity, which `json.dumps` writes by default and strict readers (jq, browsers'
JSON.parse, Go, Rust serde) reject. A non-finite float has no honest value, so it becomes null."""

from __future__ import annotations

import json
import math
from typing import Any


def finite_or_none(value: Any) -> Any:
    """`value` with every non-finite float (also inside dicts, lists and tuples) replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_or_none(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_none(v) for v in value]
    return value


def dumps(obj: Any, **kwargs: Any) -> str:
    """json.dumps that maps non-finite floats to null and refuses anything else non-standard (allow_nan=False)."""
    return json.dumps(finite_or_none(obj), allow_nan=False, **kwargs)
