"""The search inside the sweep loop: ledger records -> calibration and scheduler inputs -> decisions.

The building blocks are launcher.plan.calibrate (fit the estimator's constants to the measured trials) and
launcher.run.scheduler (order, early stop, stop rule); launcher.replay drives the same functions against measured
tables. This module turns the ledger's records into their inputs and their answers into what the loop records:

- `Search.refit`: the calibration is a pure function of the measured trials (ok and stopped_early) and of what an
  applied calibration predicted for them before they ran (TrialRecord.calibrated), so a resumed sweep recomputes
  it from the ledger; a refit happens only when that set changes.
- `Search.predictions`: every planned trial under the current calibration (a-priori constants until it applies).
- `Search.order`: the planned trials, the one to run next first (launcher.run.scheduler.order).
- `calibrated_ooms` and `converged`: what the calibrated memory model and the stop rule take out of the queue.
- `stop_early` (fed with analysis.logs.progress's step times through the loop's hooks): whether a running
  trial's partial measurement is known worse than the best; `stop_steady`: whether it is already known to the
  noise tolerance (then it ends ok, with fewer iterations).

Trials the plan did not estimate (a hand-made or first-release ledger: no predicted step time) keep the ledger
order and are never re-predicted: there is nothing to compare their prediction with.
"""

from __future__ import annotations

import itertools
import json
import math
import operator
from collections.abc import Callable, Collection, Iterator, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional, TypeVar, cast

from launcher.config.schema import RootConfig
from launcher.core.errors import ConfigError
from launcher.core.layout import NAMES, Layout
from launcher.core.objective import Objective
from launcher.core.record import TrialRecord
from launcher.core.states import MEASURED, TrialState
from launcher.plan.band import Z_90, calibrated_low_gb, memory_fit
from launcher.plan.batch_class import batch_class
from launcher.plan.calibrate import (
    Calibration,
    FeatureTable,
    Observation,
    Prediction,
    Prior,
    TrialFeatures,
    calibrate,
    for_layout,
    log_step_gradient_of,
    step_of_classes,
    trial_features,
    uncalibrated,
)
from launcher.plan.constants import Constants
from launcher.plan.inputs import constants_of, workload_for
from launcher.plan.residuals import corrected_for_pick, id_generation, row_ids, same_columns
from launcher.run import scheduler
from launcher.run.scheduler import POLICY, Outcome, Planned, Policy
from launcher.run.view import Snapshot

if TYPE_CHECKING:  # numpy is imported where it is used (as in launcher.plan.calibrate)
    import numpy as np

FEATURE_CHUNK = 1024
"""Trials whose features are computed, then copied into the search's table, at a time."""
PREDICTION_KEYS = ("step_time_s", "step_sd", "tokens_per_s", "peak_mem_gb", "mem_sd")
T = TypeVar("T")


def estimated(r: TrialRecord) -> bool:
    """A trial of the search: the plan estimated it, it is not a repeat and it was not pruned."""
    return r.state is not _PRUNED and not r.repeat_of and bool(r.predicted.get("step_time_s"))


_PRUNED = TrialState.PRUNED  # estimated() runs several times a poll on every trial: no attribute look-up each
_FINISHED = frozenset(s for s in TrialState if s.finished)
_PLANNED = TrialState.PLANNED


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


@dataclass(frozen=True)
class StopEarly:
    reason: str
    metrics: dict


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


