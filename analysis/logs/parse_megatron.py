"""Parse Megatron-LM / Megatron-DeepSpeed training logs: iteration records, memory reports, DeepSpeed timers.

Formats covered (each has a real excerpt in tests/fixtures/, sources in tests/fixtures/INDEX.tsv):
- Megatron-DeepSpeed (MDS): ` iteration  199/ 317892 | ... | elapsed time per iteration (ms): 14287.5 | ...
  | tokens per gpu per second (tgs): 1146.733 | TFLOPs: 69.85 |`
- BigScience MDS fork: `[default7]: iteration ... | elapsed time per iteration (s): 106.46 | ...` (seconds, the
  torchrun `--tee` prefix), sometimes hard-wrapped over several physical lines.
- Megatron-LM and Megatron-Bridge: ` [2024-04-06 03:02:12] iteration 71/ 100 | ... | throughput per GPU
  (TFLOP/s/GPU): 243.6 | ...`
- ALCF MDS key=value: `... iteration=  1/ 317892 | ... | elapsed_time_per_iteration_ms=108893.2 | ...`
- NeMo 2 (Lightning, MegatronProgressBar's log lines): `Training epoch 0, iteration 120/149 | lr: 3e-05 | ...
  | train_step_timing in s: 0.03146` (one line per step, no closing `|`)
- the embedded workload: `[parasweep] iteration 3/6 | phase measure | step time (ms): 123.45 | ...`
Megatron ends every field with ` |` (training_log builds `log_string += ' {key}: {value} |'`), so a record whose
last physical line does not end with `|` was either hard-wrapped (continued on the next lines) or truncated.
The workload's and NeMo 2's lines carry no closing `|` but are never wrapped (one print per step).

Every function here is total: a record that cannot be used (no step time, a step time that is zero, negative or
not finite, a value that is not a number) is dropped or loses that field, with a note in `notes` when the caller
passes a list; nothing raises, whatever the text.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

MAX_NOTES = 20  # a hostile log can produce a note per line; the first few say what is wrong
IMPOSSIBLE_STEP = "zero, negative or not finite"  # in the note of every record dropped for its step time
# In the note of a step record whose MFU or TFLOP/s no device can reach (outcome.py judges it invalid_measurement).
IMPOSSIBLE_FIELD = "no device can reach it"


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
    kind: str = "megatron"  # "megatron" | "deepspeed_timer" | "deepspeed_see_memory" | "nemo2"


def note(notes: list[str] | None, message: str) -> None:
    """Append `message` to the caller's notes (if any), keeping at most MAX_NOTES."""
    if notes is not None and len(notes) < MAX_NOTES:
        notes.append(message)


# A record starts at "iteration N/M |" (also "iteration=N/M |"); "number of skipped iterations: 0 |" never
# matches because a digit must follow "iteration" directly. No leading \b: a pattern that starts with a literal
# lets `re` jump between occurrences of "iteration" (20x faster over a whole log). Digits are bounded: int() of a
# 5,000-digit string raises, and no run has more than 10**12 iterations.
_ITER_START = re.compile(r"iteration\s{0,40}[=:]?\s{0,40}(\d{1,12})\s{0,40}/\s{0,40}\d{1,12}\s{0,40}\|")
_TEE_PREFIX = re.compile(r"^\s*\[(?:default|rank)\d{1,6}\]:")
_PROGRESS = re.compile(r"\biteration\s{0,40}[=:]?\s{0,40}\d{1,12}\s{0,40}/\s{0,40}\d")  # also a wrapped line's start
# Other frameworks' per-step output (NeMo 1 progress bars, DeepSpeed's throughput timer, HF Trainer's log dicts).
_OTHER_PROGRESS = ("train_step_timing", "SamplesPerSec=", "{'loss':", '{"loss":')
_MAX_WRAP_LINES = 6  # a hard-wrapped record spans at most this many extra physical lines
# Lines that hold exactly one record and no closing '|': the embedded workload (launcher/workload/train.py) and
# NeMo 2's progress printer.
_SINGLE_LINE_TAGS = ("[parasweep] ", "Training epoch ")

