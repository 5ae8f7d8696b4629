"""A compute probe's result and its JSON file (stdlib only: the job side writes it, the planner reads it).

A GEMM is (m x k) @ (k x n): 2mnk FLOPs, m the tokens of a micro-batch (mbs x seq_len / cp), n and k the weight
shard's dimensions at one tensor-parallel size. TFLOP/s = 2mnk / time / 1e12, time the median of the timed repeats.
The layer is one transformer block's forward + backward (launcher.workload.model.Block) on mbs x seq_len tokens at
tp=1; its model FLOPs count the weight GEMMs and the attention's Q·Kᵀ and attention·V (non-causal, the
Megatron/PaLM convention), x 3 for forward + backward, nothing for recompute.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from launcher.core import strict_json

SCHEMA = "parasweep.computebench/1"
UNITS = {"m, n, k": "GEMM (m x k) @ (k x n), elements", "time_s": "seconds per GEMM (median of repeats)",
         "tflops": "1e12 FLOP/s: 2mnk / time_s", "fwd_bwd_s": "seconds per forward + backward of one layer",
         "model_flops": "FLOPs of one layer's forward + backward (3 x forward)"}


class ComputeProbeError(ValueError):
    """A compute probe file cannot be used (missing, another schema, malformed)."""


@dataclass(frozen=True)
class GemmMeasurement:
    name: str          # what the plan runs it for, e.g. "qkv tp2"
    m: int
    n: int
    k: int
    time_s: float

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k

    @property
    def tflops(self) -> float:
        return self.flops / self.time_s / 1e12

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "m": self.m, "n": self.n, "k": self.k, "time_s": self.time_s,
                "tflops": self.tflops}


@dataclass(frozen=True)
class LayerMeasurement:
    shape: dict[str, Any]     # hidden, heads, kv_heads, ffn_hidden, seq_len, mbs, swiglu, norm
    fwd_bwd_s: float
    model_flops: float

    @property
    def tflops(self) -> float:
        return self.model_flops / self.fwd_bwd_s / 1e12

    def to_json(self) -> dict[str, Any]:
        return {"shape": dict(self.shape), "fwd_bwd_s": self.fwd_bwd_s, "model_flops": self.model_flops,
                "tflops": self.tflops}


@dataclass(frozen=True)
class ComputeResult:
    cluster: str
    device: str               # e.g. "NVIDIA H100 80GB HBM3" or "cpu"
    precision: str            # bf16 / fp16 / fp32
    torch_version: str
    gemms: tuple[GemmMeasurement, ...]
    layer: Optional[LayerMeasurement] = None
    created_at: float = field(default_factory=time.time)
    wall_s: float = 0.0       # what the whole probe took
    skipped: tuple[str, ...] = ()   # shapes (and "layer") left unmeasured: the probe ran out of its time box

    def to_json(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "units": UNITS, "cluster": self.cluster, "device": self.device,
                "precision": self.precision, "torch_version": self.torch_version, "created_at": self.created_at,
                "wall_s": self.wall_s, "skipped": list(self.skipped), "gemms": [g.to_json() for g in self.gemms],
                "layer": self.layer.to_json() if self.layer else None}

    @classmethod
    def from_json(cls, data: Any) -> ComputeResult:
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            got = data.get("schema") if isinstance(data, dict) else None
            raise ComputeProbeError(f"not a {SCHEMA} file (schema {got!r})")
        try:
            gemms = tuple(GemmMeasurement(str(g["name"]), int(g["m"]), int(g["n"]), int(g["k"]), float(g["time_s"]))
                          for g in data["gemms"])
            if any(not g.time_s > 0 for g in gemms):
                raise ValueError("a GEMM time is not positive")
            raw = data.get("layer")
            layer = (LayerMeasurement(dict(raw["shape"]), float(raw["fwd_bwd_s"]), float(raw["model_flops"]))
                     if raw else None)
            return cls(str(data["cluster"]), str(data["device"]), str(data["precision"]),
                       str(data.get("torch_version", "")), gemms, layer, float(data.get("created_at", 0.0)),
                       float(data.get("wall_s", 0.0)), tuple(str(n) for n in data.get("skipped", ())))
        except (KeyError, TypeError, ValueError) as exc:
            raise ComputeProbeError(f"malformed compute probe file: {type(exc).__name__}: {exc}") from None


def load(path: Path) -> ComputeResult:
    return ComputeResult.from_json(strict_json.read_file(path, ComputeProbeError))


def dumps(result: ComputeResult) -> str:
    """Strict JSON (no NaN/Infinity: a zero time is refused when read back, never written as inf)."""
    return strict_json.dumps(result.to_json(), indent=1) + "\n"   # a failed timing (NaN) is null, not a crash
