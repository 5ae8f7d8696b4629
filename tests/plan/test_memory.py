"""Memory terms against hand-computed cases (arithmetic in the comments) and Korthikanti et al. 2022 Fig. 1."""

from __future__ import annotations

import pytest

from launcher.config.schema import ClusterConfig, ModelConfig
from launcher.core.layout import Layout
from launcher.plan import memory

# Small GPT: h = 1024, a = 16, f = 4h = 4096, s = 512, V = 32000 (a multiple of 128·2), tied, LayerNorm.
SMALL = ModelConfig(name="small", layers=4, hidden=1024, heads=16, seq_len=512, vocab=32000)
GPU = ClusterConfig(name="gpu", gpu="A100", gpu_mem_gb=80)
CPU = ClusterConfig(name="local-cpu", gpu="cpu", gpu_mem_gb=0.5)
SBH = 512 * 2 * 1024          # s·b·h with mbs 2 = 1,048,576
GIB = 2**30


def layout(**kw) -> Layout:
    base = dict(gpus=8, nodes=1, tp=2, pp=2, dp=2, mbs=2, gbs=16, recompute="selective")
    return Layout(**{**base, **kw})


# ------------------------------------------------------------------------------------------------- model states

@pytest.mark.parametrize("precision, zero, distopt, expected", [
    ("bf16", 0, False, (2, 4, 12)),          # 18 B/param (Megatron dist_optimizer.md)
    ("bf16", 0, True, (2, 4, 3)),            # 6 + 12/d, d = 4
    ("bf16", 1, False, (2, 4, 3)),           # ZeRO-1: optimizer / d
    ("bf16", 2, False, (2, 1, 3)),           # ZeRO-2: + grads / d
    ("bf16", 3, False, (0.5, 1, 3)),         # ZeRO-3: + weights / d
    ("fp16", 0, False, (2, 2, 16)),          # 20 B/param
    ("fp16", 0, True, (2, 2, 4)),            # 4 + 16/d
    ("fp32", 0, False, (4, 4, 8)),           # 16 B/param (weights are the master copy)
    ("fp32", 0, True, (4, 4, 2)),            # 8 + 8/d
])
def test_state_bytes_per_param(precision, zero, distopt, expected):
    assert memory.state_bytes_per_param(precision, zero, distopt, dp=4) == expected


def test_layer_params_are_narayanan_12h2_plus_13h():
    sharded, replicated = memory.layer_params(SMALL)
    # sharded: QKV 3h² + proj h² + FFN 2·h·4h = 12h² = 12,582,912, + column biases 3h + 4h = 7,168
    assert sharded == 12 * 1024**2 + 7 * 1024 == 12_590_080
    # replicated: two LayerNorms (weight + bias) 4h + row-parallel biases (proj, FC2) 2h = 6,144
    assert replicated == 6 * 1024
    assert sharded + replicated == 12 * 1024**2 + 13 * 1024


def test_rmsnorm_gqa_swiglu_layer_params():
    llama = ModelConfig(name="l", layers=80, hidden=8192, heads=64, kv_heads=8, ffn_hidden=28672, swiglu=True,
                        norm="rmsnorm", tied_embeddings=False)
    sharded, replicated = memory.layer_params(llama)
    # Q h² + K,V 2·h·(8·128) + O h² + 3·h·f, no biases; norms 2h
    assert sharded == 8192**2 * 2 + 2 * 8192 * 1024 + 3 * 8192 * 28672
    assert replicated == 2 * 8192


def test_stage_params_first_and_last_stage():
    lay = layout()  # tp 2, pp 2 -> 2 layers per stage
    per_layer = 12_590_080 / 2 + 6_144          # 6,301,184 per GPU
    embedding = 32000 * 1024 / 2                # vocab-parallel word embeddings: 16,384,000
    # stage 0: 2 layers + embeddings + learned positions 512·1024 = 524,288
    assert memory.stage_params(SMALL, lay, 0) == 2 * per_layer + embedding + 524_288 == 29_510_656
    # last stage: 2 layers + final LayerNorm 2h + the tied output layer's copy (pp > 1)
    assert memory.stage_params(SMALL, lay, 1) == 2 * per_layer + 2048 + embedding == 28_988_416
    # pp = 1, tied: one copy of the embeddings
    single = layout(pp=1, dp=4)
    assert memory.stage_params(SMALL, single, 0) == 4 * per_layer + embedding + 524_288 + 2048


