"""Choosing the best trial by the sweep's objective (launcher.core.objective) among ok trials; ties within
measurement noise go to memory headroom, then cost. Used by the sweep loop (early stop, progress, the finalists it
re-measures), the plan and the report.

Noise (launcher.core.noise): a configuration beats another when its median is higher by more than
analysis.noise_tolerance plus what the measured noise allows at launcher.core.noise.CONFIDENCE (a one-sided t-test on
log tokens/s: the run-to-run variance pooled over the repeated configurations, floored by each run's own step
spread). A configuration measured once is as uncertain as one run of a repeated one, never exact. The finalists
(analysis.confirm_top) are the configurations the best does not beat, re-measured so that the winner is a median
with a spread, and `decide` says whether it beats every other by more than the noise or is tied within it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from statistics import median
from typing import Any, Optional

from launcher.core.noise import CONFIDENCE, Run, SweepNoise, band, beats, pooled
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


def _planned_headroom(trial: Trial) -> float:
    """The plan's memory headroom (the same every run of the sweep, unlike a measured peak); -1 when unplanned."""
    value = trial.get("predicted", {}).get("headroom")
    return float(value) if isinstance(value, (int, float)) else -1.0


def _spread(trial: Trial) -> float:
    return float(trial.get("metrics", {}).get("tokens_per_s_spread") or 0.0)


def _run_of(metrics: dict[str, Any]) -> Run:
    """One measurement from a trial's metrics: its throughput and its own steps' spread (analysis.logs.outcome:
    step_time_std_s over n_measured steps around the median step_time_s)."""
    step_s, std_s = metrics.get("step_time_s"), metrics.get("step_time_std_s")
    cv = float(std_s) / float(step_s) if isinstance(std_s, (int, float)) and isinstance(step_s, (int, float)) \
        and step_s > 0 and std_s >= 0 else 0.0
    return Run(float(metrics.get("tokens_per_s") or 0.0), cv, int(metrics.get("n_measured") or 0))


def runs_of(trial: Trial) -> list[Run]:
    """The measurements behind a trial's figure: `runs` of a folded record (group_repeats), else the trial's own."""
    if "runs" in trial:
        return [Run(**r) for r in trial["runs"]]
    return [_run_of(trial.get("metrics", {}))] if _tokens(trial) > 0 else []


def sweep_noise(trials: Sequence[Trial]) -> SweepNoise:
    """The run-to-run noise measured by the repeated configurations among `trials` (folded records)."""
    return pooled(runs_of(t) for t in ok_trials(trials))


def noise_band(a: Trial, b: Trial, noise_tolerance: float, noise: Optional[SweepNoise] = None) -> float:
    """The share by which a's score must exceed b's for a to beat b at launcher.core.noise.CONFIDENCE, given the
    sweep's measured run-to-run noise (`noise`: sweep_noise of all the sweep's trials; none measured when not
    given) and each run's own step spread. The tolerance alone when nothing measured a spread."""
    return band(runs_of(a), runs_of(b), noise or SweepNoise(0.0, 0), noise_tolerance)


def tie_key(trial: Trial, objective: Objective | str = Objective.tokens_per_s) -> tuple[float, float, int, float, str]:
    """Among configurations tied within noise, the first by this key wins: the plan's memory headroom (largest
    first; the same every run, so a tie names the same configuration every time), then the measured headroom,
    then cost (fewest GPUs), then the score, then the config hash (a total order)."""
    gpus = int(trial.get("layout", {}).get("gpus") or 1)
    return (-_planned_headroom(trial), -_headroom(trial), gpus, -_score(trial, objective), str(trial["config_hash"]))


def ok_trials(trials: Sequence[Trial]) -> list[Trial]:
    return [t for t in trials if t.get("state") == TrialState.OK and _tokens(t) > 0]


