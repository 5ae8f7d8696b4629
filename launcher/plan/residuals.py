"""Structured residuals: what the (calibrated) estimator still gets wrong about a sweep, learned from its measured
trials and shared by the trials that have a layout value in common.

The estimator's errors are not independent per trial: a stack whose tensor parallelism is slower than the model
says is slower for every tp=8 layout, a pipeline schedule the model misjudges is misjudged for every pp=4 one. So
the log error of a trial's step time is modelled as

    offset + sum over the layout dimensions d of  effect[d, value of d]  + noise,

offset ~ N(0, offset_sd²) (the sweep's level: unknown until something is measured), every effect ~ N(0, value_sd²)
(one per value of each dimension that varies in the sweep), noise ~ N(0, noise_sd²) (between repeats). That is a
Bayesian linear model (equivalently a Gaussian process whose kernel counts shared layout values); its posterior,
given the measured trials' log errors, says for every trial how far off the estimate probably is and how sure that
is: a trial like the measured ones is predicted tightly, one unlike any of them keeps its a-priori spread. Pure
numpy, milliseconds for hundreds of trials.

The a-priori scales (OFFSET_SD, VALUE_SD) are the sizes of the estimator's errors measured out of sample on the
published corpus (leave one source out, physics helper: median |step error| 38 %, within-model rank correlation
0.60), see launcher.replay_bench.Spread, which reproduces those errors with the same scales.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Optional, Union

from launcher.core.layout import DIMENSIONS as LAYOUT_DIMENSIONS
from launcher.core.layout import NAMES

if TYPE_CHECKING:  # numpy is imported where it is used: planning and --help never need it (as in calibrate)
    import numpy as np

PER_SWEEP = ("gpus", "nodes", "gbs")
"""Layout dimensions a sweep usually holds fixed (and gpus/nodes follow from the others): no effect of their own."""
DIMENSIONS = tuple(n for n in NAMES if n not in PER_SWEEP)
"""The dimensions whose values get an effect each (launcher.core.layout.NAMES, in its order)."""
ORDERED = tuple(d.name for d in LAYOUT_DIMENSIONS if d.kind in ("split", "batch") and d.type is int
                and d.name in DIMENSIONS)
"""Sizes (tp, pp, dp, cp, vpp, ep, etp, mbs): besides an effect per value, one per step up between their values
(ResidualModel.steps)."""
OFFSET_SD = 0.5
"""The sweep's overall level (log): a-priori step times are off by ~40 % (median) before anything is measured."""
VALUE_SD = 0.15
"""One layout value's effect (log) that the physics leaves out."""
NOISE_SD = 0.03
"""Between repeats of one configuration (log), plus what is particular to one configuration."""
VALUE_GRID = (0.15, 0.25, 0.4, 0.6)
NOISE_GRID = (0.03, 0.06, 0.12, 0.25)
"""The scales empirical Bayes may pick (ResidualModel.fitted): up to errors of ~2x per layout value and ~30 %
noise (a shared CPU machine)."""
MIN_FIT = 4
"""Measured trials before the scales are fitted."""
ROBUST_DOF = 4.0
"""Degrees of freedom of the Student-t noise: a measurement 3 sds off counts ~40 %, 5 sds off ~17 %."""
ROBUST_ITERATIONS = 3


_DESIGNS: dict[bytes, Design] = {}
"""The trials' row ids (_row_ids, as bytes) -> their design, as distinct rows and an index (Design): a 50k-trial
design as a dense float64 matrix is ~15 MB, and a sweep's process kept dozens of them."""
_MAX_DESIGNS = 4
"""Designs kept: a sweep asks for the same trials at every decision until they change (then for the new ones)."""
_LAST_TUPLE: list[Any] = []
"""[dims, design] of the last tuple of dims asked about: building the cache key reads every trial's values, ~1 s
at 50k trials; a caller that passes the same tuple again (launcher.run.search, between two changes of its trials)
skips that. Dicts inside the tuple must not change (the search's are computed once per trial)."""


