"""The ledger's trials in memory, kept equal to the file by reading only what changed.

The sweep loop asks for the trials several times a poll; reading and decoding every row each time cost seconds a
poll at 50,000 trials (issue 19). A view reads everything once, then only the rows its ledger connection wrote
since (Ledger.written_since), and everything again when another connection committed (sqlite's data_version), so
what it returns is always what a full `Ledger.trials()` would return. The ledger stays the source of truth: the
view holds nothing that is not in the file, and a resumed sweep builds its view from the file.

The records are shared between calls: callers read them and change trials through the ledger, never in place.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Optional

from launcher.core.record import TrialRecord
from launcher.core.states import TrialState
from launcher.run.ledger import Ledger


class LedgerView:
    def __init__(self, ledger: Ledger, records: Optional[list[TrialRecord]] = None) -> None:
        """`records`: every trial the ledger holds, as it holds them (a new sweep's plan as Ledger.add_trials
        inserted it into an empty ledger: its `inserted`), taken as the first read instead of decoding them again."""
        self.ledger = ledger
        self._records: list[TrialRecord] = []      # in ledger order (position)
        self._index: dict[str, int] = {}           # config hash -> place in _records
        self._mark = 0
        self._version: Optional[int] = None
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
        """As Ledger.trials: every trial in position order, or those in `states`."""
        self.refresh()
        if states is None:
            return list(self._records)
        wanted = {TrialState(s) for s in states}
        return [r for r in self._records if r.state in wanted]

    def get(self, config_hash: str) -> TrialRecord:
        self.refresh()
        return self._records[self._index[config_hash]]

    def _load(self, records: list[TrialRecord]) -> None:
        self._records = records
        self._index = {r.config_hash: i for i, r in enumerate(records)}

    def _apply(self, records: list[TrialRecord]) -> None:
        added = False
        for r in records:
            i = self._index.get(r.config_hash)
            if i is None or self._records[i].position != r.position:
                added = True
            if i is None:
                self._index[r.config_hash] = len(self._records)
                self._records.append(r)
            else:
                self._records[i] = r
        if added:  # new trials (repeats), in ledger order as Ledger.trials gives them
            self._load(sorted(self._records, key=lambda r: r.position))
