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
import pprint
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Optional

import numpy as np

from launcher.core import strict_json
from launcher.core.layout import Layout
from launcher.plan import calibrate as cal
from launcher.plan import mem_quantity as mq
from launcher.plan.constants import Constants, prior_for
from launcher.plan.corpus import DEFAULT_DIR, REPLAY_DIR, CorpusRow, read_corpus
from launcher.plan.estimator import ESTIMATOR_PRECISIONS
from launcher.plan.spread import SpreadSummary, interval
from launcher.plan.stack import stack_name
from launcher.plan.workload import Workload

MEM_MARGIN = 0.9
"""plan.mem_safety_margin's default: a layout predicted above this share of the GPU's memory is pruned."""
STEP_SCALE = 0.08   # log-error scale of a step time (calibrate.MODEL_ERROR_SD)
STEP_LOSS = "soft_l1"
CORPUS_PARAMETERS = tuple(cal.Parameter(p.name, p.fields, p.prior_sd, 0.0 if p.name == "fixed" else p.offset, p.memory)
                          for p in cal.STEP_PARAMETERS) + cal.CORPUS_ONLY_PARAMETERS
"""The sweep calibration's step-time parameters plus those only a corpus of many GPUs, stacks and scales can tell
apart (calibrate.CORPUS_ONLY_PARAMETERS: generations, attention kernels, per-step overhead, overlap); the stacks'
counted per-micro-batch bytes are scaled, never shifted (offset 0), so that Megatron's fused accumulation stays at
0 B."""
MEM_SCALE = 0.05    # of a peak (calibrate.MEMORY_ERROR_SD)


@dataclass(frozen=True)
class Prepared:
    row: CorpusRow
    features: cal.TrialFeatures
    prior: Constants
    variant_features: tuple[cal.TrialFeatures, ...] = ()
    """Features of the row's other plausible settings (CorpusRow.memory_variants): only their memory is used."""


def features_for(row: CorpusRow, layout: Optional[Layout] = None, workload: Optional[Workload] = None,
                 flash: Optional[bool] = None) -> cal.TrialFeatures:
    """A published run's constant-free amounts (at one of its memory variants when given)."""
    precision = row.precision if row.precision in ESTIMATOR_PRECISIONS else "bf16"
    return cal.trial_features(row.model, row.cluster, layout or row.layout, precision,
                              row.flash if flash is None else flash, workload=workload or row.workload,
                              backend=row.backend)


def prior_of(row: CorpusRow) -> Constants:
    """The a-priori (unfitted) constants of a run's stack: the starting point of every fit, so that no source's
    data reaches another's prediction through the shipped values."""
    return prior_for(stack_name(row.workload, row.backend))


def prepare(rows: Sequence[CorpusRow], features: Optional[Callable[[CorpusRow], cal.TrialFeatures]] = None
            ) -> list[Prepared]:
    """Features of every row under the current estimator (`features(row)` -> TrialFeatures to override)."""
    out = []
    for row in rows:
        f = features(row) if features else features_for(row)
        variants = tuple(features_for(row, *v) for v in row.memory_variants) if not features else ()
        out.append(Prepared(row, f, prior_of(row), variants))
    return out


