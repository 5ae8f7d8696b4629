"""Parse the embedded torch workload's log (launcher/workload).

The workload prints one line per step and one result line at the end:
    [parasweep] iteration 3/6 | phase measure | step time (ms): 123.45 | lm loss: 6.912345 | tokens/s: 1234.5
    PARASWEEP_RESULT {"step_time_s": ..., "tokens_per_s": ..., "tflops_per_gpu": ..., "mfu": ..., ...}
Step lines use Megatron's `key: value |` layout, so parse_megatron.parse_iterations reads them (it keeps `phase`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from analysis.logs.parse_megatron import Iteration, parse_iterations

RESULT_MARKER = "PARASWEEP_RESULT"
# Without these a result cannot rank a layout; the other keys (mfu, peak_mem_gb, ...) are optional.
REQUIRED_RESULT_KEYS = ("step_time_s", "tokens_per_s")


@dataclass(frozen=True)
class WorkloadLog:
    """What one workload log says. `problem` explains a PARASWEEP_RESULT line that exists but cannot be used
    (garbled or truncated JSON, missing keys); a log with no result line at all has result=None, problem=None."""

    iterations: tuple[Iteration, ...]
    result: dict[str, Any] | None
    problem: str | None = None


def _result_lines(text: str) -> list[tuple[int, str]]:
    """(1-based line number, text after the marker) for every result line, in log order."""
    found = []
    line_no, counted_to = 1, 0
    start = text.find(RESULT_MARKER)
    while start >= 0:
        end = text.find("\n", start)
        end = len(text) if end < 0 else end
        line_no += text.count("\n", counted_to, start)  # incremental: linear however many result lines
        counted_to = start
        found.append((line_no, text[start + len(RESULT_MARKER):end].strip()))
        start = text.find(RESULT_MARKER, end)
    return found


def _decode(where: str, payload: str) -> tuple[dict[str, Any] | None, str | None]:
    try:
        result = json.loads(payload)  # accepts NaN/Infinity: the plausibility check names such values
    except json.JSONDecodeError as err:
        return None, (f"{where}: {RESULT_MARKER} is not valid JSON ({err.msg} at char {err.pos}; "
                      f"truncated output?): {payload[:120]!r}")
    except (RecursionError, ValueError) as err:  # '[[[[...' nested past the recursion limit; huge integers
        return None, f"{where}: {RESULT_MARKER} cannot be decoded ({type(err).__name__}): {payload[:120]!r}"
    if not isinstance(result, dict):
        return None, f"{where}: {RESULT_MARKER} must be a JSON object, got {type(result).__name__}"
    missing = [k for k in REQUIRED_RESULT_KEYS if not _is_number(result.get(k))]
    if missing:
        return None, f"{where}: {RESULT_MARKER} lacks numeric {', '.join(missing)}"
    return result, None


def _is_number(value: object) -> bool:
    """A JSON number, finite or not (NaN and Infinity are numbers the plausibility check rejects by name)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _per_gpu(iterations: list[Iteration], result: dict[str, Any] | None) -> tuple[Iteration, ...]:
    """Fill tokens_per_gpu_per_s = tokens_per_s / world_size when the result names the world size."""
    world_size = result.get("world_size") if result else None
    if not isinstance(world_size, int) or isinstance(world_size, bool) or not 0 < world_size < 2**31:
        return tuple(iterations)
    return tuple(replace(it, tokens_per_gpu_per_s=float(it.tokens_per_s) / world_size)
                 if it.tokens_per_s is not None and it.tokens_per_gpu_per_s is None else it for it in iterations)


def parse_workload(text: str, *, source: str | None = None, notes: list[str] | None = None) -> WorkloadLog:
    """Step lines and the final result. Several ranks may print the result: the last usable one wins."""
    iterations = parse_iterations(text, source=source, notes=notes)
    result, problem = None, None
    for line_no, payload in reversed(_result_lines(text)):
        result, why = _decode(f"{source or '<log>'}:{line_no}", payload)
        if result is not None:
            problem = None
            break
        problem = problem or why  # report the last line's defect, which is the one a reader looks at
    return WorkloadLog(iterations=_per_gpu(iterations, result), result=result, problem=problem)
