"""The ledger's trials in memory, kept equal to the file by reading only what changed.

The sweep loop asks for the trials several times a poll; reading and decoding every row each time cost seconds a
poll at 50,000 trials (issue 19). A view reads everything once, then only the rows its ledger connection wrote
since (Ledger.written_since), and everything again when another connection committed (sqlite's data_version), so
what it returns is always what a full `Ledger.trials()` would return. The ledger stays the source of truth: the
view holds nothing that is not in the file, and a resumed sweep builds its view from the file.

The records are shared between calls: callers read them and change trials through the ledger, never in place.
It also keeps, per state, the places of its trials in that state (and apart, those that have run at least once),
updated with the rows that change: the loop's questions about a few states (what is live, what ran out of memory,
what has run) then cost the size of the answer, not a pass over every trial (issue 19).
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable
from typing import Optional

from launcher.core.record import TrialRecord
from launcher.core.states import TrialState
from launcher.run.ledger import Ledger


class Snapshot(list[TrialRecord]):
    """A list of records that cannot be changed in place: the same Snapshot object again means the same records
    (launcher.run.search then knows what it derived from them still holds without comparing them)."""

    def _frozen(self, *args: object, **kwargs: object) -> None:
        raise TypeError("a view's snapshot of the trials is read-only: copy it (list(...)) to change it")

    __setitem__ = __delitem__ = __iadd__ = __imul__ = _frozen  # type: ignore[assignment]
    append = extend = insert = pop = remove = clear = sort = reverse = _frozen  # type: ignore[assignment]


class LedgerView:
    def __init__(self, ledger: Ledger, records: Optional[list[TrialRecord]] = None) -> None:
        """`records`: every trial the ledger holds, as it holds them (a new sweep's plan as Ledger.add_trials
        inserted it into an empty ledger: its `inserted`), taken as the first read instead of decoding them again."""
        self.ledger = ledger
        self._records: list[TrialRecord] = []      # in ledger order (position)
        self._index: dict[str, int] = {}           # config hash -> place in _records
        self._mark = 0
        self._version: Optional[int] = None
        self._groups: dict[tuple[TrialState, bool], list[int]] = {}
        """(state, has run: attempts > 0) -> the places in _records of its trials, ascending."""
        self._snapshot: Optional[Snapshot] = None
        """trials() as last returned, until a record changes."""
        self._repeats: list[int] = []
        """The places of the repeats (a trial's repeat_of never changes; repeats come with a reload)."""
        if records is not None:
            self._load(sorted(records, key=lambda r: r.position))
            self._version, self._mark = ledger.data_version(), ledger.written_since(0)[0]

    def refresh(self) -> None:
        """Read what changed since the last call (everything when another connection wrote)."""
        version = self.ledger.data_version()
        mark, changed = self.ledger.written_since(self._mark)
        if version != self._version:
            self._load(self.ledger.trials())
        elif changed:
            self._apply(self.ledger.get_many(changed))
        self._version, self._mark = version, mark

    def trials(self, states: Optional[Iterable[TrialState]] = None) -> list[TrialRecord]:
        """As Ledger.trials: every trial in position order, or those in `states`. Every trial: the same read-only
        list (Snapshot) while nothing changed, so that what was derived from it is known to still hold by identity
        (launcher.run.search)."""
        self.refresh()
        if states is None:
            if self._snapshot is None:
                self._snapshot = Snapshot(self._records)
            return self._snapshot
        wanted = {TrialState(s) for s in states}
        return self._at([g for key, g in self._groups.items() if key[0] in wanted])

    def ran(self) -> list[TrialRecord]:
        """The trials with at least one attempt, in position order (what has held GPUs)."""
        self.refresh()
        return self._at([g for key, g in self._groups.items() if key[1]])

    def count(self, states: Iterable[TrialState]) -> int:
        """len(trials(states)), without making the list."""
        self.refresh()
        wanted = {TrialState(s) for s in states}
        return sum(len(g) for key, g in self._groups.items() if key[0] in wanted)

    def counts(self) -> dict[TrialState, int]:
        """state -> how many trials are in it (states with none left out)."""
        self.refresh()
        out: dict[TrialState, int] = {}
        for (state, _), g in self._groups.items():
            if g:
                out[state] = out.get(state, 0) + len(g)
        return out

    def family(self, keys: Iterable[str]) -> list[TrialRecord]:
        """The trials whose `repeat_of or config_hash` is in `keys` (these trials and their repeats), in position
        order."""
        self.refresh()
        wanted = set(keys)
        index, records = self._index, self._records
        places = [i for k in wanted if (i := index.get(k)) is not None and not records[i].repeat_of]
        places += [i for i in self._repeats if records[i].repeat_of in wanted]
        return list(map(records.__getitem__, sorted(set(places))))

    def _at(self, groups: list[list[int]]) -> list[TrialRecord]:
        """The records at the places of `groups` (each ascending), in position order."""
        if not groups:
            return []
        places = groups[0] if len(groups) == 1 else sorted(itertools.chain.from_iterable(groups))
        return list(map(self._records.__getitem__, places))

    def get(self, config_hash: str) -> TrialRecord:
        self.refresh()
        return self._records[self._index[config_hash]]

    def _load(self, records: list[TrialRecord]) -> None:
        self._records, self._snapshot = records, None
        self._index = {r.config_hash: i for i, r in enumerate(records)}
        groups: dict[tuple[TrialState, bool], list[int]] = {}
        for i, r in enumerate(records):
            groups.setdefault((r.state, r.attempts > 0), []).append(i)
        self._groups = groups
        self._repeats = [i for i, r in enumerate(records) if r.repeat_of]

    def _apply(self, records: list[TrialRecord]) -> None:
        added, self._snapshot = False, None
        for r in records:
            i = self._index.get(r.config_hash)
            if i is None or self._records[i].position != r.position:
                added = True
            if i is None:
                self._index[r.config_hash] = len(self._records)
                self._records.append(r)
            else:
                old, self._records[i] = self._records[i], r
                if not added:
                    self._regroup(i, old, r)
        if added:  # new trials (repeats), in ledger order as Ledger.trials gives them
            self._load(sorted(self._records, key=lambda r: r.position))

    def _regroup(self, i: int, old: TrialRecord, new: TrialRecord) -> None:
        """Move place i from its old record's group to its new one's (a few rows a poll: a list's remove and a
        bisect, not a pass over the trials)."""
        was, now = (old.state, old.attempts > 0), (new.state, new.attempts > 0)
        if was != now:
            self._groups[was].remove(i)
            bisect.insort(self._groups.setdefault(now, []), i)
