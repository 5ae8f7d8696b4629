"""Pure decisions of the sweep loop: what to (re)submit, what an OOM rules out, what a failure kind means."""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Sequence
from typing import Optional

from launcher.core.kinds import FailureKind
from launcher.core.layout import SHAPE, Layout
from launcher.core.record import TrialRecord
from launcher.core.states import TrialState


def _in_flight(layout: Layout) -> int:
    """Micro-batches whose activations the first pipeline stage holds under 1F1B: min(pp, m)."""
    return min(layout.pp, max(1, layout.microbatches))


def needs_more_memory(candidate: Layout, oomed: Layout) -> bool:
    """True when `candidate` needs strictly more activation memory than `oomed` with everything else equal:
    same layout except a larger micro-batch (and at least as many micro-batches in flight)."""
    if any(getattr(candidate, k) != getattr(oomed, k) for k in SHAPE):  # everything but the batch must be equal
        return False
    return (candidate.mbs > oomed.mbs
            and candidate.mbs * _in_flight(candidate) > oomed.mbs * _in_flight(oomed))


def dominated_by_oom(candidate: TrialRecord, trials: Sequence[TrialRecord]) -> Optional[TrialRecord]:
    return OomIndex(trials).dominating(candidate)


class OomIndex:
    """The trials that ran out of memory, grouped by everything but the batch (needs_more_memory compares only
    trials equal in SHAPE): the loop asks this for every planned trial on every poll, so that question is a look-up
    in one group, not a scan of every record (a 50k-trial plan made that quadratic: ~60 s a poll at 20k)."""

    def __init__(self, trials: Iterable[TrialRecord]) -> None:
        self._by_shape: dict[tuple[object, ...], list[TrialRecord]] = {}
        for r in trials:
            if r.state is TrialState.OOM:
                self._by_shape.setdefault(shape_of(r.layout), []).append(r)

    def dominating(self, candidate: TrialRecord) -> Optional[TrialRecord]:
        """The first OOM trial (in the order given) that `candidate` needs more memory than, or None."""
        if not self._by_shape:
            return None
        for other in self._by_shape.get(shape_of(candidate.layout), ()):
            if needs_more_memory(candidate.layout, other.layout):
                return other
        return None


    def dominated(self, records: Sequence[TrialRecord], shapes: Optional[ShapeIndex] = None
                  ) -> dict[str, TrialRecord]:
        """config hash -> dominating(r) of every planned record that has one. With `shapes` (kept by the caller
        across polls) only the records of a shape that ran out of memory are read, not every record."""
        by_shape = self._by_shape
        if not by_shape:
            return {}
        out = {}
        planned = TrialState.PLANNED
        if shapes is None:
            candidates: Iterable[TrialRecord] = (r for r in records if r.state is planned)
            of_shape = ((r, by_shape.get(shape_of(r.layout))) for r in candidates)
        else:
            of_shape = ((records[i], group) for shape, group in by_shape.items() for i in shapes.of(records, shape))
        for r, group in of_shape:
            if group is None or r.state is not planned:
                continue
            for other in group:
                if needs_more_memory(r.layout, other.layout):
                    out[r.config_hash] = other
                    break
        return out


class ShapeIndex:
    """shape_of(layout) -> the places of the records of that shape in a ledger-ordered record list, built once and
    again only when the list grows (a trial's layout never changes; the ledger only adds trials, at the end of its
    order): OomIndex.dominated then reads the records of the shapes that ran out of memory, not all 50k."""

    def __init__(self) -> None:
        self._places: dict[tuple[object, ...], list[int]] = {}
        self._keys: list[str] = []

    def of(self, records: Sequence[TrialRecord], shape: tuple[object, ...]) -> list[int]:
        places = self._places.get(shape, []) if len(records) == len(self._keys) else None
        if places is None or any(records[i].config_hash != self._keys[i] for i in places):
            self._build(records)
            places = self._places.get(shape, [])
        return places

    def build(self, records: Sequence[TrialRecord]) -> None:
        """Index `records` now (else at the first question about them: the sweep loop does it before its first
        OOM, while its first jobs run)."""
        if len(records) != len(self._keys):
            self._build(records)

    def _build(self, records: Sequence[TrialRecord]) -> None:
        places: dict[tuple[object, ...], list[int]] = {}
        for i, shape in enumerate(map(_shape, [r.layout for r in records])):   # attrgetter: no frame a trial
            places.setdefault(shape, []).append(i)
        self._places = places
        self._keys = [r.config_hash for r in records]


