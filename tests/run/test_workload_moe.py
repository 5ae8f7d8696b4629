"""The embedded workload's mixture-of-experts layer: router, dispatch, aux loss (one process), and expert parallelism
end to end (real torchrun, gloo, CPU): every ep/etp/tp/pp/dp layout trains exactly like the single-process MoE run.

Multi-process cases compare per-iteration global-batch losses to 1e-4 under plain SGD (lr 0.5) with an aux-loss
coefficient of 0.1: a wrongly scaled expert gradient (e.g. divided by the expert-dp size instead of dp) or a
wrongly scaled aux loss moves the next losses by ~1e-3 to 1e-2. One ep=2 case is fast; the others are `slow`.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from launcher.workload import __main__ as cli
from launcher.workload import moe
from launcher.workload.model import GPTConfig, StageModel, count_params, iteration_flops
from launcher.workload.moe import ExpertGroups, Experts, MoE, MoEConfig, load_balancing_loss, route

REPO = next(p for p in Path(__file__).resolve().parents if (p / "pyproject.toml").is_file())
TINY = ["--layers", "4", "--hidden", "64", "--heads", "4", "--seq-len", "32", "--vocab", "128", "--gbs", "8",
        "--optimizer", "sgd", "--lr", "0.5", "--warmup-iters", "1", "--measure-iters", "3", "--seed", "11"]
MOE = ["--num-experts", "4", "--moe-topk", "2", "--moe-ffn-hidden", "96", "--shared-expert-ffn-hidden", "64",
       "--moe-aux-loss-coeff", "0.1"]


# ------------------------------------------------------------------------------------------------ one process

def test_router_takes_top_k_logits_then_softmax_over_them():
    """Megatron's default (pre-softmax off): softmax over the k chosen logits, so each token's probs sum to 1."""
    logits = torch.tensor([[1.0, 3.0, 2.0, 0.0], [0.5, -1.0, 0.0, 4.0]])
    probs, ids = route(logits, topk=2)
    assert ids.tolist() == [[1, 2], [3, 0]]
    e = math.e
    torch.testing.assert_close(probs[0], torch.tensor([e / (e + 1), 1 / (e + 1)]))
    torch.testing.assert_close(probs.sum(-1), torch.ones(2))
    # not top-k of the full softmax (those would not sum to 1)
    assert probs[0, 0] > torch.softmax(logits[0], -1)[1]


def test_load_balancing_loss_against_a_hand_computed_example():
    """coeff * E / (k T^2) * sum_e (sum_t p_te) * n_e, p the softmax over all experts, n_e the assignments."""
    logits = torch.log(torch.tensor([[0.5, 0.25, 0.25], [0.2, 0.2, 0.6]]))  # softmax gives these probs back
    ids = torch.tensor([[0], [2]])                                            # top-1: expert 0, expert 2
    # sum_t p: (0.7, 0.45, 0.85); n: (1, 0, 1); E = 3, k = 1, T = 2
    expected = 0.01 * 3 / (1 * 2 * 2) * (0.7 * 1 + 0.45 * 0 + 0.85 * 1)
    assert load_balancing_loss(logits, ids, 3, 0.01).item() == pytest.approx(expected, rel=1e-6)
    # perfectly balanced routing with uniform probs gives coeff (the minimum of E * sum f_e P_e)
    uniform, balanced = torch.zeros(4, 4), torch.tensor([[0, 1], [2, 3], [0, 1], [2, 3]])
    assert load_balancing_loss(uniform, balanced, 4, 0.5).item() == pytest.approx(0.5)


def _naive(layer: MoE, x: torch.Tensor) -> torch.Tensor:
    """Token by token: sum over its top-k experts of prob * expert(token), plus the shared expert."""
    flat = x.reshape(-1, x.shape[-1])
    probs, ids = route(layer.router(flat), layer.cfg.topk)
    ex = layer.experts
    out = torch.zeros_like(flat)
    for t in range(flat.shape[0]):
        for p, e in zip(probs[t], ids[t]):
            h = F.linear(flat[t], ex.fc1[e])
            h = F.silu(F.linear(flat[t], ex.gate[e])) * h if ex.gate is not None else F.gelu(h)
            out[t] += p * F.linear(h, ex.fc2[e])
    if layer.shared is not None:
        out += layer.shared(flat)
    return out.view_as(x)


@pytest.mark.parametrize("swiglu, shared", [(False, 0), (True, 24)], ids=["gelu", "swiglu-shared"])
def test_dispatch_reaches_the_chosen_experts_and_combine_restores_token_order(swiglu, shared):
    cfg = MoEConfig(num_experts=5, topk=2, ffn_hidden=12, shared_ffn_hidden=shared)
    torch.manual_seed(0)
    layer = MoE(16, cfg, swiglu)
    for p in layer.parameters():
        torch.nn.init.normal_(p, std=0.3)
    x = torch.randn(3, 7, 16)
    y = layer(x)
    torch.testing.assert_close(y, _naive(layer, x), rtol=1e-5, atol=1e-6)
    # gradients reach every expert that received a token, and only those
    y.square().sum().backward()
    used = set(route(layer.router(x.reshape(-1, 16)), 2)[1].flatten().tolist())
    touched = {e for e in range(5) if layer.experts.fc1.grad[e].abs().sum() > 0}
    assert touched == used


def test_aux_loss_gradient_is_injected_with_the_main_loss_scale():
    """The layer output carries d(aux)/d(router) in backward, times set_aux_loss_scale, without changing y."""
    cfg = MoEConfig(num_experts=4, topk=2, ffn_hidden=8, aux_loss_coeff=0.3)
    torch.manual_seed(1)
    layer = MoE(8, cfg, swiglu=False)
    x = torch.randn(2, 5, 8)
    try:
        moe.set_aux_loss_scale(0.25)
        layer(x).sum().backward()
        injected = layer.router.weight.grad.clone()
    finally:
        moe.set_aux_loss_scale(1.0)
    layer.zero_grad()
    plain = MoEConfig(**{**cfg.__dict__, "aux_loss_coeff": 0.0})
    layer.cfg = plain
    y = layer(x)
    logits = layer.router(x.reshape(-1, 8))
    aux = load_balancing_loss(logits, route(logits, 2)[1], 4, 0.3)
    (y.sum() + 0.25 * aux).backward()
    torch.testing.assert_close(injected, layer.router.weight.grad)
    assert aux.item() > 0


def test_experts_draw_the_same_weights_whatever_the_ep_and_etp_shard():
    cfg = MoEConfig(num_experts=4, topk=1, ffn_hidden=6)

    def built(ep: int, ep_rank: int, etp: int, etp_rank: int) -> Experts:
        ex = Experts(5, cfg, swiglu=True, groups=ExpertGroups(ep=ep, ep_rank=ep_rank, etp=etp, etp_rank=etp_rank))
        ex.init_from_seed(42, torch.device("cpu"), 0.02)
        return ex

    whole = built(1, 0, 1, 0)
    second_half = built(2, 1, 1, 0)
    torch.testing.assert_close(second_half.fc1, whole.fc1[2:], rtol=0, atol=0)
    shards = [built(2, 1, 2, r) for r in range(2)]
    torch.testing.assert_close(torch.cat([s.fc1 for s in shards], dim=1), whole.fc1[2:], rtol=0, atol=0)
    torch.testing.assert_close(torch.cat([s.gate for s in shards], dim=1), whole.gate[2:], rtol=0, atol=0)
    torch.testing.assert_close(torch.cat([s.fc2 for s in shards], dim=2), whole.fc2[2:], rtol=0, atol=0)
    assert all(p.expert_parallel for p in whole.parameters())
    assert not torch.equal(whole.fc1[0], whole.fc1[1])


def test_moe_model_counts_every_expert_and_megatron_flops():
    experts = MoEConfig(num_experts=8, topk=2, ffn_hidden=48, shared_ffn_hidden=32)
    cfg = GPTConfig(layers=2, hidden=32, heads=4, kv_heads=2, ffn_hidden=128, seq_len=16, vocab=64, swiglu=True,
                    moe=experts)
    model = StageModel(cfg, [0, 1], has_embedding=True, has_head=True, seed=0)
    assert count_params(cfg) == sum(p.numel() for p in model.parameters())
    # Megatron's num_floating_point_operations: the FFN term is (moe_ffn * topk + shared) * 3/2 (SwiGLU)
    B, s, L, h, a, g, V = 4, 16, 2, 32, 4, 2, 64
    expected = 12 * B * s * L * h**2 * ((1 + g / a + s / h) + (48 * 2 + 32) / h * 1.5 + V / (2 * L * h))
    assert iteration_flops(cfg, B, "none")[0] == pytest.approx(expected, rel=1e-12)


def test_dense_layers_have_no_moe_parts():
    dense = GPTConfig(layers=1, hidden=16, heads=2, kv_heads=2, ffn_hidden=32, seq_len=8, vocab=32)
    model = StageModel(dense, [0], has_embedding=False, has_head=False, seed=0)
    names = {n for n, _ in model.named_parameters()}
    assert names == {f"layers.0.{n}.weight" for n in ("attn.q", "attn.k", "attn.v", "attn.o", "mlp.fc1", "mlp.fc2",
                                                      "norm1", "norm2")} | {"layers.0.norm1.bias", "layers.0.norm2.bias"}



@pytest.mark.parametrize("argv, world, word", [
    (["--ep", "2", "--dp", "2"], 2, "--ep 2 needs --num-experts"),
    (["--num-experts", "6", "--ep", "4", "--dp", "4"], 4, "--num-experts 6 must be divisible by --ep 4"),
    (["--num-experts", "4", "--moe-topk", "5"], 1, "--moe-topk 5 must be <= --num-experts 4"),
    (["--num-experts", "4", "--ep", "4", "--dp", "2"], 2, "--ep 4 x --etp 1 = 4 must divide --tp 1 x --dp 2 = 2"),
    (["--num-experts", "4", "--ep", "2", "--tp", "2"], 2, "--ep 2 x --etp 2 = 4 must divide --tp 2 x --dp 1"),
    (["--num-experts", "4", "--tp", "2", "--moe-ffn-hidden", "33"], 2, "--moe-ffn-hidden 33 must be divisible"),
    (["--num-experts", "4", "--tp", "2", "--shared-expert-ffn-hidden", "7"], 2, "--shared-expert-ffn-hidden 7"),
    (["--num-experts", "4", "--tp", "2", "--seq-len", "33"], 2, "--seq-len 33 must be divisible by --tp 2"),
    (["--num-experts", "4", "--dp", "2", "--zero-stage", "3"], 2, "--zero-stage 3 is not supported"),
    (["--num-experts", "4", "--moe-aux-loss-coeff", "-1"], 1, "--moe-aux-loss-coeff -1.0 must be >= 0"),
    (["--num-experts", "0"], 1, "--num-experts 0 must be >= 1"),
])
def test_validate_names_the_moe_argument(argv, world, word):
    problem = cli.validate(cli.build_parser().parse_args(argv), world)
    assert problem is not None and word in problem, problem


@pytest.mark.parametrize("argv, world", [
    (["--num-experts", "8", "--ep", "4", "--dp", "4"], 4),
    (["--num-experts", "4", "--ep", "2", "--tp", "2", "--etp", "1"], 2),     # folding: ep over the tp ranks
    (["--num-experts", "4", "--ep", "2", "--tp", "2", "--dp", "2"], 4),      # classic: etp = tp, ep inside dp
])
def test_megatron_expert_meshes_are_accepted(argv, world):
    assert cli.validate(cli.build_parser().parse_args(argv), world) is None


def test_moe_argument_error_exits_2_with_one_line():
    proc = subprocess.run([sys.executable, "-m", "launcher.workload", "--num-experts", "3", "--ep", "2", "--dp", "2"],
                          cwd=REPO, capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO), "WORLD_SIZE": "2"})
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert lines == ["parasweep workload: error: --num-experts 3 must be divisible by --ep 2"]


# ------------------------------------------------------------------------------------------------ multi-process

def run_workload(nproc: int, *args: str, timeout_s: int = 300) -> subprocess.CompletedProcess:
    """torchrun with nproc ranks; one rank runs without torchrun (the workload's world-1 mode, seconds faster)."""
    launcher = ["-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}"] if nproc > 1 else []
    cmd = [sys.executable, *launcher, "-m", "launcher.workload", *args]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout_s, env=env)


