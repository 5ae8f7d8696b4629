"""Mixture-of-experts amounts for the estimator: what an MoE layer adds to a rank's memory and step time.

The layer priced is Megatron-core's MoELayer with the dropless all-to-all token dispatcher and grouped GEMMs
(`--moe-token-dispatcher-type alltoall --moe-grouped-gemm`, no capacity factor), which launcher/workload/moe.py
runs the same way over gloo. Every layer's FFN is one (Megatron's --moe-layer-freq 1). Per rank, with T the tokens
of its sequence shard (T = mbs·s/(cp·tp): Megatron dispatches the sequence-parallel shard, the workload each tp
rank's slice), E experts, top-k routing, expert FFN F, expert parallel ep and expert tensor parallel etp:

- parameters: E/ep experts of γ·h·F/etp each per layer (γ = 3 SwiGLU, 2 GeLU), reduced and (distributed
  optimizer) sharded over the expert-data-parallel group of tp·cp·dp/(ep·etp) ranks (megatron-core
  parallel_state: expert_data_parallel_size = world/(etp·ep·pp)); the router (h x E) and the shared expert are
  dense parameters (launcher.plan.memory.layer_params);
- rows: the rank's T·k (token, slot) pairs go out over ep and as many come back (balanced routing), then the etp
  group gathers its members' rows: R = T·k·etp rows reach the rank's E/ep experts, R·ep/E per expert (the grouped
  GEMM's m, small when many experts share few tokens: launcher.plan.step_time's size-dependent efficiency);
- activations kept for the backward, per layer and micro-batch: the router's fp32 logits and probabilities
  (T·E·8 B), each expert's input rows and output rows (2·R·h·e: the FC1 input, and the expert output the combine
  weights by the probabilities), and the FC1 output(s) and FC2 input (R·F/etp·(γ'+1)·e, γ' = 2 SwiGLU, 1 GeLU);
- communication, per layer and micro-batch: forward a count exchange (latency only) and two all-to-alls of T·k·h·e
  bytes over ep (dispatch, combine), of which (ep-1)/ep leave the rank; backward two more; full recompute repeats
  the forward's; etp > 1 adds the etp group's row gather and partial-output reduce-scatter (as all-to-alls of
  etp·T·k·h·e bytes) each way. Priced over the measured all-to-all bus bandwidth of each tier when a network probe
  gave one (launcher.netbench: cluster.*_all_to_all_gbytes_per_s), else the tier's link bandwidth x net_eff; a
  group wider than a node sends its off-node share through the NIC (expert rank order etp, ep, edp: ep members
  are etp ranks apart).
All counts; launcher.plan.memory and launcher.plan.step_time turn them into GB and seconds.
"""

from __future__ import annotations

from launcher.config.schema import ClusterConfig, ModelConfig
from launcher.core.layout import Layout
from launcher.plan.flops import ffn_matrices

ROUTER_BYTES = 8.0
"""Bytes per token per expert the router keeps: fp32 logits (4) and fp32 probabilities (4) (Megatron's router
computes the softmax in fp32; --moe-router-dtype fp32 is the default for many experts)."""
PERMUTE_PASSES = 4.0
"""HBM passes over the routed rows per forward: permute (read + write) and unpermute (read + write)."""


def expert_params(model: ModelConfig, layout: Layout) -> float:
    """Routed-expert parameters one rank of a pipeline stage holds: L/p layers x E/ep experts x γ·h·F/etp."""
    if not model.is_moe:
        return 0.0
    per_expert = ffn_matrices(model) * model.hidden * model.moe_ffn_hidden / layout.etp
    return model.layers / layout.pp * model.num_experts / layout.ep * per_expert


def expert_data_parallel(layout: Layout) -> int:
    """Ranks holding the same experts, over which their gradients are reduced: tp·cp·dp / (ep·etp)."""
    return max(1, layout.tp * layout.cp * layout.dp // max(1, layout.ep * layout.etp))


def local_tokens(model: ModelConfig, layout: Layout) -> float:
    """Tokens a rank routes per micro-batch: its sequence shard, mbs·s/(cp·tp)."""
    return layout.mbs * model.seq_len / (layout.cp * layout.tp)


def routed_rows(model: ModelConfig, layout: Layout) -> float:
    """(token, slot) rows the rank's experts compute per micro-batch: T·k from the ep exchange, x etp gathered."""
    return local_tokens(model, layout) * model.moe_topk * layout.etp


def rows_per_expert(model: ModelConfig, layout: Layout) -> float:
    """The grouped GEMM's m: routed rows / local experts = T·k·etp·ep / E (balanced routing)."""
    return routed_rows(model, layout) * layout.ep / model.num_experts


def activation_bytes(model: ModelConfig, layout: Layout, act_bytes: float) -> float:
    """Bytes one MoE layer keeps for the backward per micro-batch (module docstring); 0 for a dense model."""
    if not model.is_moe:
        return 0.0
    tokens, rows = local_tokens(model, layout), routed_rows(model, layout)
    fc1_outputs = 2 if model.swiglu else 1
    router = tokens * model.num_experts * ROUTER_BYTES
    rows_h = 2 * rows * model.hidden * act_bytes
    rows_f = rows * model.moe_ffn_hidden / layout.etp * (fc1_outputs + 1) * act_bytes
    return router + rows_h + rows_f


def elementwise_bytes(model: ModelConfig, layout: Layout, act_bytes: float) -> float:
    """HBM bytes of one MoE layer's memory-bound kernels, forward, per micro-batch: router softmax/top-k over T·E,
    the permute/unpermute copies of the rows, the experts' activation function (γ reads + writes of F/etp)."""
    if not model.is_moe:
        return 0.0
    tokens, rows = local_tokens(model, layout), routed_rows(model, layout)
    router = 2 * tokens * model.num_experts * (act_bytes + 4)
    permute = PERMUTE_PASSES * rows * model.hidden * act_bytes
    activation = rows * ffn_matrices(model) * act_bytes * model.moe_ffn_hidden / layout.etp
    return router + permute + activation


def dispatch_bytes(model: ModelConfig, layout: Layout, act_bytes: float) -> float:
    """One dispatch (or combine) all-to-all's send buffer per rank: T·k rows of h."""
    return local_tokens(model, layout) * model.moe_topk * model.hidden * act_bytes


def all_to_all_seconds_per_byte(cluster: ClusterConfig, size: int, stride: int) -> tuple[float, bool]:
    """(seconds per byte of a rank's send buffer before net_eff, whether the group spans nodes) of an all-to-all over
    `size` ranks `stride` apart: (size-1)/size of the buffer leaves the rank; inside a node at the intra-node
    all-to-all bus bandwidth, the off-node share through the NIC at the inter-node one (the slower of the two sets
    the time). Measured figures (netbench's all-to-all busbw, for which time = (n-1)/n · S / busbw) replace the
    link bandwidths when present."""
    if size <= 1:
        return 0.0, False
    members = max(1, min(size, cluster.gpus_per_node // max(1, stride)))
    intra = (cluster.intra_node_all_to_all_gbytes_per_s or cluster.intra_node_gbytes_per_s) * 1e9
    inter = (cluster.inter_node_all_to_all_gbytes_per_s or cluster.inter_node_gbytes_per_s) * 1e9
    on_node, off_node = (members - 1) / size, (size - members) / size
    return max(on_node / intra, off_node / inter), members < size
