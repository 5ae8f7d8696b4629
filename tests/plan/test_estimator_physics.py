"""The estimator's physics terms (issue 15), each against a worked example from its source."""

from __future__ import annotations

import dataclasses
import math

import pytest

from launcher.config.schema import ModelConfig
from launcher.core.layout import Layout
from launcher.plan import attention, flops, memory
from launcher.plan import step_time as st
from launcher.plan.constants import PRIOR, prior_for
from launcher.plan.estimator import estimate
from launcher.plan.hardware import SPECS, cluster_for, find_spec, fp8_peak_ratio, generation
from launcher.plan.stack import STACKS, stack_facts, stack_name
from launcher.plan.workload import Workload

A100 = cluster_for("a100-80g", 8)
H100 = cluster_for("h100-80g", 8)
LLAMA_7B = ModelConfig(name="llama2-7b", layers=32, hidden=4096, heads=32, ffn_hidden=11008, swiglu=True,
                       seq_len=4096, vocab=32000, tied_embeddings=False, norm="rmsnorm")
LLAMA3_8B = ModelConfig(name="llama3-8b", layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, swiglu=True,
                        seq_len=8192, vocab=128256, tied_embeddings=False, norm="rmsnorm")


# ------------------------------------------------------------------------------------------------ model states

@pytest.mark.parametrize("zero, expected_gb", [(0, 120.0), (1, 31.4), (2, 16.6), (3, 1.9)])
def test_zero_paper_figure1(zero, expected_gb):
    """Rajbhandari et al. 2020 Fig. 1 / §5: Ψ = 7.5B parameters, N_d = 64, K = 12 -> 120, 31.4, 16.6, 1.9 GB."""
    w, g, o = memory.state_bytes_per_param("fp16", zero, False, 64, states="deepspeed")
    assert 7.5 * (w + g + o) == pytest.approx(expected_gb, abs=0.05)


@pytest.mark.parametrize("precision, distopt, expected", [("bf16", False, 18), ("bf16", True, 6 + 12 / 8),
                                                          ("fp16", True, 4 + 16 / 8), ("fp32", True, 8 + 8 / 8)])
def test_megatron_distributed_optimizer_table(precision, distopt, expected):
    """Megatron-LM docs/user-guide/features/dist_optimizer.md: bytes/param, d = 8."""
    assert sum(memory.state_bytes_per_param(precision, 0, distopt, 8)) == pytest.approx(expected)


def test_stack_state_layouts():
    # DeepSpeed BF16_Optimizer under ZeRO-1: bf16 weights 2, bf16 .grad 2 + full fp32 accumulation 4, 12/d
    assert memory.state_bytes_per_param("bf16", 1, False, 4, "deepspeed_bf16") == (2, 6, 3)
    # FSDP mixed precision (fp32 master parameters): everything sharded, 16/d
    assert sum(memory.state_bytes_per_param("bf16", 3, False, 8, "fp32_master")) == pytest.approx(2.0)
    # KempnerForge casts the model to bf16: 8/d
    assert sum(memory.state_bytes_per_param("bf16", 3, False, 8, "bf16_pure")) == pytest.approx(1.0)
    # NeMo/Megatron-Bridge recipes: bf16 gradient buffers, distributed optimizer: 4 + 12/d
    assert sum(memory.state_bytes_per_param("bf16", 0, True, 2, "megatron_bf16_grads")) == pytest.approx(10)


def test_fsdp_units_in_flight_and_no_reshard():
    """FSDP keeps two units' unsharded 16-bit parameters (running + prefetched) and one unit's unsharded gradient;
    without resharding after the forward, every unit of the stage stays gathered until its backward."""
    lay = Layout(gpus=8, nodes=1, tp=1, pp=1, dp=8, mbs=1, gbs=8, recompute="full", zero_stage=3)
    sharded, replicated = memory.layer_params(LLAMA_7B)
    layer = sharded + replicated
    reshard = memory.stage_memory_gb(LLAMA_7B, A100, lay, "bf16", 0, workload=Workload(stack="pytorch_fsdp",
                                                                                       fsdp="full_shard"))
    assert reshard["gathered"] == pytest.approx((2 * 2 + 2) * layer / 1e9)   # pytorch_fsdp reduces in bf16
    keep = memory.stage_memory_gb(LLAMA_7B, A100, lay, "bf16", 0,
                                  workload=Workload(stack="pytorch_fsdp", fsdp="full_shard",
                                                    reshard_after_forward=False))
    assert keep["gathered"] == pytest.approx((32 * 2 + 2) * layer / 1e9)
    assert reshard["weights"] == pytest.approx(memory.stage_params(LLAMA_7B, lay, 0) * 4 / 8 / 1e9)


