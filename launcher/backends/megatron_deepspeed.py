"""Launch of upstream microsoft/Megatron-DeepSpeed: pretrain_gpt.py arguments plus a DeepSpeed ds_config.json.

Flags come from megatron/arguments.py at commit c84829e5 (and DeepSpeed's own --deepspeed / --deepspeed_config,
added by deepspeed.add_config_arguments); megatron_flags.txt [megatron_deepspeed] lists them. What upstream
Megatron-DeepSpeed does with them decides four refusals here:
- no synthetic data: its arguments have no --mock-data and pretrain_gpt.py builds GPT datasets from --data-path,
  so backend.data_path is required;
- no interleaved pipeline: with --deepspeed and pipeline parallelism pretrain_gpt.py builds GPTModelPipe, a
  DeepSpeed PipelineModule trained by PipelineEngine.train_batch, which has no interleaved schedule (training.py
  passes only model[0] to deepspeed.initialize), so vpp > 1 would be silently ignored;
- ZeRO-2/3 with pp > 1: DeepSpeed refuses ("ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism");
- Megatron's distributed optimizer: under --deepspeed DeepSpeed owns the optimizer; ZeRO-1 is the equivalent.
"""

from __future__ import annotations

import posixpath

from launcher.backends import megatron_common as mc
from launcher.backends.base import BackendBase
from launcher.backends.launch import LaunchSpec, render_script
from launcher.config.schema import BackendConfig, ClusterConfig, ModelConfig
from launcher.core import strict_json
from launcher.core.errors import ConfigError
from launcher.core.layout import Layout
from launcher.core.names import BackendName

PROGRAM = "Megatron-DeepSpeed"
DS_CONFIG = "ds_config.json"
# --tokenizer-type choices in megatron/arguments.py @ c84829e5.
TOKENIZERS = frozenset({"BertWordPieceLowerCase", "BertWordPieceCase", "GPT2BPETokenizer", "SentencePieceTokenizer",
                        "GPTSentencePieceTokenizer", "HFTokenizer", "NullTokenizer"})
# model.tokenizer -> --tokenizer-type.
BY_KIND = {"gpt2": "GPT2BPETokenizer", "sentencepiece": "GPTSentencePieceTokenizer", "huggingface": "HFTokenizer"}
GRADIENT_CLIPPING = 1.0
"""Megatron's default --clip-grad; under DeepSpeed the engine clips, so the config must say it (the global norm
is part of a real step's cost)."""


class MegatronDeepSpeed(BackendBase):
    name = BackendName.megatron_deepspeed

    def problems(self, backend: BackendConfig, model: ModelConfig) -> list[ConfigError]:
        return mc.problems(backend, model, program=PROGRAM, tokenizers=TOKENIZERS, by_kind=BY_KIND, needs_data=True)

    def launch(self, model: ModelConfig, cluster: ClusterConfig, backend: BackendConfig, layout: Layout, *,
               trial_dir: str, env: dict[str, str], mem_limit_mb: int) -> LaunchSpec:
        """`mem_limit_mb` is the embedded workload's CPU cap; a GPU program is bounded by the device itself."""
        ds_config_path = posixpath.join(trial_dir, DS_CONFIG)
        program_argv = [backend.python, mc.pretrain_script(backend.megatron),
                        *program_args(model, backend, layout, ds_config_path)]
        # Megatron-DeepSpeed's validate_args raises unless CUDA_DEVICE_MAX_CONNECTIONS=1 when sequence parallelism
        # is on; without it (async TP all-reduce is off under --deepspeed) the variable would only limit overlap.
        if layout.sequence_parallel:
            env = {**env, "CUDA_DEVICE_MAX_CONNECTIONS": "1"}
        script = render_script(title=f"{model.name} on {PROGRAM}", layout=layout, python=backend.python,
                               launcher=backend.launcher, target=program_argv[1:], env=env, trial_dir=trial_dir,
                               megatron_path=backend.megatron.path)
        return LaunchSpec(script=script, files={DS_CONFIG: ds_config(backend, layout)}, env=env,
                          program_argv=program_argv, nproc_per_node=layout.gpus_per_node, nnodes=layout.nodes)


BACKEND = MegatronDeepSpeed()


def program_args(model: ModelConfig, backend: BackendConfig, layout: Layout, ds_config_path: str) -> list[str]:
    args = mc.shape_args(model) + model_style_args(model)
    args += mc.parallel_args(layout, model.layers)
    if layout.pp == 1:
        # pretrain_gpt.py builds the DeepSpeed pipeline model unless told not to, even for one stage.
        args.append("--no-pipeline-parallel")
    args += mc.precision_args(backend)
    if backend.flash_attention:
        # --use-flash-attn is an alias of --use-flash-attn-v1, whose kernel (flash_attn_unpadded_func) is gone
        # from flash-attn 2.x; v2 is what current GPUs and wheels provide.
        args.append("--use-flash-attn-v2")
    args += mc.run_args(backend)
    kind = mc.tokenizer_type(backend.megatron, model, BY_KIND, synthetic_data=False)
    args += mc.data_args(backend.megatron) + mc.tokenizer_args(kind, backend.megatron, model)
    args += ["--deepspeed", "--deepspeed_config", ds_config_path, "--zero-stage", str(layout.zero_stage)]
    return args + list(backend.extra_args)


def model_style_args(model: ModelConfig) -> list[str]:
    args = []
    if model.kv_heads != model.heads:
        args += ["--num-key-value-heads", str(model.kv_heads)]
    if model.norm == "rmsnorm":
        args += ["--normalization", "rmsnorm"]
    if mc.llama_style(model):
        # Rotary positions; validate_args then drops the learned position table (add_position_embedding=False),
        # --no-position-embedding says the same explicitly.
        args += ["--use-rotary-position-embeddings", "--no-position-embedding"]
    return args


def ds_config(backend: BackendConfig, layout: Layout) -> str:
    """DeepSpeed config: batch sizes must agree with Megatron's (train_batch = micro x accumulation x dp)."""
    iters = backend.warmup_iters + backend.measure_iters
    config = {
        "train_batch_size": layout.gbs,
        "train_micro_batch_size_per_gpu": layout.mbs,
        "gradient_accumulation_steps": layout.microbatches,
        "gradient_clipping": GRADIENT_CLIPPING,
        "zero_optimization": {"stage": layout.zero_stage},
        "bf16": {"enabled": backend.precision == "bf16"},
        "fp16": {"enabled": backend.precision == "fp16"},
        # Megatron logs every iteration itself; DeepSpeed's own step print would only duplicate it.
        "steps_per_print": max(1, iters),
        "wall_clock_breakdown": False,
    }
    return strict_json.dumps(config, indent=2) + "\n"
