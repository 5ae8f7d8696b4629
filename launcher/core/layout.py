"""One point of the grid: how a trial splits the model over its GPUs and batches its data.

The fields of `Layout` are the project's one vocabulary of parallel dimensions. Each carries a `Dim` in its
metadata (grid default, valid values, label, unit, doc), and everything that lists dimensions is derived from
them: the config schema's `grid` section (launcher.config.schema.GridConfig), grid expansion, plan.csv, the ledger's
columns, the OOM-dominance rule, the recommendations' include entries and the MLflow params. Adding a dimension
is adding a field here (plus its rules and its cost in the estimator).
"""

from __future__ import annotations

import hashlib
import json
import operator
from collections.abc import Iterator, Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any, Optional

RECOMPUTE_MODES = ("none", "selective", "full")
ZERO_STAGES = (0, 1, 2, 3)
ALWAYS_SHOWN = "<always shown>"
"""Dim.hidden_at for a label part that is never left out."""


@dataclass(frozen=True)
class Dim:
    """What a Layout field means and how it shows."""

    doc: str
    kind: str
    """'world' (how many GPUs/nodes), 'split' (how the model is cut), 'batch', or 'memory' (what is kept/sharded)."""
    grid: Optional[tuple[Any, ...]] = None
    """Default list in the config's grid section; None for the world (gpus/nodes) and derived dimensions (dp)."""
    choices: Optional[tuple[Any, ...]] = None
    """Allowed values (None: any integer >= 1 for int fields)."""
    label: str = "{name}{value}"
    """Short-label part ('' = never shown); {name} and {value} are filled in."""
    hidden_at: Any = ALWAYS_SHOWN
    """Value at which the label part is left out."""
    factor: bool = False
    """A factor of the world size: gpus = the product of the factor dimensions (tp x pp x cp x dp)."""
    hashed_at_default: bool = True
    """False for a dimension added after sweeps existed: at its default it stays out of the config hash, so the
    trials of an older sweep keep their identity."""
    unit: str = ""


def _dim(default: Any = MISSING, **meta: Any) -> Any:
    return field(default=default, metadata={"dim": Dim(**meta)})


