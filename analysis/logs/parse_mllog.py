"""Read MLPerf Training result files: the `:::MLLOG {json}` records of mlcommons/logging's mllog.

mllog (mlperf_logging/mllog/mllog.py@399280cb, LOG_TEMPLATE ':::MLLOG {log_json}') prints one JSON object a line:
    :::MLLOG {"namespace": "", "time_ms": 1760093749552, "event_type": "POINT_IN_TIME", "key": "tracked_stats",
              "value": {"train_step_time": 0.3527, "reduced_train_loss": 3.38}, "metadata": {..., "step": 5151.0}}
`time_ms` is the record's wall-clock stamp (milliseconds since the Unix epoch), never a duration. The reference
implementations' per-step figure is the `tracked_stats` record's `train_step_time` (seconds per step; NVIDIA's NeMo
and Megatron MLPerf callbacks, mlperf_common callbacks/logging.py), keyed by `metadata.step` where they give it,
else in the order printed (a block's summary record carries only `samples_count`). The run's end, `run_stop` with
`metadata.status` "success" or "aborted", is families.completion's. Nothing here raises.
"""

from __future__ import annotations

import json
import math

from analysis.logs.parse_megatron import IMPOSSIBLE_STEP, Iteration, note

MARKER = ":::MLLOG "
_STEP_KEY = "train_step_time"  # seconds per training step (tracked_stats value)
_LOSS_KEYS = ("reduced_train_loss", "train_loss")


def mllog_records(text: str) -> list[dict[str, object]]:
    """The log's MLLOG records (JSON objects), in order; lines that do not decode are skipped."""
    out = []
    pos = text.find(MARKER)
    while pos >= 0:
        end = text.find("\n", pos)
        end = len(text) if end < 0 else end
        try:
            record = json.loads(text[pos + len(MARKER): end])
        except ValueError:
            record = None
        if isinstance(record, dict):
            out.append(record)
        pos = text.find(MARKER, end)
    return out


def parse_mllog(text: str, *, notes: list[str] | None = None) -> list[Iteration]:
    """One Iteration per `tracked_stats` record that states a train_step_time, numbered by its metadata.step (the
    first record per step kept: every rank may print it), else by its place among them."""
    if MARKER not in text or _STEP_KEY not in text:
        return []
    by_step: dict[int, Iteration] = {}
    for i, record in enumerate(r for r in mllog_records(text) if r.get("key") == "tracked_stats"):
        value, meta = record.get("value"), record.get("metadata")
        if not isinstance(value, dict) or not isinstance(value.get(_STEP_KEY), (int, float)):
            continue
        step_s = float(value[_STEP_KEY])
        step = meta.get("step") if isinstance(meta, dict) else None
        number = int(step) if isinstance(step, (int, float)) and math.isfinite(step) else i
        if not (math.isfinite(step_s) and step_s > 0):
            note(notes, f"MLLOG step {number}: train_step_time {step_s!r} s ({IMPOSSIBLE_STEP}); dropped")
            continue
        loss = next((float(value[k]) for k in _LOSS_KEYS if isinstance(value.get(k), (int, float))), None)
        by_step.setdefault(number, Iteration(iteration=number, step_time_s=step_s, loss=loss))
    return [by_step[k] for k in sorted(by_step)]