class Search:
    """The sweep's current calibration and the features it predicts from (computed once per trial)."""

    def __init__(self, cfg: RootConfig, prior: Optional[Constants | Prior] = None, policy: Policy = POLICY) -> None:
        self.cfg = cfg
        self.prior = Prior.of(prior or constants_of(cfg.backend))
        """Where the calibration starts: the backend's constants (with a measured network when probed), or a
        finished sweep's calibration (plan.prior_from)."""
        self.policy = policy
        self.calibration: Calibration = uncalibrated(self.prior)
        self._features: dict[str, TrialFeatures] = {}
        self._by_class: dict[Layout, TrialFeatures] = {}
        self._planned: dict[Layout, TrialFeatures] = {}
        """Batch classes' features the planner priced in its pass (take_features), until the first table takes
        them."""
        """launcher.plan.batch_class layout -> its features (what every layout of the class shares)."""
        """The measured trials' features (what the calibration fits); every trial's are in _table."""
        self._fitted_on: Optional[tuple] = None
        self._table: Optional[ClassTable] = None
        """The features of every trial predicted so far, one row each (_rows): built once, not once a poll."""
        self._rows: dict[str, int] = {}
        self._table_prediction: Optional[tuple[Calibration, Prediction]] = None
        """The current calibration's prediction of every row of _table (it changes only with a refit)."""
        self._predicted: Optional[tuple[tuple, Predictions]] = None
        """(what the predictions depend on, the predictions): the loop asks several times between two refits."""
        self._asked: list[TrialRecord] = []
        """The records last asked about (held: the same objects again mean the same answers, _memo)."""
        self._memo: dict[object, object] = {}
        """What was derived from _asked (predictions, outcomes): the loop asks several times a poll."""
        self._asked_list: object = None
        """The list object last asked about (the same read-only Snapshot of the view again: the same records,
        without comparing them)."""
        self._flags = RecordFlags()
        """_asked's flags, updated where its records changed."""
        self._keys_of: Optional[tuple[int, np.ndarray, tuple[str, ...]]] = None
        """(the flags' key version, the places of the estimated trials, their keys): the same tuple object while
        they stay, so that what is derived from it is looked up by identity (_by_keys)."""
        self._by_keys: dict[str, tuple[tuple[str, ...], object]] = {}
        """name -> (a keys tuple, what was derived from it): the key -> row index of the predictions."""
        self._static: dict[str, tuple[Mapping[str, Any], float]] = {}
        """config hash -> (dims, tokens per step in the objective's terms): planned()'s inputs that do not change."""
        self._last: Optional[tuple] = None
        """The last full prediction: (calibration, measured (key, step) pairs, checks, (the flags' key version, the
        trials' places), (step, sd, peak, mem_sd, pick_sd) arrays, the trials' residual row ids), for a question
        about fewer of its trials (_fewer_of_last)."""
        self._dims: dict[str, LayoutDims] = {}
        """config hash -> its layout as a mapping (dims)."""
        self._place_cols: dict[str, tuple[int, np.ndarray]] = {}
        """name -> (the flags' key version, a value per place of the records: -1 where not known yet): _per_place."""
        self._ids_generation = id_generation()
        self._static_at: dict[str, int] = {}
        """config hash -> its row in _static_columns_of."""
        self._static_columns_of: tuple[np.ndarray, ...] = ()
        """What a trial's predictions and planned() read that never changes, one row per trial met (_static_at):
        its tokens per step (gbs x seq_len), the same in the objective's terms, and float(dims['gpus'] or 1)."""

    # -- calibration --------------------------------------------------------------------------------------------
    def take_features(self, features: Mapping[Layout, TrialFeatures]) -> None:
        """Batch classes' features the plan priced with its estimates (launcher.plan.pricing, Plan.class_features):
        used instead of pricing them again (the same numbers, to the last bit)."""
        self._planned = dict(features)

    def features(self, r: TrialRecord) -> TrialFeatures:
        if r.config_hash not in self._features:
            self._features[r.config_hash] = self._trial_features(r)
        return self._features[r.config_hash]

    def dims(self, r: TrialRecord) -> Mapping[str, Any]:
        """The trial's layout as a read-only mapping (LayoutDims), made once."""
        dims = self._dims.get(r.config_hash)
        if dims is None:
            dims = self._dims[r.config_hash] = LayoutDims(r.layout)
        return dims

    def _prediction(self, records: Sequence[TrialRecord], places: Optional[np.ndarray] = None
                    ) -> tuple[np.ndarray, ...]:
        """The calibration's (step_time_s, step_sd, peak_mem_gb, mem_sd) of `trials`, from the features table
        (extended with the trials it lacks) and its prediction (made again only after a refit). With the residual
        model (Policy.residuals) the step sd is the model error alone: `corrected` gives the sd the search uses, so
        the fitted constants' spread (a gradient of every trial's step, ~0.8 s a refit at 50k trials) is not
        priced. The trials: the records at `places` of the records' flags (each trial's row in the table is then
        kept per place), or all of `records`."""
        import numpy as np

        spread = not self.policy.residuals   # the residual model replaces the calibration's step sd (predictions)
        rows = self._rows
        keep = places is not None
        at = np.arange(len(records)) if places is None else places
        col = self._per_place("table row", records, at, lambda new: np.full(len(new), -1, dtype=np.int64)) \
            if keep else np.full(len(at), -1, dtype=np.int64)
        unknown_at = at[col < 0]
        unknown = [records[i] for i in unknown_at.tolist()]   # not met since their places were kept
        missing = [r for r in unknown if r.config_hash not in rows]
        if missing or self._table is None:
            fresh = self._feature_table(missing)
            old, cached = self._table, self._table_prediction
            self._table = fresh if old is None or not self._rows else old.concat(fresh)
            self._rows.update((r.config_hash, len(self._rows)) for r in missing)
            # Rows are predicted independently: the new ones join the current prediction (a refit at 50k trials
            # costs ~1 s, and trials brought back after it would have paid it again).
            self._table_prediction = None if cached is None or cached[0] is not self.calibration or old is None \
                else (cached[0], _joined(cached[1], self.calibration.predict(fresh, spread)))
        cached = self._table_prediction
        if cached is None or cached[0] is not self.calibration:
            cached = self._table_prediction = (self.calibration, self.calibration.predict(self._table, spread))
        p = cached[1]
        if unknown:
            found = np.fromiter((rows[r.config_hash] for r in unknown), dtype=np.int64, count=len(unknown))
            if keep:
                self._place_cols["table row"][1][unknown_at] = found
            col[col < 0] = found
        return p.step_time_s[col], p.step_sd[col], p.peak_mem_gb[col], p.mem_sd[col]

    def reserve_rows(self) -> None:
        """Give the features table spare rows now (SPARE_SHARE), so that the classes of the trials the calibration
        brings back are written into them, not into a copy of the table made in that poll (the sweep loop asks
        after its first progress line)."""
        if self._table is not None and self._table.classes.n:
            self._table = self._table.with_room()

    def _feature_table(self, trials: Sequence[TrialRecord]) -> ClassTable:
        """FeatureTable(features of `trials`) as a ClassTable: the features of each batch class
        (launcher.plan.batch_class) computed once, FEATURE_CHUNK classes at a time, into a table of the classes, and
        each trial's class, micro-batch count and tokens per step (what for_layout changes) as columns. 50k trials'
        features as objects, or as one row each, cost ~250 MB and a Python pass each (issue 19)."""
        import numpy as np

        classes: dict[Layout, int] = {}
        of_class = np.fromiter((classes.setdefault(batch_class(r.layout), len(classes)) for r in trials), dtype=int,
                               count=len(trials))
        keys = list(classes)
        table = _streamed((FeatureTable([self._class_features(k) for k in keys[start:start + FEATURE_CHUNK]])
                           for start in range(0, len(keys), FEATURE_CHUNK)), len(keys)) if keys \
            else FeatureTable([])
        self._planned = {}  # the plan's trials are in the first table: what it did not take is not asked for again
        seq_len = self.cfg.model.seq_len
        return ClassTable(table, of_class,
                          np.fromiter((max(1, r.layout.microbatches) for r in trials), dtype=float, count=len(trials)),
                          np.fromiter((r.layout.gbs * seq_len for r in trials), dtype=float, count=len(trials)))

    def _class_features(self, key: Layout) -> TrialFeatures:
        """The features of a batch class (kept only for the trials measured: observations ask for them again)."""
        features = self._by_class.get(key) or self._planned.pop(key, None)
        if features is None:
            b = self.cfg.backend
            features = trial_features(self.cfg.model, self.cfg.cluster, key, b.precision, b.flash_attention,
                                      backend=b.name, workload=workload_for(b, key))
        return features

    def _trial_features(self, r: TrialRecord) -> TrialFeatures:
        if r.config_hash in self._features:
            return self._features[r.config_hash]
        key = batch_class(r.layout)  # layouts apart only in gbs share their features (~1 ms each, 50k trials)
        features = self._by_class.get(key)
        if features is None:
            features = self._by_class[key] = self._class_features(key)
        return for_layout(features, r.layout, self.cfg.model.seq_len)

    def observations(self, records: Sequence[TrialRecord]) -> list[Observation]:
        """Measured trials (repeats included: more measurements of one layout); a stopped_early trial's peak is
        not its run's peak (it stopped before the end), so only its step time counts."""
        out = []
        for r in records:
            if r.state not in MEASURED or not r.metrics.get("step_time_s") or not r.predicted.get("step_time_s"):
                continue
            peak = r.metrics.get("peak_mem_gb") if r.state is TrialState.OK else None
            out.append(Observation(self.features(r), float(r.metrics["step_time_s"]), peak,
                                   r.calibrated.get("step_time_s")))
        return out

    def refit(self, records: Sequence[TrialRecord]) -> bool:
        """Fit the calibration to the measured trials; False (and nothing done) when they did not change."""
        self._records_memo(records)
        records = self._flags.of(records, self._flags.measured)   # all that the fit reads: the measured trials
        key = tuple(sorted((r.config_hash, str(r.state), r.metrics.get("step_time_s"), r.metrics.get("peak_mem_gb"),
                            r.calibrated.get("step_time_s")) for r in records
                           if r.state in MEASURED and r.predicted.get("step_time_s")))
        if key == self._fitted_on:
            return False
        self._fitted_on = key
        self.calibration = calibrate(self.observations(records), self.prior, min_trials=self.policy.min_fit_trials)
        return True

    def calibration_json(self) -> dict:
        """What calibration.json holds: the calibration and the setup it belongs to (plan.prior_from checks it)."""
        return {**self.calibration.to_json(), "setup": setup(self.cfg)}

    # -- predictions --------------------------------------------------------------------------------------------
    def predictions(self, records: Sequence[TrialRecord]) -> Predictions:
        """config hash -> the current calibration's prediction (PREDICTION_KEYS + n_fit) of every estimated trial."""
        import numpy as np

        memo, cached = self._records_memo(records), self._predicted
        hit = memo.get("predictions")
        if isinstance(hit, tuple) and hit[0] is self.calibration:
            return cast(Predictions, hit[1])
        flags = self._flags   # updated by _records_memo for these records
        places = np.flatnonzero(flags.estimated)
        trials = memo["trials"] = list(map(records.__getitem__, places.tolist()))
        if not trials:
            none = np.zeros(0)
            return Predictions([], none, none, none, none, none, 0)
        measured = {int(i): float(step) for i in np.flatnonzero(flags.measured[places]).tolist()
                    if (step := trials[i].metrics.get("step_time_s"))}
        checked = checks(flags.of(records, flags.measured))   # checks reads only the measured records
        depends = (self.calibration, self.policy.residuals, self._keys(places),
                   tuple(measured.items()), tuple(checked))
        if cached is not None and _same(cached[0], depends):
            self._predicted = (depends, cached[1])
            memo["predictions"] = (self.calibration, cached[1])
            return cached[1]
        by_key = tuple((trials[i].config_hash, s) for i, s in measured.items())
        fewer = self._fewer_of_last(places, by_key, depends[4])
        if fewer is not None:
            step, sd, peak, mem_sd, pick_sd = fewer
        else:
            step_p, sd_p, peak, mem_sd = self._prediction(records, places)
            step, sd, pick_sd = step_p, sd_p, sd_p
            ids = np.zeros(0, dtype=np.int64)
            if self.policy.residuals:   # what the measured trials show, shared by trials with layout values in common
                ids = self._row_ids(records, places)
                step, sd, pick_sd = corrected_for_pick(step_p, ids, measured, checks=checked)
            self._last = (self.calibration, by_key, depends[4], (self._flags.key_version, places),
                          (step, sd, peak, mem_sd, pick_sd), ids)
        keys = depends[2]
        at = memo["static rows"] = self._per_place(
            "static row", records, places, lambda new: self._static_rows(new, [r.config_hash for r in new]))
        tokens = self._static_columns_of[0][at]
        index = self._derived("index", keys, lambda: dict(zip(keys, range(len(keys)))))
        out = Predictions(list(keys), step, sd, tokens / step, peak, mem_sd, self.calibration.n_trials, index,
                          pick_sd=pick_sd)
        self._predicted = (depends, out)
        memo["predictions"] = (self.calibration, out)
        return out

    def _static_rows(self, trials: Sequence[TrialRecord], keys: Sequence[str]) -> np.ndarray:
        """Each trial's row in _static_columns_of (rows added for the trials met for the first time): one gather
        by key a prediction, then numpy."""
        import numpy as np

        at = self._static_at
        if not all(map(at.__contains__, keys)):
            seq_len, share = self.cfg.model.seq_len, Objective(self.cfg.plan.objective).share
            new = [r for r in trials if r.config_hash not in at]
            at.update((r.config_hash, i) for i, r in enumerate(new, len(at)))
            added = (np.array([float(r.layout.gbs * seq_len) for r in new], dtype=float),
                     np.array([r.layout.gbs * seq_len * share(r.layout.gpus) for r in new], dtype=float),
                     np.array([float(r.layout.gpus or 1) for r in new], dtype=float))
            old = self._static_columns_of
            self._static_columns_of = added if not old else tuple(np.concatenate([a, b]) for a, b in zip(old, added))
        return np.fromiter(map(at.__getitem__, keys), dtype=int, count=len(keys))

    def _row_ids(self, records: Sequence[TrialRecord], places: np.ndarray) -> np.ndarray:
        """The residual design's row id (launcher.plan.residuals.row_ids) of the records at `places`, kept per
        place (a trial's layout never changes): the design is then looked up by its ids, no trial's dict read."""
        generation = id_generation()
        if self._ids_generation != generation:   # the ids were renumbered: none kept stands for anything now
            self._place_cols.pop("row id", None)
            self._ids_generation = generation
        dims = self.dims
        ids = self._per_place("row id", records, places, lambda new: row_ids([dims(r) for r in new])[0])
        if id_generation() != generation:   # renumbered while the new ones were read: all of them again
            self._place_cols.pop("row id", None)
            self._ids_generation = id_generation()
            ids = self._per_place("row id", records, places, lambda new: row_ids([dims(r) for r in new])[0])
        return ids

    def _per_place(self, name: str, records: Sequence[TrialRecord], places: np.ndarray,
                   make: Callable[[list[TrialRecord]], np.ndarray]) -> np.ndarray:
        """A value of each record at `places` that never changes for its trial (a row in a table, an id), kept per
        place of the records' flags while the trial there stays: make(records met for the first time) gives
        theirs. 50k look-ups by key a poll become one numpy gather."""
        import numpy as np

        col = self._place_cols.get(name)
        if col is None or col[0] != self._flags.key_version:
            col = self._place_cols[name] = (self._flags.key_version,
                                            np.full(len(self._flags.keys), -1, dtype=np.int64))
        values = col[1]
        got = values[places]
        new = places[got < 0]
        if len(new):
            values[new] = make(list(map(records.__getitem__, new.tolist())))
            got = values[places]
        return got

    def _fewer_of_last(self, places: np.ndarray, measured: tuple, checked: tuple
                       ) -> Optional[tuple[np.ndarray, ...]]:
        """The last full prediction's (step, sd, peak, mem_sd, pick_sd) of `keys`, when they are some of its trials
        under the same calibration, measurements and checks, and (with the residual model) their layouts still have
        every value its design has a column for: each trial's prediction is then its own, whatever the others (the
        residual posterior depends on the measured rows and the design's columns alone), so the trials pruned
        since (the loop prunes between two questions of a poll) cost a gather, not a new prediction. None: not."""
        import numpy as np

        last = self._last
        if last is None or last[0] is not self.calibration or last[1] != measured or last[2] != checked:
            return None
        version, last_places = last[3]
        if version != self._flags.key_version:   # a place holds another trial now: places do not compare
            return None
        idx = np.searchsorted(last_places, places)   # both ascending: where each place was in the last ones
        if len(idx) and (idx[-1] >= len(last_places) or not np.array_equal(last_places[idx], places)):
            return None
        if self.policy.residuals and not same_columns(last[5], idx):
            return None
        return tuple(a[idx] for a in last[4])

    def _records_memo(self, records: Sequence[TrialRecord]) -> dict[object, object]:
        """What was derived from these records, empty unless they are the very objects asked about last (the
        view replaces a record when its row changes): a check in C instead of a Python pass over 50k trials. The
        records' flags (RecordFlags) are brought up to date where they changed."""
        asked = self._asked
        if records is self._asked_list and isinstance(records, Snapshot):   # the view's, unchanged: the same
            return self._memo
        if len(asked) != len(records) or not all(map(operator.is_, asked, records)):
            self._flags.update(records)
            self._asked, self._memo = list(records), {}
        self._asked_list = records
        return self._memo

    def _keys(self, places: np.ndarray) -> tuple[str, ...]:
        """The config hashes at `places` of the records' flags: the tuple made last time when they are the same."""
        import numpy as np

        last, version = self._keys_of, self._flags.key_version
        if last is not None and last[0] == version and np.array_equal(last[1], places):
            return last[2]
        keys = tuple(self._flags.keys[places].tolist())
        if last is not None and last[2] == keys:   # the same trials at other places (a list grown): kept too
            keys = last[2]
        self._keys_of = (version, places, keys)
        return keys

    def _derived(self, name: str, keys: tuple[str, ...], make: Callable[[], T]) -> T:
        """make(), once per keys tuple object (_keys gives the same one while the trials stay)."""
        hit = self._by_keys.get(name)
        if hit is None or hit[0] is not keys:
            hit = self._by_keys[name] = (keys, make())
        return cast(T, hit[1])

    def _outcomes(self, records: Sequence[TrialRecord], objective: str = "tokens_per_s") -> list[Outcome]:
        """outcomes(records, objective), once per set of records."""
        memo = self._records_memo(records)
        hit = memo.get(("outcomes", objective))
        if hit is None:   # outcomes reads only the finished trials
            hit = memo[("outcomes", objective)] = outcomes(self._flags.of(records, self._flags.finished), objective)
        return cast(list[Outcome], hit)

    def learned(self, records: Sequence[TrialRecord]) -> bool:
        """Whether the predictions have learned from measured trials (scheduler.learned)."""
        return scheduler.learned(self.policy, self.calibration.applied, _measured(self._outcomes(records)))

    def planned(self, records: Sequence[TrialRecord], predictions: Mapping[str, dict]) -> list[Planned]:
        """The trials `predictions` holds, as the scheduler reads them (the search's Predictions: from its columns,
        no dict made per trial)."""
        capacity_gb, seq_len, objective = self.cfg.cluster.gpu_mem_gb, self.cfg.model.seq_len, self.cfg.plan.objective
        startup_s, share = self.cfg.backend.startup_s, Objective(objective).share  # objective_share, made once
        static = self._static
        rows = predictions.rows() if isinstance(predictions, Predictions) else {}
        step, sd, peak, mem_sd = predictions.columns() if isinstance(predictions, Predictions) else ([], [], [], [])
        out = []
        for r in records:
            i = rows.get(r.config_hash)
            if i is not None:
                values = (step[i], sd[i], peak[i], mem_sd[i])
            elif (p := predictions.get(r.config_hash)) is not None:   # set by the loop (brought back)
                values = (p["step_time_s"], p["step_sd"], p["peak_mem_gb"], p["mem_sd"])
            else:
                continue
            fixed = static.get(r.config_hash)
            if fixed is None:   # what does not change with the predictions: once per trial, not once a poll
                fixed = static[r.config_hash] = (self.dims(r), r.layout.gbs * seq_len * share(r.layout.gpus))
            out.append(Planned(r.config_hash, *fixed, *values, capacity_gb, startup_s))
        return out

    def planned_columns(self, records: Sequence[TrialRecord], predictions: Mapping[str, dict]
                        ) -> scheduler.PlannedColumns:
        """planned(records, predictions) as columns (scheduler.PlannedColumns), row for row: when `predictions` is
        this search's prediction of these very records with nothing set on it since, its rows are the estimated
        trials in record order, so the columns are its arrays and the static ones (tokens per step, GPUs) are
        gathered once per set of trials; otherwise the per-trial path's objects, as columns."""
        memo = self._records_memo(records)
        hit, trials = memo.get("predictions"), memo.get("trials")
        if not (isinstance(predictions, Predictions) and isinstance(hit, tuple) and hit[1] is predictions
                and isinstance(trials, list) and not predictions.changed()):
            return scheduler.PlannedColumns.of(self.planned(records, predictions))
        import numpy as np

        tokens, gpus = self._static_columns(trials, memo)
        step, sd, _, peak, mem_sd = predictions.arrays()
        n = len(trials)
        dims = self.dims
        return scheduler.PlannedColumns(predictions.row_keys(), tokens, step, sd, peak, mem_sd,
                                        np.full(n, float(self.cfg.cluster.gpu_mem_gb)),
                                        np.full(n, float(self.cfg.backend.startup_s)), gpus,
                                        lambda i: dims(trials[i]))

    def _static_columns(self, trials: list[TrialRecord], memo: dict[object, object]
                        ) -> tuple[np.ndarray, np.ndarray]:
        """(tokens per step in the objective's terms, float GPUs) of `trials`, as planned() computes them (`memo`:
        the records' memo, which holds the trials' static rows when it holds their predictions)."""
        import numpy as np

        at = memo.get("static rows")
        if not isinstance(at, np.ndarray):
            at = memo["static rows"] = self._static_rows(trials, [r.config_hash for r in trials])
        _, tokens, gpus = self._static_columns_of
        return tokens[at], gpus[at]

    # -- decisions ----------------------------------------------------------------------------------------------
    def order(self, records: Sequence[TrialRecord], candidates: Optional[Collection[str]] = None,
              head: Optional[int] = None) -> list[scheduler.Pick]:
        """Every unrun trial of the search, the one to run next first (scheduler.order's candidates and head)."""
        predictions = self.predictions(records)
        planned = self.planned_columns(records, predictions)
        finished = self._outcomes(records, self.cfg.plan.objective)
        b, policy = self.cfg.backend, self.policy
        learned = scheduler.learned(policy, self.calibration.applied, _measured(finished))
        return scheduler.order(planned, finished, calibrated=learned, noise_tolerance=self.cfg.analysis.noise_tolerance,
                               span=policy.span, rule=policy.rule, iterations=b.warmup_iters + b.measure_iters,
                               explore=policy.explore, pick_sd=None if policy.pick_floor else
                               pick_spreads(planned, predictions),
                               candidates=candidates, head=head)

    def converged(self, records: Sequence[TrialRecord]) -> scheduler.StopDecision:
        """The stop rule, once the predictions may be trusted (scheduler.trusted, as replay does)."""
        cal, policy = self.calibration, self.policy
        planned = self.planned(records, self.predictions(records))
        finished = self._outcomes(records, self.cfg.plan.objective)
        trusted = scheduler.trusted(policy, cal.applied, cal.n_holdout, _measured(finished))
        return scheduler.stop_rule(planned, finished, calibrated=trusted,
                                   noise_tolerance=self.cfg.analysis.noise_tolerance, combine=policy.stop_combine,
                                   dof=policy.stop_dof)


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


