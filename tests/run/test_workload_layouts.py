"""Every parallel layout of the embedded workload trains exactly like the single-process run (multi-process).

Each case starts a real `torchrun` with gloo on CPU. A layout is correct when its per-iteration global-batch
losses equal the single-process run's to 1e-4: with plain SGD (lr 0.5) a gradient that is wrongly averaged,
not synchronised, or not summed across tied copies moves the next losses by far more than that (Adam would hide
a uniform scale error). Slow (2-8 processes of ~4 s start-up each on 2 cores): all but one case are `slow`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TINY = ["--layers", "4", "--hidden", "64", "--heads", "4", "--seq-len", "32", "--vocab", "128", "--gbs", "8",
        "--optimizer", "sgd", "--lr", "0.5", "--warmup-iters", "1", "--measure-iters", "3", "--seed", "11"]
ITERATION = re.compile(r"^\[parasweep\] iteration (\d+)/(\d+) \| phase (warmup|measure) \| step time \(ms\): "
                       r"\d+\.\d\d \| lm loss: (\d+\.\d{6}) \| tokens/s: \d+\.\d$")


def run_workload(nproc: int, *args: str, timeout_s: int = 300) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
           "-m", "launcher.workload", *args]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    return subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=timeout_s, env=env)


def result_of(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-5000:]
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("PARASWEEP_RESULT ")]
    assert len(lines) == 1, proc.stdout
    return json.loads(lines[0].removeprefix("PARASWEEP_RESULT "))


def train(nproc: int, *args: str) -> dict:
    return result_of(run_workload(nproc, *TINY, *args))


def assert_same_losses(result: dict, reference: dict) -> None:
    assert len(result["losses"]) == len(reference["losses"]) == 4
    for got, want in zip(result["losses"], reference["losses"]):
        assert abs(got - want) <= 1e-4, (result["losses"], reference["losses"])


@pytest.fixture(scope="module")
def single():
    return train(1)


@pytest.fixture(scope="module")
def single_8_layers():
    return train(1, "--layers", "8")


def test_tp2_matches_single_process_and_reports_the_format(single):
    proc = run_workload(2, *TINY, "--tp", "2", "--peak-tflops", "0.1")
    result = result_of(proc)
    assert_same_losses(result, single)
    # training happened: plain SGD on the learnable synthetic data lowers the loss
    assert single["losses"][-1] < single["losses"][0] - 0.02
    iterations = [m for m in map(ITERATION.match, proc.stdout.splitlines()) if m]
    assert [(int(m[1]), int(m[2]), m[3]) for m in iterations] == [(1, 4, "warmup")] + [
        (i, 4, "measure") for i in (2, 3, 4)]
    assert [float(m[4]) for m in iterations] == pytest.approx(result["losses"], abs=1e-6)
    assert re.search(r"^\[parasweep\] init done in \d+\.\d\d s$", proc.stdout, re.M)
    assert result["config"] == {"tp": 2, "pp": 1, "dp": 1, "vpp": 1, "mbs": 1, "gbs": 8, "microbatches": 8,
                                "recompute": "none", "recompute_every": 1, "sequence_parallel": False, "zero_stage": 0,
                                "distributed_optimizer": False, "precision": "fp32", "backend": "gloo",
                                "device": "cpu"}
    assert result["world_size"] == 2 and len(result["peak_mem_gb_per_rank"]) == 2
    assert result["peak_mem_gb"] == max(result["peak_mem_gb_per_rank"]) > 0
    assert result["tokens_per_s"] == pytest.approx(8 * 32 / result["step_time_s"])
    assert result["mfu"] == pytest.approx(result["model_tflops_per_gpu"] / 0.1)
    assert result["tflops_per_gpu"] == pytest.approx(result["model_tflops_per_gpu"])  # no recompute


def test_memory_limit_gives_the_real_allocator_error():
    """A cap below what training needs fails inside torch's allocator, not with a made-up message."""
    big = ["--layers", "2", "--hidden", "128", "--heads", "4", "--seq-len", "256", "--vocab", "4096",
           "--mbs", "8", "--gbs", "8", "--warmup-iters", "0", "--measure-iters", "1"]
    proc = run_workload(1, *big, "--mem-limit-mb", "30")
    assert proc.returncode != 0
    assert "DefaultCPUAllocator: can't allocate memory" in proc.stdout + proc.stderr
    assert "PARASWEEP_RESULT" not in proc.stdout
    roomy = result_of(run_workload(1, *big, "--mem-limit-mb", "1000"))
    # logits alone are 8 x 256 x 4096 fp32 = 32 MiB, so the measured peak must be well above the 30 MiB cap
    assert 0.03 < roomy["peak_mem_gb"] < 1.0


