"""Flash attention's cost: the work a causal kernel really does and the efficiency it reaches at a sequence length.

A flash kernel (Dao et al. 2022; FlashAttention-2, Dao 2023, arXiv 2307.08691; FlashAttention-3, Shah et al. 2024)
tiles queries and keys in blocks of 128 and never materialises the s x s scores. Its throughput grows with the
sequence length as the fixed per-tile work (loading Q, the softmax rescaling, writing O) is spread over more keys;
FlashAttention-3's measured forward on H100 (head dim 128: 430, 517, 566, 590, 614, 621 TFLOP/s at 512 ... 16k
tokens, pytorch/benchmark D60117034) follows eff(s) = eff_max / (1 + S0/s) with S0 = 240 tokens to within 1 %.
Causal masking skips the tiles above the diagonal: n(n+1)/2 of n² tiles for n = s/128, i.e. half the FLOPs plus
the diagonal tiles in full: (n+1)/(2n) = 0.5·(1 + 128/s), i.e. 128 more tokens of S0 on the halved work.
The backward does 2.5 x the forward's matmul FLOPs (it recomputes Q·Kᵀ: 5 GEMMs against 2) at a lower efficiency
(FlashAttention-2 reaches 73 % of A100's peak forward and 63 % backward: 0.85; FlashAttention-3 on H100 ~0.8).
The kernel generation matters on Hopper and later: FlashAttention-2 uses no Hopper wgmma/TMA instructions and runs at
about 0.6 of FlashAttention-3 / cuDNN on H100 (FlashAttention-3 paper, Fig. 5-6: ~350 against ~600 TFLOP/s).
"""

from __future__ import annotations

FLASH_S0_TOKENS = 240.0
"""Sequence length at which a flash forward reaches half its ceiling (fit of FlashAttention-3's H100 curve)."""
CAUSAL_TILE_TOKENS = 128.0
"""Extra S0 of a causal kernel: its n diagonal tiles (128 tokens) are computed in full, (n+1)/(2n) of the tiles."""
FLASH_BACKWARD_FLOPS = 2.5
"""Backward matmul FLOPs / forward (5 GEMMs against 2)."""
FLASH_BACKWARD_EFF = 0.8
"""Backward efficiency / forward efficiency (FlashAttention-2: 63 / 73 %, FlashAttention-3 ~0.8)."""
TRITON_FLASH = 0.55
"""The Triton flash-attention of 2022-23 (the OpenAI Triton tutorial kernel Megatron-DeepSpeed ran with
--use-flash-attn-triton) against FlashAttention-2 on A100: FlashAttention-2 is 1.3-2.5x faster forward + backward
(Dao 2023 §4.1, Fig. 4-5), ~0.55 at head dim 128."""
FA2_ON_HOPPER = 0.6
"""FlashAttention-2 (PyTorch SDPA's flash backend, flash-attn 2) on Hopper/Blackwell relative to the kernels written
for them (FlashAttention-3, cuDNN fused attention)."""


def causal_share(seq: float) -> float:
    """Share of the s x s score tiles a causal flash kernel computes: (n + 1)/(2n), n = s/128."""
    n = max(1.0, seq / 128.0)
    return (n + 1) / (2 * n)


def flash_forward_amount(flops: float, seq_chunk: float, causal: bool = True) -> float:
    """Forward time of `flops` (the full, unmasked Q·Kᵀ and attention·V FLOPs) in units of 1/(peak · eff_max):
    the computed share x (1 + S0/s), s the key length one kernel call sees (s/cp under context parallelism)."""
    share = 0.5 if causal else 1.0
    s0 = FLASH_S0_TOKENS + (CAUSAL_TILE_TOKENS if causal else 0.0)
    return flops * share * (1.0 + s0 / max(1.0, seq_chunk))


def flash_backward_amount(flops: float, seq_chunk: float, causal: bool = True) -> float:
    """Backward time in the same units: 2.5 x the forward work at 0.8 of its efficiency."""
    return flash_forward_amount(flops, seq_chunk, causal) * FLASH_BACKWARD_FLOPS / FLASH_BACKWARD_EFF


def kernel_factor(kernel: str, generation: str) -> float:
    """Efficiency of an attention kernel family on a generation relative to the best kernel there: 'fa2' on Hopper
    or Blackwell runs at FA2_ON_HOPPER; 'triton' at TRITON_FLASH of FlashAttention-2; 'fa3' (FlashAttention-3, cuDNN,
    Transformer Engine) and FlashAttention-2 on Ampere at 1."""
    factor = TRITON_FLASH if kernel == "triton" else 1.0
    if kernel in ("fa2", "triton") and generation in ("hopper", "blackwell"):
        factor *= FA2_ON_HOPPER
    return factor
