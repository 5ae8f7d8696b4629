"""Classify why a trial ended, from its log, its SLURM state and its exit code; and say whether to retry it.

Checks run in a fixed order, first match wins, because one failure drags others behind it (the signatures are
tables in analysis.logs.patterns):
 1. ok            a result was printed and the job exited 0 (or SLURM says COMPLETED); with neither known (a log
                  alone), a result counts unless a failure signature follows the last progress line
 2. node_failure  GPU hardware fault (ECC, Xid, fallen off the bus, a lost device): a sick GPU also produces
                  "CUDA error: out of memory" on the next start, which must not mark the layout as not fitting
 3. oom           device (allocator, NCCL, cuBLAS, cuDNN) or host (OOM killer): one rank out of memory makes the
                  others fail in NCCL teardown
 4. config_error  argument checks, divisibility, unrecognised arguments, a missing Python module: one rank's
                  error also makes the others fail in teardown
 5. node_failure, 6. preempted   SLURM killed the job for an outside reason; NCCL noise follows
 7. hang          no progress for longer than hang_timeout_s, or the log's last step is a known stall point (the
                  fused-kernel build lock, ...) and the job was killed there (or nothing says it ended otherwise)
 8. time_limit    SLURM "CANCELLED AT ... DUE TO TIME LIMIT" is a time limit, not a cancellation
 9. cancelled     "CANCELLED AT ..." without a DUE TO (user or our monitor ran scancel)
10. crashed       a hard crash of one rank (illegal memory access, segfault, bus error, a dead data loader): the
                  other ranks then fail in NCCL, which must not be blamed on the network
11. comm_error    NCCL/gloo errors with nothing above to explain them
12. config_error  exit code 2 (argparse and our workload's validation exit with 2)
13. crashed       a traceback, a C++ abort, a non-zero exit or SLURM FAILED
14. unknown       nothing matched (e.g. exit 0 without a result: "finished, no metrics I can read")
Needles are plain substrings searched over the whole text (str.find runs in C), so classifying 1,000 logs takes
milliseconds; only the matched line is extracted. `classify` is total: it never raises, whatever the text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from analysis.logs import patterns as P
from analysis.logs.logtext import split_prefix
from launcher.core.kinds import FAILURE_KINDS, RETRY_POLICY, FailureKind

__all__ = ["FAILURE_KINDS", "RETRY_POLICY", "Failure", "FailureKind", "classify"]

_PROGRESS = re.compile(r"iteration\s{0,40}[=:]?\s{0,40}\d{1,12}\s{0,40}/\s{0,40}\d")  # literal first: fast scan
_RESULT_MARKERS = ("PARASWEEP_RESULT", "train_step_timing", "SamplesPerSec=", "train_runtime")
_EXCEPTION = re.compile(r"(?:[A-Za-z_][\w.]{0,200}\.)?[A-Z]\w{0,100}(?:Error|Exception|Exit|Interrupt|Failure)\b")
_XID = re.compile(r"Xid \([^)\n]{0,60}\): (\d{1,5})")
_XID_CAUSE = re.compile(r"caused by previous Xid (\d{1,5})")
_MODULE = re.compile(r"No module named '?([\w.]{1,100})")
# Launchers that report their child's exit status: DeepSpeed's "exits with return code = -9", torchrun's
# "failed (exitcode: -9)" and its ChildFailedError summary "exitcode  : -9".
_REPORTED_EXIT = re.compile(r"(?:exits with return code = |\(exitcode: |exitcode {0,4}: )(-?\d{1,4})")
_EXIT_NEEDLES = ("exits with return code = ", "exitcode")
# sacct states (a trailing "+" or " by UID" is stripped) that name a kind on their own.
_STATE_KIND = {"OUT_OF_MEMORY": FailureKind.OOM, "NODE_FAIL": FailureKind.NODE_FAILURE,
               "BOOT_FAIL": FailureKind.NODE_FAILURE, "PREEMPTED": FailureKind.PREEMPTED,
               "TIMEOUT": FailureKind.TIME_LIMIT, "DEADLINE": FailureKind.TIME_LIMIT,
               "CANCELLED": FailureKind.CANCELLED, "FAILED": FailureKind.CRASHED}
_SIGNALS = {1: "SIGHUP", 2: "SIGINT", 6: "SIGABRT", 7: "SIGBUS", 9: "SIGKILL (the host OOM killer?)",
            11: "SIGSEGV", 15: "SIGTERM"}
_MAX_REASON_CHARS = 240
_MAX_EVIDENCE_CHARS = 300
_LONG_LINE_CHARS = 160
_TRACEBACK_SCAN_CHARS = 200_000  # an exception line is looked for this far after its "Traceback"

Evidence = tuple[tuple[int, str], ...]  # (1-based line number, line)


@dataclass(frozen=True)
class Failure:
    kind: FailureKind  # a str Enum: compares equal to "oom", "ok", ...
    reason: str  # short human text, with the matching log line (trimmed)
    retryable: bool
    exclude_node: bool
    max_retries: int | None
    evidence: Evidence = ()


def _failure(kind: FailureKind, reason: str, evidence: Evidence = ()) -> Failure:
    if len(reason) > _MAX_REASON_CHARS:
        reason = reason[: _MAX_REASON_CHARS - 3] + "..."
    return Failure(kind, reason, kind.retryable, kind.exclude_node, kind.max_retries, evidence)


def _line_bounds(text: str, idx: int) -> tuple[int, int]:
    end = text.find("\n", idx)
    return text.rfind("\n", 0, idx) + 1, len(text) if end < 0 else end


def _line_at(text: str, idx: int) -> str:
    start, end = _line_bounds(text, idx)
    return text[start:end].strip()


def _evidence(text: str, *positions: int) -> Evidence:
    out = []
    for idx in positions:
        line = _line_at(text, idx)
        out.append((text.count("\n", 0, idx) + 1, line[:_MAX_EVIDENCE_CHARS]))
    return tuple(out)


def _first(text: str, rows: tuple[P.Signature, ...], start: int) -> tuple[int, P.Signature] | None:
    """The first occurrence of the first row's needle found (rows are listed most informative first)."""
    for row in rows:
        idx = text.find(row.needle, start)
        if idx >= 0:
            return idx, row
    return None


