"""Parse Megatron-LM / Megatron-DeepSpeed training logs: iteration records, memory reports, DeepSpeed timers.

Formats covered (each has a real excerpt in tests/fixtures/megatron-logs/, sources in INDEX.tsv):
- Megatron-DeepSpeed (MDS): ` iteration  199/ 317892 | ... | elapsed time per iteration (ms): 14287.5 | ...
  | tokens per gpu per second (tgs): 1146.733 | TFLOPs: 69.85 |`
- BigScience MDS fork: `[default7]: iteration ... | elapsed time per iteration (s): 106.46 | ...` (seconds, the
  torchrun `--tee` prefix), sometimes hard-wrapped over several physical lines.
- Megatron-LM: ` [2024-04-06 03:02:12] iteration 71/ 100 | ... | throughput per GPU (TFLOP/s/GPU): 243.6 | ...`
- ALCF MDS key=value: `... iteration=  1/ 317892 | ... | elapsed_time_per_iteration_ms=108893.2 | ...`
- the embedded workload: `[parasweep] iteration 3/6 | phase measure | step time (ms): 123.45 | ...`
Megatron ends every field with ` |` (training_log builds `log_string += ' {key}: {value} |'`), so a record whose
last physical line does not end with `|` was either hard-wrapped (continued on the next lines) or truncated.
The workload's lines carry no closing `|` but are never wrapped (one print per step).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from analysis.errors import ParseError


@dataclass(frozen=True, slots=True)
class Iteration:
    """One logged iteration. Megatron logs every --log-interval steps; the time is then the interval's mean."""

    iteration: int
    step_time_s: float
    tflops_per_gpu: float | None = None
    tokens_per_gpu_per_s: float | None = None
    samples_per_s: float | None = None
    loss: float | None = None
    global_batch: int | None = None
    tokens_per_s: float | None = None  # whole job; only the embedded workload prints it
    phase: str | None = None  # "warmup"/"measure" from the embedded workload; None for Megatron logs


@dataclass(frozen=True, slots=True)
class MemoryReport:
    """One memory report, all values in MiB (Megatron divides bytes by 1024*1024 and labels it 'MB')."""

    rank: int | None
    iteration: int | None
    allocated_mb: float | None
    max_allocated_mb: float | None
    reserved_mb: float | None
    max_reserved_mb: float | None
    kind: str = "megatron"  # "megatron" | "deepspeed_timer" | "deepspeed_see_memory"


# A record starts at "iteration N/M |" (also "iteration=N/M |"); "number of skipped iterations: 0 |" never
# matches because a digit must follow "iteration" directly. No leading \b: a pattern that starts with a literal
# lets `re` jump between occurrences of "iteration" (20x faster over a whole log).
_ITER_START = re.compile(r"iteration\s*[=:]?\s*(\d+)\s*/\s*\d+\s*\|")
_TEE_PREFIX = re.compile(r"^\s*\[(?:default|rank)\d+\]:")
_PROGRESS = re.compile(r"\biteration\s*[=:]?\s*\d+\s*/\s*\d+")  # also a wrapped line's first part
_MAX_WRAP_LINES = 6  # a hard-wrapped record spans at most this many extra physical lines
# The embedded workload prints each step as one line with no closing '|' (launcher/workload/train.py).
_WORKLOAD_TAG = "[parasweep] "

