"""Strict JSON: what the project writes must load in any JSON reader, and NaN / Infinity are not JSON."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


def finite(value: Any) -> Any:
    """`value` with every non-finite float (NaN, +-inf) replaced by None, recursively through dicts, lists and
    tuples (a measurement that is not a number is not known)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def dumps(value: Any, **kwargs: Any) -> str:
    """json.dumps that never writes NaN or Infinity (they become null)."""
    return json.dumps(finite(value), allow_nan=False, **kwargs)


def read_file(path: Path | str, error: type[Exception]) -> Any:
    """The JSON a file holds; a file that cannot be read or is not JSON raises `error` with one line naming it."""
    try:
        return json.loads(Path(path).read_text())
    except OSError as exc:
        raise error(f"{path}: cannot read ({exc.strerror})") from None
    except json.JSONDecodeError as exc:
        raise error(f"{path}: not JSON ({exc.msg})") from None


def read_table(path: Path) -> dict[str, Any]:
    """A data table the project ships as JSON ({} when the file is missing: the caller's defaults stay)."""
    if not path.exists():
        return {}
    data: dict[str, Any] = json.loads(path.read_text())
    return data