def _joined(a: Prediction, b: Prediction) -> Prediction:
    """The prediction of a table's rows, then another's (each row's prediction depends on its row alone)."""
    import numpy as np

    def cat(x: Optional[np.ndarray], y: Optional[np.ndarray]) -> Optional[np.ndarray]:
        return None if x is None or y is None else np.concatenate([x, y])

    return Prediction(np.concatenate([a.step_time_s, b.step_time_s]), np.concatenate([a.step_sd, b.step_sd]),
                      np.concatenate([a.peak_mem_gb, b.peak_mem_gb]), np.concatenate([a.mem_sd, b.mem_sd]),
                      cat(a.step_param_sd, b.step_param_sd))


def _same(a: tuple, b: tuple) -> bool:
    """Whether two prediction inputs are equal (the calibration compared by identity: a refit makes a new one)."""
    return a[0] is b[0] and a[1:] == b[1:]


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
    out = object.__new__(FeatureTable)
    for name, value in vars(a).items():
        if name in arrays:
            buf = room.buffers[name]
            buf[a.n:n] = getattr(b, name)
            value = buf[:n]
        setattr(out, name, value)
    out.n = n
    room.table = out
    if len(_ROOM) > 2:      # each room is a feature table's size (~60 MB at 50k trials)
        _ROOM.clear()
    _ROOM[id(out)] = (out, room)
    return out


