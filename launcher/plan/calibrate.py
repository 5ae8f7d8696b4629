"""Calibration: fit the estimator's few physical constants to a sweep's measured step times and peak memory.

What is fitted (`PARAMETERS`): the compute efficiency and its size dependence, memory-bound (HBM) efficiency,
network efficiency and latency, the per-micro-batch fixed costs (parameter traffic, CPU dispatch), and the memory
overhead (context + transient share). Never a per-trial factor: every trial is predicted by the same
`launcher.plan.estimator` with the same `Constants`, so a calibration re-predicts any layout, run or not
(`estimate(..., constants=calibration.constants)`).

How: maximum a posteriori with robust least squares (scipy.optimize.least_squares, soft_l1 loss) on log errors:
each parameter is a log multiplier of its a-priori value with a Gaussian prior (`Parameter.prior_sd`), so a
parameter the measurements say nothing about stays where it was, and a measurement far off (a noisy trial) is
down-weighted rather than followed. Below `min_trials` measured trials nothing changes (`applied` False, and the
note says so). The uncertainty (for the scheduler's stop rule) is the Gauss-Newton posterior covariance of the
parameters plus the residual model error, both in log space.

Speed: the model is evaluated once per trial with unit rates (`trial_features`: each step-time piece as a vector
of constant-free amounts, see launcher.plan.step_time), after which predicting any number of trials for any
constants is a few numpy operations (`FeatureTable.predict`): a refit over 1,000 trials takes milliseconds
(tests/benchmarks/bench_calibrate.py).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional, Union, cast

from launcher.config.schema import ClusterConfig, ModelConfig
from launcher.core.layout import Layout
from launcher.core.names import is_cpu_standin
from launcher.plan.constants import DEFAULT, Constants
from launcher.plan.hardware import generation
from launcher.plan.memory import stage_memory_gb
from launcher.plan.step_time import MicrobatchTimes, Rates, StepPieces, combine, rates, step_pieces
from launcher.plan.workload import DEFAULT_WORKLOAD, Workload

if TYPE_CHECKING:  # numpy is imported where it is used: planning and --help never need it
    import numpy as np

MIN_TRIALS = 3
"""Measured trials before a calibration changes anything."""
MODEL_ERROR_SD = 0.08
"""A-priori size of the model's log error on one trial after calibration (measurement noise + what the physics
leaves out); it scales the data residuals against the priors."""
ROBUST_SCALE = 2.0
"""soft_l1 f_scale in units of MODEL_ERROR_SD: residuals beyond ~16 % count linearly, not quadratically."""
MIN_RESIDUAL_SD = 0.02
"""Floor of the fitted model error (run-to-run noise of a benchmark step is ~1-2 %)."""
MEMORY_ERROR_SD = 0.05

_GROUPS = Rates._fields
@functools.lru_cache(maxsize=1)
def unit_rates() -> Rates:
    """Rates of one for each group (numpy unit vectors): the step-time model evaluated with them gives its amounts."""
    import numpy as np

    return Rates(*np.eye(len(_GROUPS)))
_MB_FIELDS = MicrobatchTimes._fields  # every piece of a micro-batch, whatever the step-time model adds


@dataclass(frozen=True)
class Parameter:
    """One fitted constant (or a group moved together): value = (prior + offset) x exp(theta) - offset."""

    name: str
    fields: tuple[str, ...]   # Constants fields it scales
    prior_sd: float           # sd of theta (log multiplier) a priori
    offset: float = 0.0       # lets a constant whose prior is 0 move (it is then (offset)·(e^θ - 1))
    memory: bool = False      # fitted on peak memory, not step time


PARAMETERS = (
    Parameter("compute", ("gemm_eff_max",), 0.5),
    Parameter("gemm_size", ("gemm_dim_scale",), 0.7),
    Parameter("fp8", ("fp8_gemm_eff",), 0.25),
    Parameter("memory_bw", ("hbm_eff",), 0.5),
    Parameter("network", ("net_eff",), 0.7),
    Parameter("latency", ("latency_gpu_s", "latency_cpu_s"), 1.5),
    Parameter("fixed", ("microbatch_param_bytes", "recompute_cast_bytes"), 1.0, offset=8.0),
    Parameter("dispatch", ("layer_dispatch_s", "checkpoint_dispatch_s"), 1.0),
    Parameter("mem_context", ("gpu_context_gb", "cpu_context_gb"), 1.0, offset=1.0, memory=True),
    Parameter("mem_transient", ("transient_share",), 1.0, offset=0.1, memory=True),
    Parameter("mem_fragmentation", ("fragmentation_share",), 0.3, memory=True),
)
"""Every parameter is a log multiplier of a Constants field (or group) with a Gaussian prior; a parameter the
measurements say nothing about (no FP8 trial for 'fp8', no network traffic for 'network') stays at its prior. A
sweep runs on one GPU model, so the generation multipliers (GENERATION_PARAMETERS) are not among them: on one
generation they are the same thing as 'compute'; the corpus fit (launcher.plan.fit) adds them, and the parameters a
sweep at one sequence length and scale cannot tell apart from 'compute', 'fixed' or 'dispatch' (the attention
kernels' efficiency, the per-step overhead, the overlap interference)."""
CORPUS_ONLY_PARAMETERS = (
    Parameter("hopper", ("gen_eff_hopper",), 0.25),
    Parameter("blackwell", ("gen_eff_blackwell",), 0.25),
    Parameter("attention", ("attn_eff",), 0.3),
    Parameter("step_overhead", ("step_overhead_s",), 1.0, offset=0.005),
    Parameter("interference", ("overlap_interference",), 1.0, offset=0.05),
    Parameter("tp_interference", ("tp_overlap_interference",), 1.0, offset=0.05),
)
STEP_PARAMETERS = tuple(p for p in PARAMETERS if not p.memory)
MEMORY_PARAMETERS = tuple(p for p in PARAMETERS if p.memory)


def apply_parameters(prior: Constants, params: Sequence[Parameter], theta: Sequence[float] | np.ndarray
                     ) -> Constants:
    values = {}
    for p, t in zip(params, theta):
        for name in p.fields:
            base = getattr(prior, name)
            values[name] = max(0.0, (base + p.offset) * math.exp(float(t)) - p.offset)
    return prior.with_values(**values)


# ------------------------------------------------------------------------------------------------ features

@dataclass(frozen=True)
class TrialFeatures:
    """One trial's constant-free amounts: each step-time piece as a vector over the rate groups, and the memory
    of its first and last stage without and with the transient share (GB)."""

    stages: np.ndarray          # (3 stages, 7 MicrobatchTimes fields, groups)
    weights: tuple[float, float, float]
    microbatches: int
    pp: int
    vpp: int
    zero3: int
    cpu: int
    dp_reduce: np.ndarray       # (groups,)
    dp_gather: np.ndarray
    optimizer: np.ndarray
    mem_fixed_gb: tuple[float, float]      # weights + grads + optimizer + gathered + activations + logits, per stage
    mem_transient_gb: tuple[float, float]  # activations + logits + gathered (what the overhead shares multiply)
    tokens_per_step: int
    generation: str = "ampere"             # the GPU generation (launcher.plan.hardware): which rates apply
    overlap_gather: int = 0


def _vector(x: float | np.ndarray) -> np.ndarray:
    import numpy as np

    out = np.empty(len(_GROUPS))
    out[...] = x  # broadcasts a scalar; np.broadcast_to cost ~40 % of trial_features
    return out


@functools.lru_cache(maxsize=1)
def bare_memory_constants() -> Constants:
    """The memory model without the overheads the calibration fits (built once: with_values costs ~0.1 ms)."""
    return DEFAULT.with_values(gpu_context_gb=0.0, cpu_context_gb=0.0, transient_share=0.0, fragmentation_share=0.0)


def trial_features(model: ModelConfig, cluster: ClusterConfig, layout: Layout, precision: str,
                   flash: bool, *, workload: Workload = DEFAULT_WORKLOAD, backend: str = "") -> TrialFeatures:
    """Evaluate the step-time model once with unit rates (numpy vectors): every piece becomes its amounts.
    `workload` and `backend` as for launcher.plan.estimator.estimate (they choose the stack's counts)."""
    pc = step_pieces(model, cluster, layout, precision, flash, unit_rates(), is_cpu_standin(cluster.gpu),
                     workload=workload, backend=backend)
    bare = bare_memory_constants()
    memory = [stage_memory_gb(model, cluster, layout, precision, stage, flash, bare, workload=workload,
                              backend=backend) for stage in (0, layout.pp - 1)]
    return features_of(amounts_of(pc), pc, memory, layout, model, cluster)


def amounts_of(pc: StepPieces) -> np.ndarray:
    """The stages' pieces as one array (stage, MicrobatchTimes field, vector component): a number fills its row."""
    import numpy as np

    width = next((len(x) for mb in pc.stages for x in mb if isinstance(x, np.ndarray)), len(_GROUPS))
    stages = np.empty((len(pc.stages), len(_MB_FIELDS), width))
    for s, mb in enumerate(pc.stages):
        for i, amount in enumerate(mb):  # MicrobatchTimes in _MB_FIELDS order; a scalar fills its row
            stages[s, i] = amount
    return stages


def features_of(stages: np.ndarray, pc: StepPieces, memory: Sequence[Mapping[str, float]], layout: Layout,
                model: ModelConfig, cluster: ClusterConfig) -> TrialFeatures:
    """trial_features from the step-time model priced with unit_rates() (`stages`: amounts_of its pieces; the DP
    and optimizer pieces from `pc`) and the memory of the first and the last stage under bare_memory_constants()
    (launcher.plan.pricing prices them in the estimator's pass: one evaluation for both)."""
    fixed = [sum(parts.values()) for parts in memory]
    transient = [parts["activations"] + parts["logits"] + parts["gathered"] for parts in memory]
    return TrialFeatures(stages, pc.weights, pc.microbatches, pc.pp, pc.vpp, 0, int(pc.cpu),
                         _vector(pc.dp_reduce), _vector(pc.dp_gather), _vector(pc.optimizer), (fixed[0], fixed[1]),
                         (transient[0], transient[1]), layout.gbs * model.seq_len, generation(cluster),
                         int(pc.overlap_gather))


def for_layout(features: TrialFeatures, layout: Layout, seq_len: int) -> TrialFeatures:
    """The features of `layout` from those of its batch class (launcher.plan.batch_class: equal but for the
    micro-batch count and the tokens per step)."""
    return dataclasses.replace(features, microbatches=max(1, layout.microbatches),
                               tokens_per_step=layout.gbs * seq_len)


def step_of(amounts: np.ndarray, dp: np.ndarray, weights: np.ndarray, microbatches: np.ndarray, pp: np.ndarray,
            vpp: np.ndarray, overlap_gather: np.ndarray, cpu: np.ndarray, constants: Constants) -> np.ndarray:
    """Each trial's step time from its priced amounts (trials x stage x field), DP collectives (trials x 3) and
    schedule columns: what FeatureTable and a table kept per batch class share."""
    import numpy as np

    first, last, middle = (MicrobatchTimes(*(amounts[:, s, i] for i in range(len(_MB_FIELDS)))) for s in range(3))
    pc = StepPieces((first, last, middle), (weights[:, 0], weights[:, 1], weights[:, 2]), microbatches, pp, vpp,
                    overlap_gather, cpu, dp[:, 0], dp[:, 1], dp[:, 2], constants.overlap_interference,
                    constants.tp_overlap_interference)
    step: np.ndarray = combine(pc, np.maximum)[0]
    return step


def step_of_classes(amounts: np.ndarray, dp: np.ndarray, weights: np.ndarray, pp: np.ndarray, vpp: np.ndarray,
                    overlap_gather: np.ndarray, cpu: np.ndarray, interference: Any, tp_interference: Any,
                    at: np.ndarray, microbatches: np.ndarray) -> np.ndarray:
    """step_of for trials given as batch classes (launcher.plan.batch_class: layouts apart only in the micro-batch
    count): `combine` once per class (amounts: (..., classes, stage, field), dp: (..., classes, 3); the leading
    axes, if any, are a batch of constants), then each trial's step from its class's parts and its own micro-batch
    count (`at`: each trial's class). combine's step is `microbatches x bottleneck + exposed + bubble + optimizer`
    and only that product depends on the micro-batch count, so this is step_of of every trial's own row to the
    last bit (the same IEEE operations, in the same order), with the costly part priced once per class."""
    import numpy as np

    ones = np.ones(amounts.shape[:-2])
    first, last, middle = (MicrobatchTimes(*(amounts[..., s, i] for i in range(len(_MB_FIELDS)))) for s in range(3))
    pc = StepPieces((first, last, middle), (weights[:, 0], weights[:, 1], weights[:, 2]), ones, pp, vpp,
                    overlap_gather, cpu, dp[..., 0], dp[..., 1], dp[..., 2], interference, tp_interference)
    _, bottleneck, exposed, bubble, _ = combine(pc, np.maximum)
    optimizer = dp[..., 2]
    b, e, u, o = (np.broadcast_to(x, ones.shape)[..., at] for x in (bottleneck, exposed, bubble, optimizer))
    step: np.ndarray = microbatches * b + e + u + o
    return step


class FeatureTable:
    """Many trials' features as arrays: predicts all of them for any constants at once."""

    def __init__(self, features: Sequence[TrialFeatures]) -> None:
        import numpy as np

        self.n = len(features)
        f = features
        self.stages = np.array([x.stages for x in f]).reshape(self.n, 3, len(_MB_FIELDS), len(_GROUPS))
        self.weights = np.array([x.weights for x in f], dtype=float).reshape(self.n, 3)
        self.microbatches = np.array([x.microbatches for x in f], dtype=float)
        self.pp = np.array([x.pp for x in f], dtype=float)
        self.vpp = np.array([x.vpp for x in f], dtype=float)
        self.zero3 = np.array([x.zero3 for x in f], dtype=float)
        self.overlap_gather = np.array([x.overlap_gather for x in f], dtype=float)
        self.generation = np.array([x.generation for x in f])
        self.cpu = np.array([x.cpu for x in f], dtype=float)
        self.dp = np.array([[x.dp_reduce, x.dp_gather, x.optimizer] for x in f]).reshape(self.n, 3, len(_GROUPS))
        self.mem_fixed = np.array([x.mem_fixed_gb for x in f], dtype=float).reshape(self.n, 2)
        self.mem_transient = np.array([x.mem_transient_gb for x in f], dtype=float).reshape(self.n, 2)
        self.tokens_per_step = np.array([x.tokens_per_step for x in f], dtype=float)

    def expanded(self) -> FeatureTable:
        """This table with one row per trial (itself; a table kept per batch class expands its rows)."""
        return self

    def log_step_gradient(self, prior: Constants, theta: np.ndarray) -> np.ndarray:
        """d log(step time) / d theta of every trial (a table kept per batch class prices each class once)."""
        return log_step_gradient_of(self, prior, theta)

    def subset(self, index: Sequence[int]) -> FeatureTable:
        import numpy as np

        out = object.__new__(FeatureTable)
        idx = np.asarray(index, dtype=int)
        for name, value in vars(self).items():
            setattr(out, name, value[idx] if isinstance(value, np.ndarray) else value)
        out.n = len(idx)
        return out

    def _rates(self, constants: Constants) -> np.ndarray:
        import numpy as np

        out = np.empty((self.n, len(_GROUPS)))
        for gen in np.unique(self.generation):
            rows = self.generation == gen
            gpu, cpu = np.array(rates(constants, False, str(gen))), np.array(rates(constants, True, str(gen)))
            out[rows] = np.where(self.cpu[rows, None] > 0, cpu[None, :], gpu[None, :])
        return out

    def step_time_s(self, constants: Constants) -> np.ndarray:
        import numpy as np

        r = self._rates(constants)
        return step_of(np.einsum("nsfg,ng->nsf", self.stages, r), np.einsum("nkg,ng->nk", self.dp, r), self.weights,
                       self.microbatches, self.pp, self.vpp, self.overlap_gather, self.cpu, constants)

    def peak_mem_gb(self, constants: Constants) -> np.ndarray:

        return self.peak_mem_quantities_gb(constants)[2]

    def peak_mem_quantities_gb(self, constants: Constants) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(allocated, reserved, device) peak of each trial at its most loaded stage (launcher.plan.mem_quantity:
        allocated = tensors and temporaries, reserved = + the caching allocator's fragmentation, device = + the
        CUDA context and NCCL buffers)."""
        import numpy as np

        context = np.where(self.cpu > 0, constants.cpu_context_gb, constants.gpu_context_gb)
        allocated = self.mem_fixed + constants.transient_share * self.mem_transient
        reserved = allocated + constants.fragmentation_share * self.mem_transient
        stages = reserved + context[:, None]
        best = stages.argmax(axis=1)
        rows = np.arange(self.n)
        return allocated[rows, best], reserved[rows, best], stages[rows, best]


# ------------------------------------------------------------------------------------------------ the fit

@dataclass(frozen=True)
class Observation:
    """One measured trial: its features and what it measured (None: not measured, e.g. an OOM)."""

    features: TrialFeatures
    step_time_s: Optional[float]
    peak_mem_gb: Optional[float] = None
    predicted_step_time_s: Optional[float] = None
    """What an applied calibration predicted for it before it ran (None: no calibration yet). These out-of-sample
    errors keep the uncertainty honest when the physics misses something the fit cannot absorb."""


@dataclass(frozen=True)
class Calibration:
    """The fitted constants and how sure the fit is. `constants` re-predicts any layout."""

    constants: Constants
    prior: Constants
    applied: bool
    """False below min_trials measured trials: `constants` is then the prior, unchanged."""
    n_trials: int
    parameters: dict[str, float] = field(default_factory=dict)
    """Parameter name -> fitted multiplier of its prior value (exp(theta))."""
    parameter_sd: dict[str, float] = field(default_factory=dict)
    """Parameter name -> posterior sd of its log multiplier (prior sd when not fitted)."""
    supported: tuple[str, ...] = ()
    """Parameters the data constrain (posterior sd under half the prior sd)."""
    residual_sd: float = MODEL_ERROR_SD
    """Log-space model error of the step time after the fit (robust, floored)."""
    memory_residual_sd: float = MEMORY_ERROR_SD
    n_holdout: int = 0
    """Trials measured after a calibration predicted them: the fit's out-of-sample check."""
    holdout_error: Optional[float] = None
    """Median |log error| of those predictions (None: none yet)."""
    note: str = ""
    theta: tuple[float, ...] = ()
    covariance: tuple[tuple[float, ...], ...] = ()
    """Posterior covariance of the step-time thetas (STEP_PARAMETERS order)."""

    def to_json(self) -> dict[str, Any]:
        """What a sweep records (ledger, MLflow, report): the constants, the multipliers and how sure they are."""
        return {"applied": self.applied, "n_trials": self.n_trials, "note": self.note,
                "constants": self.constants.to_dict(), "parameters": self.parameters,
                "parameter_sd": self.parameter_sd, "supported": list(self.supported),
                "residual_sd": self.residual_sd, "memory_residual_sd": self.memory_residual_sd,
                "n_holdout": self.n_holdout, "holdout_error": self.holdout_error}

    def predict(self, table: FeatureTable, spread: bool = True) -> Prediction:
        """Step time and peak memory of every trial in `table`, with log-space standard deviations. spread=False:
        the step sd is the model error alone and step_param_sd None: the fitted constants' uncertainty (a
        gradient of every trial's step for every parameter, the costliest part at 50k trials) is not priced, for
        a caller that replaces the step sd (launcher.plan.residuals.corrected does)."""
        import numpy as np

        step = table.step_time_s(self.constants)
        peak = table.peak_mem_gb(self.constants)
        if not spread:
            return Prediction(step, np.full(table.n, self.residual_sd), peak, np.full(table.n, self.memory_residual_sd))
        param_var = np.zeros(table.n)
        if self.covariance:
            grad = table.log_step_gradient(self.prior, np.array(self.theta))
            param_var = np.einsum("ni,ij,nj->n", grad, np.array(self.covariance), grad)
        return Prediction(step, np.sqrt(self.residual_sd ** 2 + param_var), peak,
                          np.full(table.n, self.memory_residual_sd), np.sqrt(param_var))


@dataclass(frozen=True)
class Prediction:
    step_time_s: np.ndarray
    step_sd: np.ndarray        # log-space sd of step_time_s
    peak_mem_gb: np.ndarray
    mem_sd: np.ndarray
    step_param_sd: Optional[np.ndarray] = None
    """The part of step_sd that comes from the fitted constants' uncertainty (the rest is the model error)."""


TRANSFER_SD = 0.15
"""Least sd (log multiplier) of a parameter carried over from another sweep's calibration: the same cluster and
stack at another scale or shape exercise the pieces in other proportions, so a constant the earlier fit pinned
may still move by ~15 %."""


@dataclass(frozen=True)
class Prior:
    """Where a calibration starts: the constants, how far each parameter may move (sd of its log multiplier; a
    parameter not named keeps its Parameter.prior_sd) and the model's log error before any fit."""

    constants: Constants
    parameter_sd: Mapping[str, float] = field(default_factory=dict)
    residual_sd: float = MODEL_ERROR_SD * 2
    memory_residual_sd: float = MEMORY_ERROR_SD
    source: str = ""
    """Where it comes from ('' = the backend's a-priori constants; 'sweeps/NAME' = that sweep's calibration)."""

    @classmethod
    def of(cls, prior: Union[Prior, Constants]) -> Prior:
        return prior if isinstance(prior, Prior) else cls(prior)

    def sd(self, p: Parameter) -> float:
        return float(self.parameter_sd.get(p.name, p.prior_sd))

    @classmethod
    def transferred(cls, constants: Constants, parameter_sd: Mapping[str, float], residual_sd: float,
                    memory_residual_sd: float = MEMORY_ERROR_SD, source: str = "") -> Prior:
        """A finished sweep's calibration (its fitted constants and posterior sds) as the prior of another sweep on
        the same cluster and stack: each sd at least TRANSFER_SD and at most the parameter's own prior sd, the
        model error at least MODEL_ERROR_SD (the new sweep's layouts were never checked)."""
        by_name = {p.name: p for p in PARAMETERS}
        sds = {name: min(by_name[name].prior_sd, max(TRANSFER_SD, float(sd)))
               for name, sd in parameter_sd.items() if name in by_name}
        return cls(constants, sds, max(MODEL_ERROR_SD, float(residual_sd)), max(MIN_RESIDUAL_SD, memory_residual_sd),
                   source)


    @classmethod
    def from_json(cls, data: Mapping[str, Any], base: Constants = DEFAULT, source: str = "") -> Prior:
        """A calibration as written to calibration.json (Calibration.to_json) as the prior of another sweep:
        its constants (fields it does not name keep `base`'s) and uncertainties, through `transferred`."""
        from dataclasses import fields as dc_fields

        names = {f.name for f in dc_fields(Constants)}
        values = {k: float(v) for k, v in dict(data.get("constants") or {}).items() if k in names}
        return cls.transferred(base.with_values(**values), dict(data.get("parameter_sd") or {}),
                               float(data.get("residual_sd", MODEL_ERROR_SD)),
                               float(data.get("memory_residual_sd", MEMORY_ERROR_SD)), source)


def uncalibrated(prior: Union[Prior, Constants] = DEFAULT, n_trials: int = 0, note: str = "") -> Calibration:
    prior = Prior.of(prior)
    return Calibration(prior.constants, prior.constants, False, n_trials,
                       parameters={p.name: 1.0 for p in PARAMETERS},
                       parameter_sd={p.name: prior.sd(p) for p in PARAMETERS},
                       residual_sd=prior.residual_sd, memory_residual_sd=prior.memory_residual_sd, note=note)


def _batched_values(params: Sequence[Parameter], bases: Sequence[Sequence[tuple[str, float]]], thetas: np.ndarray
                    ) -> dict[str, np.ndarray]:
    """Constants field -> its value under each theta (rows of `thetas`): apply_parameters' arithmetic, theta by
    theta with Python floats and math.exp (np.exp may differ from math.exp in the last bit, and the fit's finite
    differences would see it). `bases`: per parameter, (field, value before the fit) of each of its fields."""
    import numpy as np

    values: dict[str, np.ndarray] = {}
    for column, p, fields in zip(thetas.T.tolist(), params, bases):
        for name, base in fields:
            values[name] = np.array([max(0.0, (base + p.offset) * math.exp(t) - p.offset) for t in column])
    return values


class _BatchedConstants:
    """`base` with some fields replaced by arrays over a batch of thetas: launcher.plan.step_time.rates is
    arithmetic only, so one call prices every theta of the batch (elementwise the same IEEE operations as a call
    per Constants, hence the same bits)."""

    def __init__(self, base: Constants, values: Mapping[str, np.ndarray]) -> None:
        self._base = base
        self._values = values

    def __getattr__(self, name: str) -> Any:
        values = self.__dict__["_values"]
        return values[name] if name in values else getattr(self.__dict__["_base"], name)

    def gen_eff(self, generation: str) -> Any:
        return Constants.gen_eff(self, generation)  # type: ignore[arg-type]  # duck-typed: only reads fields


class StepModel:
    """The step time of every trial of a FeatureTable for a batch of parameter vectors at once: what the fit
    evaluates thousands of times. Equal, bit for bit, to `table.step_time_s(apply_parameters(prior, params,
    theta))` for each theta (tests/plan/test_calibrate_fast.py), at the cost of about one such call for the whole
    batch: no Constants is built (dataclasses.replace and its checks were a third of a call), the rates of the
    batch come from one step_time.rates call per generation and device, and `combine` runs once over (batch, trials)
    arrays. A finite-difference Jacobian is then one call instead of one per parameter."""

    _SHARES = ("overlap_interference", "tp_overlap_interference")   # per-theta scalars of `combine`, not rates

    def __init__(self, table: FeatureTable, prior: Constants, params: Sequence[Parameter]) -> None:
        table = table.expanded()   # the columns per trial (a table kept per batch class has them per class)
        self.table, self.prior, self.params = table, prior, tuple(params)
        # Trials that share a generation and device share their rates: (generation, cpu, rows), rows None = all.
        kinds = sorted({(str(g), bool(c > 0)) for g, c in zip(table.generation, table.cpu)})
        self._kinds = [(gen, cpu, None if len(kinds) == 1 else (table.generation == gen) & ((table.cpu > 0) == cpu))
                       for gen, cpu in kinds]
        self._bases = [[(name, getattr(prior, name)) for name in p.fields] for p in self.params]

    def _values(self, thetas: np.ndarray) -> dict[str, np.ndarray]:
        return _batched_values(self.params, self._bases, thetas)

    def rates(self, thetas: np.ndarray, values: Optional[Mapping[str, np.ndarray]] = None) -> np.ndarray:
        """(batch, trials, groups): each trial's rates under each theta (FeatureTable._rates, batched)."""
        import numpy as np

        c = _BatchedConstants(self.prior, self._values(thetas) if values is None else values)
        batch = len(thetas)
        out = np.empty((batch, self.table.n, len(_GROUPS)))
        for gen, cpu, rows in self._kinds:
            r = np.empty((len(_GROUPS), batch))
            for i, x in enumerate(rates(cast(Constants, c), cpu, gen)):     # duck-typed: rates only reads fields
                r[i] = x
            if rows is None:
                out[...] = r.T[:, None, :]
            else:
                out[:, rows] = r.T[:, None, :]
        return out

    def step_time_s(self, thetas: np.ndarray, trials: Optional[tuple[np.ndarray, np.ndarray]] = None) -> np.ndarray:
        """(batch, trials) step times, one row per theta (thetas: (batch, len(params))). trials=(row of each
        trial, its micro-batch count): the table's rows are batch classes (trials apart only in the micro-batch
        count), each priced once (`combine` too: step_of_classes), and each trial's step is its class's with its
        own micro-batch count (the same numbers as a table of one row per trial)."""
        import numpy as np

        t = self.table
        values = self._values(thetas)
        r = self.rates(thetas, values)
        amounts = np.einsum("nsfg,bng->bnsf", t.stages, r)     # summed over g as FeatureTable.step_time_s sums
        dp = np.einsum("nkg,bng->bnk", t.dp, r)
        w, microbatches, pp, vpp, gather, cpu = t.weights, t.microbatches, t.pp, t.vpp, t.overlap_gather, t.cpu
        shares = [values[name][:, None] if name in values else getattr(self.prior, name) for name in self._SHARES]
        if trials is not None:   # combine once per class, then each trial's micro-batch count (step_of_classes)
            at, microbatches = trials
            step_t = step_of_classes(amounts, dp, w, pp, vpp, gather, cpu, shares[0], shares[1], at, microbatches)
            return np.broadcast_to(step_t, (len(thetas), len(microbatches)))
        first, last, middle = (MicrobatchTimes(*(amounts[:, :, s, i] for i in range(len(_MB_FIELDS))))
                               for s in range(3))
        pc = StepPieces((first, last, middle), (w[:, 0], w[:, 1], w[:, 2]), microbatches, pp, vpp,
                        gather, cpu, dp[:, :, 0], dp[:, :, 1], dp[:, :, 2], shares[0], shares[1])
        step: np.ndarray = combine(pc, np.maximum)[0]
        return np.broadcast_to(step, (len(thetas), len(microbatches)))


class MemoryModel:
    """The peak memory of every trial of a FeatureTable for a batch of memory-parameter vectors at once: equal, bit
    for bit, to `table.peak_mem_gb(apply_parameters(constants, MEMORY_PARAMETERS, theta))` for each theta."""

    def __init__(self, table: FeatureTable, constants: Constants, params: Sequence[Parameter] = MEMORY_PARAMETERS
                 ) -> None:
        self.table, self.constants, self.params = table.expanded(), constants, tuple(params)
        self._bases = [[(name, getattr(constants, name)) for name in p.fields] for p in self.params]

    def peak_mem_gb(self, thetas: np.ndarray) -> np.ndarray:
        """(batch, trials): FeatureTable.peak_mem_quantities_gb's device peak, one row per theta."""
        import numpy as np

        values = _batched_values(self.params, self._bases, thetas)
        c = {name: values[name][:, None] if name in values else np.full((len(thetas), 1), getattr(self.constants, name))
             for name in ("cpu_context_gb", "gpu_context_gb", "transient_share", "fragmentation_share")}
        t = self.table
        context = np.where(t.cpu > 0, c["cpu_context_gb"], c["gpu_context_gb"])
        allocated = t.mem_fixed + c["transient_share"][:, :, None] * t.mem_transient
        reserved = allocated + c["fragmentation_share"][:, :, None] * t.mem_transient
        out: np.ndarray = (reserved + context[:, :, None]).max(axis=2)   # the most loaded stage's
        return out


def log_step_gradient_of(table: FeatureTable, prior: Constants, theta: np.ndarray, eps: float = 1e-4,
                         trials: Optional[tuple[np.ndarray, np.ndarray]] = None) -> np.ndarray:
    """d log(step time) / d theta for every trial (central differences; STEP_PARAMETERS order), every
    perturbation in one batched evaluation (StepModel; trials: as StepModel.step_time_s's)."""
    import numpy as np

    k = len(STEP_PARAMETERS)
    up, down = theta + np.zeros((k, k)), theta + np.zeros((k, k))
    for i in range(k):       # theta[i] + eps exactly as `up[i] += eps` on a copy did
        up[i, i] += eps
        down[i, i] -= eps
    step = StepModel(table, prior, STEP_PARAMETERS).step_time_s(np.concatenate([up, down]), trials)
    out: np.ndarray = ((np.log(step[:k]) - np.log(step[k:])) / (2 * eps)).T
    return out


def forward_jacobian(residuals_batch: Callable[[np.ndarray], np.ndarray]) -> Callable[[np.ndarray], np.ndarray]:
    """The Jacobian scipy.optimize.least_squares' default jac='2-point' computes (scipy.optimize._numdiff:
    approx_derivative's relative step sqrt(eps) x max(1, |x|), forward differences, dx recomputed as
    (x + h) - x), from ONE call of `residuals_batch` (rows: residual vectors of the rows of its argument) on x
    and its n forward steps. Same numbers as the default, so the same fit, in one evaluation instead of n + 1."""
    import numpy as np

    def jac(x: np.ndarray) -> np.ndarray:
        n = len(x)
        sign = (x >= 0).astype(float) * 2 - 1
        h = np.finfo(np.float64).eps ** 0.5 * sign * np.maximum(1.0, np.abs(x))
        steps = np.repeat(x[None, :], n + 1, axis=0)
        for i in range(n):
            steps[i + 1, i] = x[i] + h[i]
        f = residuals_batch(steps)
        dx = np.array([(x[i] + h[i]) - x[i] for i in range(n)])
        out: np.ndarray = ((f[1:] - f[0]) / dx[:, None]).T
        return out

    return jac


def load_fitter() -> None:
    """Import the fit's solver now (scipy.optimize: ~0.3 s, once a process) rather than in the first refit: the
    sweep loop does it after its first progress line, while its first jobs run."""
    from scipy.optimize import least_squares  # noqa: F401


def _fit(residuals: Callable[[np.ndarray], np.ndarray], prior_sd: np.ndarray, start: Optional[np.ndarray] = None,
         jac: Union[str, Callable[[np.ndarray], np.ndarray]] = "2-point") -> tuple[np.ndarray, np.ndarray]:
    theta, cov, _ = _solve(residuals, prior_sd, start, jac)
    return theta, cov


def _solve(residuals: Callable[[np.ndarray], np.ndarray], prior_sd: np.ndarray, start: Optional[np.ndarray] = None,
           jac: Union[str, Callable[[np.ndarray], np.ndarray]] = "2-point") -> tuple[np.ndarray, np.ndarray, float]:
    """_fit's theta and covariance, and the objective at theta (least_squares' cost: robust loss + prior)."""
    import numpy as np
    from scipy.optimize import least_squares  # lazy: planning never needs scipy

    x0 = np.zeros(len(prior_sd)) if start is None else start
    result = least_squares(residuals, x0, jac=jac, loss="soft_l1", f_scale=ROBUST_SCALE, method="trf",
                           x_scale=prior_sd)
    jac_at = result.jac
    try:
        cov = np.linalg.inv(jac_at.T @ jac_at)
    except np.linalg.LinAlgError:
        cov = np.diag(prior_sd ** 2)
    return result.x, cov, float(result.cost)


PROBE_STEPS = (1.0, 2.0)
"""calibrate(probe=True): a parameter the fit left undetermined (posterior variance above PROBE_UNDETERMINED of its
prior's) is tried again from its fitted value raised by these many prior sds, and the start with the lower
objective kept. Why: the step time is max(GPU work, CPU dispatch) per micro-batch (launcher.plan.step_time), so
while every measured trial is GPU-bound at the current dispatch cost its gradient is zero and a local fit never
raises it, however well a dispatch-bound model would explain the measurements (issue 16, search16: the vTrain
1024-hidden gbs-8 grids are dispatch-bound, x3 the prior, and the k-trial fit kept x1.00 until the end)."""
PROBE_UNDETERMINED = 0.8


def calibrate(observations: Sequence[Observation], prior: Union[Prior, Constants] = DEFAULT, *,
              min_trials: int = MIN_TRIALS, start: Optional[Calibration] = None, probe: bool = False
              ) -> Calibration:
    """Fit the constants to the measured trials (those with a step time). Pure; ~ms for 1,000 trials. `prior`: the
    backend's constants, or a Prior (e.g. another sweep's calibration, Prior.transferred). `start`: an earlier fit
    of the same prior to start the search from (the same optimum, found in fewer iterations). `probe`: try the
    parameters the fit left undetermined again from higher starts (PROBE_STEPS)."""
    given = Prior.of(prior)
    timed = [o for o in observations if o.step_time_s and o.step_time_s > 0]
    if len(timed) < min_trials:
        return uncalibrated(given, len(timed), f"{len(timed)} of {min_trials} measured trials needed: the a-priori "
                                               "constants are kept")
    x0 = tuple(start.theta) if start is not None and start.applied and len(start.theta) == len(STEP_PARAMETERS) \
        else None
    # The result depends on nothing else: a replay benchmark refits the same measurements under several strategies
    # (the adaptive search and the calibrated order agree on their first picks), so a repeat is looked up.
    key = ((given.constants, tuple(sorted(given.parameter_sd.items())), given.residual_sd, given.memory_residual_sd),
           min_trials, x0, probe, tuple((id(o.features), o.step_time_s, o.peak_mem_gb, o.predicted_step_time_s)
                                 for o in timed))
    cached = _FITS.get(key)
    if cached is not None and all(a is o.features for a, o in zip(cached[1], timed)):
        return cached[0]
    out = _calibrate(timed, given, min_trials, x0, probe)
    if len(_FITS) >= FITS_CACHED:
        _FITS.clear()
    _FITS[key] = (out, tuple(o.features for o in timed))    # the features kept alive: their ids stay theirs
    return out


_FITS: dict[tuple[Any, ...], tuple[Calibration, tuple[TrialFeatures, ...]]] = {}
"""calibrate's recent results by their inputs (the features by identity, kept with the result)."""
FITS_CACHED = 256


def forget() -> None:
    """Drops the fits kept (a finished sweep's: launcher.run.loop.run_sweep)."""
    _FITS.clear()


def _calibrate(timed: Sequence[Observation], given: Prior, min_trials: int, x0: Optional[tuple[float, ...]],
               probe: bool = False) -> Calibration:
    """calibrate's fit of the measured trials `timed` (at least min_trials), from theta `x0` (None: the prior)."""
    import numpy as np

    prior = given.constants
    table = FeatureTable([o.features for o in timed])
    measured = np.log([o.step_time_s for o in timed if o.step_time_s])  # every row passes: narrows the Optional
    sd = np.array([given.sd(p) for p in STEP_PARAMETERS])

    model = StepModel(table, prior, STEP_PARAMETERS)

    def fit(scale: float, start: Optional[np.ndarray] = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
        import numpy as np

        def residuals_batch(thetas: np.ndarray) -> np.ndarray:
            """One residual vector per row of `thetas`: the step times' log errors, then the priors."""
            import numpy as np

            predicted = np.log(model.step_time_s(thetas))
            return np.concatenate([(predicted - measured) / scale, thetas / sd], axis=1)

        one, jac = (lambda theta: residuals_batch(theta[None, :])[0]), forward_jacobian(residuals_batch)
        theta, cov, cost = _solve(one, sd, start, jac=jac)
        for i in np.flatnonzero(np.diag(cov) > PROBE_UNDETERMINED * sd ** 2) if probe else ():
            for step in PROBE_STEPS:
                raised = theta.copy()
                raised[i] += step * sd[i]
                tried = _solve(one, sd, raised, jac=jac)
                if tried[2] < cost - 1e-9:
                    theta, cov, cost = tried
        errors = np.log(model.step_time_s(theta[None, :])[0]) - measured
        k_eff = float(np.sum(1 - np.diag(cov) / sd ** 2))       # parameters the data determined (0..k)
        spread = 1.4826 * float(np.median(np.abs(errors)))       # robust sd of the log errors
        return theta, cov, errors, spread * math.sqrt(len(timed) / max(1.0, len(timed) - k_eff))

    scale = MODEL_ERROR_SD
    theta, cov, errors, spread = fit(scale, None if x0 is None else np.array(x0))
    if len(timed) > 2 * len(STEP_PARAMETERS) and spread < MODEL_ERROR_SD:
        # Enough trials, and the model fits them better than assumed: weigh them by the error they show
        # (empirical Bayes), so that a well-measured sweep is not held back by the priors.
        scale = max(spread, MIN_RESIDUAL_SD)
        theta, cov, errors, spread = fit(scale, theta)
    constants = apply_parameters(prior, STEP_PARAMETERS, theta)
    held = np.array([math.log(o.step_time_s / o.predicted_step_time_s) for o in timed
                     if o.step_time_s and o.predicted_step_time_s])
    holdout = float(np.median(np.abs(held))) if len(held) else None
    residual_sd = max(MIN_RESIDUAL_SD, spread, 1.4826 * (holdout or 0.0))
    cov = cov * max(1.0, (residual_sd / scale) ** 2)

    mem = [o for o in timed if o.peak_mem_gb]
    mem_theta, mem_sd = np.zeros(len(MEMORY_PARAMETERS)), MEMORY_ERROR_SD
    if len(mem) >= min_trials:
        mem_table = FeatureTable([o.features for o in mem])
        mem_measured = np.log([o.peak_mem_gb for o in mem if o.peak_mem_gb])  # every row passes: narrows the Optional
        msd = np.array([given.sd(p) for p in MEMORY_PARAMETERS])

        mem_model = MemoryModel(mem_table, constants)

        def mem_residuals_batch(thetas: np.ndarray) -> np.ndarray:
            import numpy as np

            predicted = np.log(mem_model.peak_mem_gb(thetas))
            return np.concatenate([(predicted - mem_measured) / MEMORY_ERROR_SD, thetas / msd], axis=1)

        mem_theta, _ = _fit(lambda t: mem_residuals_batch(t[None, :])[0], msd,
                            jac=forward_jacobian(mem_residuals_batch))
        fitted = mem_table.peak_mem_gb(apply_parameters(constants, MEMORY_PARAMETERS, mem_theta))
        mem_sd = max(MIN_RESIDUAL_SD, 1.4826 * float(np.median(np.abs(np.log(fitted) - mem_measured))))
    constants = apply_parameters(constants, MEMORY_PARAMETERS, mem_theta)
    post_sd = np.sqrt(np.diag(cov))
    names = [p.name for p in STEP_PARAMETERS]
    supported = tuple(n for n, s, s0 in zip(names, post_sd, sd) if s < 0.5 * s0)
    params = {n: float(math.exp(t)) for n, t in zip(names, theta)}
    params.update({p.name: float(math.exp(t)) for p, t in zip(MEMORY_PARAMETERS, mem_theta)})
    return Calibration(constants, prior, True, len(timed), params,
                       {**dict(zip(names, map(float, post_sd))), **{p.name: given.sd(p) for p in MEMORY_PARAMETERS}},
                       supported, residual_sd, mem_sd, len(held), holdout,
                       f"fitted on {len(timed)} measured trials; constrained: {', '.join(supported) or 'none'}",
                       tuple(map(float, theta)), tuple(tuple(map(float, row)) for row in cov))
