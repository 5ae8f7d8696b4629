"""Time of one training iteration: per-micro-batch work on each pipeline stage, the 1F1B schedule, DP sync, optimizer.

The structure follows Calculon (Isaev et al. SC23) and Narayanan et al. 2021 (§2.2 bubble, §3 communication):
- GEMMs: FLOPs / (peak · efficiency(m, n, k)) on the rank's shard; efficiency saturates with every dimension:
      eff = gemm_eff_max · gen_eff(generation) / (1 + gemm_dim_scale · (1/m + 1/n + 1/k))
  so thin tensor-parallel shards (h/t), few tokens per micro-batch (b·s) and small head dims lose efficiency, and a
  generation reaches its own share of its datasheet peak (launcher.plan.hardware, constants.GEN_EFF). Backward
  GEMMs (input and weight gradients) = 2 x forward. fp32 on a GPU runs at FP32_PEAK_SHARE of the peak. FP8
  (Transformer Engine): the linear layers' GEMMs run at the FP8 peak x fp8_gemm_eff, their inputs and output
  gradients are cast (amax + cast + transpose, memory-bound), the attention core and the output layer stay 16-bit.
- Attention core: with flash attention, launcher.plan.attention (causal work, the kernel's efficiency curve in the
  sequence length, backward 2.5 x the FLOPs at 0.8 the efficiency, FlashAttention-2 on Hopper at 0.6 of the
  kernels written for it); without, batched GEMMs of head-dim width plus the softmax's HBM traffic.
- Element-wise kernels (norms, dropout, residual adds, activation functions, rotary, layout copies) are
  memory-bound: bytes moved / (HBM bandwidth · hbm_eff); backward moves 2 x the forward bytes. Stacks that run them
  as separate eager PyTorch ops move more (launcher.plan.stack: unfused RMSNorm ~36 B per element against 4, rotary
  ~22 B per q/k element, SiLU and the gating product apart, the attention output's contiguous copy); torch.compile
  fuses them back.
- Collectives on the link of their tier (NVLink inside a node, the NICs between nodes), NCCL ring convention:
  all-reduce 2(n-1)/n · S / (bw · net_eff), reduce-scatter / all-gather (n-1)/n · S / (bw · net_eff), plus a latency.
  A group that spans nodes with k members per node runs k rings side by side, one per NIC: k x the NIC bandwidth,
  at most NVLink's (`group_bandwidth`; rank order tp, cp, dp, pp as Megatron's). TP: 2 all-reduces of b·s·h in
  forward and 2 in backward per layer (Narayanan §3.2), +2 under full recompute; sequence parallelism replaces each
  by a reduce-scatter + all-gather of the same volume (Korthikanti §4.2.2).
- ZeRO-3 / FSDP (launcher.plan.stack, Workload.fsdp): every micro-batch all-gathers the stage's parameters before
  the forward and again before the backward (when resharded after the forward) and reduce-scatters the gradients
  after it (HSDP: inside the node, then an all-reduce of the shard across the replicas); prefetching overlaps them
  with the computation, so a micro-batch takes max(computation, communication) plus overlap_interference x the
  overlapped part, plus the first unit's gather and the last one's reduce-scatter, which nothing hides. ZeRO-2
  reduce-scatters every micro-batch too. (Rajbhandari et al. 2020 §7.2: ZeRO-3 moves 3Ψ per step against 2Ψ.)
- Fixed costs per micro-batch (tests/data/h100_single_gpu_sweeps.csv): HBM traffic proportional to the parameters
  (weight casts, gradient accumulation: StackFacts.microbatch_param_bytes), and the CPU time that issues the
  kernels (kernels per layer x constants.KERNEL_LAUNCH_S): GPU kernels run asynchronously, so a micro-batch takes
  max(GPU work, CPU dispatch); on the CPU stand-in both run on the same cores and add up.
- Pipeline (1F1B): step = m · (bottleneck stage per micro-batch) + (p - 1)/v · (mean stage per micro-batch), the
  bubble fraction (p - 1)/(v·m) of Narayanan §2.2; p2p of b·s·h (/t when scattered over the NICs or under SP).
- DP gradient reduction overlaps the backward of the last micro-batch; the distributed optimizer's / ZeRO-1's
  parameter all-gather after the step is exposed unless the stack overlaps it with the next forward (Megatron's
  --overlap-param-gather).
- Mixture of experts (launcher.plan.moe): the routed experts' grouped GEMMs at the efficiency of their size (few
  rows per expert: slow), the router and permutation kernels (memory-bound), the dispatch/combine all-to-alls over
  ep (and the etp row exchanges) on the measured all-to-all bandwidth, exposed; the expert gradients reduced over
  the expert-data-parallel group with the dense ones.
- Optimizer step: memory-bound Adam update over the rank's optimizer shard; per iteration also step_overhead_s of
  host time nothing overlaps.

How constants enter (what calibration relies on): every time below is a constant-free amount times a rate
(`Rates`, derived from `Constants` and the GPU generation): FLOPs/peak x 1/gemm_eff_max, bytes/bandwidth x 1/hbm_eff,
... . `step_pieces` adds such products only, so each piece is linear in the rates; the only non-linear steps
(maxima: CPU vs GPU, communication vs computation, the bottleneck stage, DP overlap) are in `combine`, which works on
floats and, elementwise, on numpy arrays. launcher.plan.calibrate evaluates pieces once with unit rates (numpy
vectors) and then re-combines them for any constants without running the model again.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any, NamedTuple, Optional

from launcher.config.schema import ClusterConfig, ModelConfig
from launcher.core.layout import Layout
from launcher.core.names import is_cpu_standin
from launcher.plan import attention, moe
from launcher.plan.constants import DEFAULT, FP32_PEAK_SHARE, Constants
from launcher.plan.flops import dense_ffn_hidden, ffn_matrices, padded_vocab, qkv_width
from launcher.plan.hardware import fp8_peak_ratio, generation
from launcher.plan.memory import ACTIVATION_BYTES, layer_params, shard_group, stage_params, state_bytes_per_param
from launcher.plan.stack import StackFacts, kernels_fused, stack_facts, stack_name, syncs_every_microbatch
from launcher.plan.workload import DEFAULT_WORKLOAD, Workload

FLASH_CAUSAL_SHARE = 0.5   # a causal flash kernel skips the masked half of Q·Kᵀ and attention·V
FLASH_BACKWARD = 2.5       # flash backward recomputes Q·Kᵀ: 5 GEMMs vs 2 in forward
GRAD_COMM_BYTES = {"bf16": 4.0, "fp16": 2.0, "fp32": 4.0, "fp8": 4.0}  # bf16 reduces the fp32 main grads (Megatron)
EAGER_NORM_BYTES = 32.0
"""Extra HBM bytes per element of an unfused eager RMSNorm (x.float(), pow, mean, rsqrt-mul, cast back, weight mul:
~36 B read + written per element) over a fused one (read 2, write 2)."""
EAGER_ROTARY_BYTES = 22.0
"""Bytes per q/k element of an eager rotary embedding (rotate_half's slices and cat, two products, a sum); fused
kernels (Transformer Engine, flash-attn) apply it inside the QKV epilogue or the attention kernel."""
EAGER_GATE_BYTES = 4.0
"""Extra bytes per FFN element of an unfused SwiGLU: SiLU (r2 w2) then the product (r2 r2 w2) = 10 against a fused
kernel's 6."""
EAGER_COPY_BYTES = 4.0
"""The attention output's transpose + contiguous copy before the output projection (r2 w2 per element)."""
UNFUSED_SOFTMAX_BYTES = 42.0
"""HBM bytes per attention-score element of the forward when the scores are too long for the fused softmax kernel
(StackFacts.fused_softmax_max_seq; Megatron's FusedScaleMaskSoftmax.forward_torch_softmax in fp32): cast to fp32
(r2 w4), scale (r4 w4), causal mask in place (r4 + 1 w4), softmax (r4 w4), cast back (r4 w2), dropout (r2, w2 + a
1-byte mask) = 42 B, against 4e + 1 = 9 B fused."""
UNFUSED_SOFTMAX_16BIT_BYTES = 13.0
"""The same when the unfused softmax stays in 16 bits (StackFacts.softmax_fallback_fp32 False: Megatron-LM's local
transformer with --no-masked-softmax-fusion, as launcher/backends/megatron_lm.py LOCAL_IMPL_ARGS runs it; the
default --attention-softmax-in-fp32 is off and apply_query_key_layer_scaling with it): causal mask by masked_fill (r2
w2), softmax (r2 w2), dropout (r2, w2 + a 1-byte mask) = 6e + 1 = 13 B, against 4e + 1 = 9 B fused. Worked example
(tests/plan/test_estimator_physics.py): GPT-1.7B (24 heads), s 2048, mbs 2: 2.0e8 score elements per layer, 0.81 GB
more forward HBM traffic per layer than the fused kernel."""
FP8_CAST_FWD_BYTES = (4.0, 2.0)
"""FP8 casts per forward that no norm or activation kernel absorbs (Transformer Engine fuses the LayerNorm->FP8 and
activation->FP8 casts): the projection input (read 2, write 1 + its transpose 1 = 4 B per h-element) and the FC2
input's transpose (1 B written, 1 read per f-element)."""
FP8_CAST_BWD_BYTES = 4.0
"""FP8 cast of each linear layer's output gradient in the backward (read 2, write 1 + transpose 1 per element)."""

Num = Any  # float, or a numpy array of amounts when evaluated with unit rates (launcher.plan.calibrate)


class Rates(NamedTuple):
    """Seconds per unit of each constant-free amount the model adds up."""

    gemm: Num          # per FLOP/peak: 1 / (gemm_eff_max · gen_eff)
    gemm_dim: Num      # per FLOP/peak x (1/m + 1/n + 1/k): gemm_dim_scale / (gemm_eff_max · gen_eff)
    gemm8: Num         # the same for FP8 GEMMs (per FLOP / FP8 peak): 1 / (gemm_eff_max · gen_eff · fp8_gemm_eff)
    gemm8_dim: Num
    attn: Num          # per flash-attention amount (launcher.plan.attention): 1 / (attn_eff · gen_eff)
    hbm: Num           # per byte / HBM bandwidth: 1 / hbm_eff
    net: Num           # per byte / link bandwidth: 1 / net_eff
    latency: Num       # per collective or p2p call
    dispatch: Num      # per layer issued (forward + backward), per micro-batch
    redispatch: Num    # per layer whose forward is issued again (full recompute)
    checkpoint: Num    # per checkpoint region (recompute), per layer
    param_bytes: Num   # per parameter / HBM bandwidth, per micro-batch: microbatch_param_bytes / hbm_eff
    recast_bytes: Num  # the same, under full recompute: recompute_cast_bytes / hbm_eff
    step: Num          # per iteration: step_overhead_s
    measured: Num = 1.0  # per second measured on the cluster itself (Workload.network_step_s): never fitted


@functools.lru_cache(maxsize=256)
def rates(constants: Constants, cpu: bool, gen: str = "ampere") -> Rates:
    c = constants
    eff = c.gemm_eff_max * c.gen_eff(gen)
    eff8 = eff * c.fp8_gemm_eff
    return Rates(gemm=1.0 / eff, gemm_dim=c.gemm_dim_scale / eff, gemm8=1.0 / eff8, gemm8_dim=c.gemm_dim_scale / eff8,
                 attn=1.0 / (c.attn_eff * c.gen_eff(gen)), hbm=1.0 / c.hbm_eff,
                 net=1.0 / c.net_eff, latency=c.latency_cpu_s if cpu else c.latency_gpu_s,
                 dispatch=c.layer_dispatch_s, redispatch=c.layer_dispatch_s * c.forward_dispatch_share,
                 checkpoint=c.checkpoint_dispatch_s, param_bytes=c.microbatch_param_bytes / c.hbm_eff,
                 recast_bytes=c.recompute_cast_bytes / c.hbm_eff, step=c.step_overhead_s)


def gemm_efficiency(m: float, n: float, k: float, constants: Constants = DEFAULT, gen: str = "ampere") -> float:
    """Share of peak a GEMM of shape (m x k) @ (k x n) reaches."""
    return constants.gemm_eff_max * constants.gen_eff(gen) / (
        1.0 + constants.gemm_dim_scale * (1.0 / m + 1.0 / n + 1.0 / k))


def gemm_time_s(m: float, n: float, k: float, peak_flops: float, r: Rates, fp8: bool = False) -> Num:
    """2mnk / (peak · eff(m, n, k)), written as amount x rate (see the module docstring)."""
    base, dim = (r.gemm8, r.gemm8_dim) if fp8 else (r.gemm, r.gemm_dim)
    return 2.0 * m * n * k / peak_flops * (base + dim * (1.0 / m + 1.0 / n + 1.0 / k))


_RING_FACTOR: dict[str, Callable[[int], float]] = {
    "all_reduce": lambda n: 2.0 * (n - 1) / n, "reduce_scatter": lambda n: (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n, "p2p": lambda n: 1.0}
_RING_STEPS: dict[str, Callable[[int], float]] = {
    "all_reduce": lambda n: 2.0 * (n - 1), "reduce_scatter": lambda n: n - 1.0,
    "all_gather": lambda n: n - 1.0, "p2p": lambda n: 1.0}
REFERENCE_STEPS = 14.0
"""Ring steps of the collective constants.latency_gpu_s describes: an all-reduce over the 8 GPUs of a node
(2(n-1) = 14), what nccl-tests and launcher.netbench measure as the small-message latency."""
INTER_NODE_HOP = 4.0
"""A ring step that crosses the network waits ~4x longer than an NVLink step (NCCL's tuning model: ~1-2 us per
NVLink hop against ~5-8 us per InfiniBand/RoCE hop for the LL/Simple protocols)."""
TREE_DEPTH = 4.0
"""NCCL picks a (double binary) tree over the ring when that is faster: a reduction then broadcast through ~2 log2(n)
levels each way, so large groups pay ~4 log2(n) steps of latency rather than 2(n-1)."""
DP_BUCKET_BYTES = 100e6
"""Data-parallel gradient reductions and parameter gathers go out in buckets (PyTorch DDP 25 MB, Megatron
40M elements and more): one collective latency per ~100 MB."""


def collective_time_s(nbytes: float, ranks: int, gbytes_per_s: float, kind: str, r: Rates, *,
                      spans_nodes: bool = False, calls: float = 1.0, step_s: float = 0.0) -> Num:
    """NCCL ring time: all_reduce moves 2(n-1)/n · S per rank, reduce_scatter/all_gather (n-1)/n · S, p2p S;
    over the link bandwidth x net_eff (nccl-tests' bus bandwidth), plus `calls` latencies. A latency is
    latency_gpu_s for a node's 8-GPU all-reduce and grows with the ring's steps (2(n-1) for an all-reduce, n-1 for
    a reduce-scatter or all-gather), each INTER_NODE_HOP times longer when the ring crosses nodes; never below one
    call's.

    step_s (Workload.network_step_s, the cluster's measured network): across nodes every call also waits step_s at
    each of the ring's n - 1 positions (1 for a p2p), the latency-bound term of the alpha-beta model that a fixed
    per-call latency misses at tens of nodes. A ring collective passes its chunks through every rank in turn, and
    each of those steps waits on the slowest link, the network's; NCCL's tree (all-reduce only) does not shorten
    all-gathers and reduce-scatters. Measured on the Playbook's EFA cluster (launcher.plan.corpus): a 256 MB
    all-gather takes 1.4 ms on 2 nodes and 24.3 ms on 64 where its bytes need ~0.7 ms: 43.5 us per position; its
    all-reduce ~0.7 x that per position (counted as the same n - 1)."""
    if ranks <= 1 and kind != "p2p":
        return 0.0
    steps = min(_RING_STEPS[kind](ranks), TREE_DEPTH * math.log2(max(2, ranks)))
    hops = steps * (INTER_NODE_HOP if spans_nodes else 1.0) / REFERENCE_STEPS
    out = _RING_FACTOR[kind](ranks) * nbytes / (gbytes_per_s * 1e9) * r.net + calls * max(1.0, hops) * r.latency
    if spans_nodes and step_s:
        out = out + calls * max(1, ranks - 1) * step_s * r.measured
    return out


def spans_nodes(cluster: ClusterConfig, size: int, stride: int) -> bool:
    """A group of `size` ranks `stride` apart does not fit in one node (NVLink domain)."""
    return size > 1 and size * stride > cluster.gpus_per_node and max(1, cluster.gpus_per_node // stride) < size


def group_bandwidth(cluster: ClusterConfig, size: int, stride: int) -> float:
    """GB/s per rank of a collective group of `size` ranks whose members are `stride` ranks apart (rank order tp,
    cp, dp, pp): NVLink while the group fits in a node; across nodes, its k members per node drive k rings through
    k NICs side by side (NCCL uses one ring per NIC), at most NVLink's bandwidth."""
    gpn = cluster.gpus_per_node
    members = max(1, min(size, gpn // max(1, stride)))
    if members >= size:
        return cluster.intra_node_gbytes_per_s
    return min(cluster.intra_node_gbytes_per_s, members * cluster.inter_node_gbytes_per_s)


def _dp_bandwidth(cluster: ClusterConfig, layout: Layout) -> float:
    """GB/s per rank of the DP group (dp x cp ranks, tp apart)."""
    return group_bandwidth(cluster, layout.gradient_group, layout.tp)


class MicrobatchTimes(NamedTuple):
    """One rank's work for one micro-batch (seconds), each linear in the rates. (NamedTuples here: the planner
    builds a few per layout, 100k layouts per second, and frozen dataclasses are slow to construct.)"""

    compute: Num     # forward + backward GEMMs and element-wise kernels
    backward: Num    # the backward part of `compute` (+ its TP comm): the window that hides the DP reduction
    recompute: Num
    tp_comm: Num
    pp_comm: Num
    cp_comm: Num     # context parallelism: the exposed part of ring attention's K/V exchange
    fixed: Num       # parameter-proportional HBM traffic (weight casts, gradient accumulation)
    dispatch: Num    # CPU time issuing this micro-batch's kernels
    shard_comm: Num  # ZeRO-2/3 / FSDP parameter gathers and gradient reduce-scatters, overlapped with the GPU work
    shard_edge: Num  # the part of them nothing overlaps (the first unit's gather, the last one's reduce-scatter)
    tp_overlap: Num = 0.0  # TP communication the stack overlaps with the GEMMs (StackFacts.tp_comm_overlap)
    tp_window: Num = 0.0   # the GEMM time that hides it
    ep_comm: Num = 0.0     # MoE: the token dispatch/combine all-to-alls (and etp's row exchanges), exposed

    @property
    def gpu(self) -> Num:
        """The serial GPU work (without the TP communication overlapped with the GEMMs: tp_exposed)."""
        return (self.compute + self.recompute + self.tp_comm + self.pp_comm + self.cp_comm + self.fixed
                + self.ep_comm)


def tp_exposed(mb: MicrobatchTimes, maximum: Callable[[Num, Num], Num] = max, interference: Num = 0.0) -> Num:
    """What TP communication overlapped with the GEMMs (Transformer Engine userbuffers) adds to a micro-batch:
    the part the GEMMs cannot hide, max(0, comm - GEMMs), plus `interference` x the hidden part (the SMs the
    communication kernels take from the GEMMs while they run)."""
    hidden = mb.tp_overlap + mb.tp_window - maximum(mb.tp_overlap, mb.tp_window)     # min(comm, GEMMs)
    return mb.tp_overlap - hidden + interference * hidden


def microbatch_total(mb: MicrobatchTimes, cpu: Num, maximum: Callable[[Num, Num], Num] = max, interference: Num = 0.0,
                     tp_interference: Num = 0.0) -> Num:
    """GPU: kernels run while the CPU issues the next ones, so the slower of the two; CPU stand-in (cpu = 1):
    both share the same cores, so they add up. ZeRO-3/FSDP communication runs beside the kernels: the slower of
    the two, plus `interference` x the overlapped part; TP communication overlapped with the GEMMs adds
    tp_exposed. Arithmetic select, so that `cpu` may be an array of 0/1."""
    gpu = mb.gpu + tp_exposed(mb, maximum, tp_interference)
    work = cpu * (gpu + mb.dispatch) + (1 - cpu) * maximum(gpu, mb.dispatch)
    overlapped = work + mb.shard_comm - maximum(work, mb.shard_comm)      # min(work, comm)
    return maximum(work, mb.shard_comm) + interference * overlapped + mb.shard_edge


class _Ctx(NamedTuple):
    """Per-call values shared by the helpers (derived once)."""

    model: ModelConfig
    layout: Layout
    r: Rates
    peak: float          # FLOP/s, 16-bit
    peak8: float         # FLOP/s of the linear layers' GEMMs (FP8 peak under fp8, else = peak)
    fp8: bool
    hbm: float           # B/s, nominal (hbm_eff is in the rates)
    e: int               # activation bytes
    flash: bool
    tp_bw: float         # GB/s of the TP group
    pp_bw: float
    pp_inter: bool
    cp_bw: float         # GB/s of the context-parallel ring (NVLink while tp x cp fits in a node)
    facts: StackFacts
    fused: bool          # element-wise kernels fused (Megatron/TE, or torch.compile)
    attn_factor: float   # attention kernel family on this generation (attention.kernel_factor)
    workload: Workload
    tp_span: bool        # the TP group crosses nodes


def _layer_times(c: _Ctx) -> tuple[Num, Num, Num, float, float, float]:
    """(dense GEMM fwd, attention-core fwd, attention-core bwd, element-wise fwd bytes, element-wise bwd bytes,
    score bytes fwd) per layer."""
    md, lay, r = c.model, c.layout, c.r
    t, h, f, s = lay.tp, md.hidden, dense_ffn_hidden(md), md.seq_len
    s_local = s / lay.sequence_shards   # context parallelism: each rank's share of every sequence
    tokens = lay.mbs * s_local
    gated = ffn_matrices(md)
    p8, fp8 = c.peak8, c.fp8
    dense = gemm_time_s(tokens, qkv_width(md) / t, h, p8, r, fp8) + gemm_time_s(tokens, h, h / t, p8, r, fp8)
    if f:   # the dense FFN, or an MoE model's shared expert
        dense += gemm_time_s(tokens, (gated - 1) * f / t, h, p8, r, fp8) + gemm_time_s(tokens, h, f / t, p8, r, fp8)
    dense += _expert_gemms(c)
    heads_local = md.heads / t * lay.mbs
    head_dim = h / md.heads
    # Element-wise bytes per s·b·h element (forward): replicated 10e+2 (2 norms r/w, 2 bias-dropout-add with mask),
    # sharded: QKV split/transposes 2e·qkv/h, context transpose 2e, activation function γ·e·f/h (GeLU reads f and
    # writes f; SwiGLU reads 2f, writes f).
    e = c.e
    replicated: float = 10 * e + 2
    sharded = 2 * e * qkv_width(md) / h + 2 * e + gated * e * f / h
    if not c.fused:
        if md.norm == "rmsnorm":
            replicated += 2 * EAGER_NORM_BYTES
            sharded += EAGER_ROTARY_BYTES * (1 + md.kv_heads / md.heads)
        sharded += EAGER_COPY_BYTES + (EAGER_GATE_BYTES * f / h if md.swiglu else 0.0)
    sharded_bwd = 2 * sharded
    if fp8:
        fwd8, f2 = FP8_CAST_FWD_BYTES
        sharded += fwd8 + f2 * f / h
        sharded_bwd += FP8_CAST_BWD_BYTES * (qkv_width(md) / h + 1 + (gated - 1) * f / h + 1)
    sbh = tokens * h
    rep_div = t if lay.sequence_parallel else 1
    experts_ew = moe.elementwise_bytes(md, lay, e)
    ew = sbh * (replicated / rep_div + sharded / t) + experts_ew
    ew_bwd = sbh * (2 * replicated / rep_div + sharded_bwd / t) + 2 * experts_ew
    scores = 0.0
    if c.flash:
        flops = 4.0 * tokens * s * h / t           # Q·Kᵀ and attention·V, unmasked, this rank's queries
        core_fwd = attention.flash_forward_amount(flops, s_local) / (c.peak * c.attn_factor) * r.attn
        core_bwd = attention.flash_backward_amount(flops, s_local) / (c.peak * c.attn_factor) * r.attn
    else:
        core = heads_local * 2 * gemm_time_s(s_local, s, head_dim, c.peak, r)   # Q·Kᵀ and attention·V
        core_fwd, core_bwd = core, 2 * core
        fused = s <= c.facts.fused_softmax_max_seq
        unfused = UNFUSED_SOFTMAX_BYTES if c.facts.softmax_fallback_fp32 else UNFUSED_SOFTMAX_16BIT_BYTES
        # fused softmax r/w + dropout r/w + 1-byte mask, or the unfused fallback's passes
        scores = heads_local * s_local * s * ((4 * e + 1) if fused else unfused)
    return dense, core_fwd, core_bwd, ew, ew_bwd, scores


def _expert_gemms(c: _Ctx) -> Num:
    """Forward GEMMs of the rank's routed experts per layer: E/ep grouped GEMMs of R·ep/E rows each
    (launcher.plan.moe.rows_per_expert), FC1 (γ-1)·F/etp wide and FC2 back to h, at the efficiency of their size."""
    md, lay = c.model, c.layout
    if not md.is_moe:
        return 0.0
    rows = moe.rows_per_expert(md, lay)
    f = md.moe_ffn_hidden / lay.etp
    per_expert = (gemm_time_s(rows, (ffn_matrices(md) - 1) * f, md.hidden, c.peak8, c.r, c.fp8)
                  + gemm_time_s(rows, md.hidden, f, c.peak8, c.r, c.fp8))
    return md.num_experts / lay.ep * per_expert


def all_to_all_time_s(cluster: ClusterConfig, nbytes: float, size: int, stride: int, r: Rates) -> Num:
    """An all-to-all of a `nbytes` send buffer per rank over `size` ranks `stride` apart
    (launcher.plan.moe.all_to_all_seconds_per_byte) plus one latency per ring step's worth (size - 1 steps, each
    INTER_NODE_HOP times longer across nodes)."""
    if size <= 1:
        return 0.0
    per_byte, span = moe.all_to_all_seconds_per_byte(cluster, size, stride)
    hops = (size - 1.0) * (INTER_NODE_HOP if span else 1.0) / REFERENCE_STEPS
    return nbytes * per_byte * r.net + max(1.0, hops) * r.latency


def _expert_comm(c: _Ctx, cluster: ClusterConfig) -> tuple[Num, Num]:
    """(forward, backward) all-to-all time of one MoE layer per micro-batch (launcher.plan.moe docstring): dispatch
    and combine over ep (plus the forward's count exchange), the etp group's row gather and output reduce-scatter."""
    md, lay = c.model, c.layout
    if not md.is_moe or lay.ep * lay.etp == 1:
        return 0.0, 0.0
    nbytes = moe.dispatch_bytes(md, lay, c.e)
    one = all_to_all_time_s(cluster, nbytes, lay.ep, lay.etp, c.r)
    both = 2 * one + 2 * all_to_all_time_s(cluster, nbytes * lay.etp, lay.etp, 1, c.r)
    counts = c.r.latency if lay.ep > 1 else 0.0
    return both + counts, both


def _shard_comm(c: _Ctx, cluster: ClusterConfig, layer_params_local: float, stage_layers: float,
                stage_params_local: float) -> tuple[Num, Num]:
    """(overlappable, exposed) ZeRO-2/3 / FSDP communication of one micro-batch on one rank."""
    lay, facts, wl, r = c.layout, c.facts, c.workload, c.r
    if lay.zero_stage < 2:
        return 0.0, 0.0
    d = shard_group(cluster, lay, wl)
    bw = group_bandwidth(cluster, d, lay.tp)
    span = spans_nodes(cluster, d, lay.tp)
    units = stage_layers + 1     # one FSDP unit per layer, plus the embeddings / output layer
    step_s = wl.network_step_s
    reduce = collective_time_s(stage_params_local * facts.reduce_bytes, d, bw, "reduce_scatter", r,
                               spans_nodes=span, calls=units, step_s=step_s)
    edge = collective_time_s(layer_params_local * facts.reduce_bytes, d, bw, "reduce_scatter", r, spans_nodes=span,
                             step_s=step_s)
    sync = syncs_every_microbatch(facts, wl) or lay.microbatches <= 1
    total = reduce if sync else 0.0
    if lay.zero_stage >= 3:
        gather = collective_time_s(stage_params_local * facts.gather_bytes, d, bw, "all_gather", r,
                                   spans_nodes=span, calls=units, step_s=step_s)
        total += gather * (2 if wl.resharded else 1)
        edge += collective_time_s(layer_params_local * facts.gather_bytes, d, bw, "all_gather", r, spans_nodes=span,
                                  step_s=step_s)
    replicas = lay.gradient_group // d
    if replicas > 1 and sync:     # HSDP: the shard's gradient across the replicas
        rbw = group_bandwidth(cluster, replicas, lay.tp * d)
        total += collective_time_s(stage_params_local / d * facts.reduce_bytes, replicas, rbw, "all_reduce", r,
                                   spans_nodes=spans_nodes(cluster, replicas, lay.tp * d), calls=units,
                                   step_s=step_s)
    return total, edge


def microbatch_times(c: _Ctx, cluster: ClusterConfig, stage: int, params: float,
                     layer: tuple[Num, Num, Num, float, float, float]) -> MicrobatchTimes:
    """One micro-batch on pipeline stage `stage` holding `params` parameters; `layer` = _layer_times(c)."""
    md, lay, r = c.model, c.layout, c.r
    t, p, v = lay.tp, lay.pp, lay.vpp
    dense, core_fwd, core_bwd, ew, ew_bwd, scores = layer
    layers = md.layers / p
    hbm_s = r.hbm / c.hbm      # seconds per byte of memory-bound traffic
    fwd = dense + core_fwd + (ew + scores) * hbm_s
    bwd = 2 * dense + core_bwd + (ew_bwd + 2 * scores) * hbm_s
    tokens = lay.mbs * md.seq_len / lay.sequence_shards
    act_bytes = tokens * md.hidden * c.e
    step_s = c.workload.network_step_s
    one = (collective_time_s(act_bytes, t, c.tp_bw, "all_reduce", r, spans_nodes=c.tp_span, step_s=step_s)
           if t > 1 else 0.0)
    allreduce = 2 * one                  # the forward's two (after attention and after the FFN)
    full = lay.recompute == "full"
    share = 1.0 / lay.recompute_every if full else 0.0     # layers whose forward runs twice
    gathers = c.facts.tp_input_gathers   # column-parallel inputs gathered (SP) / input gradients reduced (backward)
    if lay.sequence_parallel:
        # forward: `gathers` all-gathers of the layer input + 2 reduce-scatters = (gathers + 2)/2 all-reduces; the
        # backward the mirror image, plus (Megatron) 2 all-gathers of the norm outputs again for the weight
        # gradients of QKV and FC1 (Korthikanti §4.2.2). Megatron overlaps these with the input-gradient GEMMs,
        # which then run slower; counted as exposed, this reproduces Table 4's small net SP gain (-3 %, not the
        # -8 % of the element-wise savings alone).
        fwd_comm = (gathers + 2) / 2 * one
        bwd_comm = fwd_comm + (2 * collective_time_s(act_bytes, t, c.tp_bw, "all_gather", r, spans_nodes=c.tp_span,
                                                     step_s=step_s)
                               if c.facts.sp_regather and t > 1 else 0.0)
    else:   # 2 all-reduces forward; backward one per column-parallel input gradient
        fwd_comm, bwd_comm = allreduce, gathers * one
    tp_comm = fwd_comm * (1 + share) + bwd_comm
    tp_overlap = tp_window = 0.0
    if c.facts.tp_comm_overlap and lay.sequence_parallel and t > 1:
        # Transformer Engine userbuffers (NeMo / Megatron-Bridge / MLPerf NeMo: tp_comm_overlap): every SP
        # all-gather and reduce-scatter of the layer runs chunk by chunk beside the GEMM that consumes or produces
        # it (ring exchange for QKV/FC1 fprop and proj/FC2 dgrad, pipelined reduce-scatter after proj/FC2 fprop,
        # bulk overlap with the QKV/FC1 dgrad and wgrad); the layer's GEMMs, forward, backward and recomputed, hide
        # it (tp_exposed).
        tp_overlap, tp_comm = tp_comm, 0.0
        tp_window = dense * (3 + share)
    recompute = fwd * share if full else (core_fwd + scores * hbm_s if lay.recompute == "selective" else 0.0)
    compute, backward = layers * (fwd + bwd), layers * (bwd + bwd_comm)
    if stage == 0:   # embedding lookup and its gradient scatter-add (memory-bound, small)
        compute += 3 * act_bytes * hbm_s
    if stage == p - 1:   # final norm, output layer (h -> V/t) and the fp32 cross-entropy over V/t logits
        vocab = padded_vocab(md.vocab, t)
        logit = gemm_time_s(tokens, vocab / t, md.hidden, c.peak, r)
        shards = t if c.facts.vocab_parallel_loss else 1
        ce = tokens * vocab / shards * (2 * c.e + 20) * hbm_s
        compute += 3 * logit + ce + 3 * act_bytes * hbm_s
        backward += 2 * logit
        if shards < t:   # the logits all-gathered for the loss, their gradient reduce-scattered back
            logits_bytes = tokens * vocab * c.e
            compute += (collective_time_s(logits_bytes, t, c.tp_bw, "all_gather", r)
                        + collective_time_s(logits_bytes, t, c.tp_bw, "reduce_scatter", r))
    pp = 0.0
    if p > 1:   # one activation forward, one gradient backward per chunk; scattered over the TP ranks when useful
        shard = t if (lay.sequence_parallel or c.pp_inter) else 1
        pp = 2 * v * collective_time_s(act_bytes / shard, 2, c.pp_bw, "p2p", r, spans_nodes=c.pp_inter,
                                       step_s=step_s)
    cp = 0.0
    if lay.sequence_shards > 1:
        # Ring attention passes each rank's K and V chunk (tokens x kv width / t) round the cp ranks: cp-1 steps,
        # each overlapped with the attention of the chunk before, so the first step of the forward and the first two
        # of the backward (K/V again, then their gradients) are exposed (Liu et al. 2023, Ring Attention; Megatron's
        # p2p context parallelism in Transformer Engine).
        kv_bytes = 2 * tokens * md.kv_heads * (md.hidden / md.heads) / t * c.e
        cp = layers * 3 * collective_time_s(kv_bytes, 2, c.cp_bw, "p2p", r)
    fixed = params / c.hbm * (r.param_bytes + (r.recast_bytes * share if full else 0.0))
    dispatch = layers * (r.dispatch + (r.redispatch * share if full else 0.0)
                         + (r.checkpoint * (share if full else 1.0) if lay.recompute != "none" else 0.0))
    sharded, replicated = layer_params(md)
    shard, edge = _shard_comm(c, cluster, sharded / t + replicated, layers, params)
    ep_fwd, ep_bwd = _expert_comm(c, cluster)
    ep_comm = layers * (ep_fwd * (1 + share) + ep_bwd)
    return MicrobatchTimes(compute, backward + layers * ep_bwd, layers * recompute, layers * tp_comm, pp, cp, fixed,
                           dispatch, shard, edge, layers * tp_overlap, layers * tp_window, ep_comm)


def _dp_collectives(c: _Ctx, cluster: ClusterConfig, precision: str, params: float) -> tuple[Num, Num]:
    """(gradient reduction, parameter all-gather) at the end of the step (0 without DP, and for ZeRO-2/3, which
    reduce every micro-batch: StepPieces.stages' shard_comm)."""
    lay, facts = c.layout, c.facts
    d = lay.gradient_group   # dp x cp ranks hold the same parameters
    if d <= 1:
        return 0.0, 0.0
    if lay.zero_stage >= 2 and lay.microbatches > 1 and not syncs_every_microbatch(facts, c.workload):
        # gradients accumulated unsharded: one reduce-scatter, overlapped with the last backward (and for ZeRO-2
        # the parameter all-gather after the step)
        d_shard = shard_group(cluster, lay, c.workload)
        units = c.model.layers / lay.pp + 1
        reduce = collective_time_s(params * facts.reduce_bytes, d_shard, group_bandwidth(cluster, d_shard, lay.tp),
                                   "reduce_scatter", c.r, spans_nodes=spans_nodes(cluster, d_shard, lay.tp),
                                   calls=units, step_s=c.workload.network_step_s)
        gather = collective_time_s(params * 2.0, d, _dp_bandwidth(cluster, lay), "all_gather", c.r,
                                   spans_nodes=spans_nodes(cluster, d, lay.tp), calls=units,
                                   step_s=c.workload.network_step_s)
        return reduce, gather if lay.zero_stage == 2 else 0.0
    if lay.zero_stage >= 3:
        return 0.0, 0.0
    bw = _dp_bandwidth(cluster, lay)
    span = spans_nodes(cluster, d, lay.tp)
    grad_bytes = params * (facts.reduce_bytes if precision in ("bf16", "fp8") else GRAD_COMM_BYTES[precision])
    weight_bytes = params * (2.0 if precision != "fp32" else 4.0)

    def coll(nbytes: float, kind: str) -> Num:
        return collective_time_s(nbytes, d, bw, kind, c.r, spans_nodes=span,
                                 calls=max(1.0, nbytes / DP_BUCKET_BYTES), step_s=c.workload.network_step_s)
    if lay.zero_stage == 2:
        return 0.0, coll(weight_bytes, "all_gather")
    if lay.zero_stage == 0 and not lay.distributed_optimizer:
        return coll(grad_bytes, "all_reduce"), 0.0
    return coll(grad_bytes, "reduce_scatter"), coll(weight_bytes, "all_gather")


def _optimizer_s(c: _Ctx, cluster: ClusterConfig, precision: str, params: float) -> Num:
    """Adam reads and writes its states (2 x optimizer bytes), reads the grad and writes the weight for the
    parameters of its shard; the grad-norm/clipping pass reads every local grad once; FP8 casts every weight once
    per step (read 2, write 1 + its transpose 1). All memory-bound. Plus the per-iteration overhead: host work and
    the step's small global synchronisations (gradient norm, loss, found-inf), whose latency and straggler wait grow
    with the depth of the reduction tree: step_overhead_s x log2(2 x GPUs)."""
    lay, states = c.layout, c.facts.states
    d = shard_group(cluster, lay, c.workload)
    weight, grad, optim = state_bytes_per_param(precision, 0, False, 1, states)
    sharded = lay.zero_stage >= 1 or lay.distributed_optimizer
    opt_params = params / d if sharded else params
    local_grad_bytes = params * state_bytes_per_param(precision, lay.zero_stage, lay.distributed_optimizer, d,
                                                      states)[1]
    cast = params * 4.0 if precision == "fp8" else 0.0
    levels = math.log2(2 * max(1, lay.gpus))      # 1 on one GPU, 10 on 512
    return (opt_params * (2 * optim + grad + weight) + local_grad_bytes + cast) * c.r.hbm / c.hbm + c.r.step * levels


class StepPieces(NamedTuple):
    """Everything `combine` needs, each time linear in the rates. `stages` are the first, the last and a middle
    stage (the same object repeated where pp < 3); `weights` say how many of the pp stages each stands for."""

    stages: tuple[MicrobatchTimes, MicrobatchTimes, MicrobatchTimes]
    weights: tuple[Num, Num, Num]
    microbatches: Num   # an int, or an array over trials (launcher.plan.calibrate.FeatureTable), as pp and vpp
    pp: Num
    vpp: Num
    overlap_gather: Num  # 1 when the end-of-step parameter all-gather hides behind the next forward, else 0
    cpu: Num            # 1 on the CPU stand-in, else 0
    dp_reduce: Num
    dp_gather: Num
    optimizer: Num
    interference: Num = 0.0   # constants.overlap_interference (a share, not a rate)
    tp_interference: Num = 0.0   # constants.tp_overlap_interference (a share)


def _context(model: ModelConfig, cluster: ClusterConfig, layout: Layout, precision: str, flash: bool, r: Rates,
             cpu: bool, workload: Workload, backend: str) -> _Ctx:
    gpn = cluster.gpus_per_node
    pp_inter = layout.nodes > 1
    peak = cluster.peak_tflops * 1e12 * (FP32_PEAK_SHARE if precision == "fp32" and not cpu else 1.0)
    fp8 = precision == "fp8" and not cpu
    ratio = fp8_peak_ratio(cluster) if fp8 else None
    fp8 = ratio is not None
    facts = stack_facts(stack_name(workload, backend))
    gen = generation(cluster)
    return _Ctx(model, layout, r, peak, peak * (ratio or 1.0), fp8, cluster.hbm_gbytes_per_s * 1e9,
                ACTIVATION_BYTES[precision], flash, group_bandwidth(cluster, layout.tp, 1),
                cluster.inter_node_gbytes_per_s if pp_inter else cluster.intra_node_gbytes_per_s, pp_inter,
                cluster.inter_node_gbytes_per_s if layout.tp * layout.cp > gpn else cluster.intra_node_gbytes_per_s,
                facts, kernels_fused(facts, workload),
                attention.kernel_factor(workload.attention_kernel or facts.attention, gen), workload,
                spans_nodes(cluster, layout.tp, 1))


class StageMemo:
    """step_pieces' `memo`: a stage's micro-batch times by what they depend on (_stage_key).

    Times priced with unit-vector rates (numpy vectors) are kept as rows of a few large arrays, not as the
    evaluation's own small arrays (13 per stage, each an object, its shape and its data): held through a plan's
    walk between its long-lived objects, ~100k small allocations left the heap fragmented when they were freed
    (a resumed sweep in the same process then peaked ~20 MB higher). A hit gives the times again as views of their
    rows, a number as the number: the same values, types and shapes, to the last bit."""

    CHUNK = 1024   # stages per array (~1.7 MB at 13 fields x 16 components)

    def __init__(self) -> None:
        self._at: dict[tuple[Any, ...], Any] = {}   # key -> the times (numbers only), or (chunk, row, numbers)
        self._chunks: list[Any] = []
        self._used = 0   # rows of the last chunk taken

    def __len__(self) -> int:
        return len(self._at)

    def get(self, key: tuple[Any, ...]) -> Optional[MicrobatchTimes]:
        got = self._at.get(key)
        if got is None or type(got) is MicrobatchTimes:
            return got
        chunk, row, numbers = got
        fields = list(chunk[row])   # a view per row
        for i, x in numbers.items():
            fields[i] = x
        return MicrobatchTimes(*fields)

    def put(self, key: tuple[Any, ...], times: MicrobatchTimes) -> None:
        import numpy as np

        width = next((len(x) for x in times if isinstance(x, np.ndarray)), 0)
        if not width:
            self._at[key] = times
            return
        if not self._chunks or self._used == self.CHUNK or self._chunks[-1].shape[2] != width:
            self._chunks.append(np.empty((self.CHUNK, len(times), width)))
            self._used = 0
        chunk, row = self._chunks[-1], self._used
        self._used += 1
        numbers = {}
        for i, x in enumerate(times):
            if isinstance(x, np.ndarray):
                chunk[row, i] = x
            else:
                numbers[i] = x
        self._at[key] = (chunk, row, numbers)


def step_pieces(model: ModelConfig, cluster: ClusterConfig, layout: Layout, precision: str, flash: bool,
                r: Rates, cpu: bool, *, workload: Workload = DEFAULT_WORKLOAD, backend: str = "",
                memo: Optional[StageMemo] = None) -> StepPieces:
    """`memo`: a StageMemo kept across calls with the same model, cluster, precision, flash, rates (the same object),
    cpu and backend (a plan's batch classes, launcher.plan.pricing): a stage's micro-batch times are computed once
    for all the layouts that give them the same inputs (_stage_key), e.g. those apart only in dp, the node count
    beyond one or ZeRO-1 (a 50k-trial plan's ~32k stages are ~2.4k distinct ones, issue 19). The same function of
    the same values: the pieces are those of a call without it, to the last bit."""
    c = _context(model, cluster, layout, precision, flash, r, cpu, workload, backend)
    p = layout.pp
    first_params = stage_params(model, layout, 0)
    last_params = stage_params(model, layout, p - 1) if p > 1 else first_params
    params = max(first_params, last_params)   # the most loaded stage sets the DP traffic and the optimizer step
    layer: list[tuple[Num, Num, Num, float, float, float]] = []   # _layer_times(c), once a stage needs it

    def times(stage: int, stage_params_: float) -> MicrobatchTimes:
        key = None if memo is None else _stage_key(c, stage, stage_params_)
        if key is not None:
            hit = memo.get(key)    # type: ignore[union-attr]
            if hit is not None:
                return hit
        if not layer:
            layer.append(_layer_times(c))
        out = microbatch_times(c, cluster, stage, stage_params_, layer[0])
        if key is not None:
            memo.put(key, out)     # type: ignore[union-attr]
        return out

    experts = moe.expert_params(model, layout)    # the same on every stage: every layer is an MoE layer
    first = times(0, first_params + experts)
    last = times(p - 1, last_params + experts) if p > 1 else first
    middle = times(1, stage_params(model, layout, 1) + experts) if p > 2 else first
    weights = (1.0, 1.0 if p > 1 else 0.0, float(max(0, p - 2)))
    reduce, gather = _dp_collectives(c, cluster, precision, params)
    e_reduce, e_gather, e_optimizer = _expert_states(c, cluster, precision, experts)
    overlap = int(c.facts.overlap_param_gather and layout.distributed_optimizer)
    return StepPieces((first, last, middle), weights, max(1, layout.microbatches), p, layout.vpp, overlap,
                      int(cpu), reduce + e_reduce, gather + e_gather,
                      _optimizer_s(c, cluster, precision, params) + e_optimizer)


def _stage_key(c: _Ctx, stage: int, params: float) -> Optional[tuple[Any, ...]]:
    """What microbatch_times(c, _, stage, params, _layer_times(c)) reads that varies within one plan (step_pieces'
    `memo`): of the layout tp, pp, vpp, mbs, cp, the recomputation and sequence parallelism (and through _Ctx
    whether it spans nodes: the p2p link); not dp, gbs, the node count beyond that or ZeRO-0/1 and the distributed
    optimizer. None (not memoised) where it reads more: ZeRO-2/3 (the shard group, the micro-batch count) and MoE
    models (the expert groups)."""
    lay = c.layout
    if lay.zero_stage >= 2 or c.model.is_moe:
        return None
    return (stage, params, lay.tp, lay.pp, lay.vpp, lay.mbs, lay.cp, lay.recompute, lay.recompute_every,
            lay.sequence_parallel, c.pp_inter, c.workload)


def _expert_states(c: _Ctx, cluster: ClusterConfig, precision: str, experts: float) -> tuple[Num, Num, Num]:
    """(gradient reduction, parameter all-gather, optimizer step) of the rank's routed-expert parameters: reduced
    over the expert-data-parallel group (ranks ep·etp apart), sharded there by the distributed optimizer / ZeRO-1."""
    lay = c.layout
    if not experts:
        return 0.0, 0.0, 0.0
    edp = moe.expert_data_parallel(lay)
    sharded = lay.zero_stage >= 1 or lay.distributed_optimizer
    weight, grad, optim = state_bytes_per_param(precision, 0, False, 1, c.facts.states)
    step = ((experts / edp if sharded else experts) * (2 * optim + grad + weight) + experts * grad) * c.r.hbm / c.hbm
    if edp <= 1:
        return 0.0, 0.0, step
    stride = lay.ep * lay.etp
    bw, span = group_bandwidth(cluster, edp, stride), spans_nodes(cluster, edp, stride)
    grad_bytes = experts * (c.facts.reduce_bytes if precision in ("bf16", "fp8") else GRAD_COMM_BYTES[precision])

    def coll(nbytes: float, kind: str) -> Num:
        return collective_time_s(nbytes, edp, bw, kind, c.r, spans_nodes=span,
                                 calls=max(1.0, nbytes / DP_BUCKET_BYTES))
    if not sharded:
        return coll(grad_bytes, "all_reduce"), 0.0, step
    return (coll(grad_bytes, "reduce_scatter"), coll(experts * (2.0 if precision != "fp32" else 4.0), "all_gather"),
            step)


def combine(pc: StepPieces, maximum: Callable[[Num, Num], Num] = max) -> tuple[Num, Num, Num, Num, list[Num]]:
    """(step, bottleneck stage per micro-batch, exposed DP time, bubble, per-stage totals) from the pieces. Only
    arithmetic and `maximum` (builtin max for floats, numpy.maximum elementwise over arrays of trials)."""
    first, last, middle = pc.stages
    k, kt = pc.interference, pc.tp_interference
    t0 = microbatch_total(first, pc.cpu, maximum, k, kt)
    totals = [t0, t0 if last is first else microbatch_total(last, pc.cpu, maximum, k, kt),
              t0 if middle is first else microbatch_total(middle, pc.cpu, maximum, k, kt)]
    bottleneck = maximum(maximum(totals[0], totals[1]), totals[2])
    mean = (pc.weights[0] * totals[0] + pc.weights[1] * totals[1] + pc.weights[2] * totals[2]) / pc.pp
    # The gradient reduction hides behind the last backward; the end-of-step parameter all-gather is exposed unless
    # the stack overlaps it with the first forward of the next step.
    og = pc.overlap_gather
    first_forward = first.compute - first.backward
    exposed = (maximum(0.0, pc.dp_reduce - first.backward)
               + og * maximum(0.0, pc.dp_gather - first_forward) + (1 - og) * pc.dp_gather)
    bubble = (pc.pp - 1) / pc.vpp * mean
    return pc.microbatches * bottleneck + exposed + bubble + pc.optimizer, bottleneck, exposed, bubble, totals


def step_time_s(model: ModelConfig, cluster: ClusterConfig, layout: Layout, precision: str, flash: bool,
                constants: Constants = DEFAULT, *, workload: Workload = DEFAULT_WORKLOAD, backend: str = ""
                ) -> tuple[float, dict[str, float]]:
    """(iteration seconds, breakdown) for one layout."""
    cpu = is_cpu_standin(cluster.gpu)
    pc = step_pieces(model, cluster, layout, precision, flash, rates(constants, cpu, generation(cluster)), cpu,
                     workload=workload, backend=backend)
    return step_time_of(pc, constants, cpu)


def step_time_of(pc: StepPieces, constants: Constants, cpu: bool) -> tuple[float, dict[str, float]]:
    """step_time_s from the layout's pieces (priced with `constants`' rates): launcher.plan.estimator prices one
    layout of a batch class (launcher.plan.batch_class) and gives each of the others its micro-batch count."""
    return step_time_at(class_step(pc, constants, cpu), pc.microbatches)


class ClassStep(NamedTuple):
    """What step_time_of computes before the micro-batch count enters (the pieces' stages, the DP and optimizer
    time and the bubble do not depend on it): one per batch class, then step_time_at per layout."""

    bottleneck: float
    exposed: float
    bubble: float
    optimizer: float
    mb: MicrobatchTimes   # the bottleneck stage's micro-batch
    tp_hidden: float
    gpu: float
    work: float


def class_step(pc: StepPieces, constants: Constants, cpu: bool) -> ClassStep:
    """step_time_of's parts of pieces priced with `constants`' rates, for any micro-batch count."""
    pc = pc._replace(interference=constants.overlap_interference, tp_interference=constants.tp_overlap_interference)
    _, bottleneck_s, exposed, bubble, totals = combine(pc)
    mb = pc.stages[totals.index(bottleneck_s)]
    tp_hidden = tp_exposed(mb, max, constants.tp_overlap_interference)
    gpu = mb.gpu + tp_hidden
    work = max(gpu, mb.dispatch) if not cpu else gpu + mb.dispatch
    return ClassStep(bottleneck_s, exposed, bubble, pc.optimizer, mb, tp_hidden, gpu, work)


def step_time_at(cs: ClassStep, m: Num) -> tuple[float, dict[str, float]]:
    """(iteration seconds, breakdown) at `m` micro-batches per step: the same operations in the same order as
    `combine`'s step and step_time_of's breakdown (to the last bit)."""
    mb, gpu, work = cs.mb, cs.gpu, cs.work
    step = m * cs.bottleneck + cs.exposed + cs.bubble + cs.optimizer
    breakdown = {
        "compute": m * mb.compute,
        "recompute": m * mb.recompute,
        "tp_comm": m * (mb.tp_comm + cs.tp_hidden),
        "pp_comm": m * mb.pp_comm,
        "cp_comm": m * mb.cp_comm,
        "ep_comm": m * mb.ep_comm,
        "fixed": m * mb.fixed,
        "dispatch": m * (work - gpu),              # CPU dispatch time not hidden behind GPU work
        "shard_comm": m * (cs.bottleneck - work),  # ZeRO-3/FSDP communication not hidden behind the work
        "dp_comm": cs.exposed,
        "bubble": cs.bubble,
        "optimizer": cs.optimizer,
    }
    return step, breakdown
