"""The plan: grid x constraints x estimates -> ranked trials, with what was pruned and why.

Pure: a RootConfig in, a Plan out. Writing plan.csv and printing are the callers' business.
"""

from __future__ import annotations

import dataclasses
import operator
import random
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Optional

from launcher.config.schema import ClusterConfig, GridConfig, RootConfig
from launcher.core.errors import ConfigError, PlanError
from launcher.core.layout import NAMES, Layout
from launcher.core.objective import Objective
from launcher.core.states import PruneReason
from launcher.core.units import gb_text
from launcher.plan.band import Intervals, MemoryFit, SpreadFactors, memory_fit
from launcher.plan.calibrate import TrialFeatures
from launcher.plan.constants import Constants
from launcher.plan.estimator import Estimate
from launcher.plan.grid import expand, grid_factors, key_space
from launcher.plan.hardware import check_precision
from launcher.plan.inputs import stack_of, workload_for
from launcher.plan.pricing import ClassPricer
from launcher.plan.rules import Checker, Issue


@dataclass(frozen=True)
class PlannedTrial:
    layout: Layout
    config_hash: str
    estimate: Estimate
    warnings: tuple[Issue, ...] = ()
    """What the rules say it runs with, but slowly (code + message)."""
    pruned_by: Optional[PruneReason] = None
    """None for a kept trial; else why the planner will not run it ..."""
    pruned_reason: str = ""
    """... in words, with the numbers."""
    selection: str = "predicted"
    """'predicted' (in the predicted top), 'exploration' (kept to check the ranking), 'band' (predicted over
    plan.mem_safety_margin, but the interval's lower end fits: uncertain, kept) or 'borderline' (the whole interval
    over capacity, kept by plan.keep_borderline); launcher.plan.band."""
    intervals: Optional[Intervals] = None
    """The estimate's 90 % intervals (launcher.plan.band), from the estimator's out-of-sample errors."""

    @property
    def kept(self) -> bool:
        return self.pruned_by is None


MAX_PRUNED_KEPT = 1000
"""Pruned layouts kept per reason (for plan.csv, the ledger and the report); the rest are only counted, so that a
grid of millions of points is checked in constant memory."""
PROGRESS_EVERY = 4096
"""Points between two calls of make_plan's progress callback."""


@dataclass
class Plan:
    trials: list[PlannedTrial]
    """Kept trials, best predicted first."""
    pruned: list[PlannedTrial]
    """Valid layouts not run (predicted OOM, over the trial budget): up to MAX_PRUNED_KEPT per reason."""
    rejected: Counter[str] = field(default_factory=Counter[str])
    """Constraint code -> number of grid points it rejected (first failing constraint per point)."""
    rejected_examples: dict[str, str] = field(default_factory=dict)
    n_points: int = 0
    notes: list[str] = field(default_factory=list)
    """Things to fix before a real run (e.g. the backend's checkout path), found while planning a dry run."""
    job_seconds: float = 0.0
    """Predicted job duration per kept trial, summed (for GPU-hours)."""
    gpu_hours: float = 0.0
    pruned_total: Counter[str] = field(default_factory=Counter[str])
    """Reason code -> every pruned layout, including those not kept in `pruned`."""
    class_features: dict[Layout, TrialFeatures] = field(default_factory=dict, compare=False, repr=False)
    """The calibration's features of the kept trials' batch classes (launcher.plan.pricing: priced in the same pass
    as their estimates), for the sweep's search (launcher.run.search), which would price them again."""

    def pruned_counts(self) -> Counter[str]:
        kept = Counter(str(t.pruned_by) for t in self.pruned)
        return Counter(kept | self.pruned_total)  # the larger count per reason: the total when it was recorded


def trial_context(cfg: RootConfig) -> str:
    """What besides the layout identifies a trial: model shape, cluster, backend and what it measures."""
    m, b = cfg.model, cfg.backend
    # MoE models only (a dense model's context, and so its trials' hashes, stay those of earlier releases)
    experts = (f"x{m.num_experts}e{m.moe_topk}k{m.moe_ffn_hidden}f{m.shared_expert_ffn_hidden}s" if m.is_moe
               else "")
    return (f"{m.name}/{m.layers}x{m.hidden}x{m.heads}x{m.kv_heads}x{m.ffn_hidden}x{m.seq_len}x{m.vocab}{experts}"
            f"|{cfg.cluster.name}|{b.name}/{b.precision}/{b.warmup_iters}+{b.measure_iters}/{b.seed}")


