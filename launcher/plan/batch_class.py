"""Layouts the estimator prices alike apart from the micro-batch count: what a 50,000-trial plan computes once.

The memory and step-time models read the global batch only through the micro-batch count m = gbs / (mbs x dp),
and m only (a) as the count of micro-batches per step (StepPieces.microbatches: `combine` multiplies the
bottleneck by it), (b) in the predicates m > 1 / m <= 1 (gradients accumulated or synced every micro-batch) and
(c) capped by the pipeline: min(pp - stage, m) and min(2(pp - stage - 1) + (vpp - 1) pp + 1, m vpp) micro-batches
in flight (launcher.plan.memory.inflight_layers and the embedding-dropout masks). Every such cap is at most
(vpp + 1) pp, so two layouts equal in everything but gbs whose m are both at least that (or equal) have the same
memory and the same per-micro-batch step pieces. `batch_class` is the one layout that stands for them:
launcher.plan.estimator prices it once per plan, launcher.run.search computes its features once per sweep
(tests/plan/test_batch_class.py checks both against the per-layout models on generated grids).
"""

from __future__ import annotations

import dataclasses
import operator

from launcher.core.layout import NAMES, Layout


def inflight_cap(layout: Layout) -> int:
    """Micro-batch counts from this one up price the same memory and per-micro-batch time (the caps above)."""
    return (layout.vpp + 1) * layout.pp + 1


def batch_class(layout: Layout) -> Layout:
    """The layout with its gbs lowered to the fewest micro-batches priced like its own (itself when m is under the
    cap, or when m < 1: a layout the rules refuse, priced as it is)."""
    m, cap = layout.microbatches, inflight_cap(layout)
    if m <= cap or m < 1:
        return layout
    key = _ALL_BUT_GBS(layout)
    cls = _CLASSES.get(key)
    if cls is None:
        if len(_CLASSES) >= _MAX_CLASSES:  # a long-lived process planning many sweeps
            _CLASSES.clear()
        cls = _CLASSES[key] = dataclasses.replace(layout, gbs=cap * layout.mbs * layout.dp)
    return cls


_ALL_BUT_GBS = operator.attrgetter(*(name for name in NAMES if name != "gbs"))
_CLASSES: dict[tuple[object, ...], Layout] = {}
"""A layout's values but gbs -> its batch class: the class's gbs depends on those alone, and dataclasses.replace
costs ~7 us (a 50k-trial sweep asks ~100k times before its first progress line: the plan, then the search)."""
_MAX_CLASSES = 50_000
