"""What a software stack does differently, as counts the estimator multiplies by its global rates.

The physical constants (GEMM and HBM efficiency, network efficiency, the CPU cost of one kernel launch, ...) are the
same for every stack and are fitted on the whole corpus (launcher.plan.fit). What differs between Megatron-LM,
DeepSpeed, PyTorch FSDP, torchtitan or nanotron is *how much* work each does, and that is read from their code, not
fitted: the bytes each keeps per parameter and which of them ZeRO/FSDP shards, the bytes of the gradient reduction
and of a parameter all-gather, whether the element-wise kernels are fused, how many kernels the CPU issues per
layer, the buffers around the loss. `StackFacts` holds these counts; `stack_facts(name)` finds a stack by the
names of launcher.plan.corpus (tests/data/published) and of the backends.

Sources (read in the code of each stack):
- Megatron-LM / NeMo (Megatron-Core + Transformer Engine): docs/user-guide/features/dist_optimizer.md (18 B/param
  bf16 with fp32 main grads, 6 + 12/d with the distributed optimizer); gradient-accumulation fusion (the wgrad GEMM
  accumulates into the fp32 main grad: no extra pass); --overlap-param-gather (the distributed optimizer's
  all-gather hides behind the next forward); fused LayerNorm/RMSNorm, SwiGLU, rotary and bias-dropout-add kernels;
  vocab-parallel cross-entropy in fp32 (bf16 logits 2 B + their fp32 copy 4 B, the softmax kept in place).
- Megatron-DeepSpeed (bf16, ZeRO-1): deepspeed/runtime/bf16_optimizer.py keeps bf16 .grad (2 B) and a full fp32
  gradient accumulation buffer (4 B) besides the partitioned fp32 master/m/v (12/d); the pipeline engine's extra
  per-micro-batch passes (constants.DEEPSPEED_PARAM_BYTES).
- NeMo / Megatron-Bridge performance recipes: Megatron-Core with the distributed optimizer, gradients reduced and
  kept in bf16 (ddp.grad_reduce_in_fp32 off: 2 B grads, 2 B reduced), FP8 parameters gathered in FP8 (no extra cached
  FP8 copy); the measured Llama3-70B peaks (Megatron-Bridge memory-tuning skill: 59 GB at tp4 pp4 vpp5 dp2) are
  below what fp32 gradient buffers alone would need (4.4B params x (2 + 4 + 6 + 2) = 62 GB before activations).
  TP communication overlapped with the GEMMs under SP (Transformer Engine userbuffers): Megatron-Bridge's
  perf_recipes/llama/*/llama3*.py set comm_overlap.tp_comm_overlap_cfg (userbuffers_*_tp4/tp8 ...) for TP > 1
  (scripts/performance/utils/overrides.py: tp_comm_overlap = tp > 1), and NVIDIA's MLPerf GPT-3 / Llama 3.1 405B
  configs export TP_COMM_OVERLAP=True (training_results_v4.0 gpt3 config_DGXH100_*.sh, v5.0 llama31_405b
  config_DGXH100_1024x8x24xtp8pp8cp2.sh) with the per-GEMM methods of conf/tp_overlap/h100tp*mbs*.yaml.
- Megatron-LM without Transformer Engine and apex (--transformer-impl local --no-gradient-accumulation-fusion
  --no-masked-softmax-fusion --no-persist-layer-norm): the same states, element-wise kernels unfused, the wgrad GEMM
  writing a 16-bit gradient that a separate kernel adds into the fp32 main grad (write 2, read 2 + 4, write 4 = 12
  B/param per micro-batch).
- DeepSpeed ZeRO (Rajbhandari et al. 2020 §5; stage 1/2/3 partition optimizer / + grads / + params over d; K = 12).
- PyTorch FSDP1 (MixedPrecision(param_dtype=bf16)) and FSDP2 (fully_shard, MixedPrecisionPolicy(param_dtype=bf16,
  reduce_dtype=fp32) in torchtitan): sharded fp32 parameters, fp32 gradients and AdamW m, v = 16/d; each unit's
  bf16 parameters are all-gathered before its forward (and again before its backward when resharded) and its
  gradients reduce-scattered after its backward, every micro-batch (no_sync off); eager modules (Hugging Face-style
  Llama: RMSNorm in ~7 element-wise kernels, rotary in ~7 per tensor, SiLU and the gating product apart); the loss as
  cross_entropy(logits.float()): bf16 logits 2 B + fp32 copy 4 B + log-softmax output 4 B.
- KempnerForge (a torchtitan-like FSDP2 + DTensor stack; kempnerforge/distributed/parallel.py and
  tensor_parallel.py): the model itself is cast to bf16 (`model.to(dtype=param_dtype)`), so parameters, gradients
  and AdamW's m, v are all 16-bit: 2 + 2 + 4 = 8 B/param, sharded by FSDP2 (reduce_dtype fp32); the output head is
  ColwiseParallel gathered to Replicate: every TP rank holds and reduces the whole vocabulary's logits; no sequence
  parallelism on pipeline stages; q, k, v, gate and up projections each ColwiseParallel with a sequence-sharded
  input (5 all-gathers per layer where Megatron's fused QKV and FC1 do 2); gradient accumulation under
  set_requires_gradient_sync(False) except on the last micro-step (kempnerforge/training/grad.py): FSDP2 then
  accumulates unsharded gradients in the reduction dtype. The loss is F.cross_entropy on the model's bf16 logits
  (scripts/train.py; the OutputHead is a plain nn.Linear, no .float()): the logits (2 B, held by the training loop
  through the backward), the bf16 log-softmax kept for the backward (2 B), and in its backward the gradients of both
  (2 + 2 B) = 8 B per logit element at the peak, where the float32 loss of torchtitan-like stacks keeps 10.
- nanotron: Megatron-like layout (bf16 params, fp32 gradient accumulation buffer, ZeRO-1 over dp), fused kernels
  (flash-attn's RMSNorm/rotary), TP with sequence parallelism (tp_mode REDUCE_SCATTER). huggingface/nanotron
  (2411b022): the model is wrapped in torch DistributedDataParallel over dp x cp (trainer.py), whose bf16 gradient
  buckets (2 B/param) exist besides the fp32 accumulation buffers (optim/gradient_accumulator.py
  FP32GradientAccumulator: fp32 grad buffers for every parameter, fp32 master copies for the ZeRO-1 shard); the loss
  is sharded_cross_entropy(logits, dtype=torch.float) (parallel/tensor_parallel/functional.py): the bf16 logits
  (2 B), their fp32 copy (4 B) and the max-subtracted copy exponentiated in place and kept for the backward (4 B)
  = 10 B per logit element of the rank's V/t shard.
- the embedded workload (launcher/workload, backend torch): autocast over fp32 master weights (4 B weights + the
  autocast cache of bf16 casts, 4 B grads, 8 B AdamW), nn.LayerNorm/GeLU kernels, loss on logits.float().
"""

