"""The estimator's view of a compute probe, the shapes a plan asks it to measure, and the per-sweep cache.

The estimator prices a GEMM at 2mnk / (peak · eff), eff = E / (1 + scale · x), x = 1/m + 1/n + 1/k and
E = gemm_eff_max · gen_eff(generation) (launcher.plan.step_time). Per FLOP/peak that is
    time · peak / 2mnk = 1/E + (scale/E) · x,
a straight line in x. `fit_profile` fits that line to the measured GEMMs (least squares; with fewer than three
distinct x, or a fit that is not a decreasing efficiency curve, it keeps the constants' scale and fits E alone as
the median of the GEMMs' own values), and `apply_compute` puts the fitted E and scale into the constants: the
measured efficiency moves the a-priori one wherever the estimator prices a dense GEMM (QKV, projection, FFN,
logits, the experts' GEMMs, and their FP8 forms through fp8_gemm_eff), so the plan's step times move with the
probe.

How it moves it: the a-priori efficiency is an effective figure, fitted on measured training steps (it absorbs what
the model leaves out), not what a bare cuBLAS GEMM reaches. On a nominal H100 SXM the probe measured 66 % of the
peak where the fitted constants say 81 % at the same shapes, and putting the raw figure in made every prediction of
two unseen H100 sweeps 9-12 % too slow (their a-priori step-time error was 1.5-2.3 % without the probe). So where
the generation has a reference probe (REFERENCE_PROBES: the curve a probe measured on a nominal card), the probe is
read as this card against the nominal one: E is scaled by measured / reference at the probe's own shapes (a
power-capped, throttled or HBM2e card measures less and gets slower predictions; a nominal one changes little).
Without a reference (the CPU stand-in, whose preset peak is a guess; a generation never probed) the measured curve
replaces the a-priori one.

The attention core, the memory-bound element-wise work and the communication are not GEMMs and keep their
constants; the layer's forward + backward is reported beside the estimator's GEMM share (not fitted to).

Peak for the efficiency: the cluster preset's peak_tflops (16-bit), x FP32_PEAK_SHARE for fp32 on a GPU, as the
estimator's own step time does (the CPU stand-in's fp32 peak is its preset's).
"""

from __future__ import annotations

import dataclasses
import re
import statistics
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Optional

from launcher.computebench.result import ComputeProbeError, ComputeResult, dumps, load
from launcher.config.schema import ClusterConfig, ModelConfig, RootConfig
from launcher.core.files import write_atomic
from launcher.core.layout import Layout
from launcher.core.names import is_cpu_standin
from launcher.plan.constants import FP32_PEAK_SHARE, Constants
from launcher.plan.flops import dense_ffn_hidden, ffn_matrices, padded_vocab, qkv_width
from launcher.plan.hardware import generation

MAX_TOKEN_SIZES = 3
"""Micro-batch token counts measured: the smallest, the median and the largest of the plan (GEMM time ~ linear in
m beyond a few hundred rows, so three points pin the curve)."""
MIN_FIT_POINTS = 3


@dataclasses.dataclass(frozen=True)
class ReferenceProbe:
    """The GEMM efficiency curve a probe measured on a nominal card of a generation (16-bit, share of its peak)."""

    gemm_eff: float
    gemm_dim_scale: float
    source: str

    def eff(self, x: float) -> float:
        return self.gemm_eff / (1.0 + self.gemm_dim_scale * x)


REFERENCE_PROBES = {
    "hopper": ReferenceProbe(0.7077, 71.05, "python -m launcher.computebench, bf16, 15 GEMMs (m 4096-32768, n 1536-"
                             "151936, k 1536-8960) on one H100 80GB HBM3 SXM (700 W, 1980 MHz, driver 580.159.04, "
                             "torch 2.11.0+cu130), 26 Nov 2026: 627-691 TFLOP/s, median 66.1 % of 989"),
}
"""Generation -> its reference probe: a line through the measured GEMMs (`_line`), as fit_profile fits a probe."""


