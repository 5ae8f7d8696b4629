"""The search benchmark's machinery (tests/benchmarks/bench_search.py): every strategy of launcher.replay on a corpus
of measured sweeps and on perturbed truths, grouped by source, with the baselines in the same run.

- `corpus(folder)`: the measured replay tables, each sweep with its source group and the cost model its backend
  would run under (warm-up and measured iterations of conf/backend/*.yaml, start-up launcher.replay's).
- `perturbed(...)`: sweeps whose "measurement" is the estimator itself with constants drawn from a spread (the
  calibration parameters' log multipliers), structured error (a bias per value of every layout dimension) and noise
  between repeats: truths the estimator can be wrong about in the ways it is wrong on real data. Generated from a
  fixed seed, never written to disk, reported apart from the measured tables.
- `evaluate(case)`: one sweep under every strategy: the share of exhaustive GPU-hours until a configuration within
  2 % of the best was measured, the GPU-hours spent and the final regret; random order as its exact expectation.
- `history_work(results)`: each sweep of a source group with >= 3 sweeps of one setup, started from the others'
  final calibrations (plan.prior_from=sweeps/), never from itself or a repeat of its grid (`repeats`).
- `summarise(results)`: per group and in total. A sweep where every strategy ties (within UNINFORMATIVE of each
  other) says nothing about the search: it is flagged and left out of the headline.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import random
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import TracebackType
from typing import Any, Optional, TypeVar

import numpy as np

from launcher.core.states import TrialState
from launcher.measured import MeasuredSweep, read_table
from launcher.plan import calibrate as cal
from launcher.plan import prior_sds
from launcher.plan.calibrate import Calibration, FeatureTable, Observation, Prior, trial_features, uncalibrated
from launcher.plan.pooling import pooled, pooled_effect_priors, pooled_effects
from launcher.plan.prior_sds import PriorSds, ResidualSet
from launcher.plan.residuals import DIMENSIONS, MODEL, ResidualModel
from launcher.replay import (
    WITHIN,
    Costs,
    Step,
    SweepResult,
    _features,
    _flash,
    _key,
    _Replay,
    prior_for,
    random_expected_gpu_hours,
    replay_sweep,
)
from launcher.run import scheduler
from launcher.run.scheduler import POLICY, Outcome, Policy

BASELINES = ("oracle", "exhaustive", "predicted", "calibrated", "random")
"""Strategies run next to the adaptive search on every sweep ('exhaustive' = plan order, 'predicted' = plan order
with early stop and stop rule, 'calibrated' = calibrated order without early stop or stop rule)."""
STRATEGIES = ("adaptive",) + BASELINES
UNINFORMATIVE = 0.02
"""A sweep is uninformative when every strategy's share is within this (absolute) or 10 % (relative) of the
others: the table cannot tell a good search from a bad one."""
MEGATRON_ITERS = (5, 10)     # conf/backend/megatron_lm.yaml, megatron_deepspeed.yaml: warm-up, measured
TORCH_ITERS = (3, 5)         # BackendConfig defaults (the embedded workload on GPUs)
CPU_ITERS = (2, 4)           # conf/backend/torch.yaml (the CPU stand-in)
CPU_STARTUP_S = 10.0         # conf/backend/torch.yaml: torch import + gloo init of a few CPU ranks
GPU_ITERATION_CV = 0.01
"""Iteration-to-iteration noise of a GPU step time: 1.4 % over 5 consecutive iterations of a Megatron run
(epfLLM/Megatron-LLM issue 11), 0.05 % between two vTrain runs of one layout (pub_vtrain.csv)."""
CPU_ITERATION_CV = 0.05
"""Of a CPU stand-in step on this shared 2-core machine (tests/data/replay/cpu-repeats.md when measured)."""


@dataclass(frozen=True)
class Case:
    """One sweep to replay, with its group and cost model."""

    sweep: MeasuredSweep
    group: str
    costs: Costs
    prior: Optional[Prior] = None
    draw: int = -1            # perturbed truths: the draw number (-1: measured)
    residual_model: Optional[ResidualModel] = None
    """The search's residual model (None: launcher.plan.residuals.MODEL); with_prior_sds sets it."""
    pick_only: bool = False
    """residual_model for the pick alone; the stop rule and the checks keep launcher.plan.residuals.MODEL."""


@dataclass
class Result:
    case: Case
    exhaustive_gpu_hours: float
    to_within: dict = field(default_factory=dict)    # strategy -> GPU-hours to within 2 % (None: never)
    spent: dict = field(default_factory=dict)        # strategy -> GPU-hours spent
    regret: dict = field(default_factory=dict)       # strategy -> final regret
    trials: dict = field(default_factory=dict)       # strategy -> trials run
    calibration: Optional[Calibration] = None        # the adaptive search's final one (what plan.prior_from reads)
    effects: dict = field(default_factory=dict)      # its residual model's final effects (ResidualModel.effects)
    effects_a_priori: dict = field(default_factory=dict)   # the same against the a-priori constants
    gaps: dict = field(default_factory=dict)         # the adaptive search's GPU-hours to within 2 %, by kind (gaps)
    positions: dict = field(default_factory=dict)
    """strategy -> how many trials it ran until (and with) its first within-2 % one (1: the first trial; None: never);
    'plan order' and 'hindsight order' -> the rank of the first within-2 % configuration in those static orders."""

    def share(self, strategy: str) -> float:
        """GPU-hours to within 2 % as a share of exhaustive search's; a search that never got there counts as
        having spent everything (share 1)."""
        x = self.to_within.get(strategy)
        return 1.0 if x is None else x / self.exhaustive_gpu_hours

    @property
    def informative(self) -> bool:
        # the hindsight bounds (HINDSIGHT) never decide it: the headline's sweeps are the same with them or without
        shares = [self.share(s) for s in self.to_within if s in STRATEGIES]
        lo, hi = min(shares), max(shares)
        return hi - lo > UNINFORMATIVE and hi > 1.1 * lo

    @property
    def name(self) -> str:
        return self.case.sweep.name + (f"#{self.case.draw}" if self.case.draw >= 0 else "")


# ------------------------------------------------------------------------------------------------ execution

T = TypeVar("T")
R = TypeVar("R")


def default_jobs() -> int:
    """Worker processes by default: one per core (every sweep's replay is independent of the others)."""
    return max(1, os.cpu_count() or 1)


class Workers:
    """`jobs` worker processes for the whole benchmark (one pool for all its sections: the workers start and
    import once), or none (jobs <= 1: everything in this process). `map` returns the results in the order of the
    items whatever the number of workers (a replay depends on nothing but its arguments), and hands the costliest
    items out first so that no worker is left with a large sweep at the end while the others wait."""

    def __init__(self, jobs: int) -> None:
        self.jobs = jobs
        self._pool: Any = None
        if jobs > 1:
            import scipy.optimize  # noqa: F401  # the fit's import, once here rather than once in every worker

            self._pool = multiprocessing.get_context("fork").Pool(jobs)

    def map(self, fn: Callable[[T], R], items: Sequence[T], cost: Optional[Callable[[T], float]] = None) -> list[R]:
        if self._pool is None:
            return [fn(item) for item in items]
        order = sorted(range(len(items)), key=lambda i: -cost(items[i])) if cost else list(range(len(items)))
        out: list[Any] = [None] * len(items)
        for i, result in zip(order, self._pool.imap(fn, [items[i] for i in order], chunksize=1)):
            out[i] = result
        return out

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
            self._pool.join()
            self._pool = None

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, kind: Optional[type[BaseException]], error: Optional[BaseException],
                 trace: Optional[TracebackType]) -> None:
        if error is not None and self._pool is not None:
            self._pool.terminate()
        self.close()


def replay_cost(case: Case) -> float:
    """A case's relative cost for Workers.map: the refits grow with the rows measured and the rows predicted."""
    return float(len(case.sweep.rows)) ** 2


# ------------------------------------------------------------------------------------------------ the corpus

