"""What happens to gradients between backward and the optimizer step, when FSDP does not do it.

- ZeRO-0/1: one explicit all-reduce of all local gradients on the dp sub-mesh (flattened: one collective per step).
- Tied embeddings split over pipeline stages: the first and the last stage each hold a copy; their gradients are
  summed on a two-rank group per (dp, tp) coordinate, as Megatron's "embedding group" does.
- ZeRO-1 (optimizer-state sharding, Rajbhandari et al. 2020 P_os): each dp rank keeps Adam state for, and
  updates, only the parameters it owns, then broadcasts them. Ownership is by whole parameters, greedily by
  size (as torch's ZeroRedundancyOptimizer), not Megatron's even split of a flat buffer.
- MoE routed experts (parameters tagged `expert_parallel`): each holds the sum of what the tokens of several dp
  ranks contributed, so their gradients are SUMMED over the expert-data-parallel group (ranks with the same expert
  shard) and divided by dp, Megatron's expert_gradient_scaling_factor = 1/dp; under ZeRO-1 their optimizer state
  is sharded over that group, as Megatron's distributed optimizer does.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import nn
from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors
from torch.distributed.device_mesh import DeviceMesh


def local(t: torch.Tensor) -> torch.Tensor:
    """The rank-local storage of a (possibly DTensor) parameter or gradient; in-place writes reach the original."""
    return t.to_local() if hasattr(t, "to_local") else t


@torch.no_grad()
def all_reduce_(tensors: list[torch.Tensor], group: dist.ProcessGroup, divide_by: int = 1) -> None:
    """Sum (then divide) a list of tensors over `group` with ONE flattened collective."""
    if not tensors:
        return
    flat = _flatten_dense_tensors(tensors)
    dist.all_reduce(flat, group=group)
    if divide_by != 1:
        flat.div_(divide_by)
    for t, synced in zip(tensors, _unflatten_dense_tensors(flat, tensors)):
        t.copy_(synced)


def local_grads(params: list[nn.Parameter]) -> list[torch.Tensor]:
    return [local(p.grad) for p in params if p.grad is not None]


def split_experts(params: list[nn.Parameter]) -> tuple[list[nn.Parameter], list[nn.Parameter]]:
    """(dense parameters, routed-expert parameters)."""
    experts = [p for p in params if getattr(p, "expert_parallel", False)]
    ids = {id(p) for p in experts}
    return [p for p in params if id(p) not in ids], experts


@torch.no_grad()
def reduce_expert_grads(grads: list[torch.Tensor], edp_group: dist.ProcessGroup | None, dp: int) -> None:
    """Sum over the expert-dp group (None: a group of one), divide by dp."""
    if edp_group is not None:
        all_reduce_(grads, edp_group, dp)
    elif dp != 1:
        for g in grads:
            g.div_(dp)


@torch.no_grad()
def match_grad_placements(params: list[nn.Parameter]) -> None:
    """Give every DTensor gradient its parameter's placement. DTensor can leave a gradient laid out differently
    (the vocab-sharded embedding's comes back Replicate, full size; a norm's under sequence parallelism can be
    Partial); flat collectives on local shards need both copies of a tensor to have the same shape."""
    for p in params:
        g = p.grad
        if g is not None and hasattr(g, "placements") and g.placements != p.placements:
            p.grad = g.redistribute(p.device_mesh, p.placements)


def tied_group(mesh: DeviceMesh) -> dist.ProcessGroup | None:
    """Two-rank groups {first stage, last stage} for every (dp, tp) coordinate; this rank's group (or None).

    Every rank must create every group (a collective call), in the same order."""
    ranks = mesh.mesh  # (pp, dp, tp) tensor of global ranks
    mine = None
    for d in range(ranks.shape[1]):
        for t in range(ranks.shape[2]):
            pair = [int(ranks[0, d, t]), int(ranks[-1, d, t])]
            group = dist.new_group(pair)
            if dist.get_rank() in pair:
                mine = group
    return mine


def tied_params(chunks: list[tuple[int, nn.Module]], n_stages: int) -> list[nn.Parameter]:
    """This rank's copies of a tied embedding held apart from their twin (pp > 1); [] otherwise."""
    found = []
    for stage, module in chunks:
        if stage == 0 and module.head is None and module.cfg.tied_embeddings:
            found.append(module.emb.tok.weight)
        if stage == n_stages - 1 and module.emb is None and module.cfg.tied_embeddings:
            found.append(module.head.weight)
    return found


