"""Split the GPT over a (pp, dp, tp) DeviceMesh: pipeline stages, then TP -> activation checkpointing -> FSDP.

The apply order is torchtitan's (parallelize_llama): tensor parallelism first (it swaps parameters for DTensors),
then activation checkpointing (it wraps whole blocks, whose TP hooks stay inside), then FSDP2 last (it shards
what is already TP-sharded, giving 2D parameters). Data parallelism without FSDP (ZeRO 0/1) is done on the
gradients after backward by `grad_sync.py`, not by DDP: DDP + pipelining gives wrong results.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
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


def init_mesh(plan: Plan, device_type: str) -> DeviceMesh:
    """Rank order (pp, dp, tp): tp neighbours are adjacent ranks (same node first), as in Megatron."""
    return init_device_mesh(device_type, (plan.pp, plan.dp, plan.tp), mesh_dim_names=("pp", "dp", "tp"))


def stage_indices(plan: Plan, pp_rank: int) -> list[int]:
    """Virtual stages of one pipeline rank: loop placement (stage k on rank k mod pp), ScheduleInterleaved1F1B's."""
    return [pp_rank + chunk * plan.pp for chunk in range(plan.vpp)]


def build_stage_models(cfg: GPTConfig, plan: Plan, mesh: DeviceMesh, seed: int,
                       device: torch.device) -> list[tuple[int, StageModel]]:
    """Build, parallelise and place this rank's model chunks: [(stage index, module)] (one chunk unless vpp > 1)."""
    n_stages = plan.pp * plan.vpp
    tp_mesh, sp = mesh["tp"], plan.sequence_parallel
    shard_block = (lambda block: apply_tp_block(block, tp_mesh, sp)) if plan.tp > 1 else None
    chunks = []
    for stage in stage_indices(plan, mesh.get_local_rank("pp")):
        layers = stage_layer_ids(cfg.layers, n_stages, stage)
        module = StageModel(cfg, layers, has_embedding=stage == 0, has_head=stage == n_stages - 1, seed=seed,
                            device=device, on_block=shard_block)
        if plan.tp > 1:
            apply_tp_ends(module, tp_mesh, sp)
        apply_recompute(module, plan.recompute)
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
            "attn.o": RowwiseParallel(output_layouts=block_out),
            "mlp.fc1": ColwiseParallel(), "mlp.fc2": RowwiseParallel(output_layouts=block_out)}
    if block.mlp.gate is not None:
        plan["mlp.gate"] = ColwiseParallel()
    if sp:
        gather = PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),))
        plan.update({"norm1": SequenceParallel(), "attn": gather, "norm2": SequenceParallel(), "mlp": gather})
    return parallelize_module(block, tp_mesh, plan)


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


def apply_recompute(module: StageModel, mode: str) -> None:
    """full: checkpoint every block (keep only its input); selective: checkpoint only the attention core."""
    if mode == "selective":
        for block in module.layers.values():
            block.attn.recompute_core = True
    elif mode == "full":
        from torch.distributed.algorithms._checkpoint.checkpoint_wrapper import CheckpointImpl, checkpoint_wrapper

        for name in list(module.layers.keys()):
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