class Tables:
    """The prepared rows as one FeatureTable per prior (stack), to predict all of them for any theta at once;
    the memory variants in a second set of tables."""

    def __init__(self, prepared: Sequence[Prepared]) -> None:
        self.prepared = list(prepared)
        self.n = len(self.prepared)
        self.groups = self._group([(i, p.features, p.prior) for i, p in enumerate(self.prepared)])
        self.variant_groups = self._group([(i, f, p.prior) for i, p in enumerate(self.prepared)
                                           for f in p.variant_features])
        order = ("allocated", "reserved", "device")
        bounds = [mq.QUANTITIES[p.row.mem_quantity or "device"] for p in self.prepared]
        self.low_index = np.array([order.index(b[0]) for b in bounds], dtype=int)
        self.high_index = np.array([order.index(b[1]) for b in bounds], dtype=int)
        self.measured = np.array([p.row.peak_mem_gb or np.nan for p in self.prepared])

    @staticmethod
    def _group(items: list[tuple[int, cal.TrialFeatures, Constants]]
               ) -> list[tuple[Constants, np.ndarray, cal.FeatureTable]]:
        groups: dict[Constants, list[tuple[int, cal.TrialFeatures]]] = defaultdict(list)
        for i, f, prior in items:
            groups[prior].append((i, f))
        return [(prior, np.array([i for i, _ in members]), cal.FeatureTable([f for _, f in members]))
                for prior, members in groups.items()]

    def predict(self, theta: np.ndarray, params: Sequence[cal.Parameter], mem_theta: Optional[np.ndarray] = None
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(step time s, device peak GB, lowest and highest device peak over the memory variants GB, the peak
        comparable with each row's measurement GB: the point of the predicted interval of its quantity, over the
        variants, nearest to the measurement; the interval's middle for rows without a figure)."""
        step = np.empty(self.n)
        q = {k: np.empty(self.n) for k in ("allocated", "reserved", "device")}
        lo = {k: np.empty(self.n) for k in q}
        hi = {k: np.empty(self.n) for k in q}
        for prior, idx, table in self.groups:
            c = self._constants(prior, params, theta, mem_theta)
            step[idx] = table.step_time_s(c)
            for k, v in zip(q, table.peak_mem_quantities_gb(c)):
                q[k][idx] = v
                lo[k][idx] = v
                hi[k][idx] = v
        for prior, idx, table in self.variant_groups:
            c = self._constants(prior, params, theta, mem_theta)
            for k, v in zip(q, table.peak_mem_quantities_gb(c)):
                np.minimum.at(lo[k], idx, v)
                np.maximum.at(hi[k], idx, v)
        low = np.choose(self.low_index, [lo["allocated"], lo["reserved"], lo["device"]])
        high = np.choose(self.high_index, [hi["allocated"], hi["reserved"], hi["device"]])
        m = self.measured
        comparable = np.where(np.isnan(m), 0.5 * (low + high), np.clip(np.nan_to_num(m), low, high))
        return step, q["device"], lo["device"], hi["device"], comparable

    @staticmethod
    def _constants(prior: Constants, params: Sequence[cal.Parameter], theta: np.ndarray,
                   mem_theta: Optional[np.ndarray]) -> Constants:
        c = cal.apply_parameters(prior, params, theta)
        if mem_theta is not None:
            c = cal.apply_parameters(c, cal.MEMORY_PARAMETERS, mem_theta)
        return c


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
    params: tuple[cal.Parameter, ...] = field(default=CORPUS_PARAMETERS)

    def multipliers(self) -> dict[str, float]:
        out = {p.name: float(math.exp(t)) for p, t in zip(self.params, self.theta)}
        out.update({p.name: float(math.exp(t)) for p, t in zip(cal.MEMORY_PARAMETERS, self.mem_theta)})
        return out


FIT_MEMORY = False
"""Memory constants stay a priori: half the corpus's peaks do not say whether they count allocated or reserved
memory (launcher.plan.mem_quantity), and fitting the allocator's overhead shares to them made the out-of-sample
peaks worse (leave-one-source-out median 16 % against 12 % a priori, 27 false OOMs against 8)."""


def fit(prepared: Sequence[Prepared], fit_memory: bool = FIT_MEMORY) -> Fit:
    """MAP fit of the step-time parameters on the timed rows, then (fit_memory) of the memory parameters on the rows
    with a measured peak (see the module docstring)."""
    from scipy.optimize import least_squares  # lazy: planning never needs scipy

    params = CORPUS_PARAMETERS
    sd = np.array([p.prior_sd for p in params])
    timed = [p for p in prepared if p.row.state == "ok" and p.row.step_time_s and p.row.fitted]
    theta = np.zeros(len(params))
    if timed:
        tables = Tables(timed)
        measured = np.log([p.row.step_time_s for p in timed if p.row.step_time_s])  # every row passes (narrows)
        w = _weights([p.row for p in timed])

        def residuals(t: np.ndarray) -> np.ndarray:
            step = tables.predict(t, params)[0]
            return np.concatenate([w * (np.log(step) - measured) / STEP_SCALE, t / sd])

        theta = least_squares(residuals, theta, loss=STEP_LOSS, f_scale=2.0, x_scale=sd).x
    msd = np.array([p.prior_sd for p in cal.MEMORY_PARAMETERS])
    mem_theta = np.zeros(len(msd))
    with_mem = [p for p in prepared if p.row.state == "ok" and p.row.peak_mem_gb and p.row.fitted] if fit_memory else []
    if with_mem:
        mtables = Tables(with_mem)
        mmeasured = np.log([p.row.peak_mem_gb for p in with_mem if p.row.peak_mem_gb])  # every row passes (narrows)
        mw = _weights([p.row for p in with_mem])

        def mem_residuals(t: np.ndarray) -> np.ndarray:
            comparable = mtables.predict(theta, params, t)[4]
            return np.concatenate([mw * (np.log(comparable) - mmeasured) / MEM_SCALE, t / msd])

        mem_theta = least_squares(mem_residuals, mem_theta, loss="soft_l1", f_scale=2.0, x_scale=msd).x
    return Fit(theta, mem_theta, params)


# ------------------------------------------------------------------------------------------------ judging

@dataclass(frozen=True)
class Predicted:
    row: CorpusRow
    step_time_s: float
    peak_mem_gb: float          # the whole device (what the OOM decision compares with the capacity)
    comparable_mem_gb: float    # what the row's measurement counts (launcher.plan.mem_quantity), nearest to it
    peak_low_gb: float = 0.0    # the device peak over the settings the source leaves open (CorpusRow.memory_variants)
    peak_high_gb: float = 0.0
    band_low_gb: Optional[float] = None    # the 90 % interval of the device peak (launcher.plan.spread) around the
    band_high_gb: Optional[float] = None   # lowest / highest variant: what the planner's OOM rule reads (with_band)


def predict(prepared: Sequence[Prepared], result: Fit) -> list[Predicted]:
    if not prepared:
        return []
    step, peak, low, high, comparable = Tables(prepared).predict(result.theta, result.params, result.mem_theta)
    return [Predicted(p.row, float(s), float(m), float(c), float(lo), float(hi))
            for p, s, m, c, lo, hi in zip(prepared, step, peak, comparable, low, high)]


def loso(prepared: Sequence[Prepared]) -> list[Predicted]:
    """Every row predicted by constants fitted without its source, with its memory interval built from the other
    sources' out-of-sample residuals (loso_bands)."""
    out = []
    for source in sorted({p.row.source for p in prepared}):
        train = [p for p in prepared if p.row.source != source]
        test = [p for p in prepared if p.row.source == source]
        out += predict(test, fit(train))
    return loso_bands(out)


def with_band(predicted: Sequence[Predicted], spread_data: dict[str, Any]) -> list[Predicted]:
    """The rows with the planner's 90 % interval of the device peak (launcher.plan.spread.interval of the row's
    stack over `spread_data`): from the lowest variant's lower bound to the highest variant's upper bound."""
    out = []
    for p in predicted:
        stack = stack_name(p.row.workload, p.row.backend)
        low = interval("peak_mem", p.peak_low_gb, stack, data=spread_data)
        high = interval("peak_mem", p.peak_high_gb, stack, data=spread_data)
        out.append(replace(p, band_low_gb=low[0] if low else None, band_high_gb=high[1] if high else None))
    return out


def loso_bands(predicted: Sequence[Predicted]) -> list[Predicted]:
    """Leave-one-source-out intervals: each source's rows get the interval spread() of the other sources' rows
    (their own out-of-sample residuals), so that neither a row's constants nor its interval saw its source."""
    out = []
    for source in sorted({p.row.source for p in predicted}):
        others = spread([p for p in predicted if p.row.source != source])
        out += with_band([p for p in predicted if p.row.source == source], others)
    return out


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rank correlation with average ranks for ties."""
    def ranks(values: Sequence[float]) -> np.ndarray:
        v = np.asarray(values, dtype=float)
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
    n_crash_or_oom: int = 0    # rows whose source does not tell an OOM from another crash (corpus.STATES)
    crash_or_oom_fit: int = 0  # of them, predicted to fit: missed OOMs or crashes
    band_missed_oom: Optional[int] = None
    """The planner's rule (prune only when the interval's lower end is over the device, launcher.plan.planner):
    real OOMs whose interval's upper end is under the device's memory (fit with confidence: nothing flags them).
    None without intervals."""
    band_false_oom: Optional[int] = None
    """Runs that ran but whose interval's lower end is over the device's memory (the planner would prune them)."""
    band_crash_or_oom_fit: Optional[int] = None
    """crash_or_oom rows whose interval's upper end is under the device's memory."""

    @property
    def false_oom_share(self) -> float:
        return self.false_oom / self.n_ok if self.n_ok else float("nan")


def scores(predicted: Sequence[Predicted], margin: float = MEM_MARGIN) -> Scores:
    # The `if p.row.step_time_s` / `if p.row.peak_mem_gb` in the comprehensions below keep every row (timed and mem
    # are chosen by them): they narrow the Optional measurements for the type checker.
    timed = [p for p in predicted if p.row.state == "ok" and p.row.step_time_s]
    step_err = np.array([abs(p.step_time_s / p.row.step_time_s - 1) for p in timed if p.row.step_time_s])
    groups: dict[tuple[str, str, str, int, str], list[Predicted]] = defaultdict(list)
    for p in timed:
        groups[p.row.group].append(p)
    rhos, sizes = [], []
    for members in groups.values():
        if len(members) < 3:
            continue
        per_gpu = [(m.row.layout.gbs * m.row.model.seq_len / m.row.layout.gpus) for m in members]
        rho = spearman([t / m.step_time_s for t, m in zip(per_gpu, members)],
                       [t / m.row.step_time_s for t, m in zip(per_gpu, members) if m.row.step_time_s])
        if not math.isnan(rho):
            rhos.append(rho)
            sizes.append(len(members))
    mem = [p for p in predicted if p.row.state == "ok" and p.row.peak_mem_gb]
    mem_err = np.array([abs(p.comparable_mem_gb / p.row.peak_mem_gb - 1) for p in mem if p.row.peak_mem_gb])
    ok = [p for p in predicted if p.row.state == "ok"]
    oom = [p for p in predicted if p.row.state == "oom"]
    crash = [p for p in predicted if p.row.state == "crash_or_oom"]
    limit: Callable[[Predicted], float] = lambda p: margin * p.row.cluster.gpu_mem_gb   # noqa: E731
    nan = float("nan")
    banded = bool(predicted) and all(p.band_low_gb is not None and p.band_high_gb is not None for p in predicted)

    def under(rows: list[Predicted]) -> Optional[int]:   # interval wholly under the device: predicted to fit
        return sum((p.band_high_gb or 0.0) < p.row.cluster.gpu_mem_gb for p in rows) if banded else None

    return Scores(len(timed), float(np.median(step_err)) if len(step_err) else nan,
                  float(np.quantile(step_err, 0.9)) if len(step_err) else nan,
                  float(np.average(rhos, weights=sizes)) if rhos else nan, len(rhos), len(mem),
                  float(np.median(mem_err)) if len(mem_err) else nan, len(ok), len(oom),
                  sum(p.peak_high_gb <= limit(p) for p in oom), sum(p.peak_low_gb > limit(p) for p in ok),
                  len(crash), sum(p.peak_high_gb <= limit(p) for p in crash),
                  under(oom), sum((p.band_low_gb or 0.0) > p.row.cluster.gpu_mem_gb for p in ok) if banded else None,
                  under(crash))


def constants_of(row: CorpusRow, result: Fit) -> Constants:
    """The constants a fit gives a run's stack (its prior moved by the fitted multipliers)."""
    c = cal.apply_parameters(prior_of(row), result.params, result.theta)
    return cal.apply_parameters(c, cal.MEMORY_PARAMETERS, result.mem_theta)


# ------------------------------------------------------------------------------------------------ shipping

SPREAD_QUANTILES = (0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95)


def log_ratios(predicted: Sequence[Predicted]) -> dict[str, list[tuple[str, float]]]:
    """(stack, log(measured / predicted)) of the step time (rows that ran and report one) and of the peak memory
    (as the row measured it)."""
    out: dict[str, list[tuple[str, float]]] = {"step_time": [], "peak_mem": []}
    for p in predicted:
        stack = stack_name(p.row.workload, p.row.backend)
        if p.row.state == "ok" and p.row.step_time_s:
            out["step_time"].append((stack, math.log(p.row.step_time_s / p.step_time_s)))
        if p.row.state == "ok" and p.row.peak_mem_gb:
            out["peak_mem"].append((stack, math.log(p.row.peak_mem_gb / p.comparable_mem_gb)))
    return out


def spread(predicted: Sequence[Predicted]) -> dict[str, Any]:
    """Quantiles of log(measured / predicted), overall and per stack (launcher.plan.spread documents the format)."""
    def summary(values: list[float]) -> SpreadSummary:
        v = np.asarray(values)
        return {"n": len(v), "quantiles": {str(q): float(np.quantile(v, q)) for q in SPREAD_QUANTILES},
                "sd_robust": float(1.4826 * np.median(np.abs(v - np.median(v))))}
    out = {}
    for quantity, pairs in log_ratios(predicted).items():
        if not pairs:
            continue
        per_stack: dict[str, list[float]] = defaultdict(list)
        for stack, value in pairs:
            per_stack[stack].append(value)
        out[quantity] = {"all": summary([v for _, v in pairs]),
                         "per_stack": {s: summary(v) for s, v in sorted(per_stack.items())}}
    return out


def field_factors(result: Fit) -> dict[str, tuple[float, float]]:
    """Constants field -> (offset, multiplier) of a fit (what launcher/plan/fitted.py stores)."""
    out = {}
    for params, theta in ((result.params, result.theta), (cal.MEMORY_PARAMETERS, result.mem_theta)):
        for p, t in zip(params, theta):
            if abs(float(t)) < 1e-12:
                continue
            for name in p.fields:
                out[name] = (p.offset, float(math.exp(float(t))))
    return out


def write_fitted(path: Path, result: Fit, rows: Sequence[CorpusRow], loso_scores: Scores, in_scores: Scores) -> None:
    sources = sorted({r.source for r in rows})
    factors = field_factors(result)
    lines = ['"""Generated by `python -m launcher.plan.fit --write` (the corpus fit): do not edit by hand.',
             "",
             "FIELD_FACTORS: Constants field -> (offset, multiplier); the shipped value is",
             "(prior + offset) x multiplier - offset (launcher.plan.constants.fitted). FIT: what it was fitted on and",
             "how well it predicts.",
             '"""', "",
             "from typing import Any", "",
             "FIELD_FACTORS: dict[str, tuple[float, float]] = {"]
    lines += [f"    {name!r}: ({offset!r}, {factor:.6g})," for name, (offset, factor) in sorted(factors.items())]
    lines += ["}", "FIT: dict[str, Any] = {"]
    fit_info = {"sources": sources, "rows": len(rows), "multipliers": {k: round(v, 4) for k, v in
                                                                       result.multipliers().items()},
                "loso": {k: (round(v, 4) if isinstance(v, float) else v) for k, v in loso_scores.__dict__.items()},
                "in_sample": {k: (round(v, 4) if isinstance(v, float) else v) for k, v in in_scores.__dict__.items()}}
    for key, value in fit_info.items():   # wrapped at the project's line length (pprint)
        text = pprint.pformat(value, width=110 - len(repr(key)), compact=True, sort_dicts=False)
        lines.append(f"    {key!r}: " + text.replace("\n", "\n" + " " * (len(repr(key)) + 6)) + ",")
    lines.append("}")
    path.write_text("\n".join(lines) + "\n")


def main(argv: Optional[list[str]] = None) -> int:
    import argparse


    here = Path(__file__).resolve().parent
    ap = argparse.ArgumentParser(description="Fit the estimator's a-priori constants on the published corpus.")
    ap.add_argument("--data", type=Path, default=DEFAULT_DIR)
    ap.add_argument("--no-replay", action="store_true", help="leave out the published replay tables")
    ap.add_argument("--write", action="store_true",
                    help="rewrite launcher/plan/fitted.py and launcher/plan/spread.json")
    args = ap.parse_args(argv)
    rows, skipped = read_corpus(args.data, replay=None if args.no_replay else REPLAY_DIR)
    if not rows:
        print(f"no published rows under {args.data}")
        return 2
    prepared = prepare(rows)
    result = fit(prepared)
    held_out = loso(prepared)
    loso_scores, in_scores = scores(held_out), scores(predict(prepared, result))
    print(f"{len(rows)} rows, {len({r.source for r in rows})} sources ({len(skipped)} left out)")
    print("multipliers:", {k: round(v, 3) for k, v in result.multipliers().items()})
    print("LOSO:", loso_scores)
    if args.write:
        write_fitted(here / "fitted.py", result, rows, loso_scores, in_scores)
        data = {"generated_by": "python -m launcher.plan.fit --write", "definition": "log(measured / predicted), "
                "each row predicted by constants fitted without its source (leave one source out)",
                "sources": sorted({r.source for r in rows}), **spread(held_out)}
        (here / "spread.json").write_text(strict_json.dumps(data, indent=1) + "\n")
        print(f"wrote {here / 'fitted.py'} and {here / 'spread.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