def forget() -> None:
    """Drops the rooms kept (a finished sweep's feature tables: launcher.run.loop.run_sweep)."""
    _ROOM.clear()


def _streamed(tables: Iterator[FeatureTable], n: int) -> FeatureTable:
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
    out = object.__new__(FeatureTable)
    for name, value in vars(first).items():
        setattr(out, name, buffers[name][:n] if name in buffers else value)
    out.n = n
    if len(_ROOM) > 2:
        _ROOM.clear()
    _ROOM[id(out)] = (out, _Room(buffers, out))
    return out


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


def _measured(finished: Sequence[Outcome]) -> int:
    return sum(1 for o in finished if o.state in scheduler.MEASURED)


def checks(records: Sequence[TrialRecord]) -> list[tuple[float, float]]:
    """(log measured / predicted step time, predicted log sd) of the trials measured after the search had
    predicted them (TrialRecord.calibrated, frozen at submission): how well its spreads held
    (launcher.plan.residuals.spread_factor)."""
    out = []
    for r in records:
        if r.state not in MEASURED:   # first: most trials are not, and the test is a set's
            continue
        c, measured = r.calibrated, r.metrics.get("step_time_s")
        if measured and c.get("step_time_s") and c.get("step_sd"):
            out.append((math.log(float(measured) / float(c["step_time_s"])), float(c["step_sd"])))
    return out


