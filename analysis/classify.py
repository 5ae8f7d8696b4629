"""Classify why a trial ended, from its log, its SLURM state and its exit code; and say whether to retry it.

Checks run in a fixed order, first match wins, because one failure drags others behind it:
 1. ok            a result was printed and the job exited 0 (or SLURM says COMPLETED)
 2. node_failure  GPU hardware fault (uncorrectable ECC, "fallen off the bus"): a sick GPU also produces
                  "CUDA error: out of memory" on the next start (fixture bigscience_mds_gpu_fault_cuda_oom_1.log),
                  which must not mark the layout as not fitting
 3. oom           one rank out of memory makes the others fail in NCCL/gloo teardown (fixture mds_oom_1.log)
 4. config_error  an argument assertion on one rank also makes the others fail in teardown
 5. node_failure, 6. preempted   SLURM killed the job for an outside reason; NCCL noise follows
 7. hang          no progress for longer than hang_timeout_s, or stuck in the fused-kernel build until killed
 8. time_limit    SLURM "CANCELLED AT ... DUE TO TIME LIMIT" is a time limit, not a cancellation
 9. cancelled     "CANCELLED AT ..." without a DUE TO (user or our monitor ran scancel)
10. comm_error    NCCL/gloo errors with nothing above to explain them
11. config_error  exit code 2 (argparse and our workload's validation exit with 2)
12. crashed       a traceback, a C++ abort, a non-zero exit or SLURM FAILED
13. unknown       nothing matched (e.g. exit 0 without a result)
Needles are plain substrings searched over the whole text (str.find runs in C), so classifying 1,000 logs
takes milliseconds; only the matched line is extracted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

FAILURE_KINDS = ("ok", "oom", "comm_error", "hang", "time_limit", "cancelled", "node_failure", "preempted",
                 "config_error", "crashed", "unknown")

# kind -> (retryable, exclude the failing node on retry, max retries; None = up to retry.max_attempts).
# oom and config_error fail the same way every time. A hang is retried once: a stale fused-kernel lock or a
# flaky start clears, a real deadlock of the layout does not. node_failure, comm_error and preempted avoid the
# node they ran on (as the cluster-path issue asks): a node that keeps being preempted (a higher-priority
# partition overlapping it) is as useless to a short benchmark as a broken one. The launcher only excludes when
# enough other nodes remain (launcher.run.policy.may_exclude).
RETRY_POLICY: dict[str, tuple[bool, bool, int | None]] = {
    "ok": (False, False, 0),
    "oom": (False, False, 0),
    "config_error": (False, False, 0),
    "node_failure": (True, True, None),
    "comm_error": (True, True, None),
    "preempted": (True, True, None),
    "hang": (True, False, 1),
    "time_limit": (True, False, None),
    "cancelled": (True, False, None),
    "crashed": (True, False, None),
    "unknown": (True, False, None),
}


@dataclass(frozen=True)
class Failure:
    kind: str
    reason: str  # short human text, with the matching log line (trimmed)
    retryable: bool
    exclude_node: bool
    max_retries: int | None


_GPU_FAULT = ("uncorrectable ECC error", "cudaErrorECCUncorrectable", "GPU has fallen off the bus")
_OOM = ("CUDA out of memory", "OutOfMemoryError", "CUDA error: out of memory", "HIP out of memory",
        "DefaultCPUAllocator: can't allocate memory", "Error code 12 (Cannot allocate memory)", "std::bad_alloc",
        "oom-kill event", "Exceeded job memory limit", "Cuda failure 'out of memory'")
# "parasweep workload: error:" is our workload's one-line validation message (launcher/workload/__main__.py).
_CONFIG = ("parasweep workload: error:", "is not divisible by", "must be divisible by",
           "error: unrecognized arguments", "error: argument ", "error: the following arguments are required",
           "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism", "Check batch related parameters")
_CONFIG_ASSERT_FILES = ("arguments.py", "validate_args", "runtime/config.py")
_NODE = ("DUE TO NODE FAILURE", "Node failure on", "NODE_FAIL")
_PREEMPT = ("DUE TO PREEMPTION", "this job is preempted")
_TIME_LIMIT = ("DUE TO TIME LIMIT", "this job is timed-out", "Job has timed out.")
_CANCELLED = ("CANCELLED AT",)
_COMM = ("Watchdog caught collective operation timeout", "NCCL error", "ncclSystemError", "ncclInternalError",
         "ncclUnhandledCudaError", "ncclRemoteError", "DistBackendError", "DistNetworkError",
         "Some NCCL operations have failed or timed out", "NCCL communicator was aborted",
         "Connection closed by peer", "Gloo connectFullMesh failed")
_NCCL_WARN_CONNECT = ("Connection refused", "Connection reset", "Connection timed out")
_CRASH = ("Traceback (most recent call last)", "terminate called after throwing", "Segmentation fault",
          "Fatal Python error", "core dumped", "ChildFailedError")
_FUSED = "compiling and loading fused kernels"
_PROGRESS = re.compile(r"iteration\s*[=:]?\s*\d+\s*/\s*\d+")  # no leading \b: keeps re's fast literal scan
_TEE_PREFIX = re.compile(r"^\s*\[(?:default|rank)\d+\]:\s*")
_EXCEPTION = re.compile(r"^(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception|Exit|Interrupt|Failure)\b")
# sacct states (a trailing "+" or " by UID" is stripped) that name a kind on their own.
_STATE_KIND = {"OUT_OF_MEMORY": "oom", "NODE_FAIL": "node_failure", "BOOT_FAIL": "node_failure",
               "PREEMPTED": "preempted", "TIMEOUT": "time_limit", "DEADLINE": "time_limit",
               "CANCELLED": "cancelled", "FAILED": "crashed"}
_MAX_REASON_CHARS = 240


def _failure(kind: str, reason: str) -> Failure:
    retryable, exclude_node, max_retries = RETRY_POLICY[kind]
    if len(reason) > _MAX_REASON_CHARS:
        reason = reason[: _MAX_REASON_CHARS - 3] + "..."
    return Failure(kind, reason, retryable, exclude_node, max_retries)


def _line_at(text: str, idx: int) -> str:
    end = text.find("\n", idx)
    return text[text.rfind("\n", 0, idx) + 1 : len(text) if end < 0 else end].strip()


def _first(text: str, needles: tuple[str, ...]) -> str | None:
    """The line of the first occurrence of the first needle found; needles are listed most informative first
    (the NCCL watchdog line says more than the "terminate called ... DistBackendError" abort printed before it)."""
    for needle in needles:
        idx = text.find(needle)
        if idx >= 0:
            return _line_at(text, idx)
    return None


def _config_assertion(text: str) -> Failure | None:
    """An AssertionError raised in Megatron's arguments.py / validate_args or DeepSpeed's config.py."""
    idx = text.find("AssertionError")
    while idx >= 0:
        tb = text.rfind("Traceback (most recent call last)", 0, idx)
        frames = text[tb if tb >= 0 else max(0, idx - 3000) : idx]
        if any(f in frames for f in _CONFIG_ASSERT_FILES):
            return _failure("config_error", f"argument check failed: {_line_at(text, idx)}")
        idx = text.find("AssertionError", idx + 1)
    return None


def _nccl_warn_connect(text: str) -> Failure | None:
    idx = text.find("NCCL WARN")
    while idx >= 0:
        line = _line_at(text, idx)
        if any(n in line for n in _NCCL_WARN_CONNECT):
            return _failure("comm_error", f"communication error: {line}")
        idx = text.find("NCCL WARN", idx + 1)
    return None


def _stuck_at_fused_kernels(text: str) -> str | None:
    """The fused-kernel line if it is the last progress the log shows (no 'done with', step or traceback after)."""
    idx = text.rfind(_FUSED)
    if idx < 0:
        return None
    line, tail = _line_at(text, idx), text[idx:]
    if "done with" in line or "Traceback" in tail or _PROGRESS.search(tail):
        return None
    return line


def _exception_line(text: str) -> str | None:
    """The exception line of the first Python traceback, e.g. 'RuntimeError: CUDA error: ...'."""
    idx = text.find("Traceback (most recent call last)")
    if idx < 0:
        return None
    for count, raw in enumerate(text[idx:].splitlines()[1:]):
        line = _TEE_PREFIX.sub("", raw, count=1).strip()
        if _EXCEPTION.match(line):
            return line
        if count > 400:
            break
    return _line_at(text, idx)


def _last_line(text: str) -> str:
    stripped = text.rstrip()
    return _line_at(stripped, len(stripped) - 1) if stripped else "(empty log)"


def _normal_state(slurm_state: str | None) -> str | None:
    return slurm_state.split()[0].rstrip("+").upper() if slurm_state and slurm_state.strip() else None


def _hang(text: str, state: str | None, seconds_since_progress: float | None,
          hang_timeout_s: float | None) -> Failure | None:
    stuck = _stuck_at_fused_kernels(text)
    hint = f"; stuck at {stuck!r} (stale build lock? rm megatron/fused_kernels/build/lock)" if stuck else ""
    if seconds_since_progress is not None and hang_timeout_s is not None and seconds_since_progress > hang_timeout_s:
        return _failure("hang", f"no progress for {seconds_since_progress:.0f} s "
                                f"(> hang_timeout {hang_timeout_s:.0f} s){hint}; last line: {_last_line(text)}")
    killed = state in ("TIMEOUT", "CANCELLED") or "CANCELLED AT" in text
    if stuck and killed:
        return _failure("hang", f"killed while stuck in the fused-kernel build{hint}")
    return None


def _by_log(text: str, kind: str, label: str, needles: tuple[str, ...], state: str | None) -> Failure | None:
    line = _first(text, needles)
    if line is not None:
        return _failure(kind, f"{label}: {line}")
    if state is not None and _STATE_KIND.get(state) == kind:
        return _failure(kind, f"{label}: SLURM state {state}")
    return None


def classify(log_text: str, *, slurm_state: str | None = None, exit_code: int | None = None,
             has_result: bool = False, seconds_since_progress: float | None = None,
             hang_timeout_s: float | None = None) -> Failure:
    """Why the trial ended. `seconds_since_progress` must be measured while the job was alive (by the monitor
    that saw it running or cancelled it), not after it ended, or every finished job would look hung."""
    text, state = log_text, _normal_state(slurm_state)
    if has_result and (exit_code == 0 or state == "COMPLETED" or (exit_code is None and state is None)):
        return _failure("ok", "finished with a result")
    return (
        _by_log(text, "node_failure", "GPU hardware fault", _GPU_FAULT, None)
        or _by_log(text, "oom", "out of memory", _OOM, state)
        or _by_log(text, "config_error", "invalid configuration", _CONFIG, None)
        or _config_assertion(text)
        or _by_log(text, "node_failure", "node failure", _NODE, state)
        or _by_log(text, "preempted", "preempted", _PREEMPT, state)
        or _hang(text, state, seconds_since_progress, hang_timeout_s)
        or _by_log(text, "time_limit", "time limit", _TIME_LIMIT, state)
        or _by_log(text, "cancelled", "cancelled", _CANCELLED, state)
        or _by_log(text, "comm_error", "communication error", _COMM, None)
        or _nccl_warn_connect(text)
        or _fallback(text, state, exit_code)
    )


def _fallback(text: str, state: str | None, exit_code: int | None) -> Failure:
    if exit_code == 2:
        return _failure("config_error", f"exit code 2 (argument/config validation): {_last_line(text)}")
    crash = _first(text, _CRASH)
    if crash is not None:
        return _failure("crashed", f"crashed: {_exception_line(text) or crash}")
    if (exit_code not in (None, 0)) or state == "FAILED":
        what = f"exit code {exit_code}" if exit_code not in (None, 0) else f"SLURM state {state}"
        return _failure("crashed", f"crashed ({what}): {_last_line(text)}")
    if exit_code == 0 or state == "COMPLETED":
        return _failure("unknown", f"finished without a result; last line: {_last_line(text)}")
    return _failure("unknown", f"no failure signature; last line: {_last_line(text)}")
