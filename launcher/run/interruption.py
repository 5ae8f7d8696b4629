"""Attempts count trial failures only: what an interrupted job means for its trial.

A job is interrupted when it was stopped from outside rather than failing by itself: the launcher died while it
was starting it, its keeper was signalled (a Ctrl-C, the launcher's own cancel, a kill), or its processes vanished
without a word (JobStatus.interrupted). Such a trial
- keeps its attempt (with retry.max_attempts=1 it is still run again), up to MAX_FREE_INTERRUPTIONS times, so
  something that kills the same trial over and over cannot make the sweep loop forever;
- is judged from its log as if its end had been seen: a valid result printed before the interruption counts.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from launcher.config.schema import RootConfig
from launcher.core.kinds import FailureKind
from launcher.core.record import TrialRecord
from launcher.run.hooks import Judge

MAX_FREE_INTERRUPTIONS = 3
NOT_COUNTED = "interrupted, attempt not counted"


def free_interruptions(events: Sequence[dict]) -> int:
    """How many times this trial was already given its attempt back (from the ledger's event journal)."""
    return sum(NOT_COUNTED in e.get("detail", "") for e in events)


def interrupted_changes(cfg: RootConfig, record: TrialRecord, paths: Sequence[Path], changes: dict,
                        events: Sequence[dict], judge: Judge) -> dict:
    """The ledger changes for an interrupted job, given what `judge` made of it (`changes`)."""
    if changes["failure_kind"] != FailureKind.OK:
        unseen = judge(cfg, record, paths, job_state=None, exit_code=None, nodes=changes.get("nodes"))
        if unseen["failure_kind"] == FailureKind.OK:  # the result is in the log: the launcher only missed the exit
            return {**unseen, "job_state": changes.get("job_state", ""),
                    "reason": "finished with a result (its end was not seen: the job was interrupted afterwards)"}
    if changes["failure_kind"] == FailureKind.CANCELLED and free_interruptions(events) < MAX_FREE_INTERRUPTIONS:
        why = (changes.get("job_error") or "").split(": ", 1)[-1]  # "...TrialStopped: trial stopped by SIGINT ..."
        return {**changes, "attempts": max(0, record.attempts - 1),
                "reason": f"{NOT_COUNTED}" + (f" ({why})" if why else "") + f": {changes['reason']}"}
    return changes


def unrecorded_submission_changes(record: TrialRecord) -> dict:
    """A trial marked submitted without a job id: the launcher died between marking and submitting, which is not
    the trial's failure either (the caller sets the cancelled state)."""
    return dict(failure_kind=FailureKind.CANCELLED, attempts=max(0, record.attempts - 1),
                reason=f"{NOT_COUNTED}: submission interrupted (the launcher stopped before recording the job)")
