"""Launch of NVIDIA Megatron-LM: pretrain_gpt.py with synthetic data (--mock-data) and --log-throughput.

Flags come from megatron/training/arguments.py at commit 307dcf37 (2024) and were checked present in a 2025
version too (the one that adds --attention-backend); megatron_flags.txt [megatron_lm] lists them. Flags only one
of the two versions knows are avoided: --use-flash-attn rather than --attention-backend flash, no
--use-mcore-models (Megatron-Core models are the default in current versions, where the flag is a no-op).

ZeRO is not a Megatron-LM concept. Its distributed optimizer (--use-distributed-optimizer) shards the optimizer
state over data-parallel ranks, which is ZeRO stage 1 (Rajbhandari et al. 2020), so zero_stage 1 maps to it.
Sharding gradients and parameters too (ZeRO-2/3) needs Megatron-LM's FSDP code paths (--use-torch-fsdp2,
--use-megatron-fsdp), a different program configuration this backend does not sweep: zero_stage 2/3 is refused.
"""

from __future__ import annotations

from launcher.backends import megatron_common as mc
from launcher.backends.base import BackendBase
from launcher.backends.launch import LaunchSpec, render_script
from launcher.config.schema import BackendConfig, ClusterConfig, ModelConfig
from launcher.core.errors import ConfigError
from launcher.core.layout import Layout
from launcher.core.names import BackendName

PROGRAM = "Megatron-LM"
# --tokenizer-type choices present in both Megatron-LM versions read (2024 @ 307dcf37 and 2025), plus
# HuggingFaceTokenizer, which only the 2025 versions have (Llama 3 and Qwen2 ship Hugging Face tokenizers).
TOKENIZERS = frozenset({"BertWordPieceLowerCase", "BertWordPieceCase", "GPT2BPETokenizer", "SentencePieceTokenizer",
                        "GPTSentencePieceTokenizer", "Llama2Tokenizer", "NullTokenizer", "HuggingFaceTokenizer"})
# model.tokenizer -> --tokenizer-type (Megatron-LM's own Llama-2 tokenizer for SentencePiece models).
BY_KIND = {"gpt2": "GPT2BPETokenizer", "sentencepiece": "Llama2Tokenizer", "huggingface": "HuggingFaceTokenizer"}
# Megatron-LM's validate_args raises unless CUDA_DEVICE_MAX_CONNECTIONS=1: in 2024 whenever the (default-on)
# async tensor-parallel all-reduce or sequence parallelism is used, in 2025 whenever tp > 1 (before Blackwell).
# One kernel queue keeps the communication kernels in launch order, which those overlaps rely on.
ENV = {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}


# Megatron-LM on a machine without Transformer Engine and apex (checked on core 0.20 on one H100): the local
# transformer, and no fusions that need apex or TE kernels. It has no flash attention either (see `problems`).
LOCAL_IMPL_ARGS = ["--transformer-impl", "local", "--no-gradient-accumulation-fusion", "--no-persist-layer-norm",
                   "--no-masked-softmax-fusion"]


class MegatronLM(BackendBase):
    name = BackendName.megatron_lm

    def problems(self, backend: BackendConfig, model: ModelConfig) -> list[ConfigError]:
        out = mc.problems(backend, model, program=PROGRAM, tokenizers=TOKENIZERS, by_kind=BY_KIND, needs_data=False)
        if backend.megatron.transformer_impl == "local" and backend.flash_attention:
            out.append(ConfigError("backend.flash_attention", True, "Megatron-LM's local transformer has no flash "
                                   "attention: set backend.flash_attention=false (the plan then counts the "
                                   "attention scores it stores)"))
        return out

    def launch(self, model: ModelConfig, cluster: ClusterConfig, backend: BackendConfig, layout: Layout, *,
               trial_dir: str, env: dict[str, str], mem_limit_mb: int) -> LaunchSpec:
        """`mem_limit_mb` is the embedded workload's CPU cap; a GPU program is bounded by the device itself."""
        program_argv = [backend.python, mc.pretrain_script(backend.megatron), *program_args(model, backend, layout)]
        env = {**env, **ENV}
        script = render_script(title=f"{model.name} on {PROGRAM}", layout=layout, python=backend.python,
                               launcher=backend.launcher, target=program_argv[1:], env=env, trial_dir=trial_dir,
                               megatron_path=backend.megatron.path)
        return LaunchSpec(script=script, files={}, env=env, program_argv=program_argv,
                          nproc_per_node=layout.gpus_per_node, nnodes=layout.nodes)