# Normalised field key -> (Iteration attribute, divisor to the attribute's unit; dividing keeps 23491.4 ms exact).
_FIELDS: dict[str, tuple[str, float]] = {
    "elapsed time per iteration ms": ("step_time_s", 1000.0),
    "elapsed time per iteration s": ("step_time_s", 1.0),  # BigScience fork prints seconds
    "step time ms": ("step_time_s", 1000.0),  # embedded workload
    "step time s": ("step_time_s", 1.0),
    "train step timing in s": ("step_time_s", 1.0),  # NeMo 2
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
    "reduced train loss": ("loss", 1.0),  # NeMo 2
    "global batch size": ("global_batch", 1.0),
    "tokens/s": ("tokens_per_s", 1.0),  # embedded workload, whole job
}


@lru_cache(maxsize=1024)
def _field_spec(raw_key: str) -> tuple[str, float] | None:
    """'tokens per gpu per second(tgs)', 'elapsed_time_per_iteration_ms' -> the _FIELDS entry (memoised)."""
    if len(raw_key) > 80:
        return None  # no field name is this long; keeps the cache from holding a hostile log's junk
    key = raw_key.lower().replace("_", " ").replace("(", " ").replace(")", " ")
    return _FIELDS.get(" ".join(key.split()))


def _split_field(raw: str) -> tuple[str, str] | None:
    """'key: value' or 'key=value' -> (key, value), splitting at whichever separator comes first."""
    key, sep, value = raw.partition(":")
    if not sep or "=" in key:
        key, sep, value = raw.partition("=")
    return (key, value) if sep else None


_GLUED_UNIT = re.compile(r"\s{0,4}([-+]?(?:\d{1,30}\.?\d{0,30}|\.\d{1,30})(?:[eE][-+]?\d{1,3})?)\s{0,2}"
                         r"[A-Za-z%/\u00b5]{1,16}\s{0,4}")


# A number and its running average joined by a slash (AMD Primus's Megatron fields: "32208.7/32208.7").
_PAIRED = re.compile(r"([-+]?\d{1,30}(?:\.\d{1,30})?(?:[eE][-+]?\d{1,3})?)/[-+]?\d{1,30}(?:\.\d{1,30})?"
                     r"(?:[eE][-+]?\d{1,3})?")

