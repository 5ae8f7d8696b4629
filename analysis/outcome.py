"""A finished job's log + its job state -> the trial's failure kind, reason and measured metrics.

Pure: text and numbers in, an Outcome out. The embedded workload's result line gives the measurements directly;
Megatron logs are summarised from their iteration and memory lines (steady state detected, not assumed).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from analysis.classify import classify
from analysis.errors import ParseError
from analysis.parse_megatron import parse_iterations, parse_memory, peak_memory_mb
from analysis.parse_workload import parse_workload
from analysis.steady_state import steady_state

MIB = 1024 * 1024


@dataclass(frozen=True)
class Outcome:
    failure_kind: str
    reason: str
    metrics: dict = field(default_factory=dict)


def _job_state(slurm_state: Optional[str], job_error: str) -> Optional[str]:
    """The executor's view of how the job ended, in SLURM's words."""
    if "timed-out" in job_error or "timed out" in job_error:
        return "TIMEOUT"  # submitit's local controller signals a time limit like SLURM does
    if slurm_state == "LOST":
        return "CANCELLED"  # the job's processes were killed (e.g. with the launcher) before it finished
    return slurm_state


def _headroom(peak_mem_gb: Optional[float], capacity_gb: float) -> Optional[float]:
    return None if peak_mem_gb is None else 1.0 - peak_mem_gb / capacity_gb


def _workload_metrics(text: str, capacity_gb: float) -> tuple[dict, str]:
    log = parse_workload(text)
    if log.result is None:
        return {}, log.problem or "no PARASWEEP_RESULT line"
    r = log.result
    metrics = {k: r[k] for k in ("step_time_s", "tokens_per_s", "tflops_per_gpu", "model_tflops_per_gpu", "mfu",
                                 "peak_mem_gb") if isinstance(r.get(k), (int, float))}
    # On a GPU the device loses what the caching allocator reserved, not only what tensors hold.
    reserved = r.get("peak_mem_reserved_gb")
    metrics["headroom"] = _headroom(reserved if isinstance(reserved, (int, float)) else metrics.get("peak_mem_gb"),
                                    capacity_gb)
    measured = [it for it in log.iterations if it.phase == "measure"]
    if measured:
        stats = steady_state(measured)
        metrics["step_time_std_s"] = stats.std_step_time_s
        metrics["n_measured"] = stats.n_used
    return {k: v for k, v in metrics.items() if v is not None}, ""


def _megatron_metrics(text: str, capacity_gb: float, tokens_per_step: int) -> tuple[dict, str]:
    try:
        stats = steady_state(parse_iterations(text))
    except ParseError as exc:
        return {}, str(exc)
    metrics = {"step_time_s": stats.median_step_time_s, "tokens_per_s": tokens_per_step / stats.median_step_time_s,
               "step_time_std_s": stats.std_step_time_s, "n_measured": stats.n_used}
    if stats.median_tflops_per_gpu is not None:
        metrics["tflops_per_gpu"] = stats.median_tflops_per_gpu
    reports = parse_memory(text)
    peak_mb = peak_memory_mb(reports, "max_reserved_mb") or peak_memory_mb(reports)
    if peak_mb is not None:
        metrics["peak_mem_gb"] = peak_mb * MIB / 1e9
        metrics["headroom"] = _headroom(metrics["peak_mem_gb"], capacity_gb)
    return metrics, ""


def trial_outcome(log_text: str, *, log_format: str, capacity_gb: float, tokens_per_step: int,
                  slurm_state: Optional[str] = None, exit_code: Optional[int] = None, job_error: str = "",
                  seconds_since_progress: Optional[float] = None, hang_timeout_s: Optional[float] = None) -> Outcome:
    state = _job_state(slurm_state, job_error)
    if log_format == "workload":  # the embedded workload's result line; else Megatron-style iteration lines
        metrics, problem = _workload_metrics(log_text, capacity_gb)
    else:
        metrics, problem = _megatron_metrics(log_text, capacity_gb, tokens_per_step)
    has_result = bool(metrics) and not problem
    failure = classify(log_text, slurm_state=state, exit_code=exit_code, has_result=has_result,
                       seconds_since_progress=seconds_since_progress, hang_timeout_s=hang_timeout_s)
    if failure.kind == "ok":
        return Outcome("ok", failure.reason, metrics)
    if failure.kind in ("unknown",) and state in ("COMPLETED", None) and exit_code in (0, None) and problem:
        # The job says it succeeded, but its log cannot be read: a truncated or garbled log.
        return Outcome("crashed", f"unparseable log: {problem}", metrics)
    return Outcome(failure.kind, failure.reason, metrics if failure.kind == "oom" else {})
