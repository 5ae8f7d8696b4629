"""A submission that sbatch refused at submit time (after the preflight passed: the controller went down, a submit
limit was hit): what it means for its trial, and how the sweep gets it run.

A refusal SLURM can never satisfy (an invalid partition, account or node request) is the trial's config error, as
before. Any other refusal is `submit_refused`: the job never existed, so
- no attempt is counted and it is not resubmitted in the same run (a controller that is down refuses the retry
  too, and each sbatch call waits for it);
- the end of the sweep says how many were refused and names the command that submits them again: the same one;
- that next run plans them again (`plan_refused_again`) before it submits anything.
"""

from __future__ import annotations

from typing import Optional

from launcher.core.kinds import FailureKind
from launcher.core.record import TrialRecord
from launcher.core.states import TrialState
from launcher.run.ledger import Ledger
from launcher.run.policy import refusal_kind


def refused_changes(record: TrialRecord, why: str, now: float) -> dict:
    """The ledger changes for `record` (marked submitted, its attempt counted) whose submission sbatch refused."""
    kind = refusal_kind(why)
    changes = dict(state=TrialState.FAILED, failure_kind=kind, reason=why, finished_at=now, synced=False)
    if kind is FailureKind.SUBMIT_REFUSED:  # the job never existed: not an attempt of the trial
        changes["attempts"] = max(0, record.attempts - 1)
    return changes


def plan_refused_again(ledger: Ledger) -> int:
    """At the start of a run: trials whose submission was refused before are planned again (their attempts kept)."""
    refused = _refused(ledger)
    for r in refused:
        ledger.update(r.config_hash, "planned again: its submission was refused before", state=TrialState.PLANNED,
                      failure_kind="", reason="", finished_at=0.0)
    return len(refused)


def refused_note(ledger: Ledger, command: str) -> Optional[str]:
    """The end of the sweep's line about refused submissions (None when there were none)."""
    refused = _refused(ledger)
    if not refused:
        return None
    return (f"{len(refused)} trial(s) were never run: sbatch refused their submission (no attempt counted; last "
            f"error: {refused[-1].reason.strip()[:300]}). Once SLURM takes jobs again, run the same command to submit "
            f"them: {command}")


def _refused(ledger: Ledger) -> list[TrialRecord]:
    """The trials whose last submission sbatch refused (failed as submit_refused)."""
    return [r for r in ledger.trials((TrialState.FAILED,)) if r.failure_kind == FailureKind.SUBMIT_REFUSED]
