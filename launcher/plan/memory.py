"""Peak device memory of one GPU (rank) for a layout: model states + activations + logits + framework overhead.

Sources:
- bytes/param: Megatron-LM docs/user-guide/features/dist_optimizer.md (18 B bf16 with fp32 main grads, 6 + 12/d with
  the distributed optimizer; 20 B fp16; 16 B fp32) and ZeRO (Rajbhandari et al. 2020 §5: stage 1/2/3 partition
  optimizer / +grads / +params over the d data-parallel ranks);
- activations: Korthikanti et al. 2022 (arXiv 2205.05198) §4-5, Table 2: per layer s·b·h·(34 + 5as/h) bytes with
  16-bit activations and 1-byte dropout masks, (10 + 24/t + 5as/ht) under TP, /t with sequence parallelism, the
  5as/h attention-score term gone under selective recompute (and with flash attention, which never stores the
  s x s scores), 2·s·b·h per layer under full recompute; the first pipeline stage holds p micro-batches of L/p
  layers under 1F1B, x (1 + (p-1)/(p·v)) when interleaved; fp32 logits 4·s·b·h/t·(1 + V/h) on the last stage.
All sizes are GB = 1e9 bytes, like ClusterConfig.gpu_mem_gb.
"""

from __future__ import annotations

from launcher.config.schema import ClusterConfig, ModelConfig
from launcher.core.layout import Layout
from launcher.core.names import is_cpu_standin
from launcher.plan.constants import DEFAULT, Constants
from launcher.plan.flops import ffn_matrices, padded_vocab, qkv_width

GB = 1e9

# precision -> (weight, gradient, optimizer) bytes per parameter without any sharding, and activation bytes.
# bf16: 2 + 4 (fp32 main grads) + 12 (fp32 master, Adam m, v) = 18; fp16: 2 + 2 + 16 (the optimizer also keeps an
# fp32 copy of the grads) = 20; fp32 (the CPU stand-in): 4 + 4 + 8 (m, v; the weights are the master) = 16.
STATE_BYTES = {"bf16": (2.0, 4.0, 12.0), "fp16": (2.0, 2.0, 16.0), "fp32": (4.0, 4.0, 8.0)}
ACTIVATION_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4}

# Framework overhead outside the tensors counted here (launcher.plan.constants): GPU_CONTEXT_GB of CUDA context and
# cuBLAS/NCCL workspaces, plus caching-allocator fragmentation and backward temporaries taken as TRANSIENT_SHARE of
# the activation-like (short-lived) memory. CPU stand-in: the capacity is set above the rank's post-init footprint
# (conf/cluster/local-cpu.yaml), so only the fragmentation/temporaries share remains (CPU_CONTEXT_GB = 0).


def uses_flash_attention(precision: str) -> bool:
    """The default when a request does not say: flash attention assumed for 16-bit training (GPU), not for fp32
    (the CPU stand-in materialises the s x s scores). Plans pass backend.flash_attention explicitly."""
    return precision != "fp32"


def state_bytes_per_param(precision: str, zero_stage: int, distributed_optimizer: bool, dp: int
                          ) -> tuple[float, float, float]:
    """(weights, grads, optimizer) bytes per parameter on one rank after ZeRO / distributed-optimizer sharding."""
    weight, grad, optim = STATE_BYTES[precision]
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
    h, f, gamma = model.hidden, model.ffn_hidden, ffn_matrices(model)
    sharded = h * qkv_width(model) + h * h + gamma * h * f
    with_bias = model.norm == "layernorm"
    norm_params = 2 * h * (2 if with_bias else 1)
    if with_bias:
        sharded += qkv_width(model) + (gamma - 1) * f
    replicated = norm_params + (2 * h if with_bias else 0)
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