def make_optimizer(name: str, params: list[nn.Parameter], lr: float) -> torch.optim.Optimizer:
    """AdamW (betas 0.9/0.95 as GPT-3/Megatron), or plain SGD: Adam is blind to a uniform gradient scale, so the
    layout-equivalence tests use SGD to catch a wrong averaging factor."""
    if name == "sgd":
        return torch.optim.SGD(params, lr=lr)
    return torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.95), weight_decay=0.0)


class ShardedOptimizer:
    """ZeRO-1: an optimizer whose state lives only on the parameter's owner in the dp group."""

    def __init__(self, name: str, params: list[nn.Parameter], lr: float, dp_group: dist.ProcessGroup) -> None:
        self.params, self.group = params, dp_group
        self.dp, self.rank = dist.get_world_size(dp_group), dist.get_rank(dp_group)
        self.owner = _partition([local(p).numel() for p in params], self.dp)
        owned = [p for p, o in zip(params, self.owner) if o == self.rank]
        self.inner = make_optimizer(name, owned, lr) if owned else None

    def step(self) -> None:
        if self.inner is not None:
            self.inner.step()
        with torch.no_grad():
            for owner in range(self.dp):
                tensors = [local(p) for p, o in zip(self.params, self.owner) if o == owner]
                if not tensors:
                    continue
                flat = _flatten_dense_tensors(tensors)
                dist.broadcast(flat, group=self.group, group_src=owner)
                if owner != self.rank:
                    for t, new in zip(tensors, _unflatten_dense_tensors(flat, tensors)):
                        t.copy_(new)

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.params:
            p.grad = None

    def state_numel(self) -> int:
        """Elements of optimizer state held here (for tests: about 2/dp of the parameters)."""
        if self.inner is None:
            return 0
        return sum(local(v).numel() for s in self.inner.state.values() for v in s.values() if v.dim() > 0)


class Optimizers:
    """Several optimizers stepped as one (ZeRO-1 with MoE: dense state sharded over dp, expert state over edp)."""

    def __init__(self, *parts) -> None:
        self.parts = [p for p in parts if p is not None]

    def step(self) -> None:
        for p in self.parts:
            p.step()

    def zero_grad(self, set_to_none: bool = True) -> None:
        for p in self.parts:
            p.zero_grad(set_to_none=set_to_none)


def _partition(sizes: list[int], n: int) -> list[int]:
    """Owner of each item: largest first onto the least-loaded rank (deterministic: ties go to the lower rank)."""
    load, owner = [0] * n, [0] * len(sizes)
    for i in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        r = min(range(n), key=lambda r: (load[r], r))
        owner[i], load[r] = r, load[r] + sizes[i]
    return owner


class LossScaler:
    """Dynamic loss scaling for fp16 (Micikevicius et al. 2018): skip the step and halve the scale on inf/nan,
    double it after `growth_interval` clean steps. Disabled (scale 1) for fp32/bf16."""

    def __init__(self, enabled: bool, init_scale: float = 2.0**16, growth_interval: int = 1000) -> None:
        self.enabled, self.scale, self.growth_interval, self.clean_steps = enabled, 1.0, growth_interval, 0
        if enabled:
            self.scale = init_scale

    def unscale_and_check(self, grads: list[torch.Tensor], device: torch.device) -> bool:
        """Unscale gradients in place; True if they are finite on every rank (a world-wide MAX reduction)."""
        if not self.enabled:
            return True
        bad = torch.zeros(1, device=device)
        for g in grads:
            g.mul_(1.0 / self.scale)
            bad = torch.maximum(bad, (~torch.isfinite(g)).any().float().reshape(1))
        dist.all_reduce(bad, op=dist.ReduceOp.MAX)
        finite = bool(bad.item() == 0)
        self.clean_steps = self.clean_steps + 1 if finite else 0
        if not finite:
            self.scale /= 2
        elif self.clean_steps % self.growth_interval == 0:
            self.scale *= 2
        return finite
