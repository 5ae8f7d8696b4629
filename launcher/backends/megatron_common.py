"""What the two Megatron backends share: model shape, layout, run length, precision and tokenizer arguments.

Every flag rendered here exists in both upstream argument parsers (microsoft/Megatron-DeepSpeed
megatron/arguments.py and NVIDIA/Megatron-LM megatron/training/arguments.py); megatron_flags.txt lists the known
flags per backend with the commits they were read from, and the tests check every rendered flag against it.
"""

from __future__ import annotations

import functools
import posixpath
from importlib import resources
from pathlib import Path, PurePosixPath

from launcher.config.schema import BackendConfig, MegatronConfig, ModelConfig
from launcher.core.errors import ConfigError
from launcher.core.layout import Layout

FLAGS_FILE = "megatron_flags.txt"
PLACEHOLDER_PREFIX = "/path/to/"
"""The shipped conf/backend/*.yaml point megatron_path at /path/to/...: a trial on it could only fail."""

BENCHMARK_LR = 1.0e-4
"""Any small learning rate: the trial measures speed and memory, and Megatron requires --lr for its optimizer."""
EVAL_INTERVAL_NEVER = 1_000_000
"""With --eval-iters 0 nothing is evaluated; the interval only has to be positive."""

# Tokenizers by the files they need (megatron/tokenizer/tokenizer.py build_tokenizer in both repositories).
NEEDS_VOCAB_AND_MERGES = frozenset({"GPT2BPETokenizer"})
NEEDS_VOCAB = frozenset({"BertWordPieceLowerCase", "BertWordPieceCase"})
NEEDS_MODEL_FILE = frozenset({"SentencePieceTokenizer", "GPTSentencePieceTokenizer", "Llama2Tokenizer",
                              "HFTokenizer", "HuggingFaceTokenizer", "TikTokenizer"})
NEEDS_VOCAB_SIZE = frozenset({"NullTokenizer"})


def pretrain_script(megatron: MegatronConfig) -> str:
    """Path of pretrain_gpt.py in the configured checkout."""
    return posixpath.join(megatron.path, "pretrain_gpt.py")


def tokenizer_type(megatron: MegatronConfig, model: ModelConfig, by_kind: dict[str, str], *,
                   synthetic_data: bool) -> str:
    """The --tokenizer-type a trial uses: as configured; else NullTokenizer when the program trains on synthetic
    tokens (no data given); else the program's type for the model's tokenizer kind ('' when the model does not say)."""
    if megatron.tokenizer_type:
        return megatron.tokenizer_type
    if synthetic_data and not megatron.data_path:
        return "NullTokenizer"
    return by_kind.get(model.tokenizer, "")


def problems(backend: BackendConfig, model: ModelConfig, *, program: str, tokenizers: frozenset[str],
             by_kind: dict[str, str], needs_data: bool) -> list[ConfigError]:
    """What must be set before a real run of either Megatron program: the checkout, data when the program has no
    synthetic data, the tokenizer and its files, no placeholder path left from a shipped config, a precision
    flash attention runs in."""
    m = backend.megatron
    out = []
    if not m.path:
        out.append(ConfigError("backend.megatron.path", m.path, f"set it to the {program} checkout on the cluster "
                               "(the folder holding pretrain_gpt.py)"))
    if needs_data and not m.data_path:
        out.append(ConfigError("backend.megatron.data_path", m.data_path, f"{program} has no synthetic-data option "
                               "(no --mock-data): set it to a preprocessed dataset prefix (tools/preprocess_data.py)"))
    missing = missing_checkout(m.path) if m.path and not m.path.startswith(PLACEHOLDER_PREFIX) else ""
    if missing:
        out.append(ConfigError("backend.megatron.path", m.path, f"{missing}: set it to the {program} checkout (the "
                               "folder holding pretrain_gpt.py)"))
    for name in ("path", "data_path", "vocab_file", "merge_file", "tokenizer_model"):
        value = getattr(m, name)
        if value.startswith(PLACEHOLDER_PREFIX):
            out.append(ConfigError(f"backend.megatron.{name}", value, f"this is the shipped placeholder: set it to "
                                   f"the real path on the cluster, e.g. backend.megatron.{name}=/shared/..."))
    kind = tokenizer_type(m, model, by_kind, synthetic_data=not needs_data)
    out += _tokenizer_problems(m, kind, model, tokenizers, program)
    if backend.precision == "fp32" and backend.flash_attention:
        out.append(ConfigError("backend.flash_attention", True, "flash attention runs in bf16/fp16 only: set "
                               "backend.precision=bf16 or backend.flash_attention=false"))
    return out


