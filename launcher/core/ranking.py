"""Choosing the best trial by the sweep's objective (launcher.core.objective) among ok trials; ties within
measurement noise go to memory headroom. Used by the sweep loop (early stop, progress, the finalists it re-measures),
the plan and the report.

Noise: two configurations tie when their scores differ by less than analysis.noise_tolerance plus the larger of
their measured spreads ((max - min) / median over their repeated measurements; 0 for a single measurement). The
finalists (analysis.confirm_top) are re-measured so that the winner is a median with a spread, and `decide` says
whether it beats the next best by more than that noise or is tied with it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
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


def _spread(trial: Trial) -> float:
    return float(trial.get("metrics", {}).get("tokens_per_s_spread") or 0.0)


def noise_band(a: Trial, b: Trial, noise_tolerance: float) -> float:
    """The share by which two trials' scores must differ to be told apart: the tolerance plus the larger spread."""
    return noise_tolerance + max(_spread(a), _spread(b))


def ok_trials(trials: Sequence[Trial]) -> list[Trial]:
    return [t for t in trials if t.get("state") == TrialState.OK and _tokens(t) > 0]


def rank(trials: Sequence[Trial], noise_tolerance: float = 0.02,
         objective: Objective | str = Objective.tokens_per_s) -> list[Trial]:
    """Ok trials best first by the objective. Scores within the noise band of the best (`noise_tolerance` plus the
    larger measured spread) tie, and the tie is broken by memory headroom (a faster-by-noise config that is closer to
    OOM is the worse production choice)."""
    ranked = sorted(ok_trials(trials), key=lambda t: _score(t, objective), reverse=True)
    if not ranked:
        return []
    best = _score(ranked[0], objective)
    tied = [t for t in ranked
            if _score(t, objective) >= best * (1.0 - noise_band(ranked[0], t, noise_tolerance))]
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


def finalists(trials: Sequence[Trial], confirm_top: int, noise_tolerance: float,
              objective: Objective | str = Objective.tokens_per_s) -> list[str]:
    """Config hashes of the configurations to re-measure (analysis.confirm_top): up to `confirm_top` ok ones whose
    score is within the sweep's noise of the best, the current winner (`rank`: ties go to memory headroom) first,
    then best median first. The noise is the tolerance plus the largest spread any repeated configuration has shown
    so far (0 before the first repeat): on a quiet cluster only the near-ties are re-measured; where the repeats show
    a noisy machine, the band widens to what they showed. The winner leads so that it is always re-measured, even
    when it won a tie on headroom or confirm_top is 1."""
    if confirm_top <= 0:
        return []
    folded = group_repeats(trials)
    ranked = rank(folded, noise_tolerance, objective)
    if not ranked:
        return []
    noise = noise_tolerance + max((_spread(t) for t in folded), default=0.0)
    best = max(_score(t, objective) for t in ranked)
    near = [t["config_hash"] for t in ranked[1:] if _score(t, objective) >= best * (1.0 - noise)]
    return [ranked[0]["config_hash"], *near][:confirm_top]


@dataclass(frozen=True)
class Decision:
    """How sure the winner is (ranked[0] of `rank`, medians over repeats)."""

    confirmed: bool
    """It beats every other ok trial by more than their noise band (False with a single ok trial)."""
    margin: Optional[float]
    """Its score over the next best's, minus 1 (negative when it won a tie on headroom); None alone."""
    band: float
    """The noise band against the next best: analysis.noise_tolerance plus the larger of their spreads."""
    tied: tuple[str, ...] = ()
    """Config hashes of the ok trials within the noise band of the winner, best first."""
    n_runs: int = 1
    """Measurements behind the winner's median."""


def decide(ranked: Sequence[Trial], noise_tolerance: float,
           objective: Objective | str = Objective.tokens_per_s) -> Optional[Decision]:
    """Is the winner (ranked[0]) better than the rest by more than the noise, or tied within it? None: no ok
    trial."""
    if not ranked:
        return None
    best = ranked[0]
    runs = int(best.get("n_runs") or 1)
    if len(ranked) == 1:
        return Decision(False, None, noise_tolerance + _spread(best), (), runs)
    best_score = _score(best, objective)
    tied = tuple(t["config_hash"] for t in ranked[1:]
                 if _score(t, objective) > 0
                 and best_score / _score(t, objective) - 1.0 <= noise_band(best, t, noise_tolerance))
    margin = margin_over_next(ranked, objective)
    return Decision(not tied, margin, noise_band(best, ranked[1], noise_tolerance), tied, runs)
