"""MoE models on each backend: Megatron-LM's real MoE flags (golden line), the workload's, Megatron-DeepSpeed's
refusal, and nothing MoE for a dense model."""

from __future__ import annotations

import pytest
from backend_helpers import a100_80g, assert_real_flags, backend_config, cpu

from launcher.backends import render_launch
from launcher.backends.torch_workload import workload_args
from launcher.config.schema import ModelConfig
from launcher.core.layout import Layout
from launcher.plan.rules import check
from launcher.workload.__main__ import build_parser, validate

MIXTRAL = ModelConfig(name="mixtral-8x7b", layers=32, hidden=4096, heads=32, kv_heads=8, swiglu=True,
                      ffn_hidden=14336, seq_len=4096, max_position=32768, vocab=32000, tied_embeddings=False,
                      norm="rmsnorm", num_experts=8, moe_topk=2, moe_aux_loss_coeff=0.02)
LAYOUT = Layout(gpus=16, nodes=2, tp=2, pp=2, dp=4, ep=4, etp=2, mbs=1, gbs=64, sequence_parallel=True,
                distributed_optimizer=True)


def megatron_argv(model: ModelConfig, layout: Layout) -> list[str]:
    backend = backend_config("megatron_lm", python="python", precision="bf16", path="/m",
                             tokenizer_type="NullTokenizer")
    return render_launch(model, a100_80g(), backend, layout, trial_dir="/t").program_argv


def test_megatron_lm_golden_moe_flags():
    argv = megatron_argv(MIXTRAL, LAYOUT)
    assert_real_flags(argv[2:], "megatron_lm")
    assert ("--num-experts 8 --moe-router-topk 2 --moe-ffn-hidden-size 14336 --moe-aux-loss-coeff 0.02 "
            "--moe-token-dispatcher-type alltoall --moe-grouped-gemm --expert-model-parallel-size 4 "
            "--expert-tensor-parallel-size 2") in " ".join(argv)


def test_megatron_lm_shared_expert_and_top_1():
    qwen = ModelConfig(name="q", layers=4, hidden=2048, heads=16, swiglu=True, seq_len=4096, num_experts=60,
                       moe_topk=1, moe_ffn_hidden=1408, shared_expert_ffn_hidden=5632)
    argv = megatron_argv(qwen, Layout(gpus=4, nodes=1, tp=1, pp=1, dp=4, ep=4, mbs=1, gbs=8))
    assert_real_flags(argv[2:], "megatron_lm")
    joined = " ".join(argv)
    assert "--moe-shared-expert-intermediate-size 5632" in joined
    assert "--moe-router-pre-softmax" in joined          # top-1 after a softmax over one logit has no gradient
    assert "--expert-tensor-parallel-size 1" in joined   # explicit: Megatron's default would be tp


def test_a_dense_model_renders_no_moe_flag():
    dense = ModelConfig(name="d", layers=4, hidden=256, heads=4, seq_len=128)
    lay = Layout(gpus=4, nodes=1, tp=1, pp=1, dp=4, mbs=1, gbs=8)
    assert not [a for a in megatron_argv(dense, lay) if "expert" in a or "moe" in a]
    args = workload_args(dense, cpu(), backend_config("torch", precision="fp32"), lay, 0)
    assert not [a for a in args if a in ("--num-experts", "--ep", "--etp")]


def test_workload_moe_flags_parse_and_validate():
    tiny = ModelConfig(name="t", layers=2, hidden=64, heads=4, seq_len=64, vocab=256, num_experts=4, moe_topk=2,
                       moe_ffn_hidden=96, shared_expert_ffn_hidden=64, moe_aux_loss_coeff=0.01)
    lay = Layout(gpus=4, nodes=1, tp=2, pp=1, dp=2, ep=2, etp=2, mbs=1, gbs=8)
    args = workload_args(tiny, cpu(), backend_config("torch", precision="fp32"), lay, 0)
    parsed = build_parser().parse_args(args)
    assert (parsed.num_experts, parsed.moe_topk, parsed.moe_ffn_hidden, parsed.shared_expert_ffn_hidden,
            parsed.moe_aux_loss_coeff, parsed.ep, parsed.etp) == (4, 2, 96, 64, 0.01, 2, 2)
    assert validate(parsed, world_size=4) is None


@pytest.mark.parametrize("model", [MIXTRAL])
def test_megatron_deepspeed_refuses_an_moe_model_with_the_reason(model):
    verdict = check(model, a100_80g(), LAYOUT, backend="megatron_deepspeed")
    (issue,) = [i for i in verdict.reasons if i.code == "mds_moe"]
    assert "DeepSpeed-MoE" in issue.message and "use backend megatron_lm or torch" in issue.message
