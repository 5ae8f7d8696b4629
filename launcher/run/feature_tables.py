"""The search's features table, one row per trial predicted so far, built once and grown as trials join
(launcher.run.search): ClassTable (the trials' batch classes' features, computed once per class, and each trial's
class) and the room its class table grows into (`_grown`, `streamed`: arrays allocated with SPARE_SHARE spare rows,
kept in _ROOM for the one table over their first rows; `forget` drops them at the end of a sweep)."""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from launcher.plan.calibrate import FeatureTable, log_step_gradient_of, step_of_classes
from launcher.plan.constants import Constants

if TYPE_CHECKING:  # numpy is imported where it is used (as in launcher.plan.calibrate)
    import numpy as np


class ClassTable(FeatureTable):
    """Trials' features as the table of their batch classes and, per trial, its class (a row of that table), its
    micro-batch count and its tokens per step: predicts what FeatureTable of every trial's own features does, to
    the last bit, with each class's amounts computed once (a 50k-trial plan has ~17k classes: a third of the
    memory, ~250 MB less, and of the work at every prediction of the calibration)."""

    def __init__(self, classes: FeatureTable, of_class: np.ndarray, microbatches: np.ndarray,
                 tokens_per_step: np.ndarray) -> None:  # FeatureTable's columns are the classes' (not set here)
        self.classes, self.of_class = classes, of_class
        self.microbatches, self.tokens_per_step = microbatches, tokens_per_step
        self.n = len(of_class)

    def step_time_s(self, constants: Constants) -> np.ndarray:
        """FeatureTable.step_time_s: the rates times the amounts, and `combine`, once per class; then the step per
        trial from its class's parts and its micro-batch count (calibrate.step_of_classes)."""
        import numpy as np

        c = self.classes
        r = c._rates(constants)
        return step_of_classes(np.einsum("nsfg,ng->nsf", c.stages, r), np.einsum("nkg,ng->nk", c.dp, r), c.weights,
                               c.pp, c.vpp, c.overlap_gather, c.cpu, constants.overlap_interference,
                               constants.tp_overlap_interference, self.of_class, self.microbatches)

    def peak_mem_quantities_gb(self, constants: Constants) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The memory does not depend on the micro-batch count: the classes', per trial."""
        allocated, reserved, device = self.classes.peak_mem_quantities_gb(constants)
        return allocated[self.of_class], reserved[self.of_class], device[self.of_class]

    def subset(self, index: Sequence[int]) -> ClassTable:
        import numpy as np

        idx = np.asarray(index, dtype=int)
        return ClassTable(self.classes, self.of_class[idx], self.microbatches[idx], self.tokens_per_step[idx])

    def with_room(self) -> ClassTable:
        """The same table, its classes' arrays in buffers with spare rows (_grown writes the next classes there)."""
        return ClassTable(_grown(self.classes, self.classes.subset([])), self.of_class, self.microbatches,
                          self.tokens_per_step)

    def concat(self, other: ClassTable) -> ClassTable:
        """One table with this one's trials, then other's."""
        import numpy as np

        return ClassTable(_grown(self.classes, other.classes),
                          np.concatenate([self.of_class, other.of_class + self.classes.n]),
                          np.concatenate([self.microbatches, other.microbatches]),
                          np.concatenate([self.tokens_per_step, other.tokens_per_step]))

    def log_step_gradient(self, prior: Constants, theta: np.ndarray) -> np.ndarray:
        """FeatureTable.log_step_gradient with each class's amounts priced once (the calibration's spread of
        every trial after each refit: ~1 s a refit at 50k trials when priced per trial)."""
        return log_step_gradient_of(self.classes, prior, theta, trials=(self.of_class, self.microbatches))

    def expanded(self) -> FeatureTable:
        """The same trials as a FeatureTable of one row each (what this table stands for)."""
        out = self.classes.subset(self.of_class.tolist())
        out.microbatches, out.tokens_per_step = self.microbatches, self.tokens_per_step
        return out


class _Room:
    """Arrays allocated with spare rows, and the table whose arrays are their first rows (the only one that may
    grow into the rest: another table's rows there would be overwritten)."""

    def __init__(self, buffers: dict[str, np.ndarray], table: FeatureTable) -> None:
        self.buffers, self.table = buffers, table