_ROWS: dict[int, tuple[Mapping[str, Any], int]] = {}
"""id(dims dict) -> (the dict, its row id): a dict inside a tuple of dims is read once (the search passes the same
dicts at every decision; the dict is held so its id is not reused)."""
_ROW_IDS: dict[tuple[str, ...], int] = {}
"""A trial's values of DIMENSIONS as text -> its row id (one per distinct text, in the order met)."""
_ROW_TEXT: list[tuple[str, ...]] = []
"""row id -> its values as text."""
_MAX_ROWS = 400_000
_GENERATION = [0]
"""Counts the times the row ids were cleared (an id kept from before stands for nothing now)."""

Dims = Union[Sequence[Mapping[str, Any]], "np.ndarray"]
"""The trials' layouts as dicts, or their row ids (row_ids) as an int64 array: a caller that keeps each trial's id
(launcher.run.search, per place of its records) hands them in, and no trial's dict is read again."""


def row_ids(dims: Sequence[Mapping[str, Any]]) -> tuple[np.ndarray, int]:
    """(each trial's row id, the ids' generation): ids mean the same rows while id_generation() stays."""
    ids = _row_ids(list(dims))
    return ids, _GENERATION[0]


def id_generation() -> int:
    return _GENERATION[0]


def _row_id(x: Mapping[str, Any]) -> int:
    text = tuple(str(x.get(d)) for d in DIMENSIONS)
    found = _ROW_IDS.get(text)
    if found is None:
        found = _ROW_IDS[text] = len(_ROW_TEXT)
        _ROW_TEXT.append(text)
    return found


def _row_ids(dims: Dims) -> np.ndarray:
    """Every trial's row id (equal ids: equal values of DIMENSIONS as text); those of a tuple's dicts kept. The
    ids stand for the text rows a design is built from: an array of ints is the design's cache key (a tuple of 50k
    tuples of text was hashed at every decision)."""
    import numpy as np

    if isinstance(dims, np.ndarray):   # ids already (Dims)
        return dims
    if len(_ROWS) > _MAX_ROWS or len(_ROW_TEXT) > _MAX_ROWS:  # new ids: the designs keyed by the old ones go too
        _ROWS.clear()
        _ROW_IDS.clear()
        _ROW_TEXT.clear()
        forget()
    if not isinstance(dims, tuple):
        return np.fromiter((_row_id(x) for x in dims), dtype=np.int64, count=len(dims))
    out = []
    for x in dims:
        hit = _ROWS.get(id(x))
        if hit is None or hit[0] is not x:
            hit = _ROWS[id(x)] = (x, _row_id(x))
        out.append(hit[1])
    return np.array(out, dtype=np.int64)


def forget() -> None:
    """Drops every cached design and row id (a finished sweep's trials: launcher.run.loop.run_sweep calls it, so
    that a process running sweeps in sequence does not keep the last one's)."""
    _ROWS.clear()
    _ROW_IDS.clear()
    _ROW_TEXT.clear()
    _DESIGNS.clear()
    _LAST_TUPLE.clear()
    _GENERATION[0] += 1


@dataclass(frozen=True, eq=False)
class Design:
    """A design as its distinct rows and each trial's row among them (rows[of_row] is the dense design): the
    posterior's sd and mean are a row's alone, so they are computed once per distinct row (a third of the rows of a
    50k-trial grid), and the dense matrix is never held."""
    rows: np.ndarray           # distinct rows x columns (float64)
    of_row: np.ndarray         # trial -> its row in rows
    names: tuple[str, ...]     # the columns' names

    def at(self, index: np.ndarray) -> np.ndarray:
        """The dense design's rows `index` (the same numbers)."""
        out: np.ndarray = self.rows[self.of_row[index]]
        return out


def _remember(dims: Dims, design: Design) -> None:
    if isinstance(dims, tuple):
        _LAST_TUPLE[:] = [dims, design]


