"""Time of one training iteration: per-micro-batch work on each pipeline stage, the 1F1B schedule, DP sync, optimizer.

The structure follows Calculon (Isaev et al. SC23) and Narayanan et al. 2021 (§2.2 bubble, §3 communication):
- GEMMs: FLOPs / (peak · efficiency(m, n, k)) on the rank's shard; efficiency saturates with every dimension:
      eff = gemm_eff_max / (1 + gemm_dim_scale · (1/m + 1/n + 1/k))
  so thin tensor-parallel shards (h/t), few tokens per micro-batch (b·s) and small head dims lose efficiency.
  Backward GEMMs (input and weight gradients) = 2 x forward. fp32 on a GPU runs at FP32_PEAK_SHARE of the peak.
- Element-wise kernels (norms, dropout, residual adds, activation functions, softmax over s x s scores, layout
  copies) are memory-bound: bytes moved / (HBM bandwidth · hbm_eff); backward moves 2 x the forward bytes.
- Collectives on the link of their tier (NVLink inside a node, the NICs between nodes), NCCL ring convention:
  all-reduce 2(n-1)/n · S / (bw · net_eff), reduce-scatter / all-gather (n-1)/n · S / (bw · net_eff), plus a latency.
  TP: 2 all-reduces of b·s·h in forward and 2 in backward per layer (Narayanan §3.2), +2 under full recompute;
  sequence parallelism replaces each by a reduce-scatter + all-gather of the same volume (Korthikanti §4.2.2).
- Fixed costs per micro-batch (tests/data/h100_single_gpu_sweeps.csv): HBM traffic proportional to the parameters
  (weight casts, gradient accumulation: constants.MICROBATCH_PARAM_BYTES), and the CPU time that issues the
  kernels (constants.LAYER_DISPATCH_S): GPU kernels run asynchronously, so a micro-batch takes
  max(GPU work, CPU dispatch); on the CPU stand-in both run on the same cores and add up.
- Pipeline (1F1B): step = m · (bottleneck stage per micro-batch) + (p - 1)/v · (mean stage per micro-batch), the
  bubble fraction (p - 1)/(v·m) of Narayanan §2.2; p2p of b·s·h (/t when scattered over the NICs or under SP).
- DP gradient reduction overlaps the backward of the last micro-batch; ZeRO/distributed-optimizer parameter
  all-gathers after the optimizer step are exposed; ZeRO-3 gathers parameters every micro-batch (overlapped).
- Optimizer step: memory-bound Adam update over the rank's optimizer shard.

How constants enter (what calibration relies on): every time below is a constant-free amount times a rate
(`Rates`, derived from `Constants`): FLOPs/peak x 1/gemm_eff_max, bytes/bandwidth x 1/hbm_eff, ... . `step_pieces`
adds such products only, so each piece is linear in the rates; the only non-linear steps (maxima: CPU vs GPU,
the bottleneck stage, DP overlap) are in `combine`, which works on floats and, elementwise, on numpy arrays.
launcher.plan.calibrate evaluates pieces once with unit rates (numpy vectors) and then re-combines them for any
constants without running the model again.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, NamedTuple

from launcher.config.schema import ClusterConfig, ModelConfig
from launcher.core.layout import Layout
from launcher.core.names import is_cpu_standin
from launcher.plan.constants import DEFAULT, FP32_PEAK_SHARE, Constants
from launcher.plan.flops import ffn_matrices, padded_vocab, qkv_width
from launcher.plan.memory import ACTIVATION_BYTES, STATE_BYTES, stage_params, state_bytes_per_param

FLASH_CAUSAL_SHARE = 0.5   # a causal flash kernel skips the masked half of Q·Kᵀ and attention·V
FLASH_BACKWARD = 2.5       # flash backward recomputes Q·Kᵀ: 5 GEMMs vs 2 in forward
GRAD_COMM_BYTES = {"bf16": 4.0, "fp16": 2.0, "fp32": 4.0}  # bf16 reduces the fp32 main grads (Megatron)

Num = Any  # float, or a numpy array of amounts when evaluated with unit rates (launcher.plan.calibrate)


class Rates(NamedTuple):
    """Seconds per unit of each constant-free amount the model adds up."""

    gemm: Num          # per FLOP/peak: 1 / gemm_eff_max
    gemm_dim: Num      # per FLOP/peak x (1/m + 1/n + 1/k): gemm_dim_scale / gemm_eff_max
    hbm: Num           # per byte / HBM bandwidth: 1 / hbm_eff
    net: Num           # per byte / link bandwidth: 1 / net_eff
    latency: Num       # per collective or p2p call
    dispatch: Num      # per layer issued (forward + backward), per micro-batch
    redispatch: Num    # per layer whose forward is issued again (full recompute)
    checkpoint: Num    # per checkpoint region (recompute), per layer
    param_bytes: Num   # per parameter / HBM bandwidth, per micro-batch: microbatch_param_bytes / hbm_eff
    recast_bytes: Num  # the same, under full recompute: recompute_cast_bytes / hbm_eff


@functools.lru_cache(maxsize=64)
def rates(constants: Constants, cpu: bool) -> Rates:
    c = constants
    return Rates(gemm=1.0 / c.gemm_eff_max, gemm_dim=c.gemm_dim_scale / c.gemm_eff_max, hbm=1.0 / c.hbm_eff,
                 net=1.0 / c.net_eff, latency=c.latency_cpu_s if cpu else c.latency_gpu_s,
                 dispatch=c.layer_dispatch_s, redispatch=c.layer_dispatch_s * c.forward_dispatch_share,
                 checkpoint=c.checkpoint_dispatch_s, param_bytes=c.microbatch_param_bytes / c.hbm_eff,
                 recast_bytes=c.recompute_cast_bytes / c.hbm_eff)


def gemm_efficiency(m: float, n: float, k: float, constants: Constants = DEFAULT) -> float:
    """Share of peak a GEMM of shape (m x k) @ (k x n) reaches."""
    return constants.gemm_eff_max / (1.0 + constants.gemm_dim_scale * (1.0 / m + 1.0 / n + 1.0 / k))


def gemm_time_s(m: float, n: float, k: float, peak_flops: float, r: Rates) -> Num:
    """2mnk / (peak · eff(m, n, k)), written as amount x rate (see the module docstring)."""
    return 2.0 * m * n * k / peak_flops * (r.gemm + r.gemm_dim * (1.0 / m + 1.0 / n + 1.0 / k))


_RING_FACTOR: dict[str, Callable[[int], float]] = {
    "all_reduce": lambda n: 2.0 * (n - 1) / n, "reduce_scatter": lambda n: (n - 1) / n,
    "all_gather": lambda n: (n - 1) / n, "p2p": lambda n: 1.0}


def collective_time_s(nbytes: float, ranks: int, gbytes_per_s: float, kind: str, r: Rates) -> Num:
    """NCCL ring time: all_reduce moves 2(n-1)/n · S per rank, reduce_scatter/all_gather (n-1)/n · S, p2p S;
    over the link bandwidth x net_eff (nccl-tests' bus bandwidth), plus one latency."""
    if ranks <= 1 and kind != "p2p":
        return 0.0
    return _RING_FACTOR[kind](ranks) * nbytes / (gbytes_per_s * 1e9) * r.net + r.latency


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

    @property
    def gpu(self) -> Num:
        return self.compute + self.recompute + self.tp_comm + self.pp_comm + self.cp_comm + self.fixed


def microbatch_total(mb: MicrobatchTimes, cpu: Num, maximum: Callable[..., Num] = max) -> Num:
    """GPU: kernels run while the CPU issues the next ones, so the slower of the two; CPU stand-in (cpu = 1):
    both share the same cores, so they add up. Arithmetic select, so that `cpu` may be an array of 0/1."""
    gpu = mb.gpu
    return cpu * (gpu + mb.dispatch) + (1 - cpu) * maximum(gpu, mb.dispatch)


class _Ctx(NamedTuple):
    """Per-call values shared by the helpers (derived once)."""

    model: ModelConfig
    layout: Layout
    r: Rates
    peak: float          # FLOP/s
    hbm: float           # B/s, nominal (hbm_eff is in the rates)
    e: int               # activation bytes
    flash: bool
    tp_bw: float         # GB/s of the TP tier
    pp_bw: float
    pp_inter: bool
    cp_bw: float         # GB/s of the context-parallel ring (NVLink while tp x cp fits in a node)


def _layer_times(c: _Ctx) -> tuple[Num, Num, Num, float, float]:
    """(dense GEMM fwd, attention-core fwd, attention-core bwd, element-wise fwd bytes, score bytes fwd) per layer."""
    md, lay, r = c.model, c.layout, c.r
    t, h, f, s = lay.tp, md.hidden, md.ffn_hidden, md.seq_len
    s_local = s / lay.sequence_shards   # context parallelism: each rank's share of every sequence
    tokens = lay.mbs * s_local
    gated = ffn_matrices(md)
    dense = (gemm_time_s(tokens, qkv_width(md) / t, h, c.peak, r) + gemm_time_s(tokens, h, h / t, c.peak, r)
             + gemm_time_s(tokens, (gated - 1) * f / t, h, c.peak, r) + gemm_time_s(tokens, h, f / t, c.peak, r))
    heads_local = md.heads / t * lay.mbs
    head_dim = h / md.heads
    core = heads_local * 2 * gemm_time_s(s_local, s, head_dim, c.peak, r)    # Q·Kᵀ and attention·V (local queries)
    # Element-wise bytes per s·b·h element (forward): replicated 10e+2 (2 norms r/w, 2 bias-dropout-add with mask),
    # sharded: QKV split/transposes 2e·qkv/h, context transpose 2e, activation function γ·e·f/h (GeLU reads f and
    # writes f; SwiGLU reads 2f, writes f).
    e = c.e
    replicated = 10 * e + 2
    sharded = 2 * e * qkv_width(md) / h + 2 * e + gated * e * f / h
    sbh = tokens * h
    ew = sbh * (replicated / (t if lay.sequence_parallel else 1) + sharded / t)
    scores = 0.0
    if c.flash:
        core_fwd, core_bwd = core * FLASH_CAUSAL_SHARE, core * FLASH_CAUSAL_SHARE * FLASH_BACKWARD
    else:
        core_fwd, core_bwd = core, 2 * core
        scores = heads_local * s_local * s * (4 * e + 1)   # fused softmax r/w + dropout r/w + 1-byte mask
    return dense, core_fwd, core_bwd, ew, scores


def microbatch_times(c: _Ctx, stage: int, params: float, layer: tuple[Num, ...]) -> MicrobatchTimes:
    """One micro-batch on pipeline stage `stage` holding `params` parameters; `layer` = _layer_times(c)."""
    md, lay, r = c.model, c.layout, c.r
    t, p, v = lay.tp, lay.pp, lay.vpp
    dense, core_fwd, core_bwd, ew, scores = layer
    layers = md.layers / p
    hbm_s = r.hbm / c.hbm      # seconds per byte of memory-bound traffic
    fwd = dense + core_fwd + (ew + scores) * hbm_s
    bwd = 2 * dense + core_bwd + 2 * (ew + scores) * hbm_s
    tokens = lay.mbs * md.seq_len / lay.sequence_shards
    act_bytes = tokens * md.hidden * c.e
    allreduce = 2 * collective_time_s(act_bytes, t, c.tp_bw, "all_reduce", r) if t > 1 else 0.0
    n_tp = 3 if lay.recompute == "full" else 2          # forward, backward (+ forward again)
    tp_comm = n_tp * allreduce
    if lay.sequence_parallel and t > 1:
        # SP stores the norm outputs sequence-sharded: backward all-gathers them again for the weight gradients of
        # QKV and FC1 (Korthikanti §4.2.2). Megatron overlaps these with the input-gradient GEMMs, which then run
        # slower; counted as exposed, this reproduces Table 4's small net SP gain (-3 %, not the -8 % of the
        # element-wise savings alone).
        tp_comm += 2 * collective_time_s(act_bytes, t, c.tp_bw, "all_gather", r)
    recompute = {"full": fwd, "selective": core_fwd + scores * hbm_s}.get(lay.recompute, 0.0)
    compute, backward = layers * (fwd + bwd), layers * (bwd + allreduce)
    if stage == 0:   # embedding lookup and its gradient scatter-add (memory-bound, small)
        compute += 3 * act_bytes * hbm_s
    if stage == p - 1:   # final norm, output layer (h -> V/t) and the fp32 cross-entropy over V/t logits
        vocab = padded_vocab(md.vocab, t)
        logit = gemm_time_s(tokens, vocab / t, md.hidden, c.peak, r)
        ce = tokens * vocab / t * (2 * c.e + 20) * hbm_s
        compute += 3 * logit + ce + 3 * act_bytes * hbm_s
        backward += 2 * logit
    pp = 0.0
    if p > 1:   # one activation forward, one gradient backward per chunk; scattered over the TP ranks when useful
        shard = t if (lay.sequence_parallel or c.pp_inter) else 1
        pp = 2 * v * collective_time_s(act_bytes / shard, 2, c.pp_bw, "p2p", r)
    cp = 0.0
    if lay.sequence_shards > 1:
        # Ring attention passes each rank's K and V chunk (tokens x kv width / t) round the cp ranks: cp-1 steps,
        # each overlapped with the attention of the chunk before, so the first step of the forward and the first two
        # of the backward (K/V again, then their gradients) are exposed (Liu et al. 2023, Ring Attention; Megatron's
        # p2p context parallelism in Transformer Engine).
        kv_bytes = 2 * tokens * md.kv_heads * (md.hidden / md.heads) / t * c.e
        cp = layers * 3 * collective_time_s(kv_bytes, 2, c.cp_bw, "p2p", r)
    full = lay.recompute == "full"
    fixed = params / c.hbm * (r.param_bytes + (r.recast_bytes if full else 0.0))
    dispatch = layers * (r.dispatch + (r.redispatch if full else 0.0)
                         + (r.checkpoint if lay.recompute != "none" else 0.0))
    return MicrobatchTimes(compute, backward, layers * recompute, layers * tp_comm, pp, cp, fixed, dispatch)


def _dp_bandwidth(cluster: ClusterConfig, layout: Layout) -> float:
    """GB/s per rank of the DP group: NVLink if the group (after TP) fits in a node, else the NICs of the group's
    members in each node (rank order tp, dp, pp: a group has gpus_per_node/tp members per node)."""
    gpn = cluster.gpus_per_node
    if layout.tp * layout.gradient_group <= gpn:
        return cluster.intra_node_gbytes_per_s
    members = max(1, gpn // layout.tp)
    return min(cluster.intra_node_gbytes_per_s, members * cluster.inter_node_gbytes_per_s)


def _dp_collectives(c: _Ctx, cluster: ClusterConfig, precision: str, params: float) -> tuple[Num, Num]:
    """(gradient reduction, parameter all-gather) times of the DP group (0 without DP)."""
    lay = c.layout
    d = lay.gradient_group   # dp x cp ranks hold the same parameters
    if d <= 1:
        return 0.0, 0.0
    bw = _dp_bandwidth(cluster, lay)
    grad_bytes = params * GRAD_COMM_BYTES[precision]
    weight_bytes = params * STATE_BYTES[precision][0]
    if lay.zero_stage == 0 and not lay.distributed_optimizer:
        return collective_time_s(grad_bytes, d, bw, "all_reduce", c.r), 0.0
    return (collective_time_s(grad_bytes, d, bw, "reduce_scatter", c.r),
            collective_time_s(weight_bytes, d, bw, "all_gather", c.r))


def _optimizer_s(c: _Ctx, precision: str, params: float) -> Num:
    """Adam reads and writes its states (2 x optimizer bytes), reads the grad and writes the weight for the
    parameters of its shard; the grad-norm/clipping pass reads every local grad once. All memory-bound."""
    lay = c.layout
    weight, grad, optim = STATE_BYTES[precision]
    sharded = lay.zero_stage >= 1 or lay.distributed_optimizer
    opt_params = params / lay.gradient_group if sharded else params
    local_grad_bytes = params * state_bytes_per_param(precision, lay.zero_stage, lay.distributed_optimizer,
                                                      lay.gradient_group)[1]
    return (opt_params * (2 * optim + grad + weight) + local_grad_bytes) * c.r.hbm / c.hbm


class StepPieces(NamedTuple):
    """Everything `combine` needs, each time linear in the rates. `stages` are the first, the last and a middle
    stage (the same object repeated where pp < 3); `weights` say how many of the pp stages each stands for."""

    stages: tuple[MicrobatchTimes, MicrobatchTimes, MicrobatchTimes]
    weights: tuple[Num, Num, Num]
    microbatches: Num   # int, or a vector of them (one per trial, launcher.plan.calibrate)
    pp: Num
    vpp: Num
    zero3: Num          # 1 under ZeRO-3, else 0
    cpu: Num            # 1 on the CPU stand-in, else 0
    dp_reduce: Num
    dp_gather: Num
    optimizer: Num


def step_pieces(model: ModelConfig, cluster: ClusterConfig, layout: Layout, precision: str, flash: bool,
                r: Rates, cpu: bool) -> StepPieces:
    gpn = cluster.gpus_per_node
    tp_inter = layout.tp > gpn
    pp_inter = layout.nodes > 1
    peak = cluster.peak_tflops * 1e12 * (FP32_PEAK_SHARE if precision == "fp32" and not cpu else 1.0)
    c = _Ctx(model, layout, r, peak, cluster.hbm_gbytes_per_s * 1e9, ACTIVATION_BYTES[precision], flash,
             cluster.inter_node_gbytes_per_s if tp_inter else cluster.intra_node_gbytes_per_s,
             cluster.inter_node_gbytes_per_s if pp_inter else cluster.intra_node_gbytes_per_s, pp_inter,
             cluster.inter_node_gbytes_per_s if layout.tp * layout.cp > gpn else cluster.intra_node_gbytes_per_s)
    p = layout.pp
    first_params = stage_params(model, layout, 0)
    last_params = stage_params(model, layout, p - 1) if p > 1 else first_params
    params = max(first_params, last_params)   # the most loaded stage sets the DP traffic and the optimizer step
    layer = _layer_times(c)
    first = microbatch_times(c, 0, first_params, layer)
    last = microbatch_times(c, p - 1, last_params, layer) if p > 1 else first
    middle = microbatch_times(c, 1, stage_params(model, layout, 1), layer) if p > 2 else first
    weights = (1.0, 1.0 if p > 1 else 0.0, float(max(0, p - 2)))
    reduce, gather = _dp_collectives(c, cluster, precision, params)
    return StepPieces((first, last, middle), weights, max(1, layout.microbatches), p, layout.vpp,
                      int(layout.zero_stage == 3), int(cpu), reduce, gather, _optimizer_s(c, precision, params))


def combine(pc: StepPieces, maximum: Callable[..., Num] = max) -> tuple[Num, Num, Num, Num, list[Num]]:
    """(step, bottleneck stage per micro-batch, exposed DP time, bubble, per-stage totals) from the pieces. Only
    arithmetic and `maximum` (builtin max for floats, numpy.maximum elementwise over arrays of trials)."""
    first, last, middle = pc.stages
    t0 = microbatch_total(first, pc.cpu, maximum)
    totals = [t0, t0 if last is first else microbatch_total(last, pc.cpu, maximum),
              t0 if middle is first else microbatch_total(middle, pc.cpu, maximum)]
    bottleneck = maximum(maximum(totals[0], totals[1]), totals[2])
    mean = (pc.weights[0] * totals[0] + pc.weights[1] * totals[1] + pc.weights[2] * totals[2]) / pc.pp
    # The gradient reduction hides behind the last backward; ZeRO-3 gathers parameters for the forward and the
    # backward of every micro-batch (prefetched behind compute), the others once after the optimizer step.
    z3 = pc.zero3
    exposed = (maximum(0.0, pc.dp_reduce - first.backward)
               + z3 * pc.microbatches * maximum(0.0, 2 * pc.dp_gather - first.compute) + (1 - z3) * pc.dp_gather)
    bubble = (pc.pp - 1) / pc.vpp * mean
    return pc.microbatches * bottleneck + exposed + bubble + pc.optimizer, bottleneck, exposed, bubble, totals


def step_time_s(model: ModelConfig, cluster: ClusterConfig, layout: Layout, precision: str, flash: bool,
                constants: Constants = DEFAULT) -> tuple[float, dict[str, float]]:
    """(iteration seconds, breakdown) for one layout."""
    cpu = is_cpu_standin(cluster.gpu)
    pc = step_pieces(model, cluster, layout, precision, flash, rates(constants, cpu), cpu)
    step, bottleneck_s, exposed, bubble, totals = combine(pc)
    mb = pc.stages[totals.index(bottleneck_s)]
    m = pc.microbatches
    breakdown = {
        "compute": m * mb.compute,
        "recompute": m * mb.recompute,
        "tp_comm": m * mb.tp_comm,
        "pp_comm": m * mb.pp_comm,
        "cp_comm": m * mb.cp_comm,
        "fixed": m * mb.fixed,
        "dispatch": m * (bottleneck_s - mb.gpu),   # CPU dispatch time not hidden behind GPU work
        "dp_comm": exposed,
        "bubble": bubble,
        "optimizer": pc.optimizer,
    }
    return step, breakdown