def calibrated_ooms(records: Sequence[TrialRecord], predictions: Mapping[str, dict], capacity_gb: float,
                    margin: float, keep_borderline: float = 0.0) -> list[tuple[str, str]]:
    """Planned trials the calibrated memory model rules out (launcher.plan.band: the lower end of the calibrated
    peak's 90 % interval over the device's memory, and not within plan.keep_borderline), with the reason. Never one
    that a measured trial predicted to need at least as much memory shows to fit (the model errs, not the device)."""
    import numpy as np

    fitted = [predictions[r.config_hash]["peak_mem_gb"] for r in records
              if r.state in MEASURED and r.config_hash in predictions]
    largest_fitted = max(fitted, default=0.0)
    # The search's Predictions: a peak under the margin fits (band.memory_fit's first test, the same product) and
    # one a measured trial covers is kept, read from the column without making the trial's dict.
    rows = predictions.rows() if isinstance(predictions, Predictions) else {}
    # a few rows read from the arrays (.item: the floats the lists of columns() hold), not 50k made into lists
    peaks, mem_sds = predictions.arrays()[3:] if isinstance(predictions, Predictions) else (np.zeros(0), np.zeros(0))
    fits_gb = margin * capacity_gb
    out = []
    for r, i in _may_not_fit(records, rows, predictions, max(fits_gb, largest_fitted), capacity_gb,
                             (margin + keep_borderline) * capacity_gb):
        if i is not None:
            peak = peaks.item(i)
            low = calibrated_low_gb(peak, mem_sds.item(i))
        elif (p := predictions.get(r.config_hash)) is not None:
            peak = p["peak_mem_gb"]
            low = calibrated_low_gb(peak, p.get("mem_sd", 0.0))
        else:
            continue
        if memory_fit(peak, low, capacity_gb, margin, keep_borderline).kept or peak <= largest_fitted:
            continue
        p = predictions[r.config_hash]
        out.append((r.config_hash, f"calibrated prediction {peak:.3g} GB (90 % interval from {low:.3g} GB) > "
                                   f"{capacity_gb:g} GB (a-priori {r.predicted.get('peak_mem_gb', 0):.3g} GB; "
                                   f"fitted on {p['n_fit']} measured trials)"))
    return out