# Normalised field key -> (Iteration attribute, divisor to the attribute's unit; dividing keeps 23491.4 ms exact).
_FIELDS: dict[str, tuple[str, float]] = {
    "elapsed time per iteration ms": ("step_time_s", 1000.0),
    "elapsed time per iteration s": ("step_time_s", 1.0),  # BigScience fork prints seconds
    "step time ms": ("step_time_s", 1000.0),  # embedded workload
    "step time s": ("step_time_s", 1.0),
    "tflops": ("tflops_per_gpu", 1.0),  # MDS
    # ALCF prints two estimates; [LM] is Megatron's analytic formula like MDS's "TFLOPs", [DS] is DeepSpeed's
    # flops profiler. Keep the analytic one so all backends are compared on the same formula.
    "[lm]-tflops": ("tflops_per_gpu", 1.0),
    "throughput per gpu tflop/s/gpu": ("tflops_per_gpu", 1.0),  # Megatron-LM --log-throughput
    "tokens per gpu per second tgs": ("tokens_per_gpu_per_s", 1.0),
    "tokens per gpu tokens/s/gpu": ("tokens_per_gpu_per_s", 1.0),
    "tokens per second per gpu tok/s/gpu": ("tokens_per_gpu_per_s", 1.0),
    "samples per second": ("samples_per_s", 1.0),
    "lm loss": ("loss", 1.0),
    "global batch size": ("global_batch", 1.0),
    "tokens/s": ("tokens_per_s", 1.0),  # embedded workload, whole job
}


@lru_cache(maxsize=1024)
def _field_spec(raw_key: str) -> tuple[str, float] | None:
    """'tokens per gpu per second(tgs)', 'elapsed_time_per_iteration_ms' -> the _FIELDS entry (memoised)."""
    key = raw_key.lower().replace("_", " ").replace("(", " ").replace(")", " ")
    return _FIELDS.get(" ".join(key.split()))


def _split_field(raw: str) -> tuple[str, str] | None:
    """'key: value' or 'key=value' -> (key, value), splitting at whichever separator comes first."""
    key, sep, value = raw.partition(":")
    if not sep or "=" in key:
        key, sep, value = raw.partition("=")
    return (key, value) if sep else None


def _number(value: str, key: str, source: str | None, line_no: int) -> float:
    try:
        return float(value)  # float() ignores surrounding whitespace
    except ValueError:
        pass
    text = value.strip()
    try:  # Megatron >= 26.5 appends a parenthetical: "496.3 (avg 496.1)"
        return float(text.split(" (", 1)[0])
    except ValueError:
        raise ParseError(f"field {key.strip()!r} has value {text!r}; expected a number",
                         source=source, line_no=line_no) from None


def _gather(text: str, start: int) -> tuple[str, bool, int]:
    """The logical record starting at text[start]: (record, complete?, offset just past its last line)."""
    end = text.find("\n", start)
    end = len(text) if end < 0 else end
    first = text[start:end].rstrip()
    if first.endswith("|") or text.endswith(_WORKLOAD_TAG, 0, start):
        return first, True, end
    parts, pos = [first], end
    for _ in range(_MAX_WRAP_LINES):
        if pos >= len(text):
            break
        nxt_end = text.find("\n", pos + 1)
        nxt_end = len(text) if nxt_end < 0 else nxt_end
        nxt = _TEE_PREFIX.sub("", text[pos + 1 : nxt_end], count=1).strip()
        if not nxt or _ITER_START.search(nxt):
            break
        parts.append(nxt)  # hard wraps fall at spaces, so joining with one space restores the text
        pos = nxt_end
        if nxt.endswith("|"):
            return " ".join(parts), True, pos
    return first, False, end  # never closed: truncated, not wrapped; keep the single line


def _parse_record(iteration: int, record: str, complete: bool, source: str | None,
                  line_no: int) -> Iteration | None:
    values: dict[str, float] = {}
    phase = None
    # A truncated record's last piece may be cut mid-value ("TFLOPs: 14" of 149.10), so it is left out.
    # This loop runs ~15 times per record, so _split_field is inlined.
    pieces = record.split("|")
    for raw in pieces[1:] if complete else pieces[1:-1]:
        key, sep, value = raw.partition(":")
        if not sep or "=" in key:
            key, sep, value = raw.partition("=")
            if not sep:
                stripped = raw.strip()
                if stripped.startswith("phase "):
                    phase = stripped[6:].strip()
                continue
        spec = _field_spec(key)
        if spec is not None:
            values[spec[0]] = _number(value, key, source, line_no) / spec[1]
    if "step_time_s" not in values:
        if not complete:
            return None  # the job died while printing this line
        raise ParseError("iteration record has no 'elapsed time per iteration (ms|s)' field: "
                         f"{record[:160]!r}", source=source, line_no=line_no)
    batch = values.pop("global_batch", None)
    return Iteration(iteration=iteration, global_batch=None if batch is None else int(batch),
                     phase=phase, **values)


