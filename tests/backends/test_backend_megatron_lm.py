"""Megatron-LM launch: real upstream flags only, synthetic data by default, ZeRO mapped or refused.

Golden file: tests/golden/llama2-70b_megatron_lm.sh; regenerate with
`PARASWEEP_UPDATE_GOLDEN=1 python -m pytest tests/backends/test_backend_megatron_lm.py` and review the diff.
"""

from __future__ import annotations

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

from launcher.backends import launch_command, render_launch
from launcher.backends.launch import node_preamble
from launcher.config.schema import BackendConfig, ModelConfig
from launcher.core.errors import ConfigError
from launcher.core.layout import Layout

MLM = "/shared/Megatron-LM"
TRIAL = "/scratch/sweeps/70b/trials/t0003"
GPT3 = ModelConfig(name="gpt3-175b", layers=96, hidden=12288, heads=96, seq_len=2048, vocab=51200)


def backend(**changes) -> BackendConfig:
    base = backend_config("megatron_lm", python="python", precision="bf16", warmup_iters=5, measure_iters=10, path=MLM,
                          tokenizer_type="NullTokenizer")
    return changed(base, **changes)


def render(model=None, layout=None, **backend_changes):
    return render_launch(model or llama2_70b(), a100_80g(), backend(**backend_changes), layout or golden_layout(),
                         trial_dir=TRIAL)


VARIANTS = [
    dict(),
    dict(layout=golden_layout(vpp=1, recompute="full", zero_stage=1, distributed_optimizer=False)),
    dict(model=GPT3, layout=golden_layout(vpp=3, recompute="none", sequence_parallel=False,
                                          distributed_optimizer=False), precision="fp16", flash_attention=False),
    dict(model=GPT3, data_path="/d/gpt_text_document", tokenizer_type="GPT2BPETokenizer", vocab_file="/d/v.json",
         merge_file="/d/m.txt"),
    dict(tokenizer_type="Llama2Tokenizer", tokenizer_model="/d/tokenizer.model", data_path="/d/llama_text_document"),
    dict(precision="fp8"),
    dict(layout=golden_layout(recompute="full", recompute_every=5)),
]


@pytest.mark.parametrize("variant", VARIANTS, ids=range(len(VARIANTS)))
def test_every_rendered_flag_and_choice_is_a_real_megatron_lm_flag(variant):
    assert_real_flags(render(**variant).program_argv[2:], "megatron_lm")


def test_llama_shape_layout_and_mock_data():
    argv = render().program_argv
    assert argv[:2] == ["python", f"{MLM}/pretrain_gpt.py"]
    joined = " ".join(argv)
    for expected in ("--group-query-attention --num-query-groups 8", "--normalization RMSNorm",
                     "--position-embedding-type rope", "--untie-embeddings-and-output-weights", "--swiglu",
                     "--tensor-model-parallel-size 8 --pipeline-model-parallel-size 4", "--sequence-parallel",
                     "--recompute-granularity selective", "--num-layers-per-virtual-pipeline-stage 10",
                     "--use-distributed-optimizer", "--bf16", "--use-flash-attn", "--log-throughput",
                     "--train-iters 15 --exit-interval 15", "--eval-iters 0",
                     "--mock-data --tokenizer-type NullTokenizer --vocab-size 32000"):
        assert expected in joined
    assert "--data-path" not in argv


def test_virtual_stages_are_layers_per_chunk():
    # 96 layers over pp 4 x vpp 3 = 12 chunks: 8 layers per virtual stage.
    argv = render(model=GPT3, layout=golden_layout(vpp=3)).program_argv
    assert argv[argv.index("--num-layers-per-virtual-pipeline-stage") + 1] == "8"
    assert "--num-layers-per-virtual-pipeline-stage" not in render(layout=golden_layout(vpp=1)).program_argv


@pytest.mark.parametrize("zero_stage, distributed_optimizer, flagged", [
    (0, False, False), (1, False, True), (0, True, True)])  # both at once: the rules refuse it (distopt_zero)
def test_zero_1_and_the_distributed_optimizer_map_to_megatron_s_distributed_optimizer(zero_stage,
                                                                                      distributed_optimizer, flagged):
    layout = golden_layout(zero_stage=zero_stage, distributed_optimizer=distributed_optimizer)
    assert render(layout=layout).program_argv.count("--use-distributed-optimizer") == int(flagged)


@pytest.mark.parametrize("stage", [2, 3])
def test_zero_2_and_3_are_refused_with_the_reason(stage):
    with pytest.raises(ConfigError) as err:
        render(layout=golden_layout(pp=1, dp=8, vpp=1, zero_stage=stage, distributed_optimizer=False))
    assert err.value.field == "layout.zero_megatron_lm" and "optimizer state" in err.value.fix


@pytest.mark.parametrize("changes, layout, field", [
    ({}, golden_layout(pp=1, dp=8, vpp=2), "layout.vpp_pp"),              # virtual stages without a pipeline
    ({}, golden_layout(pp=2, dp=4, vpp=2), "layout.vpp_pp_overlap"),      # Megatron-LM asserts pp > 2
    ({}, golden_layout(vpp=3), "layout.layers_vpp"),                       # 80 layers do not split into 12 chunks
    ({}, golden_layout(gbs=1023), "layout.gbs_divisible"),
    (dict(path="/path/to/Megatron-LM"), golden_layout(), "backend.megatron.path"),
    (dict(tokenizer_type="SentencePieceTokenizer"), golden_layout(), "backend.megatron.tokenizer_model"),
    (dict(tokenizer_type="HFTokenizer"), golden_layout(), "backend.megatron.tokenizer_type"),  # a Megatron-DeepSpeed name
])
def test_settings_upstream_cannot_run_are_config_errors(changes, layout, field):
    with pytest.raises(ConfigError) as err:
        render(layout=layout, **changes)
    assert err.value.field == field


