"""What to do next, read off the winner: grow its micro-batch, beware of thin headroom, of the pipeline bubble and of
tensor parallelism across nodes, and name the estimator term that looks off.

Pure: ranked trial dicts (their layouts read as Layouts), the sweep's facts and the winner's predicted breakdowns
(computed by the caller from the estimator, passed as plain data) in, a list of Recommendation out.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from launcher.core.layout import DIMENSIONS, NAMES, SHAPE, Layout, as_layout
from launcher.core.states import TrialState

LARGE_HEADROOM = 0.30    # above: the winner leaves memory unused; a larger micro-batch usually runs faster
SMALL_HEADROOM = 0.05    # below: a production run (longer, fragmented allocator, checkpoint buffers) may OOM
MICROBATCHES_PER_STAGE = 4  # m >= 4p keeps the 1F1B bubble (p-1)/(v*m) under ~20% (Narayanan et al. 2021 §2.2)
ESTIMATE_OFF = 0.25      # measured and predicted further apart than this: the cost model needs a look
BUBBLE_SHARE = 0.15      # predicted bubble share of the step above which the bubble is the suspect term
COMM_SHARE = 0.30        # predicted communication share of the step above which communication is the suspect
ALWAYS_INCLUDED = ("gpus", *(d.name for d in DIMENSIONS if d.kind == "batch"))
"""An include entry's world and batch: without its world it would take the grid's first one."""
IMPLIED = tuple(d.name for d in DIMENSIONS if d.name != "gpus" and (d.kind == "world" or d.dim.grid is None))
"""Layout keys an include entry leaves out: the grid derives them (nodes from gpus, dp from the world)."""
COMPUTE_TERMS = ("compute", "recompute", "optimizer", "fixed", "dispatch")


def _comm_terms(breakdown: dict) -> tuple[str, ...]:
    """The breakdown's communication terms (tp_comm, pp_comm, dp_comm, ...): whatever the estimator names *_comm."""
    return tuple(k for k in breakdown if k.endswith("_comm"))


@dataclass(frozen=True)
class Recommendation:
    kind: str       # grow_mbs, low_headroom, pipeline_bubble, tp_across_nodes, estimate_off
    severity: str   # "info" or "warning"
    message: str
    command: str = ""


@dataclass(frozen=True)
class SweepFacts:
    capacity_gb: float
    gpus_per_node: int
    command: str = ""                                  # how the sweep was launched (sweeps/<name>/command.txt)
    includes: tuple = ()                               # its grid.include entries (a list override replaces them)
    grid_first: dict = field(default_factory=dict)     # first value per grid dimension: an include's fallback
    implied: tuple = IMPLIED                           # layout keys an include entry leaves out (derived by the grid)


# ------------------------------------------------------------------------------------------------ commands

def split_overrides(text: str) -> list[str]:
    """The tokens of a sweep's command.txt, which the launcher writes with shlex.join (so shell rules apply:
    `'grid.tp=[1, 2]'` is one token). A line that is not valid shell (edited by hand) is split on spaces."""
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


def _yaml_value(value: object) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def include_entry(layout: dict, grid_first: Optional[dict] = None, implied: Sequence[str] = IMPLIED) -> dict:
    """The grid.include entry of a layout: its world and batch, and every other key that differs from the grid's
    first value (the fallback); keys the grid derives (`implied`) are left out."""
    first = grid_first or {}
    return {k: v for k, v in layout.items()
            if k not in implied and (k in ALWAYS_INCLUDED or first.get(k) != v)}


def extend_sweep_command(command: str, includes: Sequence[dict]) -> str:
    """The sweep's own command with grid.include replaced by `includes`: run into the same folder, the ledger
    keeps the finished trials and adds the new ones. sweep.fresh is dropped (it would start a new folder)."""
    kept = [t for t in split_overrides(command) if not t.lstrip("+~").startswith(("grid.include=", "sweep.fresh="))]
    entries = ", ".join("{" + ", ".join(f"{k}: {_yaml_value(v)}" for k, v in e.items()) + "}" for e in includes)
    return " ".join([*(shlex.quote(t) for t in kept), shlex.quote(f"grid.include=[{entries}]")])