_ROOM: dict[int, tuple[FeatureTable, _Room]] = {}
"""id(table) -> (the table, the room its arrays are views of): the last few tables grown."""
SPARE_SHARE = 0.25
"""_grown: the room a table's arrays get beyond their rows, as a share of them."""


def _grown(a: FeatureTable, b: FeatureTable) -> FeatureTable:
    """_stacked([a, b]), with b's rows written after a's into room a's arrays were allocated with (SPARE_SHARE more
    rows than they held): the trials the calibration brings back add a few classes to a table of ~15k, and a
    copy of the whole table (~0.05 s) for each of them was most of such a poll. The same arrays, to the bit."""
    import numpy as np

    n = a.n + b.n
    arrays = {name: value for name, value in vars(a).items() if isinstance(value, np.ndarray)}
    if any(value.shape[1:] != getattr(b, name).shape[1:] for name, value in arrays.items()):
        return _stacked([a, b])
    hit = _ROOM.get(id(a))
    room = hit[1] if hit is not None and hit[0] is a and hit[1].table is a else None
    if room is None or any(len(room.buffers[name]) < n or np.result_type(value, getattr(b, name)) != value.dtype
                           for name, value in arrays.items()):
        capacity = n + int(n * SPARE_SHARE)
        buffers = {}
        for name, value in arrays.items():
            buf = np.empty((capacity, *value.shape[1:]), dtype=np.result_type(value, getattr(b, name)))
            buf[:a.n] = value
            buffers[name] = buf
        room = _Room(buffers, a)
    for name in arrays:
        room.buffers[name][a.n:n] = getattr(b, name)
    return _in_room(a, room, n)


def _in_room(like: FeatureTable, room: _Room, n: int) -> FeatureTable:
    """A table like `like` whose arrays are the first n rows of the room's buffers, the room kept for it (_ROOM)."""
    out = object.__new__(FeatureTable)
    for name, value in vars(like).items():
        setattr(out, name, room.buffers[name][:n] if name in room.buffers else value)
    out.n = n
    room.table = out
    if len(_ROOM) > 2:      # each room is a feature table's size (~60 MB at 50k trials)
        _ROOM.clear()
    _ROOM[id(out)] = (out, room)
    return out


def forget() -> None:
    """Drops the rooms kept (a finished sweep's feature tables: launcher.run.loop.run_sweep)."""
    _ROOM.clear()


def streamed(tables: Iterator[FeatureTable], n: int) -> FeatureTable:
    """_stacked(list(tables)) of n rows in all (at least one table), each table copied into arrays allocated with
    SPARE_SHARE more rows as it is made, and their room kept (_ROOM: with_room and _grown then write into it): the
    chunks were all held with their copy, then that copy with its grown one (~60 MB each at 50k trials, the
    first run's peak). The same arrays, to the bit."""
    import numpy as np

    first = next(tables)
    if first.n == n:
        return first
    names = [name for name, value in vars(first).items() if isinstance(value, np.ndarray)]
    capacity = n + int(n * SPARE_SHARE)
    buffers = {name: np.empty((capacity, *getattr(first, name).shape[1:]), dtype=getattr(first, name).dtype)
               for name in names}
    at = 0
    for table in itertools.chain([first], tables):
        for name in names:
            value, buf = getattr(table, name), buffers[name]
            if value.shape[1:] != buf.shape[1:]:
                raise ValueError(f"features table column {name}: rows of shape {value.shape[1:]} after "
                                 f"{buf.shape[1:]}")   # as np.concatenate says
            kind = np.result_type(buf, value)
            if kind != buf.dtype:     # np.concatenate's type: the rows so far converted as it would
                buf = buffers[name] = buf.astype(kind)
            buf[at:at + table.n] = value
        at += table.n
    return _in_room(first, _Room(buffers, first), n)


def _stacked(tables: Sequence[FeatureTable]) -> FeatureTable:
    """One table with the rows of `tables` in order (at least one)."""
    import numpy as np

    if len(tables) == 1:
        return tables[0]
    out = object.__new__(FeatureTable)
    for name, value in vars(tables[0]).items():
        setattr(out, name, np.concatenate([getattr(t, name) for t in tables]) if isinstance(value, np.ndarray)
                else value)
    out.n = sum(t.n for t in tables)
    return out
