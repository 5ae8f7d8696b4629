"""The typed vocabularies of a sweep's life: where a trial stands (TrialState), why a planned layout was not run
(PruneReason), and how its job stands in the scheduler's words (JobState). str enums (launcher.core.names.StrEnum):
stored as text in the ledger and MLflow, equal to their text."""

from __future__ import annotations

from launcher.core.kinds import FailureKind
from launcher.core.names import StrEnum


class TrialState(StrEnum):
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

# A failure kind -> the ledger state; the ledger is coarser than the taxonomy (the kind is kept beside it).
_STATE_OF_KIND = {FailureKind.OK: TrialState.OK, FailureKind.OOM: TrialState.OOM,
                  FailureKind.TIME_LIMIT: TrialState.TIMEOUT, FailureKind.HANG: TrialState.HANG,
                  FailureKind.CANCELLED: TrialState.CANCELLED}
# FailureKind.DIVERGED is a failed trial (the default): it ran, but its loss went NaN, so its step time is never
# ranked.


def state_for_kind(kind: FailureKind | str) -> TrialState:
    try:
        return _STATE_OF_KIND.get(FailureKind(kind), TrialState.FAILED)
    except ValueError:  # not a kind at all: a failure of some sort
        return TrialState.FAILED


class PruneReason(StrEnum):
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
    GPU_BUDGET = "gpu_budget"
    """plan.max_gpu_hours: running it would take the sweep over its GPU-hour budget (planned again on a resume with
    a larger budget)."""



class JobState(StrEnum):
    """A job's state in SLURM's words (sacct), which the local executor speaks too; LOST is parasweep's own: a local
    job whose processes are gone without a result."""

    PENDING = "PENDING"
    CONFIGURING = "CONFIGURING"
    RUNNING = "RUNNING"
    COMPLETING = "COMPLETING"
    REQUEUED = "REQUEUED"
    REQUEUE_FED = "REQUEUE_FED"
    REQUEUE_HOLD = "REQUEUE_HOLD"
    RESIZING = "RESIZING"
    SUSPENDED = "SUSPENDED"
    STOPPED = "STOPPED"
    SIGNALING = "SIGNALING"
    STAGE_OUT = "STAGE_OUT"
    RESV_DEL_HOLD = "RESV_DEL_HOLD"
    SPECIAL_EXIT = "SPECIAL_EXIT"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"
    TIMEOUT = "TIMEOUT"
    DEADLINE = "DEADLINE"
    NODE_FAIL = "NODE_FAIL"
    BOOT_FAIL = "BOOT_FAIL"
    PREEMPTED = "PREEMPTED"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    REVOKED = "REVOKED"
    LOST = "LOST"

    @property
    def live(self) -> bool:
        """Queued or running: not over yet."""
        return self in _LIVE_JOB_STATES

    @classmethod
    def parse(cls, text: str) -> JobState:
        """sacct's State column ('CANCELLED by 0', 'OUT_OF_MEMORY+', ...) -> a member; a state this list lacks
        (a newer SLURM's) is taken as FAILED: over, and not ok."""
        word = (text or "").split()[0].rstrip("+") if (text or "").strip() else ""
        try:
            return cls(word)
        except ValueError:
            return cls.FAILED


_LIVE_JOB_STATES = frozenset({JobState.PENDING, JobState.RUNNING, JobState.REQUEUED, JobState.RESIZING,
                              JobState.SUSPENDED, JobState.CONFIGURING, JobState.COMPLETING})
