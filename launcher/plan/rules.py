"""Which layouts Megatron-LM / Megatron-DeepSpeed / DeepSpeed accept, and which ones they accept but run badly.

`check()` is pure and on the planner's hot path (100k layouts in well under 2 s): plain integer tests, messages
built only when a rule fails, one shared Verdict for the common "no issue" case.

Rules and where they come from:
- world = tp x pp x dp (Megatron initialize_model_parallel; torchtitan ParallelDims);
- tensor parallelism inside a node unless explicitly allowed (TP traffic needs NVLink, Narayanan et al. §3.3);
- heads, kv heads (GQA), FFN width divisible by tp (Megatron ColumnParallelLinear `divide()` asserts);
- layers divisible by pp, and by pp x vpp with an interleaved schedule, which also needs pp > 2 and a number of
  micro-batches that is a multiple of pp (Megatron arguments.py / schedules.py);
- gbs divisible by mbs x dp (Megatron's micro-batch calculator);
- sequence parallelism needs tp > 1 (Megatron disables/refuses it at tp = 1);
- ZeRO-2/3 with pp > 1: DeepSpeed "ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism";
- the Megatron distributed optimizer and DeepSpeed ZeRO both shard the optimizer: pick one.
Warnings: GEMM widths per TP shard not a multiple of 64, vocabulary padding per shard (Megatron pads to a multiple
of 128 x tp, --make-vocab-size-divisible-by), and a pipeline bubble (p-1)/(v·m) from too few micro-batches.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from launcher.layout import Layout
from launcher.schema import RECOMPUTE_MODES, ClusterConfig, ModelConfig

GEMM_ALIGN = 64         # per-shard GEMM widths that are multiples of 64 keep tensor cores on full tiles
VOCAB_ALIGN = 128       # Megatron --make-vocab-size-divisible-by default
MIN_MICROBATCHES_PER_STAGE = 4   # below m = 4p the 1F1B bubble (p-1)/m exceeds ~20 %


@dataclass(frozen=True, slots=True)
class Issue:
    """One rejection or warning: `code` groups them, `message` names the values and the fix."""

    code: str
    message: str


@dataclass(frozen=True, slots=True)
class Verdict:
    reasons: tuple[Issue, ...]
    warnings: tuple[Issue, ...]

    @property
    def ok(self) -> bool:
        return not self.reasons


_CLEAN = Verdict((), ())


def _rejections(model: ModelConfig, gpn: int, lay: Layout, allow_tp_across_nodes: bool) -> list[Issue]:
    tp, pp, dp, vpp, mbs, gbs, gpus, nodes = lay.tp, lay.pp, lay.dp, lay.vpp, lay.mbs, lay.gbs, lay.gpus, lay.nodes
    out: list[Issue] = []
    if tp * pp * dp != gpus:
        out.append(Issue("world", f"tp*pp*dp = {tp}*{pp}*{dp} = {tp * pp * dp} != gpus ({gpus}): "
                                  f"pick dp = gpus/(tp*pp) or change gpus"))
    if gpus > nodes * gpn or (nodes > 1 and gpus != nodes * gpn):
        out.append(Issue("gpus_nodes", f"gpus ({gpus}) do not match nodes ({nodes}) x gpus_per_node ({gpn}): "
                                       f"use whole nodes (gpus = {nodes * gpn}) or a single partial node"))
    if tp > gpn and not allow_tp_across_nodes:
        out.append(Issue("tp_node", f"tp ({tp}) > gpus_per_node ({gpn}): tensor parallelism across nodes is slow; "
                                    f"use tp <= {gpn} or set plan.allow_tp_across_nodes=true"))
    heads, kv = model.heads, model.kv_heads
    if heads % tp:
        out.append(Issue("heads_tp", f"heads ({heads}) not divisible by tp ({tp}): pick tp dividing {heads}"))
    if kv % tp:
        out.append(Issue("kv_heads_tp", f"kv_heads ({kv}) not divisible by tp ({tp}): pick tp dividing {kv}"))
    if model.ffn_hidden % tp:
        out.append(Issue("ffn_tp", f"ffn_hidden ({model.ffn_hidden}) not divisible by tp ({tp}): "
                                   f"pick tp dividing {model.ffn_hidden}"))
    layers = model.layers
    if layers % pp:
        out.append(Issue("layers_pp", f"layers ({layers}) not divisible by pp ({pp}): pick pp dividing {layers}"))
    micro = mbs * dp
    if gbs % micro:
        out.append(Issue("gbs_divisible", f"gbs ({gbs}) not divisible by mbs*dp = {mbs}*{dp} = {micro}: "
                                          f"use a gbs that is a multiple of {micro}"))
    if vpp > 1:
        if layers % (pp * vpp):
            out.append(Issue("layers_vpp", f"layers ({layers}) not divisible by pp*vpp = {pp}*{vpp}: "
                                           f"pick vpp so that pp*vpp divides {layers}"))
        if pp <= 2:
            out.append(Issue("vpp_pp", f"vpp ({vpp}) > 1 needs pp > 2 (Megatron's interleaved schedule), "
                                       f"pp is {pp}: use vpp=1 or pp >= 3"))
        m = gbs // micro
        if m % pp:
            out.append(Issue("vpp_microbatches", f"microbatches ({m} = gbs/(mbs*dp)) not a multiple of pp ({pp}) "
                                                 f"with vpp > 1: pick gbs as a multiple of {micro * pp}"))
    if lay.sequence_parallel and tp == 1:
        out.append(Issue("sp_tp", "sequence_parallel needs tp > 1 (it splits the tensor-parallel replicated "
                                  "activations): set sequence_parallel=false or tp >= 2"))
    zero = lay.zero_stage
    if zero not in (0, 1, 2, 3):
        out.append(Issue("zero_stage", f"zero_stage ({zero}) must be 0, 1, 2 or 3"))
    elif zero >= 2 and pp > 1:
        out.append(Issue("zero_pp", f"ZeRO-{zero} with pp={pp}: DeepSpeed refuses it (ZeRO-2 and ZeRO-3 are "
                                    f"incompatible with pipeline parallelism); use zero_stage <= 1 or pp=1"))
    if lay.distributed_optimizer and zero > 0:
        out.append(Issue("distopt_zero", f"distributed_optimizer with zero_stage={zero}: both shard the optimizer; "
                                         f"pick one (zero_stage=0 or distributed_optimizer=false)"))
    if lay.recompute not in RECOMPUTE_MODES:
        out.append(Issue("recompute", f"recompute ({lay.recompute!r}) must be one of {', '.join(RECOMPUTE_MODES)}"))
    if model.max_position < model.seq_len:
        out.append(Issue("max_position", f"max_position ({model.max_position}) < seq_len ({model.seq_len}): "
                                         f"raise max_position or shorten seq_len"))
    if model.hidden % heads:
        out.append(Issue("hidden_heads", f"hidden ({model.hidden}) not divisible by heads ({heads}): "
                                         f"the head dimension must be an integer"))
    return out


@functools.lru_cache(maxsize=4096)
def _shape_warnings(hidden: int, ffn_hidden: int, vocab: int, tp: int) -> tuple[Issue, ...]:
    """Warnings that depend on the model shape and tp only (cached: the planner asks for the same few pairs)."""
    out: list[Issue] = []
    if (hidden // tp) % GEMM_ALIGN:
        out.append(Issue("gemm_hidden_tp", f"hidden/tp = {hidden}/{tp} = {hidden // tp} is not a multiple of "
                                           f"{GEMM_ALIGN}: slower GEMMs; prefer a tp that keeps it so"))
    if (ffn_hidden // tp) % GEMM_ALIGN:
        out.append(Issue("gemm_ffn_tp", f"ffn_hidden/tp = {ffn_hidden}/{tp} = {ffn_hidden // tp} is not a multiple "
                                        f"of {GEMM_ALIGN}: slower GEMMs"))
    step = VOCAB_ALIGN * tp
    if vocab % step:
        padded = -(-vocab // step) * step
        out.append(Issue("gemm_vocab", f"vocab ({vocab}) per tp shard is not a multiple of {VOCAB_ALIGN}: "
                                       f"Megatron pads it to {padded} (multiple of {VOCAB_ALIGN}*tp = {step}); "
                                       f"{padded - vocab} padding rows cost memory and FLOPs"))
    return tuple(out)


def _bubble_warning(lay: Layout) -> Issue | None:
    pp = lay.pp
    m = lay.gbs // (lay.mbs * lay.dp)
    if pp > 1 and m < MIN_MICROBATCHES_PER_STAGE * pp:
        bubble = (pp - 1) / (lay.vpp * max(1, m))
        return Issue("bubble", f"only {m} microbatches for pp={pp}: bubble (p-1)/(v*m) = {bubble:.0%}; "
                               f"raise gbs or lower mbs to reach >= {MIN_MICROBATCHES_PER_STAGE * pp}")
    return None


def check(model: ModelConfig, cluster: ClusterConfig, layout: Layout, *,
          allow_tp_across_nodes: bool = False) -> Verdict:
    """Rejections (the job would be refused or crash) and warnings (it would run, slowly) for one layout."""
    lay = layout
    if (lay.tp < 1 or lay.pp < 1 or lay.dp < 1 or lay.vpp < 1 or lay.mbs < 1 or lay.gbs < 1 or lay.gpus < 1
            or lay.nodes < 1 or model.layers < 1 or model.hidden < 1 or model.heads < 1 or model.kv_heads < 1
            or model.seq_len < 1 or model.vocab < 1 or model.ffn_hidden < 1):
        # the other rules divide by these sizes: stop here
        return Verdict((Issue("positive", f"sizes must be >= 1: tp={lay.tp} pp={lay.pp} dp={lay.dp} "
                                          f"vpp={lay.vpp} mbs={lay.mbs} gbs={lay.gbs} gpus={lay.gpus} "
                                          f"nodes={lay.nodes}; model layers={model.layers} hidden={model.hidden} "
                                          f"heads={model.heads} kv_heads={model.kv_heads} seq_len={model.seq_len} "
                                          f"vocab={model.vocab} ffn_hidden={model.ffn_hidden}"),), ())
    reasons = _rejections(model, cluster.gpus_per_node, lay, allow_tp_across_nodes)
    warnings = _shape_warnings(model.hidden, model.ffn_hidden, model.vocab, lay.tp)
    bubble = _bubble_warning(lay)
    if bubble is not None:
        warnings += (bubble,)
    if not reasons and not warnings:
        return _CLEAN
    return Verdict(tuple(reasons), warnings)