def _around(text: str, idx: int, needle: str) -> str:
    """The line holding text[idx]; a long line (a progress bar and an error written together) is cut to the part
    around the needle, so that the reason shows what matched."""
    start, end = _line_bounds(text, idx)
    if end - start <= _LONG_LINE_CHARS:
        return text[start:end].strip()
    left = max(start, idx - 40)
    right = min(end, idx + len(needle) + _LONG_LINE_CHARS)
    return ("..." if left > start else "") + text[left:right].strip() + ("..." if right < end else "")


def _by_log(text: str, kind: FailureKind, rows: tuple[P.Signature, ...], start: int, state: str | None = None,
            state_label: str = "") -> Failure | None:
    found = _first(text, rows, start)
    if found is not None:
        idx, row = found
        return _failure(kind, f"{row.label}: {_around(text, idx, row.needle)}", _evidence(text, idx))
    if state is not None and _STATE_KIND.get(state) == kind:
        return _failure(kind, f"{state_label}: SLURM state {state}")
    return None


def _gpu_fault(text: str, start: int) -> Failure | None:
    failure = _by_log(text, FailureKind.NODE_FAILURE, P.GPU_FAULT, start)
    if failure is not None:
        return failure
    idx = text.find(P.XID_NEEDLE, start)
    while idx >= 0:
        line = _line_at(text, idx)
        for match in (_XID.search(line), _XID_CAUSE.search(line)):
            if match is not None and int(match.group(1)) in P.HARDWARE_XIDS:
                return _failure(FailureKind.NODE_FAILURE, f"GPU hardware fault (Xid {match.group(1)}): {line}",
                                _evidence(text, idx))
        idx = text.find(P.XID_NEEDLE, idx + 1)
    return None


def _config_assertion(text: str, start: int) -> Failure | None:
    """An AssertionError raised in an argument check (patterns.CONFIG_ASSERT_FILES)."""
    idx = text.find("AssertionError", start)
    while idx >= 0:
        tb = text.rfind("Traceback (most recent call last)", max(start, idx - 20_000), idx)
        frames = text[tb if tb >= 0 else max(start, idx - 3000) : idx]
        if any(f in frames for f in P.CONFIG_ASSERT_FILES):
            return _failure(FailureKind.CONFIG_ERROR, f"argument check failed: {_line_at(text, idx)}",
                            _evidence(text, idx))
        idx = text.find("AssertionError", idx + 1)
    return None


def _missing_module(text: str, start: int) -> Failure | None:
    """`ModuleNotFoundError: No module named 'X'`: the interpreter that ran the job lacks a package."""
    for needle in ("ModuleNotFoundError: No module named", "ImportError: No module named"):
        idx = text.find(needle, start)
        if idx >= 0:
            line = _line_at(text, idx)
            match = _MODULE.search(line)
            name = match.group(1) if match else "?"
            return _failure(FailureKind.CONFIG_ERROR,
                            f"Python module '{name}' is missing: set backend.python to an interpreter that has it "
                            f"({line})", _evidence(text, idx))
    return None


def _nccl_warn(text: str, start: int) -> Failure | None:
    idx = text.find(P.NCCL_WARN, start)
    while idx >= 0:
        line = _line_at(text, idx)
        for row in P.NCCL_WARN_FAILURES:
            if row.needle in line:
                return _failure(FailureKind.COMM_ERROR, f"{row.label}: {line}", _evidence(text, idx))
        idx = text.find(P.NCCL_WARN, idx + 1)
    return None


