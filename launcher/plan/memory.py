"""Peak device memory of one GPU (rank) for a layout: model states + activations + logits + framework overhead.

Sources:
- bytes/param per stack (launcher.plan.stack): Megatron-LM docs/user-guide/features/dist_optimizer.md (18 B bf16
  with fp32 main grads, 6 + 12/d with the distributed optimizer; 20 B fp16; 16 B fp32); DeepSpeed's BF16_Optimizer
  (+ 16-bit .grad and a full fp32 accumulation buffer: 8 + 12/d under ZeRO-1); ZeRO (Rajbhandari et al. 2020 §5:
  stage 1/2/3 partition optimizer / +grads / +params over the d data-parallel ranks); PyTorch FSDP mixed precision
  (fp32 parameters, gradients and AdamW state all sharded: 16/d) with the unsharded 16-bit parameters of the units
  in flight (two: the one running and the one prefetched; every unit of the stage from its forward to its backward
  when parameters are not resharded after the forward) and their unsharded gradients before the reduce-scatter;
  Transformer Engine's FP8 weight caches (an 8-bit copy and its transpose of every linear weight, kept across the
  micro-batches of a step: StackFacts.fp8_weight_cache_bytes);
- activations: Korthikanti et al. 2022 (arXiv 2205.05198) §4-5, Table 2: per layer s·b·h·(34 + 5as/h) bytes with
  16-bit activations and 1-byte dropout masks, (10 + 24/t + 5as/ht) under TP, /t with sequence parallelism, the
  5as/h attention-score term gone under selective recompute (and with flash attention, which never stores the
  s x s scores), 2·s·b·h per layer under full recompute; generalised to GQA (K, V of g/a the width), gated FFNs
  (both FC1 outputs kept), no dropout masks for RMSNorm (Llama-style, dropout 0) models, FP8 linear inputs kept in
  8 bits (Transformer Engine), eager PyTorch modules keeping more (the fp32 input of an unfused RMSNorm, the SiLU
  output, the attention output's contiguous copy); the first pipeline stage holds p micro-batches of L/p layers
  under 1F1B, x (1 + (p-1)/(p·v)) when interleaved; checkpointing every k-th layer keeps the others whole;
- logits: the output layer's input and the loss buffers per logit element (launcher.plan.stack: 6 B for Megatron's
  vocab-parallel fp32 cross-entropy, 10 B for cross_entropy(logits.float()): bf16 logits, their fp32 copy and the
  log-softmax kept for the backward) on the last stage, one micro-batch;
- overhead: the CUDA context and NCCL buffers (outside what torch.cuda.max_memory_allocated counts), temporaries
  (backward workspaces, allocated) and the caching allocator's fragmentation (reserved but not allocated), both as a
  share of the short-lived memory (activations, logits, gathered parameters).
All sizes are GB = 1e9 bytes, like ClusterConfig.gpu_mem_gb.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from launcher.config.schema import ClusterConfig, ModelConfig
from launcher.core.layout import Layout
from launcher.core.names import is_cpu_standin
from launcher.plan import moe
from launcher.plan.constants import DEFAULT, Constants
from launcher.plan.flops import dense_ffn_hidden, ffn_matrices, padded_vocab, qkv_width
from launcher.plan.stack import StackFacts, kernels_fused, stack_facts, stack_name, syncs_every_microbatch
from launcher.plan.workload import DEFAULT_WORKLOAD, Workload

GB = 1e9

# precision -> (weight, gradient, optimizer) bytes per parameter without any sharding (Megatron's layout).
# bf16: 2 + 4 (fp32 main grads) + 12 (fp32 master, Adam m, v) = 18; fp16: 2 + 2 + 16 (the optimizer also keeps an
# fp32 copy of the grads) = 20; fp32 (the CPU stand-in): 4 + 4 + 8 (m, v; the weights are the master) = 16. FP8
# training keeps bf16 weights and fp32 master/grads (Transformer Engine casts per GEMM): as bf16.
STATE_BYTES = {"bf16": (2.0, 4.0, 12.0), "fp16": (2.0, 2.0, 16.0), "fp32": (4.0, 4.0, 8.0), "fp8": (2.0, 4.0, 12.0)}
ACTIVATION_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "fp8": 2}
FSDP_UNITS_IN_FLIGHT = 2
"""FSDP/ZeRO-3 hold the unsharded parameters of the unit running and of the one prefetched (FSDP1
forward/backward prefetch, FSDP2's default prefetch of one, ZeRO-3's prefetch bucket)."""


def uses_flash_attention(precision: str) -> bool:
    """The default when a request does not say: flash attention assumed for 16-bit training (GPU), not for fp32
    (the CPU stand-in materialises the s x s scores). Plans pass backend.flash_attention explicitly."""
    return precision != "fp32"


def state_bytes_per_param(precision: str, zero_stage: int, distributed_optimizer: bool, dp: int,
                          states: str = "megatron") -> tuple[float, float, float]:
    """(weights, grads, optimizer) bytes per parameter on one rank after ZeRO / distributed-optimizer sharding.

    states (launcher.plan.stack.StackFacts.states): 'megatron' (STATE_BYTES); 'deepspeed_bf16' (BF16_Optimizer,
    ZeRO <= 1: 2 + (2 + 4) + 12); 'deepspeed' (ZeRO: 16-bit grads, the optimizer keeps fp32 master, m, v and an fp32
    grad partition: 2 + 2 + 16); 'fp32_master' (autocast / FSDP mixed precision: 4 + 4 + 8). Sharding over dp:
    ZeRO >= 1 or the distributed optimizer the optimizer, >= 2 the grads, 3 the weights.
    """
    weight, grad, optim = STATE_BYTES[precision]
    if precision != "fp32":
        if states == "deepspeed_bf16" and zero_stage <= 1 and precision in ("bf16", "fp8"):
            grad = 2.0 + 4.0
        elif states in ("deepspeed", "deepspeed_bf16"):
            grad, optim = 2.0, 12.0
        elif states == "fp32_master":
            weight, grad, optim = 4.0, 4.0, 8.0
        elif states == "megatron_bf16_grads":
            grad = 2.0
        elif states == "bf16_pure":
            weight, grad, optim = 2.0, 2.0, 4.0
    if zero_stage >= 1 or distributed_optimizer:
        optim /= dp
    if zero_stage >= 2:
        grad /= dp
    if zero_stage >= 3:
        weight /= dp
    return weight, grad, optim


def layer_params(model: ModelConfig) -> tuple[int, int]:
    """(tensor-parallel-sharded, replicated) parameters of one transformer layer.

    Sharded: QKV, output projection and FFN weights, plus the column-parallel biases (QKV, FFN input).
    Replicated on every TP rank: the norms (LayerNorm has weight and bias, RMSNorm a weight) and the row-parallel
    biases (output projection, FFN output). Biases only for LayerNorm (GPT/BLOOM-style) models; Llama-style RMSNorm
    models have none. For MHA, f = 4h this is Narayanan eq. (2)'s 12h² + 13h per layer.
    """
    h, f, gamma = model.hidden, dense_ffn_hidden(model), ffn_matrices(model)
    sharded = h * qkv_width(model) + h * h + gamma * h * f
    with_bias = model.norm == "layernorm"
    norm_params = 2 * h * (2 if with_bias else 1)
    if with_bias:
        sharded += qkv_width(model) + (gamma - 1) * f
    replicated = norm_params + (2 * h if with_bias else 0)
    if model.is_moe:  # the router (h x E) on every tp rank; the routed experts are launcher.plan.moe's
        replicated += h * model.num_experts
    return sharded, replicated


def stage_params(model: ModelConfig, layout: Layout, stage: int) -> float:
    """Parameters held by one GPU of pipeline stage `stage` (0-based), before ZeRO-3 partitioning.

    Stage 0 has the word embeddings (V_pad·h/t, vocab-parallel) and, for LayerNorm/GPT-style models, the learned
    position embeddings (replicated). The last stage has the final norm and the output layer: untied, or tied
    with pp > 1 (Megatron keeps a synchronised copy of the word embeddings on the last stage).
    """
    t, p = layout.tp, layout.pp
    sharded, replicated = layer_params(model)
    n = model.layers / p * (sharded / t + replicated)
    embedding = padded_vocab(model.vocab, t) * model.hidden / t
    norm_params = model.hidden * (2 if model.norm == "layernorm" else 1)
    if stage == 0:
        n += embedding
        if model.norm == "layernorm":
            n += model.max_position * model.hidden
    if stage == p - 1:
        n += norm_params
        if not model.tied_embeddings or p > 1:
            n += embedding
    return n


UNFUSED_SOFTMAX_SCORE_BYTES = 15.0
"""Bytes per attention-score element a layer holds when its softmax runs unfused in fp32 (scores longer than the
stack's fused kernel takes, StackFacts.fused_softmax_max_seq): kept for the backward, the fp32 softmax output (4),
the dropout mask (1) and output (2); while that backward runs, the fp32 gradient of the probabilities and the softmax
gradient (4 + 4). Fused: (2e + 1) = 5."""


def layer_activation_bytes(model: ModelConfig, mbs: int, tp: int, sequence_parallel: bool, recompute: str,
                           flash: bool, act_bytes: int, cp: int = 1, *, eager: bool = False, fp8: bool = False,
                           unfused_softmax: bool = False) -> float:
    """Bytes one layer keeps for backward, per micro-batch (Korthikanti Table 2, generalised to GQA and gated FFNs).

    Per s·b·h element, e = activation bytes (2, or 4 on the CPU stand-in), masks 1 byte (LayerNorm/GPT models only:
    Llama-style models train without dropout):
      replicated under TP (no SP):  two norm inputs 2e + QKV input e + FFN input e + two dropout masks 2  = 4e + 2
      sharded by TP:  Q, K, V e·(1 + 2g/a) + projection input e + FFN (act. input(s) + FC2 input) (γ'+1)·e·f/h
      attention scores (no flash, no selective recompute):  (2e + 1)·a·s/h, sharded (UNFUSED_SOFTMAX_SCORE_BYTES
      instead of 2e + 1 when the softmax falls back to fp32 PyTorch ops)
    GPT (e = 2, g = a, f = 4h): 10 + 24/t + 5as/(ht)  (Korthikanti eq. 2).
    FP8 (Transformer Engine): the four linear inputs (QKV, projection, FC1, FC2) kept in 8 bits.
    Eager PyTorch modules: + the fp32 input of each unfused RMSNorm (2 x 4 B), the attention output's contiguous copy
    (e) and the SiLU output (e·f/h) of a gated FFN.
    Context parallelism keeps s/cp tokens of each sequence per rank (the scores of its queries still span all s
    keys, hence a·s/h per element).
    """
    h, a, s = model.hidden, model.heads, model.seq_len
    sbh = s / cp * mbs * h
    if recompute == "full":  # only the layer input is kept (sequence-sharded under SP)
        return act_bytes * sbh / (tp if sequence_parallel else 1)
    e = act_bytes
    lin = 1 if fp8 else e                  # linear-layer inputs (TE keeps FP8 copies for the backward)
    gated = 2 if model.swiglu else 1
    masks = 2 if model.norm == "layernorm" else 0
    replicated = 2 * e + 2 * lin + masks
    f_h = dense_ffn_hidden(model) / h     # an MoE model's routed experts: launcher.plan.moe.activation_bytes
    sharded = e * (1 + 2 * model.kv_heads / a) + lin + gated * e * f_h + lin * f_h
    if eager:
        if model.norm == "rmsnorm":
            replicated += 2 * 4
        sharded += e + (e * f_h if model.swiglu else 0.0)
    if recompute == "none" and not flash:
        sharded += (UNFUSED_SOFTMAX_SCORE_BYTES if unfused_softmax else 2 * e + 1) * a * s / h
    if sequence_parallel:
        return sbh * (replicated + sharded) / tp
    return sbh * (replicated + sharded / tp)


def inflight_layers(layout: Layout, layers: int, stage: int) -> float:
    """Layer x micro-batch activation sets stage `stage` holds at its peak.

    1F1B: stage r runs p - r warm-up forwards before its first backward: min(p - r, m) micro-batches of L/p
    layers. Interleaved (v chunks of L/(p·v) layers): Megatron's warm-up is 2(p - r - 1) + (v - 1)·p chunk
    forwards plus the one in flight, capped at m·v; stage 0 then holds L·(1 + (p-1)/(p·v)) (Korthikanti §4.2.3).
    """
    p, v, m = layout.pp, layout.vpp, layout.microbatches
    if v <= 1:
        return min(p - stage, m) * layers / p
    chunks = min(2 * (p - stage - 1) + (v - 1) * p + 1, m * v)
    return chunks * layers / (p * v)


def shard_group(cluster: ClusterConfig, layout: Layout, workload: Workload) -> int:
    """Ranks over which ZeRO/FSDP shard the states: dp x cp, or for HSDP (hybrid_shard) the data-parallel ranks
    inside one node (rank order tp, cp, dp: gpus_per_node / (tp·cp) of them), replicated across nodes."""
    d = layout.gradient_group
    if workload.fsdp == "hybrid_shard":
        return max(1, min(d, cluster.gpus_per_node // max(1, layout.tp * layout.cp)))
    return d


def _activations(model: ModelConfig, layout: Layout, precision: str, stage: int, flash: bool, facts: StackFacts,
                 workload: Workload) -> float:
    e, t, sp, cp = ACTIVATION_BYTES[precision], layout.tp, layout.sequence_parallel, layout.sequence_shards
    eager = not kernels_fused(facts, workload) or facts.eager_activations
    fp8 = precision == "fp8"
    full = layout.recompute == "full"

    def per_layer(mode: str) -> float:
        experts = 0.0 if mode == "full" else moe.activation_bytes(model, layout, e)
        return experts + layer_activation_bytes(model, layout.mbs, t, sp, mode, flash, e, cp, eager=eager, fp8=fp8,
                                                unfused_softmax=(model.seq_len > facts.fused_softmax_max_seq
                                                                 and facts.softmax_fallback_fp32))

    whole = per_layer("none" if full else layout.recompute)
    if full:
        k = layout.recompute_every
        kept = 0.0 if workload.offload else per_layer("full")     # offloaded inputs live on the host
        stored = kept / k + whole * (1 - 1 / k)
    else:
        stored = whole
    activations = stored * inflight_layers(layout, model.layers, stage)
    if full:  # backward rematerialises one layer's full activations (formulas §3 [derived]), plus the input in
        #       transfer when offloading
        activations += per_layer("none") + (per_layer("full") if workload.offload else 0.0)
    if stage == 0 and model.norm == "layernorm":  # embedding-dropout mask per micro-batch in flight (Korthikanti §4.3)
        sbh = model.seq_len / cp * layout.mbs * model.hidden
        activations += sbh / (t if sp else 1) * min(layout.pp, max(1, layout.microbatches))
    return activations


def unsharded_accumulation_bytes(params: float, layout: Layout, facts: StackFacts, workload: Workload) -> float:
    """Bytes of the unsharded gradients a ZeRO-2/3 / FSDP rank accumulates, in the reduction dtype, when it reduces
    once per step instead of after every micro-batch (StackFacts.grad_accum_sync False: FSDP2
    set_requires_gradient_sync(False) on all but the last micro-batch); 0 otherwise.

    They are the step's gradient storage, not short-lived memory: allocated at the first micro-batch's backward,
    freed layer by layer by the last one's reduce-scatter, so no temporaries or allocator splits scale with them
    (stage_memory_gb counts them with the grads). Under FSDP the sharded gradients of the previous step are gone by
    then (the training loop's optimizer.zero_grad(), set_to_none=True since PyTorch 2.0) and are rebuilt by that
    reduce-scatter while the buffers are freed: the peak holds the buffers or the shards, not both. Source: PyTorch
    FSDP2 (torch/distributed/fsdp/_fully_shard/_fsdp_param.py to_accumulated_grad_if_needed: the unsharded gradient
    upcast to reduce_dtype and kept; _fsdp_param_group.py post_backward: no reduce-scatter while reduce_grads is
    off); KempnerForge scripts/train.py (maybe_no_sync, optimizer.zero_grad()). Worked example: an 8.03B-parameter
    bf16 model, FSDP2 over 2 ranks, fp32 reduction, 4 micro-batches: 32.1 GB of buffers in place of 8.0 GB of
    sharded bf16 gradients (tests/plan/test_memory.py)."""
    if layout.zero_stage >= 2 and layout.microbatches > 1 and not syncs_every_microbatch(facts, workload):
        return params * facts.reduce_bytes
    return 0.0


def stage_memory_gb(model: ModelConfig, cluster: ClusterConfig, layout: Layout, precision: str, stage: int,
                    flash: bool | None = None, constants: Constants = DEFAULT, *,
                    workload: Workload = DEFAULT_WORKLOAD, backend: str = "") -> dict[str, float]:
    """Memory breakdown (GB) of one GPU of pipeline stage `stage`: weights, grads, optimizer, gathered (ZeRO-3/FSDP
    unsharded parameters and gradients in flight), activations, logits, temporaries, fragmentation, context."""
    amounts = stage_amounts_gb(model, cluster, layout, precision, stage, flash, workload=workload, backend=backend)
    return stage_parts_gb(amounts, constants, is_cpu_standin(cluster.gpu))


class StageAmounts(NamedTuple):
    """A stage's memory without the constants (GB): stage_memory_gb's parts before the overheads, and the
    short-lived share (activations + logits + gathered) the overhead shares multiply."""

    weights: float
    grads: float
    optimizer: float
    gathered: float
    activations: float
    logits: float
    churn: float


def stage_parts_gb(amounts: StageAmounts, constants: Constants, cpu: bool) -> dict[str, float]:
    """stage_memory_gb's breakdown from the stage's amounts and the constants (the planner prices a stage once for
    the estimate and for the calibration's features, which take it without the fitted overheads)."""
    c, churn = constants, amounts.churn
    return {"weights": amounts.weights, "grads": amounts.grads, "optimizer": amounts.optimizer,
            "gathered": amounts.gathered, "activations": amounts.activations, "logits": amounts.logits,
            "temporaries": c.transient_share * churn, "fragmentation": c.fragmentation_share * churn,
            "context": c.cpu_context_gb if cpu else c.gpu_context_gb}


def stage_amounts_gb(model: ModelConfig, cluster: ClusterConfig, layout: Layout, precision: str, stage: int,
                     flash: bool | None = None, *, workload: Workload = DEFAULT_WORKLOAD, backend: str = ""
                     ) -> StageAmounts:
    """stage_memory_gb before the constants (StageAmounts)."""
    flash = uses_flash_attention(precision) if flash is None else flash
    facts = stack_facts(stack_name(workload, backend))
    e, t, sp = ACTIVATION_BYTES[precision], layout.tp, layout.sequence_parallel
    params = stage_params(model, layout, stage)
    d = shard_group(cluster, layout, workload)
    w, g, o = state_bytes_per_param(precision, layout.zero_stage, layout.distributed_optimizer, d, facts.states)
    weights = params * w
    sharded, replicated = layer_params(model)
    layer = sharded / t + replicated
    # routed experts: their own data-parallel group (expert-dp) shards their optimizer state
    experts = moe.expert_params(model, layout)
    we, ge, oe = state_bytes_per_param(precision, layout.zero_stage, layout.distributed_optimizer,
                                       moe.expert_data_parallel(layout), facts.states)
    weights += experts * we
    if facts.autocast_cache and precision in ("bf16", "fp16"):
        weights += (params + experts) * 2.0        # bf16 casts of every weight, cached through the forward
    if precision == "fp8":
        weights += (model.layers / layout.pp * sharded / t + experts) * facts.fp8_weight_cache_bytes
    gathered = 0.0
    if layout.zero_stage >= 3:
        gather = facts.gather_bytes
        units = FSDP_UNITS_IN_FLIGHT if workload.resharded else model.layers / layout.pp
        # unsharded 16-bit parameters of the units in flight, and one unit's unsharded gradient before its
        # reduce-scatter (in the reduction dtype)
        gathered = (units * gather + facts.reduce_bytes) * layer
    elif layout.zero_stage == 2:
        gathered = facts.reduce_bytes * layer     # the reduction bucket of the layer being reduced
    grads = params * g + experts * ge
    accumulated = unsharded_accumulation_bytes(params, layout, facts, workload)
    if accumulated and workload.fsdp:
        grads = max(grads, accumulated)   # the sharded gradients exist only beside the buffers: never both whole
    elif accumulated:
        grads += accumulated
    cp = layout.sequence_shards
    sbh = model.seq_len / cp * layout.mbs * model.hidden
    activations = _activations(model, layout, precision, stage, flash, facts, workload)
    logits = 0.0
    if stage == layout.pp - 1:  # final-norm and output-layer inputs + the loss buffers, one micro-batch
        vocab = padded_vocab(model.vocab, t)
        shards = t if facts.vocab_parallel_loss else 1
        logits = 2 * e * sbh / (t if sp else 1) + facts.logits_bytes * model.seq_len / cp * layout.mbs * vocab / shards
    churn = (activations + logits + gathered) / GB
    # torch DDP's gradient buckets (launcher.plan.stack.StackFacts.ddp_bucket_bytes): as long-lived as the grads
    buckets = params * facts.ddp_bucket_bytes if layout.gradient_group > 1 else 0.0
    return StageAmounts(weights / GB, (grads + buckets) / GB, (params * o + experts * oe) / GB, gathered / GB,
                        activations / GB, logits / GB, churn)


def peak_memory_gb(model: ModelConfig, cluster: ClusterConfig, layout: Layout, precision: str,
                   flash: bool | None = None, constants: Constants = DEFAULT, *,
                   workload: Workload = DEFAULT_WORKLOAD, backend: str = "") -> tuple[float, dict[str, float]]:
    """(peak GB, breakdown) over the stages that can be the most loaded: the first (most activations in flight,
    embeddings) and the last (output layer, logits)."""
    return peak_of(stage_memory_gb(model, cluster, layout, precision, stage, flash, constants, workload=workload,
                                   backend=backend) for stage in peak_stages(layout))


def peak_stages(layout: Layout) -> set[int]:
    """The stages that can be the most loaded, in the order peak_of compares them."""
    return {0, layout.pp - 1}


def peak_of(stages: Iterable[dict[str, float]]) -> tuple[float, dict[str, float]]:
    """(peak GB, breakdown) of the most loaded of the stages' breakdowns (the first of equals)."""
    best_total, best = -1.0, {}
    for parts in stages:
        total = sum(parts.values())
        if total > best_total:
            best_total, best = total, parts
    return best_total, best