def rank(trials: Sequence[Trial], noise_tolerance: float = 0.02,
         objective: Objective | str = Objective.tokens_per_s) -> list[Trial]:
    """Ok trials best first by the objective. The trials the best does not beat at the stated confidence
    (noise_band, with the noise measured among `trials`) are tied with it, and the tie goes to tie_key: memory
    headroom, then cost (a faster-by-noise config that is closer to OOM is the worse production choice)."""
    ranked = sorted(ok_trials(trials), key=lambda t: _score(t, objective), reverse=True)
    if not ranked:
        return []
    noise = sweep_noise(ranked)
    best = _score(ranked[0], objective)
    tied = [t for t in ranked
            if not beats(best, _score(t, objective), noise_band(ranked[0], t, noise_tolerance, noise))]
    winner = min(tied, key=lambda t: tie_key(t, objective))
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

    `runs` lists each ok measurement (launcher.core.noise.Run as a dict: its tokens/s and its own step spread) for
    the noise test. Records without repeats pass through unchanged otherwise (n_runs 1, spread 0)."""
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
        runs = [asdict(_run_of(m.get("metrics", {}))) for m in ok]
        if len(members) == 1 or not ok:
            folded.append({**head, "n_runs": len(ok), "runs": runs,
                           "metrics": {**head.get("metrics", {}), "tokens_per_s_spread": 0.0}})
            continue
        tokens = sorted(_tokens(m) for m in ok)
        mid = median(tokens)
        metrics = {**head.get("metrics", {}), "tokens_per_s": mid,
                   "tokens_per_s_spread": (tokens[-1] - tokens[0]) / mid if mid else 0.0,
                   "headroom": min(_headroom(m) for m in ok)}
        folded.append({**head, "state": TrialState.OK, "metrics": metrics, "n_runs": len(ok), "runs": runs})
    return folded


def finalists(trials: Sequence[Trial], confirm_top: int, noise_tolerance: float,
              objective: Objective | str = Objective.tokens_per_s) -> list[str]:
    """Config hashes of the configurations to re-measure (analysis.confirm_top): up to `confirm_top` ok ones that
    the best does not beat at the stated confidence (noise_band with the noise the repeats so far measured), the
    current winner (`rank`: ties go to memory headroom) first, then best median first. Before the first repeat only
    the runs' own step spreads count; once repeats show a noisy machine, the band widens to what they showed, and
    a configuration that was measured once in a bad moment is re-measured instead of left out. The winner leads so
    that it is always re-measured, even when it won a tie on headroom or confirm_top is 1."""
    if confirm_top <= 0:
        return []
    ranked = rank(group_repeats(trials), noise_tolerance, objective)
    if not ranked:
        return []
    noise = sweep_noise(ranked)
    fastest = max(ranked, key=lambda t: _score(t, objective))
    near = [t["config_hash"] for t in sorted(ranked[1:], key=lambda t: _score(t, objective), reverse=True)
            if not beats(_score(fastest, objective), _score(t, objective),
                         noise_band(fastest, t, noise_tolerance, noise))]
    return [ranked[0]["config_hash"], *near][:confirm_top]


@dataclass(frozen=True)
class Decision:
    """How sure the winner is (ranked[0] of `rank`, medians over repeats)."""

    confirmed: bool
    """It beats every other ok trial at the stated confidence (False with a single ok trial)."""
    margin: Optional[float]
    """Its score over the next best's, minus 1 (negative when it won a tie on headroom); None alone."""
    band: float
    """The noise band against the next best (noise_band): the share its score had to exceed the next best's by."""
    tied: tuple[str, ...] = ()
    """Config hashes of the ok trials it does not beat (within the noise band), best first."""
    n_runs: int = 1
    """Measurements behind the winner's median."""
    noise_sd: float = 0.0
    """The run-to-run noise the sweep measured: the pooled standard deviation of log tokens/s (about the share)."""
    noise_df: int = 0
    """Repeats behind noise_sd (0: no configuration was measured twice, so only the steps' spreads count)."""
    confidence: float = CONFIDENCE
    """One-sided confidence of "confirmed"."""


def decide(ranked: Sequence[Trial], noise_tolerance: float,
           objective: Objective | str = Objective.tokens_per_s) -> Optional[Decision]:
    """Does the winner (ranked[0]) beat every other ok trial at the stated confidence, or is it tied within the
    noise with some? None: no ok trial."""
    if not ranked:
        return None
    best = ranked[0]
    runs = int(best.get("n_runs") or 1)
    noise = sweep_noise(ranked)
    if len(ranked) == 1:
        return Decision(False, None, noise_band(best, best, noise_tolerance, noise), (), runs, noise.between_sd,
                        noise.df)
    best_score = _score(best, objective)
    tied = tuple(t["config_hash"] for t in ranked[1:]
                 if _score(t, objective) > 0
                 and not beats(best_score, _score(t, objective), noise_band(best, t, noise_tolerance, noise)))
    margin = margin_over_next(ranked, objective)
    return Decision(not tied, margin, noise_band(best, ranked[1], noise_tolerance, noise), tied, runs,
                    noise.between_sd, noise.df)
