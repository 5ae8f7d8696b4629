"""A small GPT (pre-norm, causal attention, GELU MLP or SwiGLU, GQA, learned positions) built stage by stage.

A pipeline stage builds only its own layers: every part is initialised from its own seeded generator
(`part_seed`), so the weights of layer i are the same whatever the layout that holds them. That is what lets a
tp2 x pp2 x dp2 run reproduce the single-process losses. Torch + stdlib only (this runs inside the job).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.distributed.tensor import DTensor, Replicate
from torch.utils.checkpoint import checkpoint

from launcher.workload.moe import LOCAL, ExpertGroups, MoE, MoEConfig

INIT_STD = 0.02
"""GPT-2 / Megatron init: N(0, 0.02) for every weight matrix, norms at (1, 0)."""


@dataclass(frozen=True)
class GPTConfig:
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn_hidden: int
    seq_len: int
    vocab: int
    swiglu: bool = False
    tied_embeddings: bool = True
    norm: str = "layernorm"
    attention: str = "sdpa"
    """'sdpa' (fused kernel, stores no s x s matrix) or 'math' (explicit softmax(QK^T)V, stores a*s^2 scores)."""
    moe: MoEConfig | None = None
    """Mixture of experts in every layer's FFN (launcher/workload/moe.py); None: dense."""

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads


def part_seed(seed: int, part: int) -> int:
    """Seed of one model part (-1 embedding, i layer i, 10**6 untied output layer): independent of the layout."""
    return (seed * 1_000_003 + part + 1) % (2**63 - 1)


def _norm(cfg: GPTConfig) -> nn.Module:
    return nn.RMSNorm(cfg.hidden) if cfg.norm == "rmsnorm" else nn.LayerNorm(cfg.hidden)


def causal_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, kind: str) -> torch.Tensor:
    """Attention core on (batch, heads, seq, head_dim); k/v may have fewer (grouped) heads."""
    if kind == "sdpa":
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=k.shape[1] != q.shape[1])
    groups = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
    seq = q.shape[-2]
    mask = torch.ones(seq, seq, dtype=torch.bool, device=q.device).tril()
    return scores.masked_fill(~mask, float("-inf")).softmax(dim=-1) @ v