_shape: Callable[[Layout], tuple[object, ...]] = operator.attrgetter(*SHAPE)
"""A layout's values of SHAPE, as a tuple (attrgetter: no Python frame per layout)."""


_SHAPES: dict[int, tuple[Layout, tuple[object, ...]]] = {}
"""id(layout) -> (the layout, its shape): the layout is kept, so its id is not reused while it is here."""


def shape_of(layout: Layout) -> tuple[object, ...]:
    """_shape, once per Layout object (the loop asks for every planned trial on every poll; hashing a Layout
    costs as much as its shape)."""
    hit = _SHAPES.get(id(layout))
    if hit is not None and hit[0] is layout:
        return hit[1]
    if len(_SHAPES) > 500_000:  # a long-lived process planning many sweeps
        _SHAPES.clear()
    shape = _shape(layout)
    _SHAPES[id(layout)] = (layout, shape)
    return shape


def forget() -> None:
    """Drops the shapes kept (and their layouts): a finished sweep's (launcher.run.loop.run_sweep)."""
    _SHAPES.clear()


def should_retry(record: TrialRecord, max_attempts: int) -> bool:
    """Retry a finished trial? oom, stopped_early and config errors never; a hang once; others up to
    retry.max_attempts."""
    if record.state in (TrialState.OK, TrialState.OOM, TrialState.PRUNED, TrialState.PLANNED,
                        TrialState.STOPPED_EARLY) or record.is_live:
        return False
    kind = _kind(record.failure_kind or (FailureKind.CANCELLED if record.state is TrialState.CANCELLED
                                         else FailureKind.UNKNOWN))
    if not kind.retryable:
        return False
    limit = max_attempts if kind.max_retries is None else min(max_attempts, 1 + kind.max_retries)
    return record.attempts < limit


def _kind(text: str) -> FailureKind:
    """A recorded failure kind; one this parasweep does not know (a newer one's) is treated as unknown."""
    try:
        return FailureKind(text)
    except ValueError:
        return FailureKind.UNKNOWN


def exclude_on_retry_kind(kind: str) -> bool:
    """Should a retry avoid the node the failure happened on (node failure, comm error, preemption)?"""
    return _kind(kind or FailureKind.UNKNOWN).exclude_node


def repeat_records(records: Sequence[TrialRecord], ranked_hashes: Sequence[str], repeats: int,
                   cluster_nodes: int) -> list[TrialRecord]:
    """Extra runs of the best trials (`ranked_hashes`, best first) so that the ranking can use medians.

    Repeat i of trial H is trial 'H~ri'. On SLURM a repeat avoids the nodes the first run used when the cluster
    has room elsewhere, so a slow or fast node does not decide the winner."""
    by_hash = {r.config_hash: r for r in records}
    position = max((r.position for r in records), default=0) + 1
    extra = []
    for base_hash in ranked_hashes:
        base = by_hash[base_hash]
        spare = cluster_nodes - base.layout.nodes >= base.layout.nodes
        # a SLURM hostlist (n[1-2]) goes to --exclude whole
        avoid = [base.node_list] if spare and base.node_list else []
        for i in range(1, repeats):
            extra.append(TrialRecord(f"{base_hash}~r{i}", position, base.layout, base.predicted, "repeat",
                                     repeat_of=base_hash, excluded_nodes=avoid))
            position += 1
    return extra


def refusal_kind(sbatch_error: str) -> FailureKind:
    """A refused submission: a request SLURM can never satisfy is a config error (not retried), anything else
    (controller busy or down, a submit limit) submit_refused: not the trial's failure, submitted again by the next
    run of the same command (launcher/run/refusal.py)."""
    never = ("Invalid partition", "Invalid account", "Invalid qos", "Requested node configuration is not available",
             "Invalid generic resource", "Invalid feature", "Requested reservation is invalid", "More processors")
    return FailureKind.CONFIG_ERROR if any(text in sbatch_error for text in never) else FailureKind.SUBMIT_REFUSED


def may_exclude(cluster_nodes: int, trial_nodes: int) -> bool:
    """Avoiding the failing node on a retry only makes sense if enough other nodes remain."""
    return cluster_nodes >= 2 * trial_nodes
