"""Split the GPT over a (pp, dp, tp) DeviceMesh: pipeline stages, then TP -> activation checkpointing -> FSDP.

The apply order is torchtitan's (parallelize_llama): tensor parallelism first (it swaps parameters for DTensors),
then activation checkpointing (it wraps whole blocks, whose TP hooks stay inside), then FSDP2 last (it shards
what is already TP-sharded, giving 2D parameters). Data parallelism without FSDP (ZeRO 0/1) is done on the
gradients after backward by `grad_sync.py`, not by DDP: DDP + pipelining gives wrong results.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh, init_device_mesh
from torch.distributed.tensor import Replicate, Shard, distribute_tensor
from torch.distributed.tensor.parallel import (
    ColwiseParallel,
    PrepareModuleInput,
    PrepareModuleOutput,
    RowwiseParallel,
    SequenceParallel,
    parallelize_module,
)

from launcher.workload.model import GPTConfig, StageModel, stage_layer_ids
from launcher.workload.moe import LOCAL, ExpertGroups


@dataclass(frozen=True)
class Plan:
    """The layout to apply (validated by the argument parser)."""

    tp: int
    pp: int
    dp: int
    vpp: int
    microbatches: int
    recompute: str
    sequence_parallel: bool
    zero_stage: int
    recompute_every: int = 1
    """With recompute full: 1/k of each chunk's layers are checkpointed, the first ones (Megatron's block method)."""
    ep: int = 1
    """Expert parallelism (MoE models): ranks that split the routed experts."""
    etp: int = 1
    """Expert tensor parallelism: ranks that split each routed expert's FFN (Megatron's default: = tp)."""

    @property
    def edp(self) -> int:
        """Expert data parallelism: ranks of a pipeline stage holding the same expert shard (Megatron:
        world / (etp * ep * pp))."""
        return self.tp * self.dp // (self.ep * self.etp)


def init_mesh(plan: Plan, device_type: str) -> DeviceMesh:
    """Rank order (pp, dp, tp): tp neighbours are adjacent ranks (same node first), as in Megatron."""
    return init_device_mesh(device_type, (plan.pp, plan.dp, plan.tp), mesh_dim_names=("pp", "dp", "tp"))


def stage_indices(plan: Plan, pp_rank: int) -> list[int]:
    """Virtual stages of one pipeline rank: loop placement (stage k on rank k mod pp), ScheduleInterleaved1F1B's."""
    return [pp_rank + chunk * plan.pp for chunk in range(plan.vpp)]


@dataclass(frozen=True)
class ExpertMesh:
    """This rank's expert groups (for the MoE layers) and its expert-data-parallel group (for the gradients)."""

    groups: ExpertGroups
    edp_group: dist.ProcessGroup | None
    """Ranks holding the same expert shard; None when there is one (edp = 1)."""


def init_expert_mesh(plan: Plan, mesh: DeviceMesh) -> ExpertMesh:
    """Megatron-core's expert mesh ("parallel folding"): the tp x dp ranks of each pipeline stage, in the dense order
    (i = d*tp + t), are re-read as (edp, ep, etp) with etp fastest. With etp = tp (Megatron's default) the ep group
    is carved out of the dp ranks of one tp rank (classic Megatron EP); with etp = 1 it may span tp ranks.

    Every rank creates every group (new_group is collective), in the same order."""
    pp_rank = mesh.get_local_rank("pp")
    me = dist.get_rank()
    found: dict[str, tuple[int, dist.ProcessGroup | None]] = {}
    for p in range(plan.pp):
        grid = mesh.mesh[p].reshape(plan.edp, plan.ep, plan.etp)  # global ranks
        lists = {"ep": [grid[a, :, c] for a in range(plan.edp) for c in range(plan.etp)],
                 "etp": [grid[a, b, :] for a in range(plan.edp) for b in range(plan.ep)],
                 "edp": [grid[:, b, c] for b in range(plan.ep) for c in range(plan.etp)]}
        for name, groups in lists.items():
            for row in groups:
                ranks = [int(r) for r in row]
                group = dist.new_group(ranks) if len(ranks) > 1 else None
                if p == pp_rank and me in ranks:
                    found[name] = (ranks.index(me), group)
    tp_group = mesh.get_group("tp") if plan.tp > 1 else None
    groups = ExpertGroups(ep=plan.ep, ep_rank=found["ep"][0], ep_group=found["ep"][1],
                          etp=plan.etp, etp_rank=found["etp"][0], etp_group=found["etp"][1],
                          tp=plan.tp, tp_rank=mesh.get_local_rank("tp"), tp_group=tp_group)
    return ExpertMesh(groups, found["edp"][1])


def build_stage_models(cfg: GPTConfig, plan: Plan, mesh: DeviceMesh, seed: int, device: torch.device,
                       experts: ExpertGroups = LOCAL) -> list[tuple[int, StageModel]]:
    """Build, parallelise and place this rank's model chunks: [(stage index, module)] (one chunk unless vpp > 1)."""
    n_stages = plan.pp * plan.vpp
    tp_mesh, sp = mesh["tp"], plan.sequence_parallel
    shard_block = (lambda block: apply_tp_block(block, tp_mesh, sp)) if plan.tp > 1 else None
    chunks = []
    for stage in stage_indices(plan, mesh.get_local_rank("pp")):
        layers = stage_layer_ids(cfg.layers, n_stages, stage)
        module = StageModel(cfg, layers, has_embedding=stage == 0, has_head=stage == n_stages - 1, seed=seed,
                            device=device, on_block=shard_block, experts=experts)
        if plan.tp > 1:
            apply_tp_ends(module, tp_mesh, sp)
        apply_recompute(module, plan.recompute, plan.recompute_every)
        if plan.zero_stage >= 2:
            apply_fsdp(module, mesh["dp"], reshard_after_forward=plan.zero_stage == 3)
        chunks.append((stage, module))
    return chunks


