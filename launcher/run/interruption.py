"""Attempts count trial failures only: what an interrupted job means for its trial.

A job is interrupted when it was stopped from outside rather than failing by itself: the launcher died while it
was starting it, its keeper was signalled (a Ctrl-C, the launcher's own cancel, a kill), or its processes vanished
without a word (JobStatus.interrupted). Such a trial
- keeps its attempt (with retry.max_attempts=1 it is still run again), up to MAX_FREE_INTERRUPTIONS times, so
  something that kills the same trial over and over cannot make the sweep loop forever;
- is judged from its log as if its end had been seen: a valid result printed before the interruption counts.

SIGTERM (what `kill`, `timeout` and SLURM send) and SIGHUP (a closed terminal or ssh session) are handled like a
Ctrl-C (`terminate_on_signals`): the signal raises Terminated where the launcher is, the sweep loop stops its live
trials and records them as interrupted (`stop_live_trials`), and the command line says so in one line and exits
128 + the signal (143, 129). Unlike a Ctrl-C, these signals reach the launcher alone, not its local jobs'
controllers: the launcher stops the trials itself. With executor.detach_on_term=true, SLURM jobs are left running
instead, and the next run of the same command re-attaches to them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import FrameType
from typing import Optional, Protocol

from launcher.config.schema import RootConfig
from launcher.core.kinds import FailureKind
from launcher.core.record import TrialRecord
from launcher.core.states import JobState, TrialState
from launcher.run.executor import JobStatus
from launcher.run.hooks import Judge
from launcher.run.ledger import Ledger

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


# -- SIGTERM and SIGHUP --------------------------------------------------------------------------------------------

TERM_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


class Terminated(BaseException):
    """SIGTERM or SIGHUP reached the launcher. A BaseException, as KeyboardInterrupt is: no `except Exception` on
    the way up swallows it, and the ledger's transactions roll back on it."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum
        self.stopped = 0
        """Live trials the launcher stopped and recorded as interrupted."""
        self.detached = 0
        """Live SLURM jobs left running (executor.detach_on_term=true)."""

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    def message(self) -> str:
        """The command line's one line."""
        name = signal.Signals(self.signum).name
        if self.detached:
            return (f"terminated by {name}: {self.detached} SLURM job(s) left running (executor.detach_on_term=true); "
                    "run the same command again to re-attach to them")
        stopped = (f"{self.stopped} live trial(s) stopped and recorded as interrupted (their attempts not counted)"
                   if self.stopped else "the ledger is intact")
        return f"terminated by {name}: {stopped}; run the same command again to resume"


@contextlib.contextmanager
def terminate_on_signals() -> Iterator[None]:
    """While inside: SIGTERM and SIGHUP raise Terminated where the launcher is (as SIGINT raises KeyboardInterrupt).
    The first one only: a second signal must not cut short the stopping and recording of the trials."""

    def raise_terminated(signum: int, frame: Optional[FrameType]) -> None:
        for sig in TERM_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)
        raise Terminated(signum)

    if threading.current_thread() is not threading.main_thread():  # Python signals only reach the main thread
        yield
        return
    previous = {sig: signal.signal(sig, raise_terminated) for sig in TERM_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


class Stoppable(Protocol):
    """What stopping the live trials needs of a runner (launcher.run.executor's two, the tests' scripted ones)."""

    def poll(self, jobs: dict[str, Path]) -> dict[str, JobStatus]: ...

    def cancel(self, job_id: str) -> None: ...


def stop_live_trials(runner: Stoppable, ledger: Ledger, finish: Callable[[TrialRecord, JobStatus], None],
                     forget: Callable[[TrialRecord], None], detach: bool) -> tuple[int, int]:
    """On SIGTERM/SIGHUP: stop every live trial and record it as interrupted (`finish`, with the job's end marked
    interrupted: its attempt is given back, a result already in its log counts; `forget` for one marked submitted
    without a job id). With `detach`, SLURM jobs are left running (the next run re-attaches). Returns (stopped,
    detached)."""
    live = ledger.trials((TrialState.SUBMITTED, TrialState.RUNNING))
    if detach:
        return 0, len(live)
    for r in live:
        if not r.job_id:
            forget(r)
    live = [r for r in live if r.job_id]
    cancel_all = getattr(runner, "cancel_all", None)  # all at once where the runner can: SLURM's KillWait is short
    if cancel_all is not None:
        cancel_all([r.job_id for r in live])
    else:
        for r in live:
            runner.cancel(r.job_id)
    statuses = runner.poll({r.job_id: Path(r.job_dir) for r in live})
    for r in live:
        status = statuses[r.job_id]
        if status.live:  # cancelled, not ended yet (SLURM's accounting lags): its end is known to be ours
            status = JobStatus(JobState.CANCELLED, error="cancelled by the launcher on a termination signal")
        finish(r, dataclasses.replace(status, interrupted=True))
    return len(live), 0
