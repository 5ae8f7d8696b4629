"""What the estimator knows about a GPU model: its generation, its tensor-core peaks per precision, its memory.

The cluster presets (conf/cluster/*.yaml, launcher.schema.ClusterConfig) hold one peak (`peak_tflops`, dense
16-bit) and the bandwidths; the estimator also needs the GPU's *generation* (the compute efficiency a GEMM reaches
is a property of the architecture and its power limit, launcher.plan.efficiency) and its FP8 peak. Both follow
from the GPU's name, so nothing new is needed in the config: `gpu_spec(cluster)` finds the entry whose aliases
match `cluster.gpu` or `cluster.name`.

Datasheet sources (dense, i.e. without 2:4 sparsity; TFLOP/s; HBM GB/s; memory in bytes as the driver reports it):
- V100 SXM2: NVIDIA V100 datasheet: 125 fp16 tensor TFLOP/s, 900 GB/s, 32 GiB; no bf16, no fp8.
- A100 SXM4: NVIDIA A100 datasheet (2021): 312 bf16/fp16, no fp8; 40 GB HBM2 1555 GB/s, 80 GB HBM2e 2039 GB/s.
- H100 SXM5: NVIDIA H100 datasheet: 989 bf16, 1979 fp8 (1979/3958 with sparsity), 80 GB HBM3 3350 GB/s, NVLink4
  900 GB/s (450 each way). H100 PCIe: 756 bf16, 1513 fp8, HBM2e 2000 GB/s, 350 W (the power-capped, HBM2e
  variant). H100 NVL: 835 bf16, 1671 fp8, 94 GB HBM3 3900 GB/s.
- H200 SXM: NVIDIA H200 datasheet: the H100's compute (989 bf16, 1979 fp8) with 141 GB HBM3e at 4800 GB/s.
- B200 (HGX B200, 1000 W): NVIDIA's GB200 NVL72 / HGX B200 specification table, per GPU with sparsity 4.5 PF
  bf16, 9 PF fp8 -> dense 2250 bf16, 4500 fp8; 180 GB HBM3e at 7.7 TB/s (HGX B200: 62 TB/s for 8); NVLink5
  1800 GB/s (900 each way).
- GB200 (NVL72, up to 1200 W): the same table, per GPU with sparsity 5 PF bf16, 10 PF fp8 -> dense 2500, 5000;
  186 GB HBM3e at 8 TB/s (576 TB/s for 72); 72 GPUs in one NVLink domain. (Checked with look-ups in issue 15:
  glennklockwood.com/garden/processors/B200 gives the same dense figures for B200 at 1000 W and GB200 at 1200 W.)
- GB300 (NVL72, Blackwell Ultra): per GPU dense 2500 bf16, 5000 fp8 (rack: 180 PF bf16, 360 PF fp8 dense),
  8 TB/s, 288 GB HBM3e of which ~279 usable (verda.com/blog/gb300-nvl72-architecture); 72 per domain.
"Memory" is what a process can address, as nvidia-smi reports it (MiB): 81559 MiB on H100, 81920 MiB on A100
80GB, 143771 MiB on H200, 183359 MiB on B200 and 189471 MiB on GB200 (MLPerf Training v5.0 system descriptions,
mlcommons/training_results_v5.0 */systems/*.json 'accelerator_memory_capacity'); the marketing figure ("80 GB",
"141 GB", "180 GB", "186 GB") is the GiB count rounded. The estimator's GB are 1e9 bytes, so an H100 holds
85.5 GB; presets that say 80 under-state it. GB300: no nvidia-smi figure was found; 279 GiB by the same convention
(an assumption, no corpus row depends on it).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Optional

from launcher.config.schema import ClusterConfig
from launcher.core.errors import ConfigError

GENERATIONS = ("volta", "ampere", "hopper", "blackwell")
"""Architectures with their own GEMM efficiency (launcher.plan.efficiency). Blackwell Ultra (GB300) runs the same
tensor cores for 16-bit and FP8 as Blackwell."""


@dataclass(frozen=True)
class GpuSpec:
    """Datasheet facts of one GPU model."""

    name: str
    generation: str
    bf16_tflops: float
    fp8_tflops: Optional[float]        # None: no FP8 tensor cores (V100, A100)
    hbm_gbytes_per_s: float
    mem_gb: float                       # addressable GB (1e9 bytes)
    nvlink_gbytes_per_s: float          # per GPU, each way
    nvlink_domain: int                  # GPUs that share one NVLink/NVSwitch domain ("node" for the estimator)
    nic_gbytes_per_s: float             # per GPU, the reference system's scale-out NICs
    aliases: tuple[str, ...]


GIB = 1024 ** 3 / 1e9
MIB = 1024 ** 2 / 1e9
SPECS = (
    GpuSpec("v100-32g", "volta", 125.0, None, 900.0, 32 * GIB, 150.0, 8, 6.25, ("v100",)),
    GpuSpec("a100-40g", "ampere", 312.0, None, 1555.0, 40 * GIB, 300.0, 8, 25.0, ("a100-40", "a100-sxm4-40")),
    GpuSpec("a100-80g", "ampere", 312.0, None, 2039.0, 81920 * MIB, 300.0, 8, 25.0,
            ("a100-80", "a100-sxm4-80", "a100")),
    GpuSpec("h100-pcie", "hopper", 756.0, 1513.0, 2000.0, 80 * GIB, 300.0, 8, 50.0, ("h100-pcie", "h100 pcie")),
    GpuSpec("h100-nvl", "hopper", 835.0, 1671.0, 3900.0, 94 * GIB, 300.0, 8, 50.0, ("h100-nvl", "h100 nvl")),
    GpuSpec("h100-80g", "hopper", 989.0, 1979.0, 3350.0, 81559 * MIB, 450.0, 8, 50.0,
            ("h100-80", "h100-sxm", "h100", "h800")),
    GpuSpec("h200-141g", "hopper", 989.0, 1979.0, 4800.0, 143771 * MIB, 450.0, 8, 50.0, ("h200",)),
    GpuSpec("gb300", "blackwell", 2500.0, 5000.0, 8000.0, 279 * GIB, 900.0, 72, 100.0, ("gb300",)),
    GpuSpec("gb200", "blackwell", 2500.0, 5000.0, 8000.0, 189471 * MIB, 900.0, 72, 50.0, ("gb200",)),
    GpuSpec("b200", "blackwell", 2250.0, 4500.0, 7700.0, 183359 * MIB, 900.0, 8, 50.0, ("b200",)),
)
_BY_NAME = {s.name: s for s in SPECS}


@functools.lru_cache(maxsize=64)   # the planner asks per batch class (generation(cluster): ~26k at 50k trials)
def find_spec(name: str) -> Optional[GpuSpec]:
    """The entry whose name or an alias occurs in `name` (case-insensitive; the longest match wins, so that
    'h100-pcie' is not read as 'h100')."""
    text = name.lower()
    if text in _BY_NAME:
        return _BY_NAME[text]
    best, best_len = None, 0
    for spec in SPECS:
        for alias in (spec.name,) + spec.aliases:
            if alias in text and len(alias) > best_len:
                best, best_len = spec, len(alias)
    return best


def gpu_spec(cluster: ClusterConfig) -> Optional[GpuSpec]:
    """The datasheet entry of a cluster's GPU (from `gpu`, else the preset `name`); None for the CPU stand-in or
    an unknown model (the estimator then uses the preset's numbers and the reference generation)."""
    if cluster.gpu.lower() == "cpu":
        return None
    return find_spec(cluster.gpu) or find_spec(cluster.name)


def generation(cluster: ClusterConfig) -> str:
    """The GPU generation ('ampere' when unknown: the generation the a-priori constants were first fitted on)."""
    spec = gpu_spec(cluster)
    return spec.generation if spec else "ampere"


def cluster_for(gpu: str, n_gpus: int, gpus_per_node: Optional[int] = None,
                inter_node_gbytes_per_s: Optional[float] = None) -> ClusterConfig:
    """A ClusterConfig from the datasheet table (for published runs on GPUs that have no preset)."""
    spec = find_spec(gpu)
    if spec is None:
        known = ", ".join(s.name for s in SPECS)
        raise ValueError(f"gpu={gpu!r}: not in launcher.plan.hardware.SPECS ({known}); add its datasheet entry")
    gpn = gpus_per_node or spec.nvlink_domain
    nodes = max(1, -(-n_gpus // gpn))
    return ClusterConfig(name=spec.name, gpu=spec.name, gpu_mem_gb=spec.mem_gb, peak_tflops=spec.bf16_tflops,
                         gpus_per_node=gpn, intra_node_gbytes_per_s=spec.nvlink_gbytes_per_s,
                         inter_node_gbytes_per_s=inter_node_gbytes_per_s or spec.nic_gbytes_per_s,
                         hbm_gbytes_per_s=spec.hbm_gbytes_per_s, nodes=nodes,
                         source="launcher.plan.hardware datasheet table")


def fp8_peak_ratio(cluster: ClusterConfig) -> Optional[float]:
    """FP8 dense peak / 16-bit dense peak (2 on Hopper and Blackwell); None without FP8 tensor cores."""
    spec = gpu_spec(cluster)
    if spec is None or spec.fp8_tflops is None:
        return None
    return spec.fp8_tflops / spec.bf16_tflops


def check_precision(cluster: ClusterConfig, precision: str) -> None:
    """FP8 needs FP8 tensor cores (Transformer Engine's check_fp8_support: compute capability 8.9 or newer, i.e. Ada,
    Hopper, Blackwell): a ConfigError naming the GPU otherwise (A100, V100, the CPU stand-in, a GPU the datasheet
    table does not know)."""
    if precision != "fp8" or fp8_peak_ratio(cluster) is not None:
        return
    spec = gpu_spec(cluster)
    if spec is None:
        what = ("the CPU stand-in has no FP8 GEMMs" if cluster.gpu.strip().lower() == "cpu" else
                f"cluster.gpu {cluster.gpu!r} is not in the datasheet table (launcher.plan.hardware.SPECS): add its "
                "entry with its FP8 peak if it has FP8 tensor cores")
    else:
        what = f"the {spec.name} ({cluster.gpu}) has no FP8 tensor cores"
    raise ConfigError("backend.precision", "fp8", f"{what}; FP8 needs Hopper or Blackwell GPUs (H100, H200, B200, "
                      "GB200): use precision bf16, or a cluster of those")