def has_iteration(text: str) -> bool:
    """Does this piece of log report a training iteration? (The monitor's progress signal: chatter such as NCCL
    warnings grows a log without progress.)"""
    return _PROGRESS.search(text) is not None


def parse_iterations(text: str, *, source: str | None = None) -> list[Iteration]:
    """Every iteration record in the log, one per iteration number, sorted by iteration.

    The same iteration printed by several ranks (or nodes) is kept once: the first occurrence wins.
    A final record cut off by the job's death is dropped; a complete record without a step time raises ParseError.
    """
    by_iteration: dict[int, Iteration] = {}
    resume, counted_to, line_no = 0, 0, 1
    for match in _ITER_START.finditer(text):
        if match.start() < resume:  # inside a record already joined from wrapped lines
            continue
        line_no += text.count("\n", counted_to, match.start())  # incremental: linear over the whole log
        counted_to = match.start()
        record, complete, resume = _gather(text, match.start())
        iteration = int(match.group(1))
        it = _parse_record(iteration, record, complete, source, line_no)
        if it is not None and iteration not in by_iteration:
            by_iteration[iteration] = it
    return [by_iteration[k] for k in sorted(by_iteration)]


# Megatron report_memory(name): "[Rank N] " + name + " memory (MB) | allocated: ... | max allocated: ... |
# reserved: ... | max reserved: ..." (older versions: "cached"/"max cached", no rank, name "after 5 iterations").
# The name may not contain brackets, so a "[date][INFO]" logging prefix is never taken for it and the rank is kept.
_MEM_HEAD = re.compile(r"(?:\[Rank (\d+)\]\s*)?([^|\[\]]*?)\s*memory \((MB|GB)\)\s*\|")
_MEM_ITER = re.compile(r"after (\d+) iterations")
_MEM_KEYS = {"allocated": "allocated_mb", "max allocated": "max_allocated_mb", "reserved": "reserved_mb",
             "max reserved": "max_reserved_mb", "cached": "reserved_mb", "max cached": "max_reserved_mb"}
# DeepSpeed runtime/utils.py see_memory_usage: "MA 0.03 GB  Max_MA 0.03 GB  CA 0.04 GB  Max_CA 0 GB" (GiB).
_DS_SEE_MEMORY = re.compile(r"\bMA ([\d.]+) GB\s+Max_MA ([\d.]+) GB\s+CA ([\d.]+) GB\s+Max_CA ([\d.]+) GB")
# DeepSpeed utils/timer.py ThroughputTimer.stop (GiB rounded to 0.01).
_DS_TIMER = re.compile(r"epoch=(\d+)/micro_step=(\d+)/global_step=(\d+), RunningAvgSamplesPerSec=([^,\s]+), "
                       r"CurrSamplesPerSec=([^,\s]+)(?:, MemAllocated=([\d.]+)GB, MaxMemAllocated=([\d.]+)GB)?")
_MIB_PER_GIB = 1024.0


def _megatron_memory(line: str, source: str | None, line_no: int) -> MemoryReport | None:
    head = _MEM_HEAD.search(line)
    if head is None:
        return None
    scale = _MIB_PER_GIB if head.group(3) == "GB" else 1.0
    values: dict[str, float] = {}
    for raw in line[head.end():].split("|"):
        kv = _split_field(raw)
        if kv is not None and (attr := _MEM_KEYS.get(" ".join(kv[0].split()))) is not None:
            values[attr] = _number(kv[1], kv[0], source, line_no) * scale
    at = _MEM_ITER.search(head.group(2))
    return MemoryReport(rank=None if head.group(1) is None else int(head.group(1)),
                        iteration=None if at is None else int(at.group(1)),
                        allocated_mb=values.get("allocated_mb"), max_allocated_mb=values.get("max_allocated_mb"),
                        reserved_mb=values.get("reserved_mb"), max_reserved_mb=values.get("max_reserved_mb"))