def group_of(path: Path, sweep: MeasuredSweep) -> str:
    name = path.name
    if name.startswith("pub_ultrascale"):
        return "published/ultrascale"
    if name.startswith("pub_vtrain"):
        return "published/vtrain-multi" if "-multi-" in sweep.name else "published/vtrain-single"
    if name.startswith("bloom"):
        return "published/bloom"
    if name.startswith("h100"):
        return "own-gpu"
    if sweep.rows[0].request.cluster.name.startswith("local-cpu") or name.startswith(("cpu_", "tiny_cpu")):
        return "cpu-slurm" if "slurm" in sweep.name or "slurm" in name else "cpu-local"
    return "other"


def costs_for(sweep: MeasuredSweep, cpu_cv: float = CPU_ITERATION_CV) -> Costs:
    """The cost model a sweep of this backend would run under (conf/backend/*.yaml)."""
    row = sweep.rows[0]
    if row.request.cluster.name.startswith("local-cpu"):
        return Costs(CPU_STARTUP_S, *CPU_ITERS, iteration_cv=cpu_cv)
    warmup, measure = MEGATRON_ITERS if row.request.backend.startswith("megatron") else TORCH_ITERS
    return Costs(None, warmup, measure, iteration_cv=GPU_ITERATION_CV)


def corpus(paths: Iterable[Path], cpu_cv: float = CPU_ITERATION_CV) -> list[Case]:
    cases = []
    for path in paths:
        for sweep in read_table(path):
            if not any(r.state is TrialState.OK for r in sweep.rows):
                continue
            cases.append(Case(sweep, group_of(Path(path), sweep), costs_for(sweep, cpu_cv)))
    return cases


# ------------------------------------------------------------------------------------------------ prior sds

def residual_sets(cases: Sequence[Case]) -> list[ResidualSet]:
    """Each measured sweep's a-priori log errors (log measured / a-priori step time of its ok rows, the constants
    its replay starts from), for launcher.plan.prior_sds."""
    out = []
    for case in cases:
        ok = [r for r in case.sweep.rows if r.state is TrialState.OK and r.step_time_s]
        if not ok:
            continue
        prior = case.prior or prior_for(case.sweep)
        predicted = uncalibrated(prior).predict(FeatureTable([_features(r) for r in ok])).step_time_s
        out.append(ResidualSet(case.group, case.sweep.name, tuple(r.request.layout.to_dict() for r in ok),
                               tuple(math.log((r.step_time_s or 0.0) / float(p)) for r, p in zip(ok, predicted))))
    return out


PRIOR_SDS_MODES = ("flat", "logo", "all", "logo-shape", "all-shape", "logo-pick", "all-pick")
"""with_prior_sds: the residual model's a-priori sds as they are (flat: launcher.plan.residuals.MODEL), fitted
without the case's own source group (logo), or fitted on every group (all: in sample for measured tables);
'-shape': the fitted per-dimension sds rescaled to the flat value sd on average, the flat offset sd
(PriorSds.model's shape_only); '-pick': for the pick alone (the stop rule keeps the flat sds)."""


def with_prior_sds(cases: Sequence[Case], mode: str, fits: Optional[dict[str, PriorSds]] = None,
                   base: Optional[ResidualModel] = None, path: Optional[Path] = None) -> list[Case]:
    """The cases with their residual model's prior sds per dimension (launcher.plan.prior_sds): `fits` maps a group
    to the sds fitted without it, and "all" to those fitted on every group (default: the shipped table). A group the
    table has no leave-out fit for (a table added since) gets the fit on every group, which never saw it either.
    path: another table than the shipped one (launcher.fit_prior_sds --write --out)."""
    if mode not in PRIOR_SDS_MODES:
        raise ValueError(f"prior sds mode {mode!r}: use one of {', '.join(PRIOR_SDS_MODES)}")
    if mode == "flat":
        return [replace(c, residual_model=base) for c in cases]
    if fits is None:
        path = path or prior_sds.PRIOR_SDS_FILE
        data = prior_sds.load(path)
        if not data:
            raise ValueError(f"{path} is missing: run {prior_sds.GENERATED_BY}")
        fits = {g: PriorSds.from_json(f) for g, f in data["leave_one_group_out"].items()}
        fits["all"] = PriorSds.from_json(data["all"])
    everything = fits["all"]
    out = []
    for c in cases:
        fit = fits.get(c.group, everything) if mode.startswith("logo") else everything
        out.append(replace(c, residual_model=fit.model(base, shape_only=mode.endswith("-shape")),
                           pick_only=mode.endswith("-pick")))
    return out


# ------------------------------------------------------------------------------------------------ perturbed truths

@dataclass(frozen=True)
class Spread:
    """How far a perturbed truth is from the a-priori estimator (all log-space sds)."""

    parameter_scale: float = 1.0
    """x each calibration Parameter.prior_sd: the sd of the drawn log multiplier of that constant group (1: the
    calibration's own prior is right about how wrong the constants may be)."""
    dimension_sd: float = 0.15
    """Bias per value of every layout dimension (what the physics leaves out, which no constant can absorb).
    With parameter_scale 1 this gives the a-priori errors the leave-one-source-out benchmark measured on the
    published corpus (physics helper, /work/coord/physics-status.md: median |step error| 38.3 %, same-model Spearman
    0.60): median 39 %, within-sweep Spearman 0.60 on the benchmark's grids (bench_search.py prints them)."""
    repeat_sd: float = 0.02
    """Noise between repeats of one configuration on GPUs (each truth row is one measurement)."""
    cpu_repeat_sd: float = 0.05
    """The same for the CPU stand-in on this shared machine."""
    memory_sd: float = 0.05
    """Per-configuration error of the peak memory (decides the OOMs)."""


_DIMENSIONS = DIMENSIONS     # those with a bias per value: the ones a sweep varies (launcher.plan.residuals)
_VALUES = tuple(str(2 ** k) for k in range(11)) + ("0", "3", "none", "selective", "full", "True", "False")


def _value(v) -> str:
    return str(v)