def result_of(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("PARASWEEP_RESULT ")]
    assert len(lines) == 1, proc.stdout
    return json.loads(lines[0].removeprefix("PARASWEEP_RESULT "))


def assert_same_losses(result: dict, reference: dict) -> None:
    assert len(result["losses"]) == len(reference["losses"]) == 4
    for got, want in zip(result["losses"], reference["losses"]):
        assert abs(got - want) <= 1e-4, (result["losses"], reference["losses"])


def train(nproc: int, *args: str) -> dict:
    return result_of(run_workload(nproc, *TINY, *MOE, *args))


@pytest.fixture(scope="module")
def single():
    return train(1)


def test_ep2_matches_single_process_and_reports_the_moe_config():
    """Fast (2 layers): two ranks, each with 2 of the 4 experts; tokens cross with all_to_all_single over gloo."""
    single = train(1, "--layers", "2")
    result = train(2, "--layers", "2", "--dp", "2", "--ep", "2")
    assert_same_losses(result, single)
    assert single["losses"][-1] < single["losses"][0] - 0.02  # it trains
    assert result["config"]["ep"] == 2 and result["config"]["edp"] == 1 and result["config"]["etp"] == 1
    assert {k: single["config"][k] for k in ("num_experts", "moe_topk", "moe_ffn_hidden", "shared_expert_ffn_hidden",
                                             "moe_aux_loss_coeff")} == {
        "num_experts": 4, "moe_topk": 2, "moe_ffn_hidden": 96, "shared_expert_ffn_hidden": 64,
        "moe_aux_loss_coeff": 0.1}
    assert result["n_params"] == single["n_params"]


