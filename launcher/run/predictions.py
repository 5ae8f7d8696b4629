"""The search's predictions of the planned trials (Predictions: config hash -> a trial's prediction, kept as columns)
and what is read of them: the spreads the pick reads (`pick_spreads`), a table's prediction joined to its new rows'
(`joined`) and whether two predictions' inputs are the same (`same_inputs`)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, MutableMapping
from typing import TYPE_CHECKING, Optional

from launcher.plan.calibrate import Prediction
from launcher.run import scheduler

if TYPE_CHECKING:  # numpy is imported where it is used (as in launcher.plan.calibrate)
    import numpy as np

PREDICTION_KEYS = ("step_time_s", "step_sd", "tokens_per_s", "peak_mem_gb", "mem_sd")


class Predictions(MutableMapping[str, dict]):
    """config hash -> the search's prediction of a trial (PREDICTION_KEYS + n_fit), kept as columns: a dict is
    made for a trial only when it is asked for (what is submitted, pruned or recorded); the scheduler's inputs read
    the columns (Search.planned, calibrated_ooms). A dict of 50k dicts cost ~0.2 s a refit (issue 19). Keys set
    after it was made (the loop adds the trials the calibration brought back) come after the predicted ones."""

    def __init__(self, keys: list[str], step_time_s: np.ndarray, step_sd: np.ndarray, tokens_per_s: np.ndarray,
                 peak_mem_gb: np.ndarray, mem_sd: np.ndarray, n_fit: int,
                 index: Optional[dict[str, int]] = None, pick_sd: Optional[np.ndarray] = None) -> None:
        """`index`: {key: its place in keys}, when the caller has it (it is shared, never changed here). `pick_sd`:
        the log sds the pick reads (residuals.corrected_for_pick: without the miss floor); None: step_sd."""
        self._keys = keys
        self._index = {k: i for i, k in enumerate(keys)} if index is None else index
        self._arrays = (step_time_s, step_sd, tokens_per_s, peak_mem_gb, mem_sd)
        self._pick_sd = step_sd if pick_sd is None else pick_sd
        self._lists: Optional[tuple[list[float], ...]] = None
        self._n_fit = n_fit
        self._made: dict[str, dict] = {}
        self._extra: list[str] = []     # keys set that were not predicted here, in the order they were set
        self._set: set[str] = set()     # keys whose dict was set (it, not the columns, is their prediction)

    def row(self, key: str) -> Optional[int]:
        """The key's place in the columns (None: not predicted here, or its prediction set later)."""
        return None if key in self._set else self._index.get(key)

    def rows(self) -> Mapping[str, int]:
        """key -> its place in the columns, for every key read from them (row() without a call per trial)."""
        if not self._set:
            return self._index
        return {k: i for k, i in self._index.items() if k not in self._set}

    def changed(self) -> bool:
        """Whether a key was set since it was made (its rows then no longer say every prediction)."""
        return bool(self._set)

    def keyset(self) -> Mapping[str, object]:
        """What `key in self` answers, as a mapping whose `in` costs no Python call (a test per planned trial)."""
        return self._index if not self._extra else {**self._index, **dict.fromkeys(self._extra)}

    def row_keys(self) -> list[str]:
        """The predicted keys, in the columns' order (callers must not change the list)."""
        return self._keys

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(step_time_s, step_sd, tokens_per_s, peak_mem_gb, mem_sd) of every row, as numpy arrays."""
        return self._arrays

    def pick_sd(self) -> np.ndarray:
        """The log sd the pick reads of every row (the ledger's step_sd is the floored one: the stop rule's)."""
        return self._pick_sd

    def columns(self) -> tuple[list[float], list[float], list[float], list[float]]:
        """(step_time_s, step_sd, peak_mem_gb, mem_sd) of every row."""
        step, sd, _, peak, mem_sd = self._columns
        return step, sd, peak, mem_sd

    @property
    def _columns(self) -> tuple[list[float], ...]:
        """The arrays as lists (made when first read: most predictions are read as arrays only)."""
        if self._lists is None:
            self._lists = tuple(a.tolist() for a in self._arrays)
        return self._lists

    def __getitem__(self, key: str) -> dict:
        made = self._made.get(key)
        if made is None:
            i = self._index[key]
            step, sd, tokens, peak, mem_sd = (a.item(i) for a in self._arrays)   # the floats tolist() gives
            made = self._made[key] = {"step_time_s": step, "step_sd": sd, "tokens_per_s": tokens,
                                      "peak_mem_gb": peak, "mem_sd": mem_sd, "n_fit": self._n_fit}
        return made

    def __setitem__(self, key: str, value: dict) -> None:
        if key not in self:
            self._extra.append(key)
        self._made[key] = value
        self._set.add(key)

    def __delitem__(self, key: str) -> None:
        raise TypeError("the search's predictions are not deleted from (a new refit makes new ones)")

    def __contains__(self, key: object) -> bool:
        return key in self._index or key in self._made

    def get(self, key: str, default: Optional[dict] = None) -> Optional[dict]:  # type: ignore[override]
        """Mapping.get without raising and catching a KeyError for every trial not predicted (pruned ones)."""
        if key not in self:
            return default
        return self.__getitem__(key)

    def __iter__(self) -> Iterator[str]:
        yield from self._keys
        yield from self._extra

    def __len__(self) -> int:
        return len(self._keys) + len(self._extra)


def pick_spreads(planned: scheduler.PlannedColumns, predictions: Mapping[str, dict]) -> np.ndarray:
    """The log sd the pick reads (Predictions.pick_sd) of each row of `planned`: its predicted row's, or step_sd
    where the row was not read from the predictions' columns (a prediction the loop set: brought back)."""
    import numpy as np

    if not isinstance(predictions, Predictions):
        return planned.step_sd
    if planned.keys is predictions.row_keys():   # planned_columns' rows are the predictions' columns
        return predictions.pick_sd()
    pick, rows = predictions.pick_sd(), predictions.rows()
    return np.fromiter((pick[i] if (i := rows.get(k)) is not None else planned.step_sd[j]
                        for j, k in enumerate(planned.keys)), dtype=float, count=len(planned.keys))


def joined(a: Prediction, b: Prediction) -> Prediction:
    """The prediction of a table's rows, then another's (each row's prediction depends on its row alone)."""
    import numpy as np

    def cat(x: Optional[np.ndarray], y: Optional[np.ndarray]) -> Optional[np.ndarray]:
        return None if x is None or y is None else np.concatenate([x, y])

    return Prediction(np.concatenate([a.step_time_s, b.step_time_s]), np.concatenate([a.step_sd, b.step_sd]),
                      np.concatenate([a.peak_mem_gb, b.peak_mem_gb]), np.concatenate([a.mem_sd, b.mem_sd]),
                      cat(a.step_param_sd, b.step_param_sd))


def same_inputs(a: tuple, b: tuple) -> bool:
    """Whether two prediction inputs are equal (the calibration compared by identity: a refit makes a new one)."""
    return a[0] is b[0] and a[1:] == b[1:]
