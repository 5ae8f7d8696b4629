"""The embedded workload's single-process parts: model split/init, FLOP formulas, data, args, helpers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from launcher.workload import __main__ as cli
from launcher.workload.grad_sync import _partition
from launcher.workload.memory import proc_status_bytes
from launcher.workload.model import (
    GPTConfig,
    StageModel,
    causal_attention,
    count_params,
    iteration_flops,
    stage_layer_ids,
)
from launcher.workload.train import synthetic_batch

REPO = Path(__file__).resolve().parents[2]
TINY = GPTConfig(layers=4, hidden=64, heads=4, kv_heads=4, ffn_hidden=256, seq_len=32, vocab=128)


@pytest.mark.parametrize("tied", [True, False])
def test_pipeline_split_reproduces_the_whole_model(tied):
    """Stages built separately (as on different ranks) chain to exactly the single-model logits."""
    cfg = GPTConfig(**{**TINY.__dict__, "tied_embeddings": tied})
    tokens = synthetic_batch(seed=3, step=0, gbs=2, seq_len=cfg.seq_len, vocab=cfg.vocab)[:, :-1]
    whole = StageModel(cfg, list(range(4)), has_embedding=True, has_head=True, seed=7)
    stages = [StageModel(cfg, stage_layer_ids(4, 4, k), has_embedding=k == 0, has_head=k == 3, seed=7)
              for k in range(4)]
    x = tokens
    for stage in stages:
        x = stage(x)
    torch.testing.assert_close(x, whole(tokens), rtol=0, atol=0)
    if tied:  # the last stage's copy of the tied table starts equal to the first stage's
        torch.testing.assert_close(stages[-1].head.weight, stages[0].emb.tok.weight, rtol=0, atol=0)
        assert whole.head.weight is None
    else:
        assert not torch.equal(stages[-1].head.weight, stages[0].emb.tok.weight)


def test_seed_changes_weights_and_layers_differ():
    a = StageModel(TINY, [0, 1], has_embedding=False, has_head=False, seed=1)
    b = StageModel(TINY, [0, 1], has_embedding=False, has_head=False, seed=2)
    assert not torch.equal(a.layers["0"].attn.q.weight, b.layers["0"].attn.q.weight)
    assert not torch.equal(a.layers["0"].attn.q.weight, a.layers["1"].attn.q.weight)


@pytest.mark.parametrize("cfg", [TINY, GPTConfig(layers=2, hidden=64, heads=8, kv_heads=2, ffn_hidden=96,
                                                  seq_len=16, vocab=50, swiglu=True, tied_embeddings=False,
                                                  norm="rmsnorm")])
def test_count_params_matches_the_module(cfg):
    model = StageModel(cfg, list(range(cfg.layers)), has_embedding=True, has_head=True, seed=0)
    assert count_params(cfg) == sum(p.numel() for p in model.parameters())


def test_gqa_sdpa_equals_explicit_math():
    gen = torch.Generator().manual_seed(0)
    q = torch.randn(2, 8, 16, 8, generator=gen)
    k, v = torch.randn(2, 2, 16, 8, generator=gen), torch.randn(2, 2, 16, 8, generator=gen)
    torch.testing.assert_close(causal_attention(q, k, v, "sdpa"), causal_attention(q, k, v, "math"))


def test_flops_reproduce_the_papers_for_gpt():
    """MHA, f = 4h: Korthikanti 2022 eq. 7 (model) and Narayanan 2021 eq. 3 (full recompute) exactly."""
    B, s, L, h, V = 512, 2048, 24, 2048, 51200
    cfg = GPTConfig(layers=L, hidden=h, heads=16, kv_heads=16, ffn_hidden=4 * h, seq_len=s, vocab=V)
    model, hw_full = iteration_flops(cfg, B, "full")
    assert model == pytest.approx(72 * B * L * s * h**2 * (1 + s / (6 * h) + V / (12 * h * L)), rel=1e-12)
    assert hw_full == pytest.approx(96 * B * s * L * h**2 * (1 + s / (6 * h) + V / (16 * L * h)), rel=1e-12)
    assert iteration_flops(cfg, B, "none") == (model, model)
    _, hw_sel = iteration_flops(cfg, B, "selective")
    assert hw_sel - model == pytest.approx(L * 4 * B * s * s * h)  # QK^T + PV forward once more


def test_flops_generalise_like_megatron_for_gqa_swiglu():
    """12*B*s*L*h^2*[(1 + g/a + s/h)*(q/h) + (f/h)*gamma + V/(2*L*h)] (Megatron f2e5db402c)."""
    B, s, L, h, a, g, f, V = 4, 4096, 80, 8192, 64, 8, 28672, 128256
    cfg = GPTConfig(layers=L, hidden=h, heads=a, kv_heads=g, ffn_hidden=f, seq_len=s, vocab=V, swiglu=True)
    expected = 12 * B * s * L * h**2 * ((1 + g / a + s / h) * 1 + (f / h) * 1.5 + V / (2 * L * h))
    assert iteration_flops(cfg, B, "none")[0] == pytest.approx(expected, rel=1e-12)


def test_synthetic_batch_depends_only_on_seed_and_step():
    a = synthetic_batch(5, 3, gbs=8, seq_len=32, vocab=128)
    assert a.shape == (8, 33) and a.dtype == torch.long and a.min() >= 0 and a.max() < 128
    torch.testing.assert_close(a, synthetic_batch(5, 3, 8, 32, 128), rtol=0, atol=0)
    assert not torch.equal(a, synthetic_batch(5, 4, 8, 32, 128))
    # learnable: most next tokens follow the per-sequence stride
    steps = (a[:, 1:] - a[:, :-1]) % 128
    assert (steps == steps.mode(dim=1).values[:, None]).float().mean() > 0.7


def test_partition_balances_whole_parameters():
    owners = _partition([100, 60, 50, 10, 10], 2)
    load = [sum(s for s, o in zip([100, 60, 50, 10, 10], owners) if o == r) for r in range(2)]
    assert sorted(load) == [110, 120] and owners[0] != owners[1]


def test_proc_status_reads_bytes():
    status = proc_status_bytes()
    assert status["VmHWM"] >= status["VmRSS"] > 10 * 2**20


@pytest.mark.parametrize("argv, world, word", [
    (["--tp", "2"], 1, "--tp 2 x --pp 1 x --dp 1 = 2 must equal WORLD_SIZE 1"),
    (["--heads", "3", "--hidden", "64"], 1, "--hidden 64"),
    (["--tp", "2", "--kv-heads", "1"], 2, "--kv-heads 1"),
    (["--gbs", "6", "--dp", "4"], 4, "--gbs 6"),
    (["--pp", "2", "--layers", "3"], 2, "--layers 3"),
    (["--pp", "4", "--gbs", "2"], 4, "fewer than --pp 4"),
    (["--pp", "2", "--vpp", "2", "--gbs", "5", "--layers", "4"], 2, "not a multiple of --pp 2"),
    (["--vocab", "127", "--tp", "2"], 2, "--vocab 127"),
    (["--measure-iters", "0"], 1, "--measure-iters 0"),
])
def test_validate_names_the_argument(argv, world, word):
    problem = cli.validate(cli.build_parser().parse_args(argv), world)
    assert problem is not None and word in problem


def test_defaults_are_valid():
    assert cli.validate(cli.build_parser().parse_args([]), 1) is None


def test_bad_arguments_exit_2_with_one_line():
    for argv in (["--tp", "2"], ["--recompute", "some"]):
        proc = subprocess.run([sys.executable, "-m", "launcher.workload", *argv], cwd=REPO, capture_output=True,
                              text=True, timeout=60, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("parasweep workload: error:") and argv[0] in lines[0]
        assert proc.stdout == ""


def test_job_side_imports_only_torch_and_the_standard_library():
    """A job node needs torch, nothing of the planning stack (hydra, omegaconf, mlflow, submitit, rich); of the
    project, only the workload itself and the core's strict JSON writer (the result line must be strict JSON:
    stdlib-only, and the architecture lets the job side import the core)."""
    code = ("import sys, launcher.workload.train, launcher.workload.__main__, launcher.workload.parallelize; "
            "bad = sorted({m.split('.')[0] for m in sys.modules} & {'hydra', 'omegaconf', 'mlflow', 'submitit', "
            "'rich', 'analysis'} | {m for m in sys.modules if m.startswith('launcher.') and "
            "not m.startswith('launcher.workload') and m not in ('launcher.core', 'launcher.core.strict_json')}); "
            "print(bad)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