class Attention(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        d = cfg.head_dim
        self.head_dim, self.kind = d, cfg.attention
        self.q = nn.Linear(cfg.hidden, cfg.heads * d, bias=False)
        self.k = nn.Linear(cfg.hidden, cfg.kv_heads * d, bias=False)
        self.v = nn.Linear(cfg.hidden, cfg.kv_heads * d, bias=False)
        self.o = nn.Linear(cfg.heads * d, cfg.hidden, bias=False)
        self.recompute_core = False
        """Selective recompute (Korthikanti 2022 sec. 5): keep q/k/v, recompute only the attention core."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        # -1 heads: under tensor parallelism q/k/v are column shards holding heads/tp (kv_heads/tp) heads.
        q, k, v = (p(x).view(b, s, -1, self.head_dim).transpose(1, 2) for p in (self.q, self.k, self.v))
        if self.recompute_core:
            y = checkpoint(causal_attention, q, k, v, self.kind, use_reentrant=False)
        else:
            y = causal_attention(q, k, v, self.kind)
        return self.o(y.transpose(1, 2).reshape(b, s, -1))


class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.fc1 = nn.Linear(cfg.hidden, cfg.ffn_hidden, bias=False)
        self.gate = nn.Linear(cfg.hidden, cfg.ffn_hidden, bias=False) if cfg.swiglu else None
        self.fc2 = nn.Linear(cfg.ffn_hidden, cfg.hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.gate is not None:
            return self.fc2(F.silu(self.gate(x)) * self.fc1(x))
        return self.fc2(F.gelu(self.fc1(x)))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig, experts: ExpertGroups = LOCAL) -> None:
        super().__init__()
        self.norm1, self.attn, self.norm2 = _norm(cfg), Attention(cfg), _norm(cfg)
        self.mlp = MoE(cfg.hidden, cfg.moe, cfg.swiglu, experts) if cfg.moe else MLP(cfg)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class Embedding(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.tok = nn.Embedding(cfg.vocab, cfg.hidden)
        self.pos = nn.Embedding(cfg.seq_len, cfg.hidden)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        positions = torch.arange(tokens.shape[1], device=tokens.device)
        return self.tok(tokens) + self.pos(positions)


class Head(nn.Module):
    """Final norm + output layer. `weight` is None when it is tied to the embedding held by the same stage."""

    def __init__(self, cfg: GPTConfig, own_weight: bool) -> None:
        super().__init__()
        self.norm = _norm(cfg)
        self.weight = nn.Parameter(torch.empty(cfg.vocab, cfg.hidden)) if own_weight else None

    def forward(self, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        x = self.norm(x)
        if isinstance(weight, DTensor):
            # Vocab-parallel output layer (Megatron): the input is gathered/replicated over tp, the weight is
            # split by vocabulary rows, so logits come out split on the vocabulary dim (Shard(-1)).
            mesh = weight.device_mesh
            x = x if isinstance(x, DTensor) else DTensor.from_local(x, mesh, [Replicate()], run_check=False)
            x = x.redistribute(mesh, [Replicate()])
        return F.linear(x, weight)


class StageModel(nn.Module):
    """The layers one pipeline stage holds: [embedding] + layers[first:last] + [head]. Whole model when pp = 1.

    Parts are created and initialised directly on `device` (so on GPU with the GPU generator: still the same in
    every layout). `on_block` (e.g. tensor-parallel sharding) runs on each block as soon as it exists, so a rank
    never holds more than one unsharded block at a time. `experts`: this rank's place in the expert mesh (which
    routed experts, which etp shard it holds; MoE models only).
    """

    def __init__(self, cfg: GPTConfig, layer_ids: list[int], has_embedding: bool, has_head: bool, seed: int,
                 device: torch.device | str = "cpu", on_block: Callable[[nn.Module], nn.Module] | None = None,
                 experts: ExpertGroups = LOCAL) -> None:
        super().__init__()
        self.cfg = cfg
        device = torch.device(device)
        self.emb = _seeded(lambda: Embedding(cfg), part_seed(seed, -1), device) if has_embedding else None
        # ModuleDict keyed by the GLOBAL layer index: checkpoints and logs name layers the same in every layout.
        self.layers = nn.ModuleDict()
        for i in layer_ids:
            block = _seeded(lambda: Block(cfg, experts), part_seed(seed, i), device)
            self.layers[str(i)] = on_block(block) if on_block else block
        self.head = None
        if has_head:
            own = not (cfg.tied_embeddings and has_embedding)
            self.head = _seeded(lambda: Head(cfg, own), part_seed(seed, 10**6), device)
            if own and cfg.tied_embeddings:
                # Tied across stages: the last stage's copy starts equal to the embedding (its generator's first
                # draw), and the two gradients are summed every step (grad_sync.tied_group), as Megatron's
                # embedding group does.
                with torch.no_grad():
                    gen = torch.Generator(device).manual_seed(part_seed(seed, -1))
                    self.head.weight.copy_(_normal(self.head.weight.shape, gen, device))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.emb is not None:
            x = self.emb(x)
        for layer in self.layers.values():
            x = layer(x)
        if self.head is not None:
            weight = self.head.weight if self.head.weight is not None else self.emb.tok.weight
            x = self.head(x, weight)
        return x


def _seeded(build: Callable[[], nn.Module], seed: int, device: torch.device) -> nn.Module:
    """Build a module on `device` and initialise it from a private generator (the global RNG is untouched).

    Parameters are drawn in registration order, so an Embedding's token table is the generator's first draw
    (`_normal`), which is how the last stage re-creates a tied copy without building an Embedding. Submodules with
    `init_from_seed` (the routed experts, of which a rank holds only some) draw their own weights from `seed`.
    """
    with torch.device(device):
        module = build()
    gen = torch.Generator(device).manual_seed(seed)
    own = [m for m in module.modules() if hasattr(m, "init_from_seed")]
    skip = {id(p) for m in own for p in m.parameters()}
    with torch.no_grad():
        for name, p in module.named_parameters():
            if id(p) in skip:
                continue
            if p.dim() == 1:  # norm scale 1, norm bias 0
                p.fill_(0.0 if name.endswith("bias") else 1.0)
            else:
                p.copy_(_normal(p.shape, gen, device))
    for m in own:
        m.init_from_seed(seed, device, INIT_STD)
    return module


def _normal(shape: torch.Size | tuple[int, ...], gen: torch.Generator, device: torch.device) -> torch.Tensor:
    return torch.randn(shape, generator=gen, device=device) * INIT_STD


def stage_layer_ids(layers: int, stages: int, stage: int) -> list[int]:
    """Even manual split: stage k holds layers [k*L/S, (k+1)*L/S) (L divisible by S, checked by the arg parser)."""
    per_stage = layers // stages
    return list(range(stage * per_stage, (stage + 1) * per_stage))


def count_params(cfg: GPTConfig) -> int:
    """Parameters of the whole (unsharded) model."""
    d, kv = cfg.head_dim, cfg.kv_heads
    attn = cfg.hidden * d * (2 * cfg.heads + 2 * kv)
    matrices = 3 if cfg.swiglu else 2
    mlp = cfg.hidden * cfg.ffn_hidden * matrices
    if cfg.moe:  # router + every routed expert + the shared expert
        moe = cfg.moe
        mlp = cfg.hidden * (moe.num_experts + matrices * (moe.num_experts * moe.ffn_hidden + moe.shared_ffn_hidden))
    norm = cfg.hidden * (1 if cfg.norm == "rmsnorm" else 2)
    emb = (cfg.vocab + cfg.seq_len) * cfg.hidden
    out = 0 if cfg.tied_embeddings else cfg.vocab * cfg.hidden
    return cfg.layers * (attn + mlp + 2 * norm) + norm + emb + out


def iteration_flops(cfg: GPTConfig, gbs: int, recompute: str, every: int = 1) -> tuple[float, float]:
    """(model FLOPs, hardware FLOPs) of one training iteration over the global batch.

    Model FLOPs: Korthikanti et al. 2022 eq. 7, 72*B*L*s*h^2*(1 + s/(6h) + V/(12*h*L)), generalised for GQA,
    SwiGLU and any ffn size as Megatron-LM's num_floating_point_operations (commit f2e5db402c):
        12*B*s*L*h^2 * [(1 + g/a + s/h)*(q/h) + (f/h)*gamma + V/(2*L*h)]
    with g = kv heads, a = heads, q = a*head_dim, gamma = 3/2 for SwiGLU (three ffn matrices) else 1;
    i.e. 3x the forward GEMMs (backward = 2x forward). Hardware FLOPs add what recompute re-runs:
    full = one more forward of every layer (Narayanan et al. 2021 eq. 3: 96*B*s*l*h^2*(1 + s/(6h) + V/(16*l*h))
    for MHA, f = 4h; the logits are not recomputed); selective = one more forward of the attention core
    (QK^T and PV, 4*B*s^2*q per layer); full with `every` = k > 1 re-runs 1/k of the layers.
    MoE (Megatron's formula): the FFN term becomes (moe_ffn * topk + shared_ffn) * gamma; the router's h x E GEMM
    is not counted, as in Megatron.
    """
    b, s, layers, h, v = gbs, cfg.seq_len, cfg.layers, cfg.hidden, cfg.vocab
    q = cfg.heads * cfg.head_dim
    gamma = 1.5 if cfg.swiglu else 1.0
    attn_fwd = 4 * b * s * h * q * (1 + cfg.kv_heads / cfg.heads)  # q, k, v, o projections
    core_fwd = 4 * b * s * s * q  # QK^T and PV
    ffn = cfg.moe.ffn_hidden * cfg.moe.topk + cfg.moe.shared_ffn_hidden if cfg.moe else cfg.ffn_hidden
    mlp_fwd = 4 * b * s * h * ffn * gamma
    layer_fwd = attn_fwd + core_fwd + mlp_fwd
    logits_fwd = 2 * b * s * h * v
    model = 3 * (layers * layer_fwd + logits_fwd)
    extra = {"none": 0.0, "selective": layers * core_fwd, "full": layers * layer_fwd / every}[recompute]
    return float(model), float(model + extra)