BACKEND = MegatronLM()


def program_args(model: ModelConfig, backend: BackendConfig, layout: Layout) -> list[str]:
    args = mc.shape_args(model) + model_style_args(model)
    args += mc.parallel_args(layout, model.layers) + mc.virtual_pipeline_args(model, layout) + optimizer_args(layout)
    if layout.cp > 1:  # Megatron-Core's context parallelism (Transformer Engine's ring attention)
        args += ["--context-parallel-size", str(layout.cp)]
    args += expert_args(model, layout)
    args += mc.precision_args(backend) + fp8_args(backend)
    if backend.megatron.transformer_impl == "local":
        args += LOCAL_IMPL_ARGS
    if backend.flash_attention:
        args.append("--use-flash-attn")
    args += mc.run_args(backend) + ["--log-throughput"]
    kind = mc.tokenizer_type(backend.megatron, model, BY_KIND, synthetic_data=True)
    args += data_args(backend) + mc.tokenizer_args(kind, backend.megatron, model)
    return args + list(backend.extra_args)


FP8_ARGS = ["--fp8-format", "hybrid", "--fp8-amax-history-len", "1024", "--fp8-amax-compute-algo", "max"]
"""Transformer Engine FP8 with delayed scaling over bf16 (--bf16 stays): E4M3 forward, E5M2 gradients ('hybrid'), the
scale from the largest amax of the last 1024 steps; the recipe of NVIDIA/Megatron-LM
examples/llama/train_llama3_8b_h100_fp8.sh (and examples/gptoss/02_train.sh). The three flags are in both argument
parsers the backend targets (2024 @ 307dcf37: arguments.py _add_transformer_engine_args L608-623; 2025+:
TransformerConfig fields fp8 (--fp8-format), fp8_amax_history_len, fp8_amax_compute_algo); delayed scaling is the
2024 release's only recipe and the later releases' default (--fp8-recipe delayed)."""


def fp8_args(backend: BackendConfig) -> list[str]:
    return list(FP8_ARGS) if backend.precision == "fp8" else []


def model_style_args(model: ModelConfig) -> list[str]:
    args = []
    if model.kv_heads != model.heads:
        args += ["--group-query-attention", "--num-query-groups", str(model.kv_heads)]
    if model.norm == "rmsnorm":
        args += ["--normalization", "RMSNorm"]
    if mc.llama_style(model):
        args += ["--position-embedding-type", "rope"]
    return args


def expert_args(model: ModelConfig, layout: Layout) -> list[str]:
    """Mixture of experts on every layer (--moe-layer-freq 1, the default): dropless (no capacity factor, the
    default) with the all-to-all token dispatcher and grouped GEMMs, as launcher.plan.moe prices it. The expert mesh
    is always explicit: Megatron's --expert-tensor-parallel-size defaults to tp, the layout's etp to 1. A dense
    model gets no flag (ep/etp > 1 on it are refused by the rules; rendered anyway so that Megatron's own check
    sees them)."""
    args = []
    if model.is_moe:
        args += ["--num-experts", str(model.num_experts), "--moe-router-topk", str(model.moe_topk),
                 "--moe-ffn-hidden-size", str(model.moe_ffn_hidden)]
        if model.shared_expert_ffn_hidden:
            args += ["--moe-shared-expert-intermediate-size", str(model.shared_expert_ffn_hidden)]
        if model.moe_aux_loss_coeff:
            args += ["--moe-aux-loss-coeff", f"{model.moe_aux_loss_coeff:g}"]
        if model.moe_topk == 1:  # TransformerConfig: a softmax over one selected logit has no gradient
            args.append("--moe-router-pre-softmax")
        args += ["--moe-token-dispatcher-type", "alltoall", "--moe-grouped-gemm"]
    if model.is_moe or layout.ep > 1:
        args += ["--expert-model-parallel-size", str(layout.ep)]
    if model.is_moe or layout.etp > 1:
        args += ["--expert-tensor-parallel-size", str(layout.etp)]
    return args


def optimizer_args(layout: Layout) -> list[str]:
    """ZeRO-1 and the distributed optimizer are one thing here (ZeRO-2/3 are refused by the rules table)."""
    if layout.zero_stage == 1 or layout.distributed_optimizer:
        return ["--use-distributed-optimizer"]
    return []


def data_args(backend: BackendConfig) -> list[str]:
    """Synthetic tokens unless a dataset is configured (Megatron-LM requires exactly one data source)."""
    return mc.data_args(backend.megatron) if backend.megatron.data_path else ["--mock-data"]