def perturb(sweep: MeasuredSweep, rng: np.random.Generator, spread: Spread = Spread(),
            prior: Optional[Prior] = None, noise_rng: Optional[np.random.Generator] = None) -> MeasuredSweep:
    """One perturbed truth on the grid of `sweep` (its layouts; its measurements are not used). `rng` draws the
    constants and the per-value biases (in a fixed order: two grids given equal generators share them), `noise_rng`
    (default `rng`) the per-configuration noise."""
    noise_rng = noise_rng or rng
    rows = list(sweep.rows)
    prior = prior or prior_for(sweep)
    table = FeatureTable([trial_features(r.request.model, r.request.cluster, r.request.layout, r.request.precision,
                                         _flash(r), backend=r.request.backend) for r in rows])
    theta = rng.normal(0.0, [spread.parameter_scale * p.prior_sd for p in cal.PARAMETERS])
    constants = cal.apply_parameters(prior.constants, cal.PARAMETERS, theta)
    step = table.step_time_s(constants)
    peak = table.peak_mem_gb(constants)
    # One bias per (dimension, value), drawn in a fixed order of the values 1..1024 and the named ones, so that two
    # grids given equal generators share the biases of the values they have in common.
    biases = {(d, v): b for d in _DIMENSIONS for v, b in zip(_VALUES, rng.normal(0.0, spread.dimension_sd,
                                                                                 len(_VALUES)))}
    log_error = np.array([sum(biases.get((d, _value(r.request.layout.to_dict().get(d))), 0.0) for d in _DIMENSIONS)
                          for r in rows])
    noise = spread.cpu_repeat_sd if rows[0].request.cluster.name.startswith("local-cpu") else spread.repeat_sd
    step = step * np.exp(log_error + noise_rng.normal(0.0, noise, len(rows)))
    peak = peak * np.exp(noise_rng.normal(0.0, spread.memory_sd, len(rows)))
    out = []
    for r, s, m in zip(rows, step, peak):
        fits = m <= r.request.cluster.gpu_mem_gb
        out.append(replace(r, state=TrialState.OK if fits else TrialState.OOM, step_time_s=float(s) if fits else None,
                           peak_mem_gb=float(m) if fits else None))
    if not any(r.state is TrialState.OK for r in out):      # nothing fits: keep the fastest-fitting half as a grid
        order = np.argsort(peak)
        keep = set(order[: max(1, len(out) // 2)].tolist())
        out = [replace(r, state=TrialState.OK, step_time_s=float(step[i]), peak_mem_gb=float(peak[i]))
               if i in keep else r for i, r in enumerate(out)]
    return MeasuredSweep(sweep.name, tuple(out), sweep.source_id)


def perturbed(cases: Sequence[Case], draws: int, seed: int = 16, spread: Spread = Spread()) -> list[Case]:
    """`draws` perturbed truths on the grid of each case, from one seed (the same cases and seed: the same truths)."""
    rng = np.random.default_rng(seed)
    out = []
    for case in cases:
        for k in range(draws):
            out.append(Case(perturb(case.sweep, rng, spread, case.prior), "perturbed/" + case.group.split("/")[-1],
                            case.costs, case.prior, k, case.residual_model))
    return out


def prior_error(truths: Sequence[Case]) -> tuple[float, float]:
    """Median |a-priori step time / truth - 1| over the ok rows of perturbed truths, and the median within-sweep
    Spearman rank correlation of predicted and true throughput: how wrong the estimator is about them."""
    errors, rhos = [], []
    for case in truths:
        ok = [r for r in case.sweep.rows if r.state is TrialState.OK and r.step_time_s]
        if len(ok) < 3:
            continue
        pred = [r.request.estimate(case.prior.constants if case.prior else None).step_time_s for r in ok]
        errors += [abs(p / (r.step_time_s or 1.0) - 1) for p, r in zip(pred, ok)]
        rhos.append(_spearman([r.tokens_per_s or 0.0 for r in ok], [r.tokens_per_step / p for r, p in zip(ok, pred)]))
    return statistics.median(errors), statistics.median(rhos)


def _spearman(a: Sequence[float], b: Sequence[float]) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1]) if len(a) > 2 else 1.0


# ------------------------------------------------------------------------------------------------ evaluation

def evaluate(case: Case, strategies: Sequence[str] = STRATEGIES, steady_stop: bool = True,
             policy: Policy = POLICY) -> Result:
    """Every strategy on one sweep. Baselines that run every configuration stop once they found (their spent
    GPU-hours are exhaustive search's and their regret 0 by construction); random is its exact expectation."""
    exhaustive = sum(case.costs.gpu_hours(r) for r in case.sweep.rows)
    result = Result(case, exhaustive)
    found = _within_of(case.sweep)
    for strategy in strategies:
        if strategy in HINDSIGHT:
            h = hindsight_replay(case, strategy, steady_stop, policy)
            result.to_within[strategy] = result.spent[strategy] = h.gpu_hours_to_within_2pct
            result.regret[strategy], result.trials[strategy] = 0.0, h.trials_run
            result.positions[strategy] = position(h.steps, found)
            continue
        if strategy == "random":
            result.to_within[strategy] = random_expected_gpu_hours(case.sweep, case.costs)
            result.spent[strategy], result.regret[strategy] = exhaustive, 0.0
            result.trials[strategy] = len(case.sweep.rows)
            continue
        runs_all = strategy in ("oracle", "exhaustive", "calibrated")
        model, pick_model = _models(case)
        r = replay_sweep(case.sweep, strategy, costs=case.costs, prior=case.prior, until_found=runs_all,
                         steady_stop=steady_stop, policy=policy, residual_model=model, pick_model=pick_model)
        result.to_within[strategy] = r.gpu_hours_to_within_2pct
        result.spent[strategy] = r.gpu_hours_to_within_2pct if strategy == "oracle" else (
            exhaustive if runs_all else r.gpu_hours)
        result.regret[strategy] = 0.0 if runs_all else r.final_regret
        result.trials[strategy] = r.trials_run
        result.positions[strategy] = position(r.steps, found)
        if strategy == "adaptive":
            result.calibration = r.calibration
            result.effects = final_effects(case, r, r.calibration)
            result.effects_a_priori = final_effects(case, r, uncalibrated(case.prior or prior_for(case.sweep)))
            result.gaps = gaps(r.steps, found)
    if any(s in HINDSIGHT for s in strategies):
        result.positions.update(winner_ranks(case, policy))
    return result


def position(steps: Sequence[Step], found_tokens_per_s: float) -> Optional[int]:
    """How many trials ran until (and with) the first within-2 % one (None: never)."""
    return next((i + 1 for i, s in enumerate(steps) if s.tokens_per_s and s.tokens_per_s >= found_tokens_per_s), None)


def final_effects(case: Case, r: Any, calibration: Optional[Calibration]) -> dict:
    """What the residual model learned by the end of a replayed search (r: its SweepResult): the effects of the
    layout values, given the measured trials' log errors against `calibration` (its final one, or the a-priori
    constants)."""

    if calibration is None:
        return {}
    keys = {_key(row): i for i, row in enumerate(case.sweep.rows)}
    measured = {keys[s.key]: float(case.sweep.rows[keys[s.key]].step_time_s or 0.0) for s in r.steps
                if s.state in (TrialState.OK, TrialState.STOPPED_EARLY) and case.sweep.rows[keys[s.key]].step_time_s}
    if not measured:
        return {}
    rows = [case.sweep.rows[i] for i in measured]
    predicted = calibration.predict(FeatureTable([_features(row) for row in rows]), spread=False).step_time_s
    dims = [row.request.layout.to_dict() for row in case.sweep.rows]
    errors = {i: math.log(s / float(p)) for (i, s), p in zip(measured.items(), predicted)}
    model = case.residual_model or MODEL
    return model.fitted(dims, errors).effects(dims, errors)


def _models(case: Case) -> tuple[Optional[ResidualModel], Optional[ResidualModel]]:
    """replay_sweep's residual_model and pick_model for a case: its own model for the pick and the stop rule, or
    for the pick alone."""
    return (None, case.residual_model) if case.pick_only else (case.residual_model, None)


# ------------------------------------------------------------------------------------------------ hindsight bound

HINDSIGHT = ("hindsight", "hind-gain", "hind-const", "hind-loo")
"""Bounds, not methods (search15, issue 16: how close can a search that orders by this estimator get?). The search's
own calibration and residual model fitted on EVERY trial of the sweep (in sample: they know every answer but can
only say it through the constants and one additive effect per layout value), then:
- 'hindsight': the trials in that fitted model's order, those its memory model says fit first, best predicted
  throughput first (a fixed order);
- 'hind-gain': the adaptive pick (scheduler.order: expected gain over the best measured per expected GPU-hour,
  Policy.explore, the unfloored spreads) on those fixed predictions, nothing refitted;
- 'hind-const': as 'hindsight' with the fitted constants alone (no residual model): what a perfectly calibrated
  estimator orders without the per-value effects;
- 'hind-loo': as 'hindsight' fitted on every trial but those within 2 % of the best (they are predicted, not
  recalled): the best-informed model a search can have when it decides to run the winner (it never has the
  winner's own measurement then), so a winner the in-sample fit only memorised ranks where the family puts it.
Costs as the adaptive search's (losers stopped early, the steady stop; an OOM costs its start-up); each runs until a
configuration within 2 % of the best is measured. Not strictly a floor for the adaptive search (a young model can
rank the winner higher by luck), but the share of a search whose predictions were as good as the model family can
make them on this sweep. Opt-in: evaluate(strategies=STRATEGIES + HINDSIGHT)."""


def hindsight_model(case: Case, policy: Policy = POLICY, held_out: frozenset[str] = frozenset()
                    ) -> tuple[_Replay, list[scheduler.Planned], Any]:
    """The replay state of `case` (nothing run) and every row as the search would predict it had it measured them
    all (but the keys `held_out`): the calibration fitted on every timed row, corrected by the residual model's
    posterior given every row's log error against it; and the sds the pick reads (unfloored: no out-of-sample
    checks in hindsight)."""
    model, pick_model = _models(case)
    rp = _Replay(case.sweep, case.costs, case.prior or prior_for(case.sweep), model, pick_model)
    known = [(k, r, f) for k, r, f in zip(rp.keys, rp.rows, rp.features) if k not in held_out]
    observations = [Observation(f, r.step_time_s if r.state is TrialState.OK else None, r.peak_mem_gb)
                    for _, r, f in known]
    fit = cal.calibrate(observations, rp.prior, min_trials=policy.min_fit_trials,
                        probe=policy.fit_probe)
    rp.finished = [Outcome(k, r.state, r.tokens_per_s) for k, r, _ in known]
    planned, pick_sd = rp.predicted(fit, residuals=policy.residuals, model=pick_model)
    rp.finished = []
    return rp, planned, pick_sd


def _winner_keys(sweep: MeasuredSweep) -> frozenset[str]:
    """The replay keys of the rows within 2 % of the sweep's best."""
    found = _within_of(sweep)
    return frozenset(_key(r) for r in sweep.rows if (r.tokens_per_s or 0.0) >= found)


def hindsight_order(planned: Sequence[scheduler.Planned]) -> list[str]:
    """'hindsight': the trials predicted to fit (peak <= the device) first, each part by predicted throughput."""
    return [p.key for p in sorted(planned, key=lambda p: (p.peak_mem_gb > p.capacity_gb, -p.tokens_per_s))]


def hindsight_replay(case: Case, strategy: str = "hindsight", steady_stop: bool = True,
                     policy: Policy = POLICY, noise_tolerance: float = 0.02) -> SweepResult:
    """One HINDSIGHT strategy on `case`, until a configuration within 2 % of the best is measured (a SweepResult
    without calibration; its regret 0 by construction)."""
    found = _within_of(case.sweep)
    winners = _winner_keys(case.sweep)
    rp, planned, pick_sd = hindsight_model(case, replace(policy, residuals=False) if strategy == "hind-const"
                                           else policy, winners if strategy == "hind-loo" else frozenset())
    static = hindsight_order(planned)
    iterations = case.costs.warmup_iters + case.costs.measure_iters
    while len(rp.finished) < len(rp.rows) and position(rp.steps, found) is None:
        if strategy != "hind-gain":
            key, reason = static[len(rp.finished)], "hindsight order"
        else:
            pick = scheduler.order(planned, rp.finished, calibrated=True, noise_tolerance=noise_tolerance, span=0,
                                   rule=policy.rule, explore=policy.explore,
                                   pick_sd=None if policy.pick_floor else pick_sd, iterations=iterations)[0]
            key, reason = pick.key, pick.reason
        rp.run(key, reason, True, noise_tolerance, steady=steady_stop)
    exhaustive = sum(case.costs.gpu_hours(r) for r in rp.rows)
    hit = position(rp.steps, found)
    return SweepResult(case.sweep.name, strategy, len(rp.finished), rp.spent,
                       rp.steps[hit - 1].gpu_hours if hit else None, exhaustive, 0.0, len(rp.rows), rp.steps)


def winner_ranks(case: Case, policy: Policy = POLICY) -> dict[str, Optional[int]]:
    """Where the winner sits: the rank (1: first) of the first within-2 % configuration in the a-priori plan order
    (exhaustive's), in the hindsight order and in the hind-loo order (fitted without the within-2 % ones)."""
    prior = case.prior or prior_for(case.sweep)
    rp, planned, _ = hindsight_model(case, policy)
    plan = [p.key for p in scheduler.order(rp.planned(uncalibrated(prior)), [], calibrated=False, span=0)]
    good = _winner_keys(case.sweep)
    loo = hindsight_model(case, policy, good)[1]

    def rank(keys: Sequence[str]) -> Optional[int]:
        return next((i + 1 for i, k in enumerate(keys) if k in good), None)

    return {"plan order": rank(plan), "hindsight order": rank(hindsight_order(planned)),
            "loo order": rank(hindsight_order(loo))}


GAP_KINDS = ("first pick", "out of memory", "stopped early", "measured, not within 2 %", "the within-2 % one")


def _within_of(sweep: MeasuredSweep) -> float:
    return (1 - WITHIN) * max(r.tokens_per_s or 0.0 for r in sweep.rows)


def gaps(steps: Sequence[Step], found_tokens_per_s: float) -> dict:
    """Where a search's GPU-hours until a configuration within 2 % of the best was measured went (GAP_KINDS): its
    first pick (before anything was measured), trials that ran out of memory, losers stopped early, trials
    measured (in full or until steady) that were not within 2 %, and the within-2 % trial itself. After the found
    one nothing counts (it is recognised when measured: the best so far is the measured best)."""
    out = dict.fromkeys(GAP_KINDS, 0.0)
    before = 0.0
    for i, step in enumerate(steps):
        cost = step.gpu_hours - before
        before = step.gpu_hours
        good = bool(step.tokens_per_s and step.tokens_per_s >= found_tokens_per_s)
        if good:
            out["the within-2 % one"] += cost
            break
        kind = ("first pick" if i == 0 else "out of memory" if step.state is TrialState.OOM else
                "stopped early" if step.state is TrialState.STOPPED_EARLY else "measured, not within 2 %")
        out[kind] += cost
    return out


def gap_table(results: Sequence[Result]) -> str:
    """Per source group: the adaptive search's GPU-hours to within 2 % by kind, and the oracle's, as mean shares of
    exhaustive GPU-hours (informative sweeps): what the gap to the oracle is made of."""
    lines = [f"{'group':<26} {'oracle':>7}  " + "  ".join(f"{k[:13]:>13}" for k in GAP_KINDS) + "  (adaptive)"]
    for group in sorted({r.case.group for r in results}) + ["all"]:
        used = [r for r in results if r.informative and group in ("all", r.case.group) and r.gaps]
        if not used:
            continue
        oracle = sum(r.share("oracle") for r in used) / len(used)
        cells = [sum(r.gaps[k] / r.exhaustive_gpu_hours for r in used) / len(used) for k in GAP_KINDS]
        lines.append(f"{group:<26} {oracle:>7.1%}  " + "  ".join(f"{c:>13.1%}" for c in cells))
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------ summary

@dataclass(frozen=True)
class Summary:
    group: str
    sweeps: int
    informative: int
    median_share: dict          # strategy -> median per-sweep share (informative sweeps)
    mean_share: dict            # strategy -> mean per-sweep share (informative sweeps)
    weighted_share: dict        # strategy -> GPU-hours to within 2 % / exhaustive, summed (informative sweeps)
    spent_share: dict           # strategy -> median GPU-hours spent / exhaustive (informative sweeps)
    worst_regret: dict          # strategy -> worst final regret (all sweeps)
    regret_over_1pct: int       # adaptive: sweeps with a final regret above 1 %
    worse_than_plan: int        # adaptive: informative sweeps where it needed more than plan order
    ci: dict = field(default_factory=dict)   # strategy -> (low, high) 95 % bootstrap CI of mean_share


def summarise(results: Sequence[Result], group: str, bootstrap: int = 0, seed: int = 0) -> Summary:
    strategies = list(results[0].to_within) if results else []
    used = [r for r in results if r.informative]

    def median(values):
        return statistics.median(values) if values else float("nan")

    def mean(values):
        return sum(values) / len(values) if values else float("nan")

    med = {s: median([r.share(s) for r in used]) for s in strategies}
    avg = {s: mean([r.share(s) for r in used]) for s in strategies}
    total = sum(r.exhaustive_gpu_hours for r in used)
    weighted = {s: (sum(r.share(s) * r.exhaustive_gpu_hours for r in used) / total if total else float("nan"))
                for s in strategies}
    spent = {s: median([r.spent[s] / r.exhaustive_gpu_hours for r in used]) for s in strategies}
    worst = {s: max((r.regret[s] for r in results), default=0.0) for s in strategies}
    over = sum(1 for r in results if r.regret.get("adaptive", 0.0) > 0.01)
    worse = sum(1 for r in used if "adaptive" in r.to_within and "exhaustive" in r.to_within
                and r.share("adaptive") > r.share("exhaustive") * 1.0001)
    ci = {}
    if bootstrap and used:
        rng = random.Random(seed)
        for s in strategies:
            values = [r.share(s) for r in used]
            means = sorted(mean([rng.choice(values) for _ in values]) for _ in range(bootstrap))
            ci[s] = (means[int(0.025 * bootstrap)], means[int(0.975 * bootstrap) - 1])
    return Summary(group, len(results), len(used), med, avg, weighted, spent, worst, over, worse, ci)


def balanced(summaries: Sequence[Summary], strategies: Sequence[str]) -> dict:
    """The headline: the mean over groups of each group's mean per-sweep share (each source group weighs the same,
    so that 40 correlated single-node vTrain sweeps count as one group, not 40 votes)."""
    used = [s for s in summaries if s.informative]
    return {k: sum(s.mean_share[k] for s in used) / len(used) if used else float("nan") for k in strategies}


def balanced_ci(results: Sequence[Result], strategies: Sequence[str], bootstrap: int = 1000,
                seed: int = 0) -> dict:
    """95 % bootstrap interval of the group-balanced headline: the sweeps of each group resampled with
    replacement (for perturbed truths, the draws), the headline recomputed."""
    rng = random.Random(seed)
    groups: dict[str, list[Result]] = {}
    for r in results:
        if r.informative:
            groups.setdefault(r.case.group, []).append(r)
    values: dict[str, list[float]] = {s: [] for s in strategies}
    for _ in range(bootstrap):
        sample = {g: [rng.choice(rs) for _ in rs] for g, rs in groups.items()}
        for s in strategies:
            values[s].append(sum(sum(r.share(s) for r in rs) / len(rs) for rs in sample.values()) / len(sample))
    out = {}
    for s, v in values.items():
        v.sort()
        out[s] = (v[int(0.025 * bootstrap)], v[int(0.975 * bootstrap) - 1])
    return out


def format_table(summaries: Sequence[Summary], strategies: Sequence[str], headline: Optional[dict] = None,
                 title: str = "") -> str:
    cols = "  ".join(f"{s[:10]:>10}" for s in strategies)
    lines = [title, f"{'group':<26} {'sweeps':>6} {'inf.':>4}  {'figure':<10} {cols}"] if title else \
        [f"{'group':<26} {'sweeps':>6} {'inf.':>4}  {'figure':<10} {cols}"]

    def row(label, counts, name, values, fmt="{:>10.1%}"):
        cells = "  ".join("       n/a" if values.get(s) is None or (isinstance(values.get(s), float) and
                                                               math.isnan(values[s])) else fmt.format(values[s])
                          for s in strategies)
        lines.append(f"{label:<26} {counts:<11}  {name:<10} {cells}")

    for s in summaries:
        counts = f"{s.sweeps:>6} {s.informative:>4}"
        row(s.group, counts, "median", s.median_share)
        row("", "", "mean", s.mean_share)
        if s.ci:
            cells = "  ".join(f"{s.ci[k][0]:>4.0%}-{s.ci[k][1]:<4.0%}" if k in s.ci else " " * 10 for k in strategies)
            lines.append(f"{'':<26} {'':<11}  {'95% CI':<10} {cells}")
        row("", "", "GPU-h wtd", s.weighted_share)
        row("", "", "spent", s.spent_share)
        row("", "", "worst rgt", s.worst_regret)
        lines.append(f"{'':<26} {'':<11}  adaptive: regret > 1 % on {s.regret_over_1pct} of {s.sweeps}; more "
                     f"GPU-h than plan order on {s.worse_than_plan} of {s.informative}; "
                     f"gap to oracle {_gap(s.mean_share)}")
    if headline:
        row("HEADLINE (group-balanced)", "", "mean", headline)
    return "\n".join(lines)


def _gap(shares: dict) -> str:
    a, o = shares.get("adaptive"), shares.get("oracle")
    if a is None or o is None or math.isnan(a) or math.isnan(o) or not o:
        return "n/a"
    return f"{a / o:.2f}x ({a - o:+.1%})"


# ------------------------------------------------------------------------------------------------ transfer

def scale_pairs(cases: Sequence[Case], factor: int = 8) -> list[tuple[Case, Case]]:
    """Pairs of sweeps of one model, stack and cluster at two GPU counts (the larger `factor` times the smaller; for
    the single-node vTrain grids 4 -> 8 GPUs at the same global batch): a finished small sweep informing a large one."""
    def key(c: Case):
        r = c.sweep.rows[0]
        m = r.request.model
        return (c.group, r.request.backend, r.request.cluster.name, m.layers, m.hidden, m.seq_len, r.request.layout.gbs)

    by_key: dict = {}
    for c in cases:
        by_key.setdefault(key(c), []).append(c)
    out = []
    for members in by_key.values():
        for small in members:
            for large in members:
                ratio = large.sweep.rows[0].gpus / small.sweep.rows[0].gpus
                wanted = 2 if small.group.endswith("vtrain-single") else factor
                if ratio == wanted:
                    out.append((small, large))
    return out


def transfer_prior(small: Case, steady_stop: bool = True, policy: Policy = POLICY,
                   calibration: Optional[Calibration] = None) -> Prior:
    """The calibration a finished adaptive search of `small` leaves (as plan.prior_from reads calibration.json);
    `calibration`: that search's, already replayed (evaluate keeps it), else it is replayed here."""
    if calibration is None:
        model, pick_model = _models(small)
        calibration = replay_sweep(small.sweep, "adaptive", costs=small.costs, prior=small.prior,
                                   steady_stop=steady_stop, policy=policy, residual_model=model,
                                   pick_model=pick_model).calibration
    base = (small.prior or prior_for(small.sweep)).constants
    if calibration is None:
        raise ValueError(f"{small.sweep.name}: the adaptive replay left no calibration to transfer")
    return Prior.from_json(calibration.to_json(), base, source=small.sweep.name)


@dataclass(frozen=True)
class Transfer:
    small: str
    large: str
    group: str
    cold: float       # share of exhaustive GPU-hours to within 2 % on the large sweep, cold start
    warm: float       # the same, starting from the small sweep's calibration
    cold_regret: float
    warm_regret: float


def evaluate_transfer(small: Case, large: Case, steady_stop: bool = True, policy: Policy = POLICY,
                      known: Optional[tuple[Result, Result]] = None) -> Transfer:
    """The large sweep's adaptive search cold and from the small one's calibration. `known`: both sweeps'
    `evaluate` results under the same policy (the cold start and the small sweep's calibration are theirs, so only
    the warm start is replayed: the benchmark's transfer section cost twice as much before)."""
    prior = transfer_prior(small, steady_stop, policy, known[0].calibration if known else None)
    shares, regrets = [], []
    if known:
        shares.append(known[1].share("adaptive"))
        regrets.append(known[1].regret["adaptive"])
    for start in ((prior,) if known else (large.prior, prior)):
        model, pick_model = _models(large)
        r = replay_sweep(large.sweep, "adaptive", costs=large.costs, prior=start, steady_stop=steady_stop,
                         policy=policy, residual_model=model, pick_model=pick_model)
        shares.append(1.0 if r.gpu_hours_to_within_2pct is None else r.gpu_hours_to_within_2pct /
                      r.exhaustive_gpu_hours)
        regrets.append(r.final_regret)
    name = lambda c: c.sweep.name + (f"#{c.draw}" if c.draw >= 0 else "")  # noqa: E731
    return Transfer(name(small), name(large), large.group, shares[0], shares[1], regrets[0], regrets[1])


def perturbed_pairs(pairs: Sequence[tuple[Case, Case]], draws: int, seed: int = 61,
                    spread: Spread = Spread()) -> list[tuple[Case, Case]]:
    """Perturbed truths for pairs: both scales share one draw of the constants and of the per-value biases (one
    cluster and stack), each has its own repeat noise."""
    rng = np.random.default_rng(seed)
    out = []
    for small, large in pairs:
        for k in range(draws):
            state = rng.integers(2 ** 32)
            truths = []
            for c in (small, large):
                shared = np.random.default_rng(state)     # same constants and biases for both scales
                truth = perturb(c.sweep, shared, spread, c.prior, noise_rng=rng)
                truths.append(Case(truth, "perturbed/" + c.group.split("/")[-1], c.costs, c.prior, k,
                                   c.residual_model))
            out.append((truths[0], truths[1]))
    return out


# ------------------------------------------------------------------------------------------------ history

HISTORY_MIN_SWEEPS = 3
"""A source group's sweeps of one setup are replayed from each other when it holds at least this many."""
ONE_OTHER = 3
"""'From one other sweep': that many of the others, drawn per held-out sweep from a seeded generator, each replayed
as plan.prior_from=sweeps/ONE would start it, and their shares averaged (every other sweep of a 40-sweep group
would be 1,560 replays)."""
REPEAT_OVERLAP = 0.5
"""Two sweeps are repeats of one grid when they have the same model shape and GPU count and at least this share
of the smaller one's layouts in common (the `_r2` tables and the tables they repeat; nothing else on 27 Nov)."""


def setup_key(case: Case) -> tuple[str, str, str, str]:
    """What plan.prior_from checks (launcher.run.prior.setup): cluster, GPU, backend, precision."""
    r = case.sweep.rows[0].request
    return (r.cluster.name, r.cluster.gpu, r.backend, r.precision)


def _shape(case: Case) -> tuple:
    m = case.sweep.rows[0].request.model
    return tuple((k, v) for k, v in sorted(vars(m).items()) if k not in ("name", "source", "_sealed"))


def repeats(a: Case, b: Case) -> bool:
    """Whether sweeps a and b are the same grid measured twice (REPEAT_OVERLAP): a sweep's history never holds
    its own grid."""
    if a.sweep.rows[0].gpus != b.sweep.rows[0].gpus or _shape(a) != _shape(b):
        return False
    la = {r.request.layout.label() for r in a.sweep.rows}
    lb = {r.request.layout.label() for r in b.sweep.rows}
    return len(la & lb) >= REPEAT_OVERLAP * min(len(la), len(lb))


def history_groups(cases: Sequence[Case], min_sweeps: int = HISTORY_MIN_SWEEPS) -> dict[tuple, list[Case]]:
    """(source group, setup) -> its sweeps, for those with at least min_sweeps (measured sweeps only)."""
    out: dict[tuple, list[Case]] = {}
    for c in cases:
        if c.draw < 0:
            out.setdefault((c.group, setup_key(c)), []).append(c)
    return {k: v for k, v in out.items() if len(v) >= min_sweeps}


def history_of(case: Case, members: Sequence[Case]) -> list[Case]:
    """The other sweeps of `case`'s group and setup: never itself, never a repeat of its grid."""
    return [m for m in members if m is not case and m.sweep.name != case.sweep.name and not repeats(case, m)]


def history_prior(case: Case, calibrations: Sequence[Calibration]) -> Prior:
    """What plan.prior_from would start `case` from, given the finished sweeps' final calibrations: one as it is
    (Prior.from_json), several pooled (launcher.plan.pooling)."""

    base = (case.prior or prior_for(case.sweep)).constants
    data = [c.to_json() for c in calibrations]
    if len(data) == 1:
        return Prior.from_json(data[0], base, source="one other")
    return pooled(data, base, source=f"pool of {len(data)}")[0]


def one_others(case: Case, history: Sequence[Case], k: int = ONE_OTHER) -> list[Case]:
    """The `k` other sweeps 'from one other' uses for `case` (seeded by its name: the same every run)."""
    if len(history) <= k:
        return list(history)
    return random.Random(case.sweep.name).sample(list(history), k)


@dataclass(frozen=True)
class HistoryResult:
    """One held-out sweep: cold (its evaluate result) and warm from its history."""

    cold: Result
    warm_all: float             # share, from every other sweep of its group and setup (pooled)
    warm_all_regret: float
    warm_one: float             # share, from one other (mean over one_others)
    warm_one_regret: float      # worst over one_others
    n_history: int

    @property
    def group(self) -> str:
        return self.cold.case.group

    def share(self, strategy: str) -> float:
        if strategy == "warm (all)":
            return self.warm_all
        return self.warm_one if strategy == "warm (one)" else self.cold.share(strategy)


HISTORY_COLUMNS = ("adaptive", "warm (all)", "warm (one)", "oracle", "exhaustive", "random")


@dataclass(frozen=True)
class Start:
    """Where a warm replay starts: the calibration's prior and the residual model's prior means (empty: none)."""

    prior: Prior
    effects: tuple[tuple[str, float], ...] = ()
    effect_sds: tuple[tuple[str, float], ...] = ()    # their prior sds (empty: the residual model's own)


HISTORY_MODES = ("constants", "constants+effects", "a-priori effects", "a-priori effects, centred",
                 "constants+effects, scatter sd", "a-priori effects, centred, scatter sd")
"""What a sweep takes from its history: the pooled calibrations (plan.prior_from), with the residual effects its
history learned against their final calibrations as the prior means of its own, or the a-priori constants with the
effects its history measured against them (the setup's a-priori miss per layout value) as the prior means.
', scatter sd' (search14): each effect's prior sd is also its history's: the sd of a new sweep's effect under the
random-effects pool (launcher.plan.pooling.pooled_effect_priors), instead of the residual model's 0.15."""


def centred(effects: dict) -> dict:
    """A sweep's effects without its level: each dimension's values about their mean (what ranks its layouts; the
    level of one dimension's effects cannot be told from the offset)."""
    by_dim: dict[str, list[str]] = {}
    for name in effects:
        if name != "offset":
            by_dim.setdefault(name.split("=", 1)[0], []).append(name)
    out = {}
    for names in by_dim.values():
        mean = sum(effects[n][0] for n in names) / len(names)
        out.update({n: (effects[n][0] - mean, *effects[n][1:]) for n in names})
    return out


def history_start(case: Case, history: Sequence[Result], mode: str = "constants") -> Start:
    """plan.prior_from=sweeps/ for `case` from the finished sweeps `history` (their evaluate results), HISTORY_MODES."""

    scatter = mode.endswith("scatter sd")
    if mode.startswith("a-priori effects"):
        measured = [r.effects_a_priori for r in history if r.effects_a_priori]
        effects = [centred(e) for e in measured] if "centred" in mode else measured
        return _effects_start(case.prior or prior_for(case.sweep), effects, scatter)
    prior = history_prior(case, [r.calibration for r in history if r.calibration is not None])
    if mode == "constants":
        return Start(prior)
    return _effects_start(prior, [r.effects for r in history if r.effects], scatter)


def _effects_start(prior: Prior, effects: Sequence[dict], scatter: bool) -> Start:
    if not scatter:
        return Start(prior, tuple(sorted(pooled_effects(effects).items())))
    pooled_ = pooled_effect_priors(effects)
    return Start(prior, tuple(sorted((n, m) for n, (m, _) in pooled_.items())),
                 tuple(sorted((n, s) for n, (_, s) in pooled_.items())))


def _warm(case: Case, start: Start, steady_stop: bool, policy: Policy) -> tuple[float, float]:
    prior = start.prior
    if start.effects:
        case = replace(case, residual_model=replace(case.residual_model or MODEL, prior_mean=start.effects,
                                                    column_sds=start.effect_sds))
    model, pick_model = _models(case)
    r = replay_sweep(case.sweep, "adaptive", costs=case.costs, prior=prior, steady_stop=steady_stop, policy=policy,
                     residual_model=model, pick_model=pick_model)
    share = 1.0 if r.gpu_hours_to_within_2pct is None else r.gpu_hours_to_within_2pct / r.exhaustive_gpu_hours
    return share, r.final_regret


def warm_replays(case: Case, starts: Sequence[Start], steady_stop: bool = True,
                 policy: Policy = POLICY) -> list[tuple[float, float]]:
    """(share, regret) of `case`'s adaptive search from each start."""
    return [_warm(case, s, steady_stop, policy) for s in starts]


def history_work(cold: Sequence[Result], one: int = ONE_OTHER, mode: str = "constants"
                 ) -> list[tuple[Result, list[Start], int]]:
    """For every measured sweep in a history group (cold: every sweep's evaluate result, each with its final
    calibration): (its result, [the start from all the others, then one per one_others], the size of its
    history)."""
    by_name = {r.case.sweep.name: r for r in cold}
    fitted = {r.case.sweep.name for r in cold if r.calibration is not None and r.calibration.applied}
    out = []
    for members in history_groups([r.case for r in cold]).values():
        for case in members:
            # a finished sweep whose calibration was never applied is skipped, as plan.prior_from=sweeps/ skips it
            history = [by_name[h.sweep.name] for h in history_of(case, members) if h.sweep.name in fitted]
            if not history:
                continue
            starts = [history_start(case, history, mode)]
            starts += [history_start(case, [by_name[h.sweep.name]], mode)
                       for h in one_others(case, [h.case for h in history], one)]
            out.append((by_name[case.sweep.name], starts, len(history)))
    return out


def history_result(cold: Result, warm: Sequence[tuple[float, float]], n_history: int) -> HistoryResult:
    ones = warm[1:]
    return HistoryResult(cold, warm[0][0], warm[0][1], sum(s for s, _ in ones) / len(ones),
                         max(r for _, r in ones), n_history)


def history_table(results: Sequence[HistoryResult]) -> str:
    """Per group and group-balanced: the mean share (informative sweeps) of each HISTORY_COLUMNS, then the sweeps
    where cold and warm searches needed more than plan order and had a final regret above 1 %."""
    cols = "  ".join(f"{c:>10}" for c in HISTORY_COLUMNS)
    lines = [f"{'group':<26} {'sweeps':>6}  {'hist.':>5}  {cols}   worse than plan order (cold/all/one)  "
             f"regret>1% (cold/all/one)"]
    groups = sorted({r.group for r in results})
    means: list[dict[str, float]] = []
    worse_total = [0, 0, 0]
    for g in groups + ["HEADLINE (group-balanced)"]:
        used = [r for r in results if r.cold.informative and (r.group == g)]
        if g.startswith("HEADLINE"):
            if not means:
                continue
            cells = "  ".join(f"{sum(m[c] for m in means) / len(means):>10.1%}" for c in HISTORY_COLUMNS)
            n = sum(1 for r in results if r.cold.informative)
            lines.append(f"{g:<26} {n:>6}  {'':>5}  {cells}   {worse_total[0]:>8} / {worse_total[1]} / "
                         f"{worse_total[2]} of {n}")
            continue
        if not used:
            continue
        mean = {c: sum(r.share(c) for r in used) / len(used) for c in HISTORY_COLUMNS}
        means.append(mean)
        plan = [r.share("exhaustive") * 1.0001 for r in used]
        worse = [sum(1 for r, p in zip(used, plan) if r.share(c) > p) for c in ("adaptive", "warm (all)",
                                                                                "warm (one)")]
        worse_total = [a + b for a, b in zip(worse_total, worse)]
        every = [r for r in results if r.group == g]
        regret = (sum(1 for r in every if r.cold.regret["adaptive"] > 0.01),
                  sum(1 for r in every if r.warm_all_regret > 0.01), sum(1 for r in every if r.warm_one_regret > 0.01))
        hist = sum(r.n_history for r in used) / len(used)
        cells = "  ".join(f"{mean[c]:>10.1%}" for c in HISTORY_COLUMNS)
        lines.append(f"{g:<26} {len(used):>6}  {hist:>5.1f}  {cells}   {worse[0]:>8} / {worse[1]} / {worse[2]} of "
                     f"{len(used):<12} {regret[0]} / {regret[1]} / {regret[2]}")
    return "\n".join(lines)


def effect_consistency(cases: Sequence[Case]) -> dict[str, tuple[int, float, float, float]]:
    """How alike the setup's a-priori misses per layout value are between the sweeps of a history group, when a
    whole table is measured: each sweep's residual effects (ResidualModel.effects on every ok row, against the
    a-priori constants) centred per dimension, and their correlation between two sweeps over the values both have
    (at least 4). Group -> (pairs, median, lower and upper quartile)."""

    out = {}
    for (group, _), members in history_groups(cases).items():
        effects = []
        for c in members:
            ok = [i for i, r in enumerate(c.sweep.rows) if r.state is TrialState.OK and r.step_time_s]
            if len(ok) < 4:
                continue
            table = FeatureTable([_features(c.sweep.rows[i]) for i in ok])
            predicted = uncalibrated(c.prior or prior_for(c.sweep)).predict(table, spread=False).step_time_s
            dims = [r.request.layout.to_dict() for r in c.sweep.rows]
            errors = {i: math.log((c.sweep.rows[i].step_time_s or 0.0) / float(p)) for i, p in zip(ok, predicted)}
            effects.append(centred(MODEL.fitted(dims, errors).effects(dims, errors)))
        rs = []
        for i, a in enumerate(effects):
            for b in effects[i + 1:]:
                shared = sorted(set(a) & set(b))
                x, y = np.array([a[n][0] for n in shared]), np.array([b[n][0] for n in shared])
                if len(shared) >= 4 and x.std() > 0 and y.std() > 0:
                    rs.append(float(np.corrcoef(x, y)[0, 1]))
        if rs:
            q1, med, q3 = np.percentile(rs, [25, 50, 75])
            out[group] = (len(rs), float(med), float(q1), float(q3))
    return out


# ------------------------------------------------------------------------------------------------ fixed orders

FIXED_ORDERS = ("plan order", "throughput", "throughput, fitting first", "cheapest first", "throughput per GPU-hour")
"""Orders that use only the plan's a-priori predictions (the floor a cold search is up against, search14): the
scheduler's a-priori order (= exhaustive), predicted tokens/s high to low (memory ignored), the same with the trials
predicted to fit (chance >= 0.5) first, predicted GPU-hours per trial low to high, and predicted tokens/s x chance
to fit per predicted trial GPU-hour high to low. Every trial measured in full (as exhaustive)."""


def fixed_order_keys(case: Case) -> dict[str, list[str]]:
    """Every FIXED_ORDERS order of `case`'s rows (their replay keys)."""
    prior = case.prior or prior_for(case.sweep)
    rp = _Replay(case.sweep, case.costs, prior)
    planned = rp.planned(uncalibrated(prior))
    by_key = {t.key: t for t in planned}
    iterations = case.costs.warmup_iters + case.costs.measure_iters
    fits = {t.key: scheduler.chance_fits(t, by_key, []) for t in planned}
    cost = {t.key: scheduler.trial_cost(t, fits[t.key], iterations) for t in planned}
    return {
        "plan order": [p.key for p in scheduler.order(planned, [], calibrated=False, span=0)],
        "throughput": [t.key for t in sorted(planned, key=lambda t: -t.tokens_per_s)],
        "throughput, fitting first": [t.key for t in sorted(planned, key=lambda t: (fits[t.key] < 0.5,
                                                                                    -t.tokens_per_s))],
        "cheapest first": [t.key for t in sorted(planned, key=lambda t: cost[t.key])],
        "throughput per GPU-hour": [t.key for t in sorted(planned, key=lambda t: -t.tokens_per_s * fits[t.key] /
                                                          max(cost[t.key], 1e-9))],
    }


def fixed_order_shares(case: Case) -> dict[str, float]:
    """Share of exhaustive GPU-hours to within 2 % of the best, each FIXED_ORDERS order run as it is."""
    rows = {_key(r): r for r in case.sweep.rows}
    found = (1 - WITHIN) * max(r.tokens_per_s or 0.0 for r in case.sweep.rows)
    exhaustive = sum(case.costs.gpu_hours(r) for r in case.sweep.rows)
    out = {}
    for name, keys in fixed_order_keys(case).items():
        spent = 0.0
        for k in keys:
            spent += case.costs.gpu_hours(rows[k])
            if (rows[k].tokens_per_s or 0.0) >= found:
                break
        out[name] = spent / exhaustive
    return out


def fixed_order_table(results: Sequence[Result]) -> str:
    """Per group (informative sweeps) and group-balanced: the mean share of each FIXED_ORDERS order, the best one
    order for the whole group could get (the oracle over fixed a-priori orders, chosen per group) and the best per
    sweep (chosen per sweep, knowing the table: a floor no a-priori order reaches), next to the cold search."""
    used = [r for r in results if r.informative]
    shares = {r.case.sweep.name: fixed_order_shares(r.case) for r in used}
    short = ("plan", "tput", "tput fit", "cheap", "tput/GPUh")
    lines = [f"{'group':<26} {'sweeps':>6}  " + "  ".join(f"{s:>9}" for s in short) +
             f"  {'best order (group)':>26}  {'best per sweep':>14}  {'adaptive':>8}"]
    rows: list[tuple[float, ...]] = []
    for g in sorted({r.case.group for r in used}):
        members = [r for r in used if r.case.group == g]
        mean = {o: sum(shares[r.case.sweep.name][o] for r in members) / len(members) for o in FIXED_ORDERS}
        best = min(FIXED_ORDERS, key=lambda o: mean[o])
        per_sweep = sum(min(shares[r.case.sweep.name].values()) for r in members) / len(members)
        adaptive = sum(r.share("adaptive") for r in members) / len(members)
        rows.append((*(mean[o] for o in FIXED_ORDERS), mean[best], per_sweep, adaptive))
        lines.append(f"{g:<26} {len(members):>6}  " + "  ".join(f"{mean[o]:>9.1%}" for o in FIXED_ORDERS) +
                     f"  {best + ' ' + format(mean[best], '.1%'):>26}  {per_sweep:>14.1%}  {adaptive:>8.1%}")
    if rows:
        avg = [sum(col) / len(rows) for col in zip(*rows)]
        lines.append(f"{'HEADLINE (group-balanced)':<26} {len(used):>6}  " +
                     "  ".join(f"{a:>9.1%}" for a in avg[:len(FIXED_ORDERS)]) +
                     f"  {format(avg[-3], '.1%'):>26}  {avg[-2]:>14.1%}  {avg[-1]:>8.1%}")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------ hindsight report

HINDSIGHT_COLUMNS = ("adaptive", "oracle", "exhaustive", "hindsight", "hind-gain", "hind-const", "hind-loo",
                     "random", "best bound")
"""'best bound': per sweep the lower of 'hindsight' and 'hind-gain' (_share)."""
TARGET_X_ORACLE = 1.5
"""Issue 16's target: the adaptive search within this multiple of the oracle's share."""


def hindsight_table(results: Sequence[Result]) -> str:
    """Per source group and group-balanced (informative sweeps with the hindsight strategies): the mean share of
    HINDSIGHT_COLUMNS, hindsight / oracle (for both variants), adaptive / the better of the two, and the sweeps
    where the fixed hindsight order is above TARGET_X_ORACLE x the oracle's share."""
    used = [r for r in results if r.informative and all(s in r.to_within for s in HINDSIGHT)]
    short = ("adaptive", "oracle", "plan", "hindsight", "hind-gain", "hind-const", "hind-loo", "random", "best bnd")
    lines = [f"{'group':<26} {'sweeps':>6}  " + "  ".join(f"{s:>10}" for s in short) +
             f"  {'hind/orac':>9}  {'gain/orac':>9}  {'best/orac':>9}  {'adapt/best':>10}  {'hind >1.5x oracle':>17}"
             f"  {'adaptive < best bound':>21}"]
    means: list[dict[str, float]] = []
    for g in sorted({r.case.group for r in used}) + ["HEADLINE (group-balanced)"]:
        if g.startswith("HEADLINE"):
            if not means:
                continue
            mean = {c: sum(m[c] for m in means) / len(means) for c in HINDSIGHT_COLUMNS}
            members = used
        else:
            members = [r for r in used if r.case.group == g]
            mean = {c: sum(_share(r, c) for r in members) / len(members) for c in HINDSIGHT_COLUMNS}
            means.append(mean)
        over = sum(1 for r in members if r.share("hindsight") > TARGET_X_ORACLE * r.share("oracle") + 1e-12)
        beats = sum(1 for r in members if r.share("adaptive") < _share(r, "best bound") - 1e-12)
        ratios = (_ratio(mean["hindsight"], mean["oracle"]), _ratio(mean["hind-gain"], mean["oracle"]),
                  _ratio(mean["best bound"], mean["oracle"]), _ratio(mean["adaptive"], mean["best bound"]))
        lines.append(f"{g:<26} {len(members):>6}  " + "  ".join(f"{mean[c]:>10.1%}" for c in HINDSIGHT_COLUMNS) +
                     f"  {ratios[0]:>9}  {ratios[1]:>9}  {ratios[2]:>9}  {ratios[3]:>10}"
                     f"  {over:>9} of {len(members):<4}  {beats:>13} of {len(members):<4}")
    return "\n".join(lines)


def _share(r: Result, column: str) -> float:
    return min(r.share("hindsight"), r.share("hind-gain")) if column == "best bound" else r.share(column)


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "n/a"


POSITION_BINS = ((1, 1), (2, 2), (3, 3), (4, 5), (6, 10), (11, 20), (21, 10 ** 9))


def position_histogram(results: Sequence[Result],
                       kinds: Sequence[str] = ("plan order", "hindsight order", "loo order", "adaptive",
                                               "hind-gain")) -> str:
    """Where the winner sits (informative sweeps): for each of `kinds` (Result.positions), how many sweeps have
    their first within-2 % configuration at each rank (the static orders) or found it as their n-th trial (the
    searches), as counts and a bar."""
    used = [r for r in results if r.informative and all(k in r.positions for k in kinds)]
    labels = [f"{lo}" if lo == hi else (f"{lo}-{hi}" if hi < 10 ** 9 else f">={lo}") for lo, hi in POSITION_BINS]
    lines = [f"{'rank / trials':<16} " + "  ".join(f"{k:>26}" for k in kinds)]   # 'loo order': hind-loo's
    for label, (lo, hi) in zip(labels + ["never"], list(POSITION_BINS) + [(None, None)]):
        cells = []
        for k in kinds:
            n = sum(1 for r in used if (r.positions[k] is None if lo is None else
                                        r.positions[k] is not None and lo <= r.positions[k] <= hi))
            cells.append(f"{n:>4} {'#' * min(n, 21):<21}")
        lines.append(f"{label:<16} " + "  ".join(f"{c:>26}" for c in cells))
    med = [statistics.median([r.positions[k] or 10 ** 6 for r in used]) if used else float("nan") for k in kinds]
    lines.append(f"{'median':<16} " + "  ".join(f"{m:>26g}" for m in med))
    return "\n".join(lines)


def policy_losses(results: Sequence[Result], top: int = 12) -> list[tuple[str, str, float, float, float, int, int]]:
    """The sweeps where the adaptive search loses most against the better hindsight bound (informative):
    (group, sweep, adaptive share, bound share, oracle share, adaptive's trials to the winner, its hindsight rank),
    largest loss first."""
    used = [r for r in results if r.informative and all(s in r.to_within for s in HINDSIGHT)]
    rows = []
    for r in used:
        bound = _share(r, "best bound")
        rows.append((r.case.group, r.name, r.share("adaptive"), bound, r.share("oracle"),
                     r.positions.get("adaptive") or 0, r.positions.get("hindsight order") or 0))
    rows.sort(key=lambda t: -(t[2] - t[3]))
    return rows[:top]
