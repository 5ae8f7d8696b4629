"""One point of the grid: how a trial splits the model over its GPUs and batches its data."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, fields

GRID_DIMENSIONS = ("nodes", "gpus", "tp", "pp", "dp", "vpp", "mbs", "gbs", "recompute", "sequence_parallel",
                   "zero_stage", "distributed_optimizer")


@dataclass(frozen=True, slots=True)
class Layout:
    """A trial's parallel layout. world (gpus) = tp * pp * dp is checked by the constraints, not here."""

    gpus: int
    """World size (GPUs, or ranks on the local CPU)."""
    nodes: int
    """Nodes the job spans."""
    tp: int
    pp: int
    dp: int
    vpp: int = 1
    mbs: int = 1
    gbs: int = 1
    recompute: str = "none"
    sequence_parallel: bool = False
    zero_stage: int = 0
    distributed_optimizer: bool = False

    @property
    def microbatches(self) -> int:
        """Micro-batches per pipeline per iteration, m = gbs / (mbs * dp) (gradient-accumulation steps)."""
        return self.gbs // max(1, self.mbs * self.dp)

    @property
    def gpus_per_node(self) -> int:
        return max(1, self.gpus // max(1, self.nodes))

    def to_dict(self) -> dict:
        return asdict(self)

    def config_hash(self, context: str = "") -> str:
        """Stable identity of the trial: the normalised layout plus the model/cluster/backend context."""
        payload = json.dumps({"layout": self.to_dict(), "context": context}, sort_keys=True)
        return hashlib.sha256(payload.encode()).hexdigest()[:12]

    def short(self) -> str:
        """Human label, e.g. 'tp2 pp2 dp1 mbs1 gbs8 rc=none'."""
        parts = [f"tp{self.tp}", f"pp{self.pp}", f"dp{self.dp}"]
        if self.vpp > 1:
            parts.append(f"vpp{self.vpp}")
        parts += [f"mbs{self.mbs}", f"gbs{self.gbs}"]
        if self.recompute != "none":
            parts.append(f"rc={self.recompute}")
        if self.sequence_parallel:
            parts.append("sp")
        if self.zero_stage:
            parts.append(f"zero{self.zero_stage}")
        if self.distributed_optimizer:
            parts.append("distopt")
        if self.nodes > 1:
            parts.append(f"{self.nodes}n")
        return " ".join(parts)

    @staticmethod
    def label(data: dict) -> str:
        """short() of a layout stored as a dict (ledger records, plan rows)."""
        return Layout.from_dict(data).short()

    @classmethod
    def from_dict(cls, data: dict) -> "Layout":
        names = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})
