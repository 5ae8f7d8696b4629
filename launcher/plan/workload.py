"""How a trial runs beyond its Layout: the software stack and the settings the config does not have yet.

`Workload()` (every field at its default) reproduces the estimator as the planner calls it today: the stack follows
the backend (`estimate(..., backend=...)`), FSDP is off, nothing is offloaded or compiled (which layers are
recomputed is the Layout's: Layout.recompute and Layout.recompute_every). Published runs (launcher.plan.corpus) fill
it in; wiring a field into the config and the Layout later is a matter of passing it here (see the list in
launcher/plan/stack.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from launcher.core.errors import ConfigError

FSDP_MODES = ("", "full_shard", "hybrid_shard", "shard_grad_op", "fsdp2")
"""'' = no FSDP (ZeRO by Layout.zero_stage); full_shard = FSDP1 FULL_SHARD (ZeRO-3 over the whole dp group);
hybrid_shard = FSDP1 HYBRID_SHARD / HSDP (ZeRO-3 inside a node, replicas across nodes); shard_grad_op = FSDP1
SHARD_GRAD_OP (ZeRO-2-like: parameters stay gathered from forward to backward); fsdp2 = torch fully_shard (per-
parameter DTensor sharding, ZeRO-3 over the dp group)."""


@dataclass(frozen=True)
class Workload:
    """What the estimator needs to know about a run that the Layout does not say."""

    stack: str = ""
    """Software stack (launcher.plan.stack.STACKS): '' = the backend's (megatron_lm for '' and megatron_lm,
    parasweep_workload for backend torch, megatron_deepspeed)."""
    fsdp: str = ""
    """FSDP sharding mode (FSDP_MODES); with it, Layout.zero_stage is 3 (2 for shard_grad_op)."""
    reshard_after_forward: Optional[bool] = None
    """FSDP frees gathered parameters after the forward (and gathers them again for the backward). None: the
    mode's default (True for full_shard/hybrid_shard/fsdp2, False for shard_grad_op)."""
    offload: bool = False
    """Activations checkpointed to host memory (the layer inputs leave the GPU; the transfer overlaps compute)."""
    torch_compile: bool = False
    """torch.compile fuses the element-wise kernels of PyTorch stacks (norms, activations, residual adds, rotary)."""
    attention_kernel: str = ""
    """Flash-attention kernel family when it is not the stack's usual one (launcher.plan.attention.kernel_factor):
    'fa2', 'fa3' (FlashAttention-3 / cuDNN / Transformer Engine) or 'triton'; '' = the stack's."""
    grad_accum_sync: Optional[bool] = None
    """FSDP/ZeRO-2/3 reduce gradients after every micro-batch (True) or keep unsharded gradients and reduce once per
    step (False: FSDP1 no_sync, FSDP2 set_requires_gradient_sync(False)). None: the stack's default."""
    network_step_s: float = 0.0
    """Seconds one step of a ring collective takes across the cluster's network beyond its bytes, as the cluster's
    own network measurement gives it (launcher.plan.step_time.collective_time_s; the Ultra-Scale Playbook's EFA
    cluster: 43.5 us, launcher.plan.corpus.SOURCE_NETWORK_STEP_S). 0: not measured, only the fitted per-call
    latency (constants.latency_gpu_s) is counted."""

    def __post_init__(self) -> None:
        if self.fsdp not in FSDP_MODES:
            raise ConfigError("workload.fsdp", self.fsdp, f"use one of {', '.join(repr(m) for m in FSDP_MODES)}")
        if self.network_step_s < 0:
            raise ConfigError("workload.network_step_s", self.network_step_s, "a duration in seconds, >= 0")
        if self.attention_kernel not in ("", "fa2", "fa3", "triton"):
            raise ConfigError("workload.attention_kernel", self.attention_kernel, "use '', 'fa2', 'fa3' or 'triton'")

    @property
    def resharded(self) -> bool:
        """Parameters are freed after the forward and gathered again for the backward."""
        if self.reshard_after_forward is not None:
            return self.reshard_after_forward
        return self.fsdp != "shard_grad_op"


DEFAULT_WORKLOAD = Workload()