@dataclass(frozen=True)
class ResidualModel:
    offset_sd: float = OFFSET_SD
    value_sd: float = VALUE_SD
    noise_sd: float = NOISE_SD
    miss_floor: bool = True
    """corrected: no spread below the sweep's own out-of-sample miss (miss_floor)."""
    identified_only: bool = False
    """posterior: only the dimensions with at least two of their values measured get effects (an error seen at one
    value of a dimension cannot be told apart from the sweep's level)."""
    steps: bool = False
    """design: the sizes (ORDERED) also get one column per step up between their values ('tp>=4': 1 for tp 4, 8,
    ...), so that an error measured at one size carries, in part, to the larger ones (a random walk along the
    size): with an effect per value alone, tp=2 measured 2.6x slower than predicted says nothing about tp=4, and
    the search ran it two trials later on the 8-rank CPU SLURM grid (tests/benchmarks/bench_search_gap.py). Not
    adopted (docs/search.md: 6 sweeps worse than plan order instead of 5): an ablation option, off."""
    step_scale: float = 1.0
    """steps: the prior sd of a step column, as a share of the value sd."""
    unidentified_scale: float = 1.0
    """The prior sd of the effects of a dimension with fewer than two of its values measured, as a share of the
    value sd (identified_only is 0): an error seen at one value of a dimension cannot be told apart from the
    sweep's level, and with the whole sd a measured loser's miss went in part to each of its values, so a layout
    sharing them ranked below one unlike it on no evidence. Not adopted (docs/search.md, search11: 7 sweeps
    worse than plan order instead of 5 at 0.3): an ablation option, off."""
    dimension_sds: tuple[tuple[str, float], ...] = ()
    """(dimension, prior sd of one of its values' effects) at value_sd = VALUE_SD, learned across sweeps
    (launcher.plan.prior_sds); a dimension not listed has value_sd. The empirical Bayes refit (fitted) scales them
    all by one factor, value_sd / VALUE_SD. Not adopted (docs/search.md, search12: fitted without the replayed
    table's own source group, 8 sweeps worse than plan order instead of 5): an option, empty."""

    prior_mean: tuple[tuple[str, float], ...] = ()
    """(column name, e.g. 'tp=2' or 'offset', its prior mean): the effects other sweeps of the same setup showed
    (launcher.plan.pooling.pooled_effects); a column not listed has mean 0. The prior sds stay; the within-sweep
    empirical Bayes refits the scales around these means. Not adopted (docs/search.md, search13: from a sweep's
    history, more sweeps worse than plan order than the pooled constants alone): a replay option
    (bench_search.py --history-mode), empty in the sweep loop."""

    column_sds: tuple[tuple[str, float], ...] = ()
    """(column name, its prior sd) at value_sd = VALUE_SD: the scatter of that effect between other sweeps of the
    same setup (launcher.plan.pooling.pooled_effect_priors), with prior_mean; a column not listed keeps its sd. The
    empirical Bayes refit scales the listed value columns by value_sd / VALUE_SD (the offset's stays). Not adopted
    (docs/search.md, search14): a replay option (bench_search.py --history-mode ..., scatter sd), empty in the loop."""

    def _mean(self, names: Sequence[str]) -> np.ndarray:
        import numpy as np

        means = dict(self.prior_mean)
        return np.array([means.get(n, 0.0) for n in names])

    def __post_init__(self) -> None:
        if not self.unidentified_scale > 0:   # a prior variance of 0 has no precision: identified_only drops them
            raise ValueError(f"unidentified_scale {self.unidentified_scale}: use a share > 0 (or identified_only)")

    def design(self, dims: Dims) -> tuple[np.ndarray, tuple[str, ...]]:
        """Columns and their names: the offset, then one indicator per value of every dimension that varies
        among `dims` ('tp=4'); a dense matrix, one row per trial (built for the caller, not kept)."""
        parts = self.parts(dims)
        return parts.rows[parts.of_row], parts.names

    def parts(self, dims: Dims) -> Design:
        """design(dims) as distinct rows and an index (cached: the search asks at every decision)."""
        import numpy as np

        if isinstance(dims, tuple) and _LAST_TUPLE and _LAST_TUPLE[0] is dims and not self.steps:
            last: Design = _LAST_TUPLE[1]
            return last  # the same tuple again (a sweep of 50k trials asks twice a decision)
        ids = _row_ids(dims)
        key = ids.tobytes() + (b"steps" if self.steps else b"")     # the steps ablation's design is its own
        cached = _DESIGNS.get(key)
        if cached is not None:
            if not self.steps:
                _remember(dims, cached)
            return cached
        # The distinct rows first, in the order first met (trials apart only in PER_SWEEP dimensions share one: a
        # 50k-trial grid has a third as many), then each trial's row of their design: the same columns, built from
        # fewer strings.
        seen, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
        met = np.argsort(first, kind="stable")          # distinct ids in the order first met
        place = np.empty(len(met), dtype=int)
        place[met] = np.arange(len(met))
        of_row = place[inverse.reshape(-1)]
        distinct = [_ROW_TEXT[i] for i in seen[met].tolist()]
        columns, names = [np.ones((len(distinct), 1))], ["offset"]
        text = np.array(distinct, dtype=str).reshape(len(distinct), len(DIMENSIONS))
        for j, d in enumerate(DIMENSIONS):
            # sorted as Python sorts str (by code point), one indicator column per value: column by column, not
            # a Python pass per trial and value (50k trials, ~40 values)
            values, which = np.unique(text[:, j], return_inverse=True)
            if len(values) < 2:
                continue
            columns.append((which.reshape(-1, 1) == np.arange(len(values))).astype(float))
            names.extend(f"{d}={v}" for v in values.tolist())
            if self.steps and d in ORDERED:
                _step_columns(d, values.tolist(), which, columns, names)
        design = Design(np.concatenate(columns, axis=1), of_row, tuple(names))
        while len(_DESIGNS) >= _MAX_DESIGNS:     # the oldest goes (dicts keep their insertion order)
            del _DESIGNS[next(iter(_DESIGNS))]
        _DESIGNS[key] = design
        if not self.steps:
            _remember(dims, design)
        return design

    def _prior(self, names: Sequence[str], value_sd: float, design: Optional[Design] = None,
               rows: Sequence[int] = ()) -> np.ndarray:
        """Prior variance of every column (`design` and the measured `rows`: unidentified_scale applies)."""
        import numpy as np

        scale = value_sd / VALUE_SD  # the empirical Bayes refit scales every value column's prior sd alike
        own = {d: s * scale for d, s in self.dimension_sds}
        column = dict(self.column_sds)

        def sd(name: str) -> float:
            if name == "offset":
                return column.get(name, self.offset_sd)
            if name in column:
                return column[name] * scale
            if ">=" in name:
                return self.step_scale * value_sd
            return own.get(name.split("=", 1)[0], value_sd)

        var = np.array([sd(n) ** 2 for n in names])
        if design is not None and self.unidentified_scale != 1.0:
            var[~_identified_columns(design, rows)] *= self.unidentified_scale ** 2
        return var

    def fitted(self, dims: Dims, measured: Mapping[int, float]) -> ResidualModel:
        """The scales the measured errors make likeliest (empirical Bayes: the log marginal likelihood over a grid
        of value and noise sds, never below this model's own): a sweep the estimator ranks badly, or a noisy
        machine, shows larger errors than the a-priori scales, and the search must then trust its predictions
        less. Below MIN_FIT measured trials the scales stay."""
        import numpy as np

        if len(measured) < MIN_FIT:
            return self
        design = self.parts(dims)
        if self.identified_only:
            design = _identified(design, list(measured))
        x = design.at(np.fromiter(measured.keys(), dtype=int))
        names = design.names
        r = np.fromiter(measured.values(), dtype=float) - x @ self._mean(names)   # about the prior mean
        best, best_ll = self, -math.inf
        gram, xr, rr = x.T @ x, x.T @ r, float(r @ r)
        for value_sd in sorted({self.value_sd, *(v for v in VALUE_GRID if v > self.value_sd)}):
            prior_var = self._prior(names, value_sd, design, list(measured))
            for noise_sd in sorted({self.noise_sd, *(v for v in NOISE_GRID if v > self.noise_sd)}):
                ll = log_likelihood(gram, xr, rr, len(r), prior_var, noise_sd ** 2)
                if ll > best_ll + 1e-9:
                    best, best_ll = replace(self, value_sd=value_sd, noise_sd=noise_sd), ll
        return best

    def _weights(self, dims: Dims, measured: Mapping[int, float]) -> tuple[Design, np.ndarray, np.ndarray]:
        """Posterior of the columns: (design, mean, covariance)."""
        import numpy as np

        design = self.parts(dims)
        if self.identified_only:
            design = _identified(design, list(measured))
        prior_var = self._prior(design.names, self.value_sd, design, list(measured))
        if not measured:
            return design, self._mean(design.names), np.diag(prior_var)
        xs = design.at(np.fromiter(measured.keys(), dtype=int))
        prior_mean = self._mean(design.names)
        r = np.fromiter(measured.values(), dtype=float) - xs @ prior_mean      # about the prior mean
        weight = np.ones(len(r))
        for _ in range(ROBUST_ITERATIONS):
            # Student-t noise (iteratively reweighted): a measurement far from what the others say about its
            # layout values (a noisy run, a one-off slow node) counts less, instead of condemning every trial that
            # shares a value with it.
            noise_var = self.noise_sd ** 2 / weight
            precision = (xs.T / noise_var) @ xs + np.diag(1.0 / prior_var)
            cov = np.linalg.inv(precision)
            mean_w = cov @ (xs.T @ (r / noise_var))
            fitted_var = np.einsum("ij,jk,ik->i", xs, cov, xs)
            z2 = (r - xs @ mean_w) ** 2 / (self.noise_sd ** 2 + fitted_var)
            weight = (ROBUST_DOF + 1.0) / (ROBUST_DOF + z2)
        return design, mean_w + prior_mean, cov

    def effects(self, dims: Dims, measured: Mapping[int, float]) -> dict[str, tuple[float, float, float]]:
        """Every column's posterior mean and sd and its prior sd ('tp=2' -> (mean, sd, prior sd)), given
        `measured` (as posterior): what a finished sweep learned about its layout values
        (launcher.plan.pooling.pooled_effects)."""
        import numpy as np

        design, mean_w, cov = self._weights(dims, measured)
        prior_sd = np.sqrt(self._prior(design.names, self.value_sd, design, list(measured)))
        return {n: (float(m), float(s), float(s0))
                for n, m, s, s0 in zip(design.names, mean_w, np.sqrt(np.diag(cov)), prior_sd)}

    def posterior(self, dims: Dims, measured: Mapping[int, float]) -> Residuals:
        """Posterior mean and sd of the log error of every trial in `dims`, given `measured`: index in dims -> its
        measured log error (log measured / predicted step time)."""
        import numpy as np

        design, mean_w, cov = self._weights(dims, measured)
        rows, of_row = design.rows, design.of_row   # per distinct row, then each trial's: the same numbers
        var = np.einsum("ij,jk,ik->i", rows, cov, rows)[of_row]
        return Residuals((rows @ mean_w)[of_row], np.sqrt(var + self.noise_sd ** 2), len(measured))


