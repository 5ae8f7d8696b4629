"""What the search did, from plain trial records: the trials in the order they finished with the GPU-hours spent
and the best throughput so far, what the calibration predicted for each before it ran, and what was stopped early
or skipped (and why). Fed to the report, the plots (analysis.report.plots.draw_search_progress) and MLflow.

Plain dicts in (the ledger's records as `asdict`; states and prune reasons compared as launcher.core's enums). A
trial's GPU-hours are its last attempt's wall time (submission to finish: queueing included, which on a busy
cluster over-counts) times its GPUs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Optional

from launcher.core.states import PruneReason, TrialState
from launcher.plan.band import BROUGHT_BACK, calibrated_intervals

SKIP_REASONS = (PruneReason.CALIBRATED_OOM, PruneReason.CONVERGED, PruneReason.OOM_DOMINATED, PruneReason.GPU_BUDGET)
"""Prune reasons decided while the sweep ran (the planner's predicted_oom is shown with the plan)."""


@dataclass(frozen=True)
class Ran:
    """One trial that ran, in finishing order."""

    trial: dict
    gpu_hours: float               # this trial's
    spent_gpu_hours: float         # cumulative, after it
    tokens_per_s: Optional[float]  # measured, ok trials only (what may win)
    best_tokens_per_s: Optional[float]


def _hours(t: dict) -> float:
    """GPU-hours from the job's start (its submission when it was never seen running) to its end."""
    start, end = t.get("started_at") or t.get("submitted_at") or 0.0, t.get("finished_at") or 0.0
    return max(0.0, end - start) * int(t.get("layout", {}).get("gpus") or 1) / 3600.0


def run_order(trials: Sequence[dict]) -> list[Ran]:
    """The trials that ran to an end, by finishing time, with the GPU-hours spent and the best ok throughput."""
    ran = sorted((t for t in trials if t.get("attempts") and t.get("finished_at")), key=lambda t: t["finished_at"])
    out, spent, best = [], 0.0, None
    for t in ran:
        hours = _hours(t)
        spent += hours
        speed = (t.get("metrics") or {}).get("tokens_per_s") if t.get("state") == TrialState.OK else None
        if speed and (best is None or speed > best):
            best = speed
        out.append(Ran(t, hours, spent, speed or None, best))
    return out


def progress_points(trials: Sequence[dict]) -> list[tuple[float, Optional[float]]]:
    """(cumulative GPU-hours, measured tokens/s or None) in run order: analysis.report.plots' search-progress curve."""
    return [(r.spent_gpu_hours, r.tokens_per_s) for r in run_order(trials)]


def hours_to_best(trials: Sequence[dict], within: float = 0.02) -> Optional[float]:
    """GPU-hours spent when a trial within `within` of the sweep's best was first measured (None: none ok)."""
    order = run_order(trials)
    top = max((r.tokens_per_s for r in order if r.tokens_per_s), default=None)
    if top is None:
        return None
    return next(r.spent_gpu_hours for r in order if r.tokens_per_s and r.tokens_per_s >= (1 - within) * top)


def calibrated_error(trial: dict) -> Optional[float]:
    """calibrated prediction / measured tokens/s - 1, for a trial measured after a calibration predicted it."""
    predicted = (trial.get("calibrated") or {}).get("tokens_per_s")
    measured = (trial.get("metrics") or {}).get("tokens_per_s")
    if not predicted or not measured or trial.get("state") not in ("ok", "stopped_early"):
        return None
    return predicted / measured - 1.0


def stopped_early(trials: Sequence[dict]) -> list[dict]:
    return [t for t in trials if t.get("state") == TrialState.STOPPED_EARLY]


def skipped(trials: Sequence[dict]) -> list[dict]:
    """Planned trials the sweep took out while it ran (calibrated OOM, converged, dominated by an OOM)."""
    return [t for t in trials if t.get("state") == TrialState.PRUNED and t.get("pruned_by") in SKIP_REASONS]


def brought_back(trials: Sequence[dict]) -> list[dict]:
    """Trials the planner pruned as predicted OOMs that the calibrated memory model brought back
    (launcher.run.bringback), whatever became of them."""
    return [t for t in trials if t.get("selection") == BROUGHT_BACK]


def interval_text(value: Optional[float], low: Optional[float], high: Optional[float], digits: int = 3) -> str:
    """'0.612 (0.545–0.656)' ('' without a value; the value alone without its interval)."""
    if not value:
        return ""
    def fmt(x: float) -> str:   # throughputs as whole numbers, memory and times to `digits` significant ones
        return f"{x:,.0f}" if value >= 100 else f"{x:.{digits}g}"
    return fmt(value) if not low or not high else f"{fmt(value)} ({fmt(low)}–{fmt(high)})"


def calibrated_bounds(calibrated: dict) -> dict[str, float]:
    """The 90 % intervals of a calibrated prediction (TrialRecord.calibrated: peak and step time with their
    log-space sds), under the keys of the a-priori ones (launcher.plan.band.Intervals.as_dict); {} without one."""
    peak, step = calibrated.get("peak_mem_gb"), calibrated.get("step_time_s")
    tokens = calibrated.get("tokens_per_s")
    if not peak or not step or not tokens:
        return {}
    bounds = calibrated_intervals(float(peak), float(calibrated.get("mem_sd") or 0.0), float(step),
                                  float(calibrated.get("step_sd") or 0.0))
    return bounds.as_dict(float(tokens), float(step))


def summary_metrics(trials: Sequence[dict], calibration: Optional[dict]) -> dict:
    """Numbers for the parent MLflow run: GPU-hours, what the search saved, how good the calibration is."""
    order = run_order(trials)
    out: dict[str, Any] = {"gpu_hours_spent": order[-1].spent_gpu_hours if order else 0.0,
           "trials_stopped_early": len(stopped_early(trials)),
           "trials_skipped": len(skipped(trials)), "trials_brought_back": len(brought_back(trials))}
    found = hours_to_best(trials)
    if found is not None:
        out["gpu_hours_to_best"] = found
    if calibration:
        out["calibration_applied"] = 1.0 if calibration.get("applied") else 0.0
        out["calibration_trials"] = calibration.get("n_trials", 0)
        out["calibration_residual_sd"] = calibration.get("residual_sd")
        if calibration.get("holdout_error") is not None:
            out["calibration_holdout_error"] = calibration["holdout_error"]
            out["calibration_holdout_trials"] = calibration.get("n_holdout", 0)
    return {k: v for k, v in out.items() if v is not None}
