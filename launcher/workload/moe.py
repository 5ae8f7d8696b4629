"""Mixture-of-experts FFN with expert parallelism: Megatron-core's MoELayer with the dropless alltoall dispatcher.

One MoE block replaces the dense MLP of a layer:
- router: a bias-free linear layer h -> E; top-k over the logits, then softmax over those k logits (Megatron's
  default, `--moe-router-pre-softmax` off, score function softmax; Mixtral does the same);
- routed experts: E MLPs of `ffn_hidden` (SwiGLU or GeLU like the model's dense FFN); each token's output is the
  prob-weighted sum of its k experts' outputs;
- optional shared expert (DeepSeek / Qwen-MoE): one more MLP of `shared_ffn_hidden` every token goes through,
  added to the routed output (Megatron's `--moe-shared-expert-intermediate-size`), tensor-parallel like the dense
  MLP;
- load-balancing loss (Switch Transformer, Megatron's `switch_load_balancing_loss_func`, per micro-batch):
      aux = coeff * E / (k * T^2) * sum_e (sum_t p_te) * n_e
  with p the softmax over ALL E logits, n_e the (token, slot) assignments of expert e and T the micro-batch's
  tokens. Like Megatron's MoEAuxLossAutoScaler its gradient is injected in backward (scaled like the main loss),
  and it is not part of the reported lm loss;
- dropless: no capacity, every (token, slot) reaches its expert.

Parallelism (Megatron-core's MoE "parallel folding"): in each pipeline stage the tp x dp ranks (rank i = d*tp + t)
are also an expert mesh (edp, ep, etp), i = e_dp*(ep*etp) + e_ep*etp + e_tp. A rank holds experts
[e_ep*E/ep, (e_ep+1)*E/ep), each split over the etp group by ffn columns (fc1/gate) and rows (fc2). With the
default etp = tp this is classic Megatron: the ep group is carved out of the dp ranks (same tp rank), experts are
tensor-parallel like the dense MLP; etp = 1 keeps experts whole and lets the ep group span tp ranks.

Per micro-batch (x is the full (b, s, h) on every tp rank):
  1. route all tokens (every tp rank the same, so the router needs no tp reduction);
  2. each tp rank keeps its sequence shard of the tokens (what Megatron's sequence parallelism gives it);
  3. permute the (token, slot) pairs by expert; exchange per-expert counts over ep, then the rows
     (`all_to_all_single` with uneven splits: gloo supports it on CPU);
  4. etp > 1: gather the rows of the etp group (an uneven all-gather, done as an all-to-all), run the expert
     shards, reduce-scatter the partial outputs (all-to-all + sum);
  5. all-to-all back, un-permute, weight by the probs, sum the k slots;
  6. all-gather the sequence shards over tp (full output on every tp rank again).
Gradients (grad_sync): expert parameters are summed over the expert-data-parallel group and divided by dp
(Megatron's expert_gradient_scaling_factor = 1/dp), dense ones (router, shared expert) averaged over dp as usual.

Torch + stdlib only (this runs inside the job).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn


@dataclass(frozen=True)
class MoEConfig:
    num_experts: int
    topk: int
    ffn_hidden: int
    """Each routed expert's FFN size (Megatron --moe-ffn-hidden-size)."""
    shared_ffn_hidden: int = 0
    """The shared expert's FFN size; 0: no shared expert (Megatron --moe-shared-expert-intermediate-size)."""
    aux_loss_coeff: float = 0.0
    """Load-balancing loss coefficient (Megatron --moe-aux-loss-coeff, default 0)."""


@dataclass(frozen=True)
class ExpertGroups:
    """One rank's place in the expert mesh and the groups an MoE layer talks over (None: a group of one)."""

    ep: int = 1
    ep_rank: int = 0
    ep_group: Optional[dist.ProcessGroup] = None
    etp: int = 1
    etp_rank: int = 0
    etp_group: Optional[dist.ProcessGroup] = None
    tp: int = 1
    tp_rank: int = 0
    tp_group: Optional[dist.ProcessGroup] = None


LOCAL = ExpertGroups()
"""A single process holding every expert."""


# ------------------------------------------------------------------------------------------------ router, aux loss