def _step_columns(d: str, values: list[str], which: np.ndarray, columns: list[np.ndarray], names: list[str]) -> None:
    """ResidualModel.steps: the columns 'd>=v' for every value v of the size d but its smallest (1 where the trial's
    value is at least v), after d's per-value columns. A value that is not a number (a size left unset) gets
    none. Every value of d has a per-value column, so trials that have all of those (same_columns) have these."""
    import numpy as np

    sizes = np.array([int(v) if v.lstrip("-").isdigit() else -1 for v in values])
    ladder = sorted({int(v) for v in sizes if v > 0})
    if len(ladder) < 2:
        return
    of_trial = sizes[which.reshape(-1)]
    for v in ladder[1:]:
        columns.append((of_trial >= v).astype(float).reshape(-1, 1))
        names.append(f"{d}>={v}")


def same_columns(dims: Dims, index: np.ndarray) -> bool:
    """Whether the trials dims[index] have every value that the design of `dims` has a column for: their own design
    then has the same columns, and (the posterior of a row depending only on the measured rows and the columns)
    each trial's posterior is the one it has among `dims`."""
    import numpy as np

    design = MODEL.parts(dims)     # the design does not depend on the model's scales
    used = design.rows[np.unique(design.of_row[index])]
    return bool(used.any(axis=0).all()) if len(used) else design.rows.shape[1] == 0