def _tokenizer_problems(m: MegatronConfig, kind: str, model: ModelConfig, allowed: frozenset[str],
                        program: str) -> list[ConfigError]:
    if not kind:
        return [ConfigError("backend.megatron.tokenizer_type", "", f"model {model.name} does not say which tokenizer "
                            "it was trained with (model.tokenizer): set backend.megatron.tokenizer_type and its files, "
                            "or model.tokenizer=gpt2|sentencepiece|huggingface")]
    if kind not in allowed:
        return [ConfigError("backend.megatron.tokenizer_type", kind, f"{program} accepts {', '.join(sorted(allowed))}")]
    needed = []
    if kind in NEEDS_VOCAB_AND_MERGES | NEEDS_VOCAB:
        needed.append("vocab_file")
    if kind in NEEDS_VOCAB_AND_MERGES:
        needed.append("merge_file")
    if kind in NEEDS_MODEL_FILE:
        needed.append("tokenizer_model")
    source = "" if m.tokenizer_type else f" (for model.tokenizer={model.tokenizer or 'unset'})"
    return [ConfigError(f"backend.megatron.{name}", getattr(m, name), f"tokenizer {kind}{source} needs it (or use "
                        "backend.megatron.tokenizer_type=NullTokenizer with synthetic data)")
            for name in needed if not getattr(m, name)]


@functools.lru_cache(maxsize=64)
def missing_checkout(path: str) -> str:
    """Why the checkout is not there, when the launcher can tell ('' when it is, or when it cannot tell).

    The launcher sees the path's file system when the path's top folder exists here (a login node mounts the
    cluster's /shared, the local executor runs on this very machine): then a missing checkout is a
    configuration error found before anything is submitted, not a crash of every trial and its retries. A path
    on a file system only the compute nodes mount cannot be checked here."""
    checkout = PurePosixPath(path)
    if not checkout.is_absolute() or len(checkout.parts) < 2 or Path(checkout).exists():
        return ""
    top = Path(*checkout.parts[:2])
    return f"{path} does not exist (the launcher sees {top})" if top.is_dir() else ""


def llama_style(model: ModelConfig) -> bool:
    """RMSNorm models here are the Llama family: rotary positions, no linear biases (Touvron et al. 2023).

    ModelConfig has no position-embedding field; GPT-3 / Megatron GPT shapes (LayerNorm) keep learned absolute
    positions, BLOOM's ALiBi is rendered as learned positions too (neither program offers ALiBi).
    """
    return model.norm == "rmsnorm"


def shape_args(model: ModelConfig) -> list[str]:
    """Sizes common to both programs (GQA, norm and positions are spelled differently: see each backend)."""
    args = ["--num-layers", str(model.layers), "--hidden-size", str(model.hidden),
            "--num-attention-heads", str(model.heads), "--ffn-hidden-size", str(model.ffn_hidden),
            "--seq-length", str(model.seq_len), "--max-position-embeddings", str(model.max_position)]
    if model.swiglu:
        args.append("--swiglu")
    if not model.tied_embeddings:
        args.append("--untie-embeddings-and-output-weights")
    if llama_style(model):
        args.append("--disable-bias-linear")
    return args


def parallel_args(layout: Layout, layers: int) -> list[str]:
    args = ["--tensor-model-parallel-size", str(layout.tp), "--pipeline-model-parallel-size", str(layout.pp),
            "--micro-batch-size", str(layout.mbs), "--global-batch-size", str(layout.gbs)]
    if layout.sequence_parallel:
        args.append("--sequence-parallel")
    return args + recompute_args(layout, layers)