@dataclasses.dataclass(frozen=True)
class ComputeProfile:
    """What the estimator takes from a probe: the GEMM efficiency curve eff = gemm_eff / (1 + gemm_dim_scale · x),
    fitted to the measured GEMMs against the cluster's peak, and what the a-priori constants said."""

    gemm_eff: float                 # E: share of the peak a very large GEMM reaches (gemm_eff_max · gen_eff)
    gemm_dim_scale: float
    measured_eff: float             # median over the measured GEMMs of TFLOP/s / peak
    datasheet_eff: float            # the a-priori constants' efficiency at the same shapes (median)
    peak_tflops: float              # the peak the efficiencies are shares of
    layer_tflops: Optional[float]   # the layer's model TFLOP/s (forward + backward), None without a layer
    source: str = ""
    reference_eff: Optional[float] = None   # a nominal card's probe at the same shapes (median); None: no reference

    @property
    def relative(self) -> Optional[float]:
        """This card's GEMMs against a nominal card's of its generation (measured / reference); None without one."""
        return self.measured_eff / self.reference_eff if self.reference_eff else None

    def to_json(self) -> dict[str, object]:
        return dataclasses.asdict(self)


def precision_for(cluster: ClusterConfig, precision: str) -> str:
    """The dtype the probe measures in: fp32 on the CPU stand-in and for fp32 training, fp16 for fp16, else bf16
    (fp8 plans: the 16-bit GEMMs; the estimator's fp8_gemm_eff is relative to them)."""
    if is_cpu_standin(cluster.gpu) or precision == "fp32":
        return "fp32"
    return "fp16" if precision == "fp16" else "bf16"


def peak_flops(cluster: ClusterConfig, precision: str) -> float:
    """FLOP/s the estimator divides a GEMM's FLOPs by (launcher.plan.step_time._context)."""
    cpu = is_cpu_standin(cluster.gpu)
    return cluster.peak_tflops * 1e12 * (FP32_PEAK_SHARE if precision == "fp32" and not cpu else 1.0)