def _cancelled(text: str, start: int, state: str | None) -> Failure | None:
    """A cancellation, unless srun cancelled the step itself because a task had failed ("srun: Terminating job
    step" before the CANCELLED line): then the failure of that task is the cause, looked for further on."""
    failure = _by_log(text, FailureKind.CANCELLED, P.CANCELLED, start, state, "cancelled")
    if failure is not None and failure.evidence:
        idx = text.find(P.CANCELLED[0].needle, start)
        if text.rfind(P.SRUN_TERMINATING, start, idx) >= 0:
            return None
    return failure


def _has_progress(text: str, start: int) -> bool:
    return _PROGRESS.search(text, start) is not None or any(text.find(m, start) >= 0 for m in _RESULT_MARKERS)


def _stall_point(text: str, start: int) -> tuple[int, P.StallPoint] | None:
    """The first known stall point (in table order: the fused-kernel lock is more telling than the extension
    build it waits for) that the log never got past: no 'done' line, progress or traceback after it."""
    for point in P.STALL_POINTS:
        idx = text.rfind(point.marker, start)
        if idx < 0:
            continue
        line_start, line_end = _line_bounds(text, idx)
        if any(text.find(done, line_start) >= 0 for done in point.done) \
                or text.find("Traceback", line_end) >= 0 or _has_progress(text, line_end):
            continue
        return idx, point
    return None


def _last_line(text: str) -> str:
    stripped = text.rstrip()
    return _line_at(stripped, len(stripped) - 1) if stripped else "(empty log)"


def _hang(text: str, start: int, state: str | None, exit_code: int | None, seconds_since_progress: float | None,
          hang_timeout_s: float | None) -> Failure | None:
    stall = _stall_point(text, start)
    hint = f"; stuck at {_line_at(text, stall[0])!r} ({stall[1].hint})" if stall else ""
    evidence = _evidence(text, stall[0]) if stall else ()
    if seconds_since_progress is not None and hang_timeout_s is not None and seconds_since_progress > hang_timeout_s:
        return _failure(FailureKind.HANG, f"no progress for {seconds_since_progress:.0f} s "
                                          f"(> hang_timeout {hang_timeout_s:.0f} s){hint}; last line: "
                                          f"{_last_line(text)}", evidence)
    if stall is None:
        return None
    killed = state in ("TIMEOUT", "CANCELLED") or "CANCELLED AT" in text
    log_alone = state is None and exit_code is None
    if killed or log_alone:
        how = "killed while stuck" if killed else "the log ends stuck"
        return _failure(FailureKind.HANG, f"{how} at a known stall point{hint}", evidence)
    return None


def _exception_line(text: str, start: int) -> tuple[int, str] | None:
    """(position, line) of the exception that ends the first traceback, e.g. 'RuntimeError: CUDA error: ...',
    following the traceback's own rank when several ranks' tracebacks are interleaved."""
    idx = text.find("Traceback (most recent call last)", start)
    if idx < 0:
        return None
    line_start = text.rfind("\n", 0, idx) + 1
    origin, _ = split_prefix(text[line_start:idx])
    pos = _line_bounds(text, idx)[1] + 1
    stop = min(len(text), pos + _TRACEBACK_SCAN_CHARS)
    for _ in range(400):
        if pos >= stop:
            break
        end = text.find("\n", pos, stop)
        end = stop if end < 0 else end
        line_origin, body = split_prefix(text[pos:end])
        body = body.strip()
        if line_origin == origin and _EXCEPTION.match(body):
            return pos, body
        pos = end + 1
    return idx, _line_at(text, idx)


def _exit_text(exit_code: int) -> str:
    signal = -exit_code if exit_code < 0 else exit_code - 128 if 128 < exit_code < 160 else None
    name = _SIGNALS.get(signal) if signal is not None else None
    return f"exit code {exit_code}" + (f", {name}" if name else "")


def _reported_exit_code(text: str, start: int) -> tuple[int, int] | None:
    """(position, code) of the first non-zero exit status a launcher printed for a child process."""
    for needle in _EXIT_NEEDLES:
        idx = text.find(needle, start)
        while idx >= 0:
            match = _REPORTED_EXIT.search(text, max(0, idx - 1), idx + 40)
            if match is not None and int(match.group(1)) != 0:
                return idx, int(match.group(1))
            idx = text.find(needle, idx + 1)
    return None