def apply_tp_block(block: nn.Module, tp_mesh: DeviceMesh, sp: bool) -> nn.Module:
    """Megatron tensor parallelism with DTensor (Shoeybi et al. 2019; + sequence parallelism, Korthikanti 2022).

    q/k/v/fc1/gate are column-parallel, o/fc2 row-parallel (one all-reduce each in forward and backward). With
    sequence parallelism the norms run on a sequence shard and the all-reduces become reduce-scatter +
    all-gather pairs; the block's input and output are then sequence shards.
    """
    block_out = Shard(1) if sp else Replicate()
    plan = {"attn.q": ColwiseParallel(), "attn.k": ColwiseParallel(), "attn.v": ColwiseParallel(),
            "attn.o": RowwiseParallel(output_layouts=block_out)}
    if hasattr(block.mlp, "router"):
        plan.update(_moe_tp_plan(block.mlp))
    else:
        plan.update({"mlp.fc1": ColwiseParallel(), "mlp.fc2": RowwiseParallel(output_layouts=block_out)})
        if block.mlp.gate is not None:
            plan["mlp.gate"] = ColwiseParallel()
    if sp:
        gather = PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),))
        plan.update({"norm1": SequenceParallel(), "attn": gather, "norm2": SequenceParallel()})
        if not hasattr(block.mlp, "router"):
            plan["mlp"] = gather
    block = parallelize_module(block, tp_mesh, plan)
    if sp and hasattr(block.mlp, "router"):
        # the MoE layer works on the whole sequence on every tp rank (its router sees every token; the experts
        # take each rank's sequence shard themselves) and gives back this rank's shard of the output
        parallelize_module(block.mlp, tp_mesh, PrepareModuleInput(
            input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),), use_local_output=True))
        parallelize_module(block.mlp, tp_mesh, PrepareModuleOutput(
            output_layouts=Replicate(), desired_output_layouts=Shard(1), use_local_output=True))
    return block


def _moe_tp_plan(moe: nn.Module) -> dict:
    """Under tp the MoE layer's input and output are whole (replicated) plain tensors: the router is replicated,
    the routed experts split themselves (etp), and the shared expert is a tensor-parallel MLP whose output is
    all-reduced (RowwiseParallel to Replicate)."""
    if moe.shared is None:
        return {}
    plan = {"mlp.shared.fc1": ColwiseParallel(), "mlp.shared.fc2": RowwiseParallel(output_layouts=Replicate())}
    if moe.shared.gate is not None:
        plan["mlp.shared.gate"] = ColwiseParallel()
    return plan


def apply_tp_ends(module: StageModel, tp_mesh: DeviceMesh, sp: bool) -> None:
    """Vocabulary-parallel token embedding and output layer (weights split by vocabulary rows, Shard(0))."""
    if module.emb is not None:
        plan = {"tok": RowwiseParallel(input_layouts=Replicate(), output_layouts=Replicate())}
        parallelize_module(module.emb, tp_mesh, plan)
        if sp:  # positions are added on the full sequence, then each tp rank keeps its sequence shard
            parallelize_module(module.emb, tp_mesh, PrepareModuleOutput(
                output_layouts=Replicate(), desired_output_layouts=Shard(1), use_local_output=True))
    if module.head is not None:
        if sp:
            parallelize_module(module.head.norm, tp_mesh, SequenceParallel())
        if module.head.weight is not None:
            module.head.weight = nn.Parameter(distribute_tensor(module.head.weight.data, tp_mesh, [Shard(0)]))


def apply_recompute(module: StageModel, mode: str, every: int = 1) -> None:
    """full: checkpoint every block (keep only its input), or with `every` = k > 1 the first 1/k of the chunk's
    blocks (Megatron's block method: --recompute-method block --recompute-num-layers N); selective: checkpoint only
    the attention core."""
    if mode == "selective":
        for block in module.layers.values():
            block.attn.recompute_core = True
    elif mode == "full":
        from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, checkpoint_wrapper

        names = list(module.layers.keys())
        for name in names[: len(names) // every]:
            module.layers[name] = checkpoint_wrapper(module.layers[name], checkpoint_impl=CheckpointImpl.NO_REENTRANT)


def apply_fsdp(module: StageModel, dp_mesh: DeviceMesh, reshard_after_forward: bool) -> None:
    """FSDP2, one unit per block plus the stage root (embedding, head). ZeRO-2: keep parameters gathered between
    forward and backward (reshard_after_forward=False); ZeRO-3: free them after forward and gather again."""
    from torch.distributed.fsdp import fully_shard

    for block in module.layers.values():
        fully_shard(block, mesh=dp_mesh, reshard_after_forward=reshard_after_forward)
    fully_shard(module, mesh=dp_mesh, reshard_after_forward=reshard_after_forward)


def build_schedule(chunks: list[tuple[int, StageModel]], plan: Plan, mesh: DeviceMesh, loss_fn,
                   device: torch.device):
    """Schedule1F1B (one chunk per rank) or ScheduleInterleaved1F1B (vpp chunks per rank, Narayanan 2021 sec. 2.2)."""
    from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleInterleaved1F1B

    n_stages = plan.pp * plan.vpp
    group = mesh.get_group("pp")
    stages = [PipelineStage(module, index, n_stages, device, group=group) for index, module in chunks]
    if plan.vpp == 1:
        return Schedule1F1B(stages[0], n_microbatches=plan.microbatches, loss_fn=loss_fn)
    return ScheduleInterleaved1F1B(stages, n_microbatches=plan.microbatches, loss_fn=loss_fn)
