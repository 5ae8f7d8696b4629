"""Predicted memory and throughput of one layout.

`estimate()` combines launcher.plan.memory (peak memory of the most loaded pipeline stage) and
launcher.plan.step_time (iteration time), and reports FLOP rates in both published conventions:
tflops_per_gpu counts recomputation (Narayanan et al. 2021 eq. 3, "hardware" FLOPs), model_tflops_per_gpu does not
(Korthikanti et al. 2022 eq. 7 / Megatron num_floating_point_operations), mfu = model_tflops_per_gpu / peak.

This module must stay light: no torch, submitit, mlflow or hydra here.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from launcher.config.schema import PRECISIONS, ClusterConfig, ModelConfig
from launcher.core.errors import ConfigError
from launcher.core.layout import Layout
from launcher.core.names import is_cpu_standin
from launcher.plan import flops
from launcher.plan.batch_class import batch_class
from launcher.plan.constants import Constants, constants_for
from launcher.plan.hardware import generation
from launcher.plan.memory import peak_memory_gb, uses_flash_attention
from launcher.plan.stack import stack_name
from launcher.plan.step_time import ClassStep, StepPieces, class_step, rates, step_pieces, step_time_at, step_time_s
from launcher.plan.workload import DEFAULT_WORKLOAD, Workload

ESTIMATOR_PRECISIONS = PRECISIONS
"""What estimate() prices: the config's precisions; fp8 is Transformer Engine FP8 GEMMs with bf16 weights, on GPUs
with FP8 tensor cores (elsewhere priced at the 16-bit peak: plans refuse it there, launcher.plan.hardware
.check_precision, but published rows are priced as they ran)."""


@dataclass(frozen=True)
class Estimate:
    peak_mem_gb: float
    headroom: float                       # 1 - peak / capacity (negative: predicted out of memory)
    mem_breakdown_gb: dict[str, float]    # weights, grads, optimizer, gathered, activations, logits, temporaries,
    #                                       fragmentation, context
    step_time_s: float
    tokens_per_s: float
    tflops_per_gpu: float                 # hardware FLOPs, recompute counted (Narayanan eq. 3)
    model_tflops_per_gpu: float           # model FLOPs, no recompute (Korthikanti eq. 7)
    mfu: float                            # model_tflops_per_gpu / peak
    time_breakdown_s: dict[str, float]    # compute, recompute, tp_comm, pp_comm, cp_comm, ep_comm, fixed, dispatch,
    #                                       shard_comm, dp_comm, bubble, optimizer


SharedParts = dict[tuple[Layout, Workload], tuple[float, dict[str, float], StepPieces]]
"""(batch class, workload) -> (peak GB, memory breakdown, step pieces): see estimate's `shared`."""


def estimate(model: ModelConfig, cluster: ClusterConfig, layout: Layout, precision: str = "bf16", *,
             flash_attention: Optional[bool] = None, backend: str = "",
             constants: Optional[Constants] = None, workload: Workload = DEFAULT_WORKLOAD,
             shared: Optional[SharedParts] = None) -> Estimate:
    """Estimate one layout that passed `constraints.check`.

    precision: "bf16" / "fp16" (mixed precision) or "fp32" (the local CPU stand-in; on a GPU the CUDA cores).
    flash_attention: None = assumed for 16-bit training, not for fp32; plans pass backend.flash_attention, and
    False reproduces runs that predate it (2021 Megatron). backend: the software stack whose a-priori constants
    apply (launcher.plan.constants.constants_for; '' = Megatron-LM's). constants: other physical constants, e.g.
    the ones launcher.plan.calibrate fitted to a sweep's measurements (they replace the stack's). workload: the
    stack and the settings the config does not have yet (launcher.plan.workload; the default reproduces a plain
    request of `backend`). shared: what layouts of one batch class have in common (launcher.plan.batch_class),
    kept across the calls of one plan (the same model, cluster, precision, flash attention, backend and constants
    in every call): a 50,000-trial plan prices each class once.
    """
    if precision not in ESTIMATOR_PRECISIONS:
        raise ConfigError("precision", precision, f"use one of {', '.join(ESTIMATOR_PRECISIONS)}")
    flash = uses_flash_attention(precision) if flash_attention is None else flash_attention
    constants = constants or constants_for(stack_name(workload, backend))
    if shared is None:
        peak_gb, mem = peak_memory_gb(model, cluster, layout, precision, flash, constants, workload=workload,
                                      backend=backend)
        step_s, times = step_time_s(model, cluster, layout, precision, flash, constants, workload=workload,
                                    backend=backend)
        return _estimate(model, cluster, layout, peak_gb, mem, step_s, times)
    key = (batch_class(layout), workload)
    parts = shared.get(key)
    if parts is None:
        cpu = is_cpu_standin(cluster.gpu)
        parts = shared[key] = (*peak_memory_gb(model, cluster, key[0], precision, flash, constants,
                                               workload=workload, backend=backend),
                               step_pieces(model, cluster, key[0], precision, flash,
                                           rates(constants, cpu, generation(cluster)), cpu, workload=workload,
                                           backend=backend))
    return of_class(model, cluster, layout, parts, constants)


def of_class(model: ModelConfig, cluster: ClusterConfig, layout: Layout,
             parts: tuple[float, dict[str, float], StepPieces], constants: Constants) -> Estimate:
    """The estimate of `layout` from its batch class's (peak GB, memory breakdown, step pieces)."""
    return of_class_step(model, cluster, layout, parts[0], parts[1],
                         class_step(parts[2], constants, is_cpu_standin(cluster.gpu)))


def of_class_step(model: ModelConfig, cluster: ClusterConfig, layout: Layout, peak_gb: float, mem: dict[str, float],
                  step: ClassStep) -> Estimate:
    """of_class with the class's step time parts computed once (launcher.plan.step_time.class_step: a plan's
    layouts of one class differ only in their micro-batch count). The estimate's memory breakdown is `mem` itself,
    not a copy: the layouts of a class share it (47k copies of ~13k dicts, through the ledger's records, at 50k
    trials: issue 19); nothing changes an estimate's breakdown in place."""
    step_s, times = step_time_at(step, max(1, layout.microbatches))
    return _estimate(model, cluster, layout, peak_gb, mem, step_s, times)


def _estimate(model: ModelConfig, cluster: ClusterConfig, layout: Layout, peak_gb: float, mem: dict[str, float],
              step_s: float, times: dict[str, float]) -> Estimate:
    vocab = flops.padded_vocab(model.vocab, layout.tp)
    per_gpu_s = step_s * layout.gpus * 1e12
    model_flops = flops.model_flops(model, layout.gbs, vocab)  # hardware_flops' first term: computed once
    hw_tflops = (model_flops + flops.recompute_flops(model, layout.gbs, layout.recompute, layout.recompute_every)
                 ) / per_gpu_s
    model_tflops = model_flops / per_gpu_s
    return Estimate(peak_mem_gb=peak_gb, headroom=1.0 - peak_gb / cluster.gpu_mem_gb, mem_breakdown_gb=mem,
                    step_time_s=step_s, tokens_per_s=layout.gbs * model.seq_len / step_s,
                    tflops_per_gpu=hw_tflops, model_tflops_per_gpu=model_tflops,
                    mfu=model_tflops / cluster.peak_tflops, time_breakdown_s=times)
