"""The rules table: which layouts Megatron-LM, Megatron-DeepSpeed, DeepSpeed and the embedded workload accept, and
which ones they accept but run badly. One table for the planner, the backends' refusals and the workload's own
argument check (tests/plan/test_rules.py runs the same cases against all three).

Each `Rule` has a code, the backends it applies to (None: every backend), the Layout fields it reads, a predicate
that says when the layout breaks it, a message naming the values and the fix, and where the rule comes from.
`Checker` is on the planner's hot path (10^6 layouts in a few seconds): rules are grouped by the fields they read
and each group's verdict is cached per distinct value tuple, so a grid of a million points evaluates each rule only
for the few distinct (tp,), (pp, vpp), (gbs, mbs, dp), ... combinations it holds. Messages are built only when a
rule is broken.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any, Optional

from launcher.config.schema import ClusterConfig, ModelConfig
from launcher.core.layout import DIMENSIONS, FACTORS, Layout, dimension
from launcher.core.names import BackendName

GEMM_ALIGN = 64         # per-shard GEMM widths that are multiples of 64 keep tensor cores on full tiles
VOCAB_ALIGN = 128       # Megatron --make-vocab-size-divisible-by default
MIN_MICROBATCHES_PER_STAGE = 4   # below m = 4p the 1F1B bubble (p-1)/m exceeds ~20 %

MEGATRON_LM, MEGATRON_DEEPSPEED, TORCH = BackendName.megatron_lm, BackendName.megatron_deepspeed, BackendName.torch


@dataclass(frozen=True, slots=True)
class Issue:
    """One rejection or warning: `code` groups them, `message` names the values and the fix."""

    code: str
    message: str


@dataclass(frozen=True, slots=True)
class Verdict:
    reasons: tuple[Issue, ...]
    warnings: tuple[Issue, ...]
    hits: tuple[Any, ...] = field(default=(), compare=False, repr=False)
    """(rule index, rule, issue) per issue: how the Checker merges the verdicts of its rule groups in table order."""

    @property
    def ok(self) -> bool:
        return not self.reasons

    @property
    def first_reason(self) -> Optional[Issue]:
        """The rejection first in the rules table (the one a plan counts the layout under)."""
        return self.reasons[0] if self.reasons else None

    def full(self) -> Verdict:
        return self


@dataclass(frozen=True)
class Facts:
    """What a rule may look at besides the layout: fixed for a whole plan."""

    model: ModelConfig
    gpus_per_node: int
    cluster_nodes: int = 1 << 30
    allow_tp_across_nodes: bool = False


Predicate = Callable[[Facts, Layout], bool]


@dataclass(frozen=True)
class Rule:
    code: str
    reads: tuple[str, ...]
    """The Layout fields the predicate and message read (the cache key; tests check the declaration)."""
    broken: Predicate
    message: Callable[[Facts, Layout], str]
    source: str
    backends: Optional[frozenset[BackendName]] = None
    """The programs that enforce it (None: every backend)."""
    warning: bool = False
    """A layout that breaks a warning runs, slowly."""


def _shown_factors(lay: Layout) -> list[str]:
    """The world factors worth naming: tp, pp, dp always, a later one (cp) when it is not 1."""
    return [n for n in FACTORS if dimension(n).dim.hashed_at_default or getattr(lay, n) != dimension(n).default]


def _world_fix(lay: Layout) -> str:
    """A fix for tp*pp*cp*dp != gpus that can hold: dp = gpus / (the other factors) when they divide gpus."""
    others = [n for n in _shown_factors(lay) if n != "dp"]
    product = lay.world // max(1, lay.dp)
    names = "*".join(others)
    if product and lay.gpus % product == 0:
        return f"pick dp = gpus/({names}) = {lay.gpus // product} or change gpus"
    return (f"{names} = {product} does not divide gpus ({lay.gpus}), so no dp fits: pick {names} dividing "
            f"{lay.gpus} or change gpus")


def _vocab_padding(f: Facts, lay: Layout) -> int:
    step = VOCAB_ALIGN * lay.tp
    return -(-f.model.vocab // step) * step


def _bubble(lay: Layout) -> float:
    return (lay.pp - 1) / (lay.vpp * max(1, lay.microbatches))


_WORLD = FACTORS + ("gpus",)
_M = ("gbs", "mbs", "dp")
_EXPERT_MESH = tuple(n for n in FACTORS if n != "pp") + ("ep", "etp")
"""What the expert mesh is carved out of (a pipeline stage's ranks) and its sizes."""

RULES: tuple[Rule, ...] = (
    # -- the model's shape against the split: first, so that a layout is named by the most basic rule it breaks
    # (tp=3 on a 64-head model is refused for its heads, not for the dp that 64 GPUs cannot give it)
    Rule("heads_tp", ("tp",), lambda f, lay: f.model.heads % lay.tp != 0,
         lambda f, lay: f"heads ({f.model.heads}) not divisible by tp ({lay.tp}): pick tp dividing {f.model.heads}",
         "Megatron ColumnParallelLinear divide()"),
    Rule("kv_heads_tp", ("tp",), lambda f, lay: f.model.kv_heads % lay.tp != 0,
         lambda f, lay: (f"kv_heads ({f.model.kv_heads}) not divisible by tp ({lay.tp}): pick tp dividing "
                         f"{f.model.kv_heads}"),
         "Megatron GQA: query groups split over tp"),
    Rule("ffn_tp", ("tp",), lambda f, lay: f.model.ffn_hidden % lay.tp != 0,
         lambda f, lay: (f"ffn_hidden ({f.model.ffn_hidden}) not divisible by tp ({lay.tp}): pick tp dividing "
                         f"{f.model.ffn_hidden}"),
         "Megatron ColumnParallelLinear divide()"),
    Rule("layers_pp", ("pp",), lambda f, lay: f.model.layers % lay.pp != 0,
         lambda f, lay: f"layers ({f.model.layers}) not divisible by pp ({lay.pp}): pick pp dividing {f.model.layers}",
         "Megatron arguments.py"),
    Rule("max_position", (), lambda f, lay: f.model.max_position < f.model.seq_len,
         lambda f, lay: (f"max_position ({f.model.max_position}) < seq_len ({f.model.seq_len}): raise max_position "
                         "or shorten seq_len"),
         "Megatron arguments.py"),
    Rule("hidden_heads", (), lambda f, lay: f.model.hidden % f.model.heads != 0,
         lambda f, lay: (f"hidden ({f.model.hidden}) not divisible by heads ({f.model.heads}): the head dimension "
                         "must be an integer"),
         "Megatron arguments.py"),
    Rule("cp_seq", ("cp",), lambda f, lay: lay.cp > 1 and f.model.seq_len % (2 * lay.cp) != 0,
         lambda f, lay: (f"seq_len ({f.model.seq_len}) not divisible by 2*cp = {2 * lay.cp}: load-balanced causal "
                         f"attention splits each sequence into 2*cp chunks; pick cp so that 2*cp divides it"),
         "Megatron-LM arguments.py: 'seq-length should be a multiple of 2 * context-parallel-size'"),
    # -- the world -------------------------------------------------------------------------------------------
    Rule("world", _WORLD, lambda f, lay: lay.world != lay.gpus,
         lambda f, lay: ("*".join(_shown_factors(lay)) + " = "
                         + "*".join(str(getattr(lay, n)) for n in _shown_factors(lay))
                         + f" = {lay.world} != gpus ({lay.gpus}): " + _world_fix(lay)),
         "Megatron initialize_model_parallel; torchtitan ParallelDims"),
    Rule("gpus_nodes", ("gpus", "nodes"),
         lambda f, lay: (lay.gpus > lay.nodes * f.gpus_per_node
                         or (lay.nodes > 1 and lay.gpus != lay.nodes * f.gpus_per_node)),
         lambda f, lay: (f"gpus ({lay.gpus}) do not match nodes ({lay.nodes}) x gpus_per_node ({f.gpus_per_node}): "
                         f"use whole nodes (gpus = {lay.nodes * f.gpus_per_node}) or a single partial node"),
         "one task per node launches gpus_per_node ranks (launcher/backends/launch.py)"),
    Rule("too_many_nodes", ("nodes",), lambda f, lay: lay.nodes > f.cluster_nodes,
         lambda f, lay: (f"the trial needs {lay.nodes} nodes but the cluster has {f.cluster_nodes} "
                         "(cluster.nodes): use fewer nodes/gpus in the grid or raise cluster.nodes"),
         "the partition's size (cluster.nodes)"),
    Rule("tp_node", ("tp",), lambda f, lay: lay.tp > f.gpus_per_node and not f.allow_tp_across_nodes,
         lambda f, lay: (f"tp ({lay.tp}) > gpus_per_node ({f.gpus_per_node}): tensor parallelism across nodes is "
                         f"slow; use tp <= {f.gpus_per_node} or set plan.allow_tp_across_nodes=true"),
         "TP traffic needs NVLink (Narayanan et al. 2021 §3.3)"),
    # -- batch and pipeline schedule --------------------------------------------------------------------------
    Rule("gbs_divisible", _M, lambda f, lay: lay.gbs % (lay.mbs * lay.dp) != 0,
         lambda f, lay: (f"gbs ({lay.gbs}) not divisible by mbs*dp = {lay.mbs}*{lay.dp} = {lay.mbs * lay.dp}: "
                         f"use a gbs that is a multiple of {lay.mbs * lay.dp}"),
         "Megatron's micro-batch calculator; DeepSpeed train_batch_size check"),
    Rule("layers_vpp", ("pp", "vpp"), lambda f, lay: lay.vpp > 1 and f.model.layers % (lay.pp * lay.vpp) != 0,
         lambda f, lay: (f"layers ({f.model.layers}) not divisible by pp*vpp = {lay.pp}*{lay.vpp}: pick vpp so that "
                         f"pp*vpp divides {f.model.layers}"),
         "Megatron arguments.py (layers per virtual stage)"),
    Rule("vpp_pp", ("pp", "vpp"), lambda f, lay: lay.vpp > 1 and lay.pp < 2,
         lambda f, lay: f"vpp ({lay.vpp}) > 1 needs pipeline parallelism (pp >= 2), pp is {lay.pp}: use vpp=1",
         "interleaved 1F1B schedules (Megatron, torch.distributed.pipelining)"),
    Rule("vpp_pp_overlap", ("pp", "vpp"), lambda f, lay: lay.vpp > 1 and lay.pp == 2,
         lambda f, lay: (f"vpp ({lay.vpp}) > 1 needs pp > 2 in Megatron-LM's interleaved schedule unless p2p "
                         "overlap is on (2024 releases assert it), pp is 2: use vpp=1 or pp >= 3"),
         "Megatron-LM arguments.py: 'pipeline-model-parallel size should be greater than 2'",
         backends=frozenset({MEGATRON_LM})),
    Rule("vpp_microbatches", _M + ("pp", "vpp"), lambda f, lay: lay.vpp > 1 and lay.microbatches % lay.pp != 0,
         lambda f, lay: (f"microbatches ({lay.microbatches} = gbs/(mbs*dp)) not a multiple of pp ({lay.pp}) with "
                         f"vpp > 1: pick gbs as a multiple of {lay.mbs * lay.dp * lay.pp}"),
         "Megatron schedules.py / torch ScheduleInterleaved1F1B"),
    Rule("pp_microbatches", _M + ("pp",), lambda f, lay: lay.pp > 1 and lay.microbatches < lay.pp,
         lambda f, lay: (f"{lay.microbatches} micro-batches per pipeline, fewer than pp={lay.pp}: the workload's "
                         "1F1B schedule needs at least pp; raise gbs or lower mbs"),
         "torch.distributed.pipelining Schedule1F1B", backends=frozenset({TORCH})),
    Rule("mds_vpp", ("vpp",), lambda f, lay: lay.vpp > 1,
         lambda f, lay: (f"vpp ({lay.vpp}): Megatron-DeepSpeed pipelines through DeepSpeed's PipelineEngine, which "
                         "has no interleaved schedule: use vpp=1 (or backend megatron_lm)"),
         "Megatron-DeepSpeed training.py passes only model[0] to deepspeed.initialize",
         backends=frozenset({MEGATRON_DEEPSPEED})),
    # -- context parallelism --------------------------------------------------------------------------------
    # cp = 1 included: Megatron scatters the [s/cp, b, h] activations over tp at the embedding (megatron-core
    # tensor_parallel/mappings.py _split_along_first_dim asserts), the workload shards them the same way.
    Rule("cp_sp_seq", ("cp", "tp", "sequence_parallel"),
         lambda f, lay: lay.sequence_parallel and f.model.seq_len % (lay.cp * lay.tp) != 0,
         lambda f, lay: (f"seq_len ({f.model.seq_len}) not divisible by cp*tp = {lay.cp * lay.tp}: sequence "
                         "parallelism splits each rank's seq_len/cp tokens over tp; pick tp (and cp) dividing "
                         f"{f.model.seq_len} or sequence_parallel=false"),
         "megatron-core tensor_parallel/mappings.py scatter_to_sequence_parallel_region (first dimension s/cp "
         "divisible by tp); launcher/workload (DTensor Shard(1) of the sequence)"),
    Rule("mds_cp", ("cp",), lambda f, lay: lay.cp > 1,
         lambda f, lay: (f"cp ({lay.cp}): Megatron-DeepSpeed has no context parallelism (no --context-parallel-size; "
                         "its --ds-sequence-parallel-size is DeepSpeed-Ulysses): use cp=1 or backend megatron_lm"),
         "microsoft/Megatron-DeepSpeed megatron/arguments.py", backends=frozenset({MEGATRON_DEEPSPEED})),
    Rule("workload_cp", ("cp",), lambda f, lay: lay.cp > 1,
         lambda f, lay: (f"cp ({lay.cp}): the embedded workload has no context parallelism (PyTorch's "
                         "context_parallel shards only CUDA flash/efficient attention; on CPU it fails with no "
                         "sharding strategy for the CPU attention kernel): use cp=1 or backend megatron_lm"),
         "torch.distributed.tensor.experimental.context_parallel (torch 2.13)", backends=frozenset({TORCH})),
    # -- expert parallelism (MoE models) ---------------------------------------------------------------------
    Rule("ep_dense", ("ep",), lambda f, lay: not f.model.is_moe and lay.ep > 1,
         lambda f, lay: (f"ep ({lay.ep}) splits experts, but the model is dense (model.num_experts is 0): use ep=1, "
                         "or an MoE model"),
         "megatron-core TransformerConfig: 'num_moe_experts must be non None to use expert-parallel'; "
         "launcher/workload validate_moe"),
    Rule("etp_dense", ("etp",), lambda f, lay: not f.model.is_moe and lay.etp > 1,
         lambda f, lay: (f"etp ({lay.etp}) splits experts, but the model is dense (model.num_experts is 0): use "
                         "etp=1, or an MoE model"),
         "layout vocabulary (a dense model has no expert to split; the trial would run mislabelled); "
         "launcher/workload validate_moe"),
    Rule("experts_ep", ("ep",), lambda f, lay: f.model.is_moe and f.model.num_experts % lay.ep != 0,
         lambda f, lay: (f"num_experts ({f.model.num_experts}) not divisible by ep ({lay.ep}): every expert-parallel "
                         f"rank holds num_experts/ep experts; pick ep dividing {f.model.num_experts}"),
         "Megatron-LM arguments.py: 'num_experts % expert_model_parallel_size == 0'; launcher/workload"),
    Rule("ep_world", _EXPERT_MESH,
         lambda f, lay: f.model.is_moe and (lay.tp * lay.cp * lay.dp) % (lay.ep * lay.etp) != 0,
         lambda f, lay: (f"ep*etp = {lay.ep}*{lay.etp} = {lay.ep * lay.etp} does not divide tp*cp*dp = "
                         f"{lay.tp}*{lay.cp}*{lay.dp} = {lay.tp * lay.cp * lay.dp}: the expert mesh (etp x ep x "
                         "expert-dp) is carved out of each pipeline stage's ranks; pick ep*etp dividing it"),
         "megatron-core parallel_state.initialize_model_parallel: world % (etp*ep*pp) == 0 ('expert_tensor_model_"
         "pipeline_parallel size'); launcher/workload validate_moe"),
    Rule("moe_ffn_etp", ("etp",), lambda f, lay: f.model.is_moe and f.model.moe_ffn_hidden % lay.etp != 0,
         lambda f, lay: (f"moe_ffn_hidden ({f.model.moe_ffn_hidden}) not divisible by etp ({lay.etp}): pick etp "
                         f"dividing {f.model.moe_ffn_hidden}"),
         "megatron-core TEGroupedMLP / SequentialMLP divide(ffn, etp); launcher/workload validate_moe"),
    Rule("shared_expert_tp", ("tp",), lambda f, lay: f.model.shared_expert_ffn_hidden % lay.tp != 0,
         lambda f, lay: (f"shared_expert_ffn_hidden ({f.model.shared_expert_ffn_hidden}) not divisible by tp "
                         f"({lay.tp}): the shared expert is tensor-parallel like the dense FFN; pick tp dividing it"),
         "megatron-core SharedExpertMLP (ColumnParallelLinear divide()); launcher/workload validate_moe"),
    Rule("moe_tp_sp", ("tp", "sequence_parallel"),
         lambda f, lay: f.model.is_moe and lay.tp > 1 and not lay.sequence_parallel,
         lambda f, lay: (f"an MoE model with tp ({lay.tp}) > 1 needs sequence_parallel: Megatron-LM asserts it "
                         "(the token dispatcher works on the sequence shards); set sequence_parallel=true or tp=1"),
         "Megatron-LM arguments.py validate_args: 'When using MoE and tensor parallelism, sequence parallelism must "
         "be used.' (megatron-core 0.16.1 ModelParallelConfig only warns for ep > 1)",
         backends=frozenset({MEGATRON_LM})),
    Rule("moe_seq_tp", ("tp",), lambda f, lay: f.model.is_moe and lay.tp > 1 and f.model.seq_len % lay.tp != 0,
         lambda f, lay: (f"seq_len ({f.model.seq_len}) not divisible by tp ({lay.tp}): each tp rank dispatches its "
                         "sequence shard of the tokens to the experts; pick tp dividing seq_len"),
         "launcher/workload validate_moe", backends=frozenset({TORCH})),
    Rule("moe_zero", ("zero_stage",), lambda f, lay: f.model.is_moe and lay.zero_stage >= 2,
         lambda f, lay: (f"zero_stage {lay.zero_stage} with an MoE model: the workload's ZeRO-2/3 (FSDP) would shard "
                         "experts over data-parallel ranks that hold different experts; use zero_stage 0 or 1 / "
                         "distributed_optimizer"),
         "launcher/workload validate_moe", backends=frozenset({TORCH})),
    Rule("mds_moe", (), lambda f, lay: f.model.is_moe,
         lambda f, lay: (f"an MoE model ({f.model.num_experts} experts): Megatron-DeepSpeed's MoE is DeepSpeed-MoE "
                         "(capacity-factor gating that drops tokens, experts only on the non-pipelined GPTModel, "
                         "no shared-expert size or expert tensor parallelism flags), a different model than the "
                         "dropless MoE the plan prices; use backend megatron_lm or torch"),
         "microsoft/Megatron-DeepSpeed megatron/arguments.py (--num-experts list, --moe-expert-parallel-size, "
         "--topk, --moe-train-capacity-factor) and megatron/model/transformer.py (deepspeed.moe.layer.MoE)",
         backends=frozenset({MEGATRON_DEEPSPEED})),
    # -- memory features --------------------------------------------------------------------------------------
    Rule("recompute_every_full", ("recompute_every", "recompute"),
         lambda f, lay: lay.recompute_every > 1 and lay.recompute != "full",
         lambda f, lay: (f"recompute_every ({lay.recompute_every}) with recompute={lay.recompute}: recomputing every "
                         "k-th layer is a kind of full recompute; use recompute=full or recompute_every=1"),
         "Megatron --recompute-method block needs --recompute-granularity full (TransformerConfig: selective takes "
         "no recompute_num_layers)"),
    Rule("recompute_every_layers", ("recompute_every", "pp", "vpp"),
         lambda f, lay: lay.recompute_every > 1 and (f.model.layers // (lay.pp * lay.vpp)) % lay.recompute_every != 0,
         lambda f, lay: (f"recompute_every ({lay.recompute_every}) does not divide the "
                         f"{f.model.layers // (lay.pp * lay.vpp)} layers of each model chunk (layers/(pp*vpp) = "
                         f"{f.model.layers}/({lay.pp}*{lay.vpp})): the block method recomputes a whole number of "
                         "layers per chunk; pick a recompute_every dividing "
                         f"{f.model.layers // (lay.pp * lay.vpp)}"),
         "megatron-core transformer_block.py _checkpointed_forward 'block' (recompute_num_layers per chunk); "
         "launcher/workload --recompute-every"),
    Rule("mds_recompute_every", ("recompute_every", "pp"), lambda f, lay: lay.recompute_every > 1 and lay.pp > 1,
         lambda f, lay: (f"recompute_every ({lay.recompute_every}) with pp={lay.pp}: DeepSpeed's pipeline engine "
                         "checkpoints uniform intervals only ('deepspeed's pipeline doesn't support the block "
                         "recompute method'): use recompute_every=1 with pp > 1, or pp=1 (or backend megatron_lm)"),
         "microsoft/Megatron-DeepSpeed megatron/model/gpt_model.py GPTModelPipe (activation_checkpoint_interval)",
         backends=frozenset({MEGATRON_DEEPSPEED})),
    Rule("sp_tp", ("sequence_parallel", "tp"), lambda f, lay: lay.sequence_parallel and lay.tp == 1,
         lambda f, lay: ("sequence_parallel needs tp > 1 (it splits the tensor-parallel replicated activations): "
                         "set sequence_parallel=false or tp >= 2"),
         "Megatron arguments.py disables it at tp = 1"),
    Rule("vocab_tp", ("tp",), lambda f, lay: f.model.vocab % lay.tp != 0,
         lambda f, lay: (f"the workload shards the vocabulary ({f.model.vocab}) over tp ({lay.tp}) without padding: "
                         "pick a tp dividing it"),
         "launcher/workload (vocabulary-parallel output)", backends=frozenset({TORCH})),
    Rule("zero_pp", ("zero_stage", "pp"), lambda f, lay: lay.zero_stage >= 2 and lay.pp > 1,
         lambda f, lay: (f"ZeRO-{lay.zero_stage} with pp={lay.pp}: DeepSpeed refuses it (ZeRO-2 and ZeRO-3 are "
                         "incompatible with pipeline parallelism); use zero_stage <= 1 or pp=1"),
         "DeepSpeed runtime/pipe/engine.py"),
    Rule("zero_megatron_lm", ("zero_stage",), lambda f, lay: lay.zero_stage >= 2,
         lambda f, lay: (f"zero_stage {lay.zero_stage}: Megatron-LM has no ZeRO-2/3 (its distributed optimizer "
                         "shards only the optimizer state, ZeRO-1); use zero_stage 0 or 1, or backend "
                         "megatron_deepspeed"),
         "Megatron-LM: --use-distributed-optimizer is ZeRO-1; FSDP is another program setup",
         backends=frozenset({MEGATRON_LM})),
    Rule("distopt_zero", ("distributed_optimizer", "zero_stage"),
         lambda f, lay: lay.distributed_optimizer and lay.zero_stage > 0,
         lambda f, lay: (f"distributed_optimizer with zero_stage={lay.zero_stage}: both shard the optimizer; pick "
                         "one (zero_stage=0 or distributed_optimizer=false)"),
         "two owners of one optimizer state"),
    Rule("mds_distopt", ("distributed_optimizer",), lambda f, lay: lay.distributed_optimizer,
         lambda f, lay: ("distributed_optimizer under DeepSpeed: the optimizer is DeepSpeed's; use zero_stage=1 "
                         "(ZeRO-1 shards the optimizer state the same way)"),
         "Megatron-DeepSpeed --deepspeed", backends=frozenset({MEGATRON_DEEPSPEED})),
    # -- warnings: it runs, slowly ----------------------------------------------------------------------------
    # A warning, not a refusal: Megatron enforces no node bound on tp x cp (megatron-core parallel_state.py checks
    # only world % (tp*pp*cp)), and NVIDIA's Llama 3.1 405B recipe runs tp 8 x cp 4 on 8-GPU nodes (NeMo
    # nemo/collections/llm/recipes/llama31_405b.py, trainer() defaults). The step-time estimate charges the ring
    # exchange at inter-node bandwidth then (step_time.py cp_bw).
    Rule("cp_node", ("cp", "tp"), lambda f, lay: lay.cp > 1 and lay.tp * lay.cp > f.gpus_per_node,
         lambda f, lay: (f"tp*cp = {lay.tp}*{lay.cp} = {lay.tp * lay.cp} > gpus_per_node ({f.gpus_per_node}): the "
                         "ring-attention exchange of every layer crosses nodes (the estimate prices it at the "
                         f"network's bandwidth); tp*cp <= {f.gpus_per_node} keeps it on NVLink"),
         "Megatron rank order tp-cp-dp-pp: cp ranks follow the tp ranks in a node", warning=True),
    # Megatron's expert rank order is etp, ep, edp, pp: ep ranks are etp apart, so the group leaves the node once
    # ep*etp exceeds it and the dispatch/combine all-to-alls of every layer cross the network.
    Rule("ep_node", ("ep", "etp"), lambda f, lay: lay.ep > 1 and lay.ep * lay.etp > f.gpus_per_node,
         lambda f, lay: (f"ep*etp = {lay.ep}*{lay.etp} = {lay.ep * lay.etp} > gpus_per_node ({f.gpus_per_node}): the "
                         "expert all-to-alls of every layer cross nodes (priced at the network's all-to-all "
                         f"bandwidth); ep*etp <= {f.gpus_per_node} keeps them on NVLink"),
         "megatron-core parallel_state expert RankGenerator order 'tp-ep-dp-pp'", warning=True),
    Rule("gemm_hidden_tp", ("tp",), lambda f, lay: (f.model.hidden // lay.tp) % GEMM_ALIGN != 0,
         lambda f, lay: (f"hidden/tp = {f.model.hidden}/{lay.tp} = {f.model.hidden // lay.tp} is not a multiple of "
                         f"{GEMM_ALIGN}: slower GEMMs; prefer a tp that keeps it so"),
         "tensor-core tile sizes", warning=True),
    Rule("gemm_ffn_tp", ("tp",), lambda f, lay: (f.model.ffn_hidden // lay.tp) % GEMM_ALIGN != 0,
         lambda f, lay: (f"ffn_hidden/tp = {f.model.ffn_hidden}/{lay.tp} = {f.model.ffn_hidden // lay.tp} is not a "
                         f"multiple of {GEMM_ALIGN}: slower GEMMs"),
         "tensor-core tile sizes", warning=True),
    Rule("gemm_vocab", ("tp",), lambda f, lay: f.model.vocab % (VOCAB_ALIGN * lay.tp) != 0,
         lambda f, lay: (f"vocab ({f.model.vocab}) per tp shard is not a multiple of {VOCAB_ALIGN}: Megatron pads it "
                         f"to {_vocab_padding(f, lay)} (multiple of {VOCAB_ALIGN}*tp = {VOCAB_ALIGN * lay.tp}); "
                         f"{_vocab_padding(f, lay) - f.model.vocab} padding rows cost memory and FLOPs"),
         "Megatron --make-vocab-size-divisible-by 128", warning=True),
    Rule("bubble", _M + ("pp", "vpp"),
         lambda f, lay: lay.pp > 1 and lay.microbatches < MIN_MICROBATCHES_PER_STAGE * lay.pp,
         lambda f, lay: (f"only {lay.microbatches} microbatches for pp={lay.pp}: bubble (p-1)/(v*m) = "
                         f"{_bubble(lay):.0%}; raise gbs or lower mbs to reach >= "
                         f"{MIN_MICROBATCHES_PER_STAGE * lay.pp}"),
         "1F1B bubble (Narayanan et al. 2021 §2.2)", warning=True),
)


def _not_a_choice(name: str, choices: tuple[Any, ...]) -> Predicate:
    return lambda f, lay: getattr(lay, name) not in choices


def _choice_message(name: str, choices: tuple[Any, ...]) -> Callable[[Facts, Layout], str]:
    return lambda f, lay: f"{name} ({getattr(lay, name)!r}) must be one of {', '.join(map(str, choices))}"


def _choice_rules() -> tuple[Rule, ...]:
    """A value outside a dimension's choices (e.g. a grid.include entry with zero_stage 4)."""
    out = []
    for d in DIMENSIONS:
        if d.dim.choices is None:
            continue
        choices = d.dim.choices
        out.append(Rule(d.name, (d.name,), _not_a_choice(d.name, choices), _choice_message(d.name, choices),
                        "launcher/core/layout.py choices"))
    return tuple(out)


ALL_RULES: tuple[Rule, ...] = _choice_rules() + RULES
_SIZES = tuple(d.name for d in DIMENSIONS if d.type is int and d.dim.choices is None)
_size_getter = operator.attrgetter(*_SIZES)


def rules_for(backend: Optional[str]) -> tuple[Rule, ...]:
    """The rules a backend enforces (every general rule plus its own); None: the general rules only."""
    return tuple(r for r in ALL_RULES if (r.backends is None) or (backend is not None and backend in r.backends))


@dataclass
class _Group:
    """Rules reading the same fields, with their verdict cached per value tuple."""

    reads: tuple[str, ...]
    rules: list[tuple[int, Rule]]
    key: Callable[[Layout], object]
    cache: dict[Any, Any] = field(default_factory=dict)


MERGED_KEYS = 1 << 14
"""With the grid's key space known: groups are merged while their combined key has at most this many values."""


def _groups(rules: Sequence[Rule], key_space: Optional[Mapping[str, int]] = None) -> list[_Group]:
    """Rules grouped by the fields they read. Each group is one cache look-up per layout, so fewer is faster:
    - a group whose fields are a subset of another's joins the smallest such superset (7 groups instead of 19 for
      the 70b sweep's rules);
    - with `key_space` (distinct values per field in the grid, launcher.plan.grid.key_space), the groups with the
      fewest values are merged while the merged key has at most MERGED_KEYS values (4 groups for the 10^6-point
      benchmark grid): a merged group is evaluated once per distinct key, still a few thousand times at most."""
    by_reads: dict[tuple[str, ...], list[tuple[int, Rule]]] = {}
    for index, rule in enumerate(rules):
        by_reads.setdefault(tuple(sorted(rule.reads)), []).append((index, rule))
    hosts: dict[tuple[str, ...], list[tuple[int, Rule]]] = {}
    for reads in sorted(by_reads, key=len, reverse=True):
        supersets = [h for h in hosts if set(reads) < set(h)]
        host = min(supersets, key=len) if supersets else reads
        hosts.setdefault(host, []).extend(by_reads[reads])
    if key_space is not None:
        hosts = _merge_small(hosts, key_space)
    return [_Group(reads, sorted(members, key=lambda member: member[0]),
                   operator.attrgetter(*reads) if reads else (lambda lay: ())) for reads, members in hosts.items()]


def _merge_small(hosts: dict[tuple[str, ...], list[Any]],
                 key_space: Mapping[str, int]) -> dict[tuple[str, ...], list[Any]]:
    def size(reads: Iterable[str]) -> int:
        return math.prod(max(1, key_space.get(name, 1)) for name in reads)

    merged_reads: set[str] = set()
    merged_members: list[Any] = []
    out = {}
    for reads in sorted(hosts, key=size):
        if size(merged_reads | set(reads)) <= MERGED_KEYS:
            merged_reads |= set(reads)
            merged_members += hosts[reads]
        else:
            out[reads] = hosts[reads]
    if merged_members:
        out[tuple(sorted(merged_reads))] = merged_members
    return out


class Checker:
    """Checks layouts against the rules one backend enforces, for one model and cluster (a plan's whole grid)."""

    def __init__(self, model: ModelConfig, cluster: ClusterConfig, backend: Optional[str] = None, *,
                 allow_tp_across_nodes: bool = False, enforce_cluster_nodes: bool = True,
                 key_space: Optional[Mapping[str, int]] = None) -> None:
        """`key_space`: distinct values per layout field in the grid to be checked (launcher.plan.grid.key_space);
        it lets the checker merge rule groups (fewer look-ups per layout). Any layout is still checked right."""
        self.facts = Facts(model, cluster.gpus_per_node, cluster.nodes if enforce_cluster_nodes else 1 << 30,
                           allow_tp_across_nodes)
        self.rules = rules_for(backend)
        self._groups = _groups(self.rules, key_space)
        self._lookups = [(g.key, g.cache.get, g) for g in self._groups]
        self._positives: dict[tuple[Any, ...], Verdict] = {}
        self._model_sizes_ok = min(model.layers, model.hidden, model.heads, model.kv_heads, model.seq_len,
                                   model.vocab, model.ffn_hidden) >= 1

    def check(self, layout: Layout) -> Verdict | _Merged:
        """The layout's verdict: `ok`, `first_reason`, `reasons`, `warnings` (`full()` gives a plain Verdict)."""
        sizes = _size_getter(layout)
        if not self._model_sizes_ok or min(sizes) < 1:  # the other rules divide by these sizes: stop here
            verdict = self._positives.get(sizes)
            if verdict is None:
                verdict = self._positives[sizes] = Verdict((self._positive(layout),), ())
            return verdict
        found = []  # the verdict of each group that has one
        for key_of, cached, group in self._lookups:  # the hot loop of planning: locals only
            verdict = cached(key_of(layout))
            if verdict is None:
                verdict = self._evaluate(group, layout)
            if verdict is not _CLEAN:
                found.append(verdict)
        if len(found) < 2:
            return found[0] if found else _CLEAN
        return _Merged(found)

    def _evaluate(self, group: _Group, layout: Layout) -> Verdict:
        hits = [(i, r, Issue(r.code, r.message(self.facts, layout)))
                for i, r in group.rules if r.broken(self.facts, layout)]
        verdict = group.cache[group.key(layout)] = _verdict(hits) if hits else _CLEAN
        return verdict

    def _positive(self, lay: Layout) -> Issue:
        m = self.facts.model
        others = [n for n in _shown_factors(lay) if n != "dp"]
        product = math.prod(getattr(lay, n) for n in others)
        if lay.dp < 1 and min(getattr(lay, n) for n in others) >= 1 and product > lay.gpus:
            names = "*".join(others)
            return Issue("positive", f"{names} = {'*'.join(str(getattr(lay, n)) for n in others)} = {product} > "
                                     f"gpus ({lay.gpus}): no dp >= 1 fits; pick {names} <= {lay.gpus} or use "
                                     f"{product} gpus or more")
        sizes = " ".join(f"{name}={getattr(lay, name)}" for name in _SIZES)
        return Issue("positive", f"sizes must be >= 1: {sizes}; model layers={m.layers} hidden={m.hidden} "
                                 f"heads={m.heads} kv_heads={m.kv_heads} seq_len={m.seq_len} vocab={m.vocab} "
                                 f"ffn_hidden={m.ffn_hidden}")


_CLEAN = Verdict((), ())


_INDEX = operator.itemgetter(0)


class _Merged:
    """The verdicts of several rule groups, merged in the table's order only when read in full: the planner reads
    whether a layout is ok and its first reason (two thirds of a large grid's layouts have issues in several
    groups; merging each of them costs more than checking it)."""

    __slots__ = ("parts", "_full")

    def __init__(self, parts: list[Verdict]) -> None:
        self.parts = parts
        self._full: Optional[Verdict] = None

    @property
    def ok(self) -> bool:
        return not any(part.reasons for part in self.parts)

    @property
    def first_reason(self) -> Optional[Issue]:
        firsts = [next(hit for hit in part.hits if not hit[1].warning) for part in self.parts if part.reasons]
        return min(firsts, key=_INDEX)[2] if firsts else None

    def full(self) -> Verdict:
        if self._full is None:
            self._full = _verdict(sorted(chain.from_iterable(part.hits for part in self.parts), key=_INDEX))
        return self._full

    @property
    def reasons(self) -> tuple[Issue, ...]:
        return self.full().reasons

    @property
    def warnings(self) -> tuple[Issue, ...]:
        return self.full().warnings


def _verdict(hits: list[tuple[int, Rule, Issue]]) -> Verdict:
    """Hits (rule index, rule, issue) in the rules table's order -> rejections and warnings."""
    return Verdict(tuple(issue for _, r, issue in hits if not r.warning),
                   tuple(issue for _, r, issue in hits if r.warning), tuple(hits))


def check(model: ModelConfig, cluster: ClusterConfig, layout: Layout, *, backend: Optional[str] = None,
          allow_tp_across_nodes: bool = False, enforce_cluster_nodes: bool = False) -> Verdict:
    """Rejections (the job would be refused or crash) and warnings (it would run, slowly) for one layout.

    One-off callers; the planner keeps one Checker for its whole grid. `enforce_cluster_nodes` is off here
    because a single layout is often judged against a preset whose `nodes` is just a default."""
    return Checker(model, cluster, backend, allow_tp_across_nodes=allow_tp_across_nodes,
                   enforce_cluster_nodes=enforce_cluster_nodes).check(layout).full()

