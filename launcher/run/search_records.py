"""What the search reads of the ledger's records: which trials are its own (estimated), what a trial's throughput is
worth under the objective, the finished trials as the scheduler reads them (outcomes), per-record flags kept per
place of the records (RecordFlags) and a trial's layout as a mapping without a dict (LayoutDims)."""

from __future__ import annotations

import operator
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from launcher.core.layout import NAMES, Layout
from launcher.core.objective import Objective
from launcher.core.record import TrialRecord
from launcher.core.states import MEASURED, TrialState
from launcher.run.scheduler import Outcome

if TYPE_CHECKING:  # numpy is imported where it is used (as in launcher.plan.calibrate)
    import numpy as np


def estimated(r: TrialRecord) -> bool:
    """A trial of the search: the plan estimated it, it is not a repeat and it was not pruned."""
    return r.state is not _PRUNED and not r.repeat_of and bool(r.predicted.get("step_time_s"))


_PRUNED = TrialState.PRUNED  # estimated() runs several times a poll on every trial: no attribute look-up each
_FINISHED = frozenset(s for s in TrialState if s.finished)


def objective_share(r: TrialRecord, objective: Objective | str) -> float:
    """What one token/s of this trial is worth under plan.objective: the scheduler compares tokens/s, so for the
    per-GPU objective every throughput it sees is divided by the trial's GPUs (Objective.share)."""
    return Objective(objective).share(r.layout.gpus)


def outcomes(records: Sequence[TrialRecord], objective: str = "tokens_per_s") -> list[Outcome]:
    """The finished trials of the search, as the scheduler reads them (throughput only when measured, in the
    objective's units)."""
    out = []
    for r in records:
        if r.state not in _FINISHED or not estimated(r):   # finished first: few are, and the test is a set's
            continue
        speed = r.metrics.get("tokens_per_s") if r.state in MEASURED else None
        out.append(Outcome(r.config_hash, r.state, speed * objective_share(r, objective) if speed else None))
    return out



class RecordFlags:
    """Per place in the records last asked about: the trial's config hash, and whether it is estimated(), measured
    (state in MEASURED) and finished. Updated only at the places whose record object changed (the view replaces a
    record when its row changes: 8 of 50k a poll), so that what the search reads of a few trials (the measured,
    the finished) costs their number, and the estimated trials' keys a gather, not a pass over every record."""

    def __init__(self) -> None:
        import numpy as np

        self._records: list[TrialRecord] = []
        self.key_version = 0
        """Changes when the key at a place does (a new list of records, a place given another trial)."""
        self.keys = np.empty(0, dtype=object)
        self.estimated = self.measured = self.finished = np.zeros(0, dtype=bool)

    def update(self, records: Sequence[TrialRecord]) -> None:
        import numpy as np

        n, old = len(records), self._records
        if n != len(old):
            self.key_version += 1
            self.keys = np.array([r.config_hash for r in records] or [""], dtype=object)[:n]
            self.estimated = np.fromiter(map(estimated, records), dtype=bool, count=n)
            self.measured = np.fromiter((r.state in MEASURED for r in records), dtype=bool, count=n)
            self.finished = np.fromiter((r.state in _FINISHED for r in records), dtype=bool, count=n)
        else:
            for i in np.flatnonzero(~np.fromiter(map(operator.is_, old, records), dtype=bool, count=n)).tolist():
                r = records[i]
                if self.keys[i] != r.config_hash:
                    self.keys[i] = r.config_hash
                    self.key_version += 1
                self.estimated[i], self.measured[i], self.finished[i] = \
                    estimated(r), r.state in MEASURED, r.state in _FINISHED
        self._records = list(records)

    def of(self, records: Sequence[TrialRecord], mask: np.ndarray) -> list[TrialRecord]:
        """The records at the places `mask` holds, in order (`records`: those last given to update)."""
        import numpy as np

        return list(map(records.__getitem__, np.flatnonzero(mask).tolist()))


class LayoutDims(Mapping[str, Any]):
    """Layout.to_dict() read from the Layout itself: what the scheduler and the residual design read of a trial's
    layout, kept per trial without a dict (a 16-key dict per trial was ~20 MB of a resumed 50k-trial sweep, issue
    19). Equal to the dict (==, keys in its order, get, in); read-only, as the Layout is."""

    __slots__ = ("layout",)

    def __init__(self, layout: Layout) -> None:
        self.layout = layout

    def __getitem__(self, name: str) -> Any:
        if name in _LAYOUT_NAMES:
            return getattr(self.layout, name)
        raise KeyError(name)

    def get(self, name: str, default: Any = None) -> Any:
        return getattr(self.layout, name) if name in _LAYOUT_NAMES else default

    def __contains__(self, name: object) -> bool:
        return name in _LAYOUT_NAMES

    def __iter__(self) -> Iterator[str]:
        return iter(NAMES)

    def __len__(self) -> int:
        return len(NAMES)

    def __repr__(self) -> str:
        return f"LayoutDims({self.layout!r})"


_LAYOUT_NAMES = frozenset(NAMES)
