"""One log, any framework -> its measurements: which format it is, its iteration records, whole-run figures,
memory reports, and what the log itself says about its batch (for tokens/s).

Readers are tried in order; the first that finds step times decides the format:
1. the embedded workload (`PARASWEEP_RESULT` line; analysis.logs.parse_workload)
2. Megatron-style `iteration N/M | ... |` records: Megatron-LM, Megatron-Bridge, Megatron-DeepSpeed, BigScience,
   NeMo 2's `Training epoch 0, iteration ...` lines (analysis.logs.parse_megatron)
3. NeMo 1 Lightning progress bars (analysis.logs.parse_nemo)
4. DeepSpeed's own ThroughputTimer lines, when the log also prints the DeepSpeed config's train_batch_size (the
   samples per step that turn samples/s into a step time)
5. the Hugging Face Trainer's final speed metrics (analysis.logs.parse_hf), a whole-run mean
Memory comes from Megatron's report_memory lines and DeepSpeed's MemAllocated/see_memory_usage lines, whatever
the format. Total: nothing here raises.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from analysis.logs.parse_hf import FinalMetrics, parse_final_metrics
from analysis.logs.parse_megatron import (
    IMPOSSIBLE_STEP,
    Iteration,
    MemoryReport,
    lines_with,
    note,
    parse_ds_timers,
    parse_iterations,
    parse_memory,
)
from analysis.logs.parse_nemo import parse_progress_bars
from analysis.logs.parse_workload import RESULT_MARKER, WorkloadLog, parse_workload

# Argument / config dumps: Megatron's "  global_batch_size ....... 1024", DeepSpeed's config print
# "  train_batch_size ............. 16", NeMo's YAML "  global_batch_size: 256" / "  encoder_seq_length: 4096".
# Lines are found with str.find (fast) and only those are matched against this (anchored, bounded) pattern.
_DUMP_LINE = re.compile(r"(?:^|[\s\]:])([a-z_]{1,40})(?: \.{2,} {0,10}|: {0,10})(\d{1,12}) {0,10}$")
_BATCH_KEYS = ("global_batch_size", "train_batch_size")
_SEQ_KEYS = ("seq_length", "encoder_seq_length", "max_seq_length")
_WORLD_KEYS = ("world_size",)


@dataclass(frozen=True)
class LogReading:
    format: str  # "workload", "megatron", "nemo2", "nemo1", "deepspeed", "hf_trainer"; "" when none is readable
    iterations: tuple[Iteration, ...] = ()
    final: FinalMetrics | None = None  # whole-run figures (HF Trainer)
    memory: tuple[MemoryReport, ...] = ()
    workload: WorkloadLog | None = None
    tokens_per_step: int | None = None  # global batch x sequence length, from the log's own dumps
    world_size: int | None = None
    notes: tuple[str, ...] = field(default_factory=tuple)


def dumped_int(text: str, keys: tuple[str, ...]) -> int | None:
    """The last positive value a `key ..... N` / `key: N` dump line gives one of `keys`; None when none does."""
    value = None
    for _, line in lines_with(text, keys):
        match = _DUMP_LINE.search(line)
        if match is not None and match.group(1) in keys and int(match.group(2)) > 0:
            value = int(match.group(2))
    return value


def _dumped_tokens_per_step(text: str) -> int | None:
    if "batch_size" not in text:
        return None
    batch, seq = dumped_int(text, _BATCH_KEYS), dumped_int(text, _SEQ_KEYS)
    return batch * seq if batch and seq else None


def _deepspeed_iterations(text: str, notes: list[str]) -> list[Iteration]:
    """ThroughputTimer rows -> iterations, when the log prints train_batch_size (samples per optimizer step)."""
    rows = parse_ds_timers(text) if "SamplesPerSec=" in text else []
    if not rows:
        return []
    batch = dumped_int(text, _BATCH_KEYS)
    if not batch:
        note(notes, "DeepSpeed throughput lines without train_batch_size in the log: samples/s only, no step time")
        return []
    out = []
    for row in rows:
        rate = row["curr_samples_per_s"]
        if not rate > 0 or rate == float("inf"):
            note(notes, f"DeepSpeed step {row['global_step']}: CurrSamplesPerSec={rate!r} gives a step time that is "
                        f"{IMPOSSIBLE_STEP}; dropped")
            continue
        out.append(Iteration(iteration=row["global_step"], step_time_s=batch / rate, samples_per_s=rate,
                             global_batch=batch))
    return out


def read_log(text: str, *, source: str | None = None) -> LogReading:
    """What `text` (already normalised: analysis.logs.logtext.normalize) measures, from whichever format it is in."""
    notes: list[str] = []
    memory = tuple(parse_memory(text, source=source, notes=notes))
    common: dict[str, Any] = dict(memory=memory, tokens_per_step=_dumped_tokens_per_step(text),
                  world_size=dumped_int(text, _WORLD_KEYS) if "world_size" in text else None)
    if RESULT_MARKER in text:
        log = parse_workload(text, source=source, notes=notes)
        return LogReading("workload", iterations=log.iterations, workload=log, notes=tuple(notes), **common)
    iterations = parse_iterations(text, source=source, notes=notes)
    if iterations:
        fmt = "workload" if "[parasweep] " in text else "nemo2" if "Training epoch " in text else "megatron"
        return LogReading(fmt, iterations=tuple(iterations), notes=tuple(notes), **common)
    readers: tuple[tuple[str, Callable[[], list[Iteration]]], ...] = (
        ("nemo1", lambda: parse_progress_bars(text, source=source, notes=notes)),
        ("deepspeed", lambda: _deepspeed_iterations(text, notes)))
    for fmt, reader in readers:
        iterations = reader()
        if iterations:
            return LogReading(fmt, iterations=tuple(iterations), notes=tuple(notes), **common)
    final = parse_final_metrics(text)
    if final is not None and final.step_time_s is not None:
        return LogReading("hf_trainer", final=final, notes=tuple(notes), **common)
    return LogReading("", notes=tuple(notes), **common)