def _fallback(text: str, start: int, state: str | None, exit_code: int | None) -> Failure:
    if exit_code is None:
        reported = _reported_exit_code(text, start)
        if reported is not None and reported[1] != 2:
            idx, code = reported
            return _failure(FailureKind.CRASHED, f"crashed ({_exit_text(code)}, as the launcher reports): "
                                                 f"{_line_at(text, idx)[-110:]}", _evidence(text, idx))
    if exit_code == 2:
        return _failure(FailureKind.CONFIG_ERROR, f"exit code 2 (argument/config validation): {_last_line(text)}")
    crash = _first(text, P.CRASH, start)
    if crash is not None:
        exc = _exception_line(text, start)
        idx, line = exc if exc is not None else (crash[0], _line_at(text, crash[0]))
        return _failure(FailureKind.CRASHED, f"crashed: {line}", _evidence(text, idx))
    last = _last_line(text)
    if exit_code in (None, 137, -9) and last.endswith("Killed"):  # the shell's report of a SIGKILLed child
        return _failure(FailureKind.CRASHED, f"killed (SIGKILL; the host OOM killer?): {last}",
                        _evidence(text, len(text.rstrip()) - 1))
    if (exit_code not in (None, 0)) or state == "FAILED":
        what = _exit_text(exit_code) if exit_code not in (None, 0) else f"SLURM state {state}"
        return _failure(FailureKind.CRASHED, f"crashed ({what}): {_last_line(text)}")
    if exit_code == 0 or state == "COMPLETED":
        return _failure(FailureKind.UNKNOWN, f"finished, no metrics I can read; last line: {_last_line(text)}")
    return _failure(FailureKind.UNKNOWN, f"no failure signature; last line: {_last_line(text)}")


def _normal_state(slurm_state: str | None) -> str | None:
    if not isinstance(slurm_state, str) or not slurm_state.strip():
        return None
    return slurm_state.split()[0].rstrip("+").upper()


def _signatures(text: str, start: int, state: str | None, exit_code: int | None,
                seconds_since_progress: float | None, hang_timeout_s: float | None) -> Failure | None:
    """The first failure family (module docstring, 2-11) that text[start:] or the SLURM state shows."""
    return (
        _gpu_fault(text, start)
        or _by_log(text, FailureKind.OOM, P.DEVICE_OOM + P.HOST_OOM, start, state, "out of memory")
        or _by_log(text, FailureKind.CONFIG_ERROR, P.CONFIG, start)
        or _config_assertion(text, start)
        or _missing_module(text, start)
        or _by_log(text, FailureKind.NODE_FAILURE, P.NODE, start, state, "node failure")
        or _by_log(text, FailureKind.PREEMPTED, P.PREEMPTED, start, state, "preempted")
        or _hang(text, start, state, exit_code, seconds_since_progress, hang_timeout_s)
        or _by_log(text, FailureKind.TIME_LIMIT, P.TIME_LIMIT, start, state, "time limit")
        or _cancelled(text, start, state)
        or _by_log(text, FailureKind.CRASHED, P.HARD_CRASH, start)
        or _by_log(text, FailureKind.COMM_ERROR, P.COMM, start)
        or _nccl_warn(text, start)
    )


def _last_progress_start(text: str) -> int:
    """Start of the line of the log's last progress (iteration record or result line); 0 when it has none."""
    last = max((text.rfind(m) for m in _RESULT_MARKERS), default=-1)
    tail = max(0, last)
    for match in _PROGRESS.finditer(text, tail):
        last = max(last, match.start())
    return text.rfind("\n", 0, last) + 1 if last >= 0 else 0


def classify(log_text: str, *, slurm_state: str | None = None, exit_code: int | None = None,
             has_result: bool = False, seconds_since_progress: float | None = None,
             hang_timeout_s: float | None = None) -> Failure:
    """Why the trial ended. `seconds_since_progress` must be measured while the job was alive (by the monitor
    that saw it running or cancelled it), not after it ended, or every finished job would look hung.
    With neither `exit_code` nor `slurm_state` (a log alone), a log with a result is ok unless a failure
    signature or a traceback comes after its last progress line: a failure the run got past did not end it."""
    text = log_text if isinstance(log_text, str) else str(log_text)
    state = _normal_state(slurm_state)
    exit_code = exit_code if isinstance(exit_code, int) and not isinstance(exit_code, bool) else None
    if has_result and (exit_code == 0 or state == "COMPLETED"):
        return _failure(FailureKind.OK, "finished with a result")
    if has_result and exit_code is None and state is None:
        start = _last_progress_start(text)
        found = _signatures(text, start, None, None, None, None)
        if found is not None:
            return found
        if text.find("Traceback (most recent call last)", start) >= 0:
            return _fallback(text, start, None, None)
        return _failure(FailureKind.OK, "finished with a result")
    return (_signatures(text, 0, state, exit_code, seconds_since_progress, hang_timeout_s)
            or _fallback(text, 0, state, exit_code))
