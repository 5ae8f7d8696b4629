"""Time of one training iteration: per-micro-batch work on each pipeline stage, the 1F1B schedule, DP sync, optimizer.

The structure follows Calculon (Isaev et al. SC23) and Narayanan et al. 2021 (§2.2 bubble, §3 communication):
- GEMMs: FLOPs / (peak · efficiency(m, n, k)) on the rank's shard; efficiency saturates with every dimension:
      eff = GEMM_EFF_MAX / (1 + GEMM_DIM_SCALE · (1/m + 1/n + 1/k))
  so thin tensor-parallel shards (h/t), few tokens per micro-batch (b·s) and small head dims lose efficiency.
  Backward GEMMs (input and weight gradients) = 2 x forward.
- Element-wise kernels (norms, dropout, residual adds, activation functions, softmax over s x s scores, layout
  copies) are memory-bound: bytes moved / (HBM bandwidth · HBM_EFF); backward moves 2 x the forward bytes.
- Collectives on the link of their tier (NVLink inside a node, the NICs between nodes), NCCL ring convention:
  all-reduce 2(n-1)/n · S / (bw · NET_EFF), reduce-scatter / all-gather (n-1)/n · S / (bw · NET_EFF), plus a latency.
  TP: 2 all-reduces of b·s·h in forward and 2 in backward per layer (Narayanan §3.2), +2 under full recompute;
  sequence parallelism replaces each by a reduce-scatter + all-gather of the same volume (Korthikanti §4.2.2).
- Pipeline (1F1B): step = m · (bottleneck stage per micro-batch) + (p - 1)/v · (mean stage per micro-batch), the
  bubble fraction (p - 1)/(v·m) of Narayanan §2.2; p2p of b·s·h (/t when scattered over the NICs or under SP).
- DP gradient reduction overlaps the backward of the last micro-batch; ZeRO/distributed-optimizer parameter
  all-gathers after the optimizer step are exposed; ZeRO-3 gathers parameters every micro-batch (overlapped).
- Optimizer step: memory-bound Adam update over the rank's optimizer shard.

Only the five constants below are calibrated (on Narayanan et al. 2021 Table 1, tests/test_scaling_table.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from launcher.layout import Layout
from launcher.plan.flops import ffn_matrices, padded_vocab, qkv_width
from launcher.plan.memory import (
    ACTIVATION_BYTES,
    STATE_BYTES,
    is_cpu_standin,
    stage_params,
    state_bytes_per_param,
)
from launcher.schema import ClusterConfig, ModelConfig

GEMM_EFF_MAX = 0.76        # large fp16/bf16 GEMMs as run inside training (cuBLAS on A100 measures ~0.8-0.9 alone)
GEMM_DIM_SCALE = 48.0      # a GEMM dimension of 48 alone would halve the efficiency
HBM_EFF = 0.7              # share of HBM bandwidth reached by element-wise kernels
NET_EFF = 0.7              # NCCL bus bandwidth / nominal link bandwidth (A100 NVSwitch ~240 of 300 GB/s)
LATENCY_S = {"gpu": 20e-6, "cpu": 200e-6}   # per collective / p2p call (NCCL ~10-30 us; gloo on loopback more)

FLASH_CAUSAL_SHARE = 0.5   # a causal flash kernel skips the masked half of Q·Kᵀ and attention·V
FLASH_BACKWARD = 2.5       # flash backward recomputes Q·Kᵀ: 5 GEMMs vs 2 in forward
GRAD_COMM_BYTES = {"bf16": 4.0, "fp16": 2.0, "fp32": 4.0}  # bf16 reduces the fp32 main grads (Megatron)


def gemm_efficiency(m: float, n: float, k: float) -> float:
    """Share of peak a GEMM of shape (m x k) @ (k x n) reaches."""
    return GEMM_EFF_MAX / (1.0 + GEMM_DIM_SCALE * (1.0 / m + 1.0 / n + 1.0 / k))


def gemm_time_s(m: float, n: float, k: float, peak_flops: float) -> float:
    return 2.0 * m * n * k / (peak_flops * gemm_efficiency(m, n, k))


def collective_time_s(nbytes: float, ranks: int, gbytes_per_s: float, kind: str, latency_s: float) -> float:
    """NCCL ring time: all_reduce moves 2(n-1)/n · S per rank, reduce_scatter/all_gather (n-1)/n · S, p2p S."""
    if ranks <= 1 and kind != "p2p":
        return 0.0
    factor = {"all_reduce": 2.0 * (ranks - 1) / ranks, "reduce_scatter": (ranks - 1) / ranks,
              "all_gather": (ranks - 1) / ranks, "p2p": 1.0}[kind]
    return factor * nbytes / (gbytes_per_s * 1e9 * NET_EFF) + latency_s


@dataclass(frozen=True)
class MicrobatchTimes:
    """One rank's work for one micro-batch (seconds)."""

    compute: float     # forward + backward GEMMs and element-wise kernels
    backward: float    # the backward part of `compute` (+ its TP comm): the window that hides the DP reduction
    recompute: float
    tp_comm: float
    pp_comm: float

    @property
    def total(self) -> float:
        return self.compute + self.recompute + self.tp_comm + self.pp_comm


