"""Classify why a trial ended, from its log, its SLURM state and its exit code; and say whether to retry it.

Checks run in a fixed order, first match wins, because one failure drags others behind it (the signatures are
tables in analysis.logs.patterns and, with their sources, analysis.logs.families):
 1. ok            a result was printed and the job exited 0 (or SLURM says COMPLETED); with neither known (a log
                  alone), a result, step records or a training-finished line count unless a failure signature
                  follows the last of them (ok without a step time says so in its reason)
 2. node_failure  GPU hardware fault (Xid catalogue, ECC, NVLink, PCIe AER, fallen off the bus, a lost device): a
                  sick GPU also produces "CUDA error: out of memory" on the next start, which must not mark the
                  layout as not fitting
 3. oom           device (allocator, NCCL, cuBLAS, cuDNN) or host (OOM killer, cgroup, Kubernetes OOMKilled, Ray's
                  memory monitor): one rank out of memory makes the others fail in NCCL teardown
 4. config_error  argument checks, divisibility, world size, dataset/split assertions (fixed phrasings, then any
                  exception whose message relates a configuration quantity to a rule), a missing Python module
 5. diverged      NaN/inf loss, the fp16 loss scale at its minimum, Megatron records that print no loss or keep
                  skipping (before ok too: a diverged run's step time measures a broken run)
 6. node_failure, 7. preempted   the scheduler or orchestrator (SLURM, Ray, Kubernetes, cloud spot notices) lost
                  the node or took it back; NCCL noise follows (Ray's bare "its node has died" only after 10, whose
                  qualifiers say when the node was taken back on purpose)
 8. hang          no progress for longer than hang_timeout_s, or the log's last step is a known stall point (the
                  fused-kernel build lock, ...) and the job was killed there (or nothing says it ended otherwise)
 9. time_limit    SLURM "CANCELLED AT ... DUE TO TIME LIMIT", Kubernetes DeadlineExceeded
10. cancelled     "CANCELLED AT ..." without a DUE TO (user or our monitor ran scancel); torchrun's agent stopped
                  by a signal from outside
11. crashed       a hard crash of one rank (illegal memory access, segfault, bus error, a dead data loader): the
                  other ranks then fail in NCCL, which must not be blamed on the network
12. comm_error    NCCL/Gloo/UCX/EFA/InfiniBand errors with nothing above to explain them
13. config_error  exit code 2 (argparse and our workload's validation exit with 2)
14. crashed       a traceback, a C++ abort, a non-zero exit or SLURM FAILED; a traceback cut before its exception
                  line takes the family its innermost frames name where they are specific (families.frames: the ZeRO
                  optimizer's construction -> oom, a barrier or rendezvous -> comm_error, an extension build, an
                  argument check or a package's import -> config_error)
15. unknown       nothing matched (e.g. exit 0 without a result: "finished, no metrics I can read")
Needles are plain substrings searched over the whole text (str.find runs in C), a log longer than 4 MB in its first
1 MB and last 3 MB (the cause of a job's end is at its end, a start-up failure at its start); only the matched line
is extracted. `classify` is total: it never raises, whatever the text.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from analysis.logs import patterns as P
from analysis.logs.families import Row, first_match, line_around
from analysis.logs.families import completion as F_DONE
from analysis.logs.families import config as F_CONFIG
from analysis.logs.families import divergence as F_DIV
from analysis.logs.families import dumps as F_DUMP
from analysis.logs.families import error_end as F_END
from analysis.logs.families import frames as F_FRAMES
from analysis.logs.families import hardware as F_HW
from analysis.logs.families import memory as F_MEM
from analysis.logs.families import network as F_NET
from analysis.logs.families import orchestrator as F_ORCH
from analysis.logs.families import raised as F_RAISED
from analysis.logs.families import stall as F_STALL
from analysis.logs.logtext import message_of, split_prefix, without_footer
from analysis.logs.parse_generic import is_step_record, is_training_step, read_records, timestamp_of
from analysis.logs.wrappers import is_wrapper_exception
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
# srun's "task 0: Exited with exit code 1", Python's CalledProcessError "returned non-zero exit status 1",
# accelerate/launchers' "exited with code 1" / "exit status 1".
_REPORTED_EXIT = re.compile(r"(?:exits with return code = |\(exitcode: |exitcode {0,4}: |[Ee]xited with exit code |"
                            r"non-zero exit status |exited with code |exit status )(-?\d{1,4})")
_EXIT_NEEDLES = ("exits with return code = ", "exitcode", "xited with exit code ", "non-zero exit status ",
                 "exited with code ", "exit status ")
# sacct states (a trailing "+" or " by UID" is stripped) that name a kind on their own.
_STATE_KIND = {"OUT_OF_MEMORY": FailureKind.OOM, "NODE_FAIL": FailureKind.NODE_FAILURE,
               "BOOT_FAIL": FailureKind.NODE_FAILURE, "PREEMPTED": FailureKind.PREEMPTED,
               "TIMEOUT": FailureKind.TIME_LIMIT, "DEADLINE": FailureKind.TIME_LIMIT,
               "CANCELLED": FailureKind.CANCELLED, "FAILED": FailureKind.CRASHED}
_SIGNALS = {1: "SIGHUP", 2: "SIGINT", 6: "SIGABRT", 7: "SIGBUS", 9: "SIGKILL", 11: "SIGSEGV", 15: "SIGTERM"}
# judge56: a job's own SIGKILL with no error above it is taken for the kernel's OOM killer, its usual sender (a user's
# kill -9 or a scheduler's kill say so in their own lines: SLURM's CANCELLED, a caught signal, families.orchestrator).
_SIGKILL_CODES = (-9, 137)
_SIGKILL_OOM = "out of memory (host): a SIGKILL with no error above it, the kernel's OOM killer's signature"
_MAX_REASON_CHARS = 240
_MAX_EVIDENCE_CHARS = 300
_LONG_LINE_CHARS = 160
_TRACEBACK_SCAN_CHARS = 200_000  # an exception line is looked for this far after its "Traceback"
_TRACEBACK = "Traceback (most recent call last)"

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


class _Window(str):
    """A long log's head and tail, joined by a newline: failures that end a job are printed at its end, and those
    that stop it before it starts at its beginning, so a 20 MB log is searched in 4 MB. Positions are the
    window's; `line_offset` turns a line number in the tail back into the log's."""

    head_chars: int
    tail_from: int  # offset in the full log where the tail starts
    skipped_lines: int  # newlines of the full log that the window leaves out


WINDOW_HEAD_CHARS = 1_000_000
WINDOW_TAIL_CHARS = 3_000_000


def _window(text: str) -> str:
    if len(text) <= WINDOW_HEAD_CHARS + WINDOW_TAIL_CHARS + 1:
        return text
    tail_from = len(text) - WINDOW_TAIL_CHARS
    view = _Window(text[:WINDOW_HEAD_CHARS] + "\n" + text[tail_from:])
    view.head_chars = WINDOW_HEAD_CHARS
    view.tail_from = tail_from
    # the joining newline is one line more than the log has; the skipped part has its own newlines
    view.skipped_lines = text.count("\n", WINDOW_HEAD_CHARS, tail_from) - 1
    return view


def _in_window(text: str, offset: int) -> int:
    """A position in the full log -> the same position in its window (the tail's start for one in the gap)."""
    if not isinstance(text, _Window) or offset <= text.head_chars:
        return offset
    return text.head_chars + 1 + max(0, offset - text.tail_from)


def _evidence(text: str, *positions: int) -> Evidence:
    out = []
    for idx in positions:
        line = _line_at(text, idx)
        number = text.count("\n", 0, idx) + 1
        if isinstance(text, _Window) and idx > text.head_chars:
            number += text.skipped_lines
        out.append((number, line[:_MAX_EVIDENCE_CHARS]))
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


_SLURM_REFUSAL = re.compile(r"(?m)^[^\n]{0,80}?\b(?:srun|sbatch|salloc)(?:\[\d{1,9}\])?: error: (?:"
                            + "|".join(re.escape(p) for p in P.SLURM_REFUSAL_PREFIXES)
                            + r")[^\n:]{0,40}?:? ?(?:" + "|".join(re.escape(t) for t in P.SLURM_NEVER_SATISFIABLE)
                            + ")")


def _slurm_config_refusal(text: str, start: int) -> Failure | None:
    """SLURM's refusal of a job or step it can never run (patterns.SLURM_NEVER_SATISFIABLE): a configuration error,
    whatever the job printed before it (a pip warning, a set-up banner)."""
    if "rror: " not in text:  # cheap: every refusal is srun's / sbatch's / salloc's `error: `
        return None
    match = _SLURM_REFUSAL.search(text, start)
    if match is None:
        return None
    idx = match.start()
    return _failure(FailureKind.CONFIG_ERROR, f"SLURM refused a request it can never satisfy: "
                                              f"{_line_at(text, idx)[-160:]}", _evidence(text, idx))


def _deleting(text: str, idx: int, row: P.Signature) -> bool:
    """A missing file raised while the program deletes it (F_CONFIG.DELETING): its innermost frames delete."""
    if not row.needle.startswith("FileNotFoundError"):
        return False
    line_start = text.rfind("\n", 0, idx) + 1
    above = text[max(0, line_start - 2_000):line_start].split("\n")[-F_CONFIG.DELETING_LINES - 1:]
    return any(F_CONFIG.DELETING.search(line) is not None for line in above)


def _config_needle(text: str, start: int) -> Failure | None:
    """patterns.CONFIG's first needle on a line that is not about the program's own state (F_CONFIG.PROGRAM_STATE:
    a meta tensor, a run-time data count), which no setting chose."""
    for _ in range(F_MAX_XID_LINES):
        found = _first(text, P.CONFIG, start)
        if found is None:
            return None
        idx, row = found
        if F_CONFIG.PROGRAM_STATE.search(line_around(text, idx)) is None and not _deleting(text, idx, row):
            return _failure(FailureKind.CONFIG_ERROR, f"{row.label}: {_around(text, idx, row.needle)}",
                            _evidence(text, idx))
        end = text.find("\n", idx)
        if end < 0:
            return None
        start = end
    return None


def _cross_library_call(text: str, start: int) -> Failure | None:
    """One installed package calling another's function with a signature it does not have
    (families.config.cross_library_call): the two packages' versions do not fit (judge42a)."""
    idx = F_CONFIG.cross_library_call(text, start)
    if idx is None:
        return None
    return _failure(FailureKind.CONFIG_ERROR, "one installed package calls another with a signature the installed "
                    f"version does not have (a package version mismatch): {_line_at(text, idx)}",
                    _evidence(text, idx))


def _by_family(text: str, table: tuple[Row, ...], start: int) -> Failure | None:
    """The first row of a family table (analysis.logs.families) found after `start`, as a Failure of the
    row's kind."""
    found = first_match(text, table, start)
    return None if found is None else _row_failure(text, *found)


def _row_failure(text: str, idx: int, row: Row) -> Failure:
    """A family row found at `idx`, as a Failure of the row's kind."""
    return _failure(row.kind, f"{row.label}: {_around(text, idx, row.needle)}", _evidence(text, idx))


# A configuration or environment error is fatal where it is raised: a run that goes on printing its step records after
# the line was not stopped by it. The line was a warning's body (torch's "sm_120 is not compatible with the current
# PyTorch installation" under a UserWarning header, then 75 epochs: oos-batch43's Dual_D run) or an error the script
# caught and printed (a sample-image save's "module 'scipy.misc' has no attribute 'imsave'" between two steps of a
# DCGAN run: oos-batch43). Where the records carry a step time the log alone is searched from its first line (a
# generic reader's records do not bound it as Megatron's do: other ranks' records follow a rank's fatal error), so the
# family's hits are weighed here: one followed by TRAINED_PAST step records is passed over.
TRAINED_PAST = 5  # step records after a configuration line that say the run went past it
_TRAINED_PAST_CHARS = 200_000


def _config_family(text: str, table: tuple[Row, ...], start: int) -> Failure | None:
    """The first row of the configuration families (_by_family) whose hit the run did not train past (above)."""
    for _ in range(F_MAX_XID_LINES):
        found = first_match(text, table, start)
        if found is None:
            return None
        idx, row = found
        end = text.find("\n", idx)
        if end < 0 or not _trained_past(text, end + 1):
            return _failure(row.kind, f"{row.label}: {_around(text, idx, row.needle)}", _evidence(text, idx))
        start = end + 1
    return None


def _trained_past(text: str, start: int) -> bool:
    """Do at least TRAINED_PAST step records stand in text[start:] (within _TRAINED_PAST_CHARS)?"""
    count = 0
    for line in text[start: start + _TRAINED_PAST_CHARS].splitlines():
        if is_step_record(line):
            count += 1
            if count >= TRAINED_PAST:
                return True
    return False


def _make_recipe(text: str, start: int) -> Failure | None:
    """make's `[target] Error n` (families.config.MAKE_RECIPE) as a helper build failure, unless a Python exception
    ends just above it: then the recipe ran a program, and that program's traceback decides (judge40a)."""
    for _ in range(F_MAX_XID_LINES):
        found = first_match(text, F_CONFIG.MAKE_RECIPE, start)
        if found is None:
            return None
        idx, row = found
        if not F_CONFIG.recipe_ran_program(text, idx):
            return _failure(row.kind, f"{row.label}: {_around(text, idx, row.needle)}", _evidence(text, idx))
        start = idx + 1
    return None


def _xid(text: str, start: int) -> Failure | None:
    """An Xid line whose code the catalogue marks as hardware, or whose code is not in the catalogue but whose
    text names hardware (ECC, NVLink, PCIe, ...); application Xids (13, 31, 43, ...) are not node faults."""
    idx = text.find(P.XID_NEEDLE, start)
    for _ in range(F_MAX_XID_LINES):
        if idx < 0:
            break
        line = line_around(text, idx).strip()
        for match in (_XID.search(line), _XID_CAUSE.search(line)):
            if match is None:
                continue
            code = int(match.group(1))
            meaning, hardware = F_HW.XID_CATALOGUE.get(code, ("", False))
            if code in P.HARDWARE_XIDS or hardware or (code not in F_HW.XID_CATALOGUE
                                                       and F_HW.XID_HARDWARE_WORDS.search(line[match.end():])):
                what = f"Xid {code}" + (f", {meaning}" if meaning else ", not in the catalogue; its text names "
                                                                        "hardware")
                return _failure(FailureKind.NODE_FAILURE, f"GPU hardware fault ({what}): {line[:200]}",
                                _evidence(text, idx))
        idx = text.find(P.XID_NEEDLE, idx + 1)
    return None


F_MAX_XID_LINES = 2000


def _gpu_fault(text: str, start: int) -> Failure | None:
    return (_by_log(text, FailureKind.NODE_FAILURE, P.GPU_FAULT, start)
            or _by_family(text, F_HW.GPU_HARDWARE, start)
            or _xid(text, start)
            or _by_family(text, F_HW.GPU_HARDWARE_SHAPES, start))


# warnings.showwarning's first line (`path.py:123: FutureWarning: message`), a launcher prefix allowed in front
_WARNING_LINE = re.compile(r"^[^\n]{0,400}?\.py:\d{1,7}: \w{0,60}Warning: [^\n]*$", re.MULTILINE)


def _config_assertion(text: str, start: int) -> Failure | None:
    """An AssertionError raised in an argument check (patterns.CONFIG_ASSERT_FILES) or a config validator
    (families.config.asserts_in_validator)."""
    idx = text.find("AssertionError", start)
    while idx >= 0:
        tb = text.rfind("Traceback (most recent call last)", max(start, idx - 20_000), idx)
        frames = text[tb if tb >= 0 else max(start, idx - 3000) : idx]
        # a Python warning printed above the assertion names the file that warned, not a frame of the raise
        # (transformers' training_args.py FutureWarning at start-up is no argument check; judge25)
        frames = _WARNING_LINE.sub("", frames)
        if any(f in frames for f in P.CONFIG_ASSERT_FILES + F_CONFIG.CONFIG_ASSERT_FILES) \
                or F_CONFIG.asserts_arguments(_line_at(text, idx), frames) or F_CONFIG.asserts_in_validator(frames):
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
            name = match.group(1).rstrip(".") if match else "?"
            tb = text.rfind(_TRACEBACK_BODY[0], max(0, idx - 20_000), idx)
            own = F_CONFIG.own_package_module(name, text[tb:idx] if tb >= 0 else "",
                                              text[max(0, tb - 200_000): tb] if tb >= 0 else "")
            if own is not None:
                return _failure(FailureKind.CRASHED, f"a module of the program's own package '{own}' is missing: a "
                                                     f"bug of its code, not an install ({line})", _evidence(text, idx))
            return _failure(FailureKind.CONFIG_ERROR,
                            f"Python module '{name}' is missing: set backend.python to an interpreter that has it "
                            f"({line})", _evidence(text, idx))
    return None


def _nccl_warn(text: str, start: int) -> Failure | None:
    """An NCCL WARN line that says a connection or the fabric failed: a known needle, or any message in a failure
    form (families.network.NCCL_WARN_FAILURE) that is not a plugin or fallback notice."""
    idx, n = text.find(P.NCCL_WARN, start), 0
    while idx >= 0 and n < F_MAX_XID_LINES:
        line = line_around(text, idx).strip()
        message = line[line.find(P.NCCL_WARN) + len(P.NCCL_WARN):]
        for row in P.NCCL_WARN_FAILURES:
            if row.needle in line:
                return _failure(FailureKind.COMM_ERROR, f"{row.label}: {line}", _evidence(text, idx))
        if _NCCL_WARN_FAILURE.search(message) and not _NCCL_WARN_BENIGN.search(message):
            return _failure(FailureKind.COMM_ERROR, f"communication error: {line}", _evidence(text, idx))
        idx = text.find(P.NCCL_WARN, idx + 1)
        n += 1
    return None


# A message wrapped over several lines (a terminal's or reporter's wrap, a logger that breaks long records):
# "ZeRORuntimeException: You are using ZeRO-Offload with a client provided\noptimizer (...) which in most cases will
# yield\npoor performance. Please either use ... or set an optimizer in your ds-config". A following line continues
# the message when the message has not ended (no sentence end, no colon that opens a list of details) and the line
# goes on mid-sentence: it starts with a lower-case letter, a digit or closing punctuation, and is not a frame, a
# caret line or another record.
_SENTENCE_END = re.compile(r"[.!?:]['\")\]]?\s*$")
_CONTINUES = re.compile(r"^\s{0,8}[a-z0-9)\]}>,;:'\"<(]")
# A traceback's source line is no message: a frame's code, printed indented under its `File "..."` line, lands right
# under another rank's exception line when ranks interleave (oos-batch40's MegaBlocks run: "ValueError: not enough
# values to unpack (expected 2, got 0)" then "    tokens_per_expert, expert_scores = zip(*get_load_balancing_loss())",
# whose words read as a parallel setting). A statement: an assignment from a call, or return/raise/yield, indented
# two spaces or more (torch's `[rank0]:` prefix goes with one of the four).
_NOT_CONTINUATION = re.compile(r'^\s{0,12}(?:File "|Traceback |During handling|The above exception|[\^~]{3,})'
                               r"|^\s{2,}(?:[A-Za-z_][\w.]{0,60}(?:\s{0,2},\s{0,2}[A-Za-z_][\w.]{0,60}){0,6}\s=\s"
                               r"[A-Za-z_*][\w.]{0,80}\([^\n]{0,300}\)\s{0,4}$|(?:return|raise|yield)\s)")
_MAX_CONTINUATION_LINES = 4


def _continued(text: str, pos: int) -> str:
    """The lines after the one at `pos` that continue its message ('' when none): what an exception's message
    wrapped onto the next lines holds (a configuration rule's directive, often)."""
    end, out = text.find("\n", pos), list[str]()
    line = text[text.rfind("\n", 0, pos) + 1: len(text) if end < 0 else end]
    while end >= 0 and len(out) < _MAX_CONTINUATION_LINES and not _SENTENCE_END.search(line):
        nxt = text.find("\n", end + 1)
        line = text[end + 1: len(text) if nxt < 0 else nxt]
        if len(line) > _MAX_LINE_SCAN_CHARS or not _CONTINUES.match(line) or _NOT_CONTINUATION.match(line):
            break
        out.append(line.strip())
        end = nxt
    return " ".join(out)


def _config_message(match: re.Match[str] | None, text: str, pos: int) -> bool:
    """Does the exception `match` (families.config.EXCEPTION on the line at `pos`) state a broken configuration
    rule, its message read with the lines that continue it?"""
    if match is None:
        return False
    message = match.group("msg")
    if F_CONFIG.is_config_message(match.group("type"), message):
        return True
    more = _continued(text, pos)
    return bool(more) and F_CONFIG.is_config_message(match.group("type"), f"{message.rstrip()} {more}")


_CONFIG_NEEDLES = ("Error", "Exception", "MissingMandatoryValue")


def _config_shape(text: str, start: int) -> Failure | None:
    """An exception whose type argument checks raise and whose message states a broken configuration rule
    (analysis.logs.families.config), whatever its wording."""
    for needle in _CONFIG_NEEDLES:
        idx, n = text.find(needle, start), 0
        while idx >= 0 and n < F_MAX_XID_LINES:
            line = line_around(text, idx)
            if _config_message(F_CONFIG.EXCEPTION.search(line), text, idx):
                return _failure(FailureKind.CONFIG_ERROR, f"invalid configuration: {_around(text, idx, needle)}",
                                _evidence(text, idx))
            end = text.find("\n", idx)
            idx = text.find(needle, len(text) if end < 0 else end)
            n += 1
    return None


def _empty_data(text: str, start: int) -> Failure | None:
    """The run's data yields nothing (families.config.EMPTY_DATA) before any step: after steps an empty loader is
    not the configuration's fault alone (a later epoch, an evaluation set), so the failure stays the crash's."""
    found = first_match(text, F_CONFIG.EMPTY_DATA, start)
    if found is None:
        return None
    idx, row = found
    before = text[:idx]
    if _has_progress(before, 0) or _last_step_record(before) > 0:
        return None
    return _failure(row.kind, f"{row.label}: {_around(text, idx, row.needle)}", _evidence(text, idx))


def _raised_config(text: str, start: int) -> Failure | None:
    """An error line stating a message that Megatron/DeepSpeed/TE raise in their own config validation
    (families.raised, a table of those messages with their source)."""
    hit = F_RAISED.first_raised(text, start)
    if hit is None:
        return None
    pos, tpl = hit
    return _failure(FailureKind.CONFIG_ERROR, f"invalid configuration ({tpl.framework} check): {_line_at(text, pos)}",
                    _evidence(text, pos))


_NCCL_WARN_FAILURE = re.compile(F_NET.NCCL_WARN_FAILURE)
_NCCL_WARN_BENIGN = re.compile(F_NET.NCCL_WARN_BENIGN)
_NCCL_TRACE = re.compile(r"NCCL INFO [^\n]{0,200}?\.(?:cc|h|cu|cpp):\d{1,6} -> (\d{1,2})\b")


def _nccl_went_on(text: str, idx: int) -> bool:
    """Did NCCL go on after the trace line at idx (a later INFO line that is not a trace)? Then the trace was a
    start-up probe it recovered from ('include/net.h:19 -> 2' before 'Ring 00 : 0 -> 8 via NET/Socket'): an INFO
    line alone never decides a failure."""
    end = text.find("\n", idx)
    pos, n = (text.find("NCCL INFO", end) if end >= 0 else -1), 0
    while pos >= 0 and n < F_MAX_XID_LINES:
        if _NCCL_TRACE.search(line_around(text, pos)) is None:
            return True
        pos, n = text.find("NCCL INFO", pos + 9), n + 1
    return False


def _nccl_trace(text: str, start: int) -> Failure | None:
    """NCCL's NCCLCHECK trace ('NCCL INFO file.cc:123 -> 2'): a failing call propagating up NCCL's stack."""
    idx, n = text.find(" -> ", start), 0
    while idx >= 0 and n < F_MAX_XID_LINES:
        line = line_around(text, idx)
        match = _NCCL_TRACE.search(line)
        if match is not None and int(match.group(1)) in F_NET.NCCL_TRACE_CODES and not _nccl_went_on(text, idx):
            code = int(match.group(1))
            return _failure(FailureKind.COMM_ERROR, f"communication error (NCCL returned {code}, "
                                                    f"{F_NET.NCCL_TRACE_CODES[code]}): {line.strip()[:200]}",
                            _evidence(text, idx))
        idx = text.find(" -> ", idx + 4)
        n += 1
    return None


def _diverged(text: str, start: int, losses: tuple[float, ...]) -> Failure | None:
    """A divergence line (families.divergence.DIVERGENCE), the last Megatron record showing a NaN run, or a
    logged loss series that ends in NaN/inf."""
    found = _by_family(text, F_DIV.DIVERGENCE, start)
    if found is not None:
        return found
    record = F_DIV.megatron_record_diverged(text, start)
    if record is not None:
        idx, why = record
        return _failure(FailureKind.DIVERGED, f"loss diverged ({why}): {_around(text, idx, 'iteration')}",
                        _evidence(text, idx))
    trainer = F_DIV.trainer_grad_norm_diverged(text)
    if trainer is not None:
        idx, why = trainer
        return _failure(FailureKind.DIVERGED, f"loss diverged ({why}): {_line_at(text, idx)}", _evidence(text, idx))
    skipped = (F_DIV.deepspeed_skipped_diverged(text) or F_DIV.deepspeed_scale_collapsed(text)
               or F_DIV.fairseq_scale_collapsed(text) or F_DIV.loss_scale_collapsed(text)
               or F_DIV.scale_reduced_to_zero(text))
    if skipped is not None:
        idx, why = skipped
        return _failure(FailureKind.DIVERGED, f"loss diverged ({why}): {_around(text, idx, 'skipped=')}",
                        _evidence(text, idx))
    series_why = F_DIV.series_diverged(losses)
    if losses and losses[-1] == 0.0 and F_DIV.zero_loss_is_rounding(text):
        series_why = None
    if (series_why is not None and not _lone_zero_beside_comm_failure(text, start, losses)
            and not _jump_outranked_by_end(text, start, losses)):
        return _failure(FailureKind.DIVERGED, f"loss diverged: {series_why}")
    bare = F_DIV.bare_records_diverged(text)
    if bare is not None and bare[0] >= start:
        return _failure(FailureKind.DIVERGED, f"loss diverged ({bare[1]}): {_line_at(text, bare[0])}",
                        _evidence(text, bare[0]))
    return None


def _jump_outranked_by_end(text: str, start: int, losses: tuple[float, ...]) -> bool:
    """A loss jump (families.divergence.loss_jumped: a finite series that jumped and stayed up, not a NaN/inf or a
    0.0 end) is a reading of the records; it does not stop a job. When the lines after the last progress say what
    did end it, that wins (judge41, oos-batch36): the scheduler's time limit (patterns.TIME_LIMIT, SLURM's
    slurmstepd `*** JOB n ON host CANCELLED AT t DUE TO TIME LIMIT ***`, src/slurmd/slurmstepd/req.c) or the job's
    own traceback ending in an exception line (CPython's `Traceback (most recent call last):` then `Name: message`;
    not a wrapper's, analysis.logs.wrappers), e.g. a summary's `ValueError: min() arg is an empty sequence` after
    the loop. The other signatures then classify the end (time_limit, crashed, ...)."""
    finite = [v for v in losses if math.isfinite(v)]
    if not finite or len(finite) != len(losses) or losses[-1] == 0.0 or F_DIV.loss_jumped(losses) is None:
        return False
    if _first(text, P.TIME_LIMIT, start) is not None:
        return True
    exc = _exception_line(text, start)
    traceback_at = _job_traceback(text, start)
    return exc is not None and not exc[2] and 0 <= traceback_at < exc[0]


def _lone_zero_beside_comm_failure(text: str, start: int, losses: tuple[float, ...]) -> bool:
    """One exactly-0.0 loss record at the end, in a log that shows a communication failure: the collective that
    failed explains the run's end, and one 0.0 is too little to call it diverged (LlamaFactory#8261: `'loss': 0.0`
    then an NCCL watchdog timeout). Two or more 0.0 records, or a NaN/inf loss, still decide divergence."""
    if len(losses) < 2 or losses[-1] != 0.0 or losses[-2] == 0.0:
        return False
    return (_by_log(text, FailureKind.COMM_ERROR, P.COMM, start) or _by_family(text, F_NET.NETWORK, start)) is not None


# judge18a: newer srun (Slurm 22.05+) says "srun: Terminating StepId=2611400.1" where older ones said "srun:
# Terminating job step", and slurmstepd's line then reads "*** STEP 2611400.1 ON nid006687 CANCELLED AT ... DUE TO
# TASK FAILURE ***": the step was ended because a task failed (srun --kill-on-bad-exit), so that task's error is the
# cause (fixture oos-batch17/megatron_lm/attn_bench_nccl_init_failed_to_initialize_any_net_plugin_1.log).
_SRUN_TERMINATING = (P.SRUN_TERMINATING, "srun: Terminating StepId=")
_TASK_FAILURE_CANCEL = "DUE TO TASK FAILURE"


def _cancelled(text: str, start: int, state: str | None) -> Failure | None:
    """A cancellation, unless srun cancelled the step itself because a task had failed ("srun: Terminating job
    step" before the CANCELLED line): then the failure of that task is the cause, looked for further on."""
    failure = _by_log(text, FailureKind.CANCELLED, P.CANCELLED, start, state, "cancelled")
    if failure is not None and failure.evidence:
        idx = text.find(P.CANCELLED[0].needle, start)
        ends_at = _line_bounds(text, idx)[1]
        if (any(text.rfind(line, start, idx) >= 0 for line in _SRUN_TERMINATING)
                or text.find(_TASK_FAILURE_CANCEL, idx, ends_at) >= 0):
            return None
    return failure


# Python's traceback header, not Paddle's "C++ Traceback (most recent call last):"
_PY_TRACEBACK = re.compile(r"(?m)^\W{0,40}Traceback \(most recent call last\):")


def _outside_stop(text: str, start: int) -> Failure | None:
    """A stop from outside (families.orchestrator.OUTSIDE_STOP), unless srun terminated the step first because a
    task had failed: torchrun's agents then get srun's SIGTERM ("Received 15 death signal, shutting down workers"),
    which is the teardown, not the cause (judge46b, oos-batch41's Megatron run whose ranks all failed an assert
    before `srun: Terminating StepId=...`); the failed task's own lines are looked for further on."""
    failure = _by_family(text, F_ORCH.OUTSIDE_STOP, start)
    if failure is None:
        found = first_match(text, F_ORCH.TERMINATED, start)
        if found is None or _PY_TRACEBACK.search(text, start, found[0]) is not None:
            return None  # a SIGTERM below a Python traceback: the teardown after that failure (F_ORCH.TERMINATED)
        return _row_failure(text, *found)
    if not failure.evidence:
        return failure
    found = first_match(text, F_ORCH.OUTSIDE_STOP, start)
    idx = found[0] if found is not None else len(text)
    if any(text.rfind(line, start, idx) >= 0 for line in _SRUN_TERMINATING):
        return None
    return failure


def _has_progress(text: str, start: int) -> bool:
    return _PROGRESS.search(text, start) is not None or any(text.find(m, start) >= 0 for m in _RESULT_MARKERS)


# ProcessGroupNCCL's watchdog ending the job after a stall point: the job did not stop at the stall point but was
# ended by a collective timeout there (the other ranks waited for the stuck one), which is the comm_error the corpus
# labels such logs (Megatron-LM#1050: fused-kernel build lock, then the watchdog).
_WATCHDOG_TIMEOUT = "Watchdog caught collective operation timeout"


def _stall_point(text: str, start: int) -> tuple[int, P.StallPoint] | None:
    """The first known stall point (in table order: the fused-kernel lock is more telling than the extension
    build it waits for) that the log never got past: no 'done' line, progress or traceback after it."""
    for point in P.STALL_POINTS:
        idx = text.rfind(point.marker, start)
        if idx < 0:
            continue
        line_start, line_end = _line_bounds(text, idx)
        if any(text.find(done, line_start) >= 0 for done in point.done) \
                or text.find("Traceback", line_end) >= 0 or _has_progress(text, line_end) \
                or text.find(_WATCHDOG_TIMEOUT, idx) >= 0:
            continue
        return idx, point
    return None


# The shell's report of a child it saw die of SIGKILL: bash's "Killed", "./run.sh: line 39: 2810536 Killed
# python train.py ..." (the script, line, pid, then the command), job control's "[1]+  Killed  python train.py", and
# "Killed" glued to a progress bar the child left without its newline ("| 331/1063 [01:06<03:59,  3.06it/s]Killed").
_SHELL_KILLED = re.compile(r"(?:[^\n]{0,4000}\])?Killed"
                           r"|(?:[^\n]{0,300}: line \d{1,6}:\s{1,8}\d{1,10}\s{1,8}|\[\d{1,4}\][+-]?\s{1,8})"
                           r"Killed(?:\s{1,40}\S[^\n]{0,500})?")


def _shell_killed(line: str) -> bool:
    return _SHELL_KILLED.fullmatch(line.strip()) is not None


def _last_line(text: str) -> str:
    stripped = text.rstrip()
    return _line_at(stripped, len(stripped) - 1) if stripped else "(empty log)"


_NO_EXIT_GAP_LINES = 3  # blank lines allowed between the line saying training finished and the time-limit line


# slurmstepd's step-end line; the reason, when there is one, follows "CANCELLED AT <time>" as " DUE TO <reason>".
_SLURM_STEP_END = re.compile(r"\*\*\* (?:STEP|JOB) [\w.+]+ ON\b")


def _scheduler_end(text: str, start: int) -> int:
    """Position of the first time-limit line or reasonless (or cut) slurmstepd step-end line at or after `start`;
    -1 when none."""
    first = text.find(P.TIME_LIMIT[0].needle, start)
    for match in _SLURM_STEP_END.finditer(text, start):
        if first >= 0 and match.start() > first:
            break
        if "DUE TO" not in _line_at(text, match.start()):
            return match.start()
    return first


_NO_EXIT_CHATTER_LINES = 40  # chatter lines passed over between the finish line and the scheduler's end


def _chatter(line: str, indented: bool, above: str | None) -> bool:
    """Is `line` a library's chatter line (families.stall.CHATTER), or (`indented`) the source line
    warnings.formatwarning prints under a warning (`above`, the line before it) that is?"""
    if F_STALL.is_chatter(message_of(line.strip())):
        return True
    return (indented and above is not None and "Warning: " in above
            and F_STALL.is_chatter(message_of(above.strip())))


def _is_chatter_line(text: str, line_start: int, line: str) -> bool:
    """_chatter for the file's line at `line_start`."""
    above = text[text.rfind("\n", 0, line_start - 1) + 1: line_start - 1] if line_start else None
    return _chatter(line, line[:1] in (" ", "\t"), above)


def _no_exit_after_training(text: str, start: int) -> Failure | None:
    """A job that said its training finished (families.completion) and printed nothing more until the scheduler's
    time limit ended it: the program never exited (a profiler's or a process group's shutdown that waits forever;
    Megatron-Bridge#1656, #3427 "[after training is done]" then minutes of silence and "CANCELLED AT ... DUE TO TIME
    LIMIT"). Not when anything else comes between (a final evaluation, a checkpoint save: work the limit cut).
    judge17: slurmstepd ends a step with one line, "*** STEP|JOB <id> ON <node> CANCELLED AT <time>[ DUE TO
    <reason>] ***" (Slurm's slurmstepd/req.c and mgr.c); after training finished, that line without a reason (a
    scancel of the job that would not exit) or cut before its reason ends the job the same way; a stated reason
    other than the time limit (preemption, node failure) is that reason, not a hang."""
    idx = _scheduler_end(text, start)
    if idx < 0:
        return None
    end, blanks = text.rfind("\n", 0, idx), 0
    for _ in range(_NO_EXIT_GAP_LINES + 1 + _NO_EXIT_CHATTER_LINES):
        if end < 0:
            return None
        line_start = text.rfind("\n", 0, end) + 1
        line = text[line_start:end]
        if line.strip() and not _is_chatter_line(text, line_start, line):
            break
        blanks += not line.strip()  # library chatter (a warning at shutdown) is not work the limit cut (judge44a)
        if blanks > _NO_EXIT_GAP_LINES:
            return None
        end = line_start - 1
    else:
        return None
    if not any(row.needle in line and row.matches(line) for row in F_DONE.COMPLETION):
        return None
    return _failure(FailureKind.HANG, f"training finished but the job did not exit until the scheduler ended it: "
                                      f"{line.strip()[:160]}; then {_line_at(text, idx)[:160]}", _evidence(text, idx))


def _compile_target(text: str, start: int) -> Failure | None:
    """A GPU-architecture refusal (families.config.COMPILE_TARGET) in a run that had not started training: no
    progress before `start` and none before the refusal (an iteration record, a result line, or any step record or
    training bar the generic reader finds there: with an exit code or a SLURM state the signatures are searched
    from the log's start)."""
    if start > 0:
        return None
    found = first_match(text, F_CONFIG.COMPILE_TARGET, start)
    if found is None or _PROGRESS.search(text, 0, found[0]) is not None \
            or any(text.find(m, 0, found[0]) >= 0 for m in _RESULT_MARKERS) \
            or read_records(text[:found[0]]).n_records > 0 \
            or _trained_past(text, found[0]):  # torch's capability warning, then steps (judge50a): not fatal
        return None
    idx, row = found
    return _failure(row.kind, f"{row.label}: {_around(text, idx, row.needle)}", _evidence(text, idx))


def _shell_script(text: str, start: int) -> Failure | None:
    """The job script's own shell error (families.config.SHELL_SCRIPT) that ended the script
    (families.config.script_stopped) before any training progress: the same no-progress test as _compile_target."""
    if start > 0:
        return None
    found = first_match(text, F_CONFIG.SHELL_SCRIPT, start)
    if found is None or _PROGRESS.search(text, 0, found[0]) is not None \
            or any(text.find(m, 0, found[0]) >= 0 for m in _RESULT_MARKERS) \
            or read_records(text[:found[0]]).n_records > 0 \
            or not F_CONFIG.script_stopped(text, found[0]):  # only when a shell error is found: rare, and bounded
        return None
    idx, row = found
    return _failure(row.kind, f"{row.label}: {_around(text, idx, row.needle)}", _evidence(text, idx))


def _hydra_target(text: str, start: int) -> Failure | None:
    """Hydra's instantiate wrapping a configuration's error (families.config.hydra_target_error)."""
    pos = F_CONFIG.hydra_target_error(text, start)
    if pos is None:
        return None
    return _failure(FailureKind.CONFIG_ERROR, f"{F_CONFIG.ENV_LABEL}: {_line_at(text, pos)}", _evidence(text, pos))


def _string_config_value(text: str, start: int) -> Failure | None:
    """A DeepSpeed config value left as a string and compared with a number (families.config.STR_COMPARE)."""
    pos = F_CONFIG.config_value_typed_as_string(text, start)
    if pos is None:
        return None
    return _failure(FailureKind.CONFIG_ERROR, f"a DeepSpeed config value is a string where a number is needed "
                    f"(an HF \"auto\" left unreplaced?): {_line_at(text, pos)}", _evidence(text, pos))


def _stack_dump(text: str, start: int) -> Failure | None:
    """A stack dump of the live job (families.dumps; its marker line) in text[start:] with no traceback after it."""
    marker = F_DUMP.live_marker(text, text.rfind("\n", 0, start) + 1 if start else 0)
    if marker is None:
        return None
    after = text.find(_TRACEBACK, marker)
    if after >= 0 and not _killed_traceback(text, after):
        return None
    return _failure(FailureKind.HANG, f"a stack dump of the stuck job: {_line_at(text, marker)}",
                    _evidence(text, marker))


def _without_dumps(text: str) -> str:
    """`text` with its live stack dumps blanked but for their marker lines (families.dumps.masked): a dump's
    command line, frames and locals are not the job's output; a long log's window keeps its bookkeeping."""
    dumps = F_DUMP.live_dumps(text)
    if not dumps:
        return text
    shown = F_DUMP.masked(text, dumps)
    if not isinstance(text, _Window):
        return shown
    view = _Window(shown)
    view.head_chars, view.tail_from, view.skipped_lines = text.head_chars, text.tail_from, text.skipped_lines
    return view


# Errors a program reports and then goes on from are not what ended the run, however they are worded: Python's
# sys.unraisablehook prints "Exception ignored in: <object>" (or "Exception ignored in atexit callback: <f>") and
# then a traceback for an exception raised in __del__, a weakref callback or an atexit handler, i.e. at exit, after
# whatever ended the run (DeepSpeed's Triton autotune cache `os.replace(...pickle.tmp...)` FileNotFoundError at exit
# after a rank's NameError); and a glog/c10 line at warning or info level ("W0527 00:19:08.340000 50695
# torch/_inductor/codecache.py:1052] ... FileNotFoundError: ...", "[W313 14:19:33 ...] ..."), which c10's and
# torch's loggers use for an exception caught and handled (torch inductor's cache miss) -- the failure is logged at
# E level or raised. Both are blanked (length kept, so positions stay) before any family reads the text.
_GLOG_SOFT_LEVEL = re.compile(r"^\s{0,4}\[?[WI]\d{3,4} \d\d:\d\d:\d\d[.\d]{0,12} ")
_ASIDE_EXCEPTION = re.compile(r"\b[A-Z]\w{0,60}(?:Error|Exception)\b")
_MAX_ASIDE_LINES = 60  # lines of an ignored traceback looked at for its exception line
_ASIDE_NEEDLE = re.compile(r"(?:Error|Exception)\b")
_MAX_ASIDE_MATCHES = 20_000
# judge40a: an atexit handler's exception is set aside even when it is the log's only traceback: CPython runs atexit
# callbacks after the program's main code has returned (Modules/atexitmodule.c atexit_callfuncs: "Exception ignored in
# atexit callback: <f>" through _PyErr_WriteUnraisableMsg, 3.13's "Exception ignored in atexit callback <f>:"), so it
# cannot be what ended the run (oos-batch35: DeepSpeed's Triton autotune cache FileNotFoundError after all 30
# iterations). An ignored exception from __del__ alone still speaks (DeepSpeedCPUAdam.__del__, above).
_ATEXIT = "Exception ignored in atexit callback"


def _aside_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of each ignored traceback (its "Exception ignored in" line through its exception line) and each
    warning-level log line that carries an exception."""
    spans: list[tuple[int, int]] = []
    # an ignored traceback is only set aside for another one: alone it is all the log says (DeepSpeedCPUAdam.__del__'s
    # AttributeError is how a CPU Adam op that never built shows)
    others = text.count(_TRACEBACK) > text.count(_IGNORED) or _headerless_exception(text, 0) is not None
    idx = text.find(_IGNORED)
    while idx >= 0 and len(spans) < _MAX_TRACEBACKS:
        start = text.rfind("\n", 0, idx) + 1
        pos, end = _line_bounds(text, idx)[1] + 1, -1
        for _ in range(_MAX_ASIDE_LINES):
            if pos >= len(text):
                break
            stop = text.find("\n", pos)
            stop = len(text) if stop < 0 else stop
            if _EXCEPTION.match(split_prefix(text[pos:stop])[1].strip()):
                end = stop
                break
            pos = stop + 1
        if end > 0 and (others or text.startswith(_ATEXIT, idx)):
            spans.append((start, end))
        idx = text.find(_IGNORED, max(end, idx + 1))
    for n, match in enumerate(_ASIDE_NEEDLE.finditer(text)):
        if n >= _MAX_ASIDE_MATCHES:  # a log of a million error lines stays fast; the first ones are the ones that rank
            break
        start, end = _line_bounds(text, match.start())
        if spans and spans[-1][0] <= start < spans[-1][1]:
            continue
        body = message_of(text[start:end])
        if _GLOG_SOFT_LEVEL.match(body) is not None and _ASIDE_EXCEPTION.search(body) is not None:
            spans.append((start, end))
        if len(spans) > 4 * _MAX_TRACEBACKS:
            break
    return sorted(spans)


def _without_asides(text: str) -> str:
    spans = _aside_spans(text) if (_IGNORED in text or "Error" in text or "Exception" in text) else []
    return _blanked(text, spans) if spans else text


def _blanked(text: str, spans: list[tuple[int, int]]) -> str:
    """`text` with each (start, end) span of the sorted `spans` turned to spaces (offsets stay where they were); an
    overlapping span is skipped. A `_Window` stays a window over the same head and tail."""
    parts, done = [], 0
    for start, end in spans:
        if start < done:
            continue
        parts += [text[done:start], " " * (end - start)]
        done = end
    shown = "".join(parts) + text[done:]
    if not isinstance(text, _Window):
        return shown
    view = _Window(shown)
    view.head_chars, view.tail_from, view.skipped_lines = text.head_chars, text.tail_from, text.skipped_lines
    return view


# Ray's worker-died text lists possible causes ("There are some potential root causes. (1) The process is killed by
# SIGKILL by OOM killer ... (2) ray stop --force is called. (3) The worker is crashed unexpectedly due to SIGSEGV or
# other unexpected errors."): the causes after the first are blanked so that no crash signature (SIGSEGV) reads them
# as evidence; the first stays for families.memory.RAY_WORKER_DIED, checked after every other family.
_LISTED_CAUSES = "There are some potential root causes."
_LATER_CAUSE = re.compile(r" ?\(2\) ")


def _without_listed_causes(text: str) -> str:
    idx = text.find(_LISTED_CAUSES)
    if idx < 0:
        return text
    spans = []
    while idx >= 0:
        end = text.find("\n", idx)
        end = len(text) if end < 0 else end
        later = _LATER_CAUSE.search(text, idx, end)
        if later is not None:
            spans.append((later.start(), end))
        idx = text.find(_LISTED_CAUSES, end)
    return _blanked(text, spans)


_KILL_TYPES = ("KeyboardInterrupt", "SystemExit", "SIGTERM", "SignalException")


def _killed_traceback(text: str, idx: int) -> bool:
    """Is the traceback at text[idx] the one the user's kill of a stuck job prints (its exception is an interrupt,
    or the excerpt ends before any exception line)?"""
    _, line = _traceback_end(text, idx)
    return line.lstrip().startswith(_TRACEBACK) or any(t in line for t in _KILL_TYPES)


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


def _traceback_end(text: str, idx: int) -> tuple[int, str]:
    """(position, line) of the exception that ends the traceback starting at text[idx], e.g. 'RuntimeError: CUDA
    error: ...', following the traceback's own rank when several ranks' tracebacks are interleaved; the
    "Traceback" line itself when no exception line follows."""
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


_MAX_TRACEBACKS = 200  # tracebacks looked at for one that is not a wrapper's (a 20 MB log stays fast)
# Python's sys.unraisablehook (an exception in __del__, a weakref callback or at interpreter exit) prints
# "Exception ignored in: <object>" and then the traceback: the program goes on, so that traceback is not the job's.
_IGNORED = "Exception ignored in"


def _ignored_traceback(text: str, idx: int) -> bool:
    """Is the traceback at text[idx] one that Python reports as ignored (the line above says so)?"""
    line_start = text.rfind("\n", 0, idx) + 1
    end_above = line_start - 1
    # one or two empty lines between (a blank the program or a logger printed) do not separate them
    while end_above > 0 and text[end_above - 1] == "\n" and line_start - end_above < 3:
        end_above -= 1
    above = max(text.rfind("\n", 0, max(0, end_above)) + 1, line_start - 2000)  # a giant line stays cheap
    return text.find(_IGNORED, above, idx) >= 0


def _job_traceback(text: str, start: int) -> int:
    """Position of the first traceback after `start` that is not an ignored one; -1 when there is none."""
    idx = text.find(_TRACEBACK, start)
    for _ in range(_MAX_TRACEBACKS):
        if idx < 0 or not _ignored_traceback(text, idx):
            return idx
        idx = text.find(_TRACEBACK, idx + 1)
    return -1


def _exception_line(text: str, start: int) -> tuple[int, str, bool] | None:
    """(position, exception line, is a wrapper's) of the first traceback raised by the job itself; a wrapper's
    (analysis.logs.wrappers: torchrun's ChildFailedError, submitit, parasweep's keeper) only when every traceback
    is one."""
    idx, wrapper = _job_traceback(text, start), None
    if idx < 0:
        headerless = _headerless_exception(text, start)
        return (headerless[0], headerless[1], False) if headerless is not None else None
    for _ in range(_MAX_TRACEBACKS):
        if idx < 0:
            break
        pos, line = _traceback_end(text, idx)
        if not is_wrapper_exception(line):
            return pos, line, False
        wrapper = wrapper or (pos, line, True)
        idx = _job_traceback(text, max(pos, idx) + 1)
    return wrapper


# An exception rendered without a "Traceback (most recent call last):" header: a debugger's rendering (debugpy:
# "Exception has occurred: RuntimeError" with the message on the next line, then the frames) or a trace printed
# newest-first. Its shape: an exception type on one of the few lines before a `File "...", line N` frame.
_HEADERLESS_TYPE = re.compile(r"^\s{0,8}(?:Exception has occurred:\s{0,4})?(?P<type>(?:[A-Za-z_]\w{0,60}\.){0,6}"
                              r"[A-Za-z_]\w{0,60}(?:Error|Exception|Interrupt|Failure))\b:?(?P<msg>[^\n]{0,400})$")
_FRAME = 'File "'
_FRAME_SHAPE = re.compile(r'^\s{0,12}File "[^"\n]{1,400}", line \d{1,7}')
_HEADERLESS_LOOKBACK = 4  # lines above the first frame where the exception type may stand
_MAX_FRAMES = 200


def _headerless_exception(text: str, start: int) -> tuple[int, str] | None:
    """(position, 'Type: message') of an exception printed without a traceback header, above its first frame;
    with no frame at all, a bare exception line (_bare_exception)."""
    if text.find(_FRAME, start) < 0:
        return _bare_exception(text, start)
    idx, n = text.find(_FRAME, start), 0
    while idx >= 0 and n < _MAX_FRAMES:
        line_start = text.rfind("\n", 0, idx) + 1
        if _FRAME_SHAPE.match(split_prefix(text[line_start: idx + 420])[1]):
            lines = text[max(start, line_start - 2000): line_start].split("\n")[:-1][-_HEADERLESS_LOOKBACK:]
            for k, line in enumerate(lines):
                match = _HEADERLESS_TYPE.match(split_prefix(line)[1])  # a launcher's prefix ('server1: ') removed
                if match is None:
                    continue
                message = match.group("msg").strip()
                if not message or message.startswith("("):  # debugpy: "(note: full exception trace is shown...)"
                    message = split_prefix(lines[k + 1])[1].strip() if k + 1 < len(lines) else ""
                pos = line_start - sum(len(x) + 1 for x in lines[k:])
                return pos, f"{match.group('type')}: {message}"[:300]
            return None  # the first frame has no exception type above it: a traceback cut off, or a stack dump
        idx, n = text.find(_FRAME, idx + len(_FRAME)), n + 1
    return None


# The exception line alone, as a report quotes it or a launcher relays it: no header and no frame, e.g.
# "AssertionError: last epoch number of samples exceeded max value." or "[rank3]: RuntimeError: Expected all tensors
# to be on the same device ...". Its shape: a line (after a rank prefix) that starts with an exception type and a
# colon, the way Python's traceback module ends a traceback (traceback.format_exception_only).
_BARE_TYPE = re.compile(r"^\s{0,8}(?P<type>(?:[A-Za-z_]\w{0,60}\.){0,6}[A-Z]\w{0,60}(?:Error|Exception)): "
                        r"(?P<msg>[^\n]{1,400})$")
_BARE_NEEDLES = ("Error: ", "Exception: ")


def _bare_exception(text: str, start: int) -> tuple[int, str] | None:
    """(position, 'Type: message') of the first line in the exception line's shape (_BARE_TYPE)."""
    best: tuple[int, str] | None = None
    for needle in _BARE_NEEDLES:
        idx, n = text.find(needle, start), 0
        while idx >= 0 and n < _MAX_FRAMES and (best is None or idx < best[0]):
            line_start, line_end = _line_bounds(text, idx)
            _, body = split_prefix(text[line_start:line_end])
            match = _BARE_TYPE.match(body)
            if match is not None:
                best = (line_start, f"{match.group('type')}: {match.group('msg').strip()}"[:300])
                break
            idx, n = text.find(needle, line_end), n + 1
    return best


_ABOVE_LINES = 3  # lines above a cut traceback's header where the error it reports may stand


def _error_above(text: str, header: int) -> tuple[int, str, bool] | None:
    """(position, 'Type: message', False) of an exception line (_BARE_TYPE) among the _ABOVE_LINES lines above the
    traceback header at `header`, when that traceback is cut before its own exception line: the earlier line is the
    same error's statement (DeepSpeed 0.8's `Exception: >- DeepSpeed Op Builder: ...` then the trainer's traceback;
    `[rank0]: RuntimeError: ...` then the launcher's), and says more than a header with no exception."""
    line_start = text.rfind("\n", 0, header) + 1
    lines = text[max(0, line_start - 2000): line_start].split("\n")[:-1][-_ABOVE_LINES:]
    pos = line_start
    for line in reversed(lines):
        pos -= len(line) + 1
        match = _BARE_TYPE.match(split_prefix(line)[1])
        if match is not None and not is_wrapper_exception(line):
            return pos, f"{match.group('type')}: {match.group('msg').strip()}"[:300], False
    return None


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


# Crash markers of the job's own processes: CRASH without the traceback row (a traceback is judged by its exception
# line) and without torchrun's ChildFailedError summary (a wrapper's).
_OWN_CRASH = tuple(row for row in P.CRASH if row.needle != _TRACEBACK and not is_wrapper_exception(row.needle))
# Crash markers other than a traceback (a traceback is looked for with _job_traceback, which skips ignored ones).
_CRASH_MARKERS = tuple(row for row in P.CRASH if row.needle != _TRACEBACK)


def _failure_report(text: str, offset: int) -> bool:
    """Is the line at `offset` a launcher's report of a child's non-zero exit (the DeepSpeed launcher's
    "[ERROR] [launch.py:341:sigkill_handler] ['python', 'pretrain_gpt.py', ..., '--train-iters', '20', ...] exits with
    return code = 1")? The command line it quotes holds the run's arguments, which a reader may take for a step
    record; a failure report is never the run's progress."""
    start, end = _line_bounds(text, offset)
    match = _REPORTED_EXIT.search(text, start, end)
    return match is not None and int(match.group(1)) != 0


def _crashed_by_report(text: str, start: int) -> Failure | None:
    """A launcher's report of its child's non-zero exit status (2 is judged as a config error elsewhere)."""
    reported = _reported_exit_code(text, start)
    if reported is None or reported[1] == 2:
        return None
    idx, code = reported
    if code in _SIGKILL_CODES:
        return _failure(FailureKind.OOM, f"{_SIGKILL_OOM} ({_exit_text(code)}, as the launcher reports): "
                                         f"{_line_at(text, idx)[-110:]}", _evidence(text, idx))
    return _failure(FailureKind.CRASHED, f"crashed ({_exit_text(code)}, as the launcher reports): "
                                         f"{_line_at(text, idx)[-110:]}", _evidence(text, idx))


def _fallback(text: str, start: int, state: str | None, exit_code: int | None) -> Failure:
    """No failure family matched. The evidence of a crash is the job's own exception (the first traceback that is
    not a wrapper's); else a launcher's report of the child's exit status (with the job's exit status unknown,
    before a crash marker such as an abort or a core dump; with it known, after one); and a wrapper's traceback
    (analysis.logs.wrappers) only when it is all the log holds."""
    exc = _exception_line(text, start)
    own = exc if exc is not None and not exc[2] else None
    if exit_code is None and own is None:
        reported = _crashed_by_report(text, start)
        if reported is not None:
            return reported
    if exit_code == 2:
        return _failure(FailureKind.CONFIG_ERROR, f"exit code 2 (argument/config validation): {_last_line(text)}")
    if own is None or _TRACEBACK in own[1]:  # no exception line: the frames of a cut traceback may name the family
        cut = _cut_traceback_family(text)
        if cut is not None:
            return cut
    if own is not None and _TRACEBACK in own[1]:
        own = _error_above(text, own[0]) or own
    if own is not None:  # an exception whose message states a broken configuration rule, however it was rendered
        if _config_message(F_CONFIG.EXCEPTION.search(own[1]), text, own[0]):
            return _failure(FailureKind.CONFIG_ERROR, f"invalid configuration: {own[1]}", _evidence(text, own[0]))
        inputs = (F_CONFIG.input_error(own[1], text[max(0, own[0] - 2000): own[0]])
                  or F_CONFIG.contract_error(own[1], text[max(0, own[0] - 2000): own[0]]))
        if inputs is not None:
            return _failure(FailureKind.CONFIG_ERROR, f"{inputs}: {own[1]}", _evidence(text, own[0]))
    crash = _first(text, P.CRASH, start)
    if crash is not None or own is not None:
        marker = _first(text, _OWN_CRASH, start) if own is None else None
        if own is not None:
            idx, line = own[0], own[1]
        elif marker is not None:
            idx, line = marker[0], _line_at(text, marker[0])
        else:
            reported = _crashed_by_report(text, start)
            if reported is not None:  # the child's exit status says more than the wrapper's re-raise of it
                return reported
            if exc is not None:
                idx, line = exc[0], exc[1]
            else:
                idx = crash[0] if crash is not None else start
                line = _line_at(text, idx)
        return _failure(FailureKind.CRASHED, f"crashed: {line}", _evidence(text, idx))
    last = _last_line(text)
    if exit_code in (None, *_SIGKILL_CODES) and _shell_killed(last):  # the shell's report of a SIGKILLed child
        # A host or cgroup OOM kill reported anywhere in the log (a job's .err is often printed before its .out)
        # explains the SIGKILL.
        host_oom = (_by_log(text, FailureKind.OOM, P.HOST_OOM, 0)
                    or _by_family(text, F_MEM.HOST_MEMORY + F_MEM.RAY_WORKER_DIED, 0))
        if host_oom is not None and host_oom.kind == FailureKind.OOM:
            return host_oom
        return _failure(FailureKind.OOM, f"{_SIGKILL_OOM} (the shell's report): {last}",
                        _evidence(text, len(text.rstrip()) - 1))
    if exit_code in _SIGKILL_CODES:
        return _failure(FailureKind.OOM, f"{_SIGKILL_OOM} ({_exit_text(exit_code)}): {_last_line(text)}")
    if (exit_code not in (None, 0)) or state == "FAILED":
        what = _exit_text(exit_code) if exit_code not in (None, 0) else f"SLURM state {state}"
        return _failure(FailureKind.CRASHED, f"crashed ({what}): {_last_line(text)}")
    if exit_code == 0 or state == "COMPLETED":
        return _failure(FailureKind.UNKNOWN, f"finished, no metrics I can read; last line: {_last_line(text)}")
    killed = _launcher_killed(text, start)
    if killed is not None:
        return killed
    frame = _ends_in_traceback(text)
    if frame is None:  # the renderings families.frames reads (IPython's, rich's code lines, logger prefixes)
        tail = _tail_lines(text)
        frames = F_FRAMES.cut_traceback(_raw_lines(text, tail))
        frame = tail[frames[0].at][0] if frames is not None else None
    if frame is not None:
        return _failure(FailureKind.CRASHED, f"crashed (the log ends inside a traceback, before its exception line): "
                                             f"{_line_at(text, frame)[-160:]}", _evidence(text, frame))
    return _failure(FailureKind.UNKNOWN, f"no failure signature; last line: {_last_line(text)}")


def _raw_lines(text: str, tail: list[tuple[int, str]]) -> list[str]:
    """The lines of `tail` (_tail_lines) as the log has them, indentation kept (a frame's code is indented under
    it)."""
    out = []
    for pos, _ in tail:
        end = text.find("\n", pos)
        out.append(text[pos: len(text) if end < 0 else end][:_MAX_LINE_SCAN_CHARS].rstrip())
    return out


def _cut_traceback_family(text: str) -> Failure | None:
    """The log ends inside a traceback, before its exception line, and its innermost frames are at a place that
    fails for one reason (families.frames)."""
    tail = _tail_lines(text)
    frames = F_FRAMES.cut_traceback(_raw_lines(text, tail))
    rule = F_FRAMES.cut_frames_family(frames) if frames is not None else None
    if frames is None or rule is None:
        return None
    pos = tail[frames[0].at][0]
    return _failure(rule.kind, f"{rule.label}: {_line_at(text, pos)[-160:]}", _evidence(text, pos))


def _launcher_killed(text: str, start: int) -> Failure | None:
    """The launcher's kills of its ranks (families.orchestrator.LAUNCHER_KILLS) at or after `start`, with no return
    code or signal line after the last of them: a crash whose cause the log does not show."""
    found = _by_family(text, F_ORCH.LAUNCHER_KILLS, start)
    if found is None:
        return None
    last = text.rfind(F_ORCH.LAUNCHER_KILLS[0].needle)
    if any(text.find(report, last) >= 0 for report in F_ORCH.LAUNCHER_REPORTS):
        return None
    return found


# A Python traceback's frame, plain ('  File "x.py", line 3, in f', launcher prefixes stripped) or as rich draws it
# ('│ /path/config.py:891 in _batch_assertion │'); not a stack dump of a live process (faulthandler's 'File "x.py",
# line 3 in f' without the comma, py-spy's 'f (x.py:3)'), which is a hang's evidence. A log whose last lines are
# frames with no exception line after them was cut inside a traceback (a job killed while printing it, a paste or an
# excerpt that stops there): the job raised, which is a crash at least, and the frames are the evidence.
_FRAME_LINE = re.compile(r'^\s{0,12}(?:File "[^"\n]{1,400}", line \d{1,7}, in\b|[│|]\s{0,4}\S{1,400}\.py:\d{1,7} in\b)')
_TRACEBACK_TAIL = 8


def _ends_in_traceback(text: str) -> int | None:
    """Position of the last traceback frame among the log's last _TRACEBACK_TAIL lines, when no exception line, step
    record or other record of a running job follows it; None otherwise."""
    for pos, line in _tail_lines(text)[:_TRACEBACK_TAIL]:
        body = message_of(line)
        if _FRAME_LINE.match(body) or _FRAME_LINE.match(line):
            # under a stack dump's header ("Thread 0x.. (most recent call first):", faulthandler, py-spy) the frames
            # are a live process's, not a raised exception's
            dump, raised = text.rfind("most recent call first", 0, pos), text.rfind("most recent call last", 0, pos)
            return pos if dump <= raised else None
        if _EXCEPTION.match(body) or is_step_record(body) or timestamp_of(body) is not None:
            return None
    return None


def _normal_state(slurm_state: str | None) -> str | None:
    if not isinstance(slurm_state, str) or not slurm_state.strip():
        return None
    return slurm_state.split()[0].rstrip("+").upper()


def _signatures(text: str, start: int, state: str | None, exit_code: int | None,
                seconds_since_progress: float | None, hang_timeout_s: float | None,
                losses: tuple[float, ...] = ()) -> Failure | None:
    """The first failure family (module docstring, 2-11) that text[start:] or the SLURM state shows."""
    return (
        _slurm_config_refusal(text, start)
        or _by_log(text, FailureKind.SUBMIT_REFUSED, P.SUBMIT_REFUSED, start)
        or _gpu_fault(text, start)
        or _by_log(text, FailureKind.OOM, P.DEVICE_OOM + P.HOST_OOM, start, state, "out of memory")
        or _by_family(text, F_MEM.MEMORY, start)
        or _config_needle(text, start)
        or _cross_library_call(text, start)
        or _config_assertion(text, start)
        or _missing_module(text, start)
        or _config_shape(text, start)
        or _raised_config(text, start)
        or _config_family(text, F_CONFIG.DATA_MISSING + F_CONFIG.RESUME_MISSING + F_CONFIG.RESUME_LAYOUT
                      + F_CONFIG.EXTENSION_BUILD + F_CONFIG.OP_LOAD + F_CONFIG.ENVIRONMENT + F_CONFIG.SCHEMA
                      + F_CONFIG.MODEL_MISSING + F_CONFIG.NOT_BUILT + F_CONFIG.PRECISION
                      + F_CONFIG.CONFIG_FILE + F_CONFIG.HELPERS_BUILD + F_CONFIG.VERSION_REFUSAL
                      + F_CONFIG.UNMOUNTED + F_CONFIG.SIGNATURE + F_CONFIG.BACKEND_MISSING + F_CONFIG.VERSION_FLOOR
                      + F_CONFIG.PLACEHOLDER_VALUE + F_CONFIG.PATH_MISSING + F_CONFIG.NO_GPU
                      + F_CONFIG.FLASH_REFUSAL + F_CONFIG.DEVICE_CAPABILITY + F_CONFIG.PACKAGE_GUARD
                      + F_CONFIG.HUB_ACCESS + F_CONFIG.VERSION_UNSUPPORTED + F_CONFIG.LAUNCH_TARGET
                      + F_CONFIG.DUPLICATE_GPU + F_CONFIG.RESUME_SETTINGS
                      + F_CONFIG.DEVICE_STRING + F_CONFIG.TRAINER_COLUMNS
                      + F_CONFIG.DS_ARGS_MISMATCH + F_CONFIG.DATASET_UNDEFINED + F_CONFIG.FSDP_WRAP_CLASS
                      + F_CONFIG.CLEAN_TREE + F_CONFIG.FABRIC_REFUSAL + F_CONFIG.QUOTED_SETTING
                      + F_CONFIG.DDP_UNUSED_PARAMETERS,
                      start)
        or _by_family(text, F_ORCH.CONTAINER_CONFIG, start)
        or _make_recipe(text, start)
        or _empty_data(text, start)
        or _compile_target(text, start)
        or _shell_script(text, start)
        or _hydra_target(text, start)
        or _string_config_value(text, start)
        or _diverged(text, start, losses)
        or _by_log(text, FailureKind.NODE_FAILURE, P.NODE, start, state, "node failure")
        or _by_family(text, F_ORCH.NODE_LOST, start)
        or _by_log(text, FailureKind.PREEMPTED, P.PREEMPTED, start, state, "preempted")
        or _by_family(text, F_ORCH.PREEMPTION, start)
        or _hang(text, start, state, exit_code, seconds_since_progress, hang_timeout_s)
        or _no_exit_after_training(text, start)
        or _by_log(text, FailureKind.TIME_LIMIT, P.TIME_LIMIT, start, state, "time limit")
        or _by_family(text, F_ORCH.DEADLINE, start)
        or _cancelled(text, start, state)
        or _outside_stop(text, start)
        or _by_family(text, F_ORCH.NODE_DIED, start)
        or _by_log(text, FailureKind.CRASHED, P.HARD_CRASH, start)
        or _stack_dump(text, start)
        or _by_family(text, F_STALL.STALL_REPORTS, start)
        or _by_log(text, FailureKind.COMM_ERROR, P.COMM, start)
        or _by_family(text, F_NET.NETWORK, start)
        or _nccl_warn(text, start)
        or _nccl_trace(text, start)
        or _by_family(text, F_MEM.RAY_WORKER_DIED, start)  # possible causes only: when nothing else
        or _by_family(text, F_ORCH.CONTAINER_CRASH, start)
        or _caught_oom_at_end(text, start)
    )


def _caught_oom_at_end(text: str, start: int) -> Failure | None:
    """The log ends on a training loop's own caught-OOM warning (families.memory.ends_on_caught_oom, judge40a)."""
    idx = F_MEM.ends_on_caught_oom(text)
    if idx is None or idx < start:
        return None
    return _failure(FailureKind.OOM, f"{F_MEM.CAUGHT_OOM_LABEL}: {_line_at(text, idx)[:200]}", _evidence(text, idx))


# judge63 (in sample after batch 52): a progress bar draws itself once more when it is closed, and a framework closes it
# while an exception unwinds (Lightning's bar under a NeMo FastPitch run: "Epoch 0: 11%| | 28/255 [06:00<...", the CUDA
# OOM's traceback, then "Epoch 0: 11%| | 28/255 [06:28<..." below it). The counter did not advance: the redraw is no
# progress, and the failure above it is what ended the run.
_BAR_COUNTER = re.compile(r"\|\s{0,4}(\d{1,12})/(\d{1,12})\s{0,2}\[")


def _before_closing_redraw(text: str, start: int) -> int:
    """`start` (the last progress line's start), or the start of the bar line it redraws when that line shows the
    same counter and a traceback stands between the two."""
    end = text.find("\n", start)
    counter = _BAR_COUNTER.search(text, start, end if end >= 0 else len(text))
    if counter is None:
        return start
    earlier = text.rfind(f"| {counter.group(1)}/{counter.group(2)} [", max(0, start - _CYCLE_WINDOW_CHARS), start)
    if earlier < 0:
        earlier = text.rfind(counter.group(0), max(0, start - _CYCLE_WINDOW_CHARS), start)
    if earlier < 0:
        return start
    earlier_start = text.rfind("\n", 0, earlier) + 1
    traceback = _job_traceback(text, earlier)
    return earlier_start if 0 <= traceback < start else start


def _last_progress_start(text: str) -> int:
    """Start of the line of the log's last progress (iteration record or result line); 0 when it has none."""
    last = max((text.rfind(m) for m in _RESULT_MARKERS), default=-1)
    tail = max(0, last)
    for match in _PROGRESS.finditer(text, tail):
        last = max(last, match.start())
    return text.rfind("\n", 0, last) + 1 if last >= 0 else 0


def _finished_evidence(text: str) -> tuple[int, str] | None:
    """(position, line) of the last line saying training finished (families.completion), or of the last line of
    a per-step timer breakdown (a step ran); None when the log has neither."""
    best: tuple[int, str] | None = None
    for row in F_DONE.COMPLETION + F_DONE.PROGRESS:
        idx = text.rfind(row.needle)
        if idx >= 0 and row.matches(line_around(text, idx)) and (best is None or idx > best[0]):
            best = (idx, f"{row.label}: {_around(text, idx, row.needle)}")
    tail = [(pos, message_of(line)) for pos, line in _tail_lines(text)]
    repeated = F_DONE.repeated_duration_record(tail)
    if repeated is not None and (best is None or repeated[0] > best[0]):
        best = (repeated[0], f"a record repeated with its duration (training ran): {repeated[1][:120]}")
    epochs = F_DONE.epoch_records(tail)
    if epochs is not None and (best is None or epochs[0] > best[0]):
        best = (epochs[0], f"a record per epoch with its metrics (training ran): {epochs[1][:120]}")
    return best


def _summary_after_fatal(text: str, finished_at: int, records_at: int) -> bool:
    """Is the line at `finished_at` a summary a program prints after its training loop died: a line saying training
    finished (families.completion.COMPLETION, not a step record) that comes after the job's own exception line (a
    traceback's, a headerless or a bare one; not a wrapper's), with no step record between them (`records_at`: where
    a reader found the last one)? The last fatal evidence wins over a later print (text-generation-webui logs
    "Training complete!" after the loss raised); an exception the run got past is followed by steps."""
    if not any(row.matches(line_around(text, finished_at)) for row in F_DONE.COMPLETION
               if text.startswith(row.needle, finished_at)):
        return False
    steps_at = max(_last_progress_start(text), _last_step_record(text), records_at)
    exc = _exception_line(text, steps_at)
    return exc is not None and exc[0] < finished_at and not exc[2] and _TRACEBACK not in exc[1]


def _last_step_record(text: str) -> int:
    """Position of the log's last line that proves a step ran (families.completion.PROGRESS); 0 when none."""
    best = 0
    for row in F_DONE.PROGRESS:
        idx = text.rfind(row.needle)
        if idx > best and row.matches(line_around(text, idx)):
            best = idx
    return best


# Ray Jobs' verdict on the job (dashboard/modules/job/job_manager.py): "Job entrypoint command failed with exit code
# N, last available logs (truncated to 20,000 chars):" then the job's last output, which `ray job submit` prints
# after it. The lines quoted after it (a progress bar, a step record) are what the job printed before it failed, not
# a sign it finished.
_RAY_JOB_FAILED = re.compile(r"Job entrypoint command failed with exit code (-?[1-9]\d{0,3})\b")


def _ray_job_failed(text: str) -> Failure | None:
    idx = text.find("Job entrypoint command failed with exit code")
    if idx < 0 or _RAY_JOB_FAILED.match(text, idx) is None:
        return None
    return _failure(FailureKind.CRASHED, f"crashed (Ray Jobs reports the entrypoint failed): "
                                         f"{_line_at(text, idx)[-160:]}", _evidence(text, idx))


def classify(log_text: str, *, slurm_state: str | None = None, exit_code: int | None = None,
             has_result: bool = False, seconds_since_progress: float | None = None,
             hang_timeout_s: float | None = None, progress_offset: int | None = None,
             losses: tuple[float, ...] = ()) -> Failure:
    """Why the trial ended. `seconds_since_progress` must be measured while the job was alive (by the monitor
    that saw it running or cancelled it), not after it ended, or every finished job would look hung.
    With neither `exit_code` nor `slurm_state` (a log alone), a log with a result is ok unless a failure
    signature or a traceback comes after its last progress line: a failure the run got past did not end it.
    `progress_offset` is where the log's last step record starts when a reader found step records without a
    usable step time (analysis.logs.parse_generic), and `losses` the logged loss series (for `diverged`): a log with
    step records, or a line saying training finished, and no failure after them is ok even without a step time.
    `diverged` (a loss that ends NaN/inf) beats `ok`: its step time measures a broken run."""
    # the footers a batch script prints after the job's own last line (W&B, seff, an epilogue, nvidia-smi, date) are
    # not the job's last words: the tail rules read the line before them (judge25's invariance audit)
    text = without_footer(log_text if isinstance(log_text, str) else str(log_text))
    full_length = len(text)
    text = _without_asides(_without_listed_causes(_without_dumps(_window(text))))
    state = _normal_state(slurm_state)
    exit_code = exit_code if isinstance(exit_code, int) and not isinstance(exit_code, bool) else None
    losses = tuple(v for v in losses if isinstance(v, float)) if isinstance(losses, (tuple, list)) else ()
    finished = _finished_evidence(text) if not has_result else None
    progress_at = (_in_window(text, progress_offset) if isinstance(progress_offset, int)
                   and 0 <= progress_offset <= full_length else None)
    if progress_at is not None and _failure_report(text, progress_at):
        progress_at = None
    if finished is not None and _summary_after_fatal(text, finished[0], progress_at or 0):
        finished = None
    ray_failed = _ray_job_failed(text) if not has_result and exit_code is None and state is None else None
    if ray_failed is not None:  # the job failed, whatever progress its quoted output shows
        finished, progress_at = None, None
    if finished is not None:
        progress_at = max(progress_at or 0, finished[0])
    progressed = has_result or progress_at is not None
    log_alone = exit_code is None and state is None and seconds_since_progress is None
    if not progressed:
        verdict = (_signatures(text, 0, state, exit_code, seconds_since_progress, hang_timeout_s, losses)
                   or _fallback(text, 0, state, exit_code))
        if ray_failed is not None and verdict.kind == FailureKind.UNKNOWN:
            return ray_failed
        return _stalled(text, verdict) if log_alone else verdict
    start = _before_closing_redraw(text, max(_last_progress_start(text), text.rfind("\n", 0, progress_at or 0) + 1))
    if exit_code == 0 or state == "COMPLETED":
        return _diverged(text, start, losses) or _ok(has_result, finished)
    if exit_code is None and state is None:
        found = _signatures(text, start, None, None, None, None, losses)
        if found is not None and _shutdown_noise(text, start, found):
            found = None
        if found is None and (_job_traceback(text, start) >= 0 or _reported_exit_code(text, start)
                              or _shell_killed(_last_line(text))
                              or _first(text, _CRASH_MARKERS, start) is not None
                              or _headerless_exception(text, start) is not None):
            found = _fallback(text, start, None, None)
        # an error record that ends the log after its last progress (a device assert after the progress bars); not
        # when the tail is a traceback Python reports as ignored (an exception in __del__ at exit), nor after a line
        # saying training finished (an uploader's or logger's error at exit does not undo a finished run)
        if found is None and text.find(_IGNORED, start) < 0 and not _completed(text):
            found = _error_ending(text, start, loggers=False) or _launcher_killed(text, start)
        verdict = found or _ok(has_result, finished)
        return _stalled(text, verdict) if log_alone else verdict
    return (_signatures(text, 0, state, exit_code, seconds_since_progress, hang_timeout_s, losses)
            or _fallback(text, 0, state, exit_code))


def _shutdown_noise(text: str, start: int, found: Failure) -> bool:
    """Is `found` (a communication error after the last step record of a log alone) noise printed while a finished run
    shut down (families.completion.teardown_noise_line)? Only when the run says it finished (a completion line or its
    last `iteration N/N`), the evidence is not a timeout, watchdog or abort, and nothing after the last step says the
    job failed: no traceback of its own, no launcher's non-zero exit status."""
    if found.kind != FailureKind.COMM_ERROR or not found.evidence:
        return False
    if not all(F_DONE.teardown_noise_line(line) for _, line in found.evidence):
        return False
    return (F_DONE.says_finished(text) and _job_traceback(text, start) < 0
            and _reported_exit_code(text, start) is None)


def _stalled(text: str, verdict: Failure) -> Failure:
    """A log alone that shows a stall (families.stall) is a hang where the verdict would otherwise be that
    nothing failed (unknown), that the run was healthy (ok without a line saying training finished: by a
    liveness-only tail or a collective wait after its steps), or that it was stopped or crashed by the user's
    interrupt."""
    found: Failure | None = None
    if verdict.kind == FailureKind.UNKNOWN:
        found = (_ends_waiting(text) or _interrupted_while_stalled(text, verdict) or _error_ending(text)
                 or _ends_waiting(text, F_STALL.SETUP_PHASES)
                 or _in_phase(text, F_STALL.SETUP_PHASES, _activity_before_warnings(text))
                 or _in_phase(text, F_STALL.SETUP_PHASES, _activity_before_listing(text))
                 or _ends_waiting(text, F_CONFIG.MISSING_PACKAGE_END)
                 or _ends_with_config_rule(text)
                 or _liveness_only_tail(text))
    elif verdict.kind in (FailureKind.CRASHED, FailureKind.CANCELLED):
        found = _stopped_by_hand(text, verdict) or _interrupted_while_stalled(text, verdict)
    elif verdict.kind == FailureKind.OK and not _completed(text):
        found = (_liveness_only_tail(text) or _ends_waiting(text, F_STALL.COLLECTIVE_WAITS)
                 or _stopped_by_hand(text, verdict))
    return found or verdict


def _error_ending(text: str, start: int = 0, loggers: bool = True) -> Failure | None:
    """The last error record (families.error_end) among the log's last lines (at or after `start`): the job crashed
    there, or hit a configuration error where the record is an exception whose message states a broken configuration
    rule or names a missing or malformed input (families.config.input_error). `loggers=False` skips logger ERROR
    records (after a run's progress, a logger's error at exit is weaker evidence than the progress)."""
    tail, counted = _tail_lines(text), 0
    for k, (pos, line) in enumerate(tail):
        if pos < start or counted >= F_END.TAIL_LINES:
            break
        counted += not _chatter_at(text, tail, k)  # library chatter takes no place in the window (judge44a)
        body = F_END.unquoted(message_of(line))
        what = F_END.error_record(body)
        if what is None or (not loggers and what in (F_END.LOGGER_RECORD, F_END.FAILED_STATEMENT)):
            continue
        relayed = F_END.as_exception(body)  # a lone error line, judged as the exception it names
        body = relayed or body
        known = _first(body, P.CONFIG, 0) if relayed is not None else None
        if known is not None:
            return _failure(FailureKind.CONFIG_ERROR, f"{known[1].label}: {body[:200]}", _evidence(text, pos))
        if _config_message(F_CONFIG.EXCEPTION.search(body), text, pos):
            return _failure(FailureKind.CONFIG_ERROR, f"invalid configuration: {body[:200]}", _evidence(text, pos))
        inputs = F_CONFIG.input_error(body, text[max(0, pos - 2000): pos])
        if inputs is not None:
            return _failure(FailureKind.CONFIG_ERROR, f"{inputs}: {body[:200]}", _evidence(text, pos))
        if F_CONFIG.NO_KERNEL_MESSAGE.search(body) is not None:  # a caught dispatch error logged at ERROR (judge31)
            return _failure(FailureKind.CONFIG_ERROR, f"{F_CONFIG.PRECISION[-1].label}: {body[:200]}",
                            _evidence(text, pos))
        return _failure(FailureKind.CRASHED, f"crashed ({what} ends the log): {body[:200]}", _evidence(text, pos))
    return None


def _chatter_at(text: str, tail: list[tuple[int, str]], k: int) -> bool:
    """_chatter for the k-th of `tail` (_tail_lines: stripped lines, last first; the line above is the next one)."""
    pos, line = tail[k]
    return _chatter(line, text[pos:pos + 1] in (" ", "\t"), tail[k + 1][1] if k + 1 < len(tail) else None)


def _ends_with_config_rule(text: str) -> Failure | None:
    """The log's last activity states a configuration rule the run broke, quoted without its exception type ("tensor
    parallel size 8 must divide the number of attention heads 12"): judged like an AssertionError's message
    (families.config.is_config_message), or one of the validation messages of families.raised ("bfloat16 and fp16
    modes cannot be simultaneously enabled", DeepSpeed runtime/config.py); not a warning, which a job prints and goes
    on."""
    last = _last_activity(text)
    if last is None:
        return None
    pos, line = last
    body = message_of(line)
    if F_CONFIG.NO_KERNEL_MESSAGE.search(body) is not None:  # a caught dispatch error logged as the last line
        return _failure(FailureKind.CONFIG_ERROR, f"{F_CONFIG.PRECISION[-1].label} (the caught error's message ends "
                                                  f"the log): {body[:200]}", _evidence(text, pos))
    if F_CONFIG.NOT_A_RULE.search(body) is not None or F_CONFIG.TORCH_ARG_PARSER.search(body) is not None:
        return None
    if F_CONFIG.is_config_message("AssertionError", body):
        return _failure(FailureKind.CONFIG_ERROR, f"invalid configuration (the rule ends the log): {body[:200]}",
                        _evidence(text, pos))
    # a message the frameworks raise in their own validation (families.raised), quoted without its exception type
    tpl = F_RAISED.stated_in(body)
    if tpl is None:
        return None
    return _failure(FailureKind.CONFIG_ERROR, f"invalid configuration ({tpl.framework} check, its message ends the "
                                              f"log): {body[:200]}", _evidence(text, pos))


def _completed(text: str) -> bool:
    """Does a line say that training finished (families.completion.COMPLETION)?"""
    for row in F_DONE.COMPLETION:
        idx = text.rfind(row.needle)
        if idx >= 0 and row.matches(line_around(text, idx)):
            return True
    return False


def _tail_lines(text: str) -> list[tuple[int, str]]:
    """(position, line) of the log's last F_STALL.LAST_LINES non-blank lines, last first."""
    out: list[tuple[int, str]] = []
    end = len(text.rstrip())
    while end > 0 and len(out) < F_STALL.LAST_LINES:
        start = text.rfind("\n", 0, end) + 1
        line = text[start:end].strip()
        if line and not _CARETS.match(line):   # Python 3.11+ marks the failing expression under its line
            out.append((start, line[:_MAX_LINE_SCAN_CHARS]))
        end = start - 1
    return out


_MAX_LINE_SCAN_CHARS = 2000
_CARETS = re.compile(r"^\s*[\^~]{3,}[\^~\s]*$")


def _liveness(line: str) -> bool:
    """A liveness line (F_STALL.LIVENESS) that is no error record: Ray marks any line several workers printed alike
    "[repeated Nx across cluster]", a pulse or a warning most often, but also the error they all died of (judge47,
    oos-batch41's uccl log: "free(): corrupted unsorted chunks [repeated 4x across cluster]")."""
    return F_STALL.LIVENESS.search(line) is not None and F_END.error_record(message_of(line)) is None


def _last_activity(text: str) -> tuple[int, str] | None:
    """The log's last line that is not a liveness line (F_STALL.LIVENESS); None when the tail is all liveness."""
    return next(((pos, line) for pos, line in _tail_lines(text) if not _liveness(line)), None)


def _activity_before_warnings(text: str) -> tuple[int, str] | None:
    """The log's last activity before the Python warnings (F_STALL.PY_WARNING, with their continuation lines) that
    end it; None when it does not end in a warning."""
    tail = [(pos, line) for pos, line in _tail_lines(text) if not _liveness(line)]
    i, skipped = 0, False
    while True:
        hit = next((j for j in range(i, min(i + F_STALL.WARNING_TAIL_LINES, len(tail)))
                    if F_STALL.PY_WARNING.match(message_of(tail[j][1]))), None)
        if hit is None:
            break
        i, skipped = hit + 1, True
    return tail[i] if skipped and i < len(tail) else None


def _activity_before_listing(text: str) -> tuple[int, str] | None:
    """The log's last activity before the listing (F_STALL.LISTING_ITEM: DeepSpeed's pipeline layers) that ends
    it; None when it does not end in one."""
    tail = [(pos, line) for pos, line in _tail_lines(text) if not _liveness(line)]
    i = 0
    while i < len(tail) and F_STALL.LISTING_ITEM.match(tail[i][1]):  # raw: "29: Name" reads as a rank prefix
        i += 1
    return tail[i] if 0 < i < len(tail) else None


def _ends_waiting(text: str, table: tuple[Row, ...] = F_STALL.WAIT_PHASES) -> Failure | None:
    """The log's last activity is a phase that waits on other ranks (a row of `table`), or another record that
    explains why nothing came after it (the row's kind)."""
    return _in_phase(text, table, _last_activity(text))


def _in_phase(text: str, table: tuple[Row, ...], last: tuple[int, str] | None) -> Failure | None:
    """`last` ((position, line) of a log's activity) is a phase of `table` (its row's kind and label)."""
    if last is None:
        return None
    pos, line = last
    line = message_of(line)  # launcher prefixes and a timestamp removed
    for row in table:
        if row.needle in line and row.matches(line):
            return _failure(row.kind, f"{row.label}: {line[:160]}", _evidence(text, pos))
    return None


# The same Ctrl-C reaching the job's other processes a moment before the launcher says it: each DataLoader worker
# (Python's multiprocessing/process.py BaseProcess._bootstrap prints "Process ForkProcess-11:" and then the worker's
# KeyboardInterrupt traceback) and the ranks' own tracebacks. Such lines are the interrupt's echo, not the run's last
# line (judge48, oos-batch42's Megatron run: an iteration record one second before "Received Signals.SIGINT death
# signal", with workers' "Process ForkProcess-N:" headers between).
_INTERRUPT_ECHO = re.compile(r"^(?:Process (?:Fork|Spawn|ForkServer)?Process-\d{1,6}:|Traceback \(most recent call "
                             r"last\):|KeyboardInterrupt)\s*$")
_INTERRUPT_ECHO_LINES = 200


def _last_run_line(window: str) -> str:
    """The last non-blank line of `window` that is not the interrupt's echo in other processes (above)."""
    lines = window.rstrip().split("\n")
    for line in reversed(lines[-_INTERRUPT_ECHO_LINES:]):
        if line.strip() and not _INTERRUPT_ECHO.match(message_of(line.strip())):
            return line.strip()
    return lines[-1].strip()


def _interrupted_while_stalled(text: str, verdict: Failure) -> Failure | None:
    """The user interrupted the job (F_STALL.INTERRUPT) when its last line was not a step record, and the verdict
    is downstream of that interrupt (its evidence is not above it). A log that begins inside the interrupt's
    traceback shows no line of the run: the interrupt alone, cancelled (judge31)."""
    idx = _first_interrupt(text)
    if idx < 0:
        return None
    line_start = text.rfind("\n", 0, idx) + 1
    if verdict.evidence and verdict.evidence[0][0] < text.count("\n", 0, line_start) + 1:
        return None  # the failure stands above the interrupt: it is the cause
    before = _last_run_line(text[max(0, line_start - 20_000): line_start])
    if not before or is_step_record(before) or _has_progress(before, 0):
        return None  # nothing before it, or a running job stopped by hand
    if _in_step_cycle(text, line_start) is not None:
        return None  # still printing its steps' own lines: stopped by hand while running (judge30)
    moving = _moving_when_interrupted(text, line_start)
    if moving is not None:
        return _failure(FailureKind.CANCELLED, f"stopped by hand while running ({moving}", _evidence(text, line_start))
    if _begins_in_traceback(text, line_start):  # no line of the run above: nothing says it had stopped moving
        return _failure(FailureKind.CANCELLED, "interrupted by hand (the log begins inside the interrupt's traceback, "
                                               "no sign of a stall before it)", _evidence(text, line_start))
    stall = _silence_before(text, line_start) or _phase_of(before) or _phase_of(_above_stack(text, line_start))
    counting = None if stall is not None else _counting_up(text, line_start)
    if counting is not None:
        return _failure(FailureKind.CANCELLED, f"stopped by hand while running (its last lines count up): "
                                               f"{counting[:140]}", _evidence(text, line_start))
    if stall is None and not _steps_above(text, line_start):
        return _failure(FailureKind.CANCELLED, f"interrupted by hand (no step record above it, and nothing says the "
                                               f"run had stopped moving: no clock gap, no phase that waits): "
                                               f"{before[:140]}", _evidence(text, line_start))
    stall = stall or "the last line before the interrupt is not a step"
    return _failure(FailureKind.HANG, f"interrupted by hand while stalled ({stall}): {before[:140]}",
                    _evidence(text, line_start))


# A Ctrl-C after a line that is not a step says only that someone stopped the job. Where the log shows step records,
# a last line outside their cycle says the job had left it (judge30: a save, a compile, a collective that never
# returned). Where it shows none, there is no cycle to have left, and the interrupt is a stall only where the log
# shows the job had stopped moving (judge52): the clock's silence before the interrupt, or a last line that opens a
# phase whose next line comes only when it is over (F_STALL's set-up and wait phases). Without either, the job was
# stopped while at work as far as the log shows (oos-batch21's GPT-NeoX stderr and oos-batch45's NeMo, DeepSpeed and
# torchrun runs, stopped inside an optimizer step or 11 s after set-up, were read as stalls from a warning or a frame
# above the interrupt; oos-batch5's ZeRO-3 run, silent for ten minutes after saving, is one).
_STALL_SILENCE_S = 300.0  # no line for this long before the interrupt: the user stopped a job that had stopped
_SILENCE_INTERVALS = 3  # the last intervals of the clock looked at (an earlier silence is a set-up the job got past)
_STALL_PHASES = F_STALL.WAIT_PHASES + F_STALL.SETUP_PHASES


def _silence_before(text: str, line_start: int) -> str | None:
    """The clock's silence as the job ended: the longest of the last _SILENCE_INTERVALS intervals between the stamped
    lines above the interrupt's line (at `line_start`) and the first stamp at or after it, when it is at least
    _STALL_SILENCE_S; None without such stamps or for a shorter one. The launcher's own lines at the interrupt (its
    "Killing subprocess" above the traceback) share the interrupt's time; what it prints later (a teardown's waits)
    is not looked at."""
    stamps = [stamp[0] for line in _whole_lines_above(text, line_start) if (stamp := timestamp_of(line)) is not None]
    below = text[line_start: line_start + 20_000].splitlines()[:_AFTER_INTERRUPT_LINES]
    stamps += [stamp[0] for line in below if (stamp := timestamp_of(line)) is not None][:1]
    tail = stamps[-_SILENCE_INTERVALS - 1:]
    silence_s = max((b - a for a, b in zip(tail, tail[1:])), default=0.0)
    return f"no line for {silence_s:.0f} s before the interrupt" if silence_s >= _STALL_SILENCE_S else None


def _whole_lines_above(text: str, line_start: int) -> list[str]:
    """The lines of the _CYCLE_WINDOW_CHARS above `line_start`, without the first when the window cuts it."""
    start = max(0, line_start - _CYCLE_WINDOW_CHARS)
    lines = text[start: line_start].splitlines()
    return lines[1:] if start > 0 else lines


def _steps_above(text: str, line_start: int) -> bool:
    """Does a training step record (or a line that proves a step ran: families.completion.PROGRESS) stand in the
    window above the interrupt's line (at `line_start`)? A loading, mapping or validation bar is not one."""
    window = text[max(0, line_start - _CYCLE_WINDOW_CHARS): line_start]
    return _last_step_record(window) > 0 or any(is_training_step(line) for line in window.splitlines())


def _run_lines_above(text: str, line_start: int, count: int) -> list[str]:
    """The last `count` lines (newest first) above the interrupt's line (at `line_start`) that are not part of a stack
    listing: frames, their source and caret lines, traceback and stack-dump headers, exception lines, behind any
    launcher prefix (a KeyboardInterrupt raised in a collective: the frames say where Python was, the lines above them
    what the run was doing)."""
    lines, found = text[max(0, line_start - _CYCLE_WINDOW_CHARS): line_start].splitlines(), []
    for raw in reversed(lines[-_HEADERLESS_SCAN_LINES:]):
        line = message_of(raw).removeprefix("^C")
        if not line.strip() or line[0] in " \t" or _FRAME_LINE.match(line) or line.startswith(_TRACEBACK_BODY) \
                or _STACK_HEADER.search(line) or _EXCEPTION.match(line) or _INTERRUPT_ECHO.match(line) \
                or _library_warning(line):
            continue
        found.append(raw.strip())
        if len(found) == count:
            break
    return found


_INSTALLED = re.compile(r"[/\\](?:site|dist)-packages[/\\]")


def _library_warning(line: str) -> bool:
    """A Python warning raised in an installed package (its path under site-/dist-packages): a library's deprecation
    or usage notice, printed wherever that library is first used, says nothing of where the run is. A warning from the
    program's own files says it reached that code (oos-batch21's GPT-NeoX dataset warning after its fused kernels
    were loaded)."""
    return F_STALL.PY_WARNING.match(line) is not None and _INSTALLED.search(line) is not None


def _above_stack(text: str, line_start: int) -> str:
    """The last run line above the interrupt's stack listing (_run_lines_above); empty where there is none."""
    return next(iter(_run_lines_above(text, line_start, 1)), "")


# A job whose last lines before the interrupt are one print with a number that grows at each ("RUNNING 21",
# "RUNNING 22", "RUNNING 23": an evaluation loop's own counter) was moving when it was stopped, as after a step
# record (judge53: oos-batch46's branch-and-bound run, interrupted in Ray's pool.starmap during its evaluation). A
# wait's repeated line is a phase (read first); a counter that repeats or falls is no progress.
_COUNTING_LINES = 3


def _counting_up(text: str, line_start: int) -> str | None:
    """The newest of the last _COUNTING_LINES run lines above the interrupt when they share one shape and one of their
    numbers grows from each to the next; None otherwise."""
    lines = _run_lines_above(text, line_start, _COUNTING_LINES)[::-1]
    if len(lines) < _COUNTING_LINES or len({_shape(line) for line in lines}) != 1:
        return None
    numbers = [[float(n) for n in _DIGITS.findall(message_of(line))] for line in lines]
    if not numbers[0] or len({len(row) for row in numbers}) != 1:
        return None
    grows = any(all(a[k] < b[k] for a, b in zip(numbers, numbers[1:])) for k in range(len(numbers[0])))
    return lines[-1] if grows else None


def _phase_of(line: str) -> str | None:
    """The label of the set-up or wait phase (F_STALL) that `line` opens, or None."""
    body = message_of(line)
    row = next((row for row in _STALL_PHASES if row.needle in body and row.matches(body)), None)
    return None if row is None else row.label


# A stall is time without steps. Where the step records and the lines at the interrupt carry timestamps, the clock
# says whether the run had stopped moving: an interrupt within a couple of step intervals of the last step record came
# while the steps were still coming, whatever the lines between say (judge50a, oos-batch43's DeepSpeed-Chat run:
# step 441's timer line at 13:09:02.585, a sample print, the launcher's "Killing subprocess" at 13:09:02.870 and the
# KeyboardInterrupt under frames of the backward pass, read as a stall from the frame above the interrupt; judge48's
# Megatron run, one second after an iteration record of 4.1 s, is the same shape).
_MOVING_INTERVALS = 2.0  # an interrupt this many median step intervals after the last step came while running
_CLOCK_STEPS = 20  # the last timestamped step records whose intervals give the step interval
_AFTER_INTERRUPT_LINES = 20  # lines at and after the interrupt whose stamps say when it came


_STEP_COUNTER = re.compile(r"(?i)\b(?:global_step|step|iter(?:ation)?)\s{0,3}[=:#]?\s{0,3}(\d{1,12})\b")


def _step_counter(line: str) -> int | None:
    match = _STEP_COUNTER.search(line)
    return int(match.group(1)) if match is not None else None


def _moving_when_interrupted(text: str, line_start: int) -> str | None:
    """How the clock shows the run still moving when the interrupt at `line_start` came (the comment above), or None
    where it does not show it (too few timestamped step records, no stamp at the interrupt, or a gap)."""
    above = text[max(0, line_start - _CYCLE_WINDOW_CHARS): line_start].splitlines()[1:]
    records = [(i, line, stamp[0]) for i, line in enumerate(above)
               if (is_step_record(line) or _STEP_COUNTER.search(line)) and (stamp := timestamp_of(line)) is not None]
    if not records:
        return None
    shape = _shape(records[-1][1])  # the last stamped periodic print (a step record, DeepSpeed's timer, step=N)
    stamped = [(i, stamp_s, _step_counter(line)) for i, line, stamp_s in records
               if _shape(line) == shape][-_CLOCK_STEPS:]
    counters = [c for _, _, c in stamped if c is not None]
    if len(stamped) < 3 or (len(counters) == len(stamped) and counters != sorted(set(counters))):
        return None  # too few, or a repeated print whose counter does not advance (a wait's heartbeat)
    intervals = sorted(b - a for (_, a, _), (_, b, _) in zip(stamped, stamped[1:]) if b > a)
    if len(intervals) < 2:
        return None
    step_s = intervals[len(intervals) // 2]
    last_i, last_s, _ = stamped[-1]
    below = text[line_start: line_start + 20_000].splitlines()[:_AFTER_INTERRUPT_LINES]
    stamps = [stamp[0] for line in above[last_i + 1:] + below if (stamp := timestamp_of(line)) is not None]
    if not stamps:
        return None
    gap_s = max(stamps) - last_s
    if not 0 <= gap_s <= _MOVING_INTERVALS * step_s:
        return None
    return (f"the interrupt {gap_s:.3g} s after the last step record, steps every {step_s:.3g} s): "
            f"{message_of(above[last_i].strip())[:120]}")


_TRACEBACK_ONLY_CHARS = 100_000  # longer than any traceback an excerpt starts in


def _begins_in_traceback(text: str, line_start: int) -> bool:
    """Is every line above the interrupt's line (at `line_start`) part of a traceback (a frame, its indented source
    or caret line, a 'Traceback' or chained-exception header)? Then the log (an excerpt that starts inside the
    interrupt's traceback, judge31) holds no line of the run itself: no last step, no stall point, no evidence that the
    run had stopped moving when it was interrupted, so the interrupt is not read as a stall (oos-batch27's Gemma-2
    Trainer tail, labelled cancelled)."""
    if line_start > _TRACEBACK_ONLY_CHARS:
        return _headerless_frames(text, line_start)
    lines = [ln for ln in text[:line_start].splitlines() if ln.strip()]
    return bool(lines) and (all(ln[0] in " \t" or _FRAME_LINE.match(ln) or ln.startswith(_TRACEBACK_BODY)
                                for ln in lines) or _headerless_frames(text, line_start))


# A header that opens a stack listing: Python's traceback ("Traceback (most recent call last):", the chained
# exceptions' lines), logging's stack_info ("Stack (most recent call last):", logging/__init__.py), faulthandler's
# dumps ("Thread 0x... (most recent call first):", "Current thread 0x...", Python/traceback.c) and py-spy's
# "Thread 123 (idle): ...".
_STACK_HEADER = re.compile(r"\(most recent call (?:last|first)\):?\s*$"
                           r"|^\s*(?:Current thread|Thread) (?:0x)?[0-9a-fA-F]+\b")
_HEADERLESS_SCAN_LINES = 2_000  # more frames than any traceback an excerpt starts in


def _headerless_frames(text: str, line_start: int) -> bool:
    """Do the lines right above the interrupt's line (at `line_start`) run up, frame by frame, to the log's first
    line or to a line that opens no stack listing (_STACK_HEADER), with no traceback header anywhere above? Python
    prints a traceback's frames only under its 'Traceback (most recent call last):' header (traceback.py's
    StackSummary.format after TracebackException.format's header line), so frames with no header above them are an
    excerpt that begins inside the interrupt's traceback: what stands above them (an `env` dump, NCCL's init lines,
    warnings a job script or a collector put first) was not printed just before the interrupt and says nothing about
    whether the run had stopped moving (judge44a: oos-batch27's Gemma-2 Trainer tail with chatter prepended read as
    a stall)."""
    if _TRACEBACK_BODY[0] in text[max(0, line_start - 400_000): line_start]:
        return False  # a header above: the frames are its (several ranks' tracebacks interleave, judge41)
    lines = text[max(0, line_start - 400_000): line_start].splitlines()[-_HEADERLESS_SCAN_LINES:]
    while lines and not lines[-1].strip():
        lines.pop()
    top, i = len(lines), len(lines) - 1
    while i >= 0:  # up over frames, each with the few indented lines (source, carets) Python prints under it
        if _FRAME_LINE.match(lines[i]):
            top = i
            i -= 1
            continue
        frame = next((j for j in range(i - 1, max(-1, i - 5), -1)
                      if _FRAME_LINE.match(lines[j]) or not lines[j][:1].isspace()), None)
        if not lines[i][:1].isspace() or frame is None or not _FRAME_LINE.match(lines[frame]):
            break
        i = frame
    if top == len(lines) or top == 0:
        return False  # no frames, or the scan reached no line above them (the caller's all-traceback rule)
    above = lines[top - 1]
    return not (above.startswith(_TRACEBACK_BODY) or _STACK_HEADER.search(above))


_CYCLE_WINDOW_CHARS = 200_000  # the interrupt's look-back for the run's per-step cycle
_DIGITS = re.compile(r"[-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?")
# A logger's record header with no message of its own ("WARNING:megatron.core.utils:", the message on the next
# line): Python logging's default format "%(levelname)s:%(name)s:%(message)s" with an empty first line.
_BARE_LOGGER_HEADER = re.compile(r"^(?:DEBUG|INFO|WARNING|ERROR|CRITICAL):[\w.]{1,120}:\s*$")


def _shape(line: str) -> str:
    """A line with its numbers masked: the same print at another step has the same shape."""
    return " ".join(_DIGITS.sub("#", message_of(line)).split())  # numbers' widths change the padding


def _in_step_cycle(text: str, line_start: int) -> str | None:
    """The last step record when the run was still in its per-step cycle as the interrupt (its line at
    `line_start`) came, else None. The window above
    the interrupt has step records, and every line after the last one is the traceback the interrupt ends (from its
    last 'Traceback (most recent call last)' header), a bare logger header, or a line of the same shape (numbers
    masked) as one the run printed between its earlier step records (Megatron's memory report and timers, an author's
    per-step debug print). A stalled job stops in something it does not do at every step (a checkpoint save, a
    compile, a collective that never returns, with its own lines), or prints nothing at all after the records it
    stopped at: the line above the interrupt alone cannot tell a frame or a debug print from a stall (oos-batch26's
    MAP-NEO and orangeaico Megatron-LM runs, interrupted right after their iterations, read as hangs)."""
    lines = text[max(0, line_start - _CYCLE_WINDOW_CHARS): line_start].splitlines()[1:]
    steps = [i for i, line in enumerate(lines) if is_step_record(line)]
    if not steps:
        return None
    tail = lines[steps[-1] + 1:]
    header = next((j for j in range(len(tail) - 1, -1, -1) if _TRACEBACK_BODY[0] in tail[j]), None)
    # judge41 (oos-batch36: microsoft/Megatron-DeepSpeed examples/MoE/log/...-with-kernel.log): every rank prints
    # its interrupt's traceback at once, interleaved with the others' and with the launcher's "Killing subprocess"
    # lines, so the lines after the last header are other ranks' frames. From the first header after the last step
    # record on, the tail is the interrupt's own when no exception line stands in it (the interrupt's line is below)
    first = next((j for j, line in enumerate(tail) if _TRACEBACK_BODY[0] in line), None)
    if first is not None and not any(_EXCEPTION.match(message_of(line).strip()) for line in tail[first:]):
        header = first
    if header is not None:
        tail = tail[:header]  # the interrupt's own traceback
    elif _TRACEBACK_BODY[0] in lines[steps[-1]]:
        # the traceback begins on the step's own line: a progress bar drawn with '\r' and no newline, then Python's
        # header written after it (judge51, oos-batch44's Trainer and DeepSpeed runs stopped by Ctrl-C)
        tail = []
    cycle = {_shape(line) for a, b in zip(steps, steps[1:]) for line in lines[a + 1:b]}
    # library chatter (families.stall.CHATTER: a warning at its first occurrence, NCCL's set-up) is not a stall's
    # own line either, nor the source line warnings.formatwarning prints under a warning (judge44a)
    chatter = [F_STALL.is_chatter(message_of(line).strip()) for line in tail]
    within = all(not line.strip() or _BARE_LOGGER_HEADER.match(message_of(line).strip()) or _shape(line) in cycle
                 or _INTERRUPT_ECHO.match(message_of(line).strip())  # the interrupt reaching other processes
                 or chatter[k] or (line[:1].isspace() and k > 0 and chatter[k - 1] and "Warning: " in tail[k - 1])
                 for k, line in enumerate(tail))
    return lines[steps[-1]].strip() if within else None


# judge63 (in sample after batch 52): a traceback that quotes its frames' source names the exception in code, not as
# raised: IPython prints each frame's lines around the failing one (Lightning's trainer: "725 except KeyboardInterrupt
# as exception:", "# TODO: treat KeyboardInterrupt as BaseException"), and a TypeError below them was read as a Ctrl-C.
# A mention after Python syntax on its line (except, raise, import, isinstance, a comment) is code, not an interrupt.
_CODE_MENTION = re.compile(r"(?:\b(?:except|raise|import|isinstance|issubclass)\b|#)[^\n]*$")
_MAX_INTERRUPT_HITS = 50  # mentions of one needle tried before giving up on it (linear on a hostile log)


def _interrupt_at(text: str, needle: str) -> int:
    """Position of the first `needle` that is not a mention in quoted source code (_CODE_MENTION); -1 if none."""
    idx, n = text.find(needle), 0
    while idx >= 0 and n < _MAX_INTERRUPT_HITS:
        if _CODE_MENTION.search(text, text.rfind("\n", 0, idx) + 1, idx) is None:
            return idx
        idx, n = text.find(needle, idx + len(needle)), n + 1
    return -1


def _first_interrupt(text: str) -> int:
    """Position of the log's first interrupt (F_STALL.INTERRUPT, a Ctrl-C echo); -1 if none."""
    hits = [i for i in (_interrupt_at(text, n) for n in F_STALL.INTERRUPT) if i >= 0]
    echo = _ctrl_c_echo(text)
    return min(hits + [echo] if echo >= 0 else hits, default=-1)


# A step counter with its planned total on the last step record: "step 100/100", "[step=970/1000", "iter: 5 / 5"
_STEP_OF_TOTAL = re.compile(r"(?i)\b(?:step|iter\w{0,5}|update)\s{0,3}[=:#]?\s{0,3}(\d{1,12})\s{0,3}/\s{0,3}"
                            r"(\d{1,12})\b")
_INTERRUPT_TAIL_CHARS = 20_000  # a run stopped by hand ends within this much text after its interrupt


def _stopped_by_hand(text: str, verdict: Failure) -> Failure | None:
    """A running job the user stopped by hand: the log's first interrupt (Ctrl-C's echo, KeyboardInterrupt, SIGINT)
    comes right after a step record, near the end of the log, and nothing says the run finished (no completion line,
    no `iteration N/N`, no `step N/N` on that last record), nor is the verdict's evidence above the interrupt. The
    stopped run is cancelled, not `ok`: a run that completed and was then interrupted at teardown says so first.
    (An interrupt after a non-step line is _interrupted_while_stalled's: a job stopped because it stopped moving.)"""
    idx = _first_interrupt(text)
    # a completion line counts only above the interrupt: one below it is the script's own handler winding up after it
    # caught the KeyboardInterrupt ("Training interrupted." then "Training is done. Took 184.50 minutes.", judge53,
    # oos-batch46's arena run stopped at iteration 1936 of 8200)
    if idx < 0 or len(text) - idx > _INTERRUPT_TAIL_CHARS or F_DONE.says_finished(text[:idx]):
        return None
    line_start = text.rfind("\n", 0, idx) + 1
    if verdict.evidence and verdict.evidence[0][0] < text.count("\n", 0, line_start) + 1:
        return None  # the failure stands above the interrupt: it is the cause
    before = _line_before_interrupt(text, line_start)
    if before and not (is_step_record(before) or _has_progress(before, 0)):
        before = _in_step_cycle(text, line_start) or ""  # the step's own lines after its record (judge30)
    if not before:
        return None
    total = _STEP_OF_TOTAL.search(before)
    if total is not None and int(total.group(1)) >= int(total.group(2)) > 0:
        return None  # the last step was the planned last one: interrupted at teardown
    return _failure(FailureKind.CANCELLED, f"stopped by hand (an interrupt right after a step record, no line saying "
                                           f"training finished): {before[:140]}", _evidence(text, line_start))


_TRACEBACK_BODY = ("Traceback (most recent call last)", "During handling of the above exception",
                   "The above exception was the direct cause")


def _line_before_interrupt(text: str, line_start: int) -> str:
    """The last non-blank line above the interrupt's line (at `line_start`), above the traceback that the interrupt
    ends when there is one (a KeyboardInterrupt raised in the training loop: the frames are where Python was, the line
    above them what the run was doing)."""
    window = text[max(0, line_start - 20_000): line_start]
    header = window.rfind(_TRACEBACK_BODY[0])
    if header >= 0:
        cut = window.rfind("\n", 0, header) + 1
        body = window[cut:].splitlines()
        if all(not ln.strip() or ln[0] in " \t" or ln.removeprefix("^C").startswith(_TRACEBACK_BODY)
               or _EXCEPTION.match(ln) for ln in body):
            window = window[:cut]
    return _last_run_line(window)


def _ctrl_c_echo(text: str) -> int:
    """Position of the first terminal echo of Ctrl-C (F_STALL.CTRL_C_ECHO: '^C' starting a line); -1 if none."""
    idx, n = text.find(F_STALL.CTRL_C), 0
    while idx >= 0 and n < F_STALL.MAX_CTRL_C_HITS:
        line_start = text.rfind("\n", 0, idx) + 1
        if F_STALL.CTRL_C_ECHO.match(text, line_start, _line_bounds(text, idx)[1]):
            return idx
        idx, n = text.find(F_STALL.CTRL_C, idx + 2), n + 1
    return -1


def _liveness_only_tail(text: str) -> Failure | None:
    """After its last activity the log shows only liveness lines and warnings (F_STALL.LIVENESS, WARNING_LINE) whose
    timestamps run more than F_STALL.STALLED_SPAN_S past that activity's (or past the first of them, where the
    activity has no timestamp); at least one of them is a liveness line or the activity has a timestamp: time
    passed without progress."""
    stamps: list[float] = []
    liveness = False
    for _, line in _tail_lines(text):
        stamp = timestamp_of(line)
        quiet = F_STALL.LIVENESS.search(line) is not None
        if not quiet and F_STALL.WARNING_LINE.search(line) is None:
            if stamp is not None and stamps:
                stamps.append(stamp[0])  # the last activity's time starts the quiet span
                liveness = True
            break
        liveness = liveness or quiet
        if stamp is not None:
            stamps.append(stamp[0])
    if not liveness or len(stamps) < 2 or max(stamps) - min(stamps) <= F_STALL.STALLED_SPAN_S:
        return None
    span_s = max(stamps) - min(stamps)
    return _failure(FailureKind.HANG, f"no progress for at least {span_s:.0f} s: after its last activity the log "
                                      f"shows only liveness lines or warnings; last line: {_last_line(text)[:120]}",
                    _evidence(text, len(text.rstrip()) - 1))


def _ok(has_result: bool, finished: tuple[int, str] | None) -> Failure:
    if has_result:
        return _failure(FailureKind.OK, "finished with a result")
    if finished is not None:
        return _failure(FailureKind.OK, f"finished, no step time read ({finished[1]})")
    return _failure(FailureKind.OK, "healthy step records and no failure after them (no step time read)")
