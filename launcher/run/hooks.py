"""What the sweep loop is handed instead of importing later phases (docs/architecture.md): the judge of a finished
job and the reader of a running job's progress (analysis.logs), where a changed trial goes (MLflow,
analysis.report.tracking_link) and the end of the sweep (analysis.report.conclusion). The command line
(launcher/__main__.py) wires the real ones; tests hand in their own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional, Protocol

from launcher.config.schema import RootConfig
from launcher.core.record import TrialRecord
from launcher.run.folder import SweepFolder
from launcher.run.ledger import Ledger


class Judge(Protocol):
    """A finished (or interrupted, or hung) job -> the ledger changes of its trial (state, failure kind, reason,
    metrics, ...). Total: whatever the log holds, it returns changes (analysis.logs.judge.judge)."""

    def __call__(self, cfg: RootConfig, record: TrialRecord, paths: Sequence[Path], *, job_state: Optional[str],
                 exit_code: Optional[int], job_error: str = "", nodes: Optional[str] = None,
                 hang_s: Optional[float] = None) -> dict[str, Any]: ...


class LogProgress(Protocol):
    """What the loop reads from a running job's log (analysis.logs.progress)."""

    def has_iteration(self, text: str) -> bool:
        """Does this piece of a log report a training iteration (hang detection)?"""

    def step_times(self, log_text: str, warmup_iters: int) -> list[float]:
        """The measured step times a running trial has logged so far (early stop)."""


class TrialSink(Protocol):
    """Where the loop sends a trial whose record changed (finished, stopped, pruned): MLflow's mirror of the ledger
    (analysis.report.tracking_link.TrackingLink). Never raises for an unreachable store."""

    def sync(self, record: TrialRecord) -> None: ...


class NoSink:
    """A TrialSink that keeps nothing (tracking off, tests)."""

    def sync(self, record: TrialRecord) -> None:
        return None


@dataclass(frozen=True)
class SweepHooks:
    judge: Judge
    progress: LogProgress
    open_sink: Callable[[RootConfig, Ledger, SweepFolder], Any]
    """Opens the sweep's TrialSink once the ledger is open (the MLflow parent run)."""
    finish: Callable[[RootConfig, SweepFolder, Ledger, Any, float], int]
    """The end of the sweep (rank, best.json, report, MLflow): its exit status. Arguments: config, folder, ledger,
    the sink, the sweep's active seconds."""
