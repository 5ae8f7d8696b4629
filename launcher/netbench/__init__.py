"""The network probe's data: results, their JSON file, the tables, and what the estimator takes from them.

`python -m launcher.netbench` (launcher/netbench/__main__.py, run under torchrun) measures all-reduce,
all-gather, reduce-scatter, all-to-all and point-to-point send/recv inside a node and across nodes over a range of
message sizes through torch.distributed (nccl on GPUs, gloo on CPU). This module is pure and light (no torch): the
planner and the sweep loop read a probe's file through it.

Conventions (NVIDIA/nccl-tests doc/PERFORMANCE.md): time = mean time of one operation (max over ranks);
algbw = S / t with S the size of the full buffer (for all-gather the gathered output, for reduce-scatter the input,
i.e. n x the per-rank chunk; for all-to-all what one rank sends, S/n to each rank, itself included); busbw = algbw x
2(n-1)/n for all-reduce, x (n-1)/n for all-gather, reduce-scatter and all-to-all, x 1 for send/recv: a figure
comparable with the link's bandwidth whatever the number of ranks. GB = 1e9 bytes, Gbit/s = 8 x GB/s.

The all-to-all (MoE token dispatch and combine under expert parallelism) is summarised like the all-reduce: its
bus-bandwidth plateau per tier (`*_all_to_all_gbytes_per_s`, None when not measured: older probe files). The
estimator does not use it yet.

The estimator's link model (launcher.plan.step_time.collective_time_s) is exactly that ring convention with
bandwidth = link bandwidth x net_eff, so a measured bus bandwidth replaces the product, not the link bandwidth:
`apply_network` puts the measured bus bandwidths into the cluster's intra/inter-node fields, folds net_eff into
any tier the probe did not measure, and sets net_eff to 1 -- the efficiency is never applied twice.
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from launcher.backends.launch import exec_program, node_preamble, torchrun_launcher
from launcher.config.schema import ClusterConfig
from launcher.core import strict_json
from launcher.core.errors import ParasweepError
from launcher.core.files import write_atomic
from launcher.core.names import is_cpu_standin
from launcher.plan.constants import Constants

SCHEMA = "parasweep.netbench/1"
UNITS = {"bytes": "bytes (the full buffer, nccl-tests convention)", "time_s": "seconds per operation",
         "algbw_gbytes_per_s": "GB/s (1e9 bytes/s): bytes / time_s",
         "busbw_gbytes_per_s": "GB/s (1e9 bytes/s): algbw x the op's bus factor",
         "latency_s": "seconds", "*_gbit_per_s": "Gbit/s = 8 x GB/s"}
OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "sendrecv")
SCOPES = ("intra_node", "inter_node")
PLATEAU_SIZES = 3
"""A tier's bandwidth: the median bus bandwidth of the all-reduce at the largest sizes measured (its plateau)."""


class ProbeError(ParasweepError):
    """A probe file cannot be used (missing, another schema, or not the cluster/node count asked for)."""


def bus_factor(op: str, ranks: int) -> float:
    """busbw / algbw (nccl-tests PERFORMANCE.md, 'Summary')."""
    if op == "all_reduce":
        return 2.0 * (ranks - 1) / ranks
    if op in ("all_gather", "reduce_scatter", "all_to_all"):
        return (ranks - 1) / ranks
    if op == "sendrecv":
        return 1.0
    raise ValueError(f"unknown op {op!r}; valid: {', '.join(OPS)}")


@dataclass(frozen=True)
class Measurement:
    op: str
    scope: str                 # intra_node (ranks of one node) or inter_node (ranks on >= 2 nodes)
    ranks: int
    bytes: int
    time_s: float

    @property
    def algbw_gbytes_per_s(self) -> float:
        return self.bytes / self.time_s / 1e9

    @property
    def busbw_gbytes_per_s(self) -> float:
        return self.algbw_gbytes_per_s * bus_factor(self.op, self.ranks)

    def to_json(self) -> dict:
        return {"op": self.op, "scope": self.scope, "ranks": self.ranks, "bytes": self.bytes,
                "time_s": self.time_s, "algbw_gbytes_per_s": self.algbw_gbytes_per_s,
                "busbw_gbytes_per_s": self.busbw_gbytes_per_s}


