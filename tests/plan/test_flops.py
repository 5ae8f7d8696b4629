"""FLOPs formulas against the printed equations (cost-model-formulas.md §1)."""

from __future__ import annotations

import pytest

from launcher.config.schema import ModelConfig
from launcher.plan import flops

GPT_175B = ModelConfig(name="gpt3-175b", layers=96, hidden=12288, heads=96, seq_len=2048, vocab=51200)


def test_model_flops_is_korthikanti_eq7():
    # 72·B·L·s·h²·(1 + s/6h + V/12hL), B = 64
    B, L, s, h, V = 64, 96, 2048, 12288, 51200
    expected = 72 * B * L * s * h**2 * (1 + s / (6 * h) + V / (12 * h * L))
    assert flops.model_flops(GPT_175B, B, V) == pytest.approx(expected, rel=1e-12)
    # arithmetic: 72·64·96·2048·12288² = 1.3678e17; x 1.03141 = 1.4108e17
    assert expected == pytest.approx(1.4108e17, rel=1e-3)


def test_full_recompute_hardware_flops_is_narayanan_eq3():
    # 96·B·s·l·h²·(1 + s/6h + V/16lh): GPT-1.7B row of Table 1, B = 512
    m = ModelConfig(name="gpt-1.7b", layers=24, hidden=2304, heads=24, seq_len=2048, vocab=51200)
    B, l, s, h, V = 512, 24, 2048, 2304, 51200
    expected = 96 * B * s * l * h**2 * (1 + s / (6 * h) + V / (16 * l * h))
    assert flops.hardware_flops(m, B, V, "full") == pytest.approx(expected, rel=1e-12)
    # 96·512·2048·24·2304² = 1.2826e16; x (1 + 0.1481 + 0.0579) = 1.5467e16 FLOPs per iteration, so
    # 137 TFLOP/s on 32 GPUs (Table 1) means 1.5467e16 / (32 x 137e12) = 3.53 s per iteration
    assert expected == pytest.approx(1.5467e16, rel=1e-4)
    assert expected / (32 * 137e12) == pytest.approx(3.527, rel=1e-3)


def test_selective_recompute_adds_the_attention_core_forward():
    B, L, s, h = 8, 96, 2048, 12288
    extra = flops.hardware_flops(GPT_175B, B, 51200, "selective") - flops.model_flops(GPT_175B, B, 51200)
    assert extra == pytest.approx(4 * B * s**2 * h * L, rel=1e-12)    # Q·Kᵀ + attention·V, 4Bs²h per layer
    assert flops.hardware_flops(GPT_175B, B, 51200, "none") == flops.model_flops(GPT_175B, B, 51200)


def test_gqa_swiglu_matches_megatron_num_floating_point_operations():
    # Megatron training.py (2024): 12·B·s·L·h²·[(1 + g/a + s/h) + (f/h)·γ + V/(2Lh)], γ = 3/2 for SwiGLU
    m = ModelConfig(name="llama2-70b", layers=80, hidden=8192, heads=64, kv_heads=8, ffn_hidden=28672,
                    swiglu=True, seq_len=4096, vocab=32000, tied_embeddings=False, norm="rmsnorm")
    B, s, L, h, g, a, f, V = 16, 4096, 80, 8192, 8, 64, 28672, 32000
    expected = 12 * B * s * L * h**2 * ((1 + g / a + s / h) + (f / h) * 1.5 + V / (2 * L * h))
    assert flops.model_flops(m, B, V) == pytest.approx(expected, rel=1e-12)


def test_dense_flops_are_six_times_non_embedding_params_per_token():
    # 3 x 2 FLOPs per weight per token: 6N (PaLM App. B); N = 12h² per GPT layer
    per_token = 3 * flops.dense_forward_flops_per_token(GPT_175B)
    assert per_token == 6 * 12 * 12288**2


@pytest.mark.parametrize("vocab, tp, padded", [(50257, 1, 50304), (50257, 8, 51200), (51200, 8, 51200),
                                               (32000, 8, 32768), (32000, 2, 32000), (250880, 4, 250880)])
def test_vocab_padding_to_128_times_tp(vocab, tp, padded):
    assert flops.padded_vocab(vocab, tp) == padded