from __future__ import annotations

from dataclasses import dataclass

from launcher.plan.workload import Workload


@dataclass(frozen=True)
class StackFacts:
    name: str
    states: str
    """Model-state layout: 'megatron' (16-bit weights, fp32 main grads, fp32 master + Adam), 'deepspeed_bf16'
    (BF16_Optimizer: + 16-bit .grad and a full fp32 accumulation buffer), 'deepspeed' (ZeRO with 16-bit grads and
    ZeRO's K = 12), 'fp32_master' (torch autocast / FSDP mixed precision: fp32 parameters are the master),
    'megatron_bf16_grads' (Megatron with bf16 gradient buffers), 'bf16_pure' (a bf16 model, bf16 AdamW states)."""
    eager: bool
    """Element-wise kernels unfused (norms, rotary, gating, residual adds as separate PyTorch ops)."""
    kernels_per_layer: float
    """Kernels (and hook calls) the CPU issues per layer, forward + backward, per micro-batch."""
    forward_kernel_share: float
    """Share of those issued again by full recompute."""
    checkpoint_kernels: float
    """Host work of one checkpointed region, in kernel launches (reentrant Megatron checkpoint: ~7;
    torch.utils.checkpoint non-reentrant: saved-tensor hooks, ~80)."""
    microbatch_param_bytes: float
    """HBM bytes per parameter per micro-batch outside the GEMMs (casts, gradient accumulation passes)."""
    recompute_cast_bytes: float
    """The same again under full recompute (weights cast again outside the autocast cache)."""
    reduce_bytes: float
    """Bytes per parameter of the data-parallel gradient reduction (fp32 main grads: 4)."""
    gather_bytes: float
    """Bytes per parameter of a ZeRO-3/FSDP parameter all-gather (16-bit: 2)."""
    logits_bytes: float
    """Peak bytes per logit element around the loss, one micro-batch."""
    overlap_param_gather: bool
    """The distributed optimizer's / ZeRO-1's parameter all-gather after the step hides behind the next forward."""
    attention: str = "fa3"
    """Flash-attention kernel family when flash attention is on (launcher.plan.attention.kernel_factor): 'fa3'
    (Transformer Engine / cuDNN fused attention, FlashAttention-3) or 'fa2' (flash-attn 2, PyTorch SDPA's flash
    backend, Triton flash)."""
    autocast_cache: bool = False
    """bf16 copies of every weight live from the first to the last use in the forward (torch autocast cache)."""
    fp8_weight_cache_bytes: float = 2.0
    """Under FP8, bytes per linear-layer parameter of the FP8 copies Transformer Engine caches across the micro-batches
    of a step (the weight and its transpose: 1 + 1); 0 when the FP8 copy is the parameter (--fp8-param-gather)."""
    grad_accum_sync: bool = True
    """ZeRO-2/3 / FSDP reduce-scatter the gradients after every micro-batch. False: gradient accumulation without
    synchronisation (FSDP2 set_requires_gradient_sync(False) on all but the last micro-batch): the unsharded
    gradients of the stage are kept, in the reduction dtype, until the one reduce-scatter of the step."""
    tp_input_gathers: float = 2.0
    """Column-parallel projections per layer that gather their input under sequence parallelism (and all-reduce its
    gradient in the backward): Megatron's fused QKV and FC1 = 2; KempnerForge's DTensor plan shards q, k, v, gate
    and up projections apart, each ColwiseParallel with a Shard(1) input = 5."""
    sp_regather: bool = True
    """Under SP the backward all-gathers the norm outputs again for the weight gradients (Megatron); False: autograd
    kept the gathered inputs (DTensor)."""
    ddp_bucket_bytes: float = 0.0
    """Bytes per parameter of torch DistributedDataParallel's gradient buckets when the gradient group has more than
    one rank: DDP (gradient_as_bucket_view False, its default) copies every gradient into a flat bucket of the
    parameters' dtype that lives as long as the model (nanotron wraps its bf16 model in DDP over dp x cp: 2)."""
    fused_softmax_max_seq: float = float("inf")
    """Without flash attention, the longest key length the fused (scale + causal mask + softmax) kernel takes; longer
    sequences fall back to PyTorch ops in fp32 (launcher.plan.step_time.UNFUSED_SOFTMAX_BYTES). Megatron-DeepSpeed
    before its 2023 rebase (branch before_rebase, megatron/model/fused_softmax.py: key_seq_len <= 2048; the
    fallback casts the scores to fp32 because apply_query_key_layer_scaling forces attention_softmax_in_fp32):
    2048. Megatron-LM and NeMo today fuse up to 16k and run flash attention anyway: unbounded here."""
    softmax_fallback_fp32: bool = True
    """The unfused softmax (past fused_softmax_max_seq) casts the scores to fp32 (attention_softmax_in_fp32, forced by
    apply_query_key_layer_scaling in Megatron-DeepSpeed before its rebase). False: it stays in 16 bits (Megatron-LM
    with --no-masked-softmax-fusion and the default --attention-softmax-in-fp32 off: masked_fill, softmax and dropout
    as three 16-bit PyTorch ops, megatron/core/fusions/fused_softmax.py forward_torch_softmax)."""
    tp_comm_overlap: bool = False
    """Under sequence parallelism the TP all-gathers and reduce-scatters run beside the GEMMs (Transformer Engine
    userbuffers: NeMo's / Megatron-Bridge's tp_comm_overlap, on in NVIDIA's performance recipes and MLPerf
    submissions for TP > 1; launcher.plan.step_time.tp_exposed)."""
    eager_activations: bool = False
    """The layers' saved tensors are those of eager PyTorch modules even where the element-wise traffic is counted
    as fused (launcher.plan.memory.layer_activation_bytes eager=True): the embedded workload (launcher/workload/
    model.py) runs nn.RMSNorm under autocast (an fp32 copy of its input kept for the backward), F.silu(gate(x)) * fc1(x)
    (the SiLU output kept by the product besides the gate output) and y.transpose(1, 2).reshape(...) before the output
    projection (a contiguous copy kept by it besides the attention output SDPA keeps); it has no rotary embedding,
    whose eager traffic StackFacts.eager would add to the step time."""
    vocab_parallel_loss: bool = True
    """Under TP the loss runs on each rank's V/t logits (Megatron's vocab-parallel cross-entropy); False: the
    output layer's logits are all-gathered and every TP rank computes the loss over the whole vocabulary."""