# ------------------------------------------------------------------------------------------------- activations

@pytest.mark.parametrize("tp, sp, recompute, flash, per_sbh", [
    (1, False, "none", False, 34 + 40),             # eq. 1: 34 + 5as/h, 5·16·512/1024 = 40
    (2, False, "none", False, 10 + 24 / 2 + 40 / 2),  # eq. 2: 10 + 24/t + 5as/(ht) = 42
    (2, True, "none", False, (34 + 40) / 2),        # eq. 4: (34 + 5as/h)/t = 37
    (2, False, "selective", False, 10 + 12),        # 10 + 24/t
    (2, True, "selective", False, 34 / 2),          # 34/t
    (2, False, "none", True, 10 + 12),              # flash attention never stores the s x s scores
    (2, False, "full", False, 2),                   # only the layer input, 2sbh
    (2, True, "full", False, 1),                    # ... sequence-sharded under SP: 2sbh/t
])
def test_layer_activation_bytes_korthikanti_table2(tp, sp, recompute, flash, per_sbh):
    got = memory.layer_activation_bytes(SMALL, 2, tp, sp, recompute, flash, act_bytes=2)
    assert got == pytest.approx(per_sbh * SBH)


def test_fp32_activations_keep_one_byte_masks():
    # e = 4: replicated 4e + 2 = 18, sharded e·3 + e + 2·e·4 = 48, scores (2e + 1)·as/h = 9·8 = 72 -> 138 sbh
    got = memory.layer_activation_bytes(SMALL, 2, 1, False, "none", False, act_bytes=4)
    assert got == 138 * SBH


def test_gqa_swiglu_activations():
    llama = ModelConfig(name="l", layers=80, hidden=8192, heads=64, kv_heads=8, ffn_hidden=28672, swiglu=True,
                        seq_len=4096, norm="rmsnorm")
    sbh = 4096 * 1 * 8192
    # replicated 8 (two norm inputs, QKV and FFN inputs; no dropout masks: Llama trains without dropout);
    # Q,K,V 2·(1 + 2·8/64) = 2.5, proj input 2, SwiGLU gate+up outputs and FC2 input 3·2·3.5 = 21
    got = memory.layer_activation_bytes(llama, 1, 8, True, "selective", True, act_bytes=2)
    assert got == pytest.approx((8 + 2.5 + 2 + 21) * sbh / 8)


def test_inflight_layers_1f1b_and_interleaved():
    lay = Layout(gpus=32, nodes=4, tp=4, pp=4, dp=2, mbs=1, gbs=32)        # m = 16
    assert memory.inflight_layers(lay, 48, 0) == 4 * 12                      # p micro-batches of L/p layers = L
    assert memory.inflight_layers(lay, 48, 3) == 1 * 12
    few = Layout(gpus=32, nodes=4, tp=4, pp=4, dp=2, mbs=1, gbs=4)          # m = 2 < p
    assert memory.inflight_layers(few, 48, 0) == 2 * 12
    inter = Layout(gpus=32, nodes=4, tp=4, pp=4, dp=2, vpp=3, mbs=1, gbs=32)
    # stage 0: 2(p-1) + (v-1)p + 1 = 15 chunks of L/(pv) = 4 layers = 60 = L·(1 + (p-1)/(pv))
    assert memory.inflight_layers(inter, 48, 0) == 60 == 48 * (1 + 3 / 12)
    assert memory.inflight_layers(inter, 48, 3) == 9 * 4


