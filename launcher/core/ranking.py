"""Choosing the best trial by the sweep's objective (launcher.core.objective) among ok trials; ties within
measurement noise go to memory headroom. Used by the sweep loop (early stop, progress), the plan and the report.
"""

from __future__ import annotations

from collections.abc import Sequence
from statistics import median
from typing import Any, Optional

from launcher.core.objective import Objective
from launcher.core.states import TrialState

Trial = dict[str, Any]
"""A trial record as plain data (TrialRecord as a dict, with `n_runs` once repeats are folded)."""


def objective_value(tokens_per_s: float, gpus: int, objective: Objective | str = Objective.tokens_per_s) -> float:
    """Objective(objective).score: higher is better."""
    return Objective(objective).score(tokens_per_s, gpus)


def _tokens(trial: Trial) -> float:
    return float(trial.get("metrics", {}).get("tokens_per_s") or 0.0)


def _score(trial: Trial, objective: Objective | str) -> float:
    return objective_value(_tokens(trial), int(trial.get("layout", {}).get("gpus") or 1), objective)


def _headroom(trial: Trial) -> float:
    value = trial.get("metrics", {}).get("headroom")
    return float(value) if value is not None else -1.0


def ok_trials(trials: Sequence[Trial]) -> list[Trial]:
    return [t for t in trials if t.get("state") == TrialState.OK and _tokens(t) > 0]


def rank(trials: Sequence[Trial], noise_tolerance: float = 0.02,
         objective: Objective | str = Objective.tokens_per_s) -> list[Trial]:
    """Ok trials best first by the objective. Scores within `noise_tolerance` of the best tie, and the tie is
    broken by memory headroom (a faster-by-noise config that is closer to OOM is the worse production choice)."""
    ranked = sorted(ok_trials(trials), key=lambda t: _score(t, objective), reverse=True)
    if not ranked:
        return []
    best = _score(ranked[0], objective)
    tied = [t for t in ranked if _score(t, objective) >= best * (1.0 - noise_tolerance)]
    winner = max(tied, key=_headroom)
    return [winner] + [t for t in ranked if t is not winner]


def select_best(trials: Sequence[Trial], noise_tolerance: float = 0.02,
                objective: Objective | str = Objective.tokens_per_s) -> Optional[Trial]:
    ranked = rank(trials, noise_tolerance, objective)
    return ranked[0] if ranked else None


def margin_over_next(ranked: Sequence[Trial], objective: Objective | str = Objective.tokens_per_s) -> Optional[float]:
    """How much better the winner scores than the next best (share), None with fewer than two ok trials."""
    if len(ranked) < 2 or _score(ranked[1], objective) <= 0:
        return None
    return _score(ranked[0], objective) / _score(ranked[1], objective) - 1.0


def group_repeats(trials: Sequence[Trial]) -> list[Trial]:
    """Fold repeated measurements into one record per configuration: tokens/s is the median over the ok runs,
    with `tokens_per_s_spread` = (max - min) / median and `n_runs`; headroom is the worst (smallest) seen.

    Records without repeats pass through unchanged (n_runs 1, spread 0)."""
    groups: dict[str, list[Trial]] = {}
    order: list[str] = []
    for t in trials:
        base = t.get("repeat_of") or t["config_hash"]
        if base not in groups:
            order.append(base)
        groups.setdefault(base, []).append(t)
    folded = []
    for base in order:
        members = groups[base]
        head = next((m for m in members if m["config_hash"] == base), members[0])
        ok = [m for m in ok_trials(members)]
        if len(members) == 1 or not ok:
            folded.append({**head, "n_runs": len(ok), "metrics": {**head.get("metrics", {}),
                                                                   "tokens_per_s_spread": 0.0}})
            continue
        tokens = sorted(_tokens(m) for m in ok)
        mid = median(tokens)
        metrics = {**head.get("metrics", {}), "tokens_per_s": mid,
                   "tokens_per_s_spread": (tokens[-1] - tokens[0]) / mid if mid else 0.0,
                   "headroom": min(_headroom(m) for m in ok)}
        folded.append({**head, "state": TrialState.OK, "metrics": metrics, "n_runs": len(ok)})
    return folded
