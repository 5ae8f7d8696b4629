"""What the two Megatron backends share: model shape, layout, run length, precision and tokenizer arguments.

Every flag rendered here exists in both upstream argument parsers (microsoft/Megatron-DeepSpeed
megatron/arguments.py and NVIDIA/Megatron-LM megatron/training/arguments.py); megatron_flags.txt lists the known
flags per backend with the commits they were read from, and the tests check every rendered flag against it.
"""

from __future__ import annotations

import functools
import posixpath
from pathlib import Path, PurePosixPath
from importlib import resources

from launcher.errors import ConfigError
from launcher.layout import Layout
from launcher.schema import BackendConfig, ModelConfig

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


def pretrain_script(backend: BackendConfig, program: str) -> str:
    """Path of pretrain_gpt.py in the configured checkout."""
    path = backend.megatron_path
    if not path:
        raise ConfigError("backend.megatron_path", path, f"set it to the {program} checkout on the cluster "
                          "(the folder holding pretrain_gpt.py)")
    if path.startswith(PLACEHOLDER_PREFIX):
        raise ConfigError("backend.megatron_path", path, f"this is the shipped placeholder: set it to the {program} "
                          "checkout on the cluster, e.g. backend.megatron_path=/shared/Megatron")
    missing = missing_checkout(path)
    if missing:
        raise ConfigError("backend.megatron_path", path, f"{missing}: set it to the {program} checkout (the folder "
                          "holding pretrain_gpt.py)")
    return posixpath.join(path, "pretrain_gpt.py")


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


def check_batch(layout: Layout) -> None:
    if layout.gbs % (layout.mbs * layout.dp):
        raise ConfigError("layout.gbs", layout.gbs,
                          f"use a multiple of mbs x dp = {layout.mbs} x {layout.dp} = {layout.mbs * layout.dp}")


def parallel_args(layout: Layout) -> list[str]:
    args = ["--tensor-model-parallel-size", str(layout.tp), "--pipeline-model-parallel-size", str(layout.pp),
            "--micro-batch-size", str(layout.mbs), "--global-batch-size", str(layout.gbs)]
    if layout.sequence_parallel:
        args.append("--sequence-parallel")
    return args + recompute_args(layout.recompute)


def recompute_args(recompute: str) -> list[str]:
    """Selective: core attention only (takes no method). Full: every layer, one layer per checkpoint
    (uniform, 1), the setting Korthikanti et al. 2022 compare against."""
    if recompute == "none":
        return []
    if recompute == "selective":
        return ["--recompute-granularity", "selective"]
    if recompute == "full":
        return ["--recompute-granularity", "full", "--recompute-method", "uniform", "--recompute-num-layers", "1"]
    raise ConfigError("layout.recompute", recompute, "use none, selective or full")


def virtual_pipeline_args(model: ModelConfig, layout: Layout) -> list[str]:
    """Interleaved 1F1B: vpp chunks of layers/(pp x vpp) layers on each pipeline rank (Narayanan et al. 2021)."""
    if layout.vpp <= 1:
        return []
    if layout.pp < 2:
        raise ConfigError("layout.vpp", layout.vpp, "virtual pipeline stages need pp >= 2: use vpp=1")
    if model.layers % (layout.pp * layout.vpp):
        raise ConfigError("layout.vpp", layout.vpp, f"layers ({model.layers}) must divide into pp x vpp = "
                          f"{layout.pp * layout.vpp} chunks: pick another vpp")
    return ["--num-layers-per-virtual-pipeline-stage", str(model.layers // (layout.pp * layout.vpp))]


def precision_args(backend: BackendConfig) -> list[str]:
    if backend.precision == "bf16":
        return ["--bf16"]
    if backend.precision == "fp16":
        return ["--fp16"]
    if backend.flash_attention:
        raise ConfigError("backend.flash_attention", True, "flash attention runs in bf16/fp16 only: set "
                          "backend.precision=bf16 or backend.flash_attention=false")
    return []


def run_args(backend: BackendConfig) -> list[str]:
    """Run warmup + measured iterations, log every one, never evaluate.

    --exit-interval ends the program right after the last measured iteration (no end-of-training evaluation).
    """
    iters = backend.warmup_iters + backend.measure_iters
    return ["--train-iters", str(iters), "--exit-interval", str(iters), "--log-interval", "1",
            "--eval-iters", "0", "--eval-interval", str(EVAL_INTERVAL_NEVER),
            "--lr", str(BENCHMARK_LR), "--seed", str(backend.seed), "--distributed-backend", "nccl"]


def tokenizer_args(backend: BackendConfig, model: ModelConfig, allowed: frozenset[str], program: str) -> list[str]:
    kind = backend.tokenizer_type
    if kind not in allowed:
        raise ConfigError("backend.tokenizer_type", kind, f"{program} accepts {', '.join(sorted(allowed))}")
    args = ["--tokenizer-type", kind]
    if kind in NEEDS_VOCAB_SIZE:
        args += ["--vocab-size", str(model.vocab)]
    if kind in NEEDS_VOCAB_AND_MERGES | NEEDS_VOCAB:
        args += ["--vocab-file", _required(backend, "vocab_file", kind)]
    if kind in NEEDS_VOCAB_AND_MERGES:
        args += ["--merge-file", _required(backend, "merge_file", kind)]
    if kind in NEEDS_MODEL_FILE:
        args += ["--tokenizer-model", _required(backend, "tokenizer_model", kind)]
    return args


def _required(backend: BackendConfig, name: str, kind: str) -> str:
    value = getattr(backend, name)
    if not value:
        raise ConfigError(f"backend.{name}", value, f"tokenizer {kind} needs it (or use tokenizer_type=NullTokenizer "
                          "with synthetic data)")
    return value


def data_args(backend: BackendConfig) -> list[str]:
    """--data-path takes a prefix, or a space-separated list of weight/prefix pairs (Megatron's format)."""
    return ["--data-path", *backend.data_path.split()]


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
