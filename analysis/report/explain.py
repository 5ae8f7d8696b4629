"""One paragraph on why the winner won: its margin over the next best, its memory headroom, and how the estimator
had ranked it. Pure: ranked trial dicts (launcher.core.ranking.rank order) in, text out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from analysis.report.plots import label
from launcher.core.objective import Objective
from launcher.core.ranking import margin_over_next


def _tokens(trial: dict) -> float:
    return float(trial.get("metrics", {}).get("tokens_per_s") or 0.0)


def _headroom(trial: dict) -> Optional[float]:
    value = trial.get("metrics", {}).get("headroom")
    return float(value) if isinstance(value, (int, float)) else None


def _memory(trial: dict, capacity_gb: Optional[float]) -> str:
    headroom = _headroom(trial)
    if headroom is None:
        return "its peak memory was not measured"
    peak = trial.get("metrics", {}).get("peak_mem_gb")
    detail = f" ({peak:.3g} of {capacity_gb:g} GB per GPU)" if peak is not None and capacity_gb else ""
    return f"keeps {headroom:.0%} memory headroom{detail}"


def predicted_rank(ranked: Sequence[dict], config_hash: str) -> Optional[int]:
    """1-based rank of a trial among the ok trials by predicted tokens/s (None without predictions)."""
    scored = [t for t in ranked if t.get("predicted", {}).get("tokens_per_s")]
    scored.sort(key=lambda t: t["predicted"]["tokens_per_s"], reverse=True)
    for i, t in enumerate(scored, 1):
        if t["config_hash"] == config_hash:
            return i
    return None


def explain_winner(ranked: Sequence[dict], capacity_gb: Optional[float] = None,
                   noise_tolerance: float = 0.02, objective: Objective | str = Objective.tokens_per_s) -> str:
    """E.g. 'tp1 pp1 dp2 mbs4 (5e4dc80a) is 12% faster than the next best (tp1 pp2 dp2 mbs2, 5,115 tokens/s) and
    keeps 79% memory headroom (0.107 of 0.5 GB per GPU). The estimator had ranked it 9th of 9.'
    With objective 'tokens_per_s_per_gpu' the margins compare tokens/s per GPU."""
    if not ranked:
        return "No trial finished ok, so there is no winner yet: see the failures."
    best = ranked[0]
    name = f"{label(best)} ({best['config_hash'][:8]})"
    goal = Objective(objective)
    per_gpu = goal.per_gpu
    faster = goal.superlative
    speed = f"{_tokens(best):,.0f} tokens/s"
    if per_gpu:
        speed += f", {_tokens(best) / best['layout']['gpus']:,.0f} per GPU"
    if len(ranked) == 1:
        text = f"{name} is the only trial that finished ok ({speed}) and {_memory(best, capacity_gb)}."
    else:
        runner_up = ranked[1]
        other = f"{label(runner_up)}, {_tokens(runner_up):,.0f} tokens/s"
        margin = margin_over_next(ranked, objective) or 0.0
        if margin < 0:  # selected on headroom inside the noise band: the runner-up measured faster
            text = (f"{name} ({speed}) ties with the {faster}-by-{-margin:.1%} {other} within the "
                    f"{noise_tolerance:.0%} noise tolerance and wins on memory: it {_memory(best, capacity_gb)} "
                    f"(the other {_headroom(runner_up) or 0:.0%}).")
        elif margin < noise_tolerance:
            text = (f"{name} ({speed}) is within the {noise_tolerance:.0%} noise tolerance of the next best ({other}, "
                    f"{margin:+.1%}); of the tied trials it {_memory(best, capacity_gb)}.")
        else:
            text = (f"{name} is {margin:.0%} {faster} than the next best ({other}) with {speed}, and "
                    f"{_memory(best, capacity_gb)}.")
    rank = predicted_rank(ranked, best["config_hash"])
    if rank is not None and len(ranked) > 1:
        text += (" The estimator had also put it first." if rank == 1 else
                 f" The estimator had ranked it {_ordinal(rank)} of {len(ranked)}: the measurement decided.")
    return text


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"
