"""The plan: grid x constraints x estimates -> ranked trials, with what was pruned and why.

Pure: a RootConfig in, a Plan out. Writing plan.csv and printing are the callers' business.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Optional

from launcher.errors import PlanError
from launcher.layout import NAMES, Layout
from launcher.plan.estimator import Estimate, estimate
from launcher.plan.grid import expand
from launcher.plan.rules import Checker, Issue
from launcher.schema import RootConfig
from launcher.states import PruneReason


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
    """'predicted' (in the predicted top), 'exploration' (kept to check the ranking) or 'borderline'."""

    @property
    def kept(self) -> bool:
        return self.pruned_by is None


@dataclass
class Plan:
    trials: list[PlannedTrial]
    """Kept trials, best predicted first."""
    pruned: list[PlannedTrial]
    """Valid layouts not run (predicted OOM, over the trial budget)."""
    rejected: Counter = field(default_factory=Counter)
    """Constraint code -> number of grid points it rejected (first failing constraint per point)."""
    rejected_examples: dict[str, str] = field(default_factory=dict)
    n_points: int = 0
    notes: list[str] = field(default_factory=list)
    """Things to fix before a real run (e.g. the backend's checkout path), found while planning a dry run."""
    job_seconds: float = 0.0
    """Predicted job duration per kept trial, summed (for GPU-hours)."""
    gpu_hours: float = 0.0

    def pruned_counts(self) -> Counter:
        return Counter(str(t.pruned_by) for t in self.pruned)


def trial_context(cfg: RootConfig) -> str:
    """What besides the layout identifies a trial: model shape, cluster, backend and what it measures."""
    m, b = cfg.model, cfg.backend
    return (f"{m.name}/{m.layers}x{m.hidden}x{m.heads}x{m.kv_heads}x{m.ffn_hidden}x{m.seq_len}x{m.vocab}"
            f"|{cfg.cluster.name}|{b.name}/{b.precision}/{b.warmup_iters}+{b.measure_iters}/{b.seed}")


def job_duration_s(cfg: RootConfig, est: Estimate) -> float:
    """Predicted wall time of one benchmark job: start-up plus the iterations it runs."""
    iters = cfg.backend.warmup_iters + cfg.backend.measure_iters
    return cfg.backend.startup_s + iters * est.step_time_s


def rank_key(objective: str):
    """Sort key of planned trials, best first: the objective, then memory headroom."""
    from analysis.select import objective_value

    def key(t: PlannedTrial) -> tuple[float, float]:
        return (-objective_value(t.estimate.tokens_per_s, t.layout.gpus, objective), -t.estimate.headroom)
    return key


def _memory_verdict(cfg: RootConfig, est: Estimate) -> tuple[bool, bool]:
    """(fits, borderline): fits under the safety margin, or within the borderline allowance above it."""
    share = 1.0 - est.headroom
    margin = cfg.plan.mem_safety_margin
    if share <= margin:
        return True, False
    return False, share <= margin + cfg.plan.keep_borderline


def _apply_budget(cfg: RootConfig, ranked: list[PlannedTrial]) -> tuple[list[PlannedTrial], list[PlannedTrial]]:
    """Keep the best predicted plus an exploration share drawn from the rest (so the ranking itself is checked)."""
    budget = cfg.plan.max_trials
    if not budget or len(ranked) <= budget:
        return ranked, []
    n_explore = int(round(budget * cfg.plan.exploration_share))
    top, rest = ranked[: budget - n_explore], ranked[budget - n_explore:]
    rng = random.Random(cfg.plan.seed)
    explore_idx = set(rng.sample(range(len(rest)), n_explore))
    explored = [_replace(t, selection="exploration") for i, t in enumerate(rest) if i in explore_idx]
    dropped = [_replace(t, pruned_by=PruneReason.BUDGET, pruned_reason=f"outside plan.max_trials={budget}")
               for i, t in enumerate(rest) if i not in explore_idx]
    return sorted(top + explored, key=rank_key(cfg.plan.objective)), dropped


def _replace(t: PlannedTrial, **changes) -> PlannedTrial:
    from dataclasses import replace

    return replace(t, **changes)


def _nothing_left(rejected: Counter, examples: dict[str, str], n_points: int) -> PlanError:
    top = ", ".join(f"{code} removed {n}" for code, n in rejected.most_common(4))
    code, _ = rejected.most_common(1)[0] if rejected else ("?", 0)
    return PlanError(f"no valid configuration: all {n_points} grid points were rejected ({top}); "
                     f"e.g. {examples.get(code, '')}. Change the grid so that this constraint can hold.")


def backend_problems(cfg: RootConfig) -> list[str]:
    """What the configured program still needs before it can really run (checkout, data, tokenizer files). A real
    run stops on the first; a dry run plans anyway and lists them as notes."""
    from launcher.backends import get_backend

    return [str(p) for p in get_backend(cfg.backend.name).problems(cfg.backend, cfg.model)]


def make_plan(cfg: RootConfig) -> Plan:
    context = trial_context(cfg)
    rejected: Counter = Counter()
    examples: dict[str, str] = {}
    fitting: list[PlannedTrial] = []
    pruned: list[PlannedTrial] = []
    n_points = 0
    problems = backend_problems(cfg)
    if problems and not cfg.dry_run:
        from launcher.backends import get_backend

        raise get_backend(cfg.backend.name).problems(cfg.backend, cfg.model)[0]
    checker = Checker(cfg.model, cfg.cluster, cfg.backend.name, allow_tp_across_nodes=cfg.plan.allow_tp_across_nodes)
    for layout in expand(cfg.grid, cfg.cluster):
        n_points += 1
        verdict = checker.check(layout)
        if not verdict.ok:
            first = verdict.reasons[0]
            rejected[first.code] += 1
            examples.setdefault(first.code, first.message)
            continue
        est = estimate(cfg.model, cfg.cluster, layout, precision=cfg.backend.precision,
                       flash_attention=cfg.backend.flash_attention, backend=cfg.backend.name)
        trial = PlannedTrial(layout, layout.config_hash(context), est, verdict.warnings)
        fits, borderline = _memory_verdict(cfg, est)
        if fits:
            fitting.append(trial)
        elif borderline:
            fitting.append(_replace(trial, selection="borderline"))
        else:
            pruned.append(_replace(trial, pruned_by=PruneReason.PREDICTED_OOM, pruned_reason=(
                f"predicted {est.peak_mem_gb:.1f} GB > {cfg.plan.mem_safety_margin:.0%} of "
                f"{cfg.cluster.gpu_mem_gb:g} GB")))
    if n_points and not fitting and not pruned:
        raise _nothing_left(rejected, examples, n_points)
    if not fitting:
        best = min(pruned, key=lambda t: t.estimate.peak_mem_gb)
        raise PlanError(f"every valid configuration ({len(pruned)}) is predicted to run out of memory; the smallest "
                        f"needs {best.estimate.peak_mem_gb:.1f} GB ({best.layout.short()}) of "
                        f"{cfg.cluster.gpu_mem_gb:g} GB. Add pp/tp, recompute, ZeRO, or raise plan.mem_safety_margin.")
    kept, over_budget = _apply_budget(cfg, sorted(fitting, key=rank_key(cfg.plan.objective)))
    job_s = sum(job_duration_s(cfg, t.estimate) for t in kept)
    gpu_hours = sum(job_duration_s(cfg, t.estimate) * t.layout.gpus for t in kept) / 3600.0
    notes = problems if cfg.dry_run else []
    return Plan(trials=kept, pruned=pruned + over_budget, rejected=rejected, rejected_examples=examples,
                n_points=n_points, notes=notes, job_seconds=job_s, gpu_hours=gpu_hours)


PLAN_COLUMNS = ("rank", "config_hash", "selection", *NAMES, "peak_mem_gb", "headroom", "step_time_s", "tokens_per_s",
                "tflops_per_gpu", "model_tflops_per_gpu", "mfu", "pruned_by", "pruned_reason", "warnings")


def plan_rows(plan: Plan) -> list[dict]:
    """plan.csv rows: kept trials ranked first, then pruned ones (rank empty)."""
    rows = []
    for rank, t in enumerate(plan.trials, 1):
        rows.append(_row(t, rank))
    for t in plan.pruned:
        rows.append(_row(t, None))
    return rows


def _row(t: PlannedTrial, rank: Optional[int]) -> dict:
    e = t.estimate
    return {"rank": rank if rank is not None else "", "config_hash": t.config_hash,
            "selection": t.selection if t.kept else "pruned", **t.layout.to_dict(),
            "peak_mem_gb": round(e.peak_mem_gb, 3), "headroom": round(e.headroom, 4),
            "step_time_s": round(e.step_time_s, 5), "tokens_per_s": round(e.tokens_per_s, 1),
            "tflops_per_gpu": round(e.tflops_per_gpu, 2), "model_tflops_per_gpu": round(e.model_tflops_per_gpu, 2),
            "mfu": round(e.mfu, 4), "pruned_by": str(t.pruned_by or ""), "pruned_reason": t.pruned_reason, "warnings": "; ".join(w.message for w in t.warnings)}