def _may_not_fit(records: Sequence[TrialRecord], rows: Mapping[str, int], predictions: Mapping[str, dict],
                 fits_gb: float, capacity_gb: float, borderline_gb: float) -> list[tuple[TrialRecord, Optional[int]]]:
    """The planned records, in order, with their row in the columns (None: not there), less the rows the memory
    rule keeps for sure: a column peak at most `fits_gb` or `borderline_gb` (the same products as band.memory_fit's,
    compared as it does), or an interval's lower end clearly under the capacity (numpy's exp may differ from math's
    in the last bit: a lower end within 1e-9 of the capacity is left to the rule itself). numpy on the planned rows:
    the rule is asked of every planned trial at every refit; what is left is judged trial by trial as before."""
    import numpy as np

    planned = [r for r in records if r.state is _PLANNED]
    at = np.fromiter(map(rows.get, [r.config_hash for r in planned], itertools.repeat(-1)), dtype=int,
                     count=len(planned))
    peak_all, sd_all = (predictions.arrays()[3], predictions.arrays()[4]) if isinstance(predictions, Predictions) \
        else (np.zeros(0), np.zeros(0))
    if not len(at) or not len(peak_all):
        return [(r, None if i < 0 else i) for r, i in zip(planned, at.tolist())]
    row = np.maximum(at, 0)
    peak, sd = peak_all[row], sd_all[row]
    with np.errstate(invalid="ignore", over="ignore"):
        low = peak * np.exp(-Z_90 * np.maximum(sd, 0.0))
        kept = (peak <= fits_gb) | (peak <= borderline_gb) | (low <= capacity_gb * (1.0 - 1e-9))
    left = np.flatnonzero((at < 0) | ~kept).tolist()
    where = at.tolist()
    return [(planned[j], None if where[j] < 0 else where[j]) for j in left]