@dataclass(frozen=True)
class _Ctx:
    """Per-call constants shared by the helpers (derived once)."""

    model: ModelConfig
    layout: Layout
    peak: float          # FLOP/s
    hbm: float           # B/s, effective
    e: int               # activation bytes
    flash: bool
    latency: float
    tp_bw: float         # GB/s of the TP tier
    pp_bw: float
    pp_inter: bool


def _layer_times(c: _Ctx) -> tuple[float, float, float, float, float]:
    """(dense GEMM fwd, attention-core fwd, attention-core bwd, element-wise fwd bytes, score bytes fwd) per layer."""
    md, lay = c.model, c.layout
    t, h, f, s = lay.tp, md.hidden, md.ffn_hidden, md.seq_len
    tokens = lay.mbs * s
    gated = ffn_matrices(md)
    dense = (gemm_time_s(tokens, qkv_width(md) / t, h, c.peak) + gemm_time_s(tokens, h, h / t, c.peak)
             + gemm_time_s(tokens, (gated - 1) * f / t, h, c.peak) + gemm_time_s(tokens, h, f / t, c.peak))
    heads_local = md.heads / t * lay.mbs
    head_dim = h / md.heads
    core = heads_local * 2 * gemm_time_s(s, s, head_dim, c.peak)          # Q·Kᵀ and attention·V
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
        scores = heads_local * s * s * (4 * e + 1)   # fused softmax r/w + dropout r/w + 1-byte mask
    return dense, core_fwd, core_bwd, ew, scores


def microbatch_times(c: _Ctx, stage: int) -> MicrobatchTimes:
    md, lay = c.model, c.layout
    t, p, v = lay.tp, lay.pp, lay.vpp
    dense, core_fwd, core_bwd, ew, scores = _layer_times(c)
    layers = md.layers / p
    fwd = dense + core_fwd + (ew + scores) / c.hbm
    bwd = 2 * dense + core_bwd + 2 * (ew + scores) / c.hbm
    tokens = lay.mbs * md.seq_len
    act_bytes = tokens * md.hidden * c.e
    allreduce = 2 * collective_time_s(act_bytes, t, c.tp_bw, "all_reduce", c.latency) if t > 1 else 0.0
    n_tp = 3 if lay.recompute == "full" else 2          # forward, backward (+ forward again)
    tp_comm = n_tp * allreduce
    if lay.sequence_parallel and t > 1:
        # SP stores the norm outputs sequence-sharded: backward all-gathers them again for the weight gradients of
        # QKV and FC1 (Korthikanti §4.2.2). Megatron overlaps these with the input-gradient GEMMs, which then run
        # slower; counted as exposed, this reproduces Table 4's small net SP gain (-3 %, not the -8 % of the
        # element-wise savings alone).
        tp_comm += 2 * collective_time_s(act_bytes, t, c.tp_bw, "all_gather", c.latency)
    recompute = {"full": fwd, "selective": core_fwd + scores / c.hbm}.get(lay.recompute, 0.0)
    compute, backward = layers * (fwd + bwd), layers * (bwd + allreduce)
    if stage == 0:   # embedding lookup and its gradient scatter-add (memory-bound, small)
        compute += 3 * act_bytes / c.hbm
    if stage == p - 1:   # final norm, output layer (h -> V/t) and the fp32 cross-entropy over V/t logits
        vocab = padded_vocab(md.vocab, t)
        logit = gemm_time_s(tokens, vocab / t, md.hidden, c.peak)
        ce = tokens * vocab / t * (2 * c.e + 20) / c.hbm
        compute += 3 * logit + ce + 3 * act_bytes / c.hbm
        backward += 2 * logit
    pp = 0.0
    if p > 1:   # one activation forward, one gradient backward per chunk; scattered over the TP ranks when useful
        shard = t if (lay.sequence_parallel or c.pp_inter) else 1
        pp = 2 * v * collective_time_s(act_bytes / shard, 2, c.pp_bw, "p2p", c.latency)
    return MicrobatchTimes(compute, backward, layers * recompute, layers * tp_comm, pp)