# Korthikanti et al. 2022 Fig. 1 (GiB per GPU, formula-derived; values as quoted in cost-model-formulas.md §6):
# TP-baseline activations without recompute / with sequence parallelism + selective recompute; the v (interleaving)
# and b values are those that Table 3's configurations imply.
FIG1 = [  # name, heads, hidden, layers, t, p, v, b, m, baseline GiB, seq+sel GiB, params+optimizer GiB
    ("22B", 64, 6144, 48, 8, 1, 1, 4, 1, 59.25, 9.56, 45.56),
    ("175B", 96, 12288, 96, 8, 8, 3, 1, 64, 66.84, 12.35, 45.56),
    ("530B", 128, 20480, 105, 8, 35, 3, 1, 280, 114.02, 23.08, 31.64),
    ("1T", 160, 25600, 128, 8, 64, 1, 1, 512, 131.25, 26.56, 32.96),
]


@pytest.mark.parametrize("name, a, h, L, t, p, v, b, m, base_gib, selsp_gib, states_gib", FIG1,
                         ids=[r[0] for r in FIG1])
def test_korthikanti_fig1(name, a, h, L, t, p, v, b, m, base_gib, selsp_gib, states_gib):
    model = ModelConfig(name=name, layers=L, hidden=h, heads=a, seq_len=2048, vocab=51200)
    lay = Layout(gpus=t * p, nodes=max(1, t * p // 8), tp=t, pp=p, dp=1, vpp=v, mbs=b, gbs=b * m)
    held = memory.inflight_layers(lay, L, 0)
    base = memory.layer_activation_bytes(model, b, t, False, "none", False, 2) * held / GIB
    selsp = memory.layer_activation_bytes(model, b, t, True, "selective", False, 2) * held / GIB
    assert base == pytest.approx(base_gib, rel=0.01)
    assert selsp == pytest.approx(selsp_gib, rel=0.01)
    # transformer-layer weights + grads + Adam at 18 B/param, per GPU
    sharded, replicated = memory.layer_params(model)
    assert L * (sharded / t + replicated) / p * 18 / GIB == pytest.approx(states_gib, rel=0.005)


# ------------------------------------------------------------------------------------------------- stage totals

def test_stage_memory_breakdown_hand_computed():
    lay = layout()   # tp 2, pp 2, dp 2, mbs 2, m = 16/(2·2) = 4, selective, no SP, bf16 (flash)
    first = memory.stage_memory_gb(SMALL, GPU, lay, "bf16", 0)
    params = 29_510_656
    assert first["weights"] == pytest.approx(params * 2 / 1e9)
    assert first["grads"] == pytest.approx(params * 4 / 1e9)
    assert first["optimizer"] == pytest.approx(params * 12 / 1e9)
    # 22·sbh per layer x (min(p, m) = 2 micro-batches x 2 layers) + embedding-dropout mask sbh x 2 in flight
    acts = 22 * SBH * 4 + SBH * 2
    assert first["activations"] == pytest.approx(acts / 1e9)
    assert first["logits"] == 0
    c = memory.DEFAULT
    assert first["context"] == pytest.approx(c.gpu_context_gb)
    assert first["temporaries"] == pytest.approx(c.transient_share * acts / 1e9)
    assert first["fragmentation"] == pytest.approx(c.fragmentation_share * acts / 1e9)
    last = memory.stage_memory_gb(SMALL, GPU, lay, "bf16", 1)
    # final-norm and output-layer inputs 2·e·sbh + Megatron's loss buffers 6 B per logit element (bf16 logits 2 and
    # their fp32 copy 4) over s·b·V/t = 4,194,304 + 98,304,000
    assert last["logits"] == pytest.approx((4 * SBH + 6 * 512 * 2 * 32000 / 2) / 1e9)
    assert last["activations"] == pytest.approx(22 * SBH * 2 / 1e9)
    peak, parts = memory.peak_memory_gb(SMALL, GPU, lay, "bf16")
    assert parts == last and peak == pytest.approx(sum(last.values()))   # the logits make the last stage heavier


def test_zero3_weights_are_partitioned_plus_two_gathered_layers():
    lay = layout(pp=1, dp=4, zero_stage=3)
    params = 4 * 6_301_184 + 16_384_000 + 524_288 + 2048       # pp = 1: all 4 layers, embeddings, final norm
    got = memory.stage_memory_gb(SMALL, GPU, lay, "bf16", 0)
    # 2 B / d = 0.5 B per partitioned param; gathered: 2 layers in full (6,301,184 params each at 2 B) and one layer's
    # unsharded gradient before its reduce-scatter (fp32 main grads: 4 B)
    assert got["weights"] == pytest.approx(params * 0.5 / 1e9)
    assert got["gathered"] == pytest.approx((2 * 6_301_184 * 2 + 6_301_184 * 4) / 1e9)
    assert got["grads"] == pytest.approx(params * 1 / 1e9) and got["optimizer"] == pytest.approx(params * 3 / 1e9)


def test_cpu_standin_overhead_is_far_smaller():
    lay = layout()
    overhead = ("temporaries", "fragmentation", "context")
    gpu = sum(memory.stage_memory_gb(SMALL, GPU, lay, "bf16", 0)[k] for k in overhead)
    cpu = sum(memory.stage_memory_gb(SMALL, CPU, lay, "fp32", 0)[k] for k in overhead)
    assert cpu < 0.1 * gpu


# ------------------------------------------------------------------------------------------------- sanity

GPT_175B = ModelConfig(name="175b", layers=96, hidden=12288, heads=96, seq_len=2048, vocab=51200)


def peak(model=GPT_175B, precision="bf16", flash=None, **kw) -> float:
    base = dict(gpus=64, nodes=8, tp=8, pp=8, dp=1, mbs=1, gbs=64, recompute="selective")
    return memory.peak_memory_gb(model, GPU, Layout(**{**base, **kw}), precision, flash)[0]


def test_more_recompute_less_memory():
    assert peak(recompute="none", flash=False) > peak(recompute="selective", flash=False) > peak(recompute="full")
    assert peak(recompute="none") == peak(recompute="selective")          # with flash attention
    assert peak(recompute="selective") > peak(recompute="full")


def test_sequence_parallel_divides_activations_by_t():
    def acts(**kw):
        lay = Layout(**{**dict(gpus=64, nodes=8, tp=8, pp=8, dp=1, mbs=1, gbs=64, recompute="selective"), **kw})
        return memory.layer_activation_bytes(GPT_175B, 1, lay.tp, lay.sequence_parallel, lay.recompute, True, 2)
    no_tp = memory.layer_activation_bytes(GPT_175B, 1, 1, False, "selective", True, 2)
    assert acts(sequence_parallel=True) == pytest.approx(no_tp / 8)
    assert acts(sequence_parallel=True) < acts()
    assert peak(sequence_parallel=True) < peak()


def test_zero_stages_and_distributed_optimizer_shrink_memory():
    kw = dict(gpus=64, nodes=8, tp=8, pp=1, dp=8, mbs=1, gbs=64, recompute="full")
    small = ModelConfig(name="13b", layers=40, hidden=5120, heads=40, seq_len=2048, vocab=51200)
    z = [peak(small, zero_stage=s, **kw) for s in (0, 1, 2, 3)]
    assert z[3] < z[2] < z[1] < z[0]
    assert peak(small, distributed_optimizer=True, **kw) == pytest.approx(z[1])


def test_pipeline_first_stage_holds_about_all_layers_worth():
    # 1F1B: activations on stage 0 do not shrink with p (Korthikanti §4.2.3); the weights do
    a4 = memory.stage_memory_gb(GPT_175B, GPU, Layout(gpus=32, nodes=4, tp=8, pp=4, dp=1, mbs=1, gbs=64,
                                                      recompute="full"), "bf16", 0)
    a8 = memory.stage_memory_gb(GPT_175B, GPU, Layout(gpus=64, nodes=8, tp=8, pp=8, dp=1, mbs=1, gbs=64,
                                                      recompute="full"), "bf16", 0)
    assert a8["activations"] == pytest.approx(a4["activations"], rel=0.05)
    assert a8["weights"] < 0.6 * a4["weights"]