@dataclass(frozen=True)
class NetworkProfile:
    """What the estimator takes from a probe: per-GPU bus bandwidth of each tier (None: not measured) and the
    latency of one small collective; the all-to-all bus bandwidth of each tier (MoE dispatch/combine) besides."""

    intra_node_gbytes_per_s: Optional[float]
    inter_node_gbytes_per_s: Optional[float]
    latency_s: Optional[float]
    source: str = ""
    intra_node_all_to_all_gbytes_per_s: Optional[float] = None
    inter_node_all_to_all_gbytes_per_s: Optional[float] = None

    def to_json(self) -> dict:
        out = dataclasses.asdict(self)
        for key in ("intra_node", "inter_node", "intra_node_all_to_all", "inter_node_all_to_all"):
            bw = out[f"{key}_gbytes_per_s"]
            out[f"{key}_gbit_per_s"] = None if bw is None else 8 * bw
        return out


@dataclass(frozen=True)
class ProbeResult:
    cluster: str
    nodes: int
    ranks_per_node: int
    backend: str               # nccl / gloo
    device: str                # e.g. "NVIDIA H100 80GB HBM3" or "cpu"
    hosts: tuple[str, ...]
    measurements: tuple[Measurement, ...]
    created_at: float = field(default_factory=time.time)
    torch_version: str = ""

    def profile(self) -> NetworkProfile:
        return summarize(self)

    def to_json(self) -> dict:
        return {"schema": SCHEMA, "units": UNITS, "cluster": self.cluster, "nodes": self.nodes,
                "ranks_per_node": self.ranks_per_node, "backend": self.backend, "device": self.device,
                "hosts": list(self.hosts), "created_at": self.created_at, "torch_version": self.torch_version,
                "summary": self.profile().to_json(), "measurements": [m.to_json() for m in self.measurements]}

    @classmethod
    def from_json(cls, data: dict) -> ProbeResult:
        if not isinstance(data, dict) or data.get("schema") != SCHEMA:
            raise ProbeError(f"not a {SCHEMA} file (schema {data.get('schema') if isinstance(data, dict) else None!r})")
        try:
            ms = tuple(Measurement(m["op"], m["scope"], int(m["ranks"]), int(m["bytes"]), float(m["time_s"]))
                       for m in data["measurements"])
            return cls(str(data["cluster"]), int(data["nodes"]), int(data["ranks_per_node"]), str(data["backend"]),
                       str(data["device"]), tuple(data.get("hosts", ())), ms, float(data.get("created_at", 0.0)),
                       str(data.get("torch_version", "")))
        except (KeyError, TypeError, ValueError) as exc:
            raise ProbeError(f"malformed probe file: {type(exc).__name__}: {exc}") from None


def summarize(result: ProbeResult) -> NetworkProfile:
    """Bus bandwidth plateau of each tier's all-reduce (and all-to-all), and the latency of the smallest all-reduce."""
    def plateau(scope: str, op: str = "all_reduce") -> Optional[float]:
        ms = sorted((m for m in result.measurements if m.op == op and m.scope == scope), key=lambda m: m.bytes)
        return statistics.median(m.busbw_gbytes_per_s for m in ms[-PLATEAU_SIZES:]) if ms else None

    def smallest(scope: str) -> Optional[float]:
        ms = [m for m in result.measurements if m.op == "all_reduce" and m.scope == scope]
        return min(ms, key=lambda m: m.bytes).time_s if ms else None

    latency = smallest("inter_node") if result.nodes > 1 else smallest("intra_node")
    return NetworkProfile(plateau("intra_node"), plateau("inter_node"), latency,
                          f"netbench {result.backend} on {result.cluster}, {result.nodes} node(s) x "
                          f"{result.ranks_per_node} ranks",
                          plateau("intra_node", "all_to_all"), plateau("inter_node", "all_to_all"))


def apply_network(cluster: ClusterConfig, constants: Constants,
                  profile: NetworkProfile) -> tuple[ClusterConfig, Constants]:
    """The cluster and constants the estimator should use with a measured network (see the module docstring):
    measured tiers take the measured bus bandwidth, unmeasured tiers their datasheet value x net_eff, and
    net_eff becomes 1. The latency, when measured, replaces the device kind's latency."""
    eff = constants.net_eff
    intra = profile.intra_node_gbytes_per_s or cluster.intra_node_gbytes_per_s * eff
    inter = profile.inter_node_gbytes_per_s or cluster.inter_node_gbytes_per_s * eff
    # the all-to-all figures price MoE token dispatch (launcher.plan.moe); 0 keeps the tier's bandwidth
    new_cluster = dataclasses.replace(cluster, intra_node_gbytes_per_s=intra, inter_node_gbytes_per_s=inter,
                                      intra_node_all_to_all_gbytes_per_s=profile.intra_node_all_to_all_gbytes_per_s
                                      or 0.0,
                                      inter_node_all_to_all_gbytes_per_s=profile.inter_node_all_to_all_gbytes_per_s
                                      or 0.0,
                                      source=f"{cluster.source}; network measured: {profile.source}")
    latency_field = "latency_cpu_s" if is_cpu_standin(cluster.gpu) else "latency_gpu_s"
    values = {"net_eff": 1.0}
    if profile.latency_s:
        values[latency_field] = profile.latency_s
    return new_cluster, constants.with_values(**values)


