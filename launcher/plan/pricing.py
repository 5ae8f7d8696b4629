"""One pass over a plan's batch classes: the estimator's parts and the calibration's features from one evaluation.

The planner prices each batch class (launcher.plan.batch_class) for its estimates, and the sweep's search
(launcher.run.search) needs the kept classes' features (launcher.plan.calibrate.trial_features: the step-time
model evaluated with unit rates, the memory without the fitted overheads). Pricing them apart evaluated the model
twice per class (~17k classes in a 50,000-trial plan, seconds before the sweep's first progress line: issue 19).
Here one evaluation gives both: the step-time pieces are linear in the rates (launcher.plan.step_time), so the
model runs once with rates that are numpy vectors, the unit vector of each rate group and, as one more component,
the constants' own rate. numpy's elementwise arithmetic is IEEE arithmetic and each component goes through the
same operations in the same order as in an evaluation of its own, so the last component is the estimator's pieces
and the others trial_features' amounts, to the last bit (tests/plan/test_pricing.py). The memory is priced once per
stage (launcher.plan.memory.stage_amounts_gb), then completed with the constants and without their overheads.

The memory comes first: whether a layout is kept depends on its class's peak alone (launcher.plan.band), so the
classes the plan only counts as pruned are never priced for their step time, and only the kept ones get features.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, NamedTuple, Optional

from launcher.config.schema import ClusterConfig, ModelConfig
from launcher.core.errors import ConfigError
from launcher.core.layout import Layout
from launcher.core.names import is_cpu_standin
from launcher.plan.batch_class import batch_class
from launcher.plan.calibrate import TrialFeatures, bare_memory_constants, features_of, unit_rates
from launcher.plan.constants import Constants, constants_for
from launcher.plan.estimator import ESTIMATOR_PRECISIONS, Estimate, of_class_step
from launcher.plan.hardware import generation
from launcher.plan.memory import (
    StageAmounts,
    peak_of,
    peak_stages,
    stage_amounts_gb,
    stage_parts_gb,
    uses_flash_attention,
)
from launcher.plan.stack import stack_name
from launcher.plan.step_time import (
    ClassStep,
    MicrobatchTimes,
    Rates,
    StageMemo,
    StepPieces,
    class_step,
    rates,
    step_pieces,
)
from launcher.plan.workload import Workload

if TYPE_CHECKING:
    import numpy as np


class ClassPrice(NamedTuple):
    """A batch class's memory (peak GB and breakdown under the constants, and each stage's amounts) and, once
    priced, its step pieces under the constants and the parts of its step time they give (step_time.class_step)."""

    peak_gb: float
    mem: dict[str, float]
    amounts: dict[int, StageAmounts]
    pieces: Optional[StepPieces] = None
    step: Optional[ClassStep] = None


class ClassPricer:
    """The batch classes of one plan (one model, cluster, precision, flash attention, backend and constants)."""

    def __init__(self, model: ModelConfig, cluster: ClusterConfig, precision: str, flash: Optional[bool],
                 backend: str, constants: Optional[Constants] = None) -> None:
        """As launcher.plan.estimator.estimate's arguments (flash None: assumed for 16-bit training; constants
        None: those of each workload's stack)."""
        if precision not in ESTIMATOR_PRECISIONS:
            raise ConfigError("precision", precision, f"use one of {', '.join(ESTIMATOR_PRECISIONS)}")
        self.model, self.cluster, self.precision, self.backend = model, cluster, precision, backend
        self.flash = uses_flash_attention(precision) if flash is None else flash
        self._given = constants
        self._constants: dict[Workload, tuple[Constants, Rates]] = {}
        self.cpu = is_cpu_standin(cluster.gpu)
        self._memos: dict[int, tuple[Rates, StageMemo]] = {}
        """id(rates) -> (the rates, step_pieces' memo of the stages priced with them)."""
        self.classes: dict[tuple[Layout, Workload], ClassPrice] = {}
        self.features: dict[Layout, TrialFeatures] = {}
        """batch class -> its calibration features (launcher.plan.calibrate), for the classes estimated with
        features=True."""

    def price(self, layout: Layout, workload: Workload) -> tuple[tuple[Layout, Workload], ClassPrice]:
        """The layout's batch class (with the workload: the key of self.classes) and its price so far: its memory
        (the predicted peak is the layout's), priced once per class."""
        key = (batch_class(layout), workload)
        price = self.classes.get(key)
        if price is None:
            cls = key[0]
            amounts = {stage: stage_amounts_gb(self.model, self.cluster, cls, self.precision, stage, self.flash,
                                               workload=workload, backend=self.backend)
                       for stage in peak_stages(cls)}
            constants = self._of(workload)[0]
            peak, mem = peak_of(stage_parts_gb(amounts[stage], constants, self.cpu) for stage in peak_stages(cls))
            price = self.classes[key] = ClassPrice(peak, mem, amounts)
        return key, price

    def estimate(self, layout: Layout, workload: Workload, *, features: bool = False) -> Estimate:
        """launcher.plan.estimator.estimate of `layout` (to the last bit); `features`: its class's calibration
        features too, into self.features (priced in the same evaluation)."""
        return self.estimate_of(layout, *self.price(layout, workload), features=features)

    def estimate_of(self, layout: Layout, key: tuple[Layout, Workload], price: ClassPrice, *,
                    features: bool = False) -> Estimate:
        """estimate() with the layout's class and price from price()."""
        cls, workload = key
        if price.step is None or (features and cls not in self.features):
            pieces = self._pieces(cls, workload, price, features)
            price = self.classes[key] = price._replace(pieces=pieces,
                                                       step=class_step(pieces, self._of(workload)[0], self.cpu))
        assert price.step is not None
        return of_class_step(self.model, self.cluster, layout, price.peak_gb, price.mem, price.step)

    def _of(self, workload: Workload) -> tuple[Constants, Rates]:
        """The constants and rates of a workload (estimate's: the given constants, else its stack's)."""
        got = self._constants.get(workload)
        if got is None:
            constants = self._given or constants_for(stack_name(workload, self.backend))
            got = self._constants[workload] = (constants, rates(constants, self.cpu, generation(self.cluster)))
        return got

    def _memo(self, r: Rates) -> StageMemo:
        """step_pieces' memo for the rates `r` (kept with them: the key is their identity)."""
        got = self._memos.get(id(r))
        if got is None:
            got = self._memos[id(r)] = (r, StageMemo())
        return got[1]

    @staticmethod
    def _split(mb: MicrobatchTimes, width: int) -> tuple[np.ndarray, MicrobatchTimes]:
        """A stage priced with_units as (its units' amounts: field x component, its times at the own rates): the
        rows calibrate.amounts_of gives it (a number fills its row)."""
        import numpy as np

        rows = np.empty((len(mb), width))
        for i, amount in enumerate(mb):
            rows[i] = amount
        return rows[:, :-1].copy(), MicrobatchTimes(*rows[:, -1].tolist())

    def _pieces(self, cls: Layout, workload: Workload, price: ClassPrice, features: bool) -> StepPieces:
        own = self._of(workload)[1]
        if not features:
            return step_pieces(self.model, self.cluster, cls, self.precision, self.flash, own, self.cpu,
                               workload=workload, backend=self.backend, memo=self._memo(own))
        import numpy as np

        units = with_units(own)
        both = step_pieces(self.model, self.cluster, cls, self.precision, self.flash, units,
                           self.cpu, workload=workload, backend=self.backend, memo=self._memo(units))
        # calibrate.amounts_of(both) split into the units' components and the own rate's, stage by stage
        width = len(units.gemm)
        (units0, own0), (units1, own1), (units2, own2) = (self._split(mb, width) for mb in both.stages)
        bare = bare_memory_constants()
        memory = [stage_parts_gb(price.amounts[stage], bare, self.cpu) for stage in (0, cls.pp - 1)]
        self.features[cls] = features_of(np.stack((units0, units1, units2)), _component(both, _units), memory, cls,
                                         self.model, self.cluster)
        own_stages = (own0, own1, own2)
        first, last, middle = both.stages   # the same object repeated where pp < 3: kept so
        return _component(both, _own)._replace(stages=(
            own_stages[0], own_stages[0] if last is first else own_stages[1],
            own_stages[0] if middle is first else own_stages[2]))


@functools.lru_cache(maxsize=16)
def with_units(own: Rates) -> Rates:
    """Each rate as its unit vector (calibrate.unit_rates) and, last, its own value."""
    import numpy as np

    return Rates(*(np.append(unit, value) for unit, value in zip(unit_rates(), own)))


def _units(x: np.ndarray) -> np.ndarray:
    return x[:-1]


def _own(x: np.ndarray) -> float:
    return float(x[-1])


def _component(pc: StepPieces, part: Any) -> StepPieces:
    """The DP and optimizer pieces of an evaluation with_units as `part` takes them from each vector (a number
    stays: an amount that is no product of a rate is the same in every evaluation); the stages are amounts_of's."""
    import numpy as np

    def one(x: Any) -> Any:
        return part(x) if isinstance(x, np.ndarray) else x

    return pc._replace(dp_reduce=one(pc.dp_reduce), dp_gather=one(pc.dp_gather), optimizer=one(pc.optimizer))