def test_hybrid_shard_shards_inside_the_node():
    lay = Layout(gpus=32, nodes=4, tp=1, pp=1, dp=32, mbs=1, gbs=32, zero_stage=3)
    assert memory.shard_group(A100, lay, Workload(fsdp="hybrid_shard")) == 8
    assert memory.shard_group(A100, lay, Workload(fsdp="full_shard")) == 32


def test_gradient_accumulation_without_sync_keeps_unsharded_gradients():
    """FSDP2 set_requires_gradient_sync(False) (KempnerForge): the stage's unsharded gradients live in the
    reduction dtype (fp32) from the first micro-batch to the one reduce-scatter of the step."""
    lay = Layout(gpus=8, nodes=1, tp=1, pp=1, dp=8, mbs=1, gbs=32, recompute="full", zero_stage=3)   # m = 4
    sync = memory.stage_memory_gb(LLAMA_7B, A100, lay, "bf16", 0, workload=Workload(stack="kempnerforge",
                                                                                    fsdp="fsdp2",
                                                                                    grad_accum_sync=True))
    nosync = memory.stage_memory_gb(LLAMA_7B, A100, lay, "bf16", 0, workload=Workload(stack="kempnerforge",
                                                                                      fsdp="fsdp2"))
    params = memory.stage_params(LLAMA_7B, lay, 0)
    # the buffers are the step's gradient storage (the sharded bf16 gradients, 2 B / 8, are gone until the last
    # micro-batch's reduce-scatter rebuilds them from the buffers), not short-lived memory
    assert sync["grads"] == pytest.approx(params * 2 / 8 / 1e9)
    assert nosync["grads"] == pytest.approx(params * 4 / 1e9)
    assert nosync["gathered"] == pytest.approx(sync["gathered"])
    assert nosync["temporaries"] == pytest.approx(sync["temporaries"])


def test_unsharded_accumulation_worked_example():
    """KempnerForge 7B (Llama-3-8B shape, 8.03B parameters), FSDP2 over 2 H200s, mbs 2, gbs 16 (4 micro-batches),
    bf16 model, fp32 reduction: 32.1 GB of unsharded fp32 buffers instead of 8.0 GB of sharded bf16 gradients; the
    states with them (weights 8.0 + AdamW 16.1 + 32.1) = 56.2 GB, where counting both and the buffers as short-lived
    memory gave 64.2 GB plus 6.4 GB of temporaries and allocator splits (measured peak: 67.0 GB allocated, with
    3.3 GB of checkpoints and 8.5 GB of loss buffers: 71.1 GB predicted now)."""
    kf8 = ModelConfig(name="kempnerforge-7b", layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336,
                      swiglu=True, seq_len=4096, vocab=128256, tied_embeddings=False, norm="rmsnorm")
    lay = Layout(gpus=2, nodes=1, tp=1, pp=1, dp=2, mbs=2, gbs=16, recompute="full", zero_stage=3)
    h200 = cluster_for("h200-141g", 2)
    parts = memory.stage_memory_gb(kf8, h200, lay, "bf16", 0, workload=Workload(stack="kempnerforge", fsdp="fsdp2"))
    assert memory.stage_params(kf8, lay, 0) == pytest.approx(8.03e9, rel=0.001)
    assert parts["grads"] == pytest.approx(32.1, abs=0.05)
    assert parts["weights"] + parts["grads"] + parts["optimizer"] == pytest.approx(56.2, abs=0.1)
    assert memory.unsharded_accumulation_bytes(8.03e9, lay.replace(gbs=4), stack_facts("kempnerforge"),
                                               Workload()) == 0.0         # one micro-batch: nothing accumulated


def test_fp8_weight_cache():
    """Transformer Engine caches an FP8 copy and transpose (2 B) of every linear weight; NeMo's FP8 parameters
    need none."""
    lay = Layout(gpus=8, nodes=1, tp=8, pp=1, dp=1, mbs=1, gbs=8, recompute="selective", sequence_parallel=True)
    bf16 = memory.stage_memory_gb(LLAMA3_8B, H100, lay, "bf16", 0)["weights"]
    fp8 = memory.stage_memory_gb(LLAMA3_8B, H100, lay, "fp8", 0)["weights"]
    sharded, _ = memory.layer_params(LLAMA3_8B)
    assert fp8 - bf16 == pytest.approx(32 * sharded / 8 * 2 / 1e9)
    nemo = memory.stage_memory_gb(LLAMA3_8B, H100, lay, "fp8", 0, workload=Workload(stack="nemo"))["weights"]
    assert nemo == pytest.approx(bf16)


# ------------------------------------------------------------------------------------------------ activations