def _pick(values: Iterable[int]) -> list[int]:
    ordered = sorted(set(values))
    if len(ordered) <= MAX_TOKEN_SIZES:
        return ordered
    return sorted({ordered[0], ordered[len(ordered) // 2], ordered[-1]})


def gemm_shapes(model: ModelConfig, layouts: Sequence[Layout]) -> list[tuple[str, int, int, int]]:
    """(name, m, n, k) of the dense GEMMs the plan's layouts run, as launcher.plan.step_time prices them: QKV,
    output projection, FC1 (gated: both halves), FC2 and the logits, at each tp the plan uses and up to three of
    its micro-batch token counts (mbs x seq_len / cp)."""
    h, f, gated = model.hidden, dense_ffn_hidden(model), ffn_matrices(model)
    tps = sorted({lay.tp for lay in layouts})
    tokens = _pick(lay.mbs * model.seq_len // lay.sequence_shards for lay in layouts)
    out: dict[tuple[int, int, int], str] = {}
    for t in tps:
        for m in tokens:
            named = [("qkv", qkv_width(model) // t, h), ("proj", h, h // t)]
            if f:
                named += [("fc1", (gated - 1) * f // t, h), ("fc2", h, f // t)]
            named.append(("logits", padded_vocab(model.vocab, t) // t, h))
            for name, n, k in named:
                out.setdefault((m, max(1, n), max(1, k)), f"{name} tp{t} m{m}")
    return [(name, m, n, k) for (m, n, k), name in out.items()]


def layer_shape(model: ModelConfig, layouts: Sequence[Layout]) -> str:
    """The --layer argument: the model's layer at tp=1 on the smallest micro-batch of the plan."""
    mbs = min(lay.mbs for lay in layouts)
    kv = model.kv_heads or model.heads
    return (f"hidden={model.hidden},heads={model.heads},kv_heads={kv},ffn_hidden={dense_ffn_hidden(model) or 1},"
            f"seq_len={model.seq_len},mbs={mbs},swiglu={int(model.swiglu)},norm={model.norm}")


def probe_args(cfg: RootConfig, layouts: Sequence[Layout]) -> list[str]:
    """`python -m launcher.computebench` arguments for a plan's layouts."""
    args = ["--cluster", cfg.cluster.name, "--precision", precision_for(cfg.cluster, str(cfg.backend.precision)),
            "--layer", layer_shape(cfg.model, layouts)]
    for name, m, n, k in gemm_shapes(cfg.model, layouts):
        args += ["--gemm", f"{name}={m}x{n}x{k}"]
    return args


def fit_profile(result: ComputeResult, cluster: ClusterConfig, constants: Constants) -> ComputeProfile:
    """The efficiency curve through the measured GEMMs (the module docstring); ComputeProbeError without any."""
    if not result.gemms:
        raise ComputeProbeError("the probe measured no GEMM")
    if (result.device == "cpu") != is_cpu_standin(cluster.gpu):
        raise ComputeProbeError(f"the probe ran on {result.device!r}, not on a {cluster.gpu} of {cluster.name} (a job "
                                "without its GPU?): its figures are not that GPU's")
    peak = peak_flops(cluster, result.precision)
    xs = [1.0 / g.m + 1.0 / g.n + 1.0 / g.k for g in result.gemms]
    ys = [g.time_s * peak / g.flops for g in result.gemms]   # 1 / efficiency
    gen_e = constants.gemm_eff_max * constants.gen_eff(generation(cluster))
    scale = constants.gemm_dim_scale
    line = _line(xs, ys) if len(set(xs)) >= MIN_FIT_POINTS else None
    if line is not None and line[0] > 0 and line[1] > 0:
        e, scale = 1.0 / line[0], line[1] / line[0]
    else:
        e = statistics.median((1.0 + scale * x) / y for x, y in zip(xs, ys))
    datasheet = statistics.median(gen_e / (1.0 + constants.gemm_dim_scale * x) for x in xs)
    reference = reference_probe(cluster, result.precision)
    lay = result.layer
    return ComputeProfile(e, scale, statistics.median(1.0 / y for y in ys), datasheet, peak / 1e12,
                          lay.tflops if lay else None,
                          f"computebench {result.precision} on {result.device} ({result.cluster}), "
                          f"{len(result.gemms)} GEMMs",
                          statistics.median(reference.eff(x) for x in xs) if reference else None)


def reference_probe(cluster: ClusterConfig, precision: str) -> Optional[ReferenceProbe]:
    """The nominal card's probe to read this one against: 16-bit GEMMs on a GPU of a generation that has one."""
    if is_cpu_standin(cluster.gpu) or precision not in ("bf16", "fp16"):
        return None
    return REFERENCE_PROBES.get(generation(cluster))


def _line(xs: Sequence[float], ys: Sequence[float]) -> Optional[tuple[float, float]]:
    """Least-squares (intercept, slope) of y over x; None when x does not vary."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    if sxx <= 0:
        return None
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return my - slope * mx, slope


def apply_compute(cluster: ClusterConfig, constants: Constants, profile: ComputeProfile) -> Constants:
    """The constants with the measured GEMM efficiency. With a reference probe: the a-priori ceiling times this card
    against the nominal one (the size dependence stays the fitted one's). Without: gemm_eff_max · gen_eff(generation)
    = the fitted E (the generation's multiplier stays, so that the calibration's generation terms keep their
    meaning) and the fitted size dependence."""
    if profile.relative is not None:
        return constants.with_values(gemm_eff_max=constants.gemm_eff_max * profile.relative)
    gen = constants.gen_eff(generation(cluster))
    return constants.with_values(gemm_eff_max=profile.gemm_eff / gen, gemm_dim_scale=profile.gemm_dim_scale)


# ------------------------------------------------------------------------------------------------ files, cache

def cache_name(cluster: ClusterConfig) -> str:
    """The cache key as a file name: a probe is reused for the same cluster preset and GPU model."""
    gpu = re.sub(r"[^A-Za-z0-9._-]+", "_", cluster.gpu.strip()) or "gpu"
    return f"computebench-{cluster.name}-{gpu}.json"


def save(result: ComputeResult, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_atomic(path, dumps(result))


def find_cached(folders: Sequence[Path], cluster: ClusterConfig, precision: str) -> Optional[ComputeResult]:
    """The newest usable probe of this cluster preset and GPU, measured in `precision`, among `folders`; None when
    there is none (a broken file is passed over)."""
    best: Optional[ComputeResult] = None
    for folder in folders:
        path = Path(folder) / cache_name(cluster)
        try:
            found = load(path) if path.is_file() else None
        except ComputeProbeError:
            continue
        if (found is not None and found.cluster == cluster.name and found.precision == precision and found.gemms
                and (found.device == "cpu") == is_cpu_standin(cluster.gpu)
                and (best is None or found.created_at > best.created_at)):
            best = found
    return best