def _identified(design: Design, rows: Sequence[int]) -> Design:
    """The columns of the offset and of the dimensions with at least two values among the measured rows."""
    import numpy as np

    keep = np.flatnonzero(_identified_columns(design, rows)).tolist()
    return Design(design.rows[:, keep], design.of_row, tuple(design.names[j] for j in keep))


def _identified_columns(design: Design, rows: Sequence[int]) -> np.ndarray:
    """Whether each column is the offset or belongs to a dimension with at least two values among the measured
    rows (a step column 'tp>=4' counts as tp's)."""
    import numpy as np

    names = design.names
    seen = design.at(np.asarray(rows, dtype=int)).sum(axis=0) > 0 if rows else np.zeros(len(names), dtype=bool)
    varied: dict[str, int] = {}
    for name, hit in zip(names, seen.tolist()):
        if name != "offset" and "=" in name and ">=" not in name and hit:
            dim = name.split("=", 1)[0]
            varied[dim] = varied.get(dim, 0) + 1
    return np.array([n == "offset" or varied.get(n.split(">=" if ">=" in n else "=", 1)[0], 0) >= 2
                     for n in names], dtype=bool)


def log_likelihood(gram: np.ndarray, xr: np.ndarray, rr: float, n: int, prior_var: np.ndarray,
                   noise_var: float) -> float:
    """-(r' C^-1 r + log det C) / 2 for C = X diag(prior_var) X' + noise_var I, from X'X (`gram`), X'r and r'r,
    through the columns (Woodbury and the matrix determinant lemma): solving the n x n C of n measured trials cost
    ~20 ms per (value, noise) pair at 300 trials on one core, and seconds on a shared machine whose BLAS threads
    wait for each other; the columns' system is a few dozen wide whatever n is."""
    import numpy as np

    a = np.diag(1.0 / prior_var) + gram / noise_var
    b = xr / noise_var
    _, logdet_a = np.linalg.slogdet(a)
    logdet = logdet_a + float(np.sum(np.log(prior_var))) + n * math.log(noise_var)
    quad = rr / noise_var - float(b @ np.linalg.solve(a, b))
    return float(-0.5 * (quad + logdet))