SLOW_LAYOUTS = {
    "dp4-ep2": (4, ["--dp", "4", "--ep", "2"]),                              # expert-dp groups of 2
    "dp4-ep4-distributed-optimizer": (4, ["--dp", "4", "--ep", "4", "--distributed-optimizer"]),
    "dp2-ep2-zero1": (2, ["--dp", "2", "--ep", "2", "--zero-stage", "1"]),
    "tp2-dp2-ep2": (4, ["--tp", "2", "--dp", "2", "--ep", "2"]),             # Megatron default etp = tp
    "tp2-dp2-ep2-sp": (4, ["--tp", "2", "--dp", "2", "--ep", "2", "--sequence-parallel"]),
    "tp2-ep2-etp1": (2, ["--tp", "2", "--ep", "2", "--etp", "1"]),          # folding: ep across the tp ranks
    "dp2-etp2": (2, ["--dp", "2", "--etp", "2"]),                            # experts split across dp ranks
    "pp2-dp2-ep2": (4, ["--pp", "2", "--dp", "2", "--ep", "2"]),
    "pp2-dp2-ep2-recompute-full": (4, ["--pp", "2", "--dp", "2", "--ep", "2", "--recompute", "full"]),
    "pp2-vpp2-dp2-ep2-selective": (4, ["--pp", "2", "--vpp", "2", "--dp", "2", "--ep", "2",
                                       "--recompute", "selective"]),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SLOW_LAYOUTS))
