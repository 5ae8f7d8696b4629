"""One paragraph on why the winner won: its margin over the next best with the spread of the measurements behind it,
or that it is tied within noise with others (and what to pick by then), its memory headroom, and how the estimator
had ranked it. Pure: ranked trial dicts (launcher.core.ranking.rank order, medians over repeats) in, text out."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Optional

from analysis.report.plots import label, layout_of
from launcher.core.objective import Objective
from launcher.core.ranking import Decision, decide

TIED = "Tied within noise: pick by memory headroom (or cost)"
"""What the text says when the winner does not beat the next best by more than the noise (bench_winner counts it)."""


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


def measurements(trial: dict) -> str:
    """'median of 3 runs, spread 4%' or 'one run' (what a throughput figure stands on)."""
    runs = int(trial.get("n_runs") or 1)
    if runs < 2:
        return "one run"
    return f"median of {runs} runs, spread {trial.get('metrics', {}).get('tokens_per_s_spread') or 0:.0%}"


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
    """E.g. 'tp1 pp1 dp2 mbs4 (5e4dc80a) is 12% faster than the next best (tp1 pp2 dp2 mbs2, 5,115 tokens/s; median
    of 2 runs, spread 3%), more than the noise (2% tolerance + 3% spread): 5,730 tokens/s (median of 2 runs, spread
    1%), and keeps 79% memory headroom (0.107 of 0.5 GB per GPU). The estimator had ranked it 9th of 9.', or 'Tied
    within noise: pick by memory headroom (or cost). ...'. With objective 'tokens_per_s_per_gpu' the margins compare
    tokens/s per GPU."""
    decision = decide(ranked, noise_tolerance, objective)
    if decision is None:
        return "No trial finished ok, so there is no winner yet: see the failures."
    best = ranked[0]
    name = f"{label(best)} ({best['config_hash'][:8]})"
    goal = Objective(objective)
    speed = f"{_tokens(best):,.0f} tokens/s"
    if goal.per_gpu:
        speed += f", {_tokens(best) / layout_of(best).gpus:,.0f} per GPU"
    speed += f"; {measurements(best)}"
    if len(ranked) == 1:
        text = f"{name} is the only trial that finished ok ({speed}) and {_memory(best, capacity_gb)}."
    elif decision.confirmed:
        text = _confirmed(ranked, decision, name, speed, goal, noise_tolerance, capacity_gb)
    else:
        text = _tied(ranked, decision, name, speed, noise_tolerance, capacity_gb)
    rank = predicted_rank(ranked, best["config_hash"])
    if rank is not None and len(ranked) > 1:
        text += (" The estimator had also put it first." if rank == 1 else
                 f" The estimator had ranked it {_ordinal(rank)} of {len(ranked)}: the measurement decided.")
    return text


def _noise(decision: Decision, noise_tolerance: float) -> str:
    """'2% tolerance + 14% at 95% confidence (run-to-run noise 6% over 3 repeats)': what the margin had to beat."""
    extra = decision.band - noise_tolerance
    if extra <= 0.005:
        return f"{noise_tolerance:.0%} tolerance"
    source = (f"run-to-run noise {decision.noise_sd:.0%} over {decision.noise_df} repeat(s)" if decision.noise_df
              else "the spread of each run's steps")
    return f"{noise_tolerance:.0%} tolerance + {extra:.0%} at {decision.confidence:.0%} confidence ({source})"


def _confirmed(ranked: Sequence[dict], decision: Decision, name: str, speed: str, goal: Objective,
               noise_tolerance: float, capacity_gb: Optional[float]) -> str:
    runner_up = ranked[1]
    other = f"{label(runner_up)}, {_tokens(runner_up):,.0f} tokens/s; {measurements(runner_up)}"
    text = (f"{name} is {decision.margin or 0:.0%} {goal.superlative} than the next best ({other}), more than the "
            f"noise ({_noise(decision, noise_tolerance)}): {speed}, and it {_memory(ranked[0], capacity_gb)}.")
    if decision.n_runs < 2:
        text += (" Each figure is a single measurement, so its spread is unknown: analysis.confirm_top re-measures "
                 "the finalists.")
    return text


def _tied(ranked: Sequence[dict], decision: Decision, name: str, speed: str, noise_tolerance: float,
          capacity_gb: Optional[float]) -> str:
    best = ranked[0]
    by_hash = {t["config_hash"]: t for t in ranked}
    others = [by_hash[key] for key in decision.tied]
    listed = "; ".join(f"{label(t)} ({t['config_hash'][:8]}) {_tokens(t):,.0f} tokens/s, {measurements(t)}, "
                       f"{_headroom(t) or 0:.0%} headroom, {layout_of(t).gpus} GPUs" for t in others)
    text = (f"{TIED}. {name} ({speed}) and {len(others)} other(s) differ by less than the noise "
            f"({_noise(decision, noise_tolerance)}): {listed}. Chosen on the planned memory headroom, then cost: "
            f"{name} {_memory(best, capacity_gb)}.")
    cheaper = [t for t in others if layout_of(t).gpus < layout_of(best).gpus]
    if cheaper:
        text += (f" {label(cheaper[0])} needs {layout_of(cheaper[0]).gpus} GPUs instead of "
                 f"{layout_of(best).gpus}: the cheaper choice at the same measured speed.")
    return text


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def verdict(decision: Optional[Decision], noise_tolerance: float) -> str:
    """One sentence on how sure the winner is, for run descriptions ('' without a winner)."""
    if decision is None:
        return ""
    if decision.margin is None:
        return "The only trial that finished ok. "
    if decision.confirmed:
        basis = f"median of {decision.n_runs} runs" if decision.n_runs > 1 else "single measurements"
        return (f"Confirmed: {decision.margin:.0%} better than the next best, more than the noise "
                f"({_noise(decision, noise_tolerance)}; {basis}). ")
    return f"{TIED}: tied with {len(decision.tied)} other trial(s), chosen on the planned memory headroom, then cost. "
