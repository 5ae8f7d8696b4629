"""Fit the estimator's global constants to published runs, and judge them out of sample (leave one source out).

The same procedure serves both (no hand-tuning to a table):
- `prepare(rows)`: each run's constant-free amounts (launcher.plan.calibrate.trial_features), evaluated once;
- `fit(prepared)`: maximum a posteriori, robust least squares (scipy least_squares, soft_l1) of the calibration
  parameters (launcher.plan.calibrate.PARAMETERS: log multipliers of each stack's a-priori constants, with their
  priors) on the log errors of the step time, then of the memory parameters on the peaks. Each source weighs the
  same in total (a row counts 1/sqrt(rows of its source) x sqrt(mean rows per source)), so that a large campaign
  does not decide the constants for the others;
- `loso(prepared)`: for every source, fit on the other sources only and predict that one.
`python -m launcher.plan.fit --write` fits on the whole corpus and rewrites launcher/plan/fitted.py (the a-priori
constants launcher.plan.constants reads) and launcher/plan/spread.json (the out-of-sample error spread,
launcher.plan.spread).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

import numpy as np

from launcher.plan import calibrate as cal
from launcher.plan.constants import Constants, prior_for
from launcher.plan.corpus import CorpusRow
from launcher.plan.estimator import ESTIMATOR_PRECISIONS
from launcher.plan.stack import stack_name

MEM_MARGIN = 0.9
"""plan.mem_safety_margin's default: a layout predicted above this share of the GPU's memory is pruned."""
STEP_SCALE = 0.08   # log-error scale of a step time (calibrate.MODEL_ERROR_SD)
MEM_SCALE = 0.05    # of a peak (calibrate.MEMORY_ERROR_SD)


@dataclass(frozen=True)
class Prepared:
    row: CorpusRow
    features: cal.TrialFeatures
    prior: Constants


def features_for(row: CorpusRow) -> cal.TrialFeatures:
    """A published run's constant-free amounts."""
    precision = row.precision if row.precision in ESTIMATOR_PRECISIONS else "bf16"
    return cal.trial_features(row.model, row.cluster, row.layout, precision, row.flash, workload=row.workload,
                              backend=row.backend)


def prior_of(row: CorpusRow) -> Constants:
    """The a-priori (unfitted) constants of a run's stack: the starting point of every fit, so that no source's
    data reaches another's prediction through the shipped values."""
    return prior_for(stack_name(row.workload, row.backend))


def prepare(rows: Sequence[CorpusRow], features: Optional[Callable] = None) -> list[Prepared]:
    """Features of every row under the current estimator (`features(row)` -> TrialFeatures to override)."""
    out = []
    for row in rows:
        f = features(row) if features else features_for(row)
        out.append(Prepared(row, f, prior_of(row)))
    return out


