"""Megatron-DeepSpeed launch: real upstream flags only, a ds_config that agrees with Megatron, honest refusals.

Golden files: tests/golden/llama2-70b_megatron_deepspeed.{sh,ds_config.json}; regenerate with
`PARASWEEP_UPDATE_GOLDEN=1 python -m pytest tests/backends/test_backend_megatron_deepspeed.py` and review the diff.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import replace

import pytest
from backend_helpers import (
    NASTY,
    PORT_123456,
    SLURM_RANK1,
    a100_80g,
    assert_real_flags,
    backend_config,
    changed,
    check_golden,
    fake_python,
    golden_layout,
    llama2_70b,
    received_argv,
    run_script,
)

from launcher.backends import render_launch
from launcher.backends.launch import node_preamble
from launcher.config.schema import BackendConfig, ModelConfig
from launcher.core.errors import ConfigError
from launcher.core.layout import Layout

MDS = "/shared/Megatron-DeepSpeed"
TRIAL = "/scratch/sweeps/70b/trials/t0002"


def backend(**changes) -> BackendConfig:
    base = backend_config("megatron_deepspeed", python="python", precision="bf16", warmup_iters=5, measure_iters=10, path=MDS,
                          data_path="/datasets/llama2/tokens_text_document", tokenizer_type="GPTSentencePieceTokenizer",
                          tokenizer_model="/datasets/llama2/tokenizer.model")
    return changed(base, **changes)


def mds_layout(**changes) -> Layout:
    return golden_layout(**{"vpp": 1, "zero_stage": 1, "distributed_optimizer": False, **changes})


def render(model=None, layout=None, **backend_changes):
    return render_launch(model or llama2_70b(), a100_80g(), backend(**backend_changes), layout or mds_layout(),
                         trial_dir=TRIAL)


GPT3 = ModelConfig(name="gpt3-175b", layers=96, hidden=12288, heads=96, seq_len=2048, vocab=51200)
VARIANTS = [
    dict(),
    dict(layout=mds_layout(pp=1, dp=8, recompute="full", sequence_parallel=False, zero_stage=3)),
    dict(layout=mds_layout(pp=1, dp=8, recompute="full", recompute_every=4)),
    dict(layout=mds_layout(recompute="none"), precision="fp16", flash_attention=False),
    dict(model=GPT3, tokenizer_type="GPT2BPETokenizer", vocab_file="/d/vocab.json", merge_file="/d/merges.txt"),
    dict(model=GPT3, tokenizer_type="NullTokenizer", data_path="0.3 /d/a_text_document 0.7 /d/b_text_document"),
]


@pytest.mark.parametrize("variant", VARIANTS, ids=range(len(VARIANTS)))
def test_every_rendered_flag_and_choice_is_a_real_megatron_deepspeed_flag(variant):
    assert_real_flags(render(**variant).program_argv[2:], "megatron_deepspeed")


def test_llama_shape_layout_and_run_settings():
    argv = render().program_argv
    assert argv[:2] == ["python", f"{MDS}/pretrain_gpt.py"]
    joined = " ".join(argv)
    for expected in ("--num-layers 80", "--num-key-value-heads 8", "--ffn-hidden-size 28672", "--swiglu",
                     "--normalization rmsnorm", "--use-rotary-position-embeddings --no-position-embedding",
                     "--untie-embeddings-and-output-weights", "--tensor-model-parallel-size 8",
                     "--pipeline-model-parallel-size 4", "--micro-batch-size 1 --global-batch-size 1024",
                     "--sequence-parallel", "--recompute-granularity selective", "--bf16", "--use-flash-attn-v2",
                     "--train-iters 15 --exit-interval 15 --log-interval 1 --eval-iters 0",
                     "--data-path /datasets/llama2/tokens_text_document",
                     "--tokenizer-type GPTSentencePieceTokenizer --tokenizer-model /datasets/llama2/tokenizer.model",
                     f"--deepspeed --deepspeed_config {TRIAL}/ds_config.json --zero-stage 1"):
        assert expected in joined
    assert "--no-pipeline-parallel" not in argv and "--recompute-method" not in argv


def test_gpt_shape_keeps_learned_positions_and_tied_embeddings():
    argv = render(model=GPT3, tokenizer_type="NullTokenizer").program_argv
    for absent in ("--num-key-value-heads", "--normalization", "--use-rotary-position-embeddings", "--swiglu",
                   "--untie-embeddings-and-output-weights", "--disable-bias-linear"):
        assert absent not in argv
    assert argv[argv.index("--vocab-size") + 1] == "51200"


def test_one_stage_disables_deepspeed_pipeline_and_full_recompute_is_uniform_one_layer():
    argv = render(layout=mds_layout(pp=1, dp=8, recompute="full")).program_argv
    assert "--no-pipeline-parallel" in argv
    assert " ".join(argv).count("--recompute-granularity full --recompute-method uniform --recompute-num-layers 1") == 1


def test_recompute_of_every_kth_layer_is_the_block_method_without_a_pipeline_and_refused_with_one():
    argv = render(layout=mds_layout(pp=1, dp=8, recompute="full", recompute_every=4)).program_argv
    assert "--recompute-granularity full --recompute-method block --recompute-num-layers 20" in " ".join(argv)
    with pytest.raises(ConfigError) as err:
        render(layout=mds_layout(recompute="full", recompute_every=4))
    assert err.value.field == "layout.mds_recompute_every"


@pytest.mark.parametrize("layout, precision, stage, accumulation", [
    (mds_layout(), "bf16", 1, 1024 // (1 * 2)),
    (mds_layout(pp=1, dp=8, mbs=2, gbs=64, zero_stage=3), "fp16", 3, 64 // (2 * 8)),
])
def test_ds_config_agrees_with_megatron_batch_and_precision(layout, precision, stage, accumulation):
    spec = render(layout=layout, precision=precision)
    config = json.loads(spec.files["ds_config.json"])
    assert config["train_batch_size"] == layout.gbs
    assert config["train_micro_batch_size_per_gpu"] == layout.mbs
    assert config["gradient_accumulation_steps"] == accumulation
    assert config["train_batch_size"] == layout.mbs * accumulation * layout.dp
    assert config["zero_optimization"]["stage"] == stage
    assert config["bf16"]["enabled"] == (precision == "bf16") and config["fp16"]["enabled"] == (precision == "fp16")
    assert config["wall_clock_breakdown"] is False


def test_sequence_parallel_sets_the_cuda_connection_limit_megatron_deepspeed_checks():
    assert render().env == {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    assert "export CUDA_DEVICE_MAX_CONNECTIONS=1" in render().script
    assert render(layout=mds_layout(sequence_parallel=False)).env == {}


@pytest.mark.parametrize("changes, layout_changes, field", [
    (dict(data_path=""), {}, "backend.megatron.data_path"),                     # no mock data upstream
    ({}, dict(vpp=2), "layout.mds_vpp"),                                         # PipelineEngine: no interleaving
    ({}, dict(zero_stage=2), "layout.zero_pp"),                                  # ZeRO-2/3 with pp > 1
    ({}, dict(distributed_optimizer=True, zero_stage=0), "layout.mds_distopt"),               # DeepSpeed owns the optimizer
    ({}, dict(gbs=1001), "layout.gbs_divisible"),                                # not a multiple of mbs x dp
    (dict(path=""), {}, "backend.megatron.path"),
    (dict(path="/path/to/Megatron-DeepSpeed"), {}, "backend.megatron.path"),  # shipped placeholder
    (dict(tokenizer_type="GPT2BPETokenizer"), {}, "backend.megatron.vocab_file"),
    (dict(tokenizer_type="Llama2Tokenizer"), {}, "backend.megatron.tokenizer_type"),  # a Megatron-LM-only tokenizer
    (dict(precision="fp32"), {}, "backend.flash_attention"),
])
def test_settings_upstream_cannot_run_are_config_errors(changes, layout_changes, field):
    with pytest.raises(ConfigError) as err:
        render(layout=mds_layout(**layout_changes), **changes)
    assert err.value.field == field


def test_multi_node_launch_uses_the_same_preamble_as_the_workload(tmp_path):
    mega = tmp_path / "mega tron; $(touch pwned3)"
    mega.mkdir()
    layout = Layout(gpus=4, nodes=2, tp=2, pp=1, dp=2, gbs=4)
    spec = render_launch(GPT3, replace(a100_80g(), gpus_per_node=2), backend(python=fake_python(tmp_path), path=str(mega),
                                                   tokenizer_type="NullTokenizer", extra_args=NASTY),
                         layout, trial_dir=str(tmp_path / "trial"))
    assert node_preamble(2) in spec.script
    result = run_script(spec.script, tmp_path, slurm=SLURM_RANK1)
    assert result.returncode == 0, result.stderr
    argv = received_argv(tmp_path)
    assert argv[argv.index("--rdzv-endpoint") + 1] == f"node-a:{PORT_123456}"
    assert argv[argv.index("--node-rank") + 1] == "1"
    assert argv[argv.index(f"{mega}/pretrain_gpt.py"):] == spec.program_argv[1:]
    assert not list(tmp_path.glob("pwned*"))


@pytest.mark.parametrize("age_min, removed", [(10, True), (1, False)])
def test_only_a_stale_fused_kernel_lock_is_removed(tmp_path, age_min, removed):
    lock = tmp_path / "mds" / "megatron" / "fused_kernels" / "build" / "lock"
    lock.parent.mkdir(parents=True)
    lock.write_text("")
    then = time.time() - 60 * age_min
    os.utime(lock, (then, then))
    spec = render(layout=Layout(gpus=2, nodes=1, tp=1, pp=1, dp=2, gbs=2), python=fake_python(tmp_path),
                  path=str(tmp_path / "mds"))
    assert run_script(spec.script, tmp_path).returncode == 0
    assert lock.exists() is not removed


def test_golden_llama2_70b():
    spec = render()
    check_golden("llama2-70b_megatron_deepspeed.sh", spec.script)
    check_golden("llama2-70b_megatron_deepspeed.ds_config.json", spec.files["ds_config.json"])


@pytest.mark.parametrize("kind, expected", [("sentencepiece", "GPTSentencePieceTokenizer"),
                                            ("huggingface", "HFTokenizer"), ("gpt2", "GPT2BPETokenizer")])
def test_the_tokenizer_follows_the_model(kind, expected):
    model = replace(llama2_70b(), tokenizer=kind)
    argv = render(model=model, tokenizer_type="", vocab_file="/d/v.json", merge_file="/d/m.txt").program_argv
    assert argv[argv.index("--tokenizer-type") + 1] == expected
    assert_real_flags(argv[2:], "megatron_deepspeed")