def test_fp8_keeps_linear_inputs_in_8_bits_and_eager_modules_keep_more():
    sbh = 8192 * 4096
    base = memory.layer_activation_bytes(LLAMA3_8B, 1, 1, False, "selective", True, 2)
    # replicated 2e + 2 linear inputs e; sharded Q,K,V e(1 + 2g/a) + proj input e + gate/up 2e·f/h + FC2 input e·f/h
    f_h = 14336 / 4096
    assert base == pytest.approx(sbh * (4 + 4 + 2 * 1.5 + 2 + 4 * f_h + 2 * f_h))
    fp8 = memory.layer_activation_bytes(LLAMA3_8B, 1, 1, False, "selective", True, 2, fp8=True)
    assert base - fp8 == pytest.approx(sbh * (2 + 1 + 1 * f_h))          # 4 linear inputs lose one byte each
    eager = memory.layer_activation_bytes(LLAMA3_8B, 1, 1, False, "selective", True, 2, eager=True)
    assert eager - base == pytest.approx(sbh * (8 + 2 + 2 * f_h))   # fp32 norm inputs, output copy, SiLU output


def test_checkpoint_every_kth_layer_and_offload():
    lay = Layout(gpus=8, nodes=1, tp=1, pp=1, dp=8, mbs=1, gbs=8, recompute="full", zero_stage=3)
    def acts(every=1, **kw):
        return memory.stage_memory_gb(LLAMA_7B, A100, lay.replace(recompute_every=every), "bf16", 0,
                                      workload=Workload(**kw))["activations"]
    every = acts()
    half = acts(every=2)
    kept = memory.layer_activation_bytes(LLAMA_7B, 1, 1, False, "full", True, 2)
    whole = memory.layer_activation_bytes(LLAMA_7B, 1, 1, False, "none", True, 2)
    assert half - every == pytest.approx(16 * (whole - kept) / 1e9)      # 16 of 32 layers keep everything
    assert acts(offload=True) < every


def test_loss_buffers_per_stack():
    """Megatron's vocab-parallel fp32 cross-entropy: 6 B per logit element over V/t; cross_entropy(logits.float()):
    10 B; KempnerForge gathers the logits (the whole vocabulary on every TP rank) and takes the loss on them in bf16:
    logits 2 + log-softmax 2 + their gradients 2 + 2 = 8 B."""
    lay = Layout(gpus=4, nodes=1, tp=4, pp=1, dp=1, mbs=1, gbs=4, recompute="full", sequence_parallel=True)
    vocab = flops.padded_vocab(128256, 4)
    sb = 8192
    meg = memory.stage_memory_gb(LLAMA3_8B, H100, lay, "bf16", 0)["logits"]
    assert meg == pytest.approx((4 * sb * 4096 / 4 + 6 * sb * vocab / 4) / 1e9)
    kf = memory.stage_memory_gb(LLAMA3_8B, H100, lay, "bf16", 0, workload=Workload(stack="kempnerforge"))["logits"]
    assert kf == pytest.approx((4 * sb * 4096 / 4 + 8 * sb * vocab) / 1e9)


# ------------------------------------------------------------------------------------------------ communication

def test_group_bandwidth_uses_one_nic_per_member_per_node():
    assert st.group_bandwidth(A100, 8, 1) == 300                    # inside a node: NVLink
    a100_16 = cluster_for("a100-80g", 16)
    assert st.group_bandwidth(a100_16, 16, 1) == 8 * 25             # TP 16: 8 rings through 8 NICs
    assert st.group_bandwidth(a100_16, 2, 8) == 25                  # DP after TP 8: one member per node
    assert st.spans_nodes(a100_16, 16, 1) and not st.spans_nodes(a100_16, 8, 1)


def test_collective_latency_grows_with_the_ring_and_the_network():
    r = st.rates(PRIOR.with_values(net_eff=1.0), False)
    lat = PRIOR.latency_gpu_s
    assert st.collective_time_s(0.0, 8, 300, "all_reduce", r) == pytest.approx(lat)    # the reference call
    # 8 ranks across nodes: min(ring 14, tree 4·log2(8) = 12) steps of an InfiniBand hop (4x an NVLink hop)
    assert st.collective_time_s(0.0, 8, 300, "all_reduce", r, spans_nodes=True) == pytest.approx(12 * 4 / 14 * lat)
    # 512 ranks: a tree's 4·log2(512) = 36 steps, not the ring's 1022, across the network
    assert st.collective_time_s(0.0, 512, 300, "all_reduce", r, spans_nodes=True) == pytest.approx(
        36 * 4 / 14 * lat)


