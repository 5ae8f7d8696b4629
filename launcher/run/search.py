"""The search inside the sweep loop: ledger records -> calibration and scheduler inputs -> decisions.

The building blocks are launcher.plan.calibrate (fit the estimator's constants to the measured trials) and
launcher.run.scheduler (order, early stop, stop rule); launcher.replay drives the same functions against measured
tables. This module turns the ledger's records into their inputs and their answers into what the loop records:

- `Search.refit`: the calibration is a pure function of the measured trials (ok and stopped_early) and of what an
  applied calibration predicted for them before they ran (TrialRecord.calibrated), so a resumed sweep recomputes
  it from the ledger; a refit happens only when that set changes.
- `Search.predictions`: every planned trial under the current calibration (a-priori constants until it applies).
- `Search.order`: the planned trials, the one to run next first (launcher.run.scheduler.order).
- `Search.converged`: what the stop rule takes out of the queue (launcher.run.memory_prune.calibrated_ooms: what
  the calibrated memory model does).

What it reads of the records is launcher.run.search_records, its features table launcher.run.feature_tables, its
predictions launcher.run.predictions; early stop of a running trial is launcher.run.early_stop, plan.prior_from
launcher.run.prior.

Trials the plan did not estimate (a hand-made or first-release ledger: no predicted step time) keep the ledger
order and are never re-predicted: there is nothing to compare their prediction with.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Optional, TypeVar, cast

from launcher.config.schema import RootConfig
from launcher.core.layout import Layout
from launcher.core.objective import Objective
from launcher.core.record import TrialRecord
from launcher.core.states import MEASURED, TrialState
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
    trial_features,
    uncalibrated,
)
from launcher.plan.constants import Constants
from launcher.plan.inputs import constants_of, workload_for
from launcher.plan.residuals import corrected_for_pick, id_generation, row_ids, same_columns
from launcher.run import scheduler
from launcher.run.feature_tables import ClassTable, streamed
from launcher.run.predictions import Predictions, joined, pick_spreads, same_inputs
from launcher.run.prior import setup
from launcher.run.scheduler import POLICY, Outcome, Planned, Policy
from launcher.run.search_records import LayoutDims, RecordFlags, outcomes
from launcher.run.view import Snapshot

if TYPE_CHECKING:  # numpy is imported where it is used (as in launcher.plan.calibrate)
    import numpy as np

FEATURE_CHUNK = 1024
"""Trials whose features are computed, then copied into the search's table, at a time."""
T = TypeVar("T")


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
                else (cached[0], joined(cached[1], self.calibration.predict(fresh, spread)))
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
        """Give the features table spare rows now (feature_tables.SPARE_SHARE), so that the classes of the trials
        the calibration brings back are written into them, not into a copy of the table made in that poll (the
        sweep loop asks after its first progress line)."""
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
        table = streamed((FeatureTable([self._class_features(k) for k in keys[start:start + FEATURE_CHUNK]])
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
        self.calibration = calibrate(self.observations(records), self.prior, min_trials=self.policy.min_fit_trials,
                                     probe=self.policy.fit_probe)
        return True

    def calibration_json(self) -> dict:
        """What calibration.json holds: the calibration and the setup it belongs to (plan.prior_from checks it)."""
        return {**self.calibration.to_json(), "setup": setup(self.cfg)}

    # -- predictions --------------------------------------------------------------------------------------------
    def predictions(self, records: Sequence[TrialRecord]) -> Predictions:
        """config hash -> the current calibration's prediction (predictions.PREDICTION_KEYS + n_fit) of every
        estimated trial."""
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
        if cached is not None and same_inputs(cached[0], depends):
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
