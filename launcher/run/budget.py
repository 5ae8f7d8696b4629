"""The sweep's GPU-hour budget (plan.max_gpu_hours): what the trials have spent, what the next one is predicted to
cost, and whether it fits. Pure functions of the ledger's records and the clock; the sweep loop acts on them.

A trial spends GPU-hours from when its job was seen running (its submission when it never was: it ended between
two polls) to its end, times its GPUs; a queued job holds no GPU. As in the report's search section
(analysis.report.search_summary), a trial's time is its last attempt's.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from launcher.config.schema import RootConfig
from launcher.core.record import TrialRecord
from launcher.core.states import TrialState
from launcher.plan.planner import job_seconds


def held_gpu_hours(r: TrialRecord, now: float) -> float:
    """GPU-hours a trial has held so far (a live one up to `now`, a queued one none)."""
    if r.state is TrialState.SUBMITTED and not r.started_at:
        return 0.0
    start = r.started_at or r.submitted_at
    end = r.finished_at if not r.is_live else now
    if not start or not r.attempts or not end:
        return 0.0
    return max(0.0, end - start) * r.layout.gpus / 3600.0


def spent_gpu_hours(records: Sequence[TrialRecord], now: float) -> float:
    """GPU-hours the sweep's trials have held, running ones up to `now`."""
    return sum(held_gpu_hours(r, now) for r in records)


def predicted_gpu_hours(cfg: RootConfig, r: TrialRecord) -> float:
    """A trial's predicted cost: its job's predicted wall time (the calibrated step time when there is one) times its
    GPUs. 0 when nothing was predicted (it is then never held back)."""
    step = (r.calibrated or {}).get("step_time_s") or (r.predicted or {}).get("step_time_s")
    return job_seconds(cfg, float(step)) * r.layout.gpus / 3600.0 if step else 0.0


def committed_gpu_hours(cfg: RootConfig, records: Sequence[TrialRecord], now: float) -> float:
    """Spent, plus what the live trials are predicted to hold until they end."""
    ahead = sum(max(0.0, predicted_gpu_hours(cfg, r) - held_gpu_hours(r, now)) for r in records if r.is_live)
    return spent_gpu_hours(records, now) + ahead


def within_budget(cfg: RootConfig, records: Sequence[TrialRecord], batch: Sequence[TrialRecord],
                  now: float) -> tuple[list[TrialRecord], Optional[str]]:
    """The head of `batch` (in submission order) that fits plan.max_gpu_hours after what is committed, and, when a
    trial had to be held back, why (None: everything fits or there is no budget). The order is kept: a cheaper
    trial further down is not slipped in ahead of a better one."""
    budget = cfg.plan.max_gpu_hours
    if not budget:
        return list(batch), None
    committed = committed_gpu_hours(cfg, records, now)
    fitting: list[TrialRecord] = []
    for r in batch:
        cost = predicted_gpu_hours(cfg, r)
        if committed + cost > budget:
            return fitting, (f"{r.config_hash[:8]} {r.layout.label()} needs ~{cost:.3g} GPU-hours, and "
                             f"{committed:.3g} of plan.max_gpu_hours={budget:g} are spent or held by running trials")
        committed += cost
        fitting.append(r)
    return fitting, None