def test_moe_layout_matches_single_process(name, single):
    nproc, args = SLOW_LAYOUTS[name]
    result = train(nproc, *args)
    assert_same_losses(result, single)
    assert result["world_size"] == nproc


@pytest.mark.slow
def test_swiglu_moe_under_tp2_ep2_matches():
    extra = ["--swiglu", "--kv-heads", "2", "--norm", "rmsnorm"]
    assert_same_losses(train(4, "--tp", "2", "--dp", "2", "--ep", "2", *extra), train(1, *extra))


@pytest.mark.slow
def test_memory_limit_with_experts_gives_the_real_allocator_error():
    """The CPU stand-in's cap still fails inside torch's allocator with ep = 2 (not in a oneDNN kernel compile)."""
    big = ["--layers", "2", "--hidden", "128", "--heads", "4", "--seq-len", "256", "--vocab", "4096", "--mbs", "8",
           "--gbs", "16", "--warmup-iters", "0", "--measure-iters", "1", "--num-experts", "4", "--dp", "2",
           "--ep", "2"]
    proc = run_workload(2, *big, "--mem-limit-mb", "60")
    assert proc.returncode != 0
    assert "DefaultCPUAllocator: can't allocate memory" in proc.stdout + proc.stderr
    assert "could not create a primitive" not in proc.stdout + proc.stderr
    roomy = result_of(run_workload(2, *big, "--mem-limit-mb", "1000"))
    # logits alone are 8 x 256 x 4096 fp32 = 32 MiB per rank: the peak is well above the 60 MiB cap's share
    assert 0.06 < roomy["peak_mem_gb"] < 1.0


