"""The estimator's mixture-of-experts terms (launcher.plan.moe) against a worked example, and how they enter memory,
step time and FLOPs."""

from __future__ import annotations

import dataclasses

import pytest

from launcher.config.schema import ClusterConfig, ModelConfig
from launcher.core.layout import Layout
from launcher.plan import moe
from launcher.plan.constants import DEFAULT
from launcher.plan.flops import model_flops
from launcher.plan.memory import GB, stage_memory_gb, stage_params
from launcher.plan.step_time import step_time_s

# Worked example: h 64, E 4 experts of F 128 (GeLU: 2 matrices), top-2, 2 layers, s 32, mbs 2, on tp 2 x dp 2, ep 2.
MODEL = ModelConfig(name="m", layers=2, hidden=64, heads=4, seq_len=32, vocab=256, num_experts=4, moe_topk=2,
                    moe_ffn_hidden=128)
LAYOUT = Layout(gpus=4, nodes=1, tp=2, pp=1, dp=2, ep=2, mbs=2, gbs=8, sequence_parallel=True)
CLUSTER = ClusterConfig(name="c", gpu="A100", gpus_per_node=4, intra_node_gbytes_per_s=100.0,
                        inter_node_gbytes_per_s=10.0, nodes=4)


def test_worked_example_amounts():
    # L/p x E/ep x 2·h·F/etp = 2 x 2 x 2·64·128 = 65536 expert parameters per rank
    assert moe.expert_params(MODEL, LAYOUT) == 65536
    assert moe.expert_params(MODEL, LAYOUT.replace(etp=2)) == 32768
    assert moe.expert_data_parallel(LAYOUT) == 2                  # tp·cp·dp / (ep·etp) = 4 / 2
    assert moe.local_tokens(MODEL, LAYOUT) == 32                   # mbs·s/(cp·tp) = 2·32/2
    assert moe.routed_rows(MODEL, LAYOUT) == 64                    # T·k·etp
    assert moe.rows_per_expert(MODEL, LAYOUT) == 32                # 64 rows over E/ep = 2 local experts
    # router 32·4·8 + rows of h 2·64·64·4 + FC1 output and FC2 input 64·128·2·4 (fp32)
    assert moe.activation_bytes(MODEL, LAYOUT, 4) == 1024 + 32768 + 65536
    assert moe.dispatch_bytes(MODEL, LAYOUT, 4) == 32 * 2 * 64 * 4
    dense = dataclasses.replace(MODEL, num_experts=0, moe_ffn_hidden=0)
    assert moe.expert_params(dense, LAYOUT) == moe.activation_bytes(dense, LAYOUT, 4) == 0.0


def test_all_to_all_bandwidth_per_tier_and_the_measured_figure():
    # 2 ranks in one node: half the buffer leaves, over NVLink
    assert moe.all_to_all_seconds_per_byte(CLUSTER, 2, 1) == (pytest.approx(0.5 / 100e9), False)
    # 4 ranks 2 apart on 4-GPU nodes: 2 per node; 1/4 stays on the node, 2/4 go through the 10 GB/s NIC
    assert moe.all_to_all_seconds_per_byte(CLUSTER, 4, 2) == (pytest.approx(0.5 / 10e9), True)
    measured = dataclasses.replace(CLUSTER, intra_node_all_to_all_gbytes_per_s=40.0)
    assert moe.all_to_all_seconds_per_byte(measured, 2, 1)[0] == pytest.approx(0.5 / 40e9)
    assert moe.all_to_all_seconds_per_byte(CLUSTER, 1, 1) == (0.0, False)


