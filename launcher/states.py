"""The typed vocabularies of a sweep's life: where a trial stands (TrialState) and why a planned layout was not
run (PruneReason). str-valued enums: they are stored as text in the ledger, compare equal to their text, and reach
the analysis library (which takes plain records) as plain strings."""

from __future__ import annotations

from enum import Enum


class TrialState(str, Enum):
    """A trial's state in the ledger, in the order people read them (progress lines, tables)."""

    PLANNED = "planned"
    SUBMITTED = "submitted"
    RUNNING = "running"
    OK = "ok"
    OOM = "oom"
    FAILED = "failed"
    TIMEOUT = "timeout"
    HANG = "hang"
    CANCELLED = "cancelled"
    STOPPED_EARLY = "stopped_early"
    """Cancelled by the sweep while running: its partial measurement was known worse than the best (not a failure:
    never retried, never the winner, but measured for the calibration)."""
    PRUNED = "pruned"

    def __str__(self) -> str:
        return self.value

    @property
    def live(self) -> bool:
        """Queued or running: its job is the launcher's to watch."""
        return self in (TrialState.SUBMITTED, TrialState.RUNNING)

    @property
    def finished(self) -> bool:
        """It ran and its job ended (whatever the outcome)."""
        return self in _FINISHED

    @property
    def counted(self) -> bool:
        """Part of the sweep's work (everything but what the planner or an OOM ruled out)."""
        return self is not TrialState.PRUNED


_FINISHED = frozenset({TrialState.OK, TrialState.OOM, TrialState.FAILED, TrialState.TIMEOUT, TrialState.HANG,
                       TrialState.CANCELLED, TrialState.STOPPED_EARLY})
MEASURED = frozenset({TrialState.OK, TrialState.STOPPED_EARLY})
"""States whose trial measured a step time (launcher.run.scheduler.MEASURED, typed)."""

# A failure kind (analysis.classify) -> the ledger state; the ledger is coarser than the taxonomy (the kind is kept).
# "diverged" is a failed trial: it ran, but its loss went NaN, so its step time must never be ranked.
_STATE_OF_KIND = {"ok": TrialState.OK, "oom": TrialState.OOM, "time_limit": TrialState.TIMEOUT,
                  "hang": TrialState.HANG, "cancelled": TrialState.CANCELLED, "diverged": TrialState.FAILED}


def state_for_kind(kind: str) -> TrialState:
    return _STATE_OF_KIND.get(kind, TrialState.FAILED)


class PruneReason(str, Enum):
    """Why a valid layout is not run."""

    PREDICTED_OOM = "predicted_oom"
    """The estimate puts its peak memory over the safety margin (it never ran: no MLflow child run)."""
    BUDGET = "budget"
    """Outside plan.max_trials (not a trial of this sweep: not in the ledger)."""
    OOM_DOMINATED = "oom_dominated"
    """It needs more memory than a trial that ran out of memory."""
    CALIBRATED_OOM = "calibrated_oom"
    """The calibrated memory model (fitted to the sweep's measured peaks) puts it over the margin, and no measured
    trial predicted to need at least as much memory fitted."""
    CONVERGED = "converged"
    """plan.stop_when_converged: the calibrated model gave it no real chance to beat the best (reason says why)."""

    def __str__(self) -> str:
        return self.value