@dataclass(frozen=True, slots=True)
class Layout:
    """A trial's parallel layout. world (gpus) = tp * pp * cp * dp is checked by the rules, not here."""

    gpus: int = _dim(doc="World size: GPUs, or ranks on the local CPU.", kind="world", label="", unit="GPUs")
    nodes: int = _dim(doc="Nodes the job spans.", kind="world", label="{value}n", hidden_at=1, unit="nodes")
    tp: int = _dim(doc="Tensor-parallel size.", kind="split", grid=(1,), factor=True)
    pp: int = _dim(doc="Pipeline-parallel size (stages).", kind="split", grid=(1,), factor=True)
    dp: int = _dim(doc="Data-parallel size; in the grid None means derived: world / the other factors.",
                   kind="split", factor=True)
    cp: int = _dim(1, doc="Context-parallel size: the sequence split over cp ranks (ring attention).", kind="split",
                   grid=(1,), factor=True, hidden_at=1, hashed_at_default=False)
    vpp: int = _dim(1, doc="Virtual pipeline stages per rank (interleaved 1F1B when > 1).", kind="split", grid=(1,),
                    hidden_at=1)
    ep: int = _dim(1, doc="Expert-parallel size: the routed experts of an MoE model split over ep ranks (carved out of "
                   "tp x cp x dp, Megatron's expert mesh); 1 for dense models.", kind="split", grid=(1,), hidden_at=1,
                   hashed_at_default=False)
    etp: int = _dim(1, doc="Expert tensor-parallel size: each expert's FFN split over etp ranks (Megatron "
                    "--expert-tensor-parallel-size, rendered explicitly; 1 keeps experts whole).", kind="split",
                    grid=(1,), hidden_at=1, hashed_at_default=False)
    mbs: int = _dim(1, doc="Micro-batch size (sequences per micro-batch).", kind="batch", grid=(1,), unit="sequences")
    gbs: int = _dim(1, doc="Global batch size (sequences per iteration).", kind="batch", grid=(8,),
                    unit="sequences")
    recompute: str = _dim("none", doc="Activation recomputation: none, selective (attention core) or full.",
                          kind="memory", grid=("none",), choices=RECOMPUTE_MODES, label="rc={value}",
                          hidden_at="none")
    recompute_every: int = _dim(1, doc="With recompute full: every k-th layer is checkpointed, 1/k of the layers of "
                                       "each model chunk (k = 1: all of them; Megatron's --recompute-method block "
                                       "--recompute-num-layers layers/(pp x vpp x k)); label rc/k.", kind="memory",
                                grid=(1,), label="rc/{value}", hidden_at=1, hashed_at_default=False)
    sequence_parallel: bool = _dim(False, doc="Megatron sequence parallelism (needs tp > 1).", kind="memory",
                                   grid=(False,), label="sp", hidden_at=False)
    zero_stage: int = _dim(0, doc="DeepSpeed ZeRO stage 0-3.", kind="memory", grid=(0,), choices=ZERO_STAGES,
                           label="zero{value}", hidden_at=0)
    distributed_optimizer: bool = _dim(False, doc="Megatron's distributed optimizer (shards the optimizer state).",
                                       kind="memory", grid=(False,), label="distopt", hidden_at=False)

    @property
    def microbatches(self) -> int:
        """Micro-batches per pipeline per iteration, m = gbs / (mbs * dp) (gradient-accumulation steps)."""
        return self.gbs // max(1, self.mbs * self.dp)

    def recomputed_layers(self, layers: int) -> int:
        """Layers of each model chunk (layers / (pp x vpp)) whose forward runs again in the backward: all of them
        under recompute full with recompute_every 1, one in recompute_every otherwise (0 without full recompute)."""
        if self.recompute != "full":
            return 0
        return layers // max(1, self.pp * self.vpp) // max(1, self.recompute_every)

    @property
    def gpus_per_node(self) -> int:
        return max(1, self.gpus // max(1, self.nodes))

    @property
    def sequence_shards(self) -> int:
        """How many ranks share one sequence (cp): each holds and computes seq_len / cp tokens of it."""
        return self.cp

    @property
    def gradient_group(self) -> int:
        """Ranks holding the same parameters, over which gradients are reduced and optimizer state is sharded:
        dp x cp (context-parallel ranks hold the same weights, Megatron's data-parallel group with CP)."""
        return self.dp * self.cp

    @property
    def model_parallel(self) -> int:
        """GPUs one model replica spans: the product of the world factors other than dp."""
        size = 1
        for name in FACTORS:
            if name != "dp":
                size *= getattr(self, name)
        return size

    @property
    def world(self) -> int:
        """The product of the world factors (tp x pp x cp x dp), which the rules compare with gpus."""
        return self.model_parallel * self.dp

    def to_dict(self) -> dict[str, Any]:
        # asdict(self) without its recursive deep copy (every value is a number, a string or a bool): plan.csv
        # and the search convert every trial of a 50k-trial plan
        return {name: getattr(self, name) for name in NAMES}

    def config_hash(self, context: str = "") -> str:
        """Stable identity of the trial: the layout plus the model/cluster/backend context."""
        payload = _SORTED_JSON.encode({"layout": _hashed(self), "context": context})
        return hashlib.sha256(payload.encode()).hexdigest()[:12]

    def label(self) -> str:
        """The one human spelling of a layout, e.g. 'tp2 pp2 dp1 cp2 mbs1 gbs8 rc=full sp 2n': every dimension in
        field order (world last), each as its Dim.label; a dimension at its Dim.hidden_at value (cp1, vpp1,
        rc=none, no sp, zero0, no distopt, 1 node) is left out, so two different layouts never share a label."""
        parts = [_part(d, getattr(self, d.name)) for d in DIMENSIONS if d.kind != "world"]
        parts += [_part(d, getattr(self, d.name)) for d in DIMENSIONS if d.kind == "world"]
        return " ".join(p for p in parts if p)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Layout:
        """From a dict with at least the required fields; unknown keys are ignored, missing ones take defaults."""
        return cls(**{name: data[name] for name in NAMES if name in data})

    def replace(self, **changes: Any) -> Layout:
        from dataclasses import replace

        return replace(self, **changes)


@dataclass(frozen=True)
class Dimension:
    """A Layout field with its metadata: the unit every derived list is made of."""

    name: str
    type: type
    default: Any
    dim: Dim

    @property
    def kind(self) -> str:
        return self.dim.kind

    @property
    def required(self) -> bool:
        return self.default is MISSING


_TYPES = {"int": int, "str": str, "bool": bool}


def _dimensions() -> tuple[Dimension, ...]:
    return tuple(Dimension(f.name, _TYPES[str(f.type)], f.default, f.metadata["dim"]) for f in fields(Layout))


# The registry. Every list of dimensions, label, column and MLflow param is derived from it (tests/core/
# test_new_dimension.py adds a dimension to a copy of this file and follows it through). What adding a dimension
# still takes, outside the code of the feature it serves, is what the dimension means; ep/etp (issue 18) needed
# these files besides this one (MoE-only code, launcher/plan/moe.py, launcher/workload/, the MoE model and sweep
# configs, is not counted):
#   launcher/plan/rules.py            its validity rules (ep_dense, etp_dense, experts_ep, ep_world, moe_ffn_etp,
#                                     ep_node) and the expert mesh the rules' messages show
#   launcher/plan/step_time.py        its cost: the experts' GEMMs per ep/etp rank, the dispatch all-to-alls, the
#                                     expert-data-parallel gradient reduction (memory reads it through plan/moe.py)
#   launcher/backends/megatron_lm.py  Megatron-LM's flags --expert-model-parallel-size, --expert-tensor-parallel-size
#   launcher/backends/megatron_flags.txt  those flags in the list of flags Megatron-LM accepts (the renderer's check)
#   launcher/backends/torch_workload.py   the workload's flags --ep, --etp
# The grid schema, grid expansion, checks, labels, config hash, plan.csv, ledger columns, MLflow params, the
# scheduler's distance, the measured tables and the failure classifier's parallel degrees needed no edit.
DIMENSIONS: tuple[Dimension, ...] = _dimensions()
NAMES: tuple[str, ...] = tuple(d.name for d in DIMENSIONS)
WORLD: tuple[str, ...] = tuple(d.name for d in DIMENSIONS if d.kind == "world")
"""gpus and nodes: the grid gives one of them, the other follows from the cluster."""
FACTORS: tuple[str, ...] = tuple(d.name for d in DIMENSIONS if d.dim.factor)
"""The dimensions whose product is the world size."""
GRID_DIMENSIONS: tuple[str, ...] = tuple(d.name for d in DIMENSIONS if d.kind != "world")
"""The grid section's lists besides the world (dp included: None there means derived)."""
SHAPE: tuple[str, ...] = tuple(d.name for d in DIMENSIONS if d.kind in ("world", "split", "memory"))
"""Everything but the batch: two layouts with the same shape differ only in mbs/gbs (OOM dominance)."""


NUMERIC: tuple[str, ...] = tuple(d.name for d in DIMENSIONS if d.type is int)
"""Integer dimensions (sizes, counts, the ZeRO stage): compared on a log scale by the scheduler."""
CATEGORICAL: tuple[str, ...] = tuple(d.name for d in DIMENSIONS if d.type is not int)
"""Choices and switches (recompute, sequence_parallel, distributed_optimizer): equal or not."""


def as_layout(layout: Layout | Mapping[str, Any]) -> Layout:
    """A Layout, or a layout stored as a dict (plan.csv rows, JSON files, a trial record as plain data) as one."""
    return layout if isinstance(layout, Layout) else Layout.from_dict(layout)


def label_of(layout: Layout | Mapping[str, Any]) -> str:
    """Layout.label() of a Layout or of a layout stored as a dict (plan.csv rows, JSON files)."""
    return as_layout(layout).label()


def dimension(name: str) -> Dimension:
    for d in DIMENSIONS:
        if d.name == name:
            return d
    raise KeyError(name)


def _part(d: Dimension, value: Any) -> str:
    if not d.dim.label or value == d.dim.hidden_at:
        return ""
    return d.dim.label.format(name=d.name, value=value)


def _hashed(layout: Layout) -> dict[str, Any]:
    values = _ALL_VALUES(layout)
    return {name: value for (name, always, default), value in zip(_HASHED, values) if always or value != default}


_SORTED_JSON = json.JSONEncoder(sort_keys=True)
"""json.dumps(..., sort_keys=True) without a new encoder per call (every trial of a 50k-trial plan is hashed)."""
_HASHED = tuple((d.name, d.dim.hashed_at_default, d.default) for d in DIMENSIONS)
_ALL_VALUES = operator.attrgetter(*(d.name for d in DIMENSIONS))


def grid_defaults() -> Iterator[tuple[str, Optional[list[Any]]]]:
    """(name, default list) of each grid dimension, in field order (None: derived, e.g. dp)."""
    for d in DIMENSIONS:
        if d.kind != "world":
            yield d.name, None if d.dim.grid is None else list(d.dim.grid)