def job_duration_s(cfg: RootConfig, est: Estimate) -> float:
    """Predicted wall time of one benchmark job: start-up plus the iterations it runs."""
    return job_seconds(cfg, est.step_time_s)


def job_seconds(cfg: RootConfig, step_time_s: float) -> float:
    """A benchmark job's wall time at a step time: start-up plus warm-up and measured iterations."""
    return cfg.backend.startup_s + (cfg.backend.warmup_iters + cfg.backend.measure_iters) * step_time_s


def rank_key(objective: Objective | str) -> Callable[[PlannedTrial], tuple[float, float]]:
    """Sort key of planned trials, best first: the objective, then memory headroom."""
    goal = Objective(objective)

    def key(t: PlannedTrial) -> tuple[float, float]:
        return goal.rank_key(t.estimate.tokens_per_s, t.layout.gpus, t.estimate.headroom)
    return key


def _memory_verdict(cfg: RootConfig, peak_gb: float, low_gb: float) -> MemoryFit:
    """launcher.plan.band's rule on a peak and its interval's lower end: fits under the margin, kept in the band
    while the lower end fits the device, kept as borderline within plan.keep_borderline, else pruned."""
    plan = cfg.plan
    return memory_fit(peak_gb, low_gb, cfg.cluster.gpu_mem_gb, plan.mem_safety_margin, plan.keep_borderline)


def band_key(cfg: RootConfig) -> Callable[[PlannedTrial], tuple[float, float]]:
    """Order of the band's trials, the cheapest informative first: the smallest predicted peak (the likeliest to
    fit, and the measurement that moves the memory model where it is uncertain), then the fewest GPU-seconds."""
    def key(t: PlannedTrial) -> tuple[float, float]:
        return t.estimate.peak_mem_gb, job_duration_s(cfg, t.estimate) * t.layout.gpus
    return key


def _oom_reason(cfg: RootConfig, est: Estimate, intervals: Intervals) -> str:
    cap = cfg.cluster.gpu_mem_gb
    return (f"predicted {gb_text(est.peak_mem_gb)} GB (90 % interval {gb_text(intervals.peak_mem_gb_low)}–"
            f"{gb_text(intervals.peak_mem_gb_high)}): even the interval's lower end is over the {cap:g} GB of the "
            f"device")


def _apply_budget(cfg: RootConfig, ranked: list[PlannedTrial]) -> tuple[list[PlannedTrial], list[PlannedTrial]]:
    """Keep the best predicted plus an exploration share drawn from the rest (so the ranking itself is checked)."""
    budget = cfg.plan.max_trials
    if not budget or len(ranked) <= budget:
        return ranked, []
    n_explore = int(round(budget * cfg.plan.exploration_share))
    top, rest = ranked[: budget - n_explore], ranked[budget - n_explore:]
    rng = random.Random(cfg.plan.seed)
    explore_idx = set(rng.sample(range(len(rest)), n_explore))
    explored = [_replace(t, selection="exploration" if t.selection == "predicted" else t.selection)
                for i, t in enumerate(rest) if i in explore_idx]  # a band trial stays labelled band
    dropped = [_replace(t, pruned_by=PruneReason.BUDGET, pruned_reason=f"outside plan.max_trials={budget}")
               for i, t in enumerate(rest) if i not in explore_idx]
    return sorted(top + explored, key=rank_key(cfg.plan.objective)), dropped


def _replace(t: PlannedTrial, **changes: Any) -> PlannedTrial:
    return dataclasses.replace(t, **changes)


def _nothing_left(rejected: Counter[str], examples: dict[str, str], n_points: int) -> PlanError:
    top = ", ".join(f"{code} removed {n}" for code, n in rejected.most_common(4))
    code, _ = rejected.most_common(1)[0] if rejected else ("?", 0)
    return PlanError(f"no valid configuration: all {n_points} grid points were rejected ({top}); "
                     f"e.g. {examples.get(code, '')}. Change the grid so that this constraint can hold.")