def test_zero3_moves_one_and_a_half_times_the_all_reduce_volume():
    """ZeRO §7.2: DP all-reduces 2Ψ per step; ZeRO-3 all-gathers Ψ in the forward and Ψ in the backward and
    reduce-scatters Ψ: 3Ψ (same bytes per element, one micro-batch, latency off)."""
    c = PRIOR.with_values(latency_gpu_s=0.0)
    cluster = cluster_for("a100-80g", 64)
    dp = Layout(gpus=64, nodes=8, tp=1, pp=1, dp=64, mbs=1, gbs=64, recompute="full")
    z3 = dp.replace(zero_stage=3)
    wl = Workload(stack="deepspeed")      # 2 B gathered, 2 B reduced
    r = st.rates(c, False, "ampere")
    pc_dp = st.step_pieces(LLAMA_7B, cluster, dp, "bf16", True, r, False, workload=wl)
    pc_z3 = st.step_pieces(LLAMA_7B, cluster, z3, "bf16", True, r, False, workload=wl)
    shard = pc_z3.stages[0].shard_comm
    assert shard / pc_dp.dp_reduce == pytest.approx(1.5, rel=1e-6)


def test_overlapped_communication_costs_its_exposed_part_and_the_interference():
    mb = st.MicrobatchTimes(compute=1.0, backward=0.6, recompute=0.0, tp_comm=0.0, pp_comm=0.0, cp_comm=0.0,
                            fixed=0.0, dispatch=0.1, shard_comm=0.4, shard_edge=0.02)
    assert st.microbatch_total(mb, 0, max, 0.1) == pytest.approx(1.0 + 0.1 * 0.4 + 0.02)   # hidden but slows
    slow = mb._replace(shard_comm=1.5)
    assert st.microbatch_total(slow, 0, max, 0.1) == pytest.approx(1.5 + 0.1 * 1.0 + 0.02)  # communication-bound


def test_tp_overlap_exposes_what_the_gemms_cannot_hide_plus_the_sms_it_takes():
    """Transformer Engine userbuffers (NVIDIA MLPerf GPT-3 tp_overlap/h100tp4mbs1.yaml): the TP collectives run
    beside the GEMMs; a micro-batch pays max(0, comm - GEMMs) + interference x the hidden part."""
    mb = st.MicrobatchTimes(compute=1.0, backward=0.6, recompute=0.0, tp_comm=0.0, pp_comm=0.0, cp_comm=0.0,
                            fixed=0.0, dispatch=0.1, shard_comm=0.0, shard_edge=0.0, tp_overlap=0.3, tp_window=0.8)
    assert st.microbatch_total(mb, 0, max, 0.0, 0.1) == pytest.approx(1.0 + 0.1 * 0.3)        # hidden
    slow = mb._replace(tp_overlap=1.0)
    assert st.microbatch_total(slow, 0, max, 0.0, 0.1) == pytest.approx(1.0 + 0.2 + 0.1 * 0.8)  # comm-bound


def test_nemo_overlaps_sequence_parallel_tp_communication_megatron_lm_does_not():
    """NeMo / Megatron-Bridge recipes run tp_comm_overlap under SP (userbuffers); Megatron-LM's default does not.
    Llama 3 70B, tp 8 with SP on one H100 node: NeMo's TP time is the interference share of Megatron-LM's."""
    lay = Layout(gpus=8, nodes=1, tp=8, pp=1, dp=1, mbs=1, gbs=8, recompute="none", sequence_parallel=True)
    model = dataclasses.replace(LLAMA3_8B, name="llama3-70b", layers=80, hidden=8192, heads=64, ffn_hidden=28672)
    c = PRIOR
    _, plain = st.step_time_s(model, H100, lay, "bf16", True, c, workload=Workload(stack="megatron_lm"))
    _, nemo = st.step_time_s(model, H100, lay, "bf16", True, c, workload=Workload(stack="nemo"))
    assert stack_facts("nemo").tp_comm_overlap and not stack_facts("megatron_lm").tp_comm_overlap
    assert nemo["tp_comm"] == pytest.approx(c.tp_overlap_interference * plain["tp_comm"], rel=1e-6)
    no_sp = lay.replace(sequence_parallel=False)      # userbuffers need SP: the all-reduces stay exposed
    _, nemo_ar = st.step_time_s(model, H100, no_sp, "bf16", True, c, workload=Workload(stack="nemo"))
    _, plain_ar = st.step_time_s(model, H100, no_sp, "bf16", True, c, workload=Workload(stack="megatron_lm"))
    assert nemo_ar["tp_comm"] == pytest.approx(plain_ar["tp_comm"], rel=1e-6) and nemo_ar["tp_comm"] > 0