def route(logits: torch.Tensor, topk: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(probs, expert ids), each (T, k): top-k of the logits, softmax over those k (Megatron's default)."""
    top_logits, ids = torch.topk(logits, k=topk, dim=-1)
    return torch.softmax(top_logits, dim=-1, dtype=torch.float32), ids


def load_balancing_loss(logits: torch.Tensor, ids: torch.Tensor, num_experts: int, coeff: float) -> torch.Tensor:
    """Switch / Megatron aux loss: coeff * E / (k T^2) * sum_e (sum_t softmax(logits)_te) * n_e (n_e: no gradient)."""
    tokens, topk = ids.shape
    scores = torch.softmax(logits, dim=-1, dtype=torch.float32)
    assigned = torch.bincount(ids.flatten(), minlength=num_experts).to(scores.dtype)
    return (scores.sum(dim=0) * assigned).sum() * (num_experts * coeff / (topk * tokens * tokens))


_AUX_LOSS_SCALE = [1.0]


def set_aux_loss_scale(scale: float) -> None:
    """Gradient of every aux loss in backward: the main loss's scale (fp16 loss scale, 1/microbatches when the loop
    divides the loss itself), as Megatron's MoEAuxLossAutoScaler.set_loss_scale."""
    _AUX_LOSS_SCALE[0] = scale


class _AuxLossScaler(torch.autograd.Function):
    """Identity on the layer output; in backward, also feeds d(aux) = scale, so the aux loss trains the router
    without being added to the reported loss (and crosses pipeline stages with the activation's gradient)."""

    @staticmethod
    def forward(ctx, output: torch.Tensor, aux: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(aux)
        return output

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (aux,) = ctx.saved_tensors
        return grad, torch.full_like(aux, _AUX_LOSS_SCALE[0])


# ------------------------------------------------------------------------------------------------ communication

def _size(group: Optional[dist.ProcessGroup]) -> int:
    return 1 if group is None else dist.get_world_size(group)


class _AllToAll(torch.autograd.Function):
    """all_to_all_single along dim 0 with uneven splits; backward is the reverse exchange."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, out_splits: list[int], in_splits: list[int], group) -> torch.Tensor:
        ctx.splits, ctx.group = (out_splits, in_splits), group
        out = x.new_empty((sum(out_splits), *x.shape[1:]))
        dist.all_to_all_single(out, x.contiguous(), out_splits, in_splits, group=group)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        out_splits, in_splits = ctx.splits
        back = grad.new_empty((sum(in_splits), *grad.shape[1:]))
        dist.all_to_all_single(back, grad.contiguous(), in_splits, out_splits, group=ctx.group)
        return back, None, None, None


def all_to_all(x: torch.Tensor, out_splits: list[int], in_splits: list[int], group) -> torch.Tensor:
    """Rows x[sum(in_splits[:j]) : ...] go to group rank j; the result holds what each rank sent here, in rank order."""
    return x if _size(group) == 1 else _AllToAll.apply(x, out_splits, in_splits, group)


def exchange_counts(counts: torch.Tensor, group) -> torch.Tensor:
    """counts (n, m), row j for group rank j -> (n, m), row j what group rank j had for this rank (the split sizes
    of the next all-to-all, exchanged first as in Megatron's dispatcher)."""
    n = _size(group)
    if n == 1:
        return counts
    out = torch.empty_like(counts)
    dist.all_to_all_single(out, counts.contiguous(), group=group)
    return out


class _SeqSplit(torch.autograd.Function):
    """This tp rank's sequence shard of a tensor every tp rank holds whole; backward all-gathers the shard grads."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, groups: ExpertGroups) -> torch.Tensor:
        ctx.groups = groups
        return x.chunk(groups.tp, dim=1)[groups.tp_rank].contiguous()

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        return _gather_seq(grad, ctx.groups), None


class _SeqGather(torch.autograd.Function):
    """All-gather the tp ranks' sequence shards; backward keeps this rank's shard of the (tp-identical) gradient."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, groups: ExpertGroups) -> torch.Tensor:
        ctx.groups = groups
        return _gather_seq(x, groups)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        g = ctx.groups
        return grad.chunk(g.tp, dim=1)[g.tp_rank].contiguous(), None


def _gather_seq(x: torch.Tensor, groups: ExpertGroups) -> torch.Tensor:
    parts = [torch.empty_like(x) for _ in range(groups.tp)]
    dist.all_gather(parts, x.contiguous(), group=groups.tp_group)
    return torch.cat(parts, dim=1)


# ------------------------------------------------------------------------------------------------ modules

class FFN(nn.Module):
    """The shared expert: the dense MLP's structure (fc1 [+ gate], fc2), so tensor parallelism shards it the same."""

    def __init__(self, hidden: int, ffn_hidden: int, swiglu: bool) -> None:
        super().__init__()
        self.fc1 = nn.Linear(hidden, ffn_hidden, bias=False)
        self.gate = nn.Linear(hidden, ffn_hidden, bias=False) if swiglu else None
        self.fc2 = nn.Linear(ffn_hidden, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.gate is not None:
            return self.fc2(F.silu(self.gate(x)) * self.fc1(x))
        return self.fc2(F.gelu(self.fc1(x)))


class Experts(nn.Module):
    """This rank's routed experts as stacked weights: fc1/gate (E_local, f/etp, h), fc2 (E_local, h, f/etp).

    Run one after another over contiguous row groups (Megatron's SequentialMLP; GroupedMLP does the same math in one
    kernel). Every parameter is tagged `expert_parallel` for the gradient reduction over the expert-dp group."""

    def __init__(self, hidden: int, moe: MoEConfig, swiglu: bool, groups: ExpertGroups) -> None:
        super().__init__()
        self.first = groups.ep_rank * (moe.num_experts // groups.ep)
        self.count, self.etp, self.etp_rank = moe.num_experts // groups.ep, groups.etp, groups.etp_rank
        self.ffn_full = moe.ffn_hidden
        f = moe.ffn_hidden // groups.etp
        self.fc1 = nn.Parameter(torch.empty(self.count, f, hidden))
        self.gate = nn.Parameter(torch.empty(self.count, f, hidden)) if swiglu else None
        self.fc2 = nn.Parameter(torch.empty(self.count, hidden, f))
        for p in self.parameters():
            p.expert_parallel = True
            nn.init.normal_(p, std=0.02)  # usable on its own, like nn.Linear; the model re-draws it (init_from_seed)

    @torch.no_grad()
    def init_from_seed(self, seed: int, device: torch.device, std: float) -> None:
        """Expert e (global index) draws its full fc1, gate, fc2 from its own generator, then this rank keeps its
        etp shard: the weights of expert e are the same whatever ep/etp/tp hold them."""
        f = self.ffn_full // self.etp
        cols = slice(self.etp_rank * f, (self.etp_rank + 1) * f)
        for j in range(self.count):
            gen = torch.Generator(device).manual_seed(expert_seed(seed, self.first + j))
            hidden = self.fc1.shape[-1]
            fc1 = torch.randn(self.ffn_full, hidden, generator=gen, device=device) * std
            gate = torch.randn(self.ffn_full, hidden, generator=gen, device=device) * std if self.gate is not None \
                else None
            fc2 = torch.randn(hidden, self.ffn_full, generator=gen, device=device) * std
            self.fc1[j].copy_(fc1[cols])
            if gate is not None and self.gate is not None:  # the same test (gate exists iff self.gate), spelt for mypy
                self.gate[j].copy_(gate[cols])
            self.fc2[j].copy_(fc2[:, cols])

    def forward(self, rows: torch.Tensor, counts: list[int]) -> torch.Tensor:
        """rows grouped by local expert (counts[j] rows for expert j, in order) -> partial (etp > 1) outputs."""
        outs = []
        for j, part in enumerate(rows.split(counts)):
            h = F.linear(part, self.fc1[j])
            h = F.silu(F.linear(part, self.gate[j])) * h if self.gate is not None else _Gelu.apply(h)
            outs.append(F.linear(h, self.fc2[j]))
        return torch.cat(outs)


class _Gelu(torch.autograd.Function):
    """F.gelu without oneDNN. On CPU torch runs a contiguous fp32 gelu through a oneDNN primitive JIT-compiled per
    shape; an expert's row count changes every micro-batch, so that is a compile per call, and under the CPU
    stand-in's address-space cap (memory.py) a compile that cannot map its code fails with "could not create a
    primitive" instead of the allocator error the sweep classifies as out of memory. Saves only the input, like
    F.gelu."""

    @staticmethod
    def forward(ctx, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        with _no_onednn():
            return torch.ops.aten.gelu(x)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (x,) = ctx.saved_tensors
        with _no_onednn():
            return torch.ops.aten.gelu_backward(grad, x)


class _no_onednn:
    def __enter__(self) -> None:
        self.previous = torch.backends.mkldnn.enabled
        torch.backends.mkldnn.enabled = False

    def __exit__(self, *exc) -> None:
        torch.backends.mkldnn.enabled = self.previous


def expert_seed(layer_seed: int, expert: int) -> int:
    """Seed of one routed expert of a layer (independent of the layout)."""
    return (layer_seed * 1_000_003 + 10**7 + expert) % (2**63 - 1)


class MoE(nn.Module):
    """Router + routed experts (+ shared expert), dropless, with expert parallelism (see the module docstring)."""

    def __init__(self, hidden: int, moe: MoEConfig, swiglu: bool, groups: ExpertGroups = LOCAL) -> None:
        super().__init__()
        self.cfg, self.groups = moe, groups
        self.router = nn.Linear(hidden, moe.num_experts, bias=False)
        self.shared = FFN(hidden, moe.shared_ffn_hidden, swiglu) if moe.shared_ffn_hidden else None
        self.experts = Experts(hidden, moe, swiglu, groups)  # last: its own init, after the layer's generator draws

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        logits = self.router(x.reshape(b * s, h))
        probs, ids = route(logits, self.cfg.topk)
        y = self.routed(x, probs.view(b, s, -1), ids.view(b, s, -1))
        if self.shared is not None:
            y = y + self.shared(x)
        if self.cfg.aux_loss_coeff > 0 and torch.is_grad_enabled():
            aux = load_balancing_loss(logits, ids, self.cfg.num_experts, self.cfg.aux_loss_coeff)
            y = _AuxLossScaler.apply(y, aux)
        return y

    def routed(self, x: torch.Tensor, probs: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """sum_k probs * expert_k(token) for every token of x (b, s, h); probs/ids (b, s, k)."""
        g = self.groups
        if g.tp > 1:  # each tp rank dispatches only its sequence shard (Megatron: the sequence-parallel shard)
            x, probs = _SeqSplit.apply(x, g), _SeqSplit.apply(probs, g)
            ids = ids.chunk(g.tp, dim=1)[g.tp_rank]
        b, s, h = x.shape
        tokens, k = x.reshape(b * s, h), ids.shape[-1]
        experts = ids.reshape(-1)
        # permute: (token, slot) pairs sorted by expert, so each expert's rows (and each ep rank's) are contiguous
        order = torch.argsort(experts, stable=True)
        token_of_row = torch.arange(b * s, device=x.device).repeat_interleave(k)[order]
        rows = tokens.index_select(0, token_of_row)
        counts = torch.bincount(experts, minlength=self.cfg.num_experts)
        out = self.dispatch_compute_combine(rows, counts)
        weighted = out * probs.reshape(-1)[order].unsqueeze(-1).to(out.dtype)
        y = torch.zeros(b * s, h, dtype=weighted.dtype, device=x.device).index_add(0, token_of_row, weighted)
        y = y.view(b, s, h)
        return _SeqGather.apply(y, g) if g.tp > 1 else y

    def dispatch_compute_combine(self, rows: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
        """rows sorted by global expert, counts (E,) -> each row's expert output, in the same order."""
        g, local = self.groups, self.experts.count
        # 1. ep dispatch: counts first (the splits), then the rows
        recv_counts = exchange_counts(counts.view(g.ep, local), g.ep_group)     # (ep sources, local experts)
        send_splits, recv_splits = counts.view(g.ep, local).sum(1).tolist(), recv_counts.sum(1).tolist()
        rows = all_to_all(rows, recv_splits, send_splits, g.ep_group)
        blocks = recv_counts
        # 2. etp > 1: every etp rank needs the rows of the whole etp group (uneven all-gather as an all-to-all)
        mine = rows.shape[0]
        if g.etp > 1:
            blocks = exchange_counts(recv_counts.reshape(1, -1).repeat(g.etp, 1), g.etp_group)  # (etp, ep*local)
            sizes = blocks.sum(1).tolist()
            rows = all_to_all(rows.repeat(g.etp, 1), sizes, [mine] * g.etp, g.etp_group)
            blocks = blocks.view(-1, local)
        # 3. group by local expert (rows arrive in blocks per source, each block sorted by expert), run the experts
        expert_of_row = torch.arange(local, device=rows.device).repeat(blocks.shape[0])
        expert_of_row = expert_of_row.repeat_interleave(blocks.flatten())
        by_expert = torch.argsort(expert_of_row, stable=True)
        out = self.experts(rows.index_select(0, by_expert), blocks.sum(0).tolist())
        out = out.index_select(0, torch.argsort(by_expert))
        # 4. etp > 1: sum the partial outputs, each rank keeping its own rows (reduce-scatter as an all-to-all)
        if g.etp > 1:
            out = all_to_all(out, [mine] * g.etp, sizes, g.etp_group).view(g.etp, mine, out.shape[-1]).sum(0)
        # 5. ep combine: back to the ranks the rows came from
        return all_to_all(out, send_splits, recv_splits, g.ep_group)