def _deepspeed_memory(line: str) -> MemoryReport | None:
    if "MemAllocated=" in line and (m := _DS_TIMER.search(line)) is not None and m.group(6) is not None:
        return MemoryReport(rank=None, iteration=int(m.group(3)), allocated_mb=float(m.group(6)) * _MIB_PER_GIB,
                            max_allocated_mb=float(m.group(7)) * _MIB_PER_GIB, reserved_mb=None,
                            max_reserved_mb=None, kind="deepspeed_timer")
    if "Max_MA" in line and (m := _DS_SEE_MEMORY.search(line)) is not None:
        ma, max_ma, ca, max_ca = (float(g) * _MIB_PER_GIB for g in m.groups())
        return MemoryReport(rank=None, iteration=None, allocated_mb=ma, max_allocated_mb=max_ma, reserved_mb=ca,
                            max_reserved_mb=max_ca, kind="deepspeed_see_memory")
    return None


def _lines_with(text: str, markers: tuple[str, ...]) -> list[tuple[int, str]]:
    """(line number, line) of every line holding a marker, in log order. str.find jumps between hits in C, which
    is ~10x faster than testing each of a long log's lines in Python."""
    spans = set()
    for marker in markers:
        pos = text.find(marker)
        while pos >= 0:
            end = text.find("\n", pos)
            end = len(text) if end < 0 else end
            spans.add((text.rfind("\n", 0, pos) + 1, end))
            pos = text.find(marker, end)
    out, line_no, counted_to = [], 1, 0
    for start, end in sorted(spans):
        line_no += text.count("\n", counted_to, start)
        counted_to = start
        out.append((line_no, text[start:end]))
    return out


def parse_memory(text: str, *, source: str | None = None) -> list[MemoryReport]:
    """Every memory report in log order (exact duplicates, e.g. a line printed twice, are kept once)."""
    reports: dict[MemoryReport, None] = {}  # insertion-ordered set
    for line_no, line in _lines_with(text, ("memory (", "MemAllocated=", "Max_MA")):
        report = _megatron_memory(line, source, line_no) if "memory (" in line else _deepspeed_memory(line)
        if report is not None:
            reports.setdefault(report)
    return list(reports)


def peak_memory_mb(reports: list[MemoryReport], field: str = "max_allocated_mb") -> float | None:
    """The largest value of `field` over all reports (all ranks): the rank that limits the layout."""
    values = [getattr(r, field) for r in reports if getattr(r, field) is not None]
    return max(values) if values else None


def parse_ds_timers(text: str) -> list[dict]:
    """DeepSpeed ThroughputTimer lines, one dict per global step (first occurrence), in log order.

    Keys: epoch, micro_step, global_step, running_avg_samples_per_s, curr_samples_per_s and, when printed,
    mem_allocated_gb, max_mem_allocated_gb (GiB).
    """
    out: dict[int, dict] = {}
    for _, line in _lines_with(text, ("RunningAvgSamplesPerSec",)):
        if (m := _DS_TIMER.search(line)) is None:
            continue
        row: dict = {"epoch": int(m.group(1)), "micro_step": int(m.group(2)), "global_step": int(m.group(3)),
                     "running_avg_samples_per_s": float(m.group(4)), "curr_samples_per_s": float(m.group(5))}
        if m.group(6) is not None:
            row["mem_allocated_gb"], row["max_mem_allocated_gb"] = float(m.group(6)), float(m.group(7))
        out.setdefault(row["global_step"], row)
    return list(out.values())


def parse_timers_ms(text: str, *, source: str | None = None) -> list[dict[str, float]]:
    """'time (ms) | forward-compute: 58.16 | ...' lines (Megatron timers, DeepSpeed log_dist) -> name -> ms."""
    out = []
    for line_no, line in _lines_with(text, ("time (ms) |",)):
        cut = line.find("time (ms) |")
        row = {}
        for raw in line[cut + len("time (ms) |"):].split("|"):
            kv = _split_field(raw)
            if kv is not None:
                row[kv[0].strip()] = _number(kv[1], kv[0], source, line_no)
        out.append(row)
    return out