def layer_activation_bytes(model: ModelConfig, mbs: int, tp: int, sequence_parallel: bool, recompute: str,
                           flash: bool, act_bytes: int, cp: int = 1) -> float:
    """Bytes one layer keeps for backward, per micro-batch (Korthikanti Table 2, generalised to GQA and gated FFNs).

    Per s·b·h element, e = activation bytes (2, or 4 on the CPU stand-in), masks 1 byte:
      replicated under TP (no SP):  two norm inputs 2e + QKV input e + FFN input e + two dropout masks 2  = 4e + 2
      sharded by TP:  Q, K, V e·(1 + 2g/a) + projection input e + FFN (act. input(s) + FC2 input) (γ'+1)·e·f/h
      attention scores (no flash, no selective recompute):  (2e + 1)·a·s/h, sharded
    GPT (e = 2, g = a, f = 4h): 10 + 24/t + 5as/(ht)  (Korthikanti eq. 2).
    Context parallelism keeps s/cp tokens of each sequence per rank (the scores of its queries still span all s
    keys, hence a·s/h per element).
    """
    h, a, s = model.hidden, model.heads, model.seq_len
    sbh = s / cp * mbs * h
    if recompute == "full":  # only the layer input is kept (sequence-sharded under SP)
        return act_bytes * sbh / (tp if sequence_parallel else 1)
    e = act_bytes
    gated = 2 if model.swiglu else 1
    replicated = 4 * e + 2
    sharded = e * (1 + 2 * model.kv_heads / a) + e + (gated + 1) * e * model.ffn_hidden / h
    if recompute == "none" and not flash:
        sharded += (2 * e + 1) * a * s / h
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


def stage_memory_gb(model: ModelConfig, cluster: ClusterConfig, layout: Layout, precision: str, stage: int,
                    flash: bool | None = None, constants: Constants = DEFAULT) -> dict[str, float]:
    """Memory breakdown (GB) of one GPU of pipeline stage `stage`."""
    flash = uses_flash_attention(precision) if flash is None else flash
    e, t, sp = ACTIVATION_BYTES[precision], layout.tp, layout.sequence_parallel
    params = stage_params(model, layout, stage)
    w, g, o = state_bytes_per_param(precision, layout.zero_stage, layout.distributed_optimizer,
                                    layout.gradient_group)
    gathered = 0.0
    if layout.zero_stage >= 3:  # ZeRO-3 gathers the layer it runs and prefetches the next one: 2 full layers live
        sharded, replicated = layer_params(model)
        gathered = 2 * (sharded / t + replicated) * STATE_BYTES[precision][0]
    cp = layout.sequence_shards
    sbh = model.seq_len / cp * layout.mbs * model.hidden
    per_layer = layer_activation_bytes(model, layout.mbs, t, sp, layout.recompute, flash, e, cp)
    activations = per_layer * inflight_layers(layout, model.layers, stage)
    if layout.recompute == "full":  # backward rematerialises one layer's full activations (formulas §3 [derived])
        activations += layer_activation_bytes(model, layout.mbs, t, sp, "none", flash, e, cp)
    if stage == 0:  # embedding-dropout mask per micro-batch in flight (Korthikanti §4.3)
        activations += sbh / (t if sp else 1) * min(layout.pp, max(1, layout.microbatches))
    logits = 0.0
    if stage == layout.pp - 1:  # final-norm and output-layer inputs + fp32 logits, one micro-batch (Korthikanti §4.3)
        vocab = padded_vocab(model.vocab, t)
        logits = 2 * e * sbh / (t if sp else 1) + 4.0 * model.seq_len / cp * layout.mbs * vocab / t
    c = constants
    context = c.cpu_context_gb if is_cpu_standin(cluster.gpu) else c.gpu_context_gb
    return {"weights": (params * w + gathered) / GB, "grads": params * g / GB, "optimizer": params * o / GB,
            "activations": activations / GB, "logits": logits / GB,
            "overhead": context + c.transient_share * (activations + logits) / GB}


def peak_memory_gb(model: ModelConfig, cluster: ClusterConfig, layout: Layout, precision: str,
                   flash: bool | None = None, constants: Constants = DEFAULT) -> tuple[float, dict[str, float]]:
    """(peak GB, breakdown) over the stages that can be the most loaded: the first (most activations in flight,
    embeddings) and the last (output layer, logits)."""
    best_total, best = -1.0, {}
    for stage in {0, layout.pp - 1}:
        parts = stage_memory_gb(model, cluster, layout, precision, stage, flash, constants)
        total = sum(parts.values())
        if total > best_total:
            best_total, best = total, parts
    return best_total, best
