"""Turning a finished job into ledger changes: read its logs, classify, measure. The sweep loop is handed `judge`
(launcher.run.hooks.Judge) by the command line; `python -m analysis` re-judges finished trials from their logs and
recorded job states with `rejudge`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Optional

from analysis.logs.joblog import JobLog
from analysis.logs.outcome import Outcome, trial_outcome
from launcher.backends import get_backend
from launcher.config.schema import RootConfig
from launcher.core.console import Reporter
from launcher.core.kinds import FailureKind
from launcher.core.logfile import read_window
from launcher.core.names import is_cpu_standin
from launcher.core.record import TrialRecord
from launcher.core.states import state_for_kind
from launcher.plan.flops import one_flop_convention
from launcher.run.ledger import Ledger
from launcher.run.policy import exclude_on_retry_kind, may_exclude


def guarded_outcome(cfg: RootConfig, record: TrialRecord, paths: Sequence[Path],
                    reporter: Optional[Reporter] = None, **job: Any) -> Outcome:
    """trial_outcome, and anything around it that can fail on a strange log or file (reading it, the FLOP
    conversion): an unexpected error makes this trial `unknown` with the error in its reason and a warning,
    instead of stopping the sweep (and stopping it again at every resume)."""
    try:
        backend = get_backend(cfg.backend.name)
        outcome = trial_outcome(
            job_log(paths), log_format=backend.log_format, capacity_gb=cfg.cluster.gpu_mem_gb,
            tokens_per_step=record.layout.gbs * cfg.model.seq_len, peak_tflops=physical_peak_tflops(cfg),
            hang_timeout_s=cfg.monitor.hang_timeout_min * 60, **job)
        metrics = (outcome.metrics if backend.reports_planner_flops else
                   one_flop_convention(record.predicted, outcome.metrics, cfg.cluster.peak_tflops))
        return replace(outcome, metrics=metrics)
    except Exception as exc:  # noqa: BLE001 - one unreadable trial must not stop the sweep
        reason = f"judging failed ({type(exc).__name__}: {str(exc)[:160]})"
        (reporter or Reporter.for_streams()).warn(f"trial {record.config_hash}: {reason}; it is marked unknown")
        return Outcome(FailureKind.UNKNOWN, reason, {})


def job_log(paths: Sequence[Path]) -> JobLog:
    """A job's log files (launcher.run.executor.log_paths order), read together: analysis.logs.joblog's rule. Each
    is read as a bounded window (launcher.core.logfile); a missing file adds nothing, a path that is not a regular
    file raises ParseError (the trial is judged `unknown`, naming it)."""
    return JobLog.join([(Path(p).name, read_window(Path(p))) for p in paths if Path(p).exists()])


def physical_peak_tflops(cfg: RootConfig) -> Optional[float]:
    """The cluster's peak as a bound no measurement can pass: a GPU's datasheet figure. The CPU stand-in's peak is
    nominal (one core's rough FMA rate; a faster CPU beats it honestly), so it bounds nothing."""
    return None if is_cpu_standin(cfg.cluster.gpu) else cfg.cluster.peak_tflops


def judge(cfg: RootConfig, record: TrialRecord, paths: Sequence[Path], *, job_state: Optional[str],
          exit_code: Optional[int], job_error: str = "", nodes: Optional[str] = None,
          hang_s: Optional[float] = None, reporter: Optional[Reporter] = None) -> dict[str, Any]:
    """The ledger changes of a job that ended (launcher.run.hooks.Judge)."""
    outcome = guarded_outcome(cfg, record, paths, reporter, slurm_state=job_state or None, exit_code=exit_code,
                              job_error=job_error, seconds_since_progress=hang_s)
    nodes = record.node_list if nodes is None else nodes  # re-judging keeps where the job ran
    excluded = list(record.excluded_nodes)
    if (exclude_on_retry_kind(outcome.failure_kind) and nodes and nodes != "None assigned"
            and may_exclude(cfg.cluster.nodes, record.layout.nodes)):
        excluded = sorted(set(excluded) | {nodes})
    return dict(state=state_for_kind(outcome.failure_kind), failure_kind=outcome.failure_kind,
                reason=outcome.reason, evidence=[line.as_dict() for line in outcome.evidence],
                metrics=outcome.metrics, log_paths=[str(p) for p in paths],
                excluded_nodes=excluded, job_state=job_state, exit_code=exit_code, job_error=job_error,
                node_list=nodes)


def rejudge(cfg: RootConfig, ledger: Ledger, resolve: Callable[[str], Path] = Path,
            reporter: Optional[Reporter] = None) -> int:
    """Re-parse every trial whose job ended by itself; returns how many records changed."""
    changed = 0
    for r in ledger.trials():
        if not r.job_state or not r.state.finished or r.failure_kind == FailureKind.HANG:
            continue  # live, never run, or judged by the monitor (a hang is not visible in the log alone)
        changes = judge(cfg, r, [resolve(p) for p in r.log_paths], job_state=r.job_state, exit_code=r.exit_code,
                        job_error=r.job_error, reporter=reporter)
        changes["log_paths"] = r.log_paths  # stored as the launcher wrote them, not as resolved here
        current = {k: getattr(r, k) for k in changes}
        if changes != current:
            ledger.update(r.config_hash, "re-judged by python -m analysis", synced=False, **changes)
            changed += 1
    return changed
