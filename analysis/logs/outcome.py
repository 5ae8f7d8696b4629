"""A finished job's log + its job state -> the trial's failure kind, reason and measured metrics.

Pure: text and numbers in, an Outcome out. The embedded workload's result line gives the measurements directly;
every other format (Megatron-LM/-DeepSpeed, NeMo 1 and 2, DeepSpeed, the HF Trainer: analysis.logs.read_log) is
summarised from its iteration records (steady state detected, not assumed) or its final speed report.

`trial_outcome` is total: whatever the log (garbled, binary, truncated, huge, hostile) it returns an Outcome. A
measurement that cannot be true (analysis.logs.plausibility) makes the trial `invalid_measurement`, never `ok`; a
finished run whose log has no measurement this library can read is `unknown` ("finished, no metrics I can read").
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Optional, TypedDict

from analysis.logs.classify import classify
from analysis.logs.joblog import EvidenceLine, JobLog
from analysis.logs.logtext import normalize_lines
from analysis.logs.parse_megatron import IMPOSSIBLE_FIELD, IMPOSSIBLE_STEP, peak_memory_mb
from analysis.logs.plausibility import implausible
from analysis.logs.read_log import LogReading, read_log
from analysis.logs.steady_state import steady_state, usable
from launcher.core.kinds import FailureKind

MIB = 1024 * 1024
_WORKLOAD_KEYS = ("step_time_s", "tokens_per_s", "tflops_per_gpu", "model_tflops_per_gpu", "mfu", "peak_mem_gb")


@dataclass(frozen=True)
class Outcome:
    failure_kind: str  # a FailureKind value, as a plain str (the ledger's and MLflow's type)
    reason: str
    metrics: dict[str, Any] = field(default_factory=dict)
    evidence: tuple[EvidenceLine, ...] = ()  # (file, line number, line) that support the verdict
    notes: tuple[str, ...] = ()  # records the parsers dropped, and why
    log_format: str = ""  # analysis.logs.read_log.LogReading.format


class _Shared(TypedDict):
    """What every Outcome of one judged log carries, whatever its verdict."""
    evidence: tuple[EvidenceLine, ...]
    notes: tuple[str, ...]
    log_format: str


def _job_state(slurm_state: Optional[str], job_error: str) -> Optional[str]:
    """The executor's view of how the job ended, in SLURM's words."""
    if "timed-out" in job_error or "timed out" in job_error:
        return "TIMEOUT"  # submitit's local controller signals a time limit like SLURM does
    if slurm_state == "LOST":
        return "CANCELLED"  # the job's processes were killed (e.g. with the launcher) before it finished
    return slurm_state


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _headroom(peak_mem_gb: Optional[float], capacity_gb: Optional[float]) -> Optional[float]:
    if peak_mem_gb is None or not capacity_gb or not math.isfinite(capacity_gb) or capacity_gb <= 0:
        return None
    return 1.0 - peak_mem_gb / capacity_gb


def _workload_metrics(reading: LogReading, capacity_gb: Optional[float]) -> tuple[dict[str, Any], str]:
    log = reading.workload
    if log is None or log.result is None:
        return {}, (log.problem if log is not None else None) or "no PARASWEEP_RESULT line"
    r = log.result
    metrics = {k: r[k] for k in _WORKLOAD_KEYS if _number(r.get(k))}
    reserved = r.get("peak_mem_reserved_gb")
    if _number(reserved):
        metrics["peak_mem_reserved_gb"] = reserved
    # On a GPU the device loses what the caching allocator reserved, not only what tensors hold.
    metrics["headroom"] = _headroom(reserved if _number(reserved) else metrics.get("peak_mem_gb"), capacity_gb)
    measured = [it for it in log.iterations if it.phase == "measure" and usable(it.step_time_s)]
    if measured:
        stats = steady_state(measured)
        metrics["step_time_std_s"] = stats.std_step_time_s
        metrics["n_measured"] = stats.n_used
    return {k: v for k, v in metrics.items() if v is not None}, ""


def _log_metrics(reading: LogReading, capacity_gb: Optional[float],
                 tokens_per_step: Optional[int]) -> tuple[dict[str, Any], str]:
    tokens = tokens_per_step or reading.tokens_per_step
    metrics: dict[str, Any] = {}
    if reading.iterations:
        stats = steady_state(reading.iterations)
        step_s = stats.median_step_time_s
        metrics.update(step_time_s=step_s, step_time_std_s=stats.std_step_time_s, n_measured=stats.n_used,
                       n_warmup=stats.n_warmup)
        if stats.median_tflops_per_gpu is not None:
            metrics["tflops_per_gpu"] = stats.median_tflops_per_gpu
        if stats.median_samples_per_s is not None:
            metrics["samples_per_s"] = stats.median_samples_per_s
        if tokens:
            metrics["tokens_per_s"] = tokens / step_s
        elif stats.median_tokens_per_s is not None:
            metrics["tokens_per_s"] = stats.median_tokens_per_s
        elif stats.median_tokens_per_gpu_per_s is not None and reading.world_size:
            metrics["tokens_per_s"] = stats.median_tokens_per_gpu_per_s * reading.world_size
    elif reading.final is not None and reading.final.step_time_s is not None:
        step_s = reading.final.step_time_s
        metrics["step_time_s"] = step_s
        if reading.final.samples_per_s is not None:
            metrics["samples_per_s"] = reading.final.samples_per_s
        if tokens and step_s:
            metrics["tokens_per_s"] = tokens / step_s
    peak_mb = peak_memory_mb(list(reading.memory), "max_reserved_mb") or peak_memory_mb(list(reading.memory))
    if peak_mb is not None:
        metrics["peak_mem_gb"] = peak_mb * MIB / 1e9
        headroom = _headroom(metrics["peak_mem_gb"], capacity_gb)
        if headroom is not None:
            metrics["headroom"] = headroom
    if "step_time_s" not in metrics:
        return metrics, "finished, no metrics I can read" + (f" ({reading.notes[0]})" if reading.notes else "")
    return metrics, ""


Measured = tuple[dict[str, Any], str, LogReading]
"""What `measurements` returns: (metrics, problem, reading)."""


def measurements(text: str, *, log_format: str = "auto", capacity_gb: Optional[float] = None,
                 tokens_per_step: Optional[int] = None) -> Measured:
    """What a normalised log measures, whatever its verdict: (metrics, problem, reading). `problem` says why
    there is no usable step time ("" when there is one). Used by trial_outcome and the triage command."""
    reading = read_log(text, tokens_per_step=tokens_per_step)
    if log_format == "workload" or (log_format == "auto" and reading.format == "workload" and reading.workload):
        metrics, problem = _workload_metrics(reading, capacity_gb)
    else:
        metrics, problem = _log_metrics(reading, capacity_gb, tokens_per_step)
    return metrics, problem, reading


def _finite_only(metrics: dict[str, Any]) -> dict[str, Any]:
    """What may go to the ledger and MLflow: numbers that are finite (strict JSON has no NaN)."""
    return {k: v for k, v in metrics.items() if not isinstance(v, float) or math.isfinite(v)}


def _judge(log_text: str | bytes | JobLog, *, log_format: str, capacity_gb: Optional[float],
           tokens_per_step: Optional[int], peak_tflops: Optional[float], slurm_state: Optional[str],
           exit_code: Optional[int], job_error: str, seconds_since_progress: Optional[float],
           hang_timeout_s: Optional[float], measured: Optional[Measured]) -> Outcome:
    if isinstance(log_text, JobLog):
        job = log_text
    else:
        read, dropped = normalize_lines(log_text)
        job = JobLog(("",), read, (1,), dropped=(dropped,))
    text = job.text
    state = _job_state(slurm_state, job_error or "")
    metrics, problem, reading = measured or measurements(text, log_format=log_format, capacity_gb=capacity_gb,
                                                         tokens_per_step=tokens_per_step)
    has_result = "step_time_s" in metrics and not problem
    # Step records without a step time (samples/s and no batch size) still show that training ran; the workload
    # format is judged by its result line alone.
    progress_offset = reading.progress_offset if log_format != "workload" else None
    failure = classify(text, slurm_state=state, exit_code=exit_code, has_result=has_result,
                       seconds_since_progress=seconds_since_progress, hang_timeout_s=hang_timeout_s,
                       progress_offset=progress_offset, losses=reading.losses)
    common = _Shared(evidence=job.evidence(failure.evidence), notes=job.notes + reading.notes,
                     log_format=reading.format)
    if failure.kind == FailureKind.OK:
        why = implausible(metrics, capacity_gb=capacity_gb, peak_tflops=peak_tflops,
                          tokens_per_step=tokens_per_step or reading.tokens_per_step)
        # a step record's MFU/TFLOP/s that no device reaches, even where the record gives no step time
        why = why or next((n for n in reading.notes if IMPOSSIBLE_FIELD in n), None)
        if why is not None:
            return Outcome(FailureKind.INVALID_MEASUREMENT.value, f"impossible measurement: {why}", {}, **common)
        return Outcome(FailureKind.OK.value, failure.reason, _finite_only(metrics), **common)
    impossible = [n for n in reading.notes if IMPOSSIBLE_STEP in n]
    finished = state in ("COMPLETED", None) and exit_code in (0, None)  # or nothing says otherwise
    if failure.kind == FailureKind.UNKNOWN and finished and impossible and not has_result:
        # every step the log reports has a zero, negative or infinite time: a measurement, but an impossible one
        return Outcome(FailureKind.INVALID_MEASUREMENT.value, f"impossible measurement: {impossible[0]}", {},
                       **common)
    if failure.kind == FailureKind.UNKNOWN and problem:
        # Nothing failed, but the log has nothing this library can read: an unrecognised format, or a garbled or
        # truncated result line.
        detail = problem.removeprefix("finished, no metrics I can read")
        if reading.workload is not None or log_format == "workload":
            detail = f" (unparseable log: {problem})"
        if state == "COMPLETED" or exit_code == 0:
            reason = f"finished, no metrics I can read{detail}"
        else:  # nothing says how the job ended (a log alone)
            reason = failure.reason.replace("no failure signature", f"no failure signature and no metrics I can "
                                                                    f"read{detail}", 1)
        if detail.startswith(" (unparseable log"):
            reason = f"unparseable log: {problem}; " + reason.replace(detail, "")
        return Outcome(FailureKind.UNKNOWN.value, reason, _finite_only(metrics), **common)
    kept = _finite_only(metrics) if failure.kind == FailureKind.OOM else {}
    return Outcome(failure.kind.value, failure.reason, kept, **common)


def trial_outcome(log_text: str | bytes | JobLog, *, log_format: str = "auto", capacity_gb: Optional[float] = None,
                  tokens_per_step: Optional[int] = None, peak_tflops: Optional[float] = None,
                  slurm_state: Optional[str] = None, exit_code: Optional[int] = None, job_error: str = "",
                  seconds_since_progress: Optional[float] = None,
                  hang_timeout_s: Optional[float] = None, measured: Optional[Measured] = None) -> Outcome:
    """Judge one finished (or monitored) job. `log_format` "workload" reads the embedded workload's result line;
    "megatron" (the other backends) or "auto" reads whichever format the log is in (Megatron-LM/-DeepSpeed, NeMo 1
    and 2, DeepSpeed, the HF Trainer; "auto" also recognises the workload's result line). `capacity_gb` (device
    memory) and `peak_tflops` (per GPU) bound what a plausible measurement may report; `tokens_per_step` (global
    batch x sequence length) turns step times into tokens/s. A job's log files are judged together as a JobLog
    (analysis.logs.joblog: the rule), and the evidence names the file each line is in. `measured`: what
    `measurements` already returned for this text and these arguments (the triage command prints it too; reading
    a large log once instead of twice). Never raises: an unexpected error becomes an `unknown` outcome whose
    reason names it."""
    try:
        return _judge(log_text, log_format=log_format, capacity_gb=capacity_gb, tokens_per_step=tokens_per_step,
                      peak_tflops=peak_tflops, slurm_state=slurm_state, exit_code=exit_code, job_error=job_error,
                      seconds_since_progress=seconds_since_progress, hang_timeout_s=hang_timeout_s,
                      measured=measured)
    except Exception as exc:  # noqa: BLE001 - judging must never stop a sweep; the reason carries the error
        return Outcome(FailureKind.UNKNOWN.value, f"judging failed ({type(exc).__name__}: {str(exc)[:160]}); "
                                                  "the log was kept for inspection")