def test_unfused_fp32_softmax_beyond_the_fused_kernels_length():
    """Megatron-DeepSpeed before its rebase (before_rebase, megatron/model/fused_softmax.py) fuses the causal softmax
    only up to 2048 keys; longer scores go through fp32 PyTorch ops (apply_query_key_layer_scaling forces
    attention_softmax_in_fp32): 15 B per score element held by the layer under backward against 2e + 1 = 5, and 42 B
    moved per element in the forward against 4e + 1 = 9."""
    gpt30b = ModelConfig(name="gpt-30b", layers=64, hidden=6144, heads=64, ffn_hidden=24576, seq_len=16384,
                         vocab=50257, norm="layernorm")
    args = (gpt30b, 1, 32, False, "none", False, 2)
    scores = 64 * 16384 / 6144 * 16384 * 6144 / 32     # a·s/h per s·b·h element, sharded over t
    fused, unfused = memory.layer_activation_bytes(*args), memory.layer_activation_bytes(*args, unfused_softmax=True)
    assert unfused - fused == pytest.approx((memory.UNFUSED_SOFTMAX_SCORE_BYTES - 5) * scores)
    assert stack_facts("megatron_deepspeed").fused_softmax_max_seq == 2048
    assert math.isinf(stack_facts("megatron_lm").fused_softmax_max_seq)
    # the README's old column: 4k ran, 16k ran out of memory on A100-40GB at TP 32 (no flash, no SP, full recompute)
    cluster = cluster_for("a100-40g", 32, 8)
    lay = Layout(gpus=32, nodes=4, tp=32, pp=1, dp=1, mbs=1, gbs=2, recompute="full")
    wl = Workload(stack="megatron_deepspeed")

    def peak(seq):
        model = dataclasses.replace(gpt30b, seq_len=seq)
        return memory.peak_memory_gb(model, cluster, lay, "fp16", False, PRIOR, workload=wl)[0]
    assert peak(4096) < 0.9 * cluster.gpu_mem_gb < peak(16384)
    r = st.rates(PRIOR, False, "ampere")
    c_old = st._context(gpt30b, cluster, lay, "fp16", False, r, False, wl, "")
    c_new = st._context(gpt30b, cluster, lay, "fp16", False, r, False, Workload(stack="megatron_lm"), "")
    assert st._layer_times(c_old)[5] / st._layer_times(c_new)[5] == pytest.approx(st.UNFUSED_SOFTMAX_BYTES / 9)


def test_fsdp_throughput_falls_with_data_parallel_size_across_nodes():
    """The reviewer's complaint: FSDP throughput per GPU was flat in dp. Every micro-batch's gathers now cross the
    network once dp leaves the node."""
    def per_gpu(nodes):
        n = 8 * nodes
        cluster = cluster_for("h100-80g", n, inter_node_gbytes_per_s=12.5)
        lay = Layout(gpus=n, nodes=nodes, tp=1, pp=1, dp=n, mbs=1, gbs=4 * n, recompute="full", zero_stage=3)
        return estimate(LLAMA_7B, cluster, lay, "bf16", workload=Workload(stack="pytorch_fsdp",
                                                                          fsdp="full_shard")).tokens_per_s / n
    one, four = per_gpu(1), per_gpu(4)
    assert four < 0.9 * one


# ------------------------------------------------------------------------------------------------ compute

def test_datasheet_peaks_and_generations():
    assert fp8_peak_ratio(H100) == pytest.approx(1979 / 989)
    assert fp8_peak_ratio(A100) is None                      # no FP8 tensor cores: fp8 runs at the 16-bit peak
    assert generation(H100) == "hopper" and generation(A100) == "ampere"
    assert find_spec("GB200").nvlink_domain == 72 and find_spec("H100-PCIe").hbm_gbytes_per_s == 2000
    assert find_spec("H100 80GB HBM3").name == "h100-80g"


@pytest.mark.parametrize("gpu, mib", [("h100-80g", 81559), ("a100-80g", 81920), ("h200", 143771), ("b200", 183359),
                                      ("gb200", 189471)])
def test_device_memory_is_what_nvidia_smi_reports_in_1e9_byte_gb(gpu, mib):
    """MLPerf Training v5.0 system descriptions (accelerator_memory_capacity, MiB as nvidia-smi prints it); the
    estimator compares GB = 1e9 bytes (an H200 entry of 141e9 GB once made every H200/Blackwell run fit)."""
    assert cluster_for(gpu, 8).gpu_mem_gb == pytest.approx(mib * 2 ** 20 / 1e9)


def test_blackwell_dense_peaks_are_half_the_sparse_datasheet_figures():
    """NVIDIA's GB200 NVL72 / HGX B200 table (per GPU, with sparsity): B200 4.5 PF bf16, 9 PF fp8, 7.7 TB/s;
    GB200 5 and 10 PF, 8 TB/s. The estimator keeps the dense figures."""
    b200, gb200 = find_spec("b200"), find_spec("gb200")
    assert (b200.bf16_tflops, b200.fp8_tflops, b200.hbm_gbytes_per_s) == (4500 / 2, 9000 / 2, 7700)
    assert (gb200.bf16_tflops, gb200.fp8_tflops, gb200.hbm_gbytes_per_s) == (5000 / 2, 10000 / 2, 8000)
    assert all(10 < s.mem_gb < 400 for s in SPECS)