def next_mbs_layout(layout: Mapping[str, Any]) -> dict:
    """The layout with mbs doubled; gbs raised to the next multiple of mbs*dp (x pp when interleaved) if needed.
    The same keys as `layout` (a stored layout may predate a dimension)."""
    lay = as_layout(layout)
    mbs = 2 * lay.mbs
    step = mbs * lay.dp * (lay.pp if lay.vpp > 1 else 1)
    grown = lay.replace(mbs=mbs, gbs=-(-lay.gbs // step) * step)
    return {k: getattr(grown, k) if k in NAMES else v for k, v in layout.items()}


def _shape(layout: Layout) -> tuple:
    return tuple(getattr(layout, name) for name in SHAPE)


def _same_but_batch(a: Layout, b: Layout) -> bool:
    return _shape(a) == _shape(b)


# ------------------------------------------------------------------------------------------------ rules

def _grow_mbs(best: dict, trials: Sequence[dict], facts: SweepFacts,
              next_predicted_peak_gb: Optional[float]) -> Optional[Recommendation]:
    headroom = best["metrics"].get("headroom")
    if headroom is None or headroom <= LARGE_HEADROOM:
        return None
    proposal = next_mbs_layout(best["layout"])
    winner, grown = as_layout(best["layout"]), as_layout(proposal)
    tried = [(t, lay) for t, lay in ((t, as_layout(t["layout"])) for t in trials)
             if _same_but_batch(lay, grown) and lay.mbs >= grown.mbs]
    if tried:
        t, lay = min(tried, key=lambda pair: pair[1].mbs)
        outcome = (f"ran ok at {t['metrics'].get('tokens_per_s') or 0:,.0f} tokens/s" if t["state"] == TrialState.OK
                   else f"is {t['state']}" + (f" ({t['failure_kind']})" if t.get("failure_kind") else ""))
        return Recommendation("grow_mbs", "info", f"The winner keeps {headroom:.0%} memory headroom; mbs "
                              f"{lay.mbs} of the same layout (gbs {lay.gbs}) was already tried and {outcome}.")
    gbs_note = (f" (gbs raised from {winner.gbs} to {grown.gbs}: it must be a multiple of mbs x dp)"
                if grown.gbs != winner.gbs else "")
    predicted = ""
    if next_predicted_peak_gb:
        predicted = (f" The estimator predicts {next_predicted_peak_gb:.3g} GB peak "
                     f"({1 - next_predicted_peak_gb / facts.capacity_gb:.0%} headroom) for it.")
    entry = include_entry(proposal, facts.grid_first, facts.implied)
    command = extend_sweep_command(facts.command, [*facts.includes, entry])
    return Recommendation(
        "grow_mbs", "info",
        f"The winner keeps {headroom:.0%} memory headroom (> {LARGE_HEADROOM:.0%}): try mbs {grown.mbs}"
        f"{gbs_note}.{predicted} Add the trial to this sweep with the command below (finished trials are kept).",
        command)


def _low_headroom(best: dict, ranked: Sequence[dict]) -> Optional[Recommendation]:
    headroom = best["metrics"].get("headroom")
    if headroom is None or headroom >= SMALL_HEADROOM:
        return None
    safer = next((t for t in ranked[1:] if (t["metrics"].get("headroom") or 0) >= SMALL_HEADROOM), None)
    alternative = (f" The fastest trial with more room is {safer['config_hash'][:8]} "
                   f"({safer['metrics']['tokens_per_s']:,.0f} tokens/s, {safer['metrics']['headroom']:.0%} headroom)."
                   if safer else "")
    return Recommendation("low_headroom", "warning",
                          f"The winner keeps only {headroom:.1%} memory headroom (< {SMALL_HEADROOM:.0%}): a "
                          f"production run (longer, with evaluation and checkpointing) may run out of memory."
                          f"{alternative}")


def _pipeline_bubble(best: dict) -> Optional[Recommendation]:
    lay = as_layout(best["layout"])
    pp, vpp, m = lay.pp, lay.vpp, lay.microbatches
    if pp <= 1 or m >= MICROBATCHES_PER_STAGE * pp:
        return None
    bubble = (pp - 1) / (vpp * max(1, m))  # 1F1B bubble fraction, Narayanan et al. 2021 §2.2
    target = MICROBATCHES_PER_STAGE * pp * lay.mbs * lay.dp
    return Recommendation("pipeline_bubble", "warning",
                          f"Only {m} micro-batches per pipeline for pp={pp} (< {MICROBATCHES_PER_STAGE} x pp): the "
                          f"pipeline idles {bubble:.0%} of the step (bubble (p-1)/(v*m)). A production gbs of "
                          f">= {target}{' (or a smaller mbs)' if lay.mbs > 1 else ''} would fill it.")


def _tp_across_nodes(best: dict, gpus_per_node: int) -> Optional[Recommendation]:
    tp = as_layout(best["layout"]).tp
    if tp <= gpus_per_node:
        return None
    return Recommendation("tp_across_nodes", "warning",
                          f"tp={tp} spans nodes ({gpus_per_node} GPUs per node): every layer's all-reduces cross "
                          f"the inter-node network. Check that a layout with tp <= {gpus_per_node} was tried.")


def _suspect_term(breakdown: dict, pp: int, gap_s: float) -> str:
    """The predicted term most likely wrong: a large bubble (pp > 1), then large communication, else compute.
    When the run was faster than predicted (gap < 0) the term must be at least as large as the gap."""
    total = sum(breakdown.values()) or 1.0
    comm = {k: breakdown.get(k, 0.0) for k in _comm_terms(breakdown)}
    candidates = []
    if pp > 1 and breakdown.get("bubble", 0.0) / total >= BUBBLE_SHARE:
        candidates.append(("pipeline bubble", breakdown["bubble"]))
    if sum(comm.values()) / total >= COMM_SHARE:
        top = max(comm, key=lambda k: comm[k])
        candidates.append((f"communication (mostly {top.replace('_comm', '').upper()})", sum(comm.values())))
    candidates.append(("compute efficiency", sum(breakdown.get(k, 0.0) for k in COMPUTE_TERMS)))
    fitting = [c for c in candidates if gap_s > 0 or c[1] >= -gap_s]
    return (fitting or candidates)[0][0]


def _estimate_off(best: dict, breakdown: Optional[dict], mem_breakdown: Optional[dict]) -> list[Recommendation]:
    """Error convention of the MLflow metrics and the plots: predicted / measured - 1 (tokens/s, peak GB)."""
    out = []
    measured, predicted = best["metrics"], best.get("predicted", {})
    tokens, predicted_tokens = measured.get("tokens_per_s"), predicted.get("tokens_per_s")
    if tokens and predicted_tokens and abs(predicted_tokens / tokens - 1) > ESTIMATE_OFF:
        slower = tokens < predicted_tokens
        # The gap in seconds per step (same tokens per step): > 0 when the run was slower than predicted.
        step_s, predicted_step_s = measured.get("step_time_s"), predicted.get("step_time_s")
        gap_s = (step_s - predicted_step_s) if step_s and predicted_step_s else (1.0 if slower else -1.0)
        shares = steps = ""
        if breakdown:
            total = sum(breakdown.values()) or 1.0
            shares = "; predicted step: " + ", ".join(f"{k} {v / total:.0%}" for k, v in breakdown.items() if v)
        if step_s and predicted_step_s:
            steps = f" ({step_s:.3g} s vs {predicted_step_s:.3g} s per step{shares})"
        term = (_suspect_term(breakdown, as_layout(best["layout"]).pp, gap_s) if breakdown
                else "not known (no breakdown)")
        out.append(Recommendation("estimate_off", "info",
                                  f"The winner measured {tokens:,.0f} tokens/s against {predicted_tokens:,.0f} "
                                  f"predicted ({predicted_tokens / tokens - 1:+.0%}: it ran "
                                  f"{'slower' if slower else 'faster'} than the estimate){steps}. The term that "
                                  f"looks off: {term}."))
    measured_gb, predicted_gb = best["metrics"].get("peak_mem_gb"), best.get("predicted", {}).get("peak_mem_gb")
    if measured_gb and predicted_gb and abs(predicted_gb / measured_gb - 1) > ESTIMATE_OFF:
        largest = max(mem_breakdown, key=lambda k: mem_breakdown[k]) if mem_breakdown else ""
        out.append(Recommendation("estimate_off", "info",
                                  f"Peak memory measured {measured_gb:.3g} GB vs {predicted_gb:.3g} GB predicted "
                                  f"({predicted_gb / measured_gb - 1:+.0%})"
                                  + (f"; the largest predicted term is {largest} ({mem_breakdown[largest]:.3g} GB)."
                                     if largest and mem_breakdown else ".")))
    return out


def recommend(ranked: Sequence[dict], trials: Sequence[dict], facts: SweepFacts, *,
              time_breakdown_s: Optional[dict] = None, mem_breakdown_gb: Optional[dict] = None,
              next_predicted_peak_gb: Optional[float] = None) -> list[Recommendation]:
    """Recommendations for the winner ranked[0] (none without an ok trial), warnings first."""
    if not ranked:
        return []
    best = ranked[0]
    found = [_low_headroom(best, ranked), _pipeline_bubble(best), _tp_across_nodes(best, facts.gpus_per_node),
             _grow_mbs(best, trials, facts, next_predicted_peak_gb),
             *_estimate_off(best, time_breakdown_s, mem_breakdown_gb)]
    return sorted((r for r in found if r is not None), key=lambda r: r.severity != "warning")