def make_plan(cfg: RootConfig, progress: Optional[Callable[[int, int], None]] = None,
              constants: Optional[Constants] = None, notes: Sequence[str] = (), *, features: bool = False) -> Plan:
    """Grid -> ranked trials. `constants`: the estimator's, when not the backend's a-priori ones (e.g. with a
    measured network: launcher.run.network.with_network). `notes`: what to fix before a real run (a dry run's
    backend problems, launcher.backends.problems_of), kept in the plan. Streams the grid: every point is checked as
    it is expanded and only counted when it is rejected or pruned (examples kept per reason); `progress(points done,
    points in all)` is called every PROGRESS_EVERY points. A grid over plan.max_grid_points is refused before
    anything is expanded. `features`: the kept trials' batch classes' calibration features too, priced in the same
    pass (Plan.class_features: what the sweep's search needs; a dry run does not)."""
    total = check_grid_cap(cfg.grid, cfg.cluster, cfg.plan.max_grid_points)
    check_precision(cfg.cluster, cfg.backend.precision)
    context = trial_context(cfg)
    rejected: Counter[str] = Counter()
    examples: dict[str, str] = {}
    fitting: list[PlannedTrial] = []
    pruned = _PrunedSink()
    smallest: Optional[tuple[Layout, float]] = None  # the predicted OOM that needs least memory (for the error
    #                                                    message): its layout and peak
    n_points = 0
    factors = SpreadFactors.of(stack_of(cfg.backend))
    b = cfg.backend  # each batch class priced once (launcher.plan.batch_class), kept ones with their features
    pricer = ClassPricer(cfg.model, cfg.cluster, b.precision, b.flash_attention, b.name, constants)
    checker = Checker(cfg.model, cfg.cluster, cfg.backend.name, allow_tp_across_nodes=cfg.plan.allow_tp_across_nodes,
                      key_space=key_space(cfg.grid, cfg.cluster))
    for layout in expand(cfg.grid, cfg.cluster):
        n_points += 1
        if progress is not None and n_points % PROGRESS_EVERY == 0:
            progress(n_points, total)
        verdict = checker.check(layout)
        if not verdict.ok:
            first = verdict.first_reason  # the rejection first in the rules table (not every merged reason)
            assert first is not None
            rejected[first.code] += 1
            examples.setdefault(first.code, first.message)
            continue
        key, price = pricer.price(layout, workload_for(cfg.backend, layout))
        peak_gb = price.peak_gb  # the memory rule reads the peak alone: known before the step time
        fit = _memory_verdict(cfg, peak_gb, factors.mem_low_gb(peak_gb))
        if fit.kept:  # the search predicts these again: their class's features come with the estimate
            est = pricer.estimate_of(layout, key, price, features=features)
            intervals = factors.intervals(est.peak_mem_gb, est.step_time_s)
            fitting.append(PlannedTrial(layout, layout.config_hash(context), est, verdict.warnings, intervals=intervals,
                                        selection="predicted" if fit is MemoryFit.FITS else fit.value))
            continue
        if smallest is None or peak_gb < smallest[1]:
            smallest = (layout, peak_gb)
        if pruned.full(PruneReason.PREDICTED_OOM):  # only counted: no step time, hash, reason or trial (~9k at 161k
            pruned.count(PruneReason.PREDICTED_OOM)  # points)
            continue
        est = pricer.estimate_of(layout, key, price)
        intervals = factors.intervals(est.peak_mem_gb, est.step_time_s)
        pruned.add(PlannedTrial(layout, layout.config_hash(context), est, verdict.warnings, PruneReason.PREDICTED_OOM,
                                _oom_reason(cfg, est, intervals), intervals=intervals))
    if progress is not None:
        progress(n_points, total)
    if n_points and not fitting and not pruned.counts:
        raise _nothing_left(rejected, examples, n_points)
    if not fitting:
        assert smallest is not None  # something was pruned (the check above), so one needed least memory
        least, least_gb = smallest
        raise PlanError(f"every valid configuration ({sum(pruned.counts.values())}) is predicted to run out of "
                        f"memory; the smallest needs {gb_text(least_gb)} GB ({least.label()}) of "
                        f"{cfg.cluster.gpu_mem_gb:g} GB, even at its interval's lower end "
                        f"({gb_text(factors.mem_low_gb(least_gb))} GB). Add pp/tp, recompute, ZeRO, or raise "
                        "plan.keep_borderline to run it anyway.")
    kept, over_budget = _apply_budget(cfg, sorted(fitting, key=rank_key(cfg.plan.objective)))
    # The band's trials after the others, cheapest informative first (the scheduler still orders the sweep's runs)
    kept = ([t for t in kept if t.selection != MemoryFit.BAND.value]
            + sorted((t for t in kept if t.selection == MemoryFit.BAND.value), key=band_key(cfg)))
    for t in over_budget:
        pruned.add(t)
    job_s = sum(job_duration_s(cfg, t.estimate) for t in kept)
    gpu_hours = sum(job_duration_s(cfg, t.estimate) * t.layout.gpus for t in kept) / 3600.0
    return Plan(trials=kept, pruned=pruned.kept, rejected=rejected, rejected_examples=examples,
                n_points=n_points, notes=list(notes), job_seconds=job_s, gpu_hours=gpu_hours,
                pruned_total=pruned.counts, class_features=pricer.features)