# -- early stop -----------------------------------------------------------------------------------------------------
def stop_early(step_times_s: Sequence[float], tokens_per_step: int, best_tokens_per_s: Optional[float], *,
               noise_tolerance: float, min_measured_iters: int, measure_iters: int) -> Optional[StopEarly]:
    """scheduler.early_stop, with the partial measurement the ledger keeps for a stopped trial. A trial that has
    logged all its `measure_iters` is about to report its result (peak memory included): it runs to the end."""
    if len(step_times_s) >= measure_iters:
        return None
    why = scheduler.early_stop(step_times_s, tokens_per_step, best_tokens_per_s, noise_tolerance=noise_tolerance,
                               min_measured_iters=min_measured_iters)
    return None if why is None else StopEarly(why, partial_metrics(step_times_s, tokens_per_step))


def stop_steady(step_times_s: Sequence[float], tokens_per_step: int, *, noise_tolerance: float,
                min_measured_iters: int, measure_iters: int) -> Optional[StopEarly]:
    """scheduler.steady, with the measurement the ledger keeps: the trial is recorded ok with fewer measured
    iterations (its figure is known to the noise tolerance). A trial that has logged all its `measure_iters` is
    about to report its full result: it runs to the end."""
    if len(step_times_s) >= measure_iters:
        return None
    why = scheduler.steady(step_times_s, noise_tolerance=noise_tolerance, min_measured_iters=min_measured_iters)
    return None if why is None else StopEarly(why, partial_metrics(step_times_s, tokens_per_step))