class Tables:
    """The prepared rows as one FeatureTable per prior (stack), to predict all of them for any theta at once."""

    def __init__(self, prepared: Sequence[Prepared]) -> None:
        self.prepared = list(prepared)
        groups: dict[Constants, list[int]] = defaultdict(list)
        for i, p in enumerate(self.prepared):
            groups[p.prior].append(i)
        self.groups = [(prior, np.array(idx), cal.FeatureTable([self.prepared[i].features for i in idx]))
                       for prior, idx in groups.items()]
        self.n = len(self.prepared)

    def predict(self, theta: np.ndarray, params: Sequence[cal.Parameter], mem_theta: Optional[np.ndarray] = None
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(step time s, device peak GB, peak comparable with each row's measurement GB)."""
        step, peak, comparable = np.empty(self.n), np.empty(self.n), np.empty(self.n)
        kinds = np.array([p.row.mem_kind for p in self.prepared])
        for prior, idx, table in self.groups:
            c = cal.apply_parameters(prior, params, theta)
            if mem_theta is not None:
                c = cal.apply_parameters(c, cal.MEMORY_PARAMETERS, mem_theta)
            step[idx] = table.step_time_s(c)
            device, measured_like = table.peak_mem_kinds_gb(c, kinds[idx])
            peak[idx], comparable[idx] = device, measured_like
        return step, peak, comparable


def _weights(rows: Sequence[CorpusRow]) -> np.ndarray:
    counts: dict[str, int] = defaultdict(int)
    for r in rows:
        counts[r.source] += 1
    mean = len(rows) / max(1, len(counts))
    return np.array([math.sqrt(mean / counts[r.source]) for r in rows])


@dataclass(frozen=True)
class Fit:
    theta: np.ndarray
    mem_theta: np.ndarray
    params: tuple = field(default=cal.STEP_PARAMETERS)

    def multipliers(self) -> dict[str, float]:
        out = {p.name: float(math.exp(t)) for p, t in zip(self.params, self.theta)}
        out.update({p.name: float(math.exp(t)) for p, t in zip(cal.MEMORY_PARAMETERS, self.mem_theta)})
        return out


def fit(prepared: Sequence[Prepared]) -> Fit:
    """MAP fit of the step-time parameters on the timed rows, then of the memory parameters on the rows with a
    measured peak (see the module docstring)."""
    from scipy.optimize import least_squares   # lazy: planning never needs scipy

    params = cal.STEP_PARAMETERS
    sd = np.array([p.prior_sd for p in params])
    timed = [p for p in prepared if p.row.state == "ok" and p.row.step_time_s]
    theta = np.zeros(len(params))
    if timed:
        tables = Tables(timed)
        measured = np.log([p.row.step_time_s for p in timed])
        w = _weights([p.row for p in timed])

        def residuals(t: np.ndarray) -> np.ndarray:
            step = tables.predict(t, params)[0]
            return np.concatenate([w * (np.log(step) - measured) / STEP_SCALE, t / sd])

        theta = least_squares(residuals, theta, loss="soft_l1", f_scale=2.0, x_scale=sd).x
    msd = np.array([p.prior_sd for p in cal.MEMORY_PARAMETERS])
    mem_theta = np.zeros(len(msd))
    with_mem = [p for p in prepared if p.row.state == "ok" and p.row.peak_mem_gb]
    if with_mem:
        mtables = Tables(with_mem)
        mmeasured = np.log([p.row.peak_mem_gb for p in with_mem])
        mw = _weights([p.row for p in with_mem])

        def mem_residuals(t: np.ndarray) -> np.ndarray:
            comparable = mtables.predict(theta, params, t)[2]
            return np.concatenate([mw * (np.log(comparable) - mmeasured) / MEM_SCALE, t / msd])

        mem_theta = least_squares(mem_residuals, mem_theta, loss="soft_l1", f_scale=2.0, x_scale=msd).x
    return Fit(theta, mem_theta, params)


# ------------------------------------------------------------------------------------------------ judging

@dataclass(frozen=True)
class Predicted:
    row: CorpusRow
    step_time_s: float
    peak_mem_gb: float          # the whole device (what the OOM decision compares with the capacity)
    comparable_mem_gb: float    # what the row's measurement counts (launcher.plan.corpus.MEM_KINDS)


def predict(prepared: Sequence[Prepared], result: Fit) -> list[Predicted]:
    if not prepared:
        return []
    step, peak, comparable = Tables(prepared).predict(result.theta, result.params, result.mem_theta)
    return [Predicted(p.row, float(s), float(m), float(c)) for p, s, m, c in zip(prepared, step, peak, comparable)]


def loso(prepared: Sequence[Prepared]) -> list[Predicted]:
    """Every row predicted by constants fitted without its source."""
    out = []
    for source in sorted({p.row.source for p in prepared}):
        train = [p for p in prepared if p.row.source != source]
        test = [p for p in prepared if p.row.source == source]
        out += predict(test, fit(train))
    return out


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rank correlation with average ranks for ties."""
    def ranks(v: Sequence[float]) -> np.ndarray:
        v = np.asarray(v, dtype=float)
        order = np.argsort(v, kind="mergesort")
        r = np.empty(len(v))
        r[order] = np.arange(len(v), dtype=float)
        for value in np.unique(v):
            tied = v == value
            r[tied] = r[tied].mean()
        return r
    rx, ry = ranks(x), ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return float("nan")
    return float(np.corrcoef(rx, ry)[0, 1])


@dataclass(frozen=True)
class Scores:
    n_timed: int
    step_median: float
    step_p90: float
    spearman: float        # group-size-weighted mean over same-model groups of >= 3 timed rows
    n_groups: int
    n_mem: int
    mem_median: float
    n_ok: int
    n_oom: int
    missed_oom: int
    false_oom: int

    @property
    def false_oom_share(self) -> float:
        return self.false_oom / self.n_ok if self.n_ok else float("nan")


def scores(predicted: Sequence[Predicted], margin: float = MEM_MARGIN) -> Scores:
    timed = [p for p in predicted if p.row.state == "ok" and p.row.step_time_s]
    step_err = np.array([abs(p.step_time_s / p.row.step_time_s - 1) for p in timed])
    groups: dict[tuple, list[Predicted]] = defaultdict(list)
    for p in timed:
        groups[p.row.group].append(p)
    rhos, sizes = [], []
    for members in groups.values():
        if len(members) < 3:
            continue
        per_gpu = [(m.row.layout.gbs * m.row.model.seq_len / m.row.layout.gpus) for m in members]
        rho = spearman([t / m.step_time_s for t, m in zip(per_gpu, members)],
                       [t / m.row.step_time_s for t, m in zip(per_gpu, members)])
        if not math.isnan(rho):
            rhos.append(rho)
            sizes.append(len(members))
    mem = [p for p in predicted if p.row.state == "ok" and p.row.peak_mem_gb]
    mem_err = np.array([abs(p.comparable_mem_gb / p.row.peak_mem_gb - 1) for p in mem])
    ok = [p for p in predicted if p.row.state == "ok"]
    oom = [p for p in predicted if p.row.state == "oom"]
    limit = lambda p: margin * p.row.cluster.gpu_mem_gb   # noqa: E731
    nan = float("nan")
    return Scores(len(timed), float(np.median(step_err)) if len(step_err) else nan,
                  float(np.quantile(step_err, 0.9)) if len(step_err) else nan,
                  float(np.average(rhos, weights=sizes)) if rhos else nan, len(rhos), len(mem),
                  float(np.median(mem_err)) if len(mem_err) else nan, len(ok), len(oom),
                  sum(p.peak_mem_gb <= limit(p) for p in oom), sum(p.peak_mem_gb > limit(p) for p in ok))


def constants_of(row: CorpusRow, result: Fit) -> Constants:
    """The constants a fit gives a run's stack (its prior moved by the fitted multipliers)."""
    c = cal.apply_parameters(prior_of(row), result.params, result.theta)
    return cal.apply_parameters(c, cal.MEMORY_PARAMETERS, result.mem_theta)