def recompute_args(layout: Layout, layers: int) -> list[str]:
    """Selective: core attention only (takes no method). Full: every layer, one layer per checkpoint
    (uniform, 1), the setting Korthikanti et al. 2022 compare against. Full with recompute_every k > 1: the block
    method, which checkpoints the first N layers of each model chunk and keeps the rest whole (megatron-core
    transformer_block.py _checkpointed_forward, 'block'; N per pipeline stage, or per virtual stage: each chunk is
    its own TransformerBlock), N = layers / (pp x vpp x k); the rules make k divide the chunk's layers."""
    if layout.recompute == "none":
        return []
    if layout.recompute == "selective":
        return ["--recompute-granularity", "selective"]
    if layout.recompute_every > 1:
        return ["--recompute-granularity", "full", "--recompute-method", "block", "--recompute-num-layers",
                str(layout.recomputed_layers(layers))]
    return ["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"]


def virtual_pipeline_args(model: ModelConfig, layout: Layout) -> list[str]:
    """Interleaved 1F1B: vpp chunks of layers/(pp x vpp) layers on each pipeline rank (Narayanan et al. 2021)."""
    if layout.vpp <= 1:
        return []
    return ["--num-layers-per-virtual-pipeline-stage", str(model.layers // (layout.pp * layout.vpp))]


def precision_args(backend: BackendConfig) -> list[str]:
    return {"bf16": ["--bf16"], "fp16": ["--fp16"], "fp8": ["--bf16"]}.get(backend.precision, [])


def run_args(backend: BackendConfig) -> list[str]:
    """Run warmup + measured iterations, log every one, never evaluate.

    --exit-interval ends the program right after the last measured iteration (no end-of-training evaluation).
    """
    iters = backend.warmup_iters + backend.measure_iters
    return ["--train-iters", str(iters), "--exit-interval", str(iters), "--log-interval", "1",
            "--eval-iters", "0", "--eval-interval", str(EVAL_INTERVAL_NEVER),
            "--lr", str(BENCHMARK_LR), "--seed", str(backend.seed), "--distributed-backend", "nccl"]


def tokenizer_args(kind: str, megatron: MegatronConfig, model: ModelConfig) -> list[str]:
    """--tokenizer-type `kind` and the files it needs (checked by `problems` before anything renders)."""
    args = ["--tokenizer-type", kind]
    if kind in NEEDS_VOCAB_SIZE:
        args += ["--vocab-size", str(model.vocab)]
    if kind in NEEDS_VOCAB_AND_MERGES | NEEDS_VOCAB:
        args += ["--vocab-file", megatron.vocab_file]
    if kind in NEEDS_VOCAB_AND_MERGES:
        args += ["--merge-file", megatron.merge_file]
    if kind in NEEDS_MODEL_FILE:
        args += ["--tokenizer-model", megatron.tokenizer_model]
    return args


def data_args(megatron: MegatronConfig) -> list[str]:
    """--data-path takes a prefix, or Megatron's space-separated list of weight/prefix pairs: split on whitespace
    only when the value is such a list (it starts with a number), so a single path with spaces stays whole."""
    tokens = megatron.data_path.split()
    if len(tokens) > 1 and _is_weight(tokens[0]):
        return ["--data-path", *tokens]
    return ["--data-path", megatron.data_path]


def _is_weight(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


def known_flags(section: str) -> dict[str, frozenset[str] | None]:
    """The flags listed under [section] in megatron_flags.txt: flag -> allowed values (None: any value)."""
    text = resources.files("launcher.backends").joinpath(FLAGS_FILE).read_text()
    flags: dict[str, frozenset[str] | None] = {}
    current = None
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("[") and line.endswith("]"):
            current = line[1:-1]
            continue
        if current == section:
            name, _, choices = line.partition(" ")
            flags[name] = frozenset(choices.strip("{} ").split(",")) if choices else None
    if not flags:
        raise KeyError(f"no section [{section}] in {FLAGS_FILE}")
    return flags