def _dp_bandwidth(cluster: ClusterConfig, layout: Layout) -> float:
    """GB/s per rank of the DP group: NVLink if the group (after TP) fits in a node, else the NICs of the group's
    members in each node (rank order tp, dp, pp: a group has gpus_per_node/tp members per node)."""
    gpn = cluster.gpus_per_node
    if layout.tp * layout.dp <= gpn:
        return cluster.intra_node_gbytes_per_s
    members = max(1, gpn // layout.tp)
    return min(cluster.intra_node_gbytes_per_s, members * cluster.inter_node_gbytes_per_s)


def _dp_exposed_s(c: _Ctx, cluster: ClusterConfig, precision: str, params: float, mb: MicrobatchTimes) -> float:
    lay = c.layout
    d = lay.dp
    if d <= 1:
        return 0.0
    bw = _dp_bandwidth(cluster, lay)
    grad_bytes = params * GRAD_COMM_BYTES[precision]
    weight_bytes = params * STATE_BYTES[precision][0]
    if lay.zero_stage == 0 and not lay.distributed_optimizer:
        reduce, gather = collective_time_s(grad_bytes, d, bw, "all_reduce", c.latency), 0.0
    else:
        reduce = collective_time_s(grad_bytes, d, bw, "reduce_scatter", c.latency)
        gather = collective_time_s(weight_bytes, d, bw, "all_gather", c.latency)
    exposed = max(0.0, reduce - mb.backward)
    if lay.zero_stage == 3:  # parameters gathered for forward and backward of every micro-batch, prefetched
        exposed += lay.microbatches * max(0.0, 2 * gather - mb.compute)
        return exposed
    return exposed + gather


def _optimizer_s(c: _Ctx, precision: str, params: float) -> float:
    """Adam reads and writes its states (2 x optimizer bytes), reads the grad and writes the weight for the
    parameters of its shard; the grad-norm/clipping pass reads every local grad once. All memory-bound."""
    lay = c.layout
    weight, grad, optim = STATE_BYTES[precision]
    sharded = lay.zero_stage >= 1 or lay.distributed_optimizer
    opt_params = params / lay.dp if sharded else params
    local_grad_bytes = params * state_bytes_per_param(precision, lay.zero_stage, lay.distributed_optimizer,
                                                      lay.dp)[1]
    return (opt_params * (2 * optim + grad + weight) + local_grad_bytes) / c.hbm


def step_time_s(model: ModelConfig, cluster: ClusterConfig, layout: Layout, precision: str,
                flash: bool) -> tuple[float, dict[str, float]]:
    """(iteration seconds, breakdown) for one layout."""
    cpu = is_cpu_standin(cluster, precision)
    gpn = cluster.gpus_per_node
    tp_inter = layout.tp > gpn
    pp_inter = layout.nodes > 1
    c = _Ctx(model, layout, cluster.peak_tflops * 1e12, cluster.hbm_gbytes_per_s * 1e9 * HBM_EFF,
             ACTIVATION_BYTES[precision], flash, LATENCY_S["cpu" if cpu else "gpu"],
             cluster.inter_node_gbytes_per_s if tp_inter else cluster.intra_node_gbytes_per_s,
             cluster.inter_node_gbytes_per_s if pp_inter else cluster.intra_node_gbytes_per_s, pp_inter)
    p, m = layout.pp, max(1, layout.microbatches)
    stages = sorted({0, p - 1})
    per_stage = {s: microbatch_times(c, s) for s in stages}
    middle = microbatch_times(c, 1) if p > 2 else None
    bottleneck = max(per_stage.values(), key=lambda x: x.total)
    totals = [x.total for x in per_stage.values()]
    mean_stage = (sum(totals) + (p - len(totals)) * (middle.total if middle else 0.0)) / p
    params = max(stage_params(model, layout, s) for s in stages)
    breakdown = {
        "compute": m * bottleneck.compute,
        "recompute": m * bottleneck.recompute,
        "tp_comm": m * bottleneck.tp_comm,
        "pp_comm": m * bottleneck.pp_comm,
        "dp_comm": _dp_exposed_s(c, cluster, precision, params, per_stage[0]),
        "bubble": (p - 1) / layout.vpp * mean_stage,
        "optimizer": _optimizer_s(c, precision, params),
    }
    return sum(breakdown.values()), breakdown
