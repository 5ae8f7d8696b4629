"""Bringing back what the planner pruned, once the calibrated memory model says it fits.

The planner prunes a layout whose a-priori memory interval lies wholly above the device's memory
(launcher.plan.band); the ledger keeps it (state pruned, pruned_by predicted_oom, the reason with its numbers). After
each calibration refit the sweep loop asks `bring_back`: a planner-pruned trial whose CALIBRATED interval's lower end
is now within the device's memory (the same rule: launcher.plan.band.memory_fit keeps it), and that no real OOM
rules out (a trial of the same shape that needs no more memory ran out of it: launcher.run.policy.OomIndex), goes
back to planned, with selection `brought_back` and a reason that says what the calibrated model predicts. Once: a
brought-back trial is no longer pruned_by predicted_oom; if a later refit rules it out again it is pruned as
calibrated_oom, never brought back a second time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Optional

from launcher.core.record import TrialRecord
from launcher.core.states import PruneReason, TrialState
from launcher.plan.band import BROUGHT_BACK, calibrated_intervals, calibrated_low_gb, memory_fit
from launcher.plan.calibrate import Calibration, FeatureTable, TrialFeatures
from launcher.run.policy import OomIndex

__all__ = ["BROUGHT_BACK", "bring_back", "candidates", "may_come_back", "predict_pruned"]


def candidates(records: Sequence[TrialRecord]) -> list[TrialRecord]:
    """The trials the planner pruned as predicted OOMs (the only ones that can come back)."""
    return [r for r in records if r.state is TrialState.PRUNED and r.pruned_by == PruneReason.PREDICTED_OOM
            and r.predicted.get("step_time_s")]


def predict_pruned(calibration: Calibration, records: Sequence[TrialRecord],
                   features: Callable[[TrialRecord], TrialFeatures], seq_len: int,
                   may_fit: Optional[Callable[[float, float], bool]] = None,
                   tables: Optional[dict[tuple[str, ...], FeatureTable]] = None) -> dict[str, dict]:
    """config hash -> the calibration's prediction of every candidate (launcher.run.predictions.PREDICTION_KEYS +
    n_fit: the search's own predictions leave pruned trials out). may_fit(peak GB, its log sd): only the candidates
    whose calibrated memory it accepts are predicted in full (the step time's spread prices every fitted constant:
    at 50k trials, thousands of pruned layouts a refit, nearly all still out of memory). `tables`: the candidates'
    FeatureTable by their keys, kept by the caller between refits (the candidates change only when some come
    back: the table of thousands of them was built again at every refit)."""
    pruned = candidates(records)
    if not pruned:
        return {}
    keys = tuple(r.config_hash for r in pruned)
    table = tables.get(keys) if tables is not None else None
    if table is None:
        table = FeatureTable([features(r) for r in pruned])
        if tables is not None:
            tables.clear()   # the last candidates' only
            tables[keys] = table
    if may_fit is not None:
        peak_gb, sd = table.peak_mem_gb(calibration.constants).tolist(), calibration.memory_residual_sd
        keep = [i for i, peak in enumerate(peak_gb) if may_fit(peak, sd)]
        pruned, table = [pruned[i] for i in keep], table.subset(keep)
        if not pruned:
            return {}
    p = calibration.predict(table)
    return {r.config_hash: {"step_time_s": step, "step_sd": sd, "tokens_per_s": r.layout.gbs * seq_len / step,
                            "peak_mem_gb": peak, "mem_sd": mem_sd, "n_fit": calibration.n_trials}
            for r, step, sd, peak, mem_sd in zip(pruned, p.step_time_s.tolist(), p.step_sd.tolist(),
                                                 p.peak_mem_gb.tolist(), p.mem_sd.tolist())}


def may_come_back(peak_gb: float, mem_sd: float, capacity_gb: float, margin: float,
                  keep_borderline: float = 0.0) -> bool:
    """launcher.plan.band's rule on a calibrated peak and its log sd: what bring_back keeps (and what
    predict_pruned's may_fit should price in full)."""
    return memory_fit(peak_gb, calibrated_low_gb(peak_gb, mem_sd), capacity_gb, margin, keep_borderline).kept


def bring_back(records: Sequence[TrialRecord], predictions: dict[str, dict], capacity_gb: float, margin: float,
               keep_borderline: float = 0.0) -> list[tuple[str, str]]:
    """(config hash, reason) of every planner-pruned trial the calibrated model (`predictions`, as predict_pruned
    gives them) now keeps under launcher.plan.band's rule, unless a real OOM rules it out. Pure."""
    ooms = OomIndex(records)
    out = []
    for r in candidates(records):
        p = predictions.get(r.config_hash)
        if p is None:
            continue
        peak, mem_sd = float(p["peak_mem_gb"]), float(p.get("mem_sd", 0.0))
        if not may_come_back(peak, mem_sd, capacity_gb, margin, keep_borderline):
            continue
        band = calibrated_intervals(peak, mem_sd, float(p["step_time_s"]), p.get("step_sd"))
        if ooms.dominating(r) is not None:   # a trial needing no more memory really ran out of it
            continue
        out.append((r.config_hash, f"brought back: the calibrated model says {peak:.3g} GB (90 % interval "
                                   f"{band.peak_mem_gb_low:.3g}–{band.peak_mem_gb_high:.3g} GB) of {capacity_gb:g} GB, "
                                   f"fitted on {p.get('n_fit', 0)} measured trials (a-priori "
                                   f"{float(r.predicted.get('peak_mem_gb', 0.0)):.3g} GB: pruned as a predicted OOM)"))
    return out