def test_experts_are_sharded_by_ep_in_memory():
    one = stage_memory_gb(MODEL, CLUSTER, LAYOUT.replace(ep=1), "bf16", 0, backend="megatron_lm")
    two = stage_memory_gb(MODEL, CLUSTER, LAYOUT, "bf16", 0, backend="megatron_lm")
    halved = 65536  # the expert parameters ep 2 moves off the rank
    assert one["weights"] - two["weights"] == pytest.approx(halved * 2.0 / GB)      # bf16 weights
    assert one["grads"] - two["grads"] == pytest.approx(halved * 4.0 / GB)          # fp32 main grads
    assert one["optimizer"] - two["optimizer"] == pytest.approx(halved * 12.0 / GB)
    # the distributed optimizer shards the experts' state over the expert-dp group (2 ranks at ep 2)
    distopt = stage_memory_gb(MODEL, CLUSTER, LAYOUT.replace(distributed_optimizer=True), "bf16", 0,
                              backend="megatron_lm")
    dense = stage_params(MODEL, LAYOUT, 0)       # sharded over dp x cp = 2, the experts over expert-dp = 2
    assert two["optimizer"] - distopt["optimizer"] == pytest.approx((dense + 65536) * 12.0 / 2 / GB)
    wide = LAYOUT.replace(gpus=8, dp=4, distributed_optimizer=True)               # expert-dp 4, dp 4
    assert stage_memory_gb(MODEL, CLUSTER, wide, "bf16", 0, backend="megatron_lm")["optimizer"] == pytest.approx(
        (dense + 65536) * 12.0 / 4 / GB)


def test_activations_grow_with_top_k_by_the_routed_rows():
    top1 = stage_memory_gb(dataclasses.replace(MODEL, moe_topk=1), CLUSTER, LAYOUT, "bf16", 0, backend="megatron_lm")
    top2 = stage_memory_gb(MODEL, CLUSTER, LAYOUT, "bf16", 0, backend="megatron_lm")
    rows = 32  # one more slot per token: T more rows, each h (input, output) and F·2 (FC1 output, FC2 input), 2 B
    per_layer = rows * (2 * 64 + 128 * 2) * 2
    assert top2["activations"] - top1["activations"] == pytest.approx(MODEL.layers * per_layer / GB)


def test_dispatch_is_priced_on_the_all_to_all_bandwidth():
    def ep_comm(cluster: ClusterConfig, layout: Layout = LAYOUT) -> float:
        return step_time_s(MODEL, cluster, layout, "bf16", True, backend="megatron_lm")[1]["ep_comm"]

    assert ep_comm(CLUSTER, LAYOUT.replace(ep=1)) == 0.0
    fast, slow = ep_comm(CLUSTER), ep_comm(dataclasses.replace(CLUSTER, intra_node_all_to_all_gbytes_per_s=50.0))
    # per layer 2 all-to-alls forward + 2 backward of an 8 KB buffer (bf16: 32·2·64·2 B), half of it leaving;
    # m = 2 micro-batches, 2 layers; a slower all-to-all adds only its byte term
    nbytes, m = 32 * 2 * 64 * 2, 2
    extra = m * MODEL.layers * 4 * nbytes * 0.5 * (1 / 50e9 - 1 / 100e9) / DEFAULT.net_eff
    assert slow - fast == pytest.approx(extra)
    full = step_time_s(MODEL, CLUSTER, LAYOUT.replace(recompute="full"), "bf16", True, backend="megatron_lm")
    assert full[1]["ep_comm"] > fast            # full recompute repeats the forward's exchanges


def test_many_small_experts_lose_gemm_efficiency():
    few = dataclasses.replace(MODEL, num_experts=4, hidden=1024, heads=8, seq_len=1024, moe_ffn_hidden=2048)
    many = dataclasses.replace(few, num_experts=64)     # same FLOPs per token, 16x fewer rows per expert
    lay = LAYOUT.replace(ep=1)
    t_few = step_time_s(few, CLUSTER, lay, "bf16", True, backend="megatron_lm")[1]["compute"]
    t_many = step_time_s(many, CLUSTER, lay, "bf16", True, backend="megatron_lm")[1]["compute"]
    assert model_flops(few, 8, 256) == model_flops(many, 8, 256)
    assert t_many > 1.05 * t_few


def test_moe_flops_count_the_experts_a_token_visits():
    shared = dataclasses.replace(MODEL, shared_expert_ffn_hidden=96)
    # Megatron's formula: the FFN term with moe_ffn·topk + shared in place of ffn_hidden; the router not counted
    dense_equivalent = ModelConfig(name="d", layers=2, hidden=64, heads=4, seq_len=32, vocab=256,
                                   ffn_hidden=128 * 2 + 96)
    assert model_flops(shared, 8, 256) == model_flops(dense_equivalent, 8, 256)