@dataclass(frozen=True)
class Residuals:
    mean: np.ndarray      # log error to add to a trial's predicted log step time
    sd: np.ndarray        # its sd (a new measurement's noise included)
    n: int                # measured trials it learned from


def log_error(measured_s: float, predicted_s: float) -> float:
    return math.log(measured_s / predicted_s)


MODEL = ResidualModel()
"""The model the search uses (launcher.run.search, launcher.replay)."""


PSEUDO_CHECKS = 2.0
"""spread_factor: how many checks the belief 'the spreads are right' is worth before any trial has checked them."""
Z_CLIP = 5.0
"""spread_factor: one surprise counts as at most this many sds (a crashed-looking outlier must not blow it up)."""


def spread_factor(checks: Sequence[tuple[float, float]]) -> float:
    """How much wider the predicted spreads must be, judged by the trials measured after the search predicted them:
    checks = (log measured / predicted step time, the predicted log sd) of each. If the spreads were right the
    squared z-scores would average 1; their average (with PSEUDO_CHECKS checks of 1, clipped at Z_CLIP) is the
    variance factor. Never below 1: a sweep that went as predicted keeps the a-priori spreads."""
    z2 = [min((e / s) ** 2, Z_CLIP ** 2) for e, s in checks if s > 0]
    return math.sqrt(max(1.0, (sum(z2) + PSEUDO_CHECKS) / (len(z2) + PSEUDO_CHECKS)))