@pytest.mark.slow
@pytest.mark.slurm
@pytest.mark.timeout(900)
def test_ep_across_the_two_slurm_nodes_matches_single_process(slurm_env, tmp_path, single):
    """The workload as a trial job runs it (one task per node under srun, torchrun on each node, the backends'
    launch preamble): 2 nodes x 2 ranks, dp 4, ep 4, so every all-to-all crosses the node boundary."""
    import time

    from launcher.backends.launch import exec_program, node_preamble, torchrun_launcher

    args = [*TINY, *MOE, "--dp", "4", "--ep", "4"]
    node = ("#!/bin/bash\nset -euo pipefail\n" + node_preamble(2) + torchrun_launcher(sys.executable, 2)
            + exec_program(["-m", "launcher.workload", *args], "torchrun"))
    (tmp_path / "node.sh").write_text(node)
    (tmp_path / "job.sh").write_text(f"#!/bin/bash\nexport PYTHONPATH={REPO} OMP_NUM_THREADS=1\n"
                                     f"srun --ntasks-per-node=1 bash {tmp_path}/node.sh\n")
    env = {**os.environ, **slurm_env}
    job = subprocess.run(["sbatch", "--parsable", "-p", "debug", "-N2", "--ntasks-per-node=1", "-t", "12", "-o",
                          str(tmp_path / "out.txt"), str(tmp_path / "job.sh")], env=env, capture_output=True,
                         text=True, check=True).stdout.strip().split(";")[0]
    deadline, state = time.monotonic() + 840, ""
    while time.monotonic() < deadline:
        state = subprocess.run(["sacct", "-n", "-X", "-P", "-j", job, "-o", "State"], env=env, capture_output=True,
                               text=True).stdout.strip()
        if state and state.split()[0] in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL"):
            break
        time.sleep(2)
    log = (tmp_path / "out.txt").read_text() if (tmp_path / "out.txt").exists() else ""
    assert state.startswith("COMPLETED"), (state, log[-3000:])
    lines = [ln for ln in log.splitlines() if ln.startswith("PARASWEEP_RESULT ")]
    assert len(lines) == 1, log[-3000:]
    result = json.loads(lines[0].removeprefix("PARASWEEP_RESULT "))
    assert result["world_size"] == 4 and result["config"]["ep"] == 4
    assert_same_losses(result, single)