def test_fp8_gemms_run_at_the_fp8_peak():
    c = PRIOR
    r = st.rates(c, False, "hopper")
    bf16 = st.gemm_time_s(8192, 8192, 8192, 989e12, r)
    fp8 = st.gemm_time_s(8192, 8192, 8192, 1979e12, r, fp8=True)
    assert fp8 / bf16 == pytest.approx(989 / 1979 / c.fp8_gemm_eff)
    lay = Layout(gpus=8, nodes=1, tp=1, pp=1, dp=8, mbs=1, gbs=64, recompute="selective")
    # the term at its a-priori value (the corpus fit moves fp8_gemm_eff, whose FP8 rows are all NeMo runs)
    prior = prior_for("megatron_lm")
    h_bf16 = estimate(LLAMA3_8B, H100, lay, "bf16", constants=prior).step_time_s
    h_fp8 = estimate(LLAMA3_8B, H100, lay, "fp8", constants=prior).step_time_s
    a_bf16, a_fp8 = (estimate(LLAMA3_8B, cluster_for("a100-80g", 8), lay, p, constants=prior).step_time_s
                     for p in ("bf16", "fp8"))
    assert h_fp8 < 0.85 * h_bf16
    assert a_fp8 == pytest.approx(a_bf16, rel=0.05)        # casts only, no faster GEMMs


def test_eager_stacks_move_more_bytes_and_torch_compile_fuses_them():
    lay = Layout(gpus=8, nodes=1, tp=1, pp=1, dp=8, mbs=2, gbs=16, recompute="none", zero_stage=3)
    def t(**kw):
        return estimate(LLAMA_7B, H100, lay, "bf16", workload=Workload(stack="pytorch_fsdp", fsdp="full_shard",
                                                                       **kw)).time_breakdown_s["compute"]
    assert t() > 1.05 * t(torch_compile=True)


# ------------------------------------------------------------------------------------------------ attention

@pytest.mark.parametrize("seq, measured_tflops", [(512, 430), (1024, 517), (2048, 566), (4096, 590), (8192, 614),
                                                  (16384, 621)])
def test_flash_curve_follows_flashattention3(seq, measured_tflops):
    """FlashAttention-3 forward on H100, head dim 128, non-causal (pytorch/benchmark D60117034): eff(s) =
    eff_max / (1 + S0/s) with eff_max = 630 TFLOP/s."""
    flops_ = 1e15
    predicted = flops_ / (attention.flash_forward_amount(flops_, seq, causal=False) / 630e12) / 1e12
    assert predicted == pytest.approx(measured_tflops, rel=0.02)


def test_causal_share_and_kernel_families():
    assert attention.causal_share(128) == 1.0 and attention.causal_share(1024) == pytest.approx(9 / 16)
    long_causal = attention.flash_forward_amount(1.0, 1 << 20) / attention.flash_forward_amount(1.0, 1 << 20,
                                                                                                 causal=False)
    assert long_causal == pytest.approx(0.5, rel=1e-3)
    assert attention.kernel_factor("fa2", "hopper") == attention.FA2_ON_HOPPER
    assert attention.kernel_factor("fa2", "ampere") == 1.0
    assert attention.kernel_factor("triton", "ampere") == attention.TRITON_FLASH
    assert attention.flash_backward_amount(1.0, 4096) / attention.flash_forward_amount(1.0, 4096) == \
        pytest.approx(2.5 / 0.8)


def test_long_context_attention_runs_below_the_gemms():
    """At 64k tokens the causal attention core runs at the flash kernel's ceiling (FlashAttention-3 on H100:
    ~0.64 of the peak forward, 0.8 of that backward), below a large GEMM's efficiency: per FLOP executed, the
    attention core takes longer than the layer's dense GEMMs (the old model priced it as a GEMM of head-dim width
    with the causal half skipped for free)."""
    long = ModelConfig(name="8b-64k", layers=32, hidden=4096, heads=32, kv_heads=8, ffn_hidden=14336, swiglu=True,
                       seq_len=65536, vocab=128256, tied_embeddings=False, norm="rmsnorm")
    lay = Layout(gpus=1, nodes=1, tp=1, pp=1, dp=1, mbs=1, gbs=1, recompute="none")
    r = st.rates(PRIOR, False, "hopper")
    ctx = st._context(long, H100, lay, "bf16", True, r, False, Workload(), "")
    dense, core_fwd, core_bwd, *_ = st._layer_times(ctx)
    tokens = 65536
    dense_flops = tokens * flops.dense_forward_flops_per_token(long)
    attn_flops = tokens * 0.5 * flops.attention_forward_flops_per_token(long)      # causal: the half executed
    assert core_fwd / attn_flops > dense / dense_flops
    assert core_bwd / core_fwd == pytest.approx(attention.FLASH_BACKWARD_FLOPS / attention.FLASH_BACKWARD_EFF)