def partial_metrics(step_times_s: Sequence[float], tokens_per_step: int) -> dict:
    """A running trial's measurement so far: median step time and its throughput, spread, iterations."""
    times = sorted(step_times_s)
    n = len(times)
    median_s = times[n // 2] if n % 2 else 0.5 * (times[n // 2 - 1] + times[n // 2])
    mean_s = sum(times) / n
    std_s = math.sqrt(sum((t - mean_s) ** 2 for t in times) / (n - 1)) if n > 1 else 0.0
    return {"step_time_s": median_s, "tokens_per_s": tokens_per_step / median_s, "step_time_std_s": std_s,
            "n_measured": n}


def comparable_best(best_tokens_per_s: float, best_gpus: int, trial_gpus: int, objective: Objective | str) -> float:
    """The best trial's throughput in the running trial's terms: per GPU objectives compare per GPU."""
    return Objective(objective).comparable(best_tokens_per_s, best_gpus, trial_gpus)


# -- plan.prior_from ------------------------------------------------------------------------------------------------
def setup(cfg: RootConfig) -> dict:
    """What must match for one sweep's calibration to start another's: the cluster and the software stack."""
    return {"cluster": cfg.cluster.name, "gpu": cfg.cluster.gpu, "backend": cfg.backend.name,
            "precision": cfg.backend.precision}


def prior_from(cfg: RootConfig, constants: Constants) -> Constants | Prior:
    """The calibration's starting point: `constants` (the backend's, measured network applied), or with
    plan.prior_from the calibration.json of that finished sweep, checked to be of the same setup."""
    where = cfg.plan.prior_from
    if not where:
        return constants
    path = Path(where)
    path = path if path.suffix == ".json" else path / "calibration.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError("plan.prior_from", where, f"cannot read {path} ({exc.__class__.__name__}): point it at a "
                          "finished sweep's folder, e.g. plan.prior_from=sweeps/NAME") from None
    theirs, ours = data.get("setup") or {}, setup(cfg)
    if theirs != ours:
        raise ConfigError("plan.prior_from", where, f"that sweep ran on {_setup_text(theirs)}, this one on "
                          f"{_setup_text(ours)}: a calibration carries over only on the same cluster and stack")
    if not data.get("applied"):
        raise ConfigError("plan.prior_from", where, f"its calibration was never applied ({data.get('note', '')}): "
                          "start from the a-priori constants (plan.prior_from='') or from a sweep with more "
                          "measured trials")
    return Prior.from_json(data, constants, source=str(where))


def _setup_text(s: dict) -> str:
    if not s:
        return "an unknown setup (no 'setup' in its calibration.json)"
    return f"cluster {s.get('cluster')} ({s.get('gpu')}), backend {s.get('backend')}, precision {s.get('precision')}"
