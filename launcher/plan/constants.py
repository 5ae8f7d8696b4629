"""The estimator's physical constants, in one frozen dataclass that calibration can refit.

`Constants()` holds the a-priori values; each named module constant below says where its value comes from.
`estimate(..., constants=...)` (launcher.plan.estimator) re-predicts any layout with other values, e.g. the ones
launcher.plan.calibrate fits to a sweep's measurements. Only these numbers are ever fitted: never a per-trial
factor.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields, replace

from launcher.core.errors import ConfigError
from launcher.core.names import BackendName
from launcher.plan.fitted import FIELD_FACTORS
from launcher.plan.stack import STACKS, stack_facts

# ---------------------------------------------------------------------------------------------- compute
GEMM_EFF_MAX = 0.76        # large fp16/bf16 GEMMs as run inside training (cuBLAS on A100 measures ~0.8-0.9 alone);
#                            fitted once on Narayanan et al. 2021 Table 1 (tests/plan/test_scaling_table.py)
GEMM_DIM_SCALE = 48.0      # a GEMM dimension of 48 alone would halve the efficiency (same fit)
HBM_EFF = 0.7              # share of HBM bandwidth reached by element-wise kernels (same fit)
FP32_PEAK_SHARE = 67.0 / 989.0
"""fp32 on a GPU runs on the CUDA cores, not the tensor cores (PyTorch leaves TF32 matmuls off by default):
H100 SXM datasheet 67 TFLOP/s fp32 vs 989 dense bf16 (A100: 19.5 vs 312, the same 1/15). The H100 sweep with
backend.precision=fp32 measured 45 TFLOP/s (tests/data/h100_single_gpu_sweeps.csv)."""

# ---------------------------------------------------------------------------------------------- network
NET_EFF = 0.7              # NCCL bus bandwidth / nominal link bandwidth (A100 NVSwitch ~240 of 300 GB/s)
LATENCY_GPU_S = 20e-6      # per collective / p2p call: NCCL ~10-30 us
LATENCY_CPU_S = 200e-6     # gloo on loopback between CPU processes

# ---------------------------------------------------------------------------------------------- fixed costs
# Two kinds, both independent of the tokens: HBM traffic proportional to the parameters per micro-batch, and the CPU
# time that issues a layer's kernels per micro-batch. They depend on the software stack, so there are two sets:
# Megatron (the defaults) and torch autocast (the embedded workload, backend=torch), which the H100 sweeps measured
# (tests/data/h100_single_gpu_sweeps.csv, gpt-1.7b, gbs 8): going from mbs 8 to mbs 1 (1 to 8 micro-batches, the
# same tokens) adds ~16-19 ms per extra micro-batch without recompute (~23 ms with full recompute; ~40 ms for
# gpt-3.6b), and at mbs 1 the step is 8 x 89 ms with selective and 8 x 131 ms with full recompute where the GPU
# work alone takes ~65 and ~83 ms.
MICROBATCH_PARAM_BYTES = 0.0
"""HBM bytes per parameter per micro-batch outside the GEMMs, Megatron: 16-bit weights are used as they are, and
gradient-accumulation fusion (on by default) makes the weight-gradient GEMM accumulate into the fp32 main grad in
its epilogue: 8 B per parameter against 2·tokens FLOPs per parameter, an intensity far above the HBM ridge point,
so hidden behind the GEMM."""
AUTOCAST_PARAM_BYTES = 22.0
"""The same for torch autocast over fp32 master weights: cast the weight to 16 bit (read 4, write 2), the
weight-gradient GEMM writes its 16-bit output (2), autograd widens it (read 2, write 4) and accumulates it into the
fp32 grad (read 4 + 4, write 4) = 22 B, in separate memory-bound kernels. 1.65e9 params x 22 B / (3350 GB/s x
HBM_EFF) = 15.5 ms per micro-batch: the measured slope."""
DEEPSPEED_PARAM_BYTES = 28.0
"""The same for Megatron-DeepSpeed in bf16 with a pipeline: DeepSpeed's PipelineEngine clears the 16-bit grads
before every micro-batch's backward (write 2), autograd accumulates the weight gradient into them (GEMM output 2,
read 2 + 2, write 2), and BF16_Optimizer.update_hp_grads then adds them into the fp32 grads (widen: read 2, write
4; add: read 4 + 4, write 4) = 28 B (deepspeed/runtime/pipe/engine.py _exec_backward_pass, "manually call because
we don't call optimizer.backward()")."""
AUTOCAST_RECOMPUTE_CAST_BYTES = 6.0
"""Full recompute runs the forward again outside the autocast cache: the weights are cast again (read 4, write 2);
the measured slope grows by ~5 ms (4.2 ms predicted)."""
LAYER_DISPATCH_S = 0.7e-3
"""CPU time to issue one transformer layer's forward + backward kernels for one micro-batch, Megatron: ~45 fused
kernels at ~15 us of eager PyTorch dispatch each (an estimate, not a measurement: calibration fits it). On a GPU
the kernels run asynchronously, so a micro-batch takes max(GPU work, CPU dispatch)."""
AUTOCAST_LAYER_DISPATCH_S = 2.5e-3
"""The same for the embedded workload (module calls, autocast, unfused kernels), from the H100 data: at mbs 1 with
selective / full recompute the CPU issues 3.7 / 5.45 ms per layer (89 / 131 ms per micro-batch over 24 layers);
without recompute at most 2.7 ms (GPU-bound there): 2.5 ms + checkpointing + the forward issued again."""
FORWARD_DISPATCH_SHARE = 0.5
"""Share of the layer dispatch spent in the forward (issued again under full recompute), Megatron: ~half of the
kernels."""
AUTOCAST_FORWARD_DISPATCH_SHARE = 0.7
"""Embedded workload: the forward's Python modules dominate (backward runs in the C++ autograd engine); full minus
selective recompute = 5.45 - 3.7 ms = 1.75 ms = 0.7 x 2.5 ms (H100 data)."""
CHECKPOINT_DISPATCH_S = 0.1e-3
"""CPU cost of one activation-checkpoint region per layer and micro-batch, Megatron's light-weight reentrant
CheckpointFunction (an estimate)."""
AUTOCAST_CHECKPOINT_DISPATCH_S = 1.2e-3
"""torch.utils.checkpoint (non-reentrant: saved-tensor hooks, recompute bookkeeping): selective recompute costs
3.7 - 2.5 = 1.2 ms per layer (H100 data)."""

# ---------------------------------------------------------------------------------------------- generations
GEN_EFF = {"volta": 1.0, "ampere": 1.0, "hopper": 1.0, "blackwell": 1.0}
"""GEMM efficiency of a generation relative to Ampere's (the a-priori 1: the same share of the datasheet peak; the fit
moves Hopper and Blackwell, which reach a smaller share of their larger peaks at their power limits)."""
FP8_GEMM_EFF = 0.85
"""Share of the FP8 dense peak an FP8 GEMM reaches relative to what a 16-bit GEMM reaches of the 16-bit peak:
cuBLASLt FP8 GEMMs on H100 run at ~1300-1500 of 1979 TFLOP/s where bf16 runs at ~700-800 of 989 (NVIDIA
Transformer Engine and cuBLAS benchmarks), ~0.85 of the relative efficiency."""

# ---------------------------------------------------------------------------------------------- attention
ATTN_EFF = 0.65
"""Share of the 16-bit peak a flash-attention forward reaches at long sequence (launcher.plan.attention):
FlashAttention-2 reaches up to 73 % of A100's peak (Dao 2023, arXiv 2307.08691 §4.1), FlashAttention-3 630 of
989 TFLOP/s on H100 (head dim 128)."""

# ---------------------------------------------------------------------------------------------- step
STEP_OVERHEAD_S = 0.005
"""Time per iteration outside the micro-batches that nothing overlaps, per level of the job's reduction tree
(log2(2 x GPUs) levels): the optimizer's kernel launches, the gradient-norm, found-inf and loss all-reduces and the
wait for the slowest rank at each, logging, the data loader's hand-off (~10-50 ms in Megatron's timers at a few
hundred GPUs)."""
OVERLAP_INTERFERENCE = 0.1
"""Communication overlapped with compute still slows it: NCCL kernels take SMs and HBM bandwidth (~10 % of the
overlapped communication time, Megatron/FSDP overlap measurements: exposed < overlapped)."""
TP_OVERLAP_INTERFERENCE = 0.1
"""TP communication overlapped with the GEMMs (Transformer Engine userbuffers, StackFacts.tp_comm_overlap) slows
them by the SMs its kernels take: NVIDIA's MLPerf GPT-3 overlap settings (training_results_v4.0 NVIDIA
gpt3/implementations/nemo/conf/tp_overlap/h100tp4mbs1.yaml) give the pipelined reduce-scatter after the attention
projection 24 of H100's 132 SMs (~18 %), the bulk overlaps in the backward 4 SMs (~3 %) and the ring exchanges 1 SM:
~10 % of the overlapped time."""
KERNEL_LAUNCH_S = LAYER_DISPATCH_S / 45.0
"""CPU seconds to issue one kernel from eager PyTorch (~15 us: Megatron's ~45 fused kernels per layer in 0.7 ms);
a stack's dispatch per layer is its kernel count x this (launcher.plan.stack)."""

# ---------------------------------------------------------------------------------------------- memory
GPU_CONTEXT_GB = 1.5       # CUDA context + cuBLAS/NCCL workspaces (~1.5 GB on A100/H100 with a few communicators)
CPU_CONTEXT_GB = 0.0       # CPU stand-in: the capacity is set above the rank's post-init footprint
TRANSIENT_SHARE = 0.10     # backward temporaries (allocated), share of activations + logits + gathered parameters
FRAGMENTATION_SHARE = 0.10
"""Memory the caching allocator reserves but does not hand out (fragmentation, cached free blocks), as a share of
the short-lived memory: what max_memory_reserved adds to max_memory_allocated."""


@dataclass(frozen=True)
class Constants:
    """Every physical constant of the estimator. Frozen and hashable: one object per calibration."""

    gemm_eff_max: float = GEMM_EFF_MAX
    """Share of the dense peak that a very large GEMM reaches (the compute efficiency)."""
    gemm_dim_scale: float = GEMM_DIM_SCALE
    """GEMM size dependence: eff = gemm_eff_max / (1 + scale·(1/m + 1/n + 1/k))."""
    hbm_eff: float = HBM_EFF
    """Share of the HBM bandwidth reached by memory-bound kernels."""
    net_eff: float = NET_EFF
    """Collective bus bandwidth / the cluster's link bandwidth (1.0 when the bandwidths are measured ones)."""
    latency_gpu_s: float = LATENCY_GPU_S
    """Seconds per collective or p2p call on GPUs (NCCL)."""
    latency_cpu_s: float = LATENCY_CPU_S
    """The same on the CPU stand-in (gloo)."""
    microbatch_param_bytes: float = MICROBATCH_PARAM_BYTES
    """HBM bytes per parameter per micro-batch outside the GEMMs (weight casts, gradient accumulation)."""
    recompute_cast_bytes: float = 0.0
    """Extra bytes per parameter per micro-batch under full recompute (weights cast again)."""
    layer_dispatch_s: float = LAYER_DISPATCH_S
    """CPU seconds to issue one layer's forward + backward kernels, per micro-batch."""
    forward_dispatch_share: float = FORWARD_DISPATCH_SHARE
    """Share of layer_dispatch_s issued again by full recompute."""
    checkpoint_dispatch_s: float = CHECKPOINT_DISPATCH_S
    """CPU seconds per activation-checkpoint region (layer) and micro-batch."""
    gen_eff_volta: float = GEN_EFF["volta"]
    gen_eff_hopper: float = GEN_EFF["hopper"]
    """GEMM (and attention) efficiency of Hopper (H100, H200) relative to Ampere."""
    gen_eff_blackwell: float = GEN_EFF["blackwell"]
    """The same for Blackwell (B200, GB200, GB300)."""
    fp8_gemm_eff: float = FP8_GEMM_EFF
    """FP8 GEMM efficiency (of the FP8 peak) relative to the 16-bit one (of the 16-bit peak)."""
    attn_eff: float = ATTN_EFF
    """Flash-attention efficiency ceiling (share of the 16-bit peak, Ampere; generations scale it like GEMMs)."""
    step_overhead_s: float = STEP_OVERHEAD_S
    """Seconds per iteration and reduction-tree level outside the micro-batches (optimizer launches, norm/loss
    reductions, logging)."""
    overlap_interference: float = OVERLAP_INTERFERENCE
    """Share of overlapped communication time that still slows the computation it overlaps."""
    tp_overlap_interference: float = TP_OVERLAP_INTERFERENCE
    """The same for TP communication overlapped with the GEMMs (userbuffers)."""
    gpu_context_gb: float = GPU_CONTEXT_GB
    cpu_context_gb: float = CPU_CONTEXT_GB
    transient_share: float = TRANSIENT_SHARE
    fragmentation_share: float = FRAGMENTATION_SHARE

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if not value >= 0 or (f.name in _POSITIVE and value == 0):
                raise ConfigError(f"constants.{f.name}", value, "use a positive number")

    def to_dict(self) -> dict[str, float]:
        """Field -> value, e.g. to record a calibration in the ledger or MLflow."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    def with_values(self, **values: float) -> Constants:
        return replace(self, **values)

    def gen_eff(self, generation: str) -> float:
        """GEMM efficiency multiplier of a GPU generation (launcher.plan.hardware.GENERATIONS)."""
        return {"volta": self.gen_eff_volta, "hopper": self.gen_eff_hopper,
                "blackwell": self.gen_eff_blackwell}.get(generation, 1.0)


_POSITIVE = ("gemm_eff_max", "hbm_eff", "net_eff", "gen_eff_volta", "gen_eff_hopper", "gen_eff_blackwell",
             "fp8_gemm_eff", "attn_eff")
PRIOR = Constants()
"""The a-priori physical values (datasheets, kernel benchmarks, counts), before any fit: the prior of the corpus fit
(launcher.plan.fit) and of a sweep's calibration."""


def prior_for(stack: str) -> Constants:
    """A stack's a-priori constants: the global physical values with the stack's counts (launcher.plan.stack) in
    the per-stack fields (bytes per parameter per micro-batch, kernels per layer x KERNEL_LAUNCH_S)."""
    f = stack_facts(stack)
    return PRIOR.with_values(microbatch_param_bytes=f.microbatch_param_bytes,
                             recompute_cast_bytes=f.recompute_cast_bytes,
                             layer_dispatch_s=f.kernels_per_layer * KERNEL_LAUNCH_S,
                             forward_dispatch_share=f.forward_kernel_share,
                             checkpoint_dispatch_s=f.checkpoint_kernels * KERNEL_LAUNCH_S)


def fitted(prior: Constants) -> Constants:
    """`prior` moved by the multipliers fitted on the published corpus (launcher/plan/fitted.py, written by
    `python -m launcher.plan.fit --write`): value = (prior + offset) x multiplier - offset per fitted field."""
    values = {}
    for name, (offset, factor) in FIELD_FACTORS.items():
        values[name] = max(0.0, (getattr(prior, name) + offset) * factor - offset)
    return prior.with_values(**values)


_BACKEND_STACK: dict[str, str] = {BackendName.torch: "parasweep_workload", BackendName.megatron_lm: "megatron_lm",
                                  "": "megatron_lm"}


def constants_for(backend: BackendName | str) -> Constants:
    """The a-priori constants of a backend's or a stack's software stack (launcher.plan.stack; they differ in how
    mixed precision moves weights and gradients per micro-batch and in how many kernels a layer issues), fitted on
    the published corpus; an unknown or empty name gets Megatron-LM's. One object per stack."""
    name = _BACKEND_STACK.get(backend, backend)
    return _stack_constants(name if name in STACKS else "megatron_lm")


@functools.cache
def _stack_constants(stack: str) -> Constants:
    return fitted(prior_for(stack))


DEFAULT = constants_for("megatron_lm")
"""Megatron-LM, and requests that name no backend (published runs are mostly Megatron-LM runs)."""
TORCH_AUTOCAST = constants_for("torch")
"""The embedded workload (backend=torch): autocast over fp32 master weights."""
MEGATRON_DEEPSPEED = constants_for("megatron_deepspeed")
"""Megatron-DeepSpeed (backend=megatron_deepspeed): DeepSpeed's optimizer accumulates the gradients itself."""