# ------------------------------------------------------------------------------------------------ recompute

def test_recompute_every_kth_layer_flops_and_time():
    assert flops.recompute_flops(LLAMA_7B, 1, "full", 4) == pytest.approx(flops.recompute_flops(LLAMA_7B, 1, "full") / 4)
    lay = Layout(gpus=8, nodes=1, tp=1, pp=1, dp=8, mbs=1, gbs=8, recompute="full")
    every = estimate(LLAMA_7B, H100, lay, "bf16").time_breakdown_s["recompute"]
    fourth = estimate(LLAMA_7B, H100, lay.replace(recompute_every=4), "bf16").time_breakdown_s["recompute"]
    assert fourth == pytest.approx(every / 4, rel=1e-6)


def test_default_workload_reproduces_the_backend_stacks():
    assert stack_name(Workload(), "torch") == "parasweep_workload"
    assert stack_name(Workload(), "") == "megatron_lm" and stack_name(Workload(stack="nemo"), "torch") == "nemo"
    assert stack_facts("jax") is STACKS["megatron_lm"]
    lay = Layout(gpus=8, nodes=1, tp=2, pp=1, dp=4, mbs=1, gbs=8)
    model = ModelConfig(name="m", layers=4, hidden=1024, heads=8, seq_len=1024, vocab=32000)
    plain = estimate(model, A100, lay, "bf16", backend="torch")
    explicit = estimate(model, A100, lay, "bf16", backend="torch", workload=Workload(stack="parasweep_workload"))
    assert plain.step_time_s == explicit.step_time_s and plain.peak_mem_gb == explicit.peak_mem_gb
    assert math.isfinite(plain.step_time_s)


# ------------------------------------------------------------------------------------------------ memory quantities

def test_measured_quantities_allocated_reserved_device():
    """launcher.plan.mem_quantity's worked example: gpt-1.7b on one H100, mbs 2, torch workload (parasweep's own
    sweep measured 41.6 GB max_memory_allocated). reserved = allocated + fragmentation share x short-lived memory;
    device = reserved + the CUDA context and NCCL buffers (1.5 GB)."""
    from launcher.plan import calibrate as cal
    from launcher.plan import mem_quantity as mq

    model = ModelConfig(name="gpt-1.7b", layers=24, hidden=2304, heads=24, seq_len=2048, vocab=51200)
    layout = Layout(gpus=1, nodes=1, tp=1, pp=1, dp=1, mbs=2, gbs=8, recompute="none")
    f = cal.trial_features(model, cluster_for("h100-80g", 1), layout, "bf16", True, backend="torch")
    allocated, reserved, device = (float(x[0]) for x in cal.FeatureTable([f]).peak_mem_quantities_gb(PRIOR))
    short_lived = f.mem_transient_gb[0]
    assert allocated == pytest.approx(f.mem_fixed_gb[0] + PRIOR.transient_share * short_lived)
    assert reserved - allocated == pytest.approx(PRIOR.fragmentation_share * short_lived)
    assert device - reserved == pytest.approx(PRIOR.gpu_context_gb) and 0.5 <= PRIOR.gpu_context_gb <= 2.0
    assert allocated == pytest.approx(41.6, rel=0.05)
    assert mq.bounds("allocated_or_reserved", allocated, reserved, device) == (allocated, reserved)
    assert mq.bounds("unknown", allocated, reserved, device) == (allocated, device)
    assert mq.comparable(41.0, allocated, reserved) == pytest.approx(max(41.0, allocated))
    assert mq.parse_mem_how("reserved: Megatron report, max reserved") == "reserved" and mq.parse_mem_how("") == ""


def test_nanotron_ddp_buckets_and_fp32_loss_buffers():
    """huggingface/nanotron (2411b022): DistributedDataParallel over dp keeps bf16 gradient buckets (2 B/param) next
    to the fp32 accumulation buffers; sharded_cross_entropy(..., dtype=torch.float) holds the bf16 logits, their fp32
    copy and the exponentiated copy (2 + 4 + 4 = 10 B per logit)."""
    model = ModelConfig(name="1b", layers=16, hidden=2048, heads=32, ffn_hidden=8192, swiglu=True, seq_len=4096,
                        vocab=131072, tied_embeddings=True, norm="rmsnorm")
    nanotron = Workload(stack="nanotron")

    def parts(dp: int) -> dict:
        layout = Layout(gpus=dp, nodes=1, tp=1, pp=1, dp=dp, mbs=1, gbs=dp * 4, recompute="none")
        return memory.stage_memory_gb(model, cluster_for("h100-80g", dp), layout, "bf16", 0, True, PRIOR,
                                      workload=nanotron)

    one, eight = parts(1), parts(8)
    params = memory.stage_params(model, Layout(gpus=1, nodes=1, tp=1, pp=1, dp=1, mbs=1, gbs=4), 0)
    assert eight["grads"] - one["grads"] == pytest.approx(params * 2.0 / 1e9)      # the buckets, dp > 1 only
    assert stack_facts("nanotron").logits_bytes == 10.0
    vocab_part = 10.0 * 4096 * flops.padded_vocab(131072, 1) / 1e9
    assert one["logits"] == pytest.approx(vocab_part + 2 * 2 * 4096 * 2048 / 1e9)