def miss_floor(checks: Sequence[tuple[float, float]]) -> float:
    """The root-mean-square log error of the trials measured after the search predicted them (0: none yet): how far
    this sweep's predictions have actually missed, whatever their sds said (the median instead let the stop rule
    skip the best trial of a CPU grid predicted 3.8x too slow: final regret 15.6 %). A floor under every spread: the
    residual model is additive in the layout values, and an interaction it cannot express (tp=1 with pp=4 is 2.7x
    faster than tp=1 with pp=2 on the playbook's 8B grid) leaves a trial predicted at ±8 % that is 2.7x off; the
    stop rule then skipped the best trial on 5 of 98 measured sweeps (final regret up to 15.6 %)."""
    errors = [e * e for e, _ in checks]
    return math.sqrt(sum(errors) / len(errors)) if errors else 0.0


def corrected(step_time_s: np.ndarray, dims: Dims, measured_s: Mapping[int, float],
              model: Optional[ResidualModel] = None,
              checks: Sequence[tuple[float, float]] = ()) -> tuple[np.ndarray, np.ndarray]:
    """Step times of every trial (as the current constants predict them) corrected by what the measured ones
    (index -> measured step time) show, and their log-space sds: the residual posterior's, widened by
    spread_factor(checks) when the trials measured after a prediction missed it by more than its sd said, and never
    below the sweep's own out-of-sample miss (miss_floor(checks), unless the model's miss_floor is off).
    The fitted constants' own uncertainty is not added: the residual model already stands for everything the
    constants get wrong, and on the few trials of a young sweep that uncertainty is the prior's, inflated by the
    misfit (launcher.plan.calibrate), which made every spread meaningless (step sds of 4-25 in log space)."""
    step, sd, _ = corrected_for_pick(step_time_s, dims, measured_s, model, checks)
    return step, sd


def corrected_for_pick(step_time_s: np.ndarray, dims: Dims, measured_s: Mapping[int, float],
                       model: Optional[ResidualModel] = None, checks: Sequence[tuple[float, float]] = ()
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """corrected's step times and sds, and the sds the pick reads (scheduler.order's pick_sd): the same without the
    miss floor. Why: after one trial that missed its prediction badly the floor sets every unrun trial's spread to
    that miss, and the pick (expected gain per GPU-hour) then reads the predicted mean alone; the stop rule and the
    checks keep the floor (it is what keeps the stop rule from skipping the best, miss_floor)."""
    import numpy as np

    errors = log_errors(step_time_s, measured_s)
    model = model or MODEL
    post = model.fitted(dims, errors).posterior(dims, errors)
    sd = post.sd * spread_factor(checks)
    floored = np.maximum(sd, miss_floor(checks)) if model.miss_floor else sd
    return step_time_s * np.exp(post.mean), floored, sd


def log_errors(step_time_s: np.ndarray, measured_s: Mapping[int, float]) -> dict[int, float]:
    return {i: log_error(s, float(step_time_s[i])) for i, s in measured_s.items() if s and step_time_s[i] > 0}