_MEGATRON = StackFacts("megatron_lm", "megatron", eager=False, kernels_per_layer=45.0, forward_kernel_share=0.5,
                       checkpoint_kernels=7.0, microbatch_param_bytes=0.0, recompute_cast_bytes=0.0,
                       reduce_bytes=4.0, gather_bytes=2.0, logits_bytes=6.0, overlap_param_gather=True)
STACKS = {
    "megatron_lm": _MEGATRON,
    "megatron_local": StackFacts("megatron_local", "megatron", True, 90.0, 0.5, 7.0, 12.0, 0.0, 4.0, 2.0, 6.0, True,
                                 fused_softmax_max_seq=0.0, softmax_fallback_fp32=False),
    "nemo": StackFacts("nemo", "megatron_bf16_grads", False, 45.0, 0.5, 7.0, 0.0, 0.0, 2.0, 2.0, 6.0, True,
                       fp8_weight_cache_bytes=0.0, tp_comm_overlap=True),
    "nanotron": StackFacts("nanotron", "megatron", False, 45.0, 0.5, 7.0, 12.0, 0.0, 4.0, 2.0, 10.0, False, "fa2",
                           ddp_bucket_bytes=2.0),
    "megatron_deepspeed": StackFacts("megatron_deepspeed", "deepspeed_bf16", False, 45.0, 0.5, 7.0, 28.0, 0.0,
                                     2.0, 2.0, 6.0, False, "fa2", fused_softmax_max_seq=2048.0),
    "deepspeed": StackFacts("deepspeed", "deepspeed", False, 60.0, 0.5, 7.0, 12.0, 0.0, 2.0, 2.0, 10.0, False,
                            "fa2"),
    "pytorch_fsdp": StackFacts("pytorch_fsdp", "fp32_master", True, 150.0, 0.4, 80.0, 12.0, 6.0, 2.0, 2.0, 10.0,
                               False, "fa2"),
    "torchtitan_like": StackFacts("torchtitan_like", "fp32_master", True, 150.0, 0.4, 80.0, 14.0, 6.0, 4.0, 2.0,
                                  10.0, False, "fa3"),
    "kempnerforge": StackFacts("kempnerforge", "bf16_pure", True, 150.0, 0.4, 80.0, 14.0, 6.0, 4.0, 2.0, 8.0,
                               False, "fa3", grad_accum_sync=False, tp_input_gathers=5.0, sp_regather=False,
                               vocab_parallel_loss=False),
    "parasweep_workload": StackFacts("parasweep_workload", "fp32_master", False, 165.0, 0.7, 80.0, 22.0, 6.0, 4.0,
                                     2.0, 10.0, False, "fa2", autocast_cache=True, eager_activations=True),
}
"""Counts per stack (see the module docstring for their sources). microbatch_param_bytes: Megatron 0 (fused
accumulation), DeepSpeed's pipeline 28 and the embedded workload 22 (constants.py counts them), FSDP: the wgrad
output written in bf16, read back and reduce-scattered (2 + 2 + 2 = 6) plus the bf16 all-gather output written and
read again for the backward (2 + 2) = 10-12 (torchtitan's fp32 reduce_dtype adds the cast: 14); nanotron: the
fp32 accumulation buffer read and written (8) plus the bf16 grad (4). kernels_per_layer: Megatron's fused layer
~45 kernels; an eager Hugging Face-style Llama layer ~50 forward + ~100 backward ops (RMSNorm 2 x 7, rotary 2 x 7,
SiLU, product, 7 GEMMs, residual adds, SDPA) = 150; the embedded workload with autocast casts ~165."""
_BACKEND_STACK = {"": "megatron_lm", "megatron_lm": "megatron_lm", "torch": "parasweep_workload",
                  "megatron_deepspeed": "megatron_deepspeed"}


def stack_name(workload: Workload, backend: str = "") -> str:
    """The stack a request runs on: the workload's, else the backend's (unknown names: Megatron-LM's)."""
    if workload.stack:
        return workload.stack
    return _BACKEND_STACK.get(backend, "megatron_lm")


def stack_facts(name: str) -> StackFacts:
    """Facts of a stack by name; stacks the table does not know (jax, colossalai, other:*) get Megatron-LM's."""
    return STACKS.get(name, _MEGATRON)


def syncs_every_microbatch(facts: StackFacts, workload: Workload) -> bool:
    """ZeRO-2/3 / FSDP reduce the gradients after every micro-batch (the workload's setting, else the stack's)."""
    return facts.grad_accum_sync if workload.grad_accum_sync is None else workload.grad_accum_sync


def kernels_fused(facts: StackFacts, workload: Workload) -> bool:
    """torch.compile fuses an eager stack's element-wise kernels (Inductor), as Megatron's hand-written ones are."""
    return not facts.eager or workload.torch_compile