def test_unfused_16bit_softmax_of_megatrons_local_transformer():
    """Megatron-LM's local transformer as the megatron_lm backend runs it (--no-masked-softmax-fusion,
    attention_softmax_in_fp32 off): masked_fill, softmax and dropout as 16-bit PyTorch ops at every length, 6e + 1 =
    13 B moved per score element against the fused kernel's 9; what the backward keeps is the fused kernel's (softmax
    output, dropout mask and output: 5 B). GPT-1.7B (24 heads, h 2304), s 2048, mbs 2: 2.013e8 score elements per
    layer, 0.81 GB more forward traffic per layer."""
    gpt = ModelConfig(name="gpt-1.7b", layers=24, hidden=2304, heads=24, ffn_hidden=9216, seq_len=2048, vocab=51200,
                      norm="layernorm")
    one = cluster_for("h100-80g", 1, 1)
    lay = Layout(gpus=1, nodes=1, tp=1, pp=1, dp=1, mbs=2, gbs=16, recompute="none")
    r = st.rates(PRIOR, False, "hopper")
    local = st._context(gpt, one, lay, "bf16", False, r, False, Workload(stack="megatron_local"), "")
    fused = st._context(gpt, one, lay, "bf16", False, r, False, Workload(stack="megatron_lm"), "")
    elements = 24 * 2048 * 2048 * 2
    assert elements == pytest.approx(2.013e8, rel=0.001)
    assert st._layer_times(local)[5] - st._layer_times(fused)[5] == pytest.approx(elements * 4)
    assert elements * 4 / 1e9 == pytest.approx(0.81, abs=0.01)
    assert not stack_facts("megatron_local").softmax_fallback_fp32 and stack_facts("megatron_deepspeed").softmax_fallback_fp32
    keep = [memory.stage_memory_gb(gpt, one, lay, "bf16", 0, flash=False, workload=Workload(stack=s))["activations"]
            for s in ("megatron_local", "megatron_lm")]
    eager = memory.layer_activation_bytes(gpt, 2, 1, False, "none", False, 2, eager=True)
    plain = memory.layer_activation_bytes(gpt, 2, 1, False, "none", False, 2)
    assert keep[0] - keep[1] == pytest.approx(24 * (eager - plain) / 1e9)   # only the eager modules' extra tensors


def test_embedded_workload_keeps_the_tensors_of_eager_modules():
    """launcher/workload/model.py: nn.RMSNorm under autocast keeps an fp32 copy of its input (2 norms x 4 B),
    F.silu(gate(x)) * fc1(x) keeps the SiLU output (e·f/h), the attention output's transpose + reshape copy is kept by
    the output projection (e): 8 + 2 + 2 x 4 = 18 B per s·b·h element more per layer for the Llama-3.2-1B shape
    (f/h = 4); at seq 4096, mbs 1 that is 16 x 8.39M x 18 B = 2.42 GB (measured on an H100: 36.2 GB allocated against
    33.5 GB predicted without them, tests/data/published/parasweep_h100_own.csv, 2026-11-26 rows)."""
    llama1b = ModelConfig(name="llama3.2-1b", layers=16, hidden=2048, heads=32, kv_heads=8, ffn_hidden=8192,
                          swiglu=True, seq_len=4096, vocab=128256, tied_embeddings=True, norm="rmsnorm")
    one = cluster_for("h100-80g", 1, 1)
    lay = Layout(gpus=1, nodes=1, tp=1, pp=1, dp=1, mbs=1, gbs=8, recompute="none")
    assert stack_facts("parasweep_workload").eager_activations and not stack_facts("parasweep_workload").eager
    acts = memory.stage_memory_gb(llama1b, one, lay, "bf16", 0, flash=True,
                                  workload=Workload(stack="parasweep_workload"))["activations"]
    plain = memory.layer_activation_bytes(llama1b, 1, 1, False, "none", True, 2)
    assert acts - 16 * plain / 1e9 == pytest.approx(2.42, abs=0.01)