@pytest.mark.parametrize("vpp, every, layers", [(1, 2, 10), (2, 2, 5), (2, 5, 2), (1, 20, 1)])
def test_recompute_of_every_kth_layer_is_the_block_method_per_model_chunk(vpp, every, layers):
    # llama2-70b: 80 layers over pp 4 (x vpp): 20 (10) layers per chunk, 1/k of them checkpointed
    argv = render(layout=golden_layout(vpp=vpp, recompute="full", recompute_every=every)).program_argv
    assert (f"--recompute-granularity full --recompute-method block --recompute-num-layers {layers}"
            in " ".join(argv))
    assert "--recompute-method uniform --recompute-num-layers 1" in " ".join(
        render(layout=golden_layout(recompute="full")).program_argv)


def test_fp8_is_transformer_engine_delayed_scaling_over_bf16():
    argv = render(precision="fp8").program_argv
    joined = " ".join(argv)
    assert "--bf16 --fp8-format hybrid --fp8-amax-history-len 1024 --fp8-amax-compute-algo max" in joined
    assert "--fp8-format" not in render(precision="bf16").program_argv


def test_cuda_connection_limit_is_always_set():
    # Megatron-LM's validate_args raises without it (2024: async TP all-reduce is on by default; 2025: tp > 1).
    spec = render(layout=golden_layout(sequence_parallel=False))
    assert spec.env == {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}
    assert launch_command(spec).startswith("CUDA_DEVICE_MAX_CONNECTIONS=1 ")


def test_runs_with_quoted_values_under_slurm(tmp_path):
    mega = tmp_path / "Megatron LM $(touch pwned5)"
    mega.mkdir()
    layout = Layout(gpus=4, nodes=2, tp=2, pp=1, dp=2, gbs=4)
    spec = render_launch(GPT3, replace(a100_80g(), gpus_per_node=2), backend(python=fake_python(tmp_path), path=str(mega),
                                                   extra_args=NASTY), layout, trial_dir=str(tmp_path / "trial"))
    assert node_preamble(2) in spec.script
    result = run_script(spec.script, tmp_path, slurm=SLURM_RANK1)
    assert result.returncode == 0, result.stderr
    argv = received_argv(tmp_path)
    assert argv[argv.index("--rdzv-endpoint") + 1] == f"node-a:{PORT_123456}"
    assert argv[argv.index(f"{mega}/pretrain_gpt.py"):] == spec.program_argv[1:]
    assert not list(tmp_path.glob("pwned*"))


def test_golden_llama2_70b():
    check_golden("llama2-70b_megatron_lm.sh", render().script)


def test_local_transformer_for_machines_without_transformer_engine():
    argv = render(transformer_impl="local", flash_attention=False).program_argv
    joined = " ".join(argv)
    assert ("--transformer-impl local --no-gradient-accumulation-fusion --no-persist-layer-norm "
            "--no-masked-softmax-fusion") in joined and "--use-flash-attn" not in argv
    assert_real_flags(argv[2:], "megatron_lm")
    assert "--transformer-impl" not in render().program_argv  # Transformer Engine is Megatron-LM's default
    with pytest.raises(ConfigError) as err:
        render(transformer_impl="local")  # flash attention needs Transformer Engine here
    assert err.value.field == "backend.flash_attention"


@pytest.mark.parametrize("kind, data, expected", [
    ("sentencepiece", "", "NullTokenizer"),                    # synthetic tokens: no tokenizer files needed
    ("sentencepiece", "/d/llama_text_document", "Llama2Tokenizer"),
    ("huggingface", "/d/llama3_text_document", "HuggingFaceTokenizer"),
    ("gpt2", "/d/gpt_text_document", "GPT2BPETokenizer"),
])
def test_the_tokenizer_follows_the_model_unless_set(kind, data, expected):
    model = replace(llama2_70b(), tokenizer=kind)
    files = dict(tokenizer_model="/d/tok.model", vocab_file="/d/v.json", merge_file="/d/m.txt")
    argv = render(model=model, tokenizer_type="", data_path=data, **files).program_argv
    assert argv[argv.index("--tokenizer-type") + 1] == expected
    assert_real_flags(argv[2:], "megatron_lm")


def test_a_model_that_does_not_name_its_tokenizer_asks_for_one():
    with pytest.raises(ConfigError) as err:
        render(model=replace(llama2_70b(), tokenizer=""), tokenizer_type="", data_path="/d/x_text_document")
    assert err.value.field == "backend.megatron.tokenizer_type" and "model.tokenizer" in err.value.fix
    with pytest.raises(ConfigError) as err:  # the file the model's tokenizer needs
        render(model=replace(llama2_70b(), tokenizer="sentencepiece"), tokenizer_type="", data_path="/d/x")
    assert err.value.field == "backend.megatron.tokenizer_model" and "model.tokenizer=sentencepiece" in err.value.fix
