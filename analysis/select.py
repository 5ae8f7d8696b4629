"""Choosing the best trial: measured tokens/s among ok trials; ties within measurement noise go to headroom.

Works on plain trial records (dicts with `state`, `metrics`, ...), so it never needs the launcher.
"""

from __future__ import annotations

from typing import Optional, Sequence


def _tokens(trial: dict) -> float:
    return float(trial.get("metrics", {}).get("tokens_per_s") or 0.0)


def _headroom(trial: dict) -> float:
    value = trial.get("metrics", {}).get("headroom")
    return float(value) if value is not None else -1.0


def ok_trials(trials: Sequence[dict]) -> list[dict]:
    return [t for t in trials if t.get("state") == "ok" and _tokens(t) > 0]


def rank(trials: Sequence[dict], noise_tolerance: float = 0.02) -> list[dict]:
    """Ok trials best first. Throughputs within `noise_tolerance` of the fastest tie, and the tie is broken by
    memory headroom (a faster-by-noise config that is closer to OOM is the worse production choice)."""
    ranked = sorted(ok_trials(trials), key=_tokens, reverse=True)
    if not ranked:
        return []
    fastest = _tokens(ranked[0])
    tied = [t for t in ranked if _tokens(t) >= fastest * (1.0 - noise_tolerance)]
    winner = max(tied, key=_headroom)
    return [winner] + [t for t in ranked if t is not winner]


def select_best(trials: Sequence[dict], noise_tolerance: float = 0.02) -> Optional[dict]:
    ranked = rank(trials, noise_tolerance)
    return ranked[0] if ranked else None


def margin_over_next(ranked: Sequence[dict]) -> Optional[float]:
    """How much faster the winner is than the next best (share), None with fewer than two ok trials."""
    if len(ranked) < 2 or _tokens(ranked[1]) <= 0:
        return None
    return _tokens(ranked[0]) / _tokens(ranked[1]) - 1.0


def group_repeats(trials: Sequence[dict]) -> list[dict]:
    """Fold repeated measurements into one record per configuration: tokens/s is the median over the ok runs,
    with `tokens_per_s_spread` = (max - min) / median and `n_runs`; headroom is the worst (smallest) seen.

    Records without repeats pass through unchanged (n_runs 1, spread 0)."""
    from statistics import median

    groups: dict[str, list[dict]] = {}
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
        folded.append({**head, "state": "ok", "metrics": metrics, "n_runs": len(ok)})
    return folded
