"""What the estimator is told about a configured sweep beyond its Layout: the software stack the configured program
runs and the Workload settings that follow from the config.

One function each for the planner, the search's calibration (launcher.run.search), the network probe's constants
and the report, so that a plan's estimate and the calibration's features are made from the same inputs:
- the stack (launcher.plan.stack): the backend's, and Megatron-LM without Transformer Engine
  (backend.megatron.transformer_impl=local: no fused kernels, no gradient-accumulation fusion) is `megatron_local`;
- FSDP: the embedded workload shards ZeRO-2/3 with FSDP2 (launcher/workload/parallelize.py apply_fsdp:
  fully_shard per block, reshard_after_forward = zero_stage == 3): ZeRO-3 is `fsdp2` (parameters gathered again
  for the backward), ZeRO-2 FSDP2's SHARD_GRAD_OP equivalent (gathered once per micro-batch). Megatron-LM refuses
  ZeRO-2/3 and Megatron-DeepSpeed runs DeepSpeed's ZeRO, which the estimator's zero_stage already describes.
"""

from __future__ import annotations

import functools

from launcher.config.schema import BackendConfig
from launcher.core.layout import Layout
from launcher.core.names import BackendName
from launcher.plan.constants import Constants, constants_for
from launcher.plan.stack import stack_name
from launcher.plan.workload import DEFAULT_WORKLOAD, Workload


def stack_of(backend: BackendConfig) -> str:
    """The software stack a configured backend runs (launcher.plan.stack.STACKS)."""
    name = BackendName(backend.name)
    if name is BackendName.megatron_lm and backend.megatron.transformer_impl == "local":
        return "megatron_local"
    return stack_name(DEFAULT_WORKLOAD, name.value)


def workload_for(backend: BackendConfig, layout: Layout) -> Workload:
    """The estimator's Workload for one layout of a configured sweep (one object per stack and ZeRO stage)."""
    return _workload(stack_of(backend), BackendName(backend.name) is BackendName.torch, layout.zero_stage)


@functools.cache
def _workload(stack: str, fsdp2: bool, zero_stage: int) -> Workload:
    if fsdp2 and zero_stage >= 2:
        return Workload(stack=stack, fsdp="fsdp2" if zero_stage == 3 else "shard_grad_op")
    return Workload(stack=stack)


def constants_of(backend: BackendConfig) -> Constants:
    """The a-priori constants of the configured backend's stack (launcher.plan.constants.constants_for)."""
    return constants_for(stack_of(backend))