# A number with a magnitude suffix (thousands, millions, ...) and no unit: "11.5K", "85.8G".
_MAGNITUDE = re.compile(r"([-+]?(?:\d{1,30}\.?\d{0,30}|\.\d{1,30})(?:[eE][-+]?\d{1,3})?)\s?([kKMGT])")
_MAGNITUDES = {"k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}


def number(value: str) -> float | None:
    """'14287.5', ' 1.0E+00 ', '496.3 (avg 496.1)' (Megatron >= 26.5), '32208.7/32208.7' (Primus: the value, then
    its running average), '123.4TFLOPs' (a unit glued on), '11.5K' (x 1000, nanotron) -> float; None when it is not
    a number. 'nan' and 'inf' are numbers here: whether they are plausible is for the caller to judge."""
    text = value.strip()
    if len(text) > 64:
        return None  # no honest number is this long; float() of a megabyte of digits is slow
    try:
        return float(text)
    except ValueError:
        pass
    try:
        return float(text.split(" (", 1)[0])
    except ValueError:
        pass
    paired = _PAIRED.fullmatch(text)
    if paired is not None:  # AMD Primus's Megatron prints the step's value and its running average: "32208.7/32208.7"
        return float(paired.group(1))
    scaled = _MAGNITUDE.fullmatch(text)
    if scaled is not None:  # nanotron's "elapsed_time_per_iteration_ms: 11.5K" is 11,500 ms, not 11.5
        return float(scaled.group(1)) * _MAGNITUDES[scaled.group(2)]
    glued = _GLUED_UNIT.fullmatch(text)
    return float(glued.group(1)) if glued is not None else None


def _line_end(text: str, pos: int) -> int:
    end = text.find("\n", pos)
    return len(text) if end < 0 else end


def _gather(text: str, start: int, stop: int, single_line: bool = False) -> tuple[str, bool, int]:
    """The logical record starting at text[start], not reaching past `stop` (the next record's start):
    (record, complete?, offset just past its last line). `single_line`: the log's records never close with '|'
    (a variant without the closing pipe), so a record is its line, complete up to its last field."""
    end = text.find("\n", start)
    end = len(text) if end < 0 else end
    if stop < end:  # another record follows on the same line: this one ends there
        return text[start:stop].rstrip(), True, stop
    first = text[start:end].rstrip()
    if single_line or (first.endswith("|") and not _wrapped_after_pipe(text, first, end, stop)):
        return first, True, end
    line_start = text.rfind("\n", 0, start) + 1
    if text.startswith(_SINGLE_LINE_TAGS, line_start) or any(text.find(tag, line_start, start) >= 0
                                                              for tag in _SINGLE_LINE_TAGS):
        return first, True, end
    parts, pos = [first], end
    for _ in range(_MAX_WRAP_LINES):
        if pos >= len(text) or pos >= stop:
            break
        nxt_end = min(_line_end(text, pos + 1), stop)
        nxt = _TEE_PREFIX.sub("", text[pos + 1 : nxt_end], count=1).strip()
        if not nxt or _ITER_START.search(nxt):
            break
        parts.append(nxt)  # hard wraps fall at spaces, so joining with one space restores the text
        pos = nxt_end
        if nxt.endswith("|"):
            return " ".join(parts), True, pos
    return first, False, end  # never closed: truncated, not wrapped; keep the single line


# A record hard-wrapped by a paste or a terminal at a fixed width can break right after a field's closing '|': its
# first line then looks closed. The next physical line continues the record when it starts with a field
# (`elapsed time per iteration (ms): 13212.7 |`, Megatron-Bridge PR 841's paste); only looked at when the first
# line holds no step-time field (a record never prints its step time before the iteration counter's line ends).
_FIELD_LINE = re.compile(r"[a-z][a-z ()/_-]{0,60}:\s{0,8}[-+\d.eE]{1,30}\s{0,4}\|")


def _wrapped_after_pipe(text: str, first: str, end: int, stop: int) -> bool:
    if end + 1 >= min(stop, len(text)) or "per iteration" in first or "step time" in first:
        return False
    return _FIELD_LINE.match(text, end + 1, min(stop, _line_end(text, end + 1))) is not None


# Megatron forks that print the step-time record without the `iteration N/M |` counter (Megatron-LLaMA's
# `elapsed time per iteration (ms): 82897.1 | average overall token/sec : ...`): a step record without a counter is
# still a step record; read only when the log has no counted record, numbered in the order printed.
_UNCOUNTED_START = re.compile(r"^[ \t]{0,8}elapsed time per iteration \((?:ms|s)\):", re.MULTILINE)


def _parse_record(iteration: int, record: str, complete: bool, source: str | None, line_no: int,
                  notes: list[str] | None) -> Iteration | None:
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
                    phase = stripped[6:].strip()[:40]
                continue
        spec = _field_spec(key)
        if spec is None:
            continue
        try:
            parsed = float(value) if len(value) < 64 else None  # the common case, fast; surrounding blanks are fine
        except ValueError:
            parsed = number(value)
        if parsed is None:
            note(notes, f"{source or '<log>'}:{line_no}: field {key.strip()[:40]!r} has value "
                        f"{value.strip()[:40]!r}, not a number; "
                        "field ignored")
            continue
        values[spec[0]] = parsed / spec[1]
    step_s = values.get("step_time_s")
    if step_s is None:
        if complete:
            note(notes, f"{source or '<log>'}:{line_no}: iteration {iteration} has no step time field; record ignored")
        return None  # incomplete: the job died while printing this line
    if not math.isfinite(step_s) or step_s <= 0:
        note(notes, f"{source or '<log>'}:{line_no}: iteration {iteration} has step time {step_s!r} s "
                    f"({IMPOSSIBLE_STEP}); record dropped")
        return None
    batch = values.pop("global_batch", None)
    if batch is not None and not (math.isfinite(batch) and 0 < batch < 2**53):
        batch = None
    return Iteration(iteration=iteration, global_batch=None if batch is None else int(batch),
                     phase=phase, **values)


_PIPE_SAMPLE = 50  # records looked at to tell a log whose records never close with '|'


def _without_closing_pipe(text: str, starts: list[int]) -> bool:
    """Do this log's records end without Megatron's closing ' |' (at least two records, none of the first
    _PIPE_SAMPLE closing)? Then a record's last field on its line is complete, not a cut-off value."""
    if len(starts) < 2:
        return False
    for k, start in enumerate(starts[:_PIPE_SAMPLE]):
        stop = starts[k + 1] if k + 1 < len(starts) else len(text)
        lines = text[start: min(stop, start + 4000)].split("\n")[: _MAX_WRAP_LINES + 1]
        if any(line.rstrip().endswith("|") for line in lines):  # closed on its line, or hard-wrapped and closed
            return False
    return True


def has_iteration(text: str) -> bool:
    """Does this piece of log report a training step? (The monitor's progress signal: chatter such as NCCL
    warnings grows a log without progress.)"""
    return _PROGRESS.search(text) is not None or any(marker in text for marker in _OTHER_PROGRESS)


def parse_iterations(text: str, *, source: str | None = None, notes: list[str] | None = None) -> list[Iteration]:
    """Every usable iteration record in the log, one per iteration number, sorted by iteration.

    The same iteration printed by several ranks (or nodes) is kept once: the first occurrence wins (Megatron prints
    from one rank; ranks step in lockstep, so their times differ by noise). Two records written onto one physical
    line are read as two. A final record cut off by the job's death is dropped; a record without a usable step time
    is dropped with a note.
    """
    by_iteration: dict[int, Iteration] = {}
    starts = [(m.start(), int(m.group(1))) for m in _ITER_START.finditer(text)]
    if not starts:
        return _uncounted_records(text, source, notes)
    pipe_less = _without_closing_pipe(text, [start for start, _ in starts])
    resume, counted_to, line_no = 0, 0, 1
    for k, (start, iteration) in enumerate(starts):
        if start < resume:  # inside a record already joined from wrapped lines
            continue
        line_no += text.count("\n", counted_to, start)  # incremental: linear over the whole log
        counted_to = start
        stop = starts[k + 1][0] if k + 1 < len(starts) else len(text)
        # the log's last record may be cut by the job's death even where records have no closing pipe
        record, complete, resume = _gather(text, start, stop, single_line=pipe_less and k + 1 < len(starts))
        it = _parse_record(iteration, record, complete, source, line_no, notes)
        if it is not None and iteration not in by_iteration:
            by_iteration[iteration] = it
    return [by_iteration[k] for k in sorted(by_iteration)]


def _uncounted_records(text: str, source: str | None, notes: list[str] | None) -> list[Iteration]:
    """Records of _UNCOUNTED_START, one per line, numbered 1, 2, ... in the order printed."""
    out: list[Iteration] = []
    for match in _UNCOUNTED_START.finditer(text):
        line = text[match.start(): _line_end(text, match.start())].rstrip()
        it = _parse_record(len(out) + 1, "|" + line, True, source, text.count("\n", 0, match.start()) + 1, notes)
        if it is not None:
            out.append(it)
    return out


# Megatron report_memory(name): "[Rank N] " + name + " memory (MB) | allocated: ... | max allocated: ... |
# reserved: ... | max reserved: ..." (older versions: "cached"/"max cached", no rank, name "after 5 iterations").
_MEM_UNITS = {"memory (MB)": 1.0, "memory (GB)": 1024.0}
_MEM_RANK = re.compile(r"\[Rank (\d{1,6})\]")
_MEM_ITER = re.compile(r"after (\d{1,12}) iterations")
_MEM_KEYS = {"allocated": "allocated_mb", "max allocated": "max_allocated_mb", "reserved": "reserved_mb",
             "max reserved": "max_reserved_mb", "cached": "reserved_mb", "max cached": "max_reserved_mb",
             # Megatron-LM >= 0.13 / Megatron-Bridge: "memory (GB) | mem-allocated-gigabytes: 51.072 | ..."
             "mem-allocated-gigabytes": "allocated_mb", "mem-max-allocated-gigabytes": "max_allocated_mb",
             "mem-reserved-gigabytes": "reserved_mb", "mem-max-reserved-gigabytes": "max_reserved_mb"}
# DeepSpeed runtime/utils.py see_memory_usage: "MA 0.03 GB  Max_MA 0.03 GB  CA 0.04 GB  Max_CA 0 GB" (GiB).
_DS_SEE_MEMORY = re.compile(r"\bMA ([\d.]{1,20}) GB\s{1,40}Max_MA ([\d.]{1,20}) GB\s{1,40}CA ([\d.]{1,20}) GB"
                            r"\s{1,40}Max_CA ([\d.]{1,20}) GB")
# DeepSpeed utils/timer.py ThroughputTimer.stop (GiB rounded to 0.01). Since DeepSpeed 0.7.x:
# "epoch=0/micro_step=199/global_step=199, RunningAvgSamplesPerSec=58.7, CurrSamplesPerSec=61.3, MemAllocated=..."
# before: "0/1567, RunningAvgSamplesPerSec=13.0, CurrSamplesPerSec=13.3, ..." and "0/40, SamplesPerSec=83.5, ...".
_DS_TIMER = re.compile(
    r"(?:epoch=(\d{1,12})/micro_step=(\d{1,12})/global_step=(\d{1,12})|\b(\d{1,12})/(\d{1,12})), "
    r"(?:RunningAvgSamplesPerSec=([^,\s]{1,40}), CurrSamplesPerSec=([^,\s]{1,40})|SamplesPerSec=([^,\s]{1,40}))"
    r"(?:, MemAllocated=([\d.]{1,20})GB, MaxMemAllocated=([\d.]{1,20})GB)?")
_MIB_PER_GIB = 1024.0
# The timer's step counter and rate name span at most this many characters before "SamplesPerSec=":
# "epoch=<12 digits>/micro_step=<12>/global_step=<12>, RunningAvg" is 79.
_DS_TIMER_REACH = 100


def _ds_timer(line: str) -> re.Match[str] | None:
    """_DS_TIMER on a line, searched from just before its step counter: the pattern's leading alternative would
    otherwise be tried at every digit of the timestamp and logger prefix (a third of parse_memory's time). `\b`
    still sees the characters before the start, so a counter is never read from its middle."""
    rate = line.find("SamplesPerSec=")
    return None if rate < 0 else _DS_TIMER.search(line, max(0, rate - _DS_TIMER_REACH))
_MEM_LOOKBACK = 300  # the report's name and rank sit within this many characters before "memory (MB)"


def _megatron_memory(line: str, notes: list[str] | None, where: str) -> MemoryReport | None:
    for marker, scale in _MEM_UNITS.items():  # noqa: B007 - the unit of the marker found is used below
        idx = line.find(marker)
        if idx >= 0:
            break
    else:
        return None
    after = line[idx + len(marker):].lstrip()
    if not after.startswith("|"):
        return None
    head = line[max(0, idx - _MEM_LOOKBACK):idx]
    ranks = _MEM_RANK.findall(head)
    name = head[max(head.rfind("|"), head.rfind("]"), head.rfind("[")) + 1:]
    values: dict[str, float] = {}
    for raw in after[1:].split("|", 12)[:12]:
        kv = _split_field(raw)
        if kv is None or (attr := _MEM_KEYS.get(" ".join(kv[0].split()))) is None:
            continue
        parsed = number(kv[1])
        if parsed is None:
            note(notes, f"{where}: memory field {kv[0].strip()!r} is not a number; ignored")
            continue
        values[attr] = parsed * scale
    if not values:
        return None
    at = _MEM_ITER.search(name)
    return MemoryReport(rank=int(ranks[-1]) if ranks else None,
                        iteration=None if at is None else int(at.group(1)),
                        allocated_mb=values.get("allocated_mb"), max_allocated_mb=values.get("max_allocated_mb"),
                        reserved_mb=values.get("reserved_mb"), max_reserved_mb=values.get("max_reserved_mb"))


# NeMo 2's memory monitor callback on its progress line: "peak_memory_usage: 70833405952 | memory_allocated:
# 44271689728" (bytes; the peak is torch.cuda.max_memory_reserved).
_NEMO2_PEAK = re.compile(r"peak_memory_usage: (\d{1,16})")
_NEMO2_ALLOCATED = re.compile(r"memory_allocated: (\d{1,16})")
_NEMO2_ITER = re.compile(r"global_step: (\d{1,12})")


def _nemo2_memory(line: str) -> MemoryReport | None:
    peak = _NEMO2_PEAK.search(line)
    if peak is None:
        return None
    allocated, step = _NEMO2_ALLOCATED.search(line), _NEMO2_ITER.search(line)
    return MemoryReport(rank=None, iteration=int(step.group(1)) if step else None,
                        allocated_mb=int(allocated.group(1)) / 2**20 if allocated else None, max_allocated_mb=None,
                        reserved_mb=None, max_reserved_mb=int(peak.group(1)) / 2**20, kind="nemo2")


def _float_or_none(text: str | None) -> float | None:
    return None if text is None else number(text)


def _deepspeed_memory(line: str) -> MemoryReport | None:
    if "MemAllocated=" in line and (m := _ds_timer(line)) is not None and m.group(9) is not None:
        allocated, peak = _float_or_none(m.group(9)), _float_or_none(m.group(10))
        step = m.group(3) or m.group(5)
        if allocated is None or peak is None:
            return None
        return MemoryReport(rank=None, iteration=int(step), allocated_mb=allocated * _MIB_PER_GIB,
                            max_allocated_mb=peak * _MIB_PER_GIB, reserved_mb=None, max_reserved_mb=None,
                            kind="deepspeed_timer")
    if "Max_MA" in line and (m := _DS_SEE_MEMORY.search(line)) is not None:
        values = [_float_or_none(g) for g in m.groups()]
        if any(v is None for v in values):
            return None
        ma, max_ma, ca, max_ca = (v * _MIB_PER_GIB for v in values if v is not None)
        return MemoryReport(rank=None, iteration=None, allocated_mb=ma, max_allocated_mb=max_ma, reserved_mb=ca,
                            max_reserved_mb=max_ca, kind="deepspeed_see_memory")
    return None


def lines_with(text: str, markers: tuple[str, ...]) -> list[tuple[int, str]]:
    """(line number, line) of every line holding a marker, in log order. str.find jumps between hits in C, which
    is ~10x faster than testing each of a long log's lines in Python."""
    spans = set()
    for marker in markers:
        pos = text.find(marker)
        while pos >= 0:
            end = _line_end(text, pos)
            spans.add((text.rfind("\n", 0, pos) + 1, end))
            pos = text.find(marker, end)
    out, line_no, counted_to = [], 1, 0
    for start, end in sorted(spans):
        line_no += text.count("\n", counted_to, start)
        counted_to = start
        out.append((line_no, text[start:end]))
    return out


def parse_memory(text: str, *, source: str | None = None, notes: list[str] | None = None) -> list[MemoryReport]:
    """Every memory report in log order (exact duplicates, e.g. a line printed twice, are kept once)."""
    reports: dict[MemoryReport, None] = {}  # insertion-ordered set
    for line_no, line in lines_with(text, ("memory (", "MemAllocated=", "Max_MA", "peak_memory_usage:")):
        where = f"{source or '<log>'}:{line_no}"
        if "memory (" in line:
            report = _megatron_memory(line, notes, where)
        elif "peak_memory_usage:" in line:
            report = _nemo2_memory(line)
        else:
            report = _deepspeed_memory(line)
        if report is not None:
            reports.setdefault(report)
    return list(reports)


def peak_memory_mb(reports: list[MemoryReport], field: str = "max_allocated_mb") -> float | None:
    """The largest value of `field` over all reports (all ranks): the rank that limits the layout.
    Values that are not finite are ignored here (a plausibility check reports them)."""
    values = [v for r in reports if (v := getattr(r, field)) is not None and not math.isnan(v)]
    return max(values) if values else None


def parse_ds_timers(text: str) -> list[dict[str, Any]]:
    """DeepSpeed ThroughputTimer lines, one dict[str, Any] per global step (first occurrence), in log order.

    Keys: epoch, micro_step, global_step, running_avg_samples_per_s, curr_samples_per_s, both_rates (the line
    prints the two) and, when printed, mem_allocated_gb, max_mem_allocated_gb (GiB). Before DeepSpeed 0.7 the line
    has `epoch/step` and one `SamplesPerSec` (a running average): then global_step is that step and both rates are
    the one printed.
    """
    out: dict[int, dict[str, Any]] = {}
    for _, line in lines_with(text, ("SamplesPerSec=",)):
        if (m := _ds_timer(line)) is None:
            continue
        running = _float_or_none(m.group(6) or m.group(8))
        current = _float_or_none(m.group(7) or m.group(8))
        if running is None or current is None:
            continue
        if m.group(3) is not None:
            epoch, micro, step = int(m.group(1)), int(m.group(2)), int(m.group(3))
        else:
            epoch, micro, step = int(m.group(4)), int(m.group(5)), int(m.group(5))
        row: dict[str, Any] = {"epoch": epoch, "micro_step": micro, "global_step": step,
                     "running_avg_samples_per_s": running, "curr_samples_per_s": current,
                     "both_rates": m.group(6) is not None}
        if m.group(9) is not None:
            row["mem_allocated_gb"], row["max_mem_allocated_gb"] = _float_or_none(m.group(9)), \
                _float_or_none(m.group(10))
        out.setdefault(step, row)
    return list(out.values())