class _PrunedSink:
    """Pruned trials: all counted per reason, the first MAX_PRUNED_KEPT per reason kept."""

    def __init__(self) -> None:
        self.kept: list[PlannedTrial] = []
        self.counts: Counter[str] = Counter()

    def add(self, trial: PlannedTrial) -> None:
        code = str(trial.pruned_by)
        self.counts[code] += 1
        if self.counts[code] <= MAX_PRUNED_KEPT:
            self.kept.append(trial)

    def full(self, reason: PruneReason) -> bool:
        """Whether a trial pruned for `reason` would only be counted (MAX_PRUNED_KEPT kept already)."""
        return self.counts[str(reason)] >= MAX_PRUNED_KEPT

    def count(self, reason: PruneReason) -> None:
        """One more trial pruned for `reason`, not kept."""
        self.counts[str(reason)] += 1


def check_grid_cap(grid: GridConfig, cluster: ClusterConfig, cap: int) -> int:
    """The grid's size (product of its dimensions plus the includes); over `cap`, a ConfigError that shows the
    product and how to narrow it. Nothing is expanded."""
    factors, total = grid_factors(grid, cluster)
    if total > cap:
        product = " x ".join(f"{name} {n}" for name, n in factors if n > 1) or "1"
        if grid.include:
            product += f" + {len(grid.include)} included"
        raise ConfigError("plan.max_grid_points", cap, f"the grid has {product} = {total:,} points, over the cap: "
                          "narrow it (fewer values per dimension, grid.zip for dimensions that vary together, "
                          "grid.include for a few extra points) or raise plan.max_grid_points")
    return total


PLAN_COLUMNS = ("rank", "config_hash", "selection", *NAMES, "peak_mem_gb", "peak_mem_gb_low", "peak_mem_gb_high",
                "headroom", "step_time_s", "step_time_s_low", "step_time_s_high", "tokens_per_s", "tflops_per_gpu",
                "model_tflops_per_gpu", "mfu", "pruned_by", "pruned_reason", "warnings")


def plan_rows(plan: Plan) -> list[dict[str, Any]]:
    """plan.csv rows: kept trials ranked first, then pruned ones (rank empty)."""
    return list(each_plan_row(plan))


def each_plan_row(plan: Plan) -> Iterator[dict[str, Any]]:
    """plan_rows one at a time (a 50k-trial plan's rows at once cost ~100 MB)."""
    for values in each_plan_row_values(plan):
        yield dict(zip(PLAN_COLUMNS, values))


def each_plan_row_values(plan: Plan) -> Iterator[tuple[Any, ...]]:
    """each_plan_row's rows as tuples in PLAN_COLUMNS order (what plan.csv's writer takes: no dict per row)."""
    for rank, t in enumerate(plan.trials, 1):
        yield _row(t, rank)
    for t in plan.pruned:
        yield _row(t, None)


_LAYOUT_VALUES = operator.attrgetter(*NAMES)


def _row(t: PlannedTrial, rank: Optional[int]) -> tuple[Any, ...]:
    e, i = t.estimate, t.intervals
    return (rank if rank is not None else "", t.config_hash, t.selection if t.kept else "pruned",
            *_LAYOUT_VALUES(t.layout),
            round(e.peak_mem_gb, 3), round(i.peak_mem_gb_low, 3) if i else "",
            round(i.peak_mem_gb_high, 3) if i else "", round(e.headroom, 4),
            round(e.step_time_s, 5), round(i.step_time_s_low, 5) if i else "",
            round(i.step_time_s_high, 5) if i else "", round(e.tokens_per_s, 1),
            round(e.tflops_per_gpu, 2), round(e.model_tflops_per_gpu, 2),
            round(e.mfu, 4), str(t.pruned_by or ""), t.pruned_reason,
            "; ".join(w.message for w in t.warnings))