SLOW_LAYOUTS = {
    "pp2-1f1b": (2, ["--pp", "2"]),
    "dp2-zero0-mbs2": (2, ["--dp", "2", "--mbs", "2"]),
    "dp2-zero1": (2, ["--dp", "2", "--zero-stage", "1"]),
    "dp2-distributed-optimizer": (2, ["--dp", "2", "--distributed-optimizer"]),
    "dp2-zero2-fsdp": (2, ["--dp", "2", "--zero-stage", "2", "--mbs", "2"]),
    "dp2-zero3-fsdp": (2, ["--dp", "2", "--zero-stage", "3"]),
    "tp2-sp": (2, ["--tp", "2", "--sequence-parallel"]),
    "recompute-selective": (1, ["--recompute", "selective"]),
    "pp2-tp2-recompute-full": (4, ["--pp", "2", "--tp", "2", "--recompute", "full"]),
    "3d-2x2x2": (8, ["--pp", "2", "--dp", "2", "--tp", "2"]),
    "3d-2x2x2-sp-zero3-selective": (8, ["--pp", "2", "--dp", "2", "--tp", "2", "--sequence-parallel",
                                        "--zero-stage", "3", "--recompute", "selective"]),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", list(SLOW_LAYOUTS))
def test_layout_matches_single_process(name, single):
    nproc, args = SLOW_LAYOUTS[name]
    result = train(nproc, *args)
    assert_same_losses(result, single)
    assert result["world_size"] == nproc


@pytest.mark.slow
def test_interleaved_pp4_vpp2_matches_single_process(single_8_layers):
    result = train(4, "--layers", "8", "--pp", "4", "--vpp", "2")
    assert_same_losses(result, single_8_layers)
    assert result["config"]["vpp"] == 2


@pytest.mark.slow
@pytest.mark.parametrize("extra", [["--untie-embeddings"], ["--kv-heads", "2", "--swiglu", "--norm", "rmsnorm"]],
                         ids=["untied", "gqa-swiglu-rmsnorm"])
def test_model_variants_match_under_pp2_tp2(extra):
    reference = train(1, *extra)
    assert_same_losses(train(4, "--pp", "2", "--tp", "2", *extra), reference)


@pytest.mark.slow
def test_full_recompute_matches_and_counts_one_more_forward(single):
    result = train(1, "--recompute", "full")
    assert_same_losses(result, single)
    # hardware / model FLOPs = 1 + L*layer_fwd / (3*(L*layer_fwd + logits_fwd)), per token (h 64, s 32, f 256)
    layer_fwd, logits_fwd = 4 * 64 * 64 * 2 + 4 * 32 * 64 + 4 * 64 * 256, 2 * 64 * 128
    expected = 1 + 4 * layer_fwd / (3 * (4 * layer_fwd + logits_fwd))
    assert result["tflops_per_gpu"] / result["model_tflops_per_gpu"] == pytest.approx(expected)


@pytest.mark.slow
def test_recompute_of_every_second_layer_matches_and_counts_half_a_forward(single):
    """--recompute-every 2: the first 2 of the 4 layers are checkpointed (Megatron's block method), the losses are
    the single process's, and the hardware FLOPs count the forward of those 2 layers once more."""
    result = train(1, "--recompute", "full", "--recompute-every", "2")
    assert_same_losses(result, single)
    assert result["config"]["recompute_every"] == 2
    layer_fwd, logits_fwd = 4 * 64 * 64 * 2 + 4 * 32 * 64 + 4 * 64 * 256, 2 * 64 * 128
    expected = 1 + 2 * layer_fwd / (3 * (4 * layer_fwd + logits_fwd))
    assert result["tflops_per_gpu"] / result["model_tflops_per_gpu"] == pytest.approx(expected)


def test_recompute_every_is_refused_where_the_rules_refuse_it():
    refused = run_workload(1, *TINY, "--recompute-every", "2")
    assert refused.returncode != 0 and "needs --recompute full" in refused.stderr
    refused = run_workload(1, *TINY, "--recompute", "full", "--recompute-every", "3")
    assert refused.returncode != 0 and "must divide the 4 layers" in refused.stderr