# ------------------------------------------------------------------------------------------------ files, cache

def cache_name(cluster: str, nodes: int) -> str:
    """The cache key as a file name: a probe is reused for the same cluster preset and node count."""
    return f"netbench-{cluster}-{nodes}n.json"


def save(result: ProbeResult, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_atomic(path, strict_json.dumps(result.to_json(), indent=1) + "\n")


def load(path: Path) -> ProbeResult:
    return ProbeResult.from_json(strict_json.read_file(path, ProbeError))


def find_cached(folders: Sequence[Path], cluster: str, nodes: int) -> Optional[ProbeResult]:
    """The newest usable probe for this cluster and node count among `folders` (this sweep's folder first on
    resume, then e.g. the other sweep folders under sweep.root_dir); None when there is none (or it is broken)."""
    best: Optional[ProbeResult] = None
    for folder in folders:
        path = Path(folder) / cache_name(cluster, nodes)
        try:
            found = load(path) if path.is_file() else None
        except ProbeError:
            continue
        if found and found.cluster == cluster and found.nodes == nodes and (
                best is None or found.created_at > best.created_at):
            best = found
    return best


def sweep_folders(root: Path, first: Optional[Path] = None) -> list[Path]:
    """Where to look for a reusable probe: `first` (this sweep), then every folder under `root`."""
    others = sorted((p for p in Path(root).glob("*") if p.is_dir() and p != first), key=lambda p: p.name)
    return ([first] if first else []) + others


# ------------------------------------------------------------------------------------------------ tables

def format_tables(result: ProbeResult) -> str:
    """nccl-tests-like tables, one per (scope, op), then the summary the estimator uses."""
    lines = [f"# parasweep netbench: {result.backend} on {result.device}, {result.nodes} node(s) x "
             f"{result.ranks_per_node} ranks ({', '.join(result.hosts)})",
             "# algbw = size / time; busbw = algbw x 2(n-1)/n (all_reduce), x (n-1)/n (all_gather, "
             "reduce_scatter, all_to_all), x 1 (sendrecv): NVIDIA/nccl-tests doc/PERFORMANCE.md; GB = 1e9 bytes"]
    for scope in SCOPES:
        for op in OPS:
            ms = sorted((m for m in result.measurements if m.scope == scope and m.op == op), key=lambda m: m.bytes)
            if not ms:
                continue
            lines.append(f"#\n# {op}, {scope.replace('_', '-')}, {ms[0].ranks} ranks")
            lines.append(f"# {'size(B)':>12} {'time(us)':>11} {'algbw(GB/s)':>12} {'busbw(GB/s)':>12} "
                         f"{'busbw(Gbit/s)':>14}")
            for m in ms:
                lines.append(f"  {m.bytes:>12} {m.time_s * 1e6:>11.1f} {m.algbw_gbytes_per_s:>12.3f} "
                             f"{m.busbw_gbytes_per_s:>12.3f} {8 * m.busbw_gbytes_per_s:>14.2f}")
    p = result.profile()
    lines.append("#")
    for name, bw in (("intra-node", p.intra_node_gbytes_per_s), ("inter-node", p.inter_node_gbytes_per_s)):
        lines.append(f"# {name} all_reduce bus bandwidth: " +
                     ("not measured" if bw is None else f"{bw:.3f} GB/s = {8 * bw:.2f} Gbit/s"))
    for name, bw in (("intra-node", p.intra_node_all_to_all_gbytes_per_s),
                     ("inter-node", p.inter_node_all_to_all_gbytes_per_s)):
        if bw is not None:
            lines.append(f"# {name} all_to_all bus bandwidth: {bw:.3f} GB/s = {8 * bw:.2f} Gbit/s")
    if p.latency_s is not None:
        lines.append(f"# latency (smallest all_reduce): {p.latency_s * 1e6:.1f} us")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------ the job

def probe_script(nodes: int, nproc_per_node: int, python: str, out_path: str, args: Sequence[str] = ()) -> str:
    """Bash text for one node of a probe job (one task per node under srun, like a trial's launch): the same
    rendezvous preamble and torchrun launcher as the backends (launcher.backends.launch)."""
    target = ["-m", "launcher.netbench", "--out", out_path, *args]
    return ("#!/bin/bash\nset -euo pipefail\n" + node_preamble(nodes) + torchrun_launcher(python, nproc_per_node)
            + exec_program(target, "torchrun"))
