"""A model's shape from its Hugging Face `config.json`, read as plain JSON (transformers is never imported).

Each family's reader names the keys its transformers config class uses (LlamaConfig, MistralConfig, Qwen2Config,
GPT2Config, GPTNeoXConfig, FalconConfig, GemmaConfig, Gemma2Config). The keys that fix the shape must be in the
file: a default stands in only where transformers itself documents one that every released checkpoint relies on
(GPT-2's FFN of 4h, Falcon's multi-query flag, a family's tied or untied embeddings). What parasweep cannot
represent exactly (a head_dim other than hidden/heads, as in Gemma) is approximated and said in `notes`.

Pure: `shape_from_config` takes the parsed dict; `load_shape` reads the file. Every problem is a ConfigError naming
the file, the architecture and the fields.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Optional

from launcher.core.errors import ConfigError

FIELD = "model.hf_config"



MAX_SIZE = 10**9
"""The largest size a config.json may state (layers, widths, vocabulary, positions): beyond it a value is a typo or
hostile, and would only overflow the estimator."""
MIN_POSITIONS = 16
"""max_position_embeddings / n_positions below this cannot hold a training sequence (seq_len is cut to it)."""
POSITION_KEYS = ("max_position_embeddings", "n_positions")
MAX_CONFIG_BYTES = 16 * 2**20


def _short(value: object) -> str:
    text = repr(value) if not isinstance(value, int) or value < 10**18 else f"an integer of {len(str(value))} digits"
    return text if len(text) <= 60 else text[:57] + "..."


@dataclass(frozen=True)
class HfShape:
    """The ModelConfig fields a config.json determines."""

    architecture: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn_hidden: int
    swiglu: bool
    """Gated FFN (SwiGLU in Llama/Mistral/Qwen2, GeGLU in Gemma): three FFN matrices."""
    vocab: int
    max_position: Optional[int]
    tied_embeddings: bool
    norm: str
    notes: tuple[str, ...] = field(default_factory=tuple)
    tokenizer: str = ""
    """The tokenizer kind the family ships (model.tokenizer): gpt2, sentencepiece or huggingface."""
    num_experts: int = 0
    """Mixture of experts (launcher.plan.moe): routed experts per layer (0: dense), top-k, expert FFN, shared FFN,
    load-balancing coefficient, as ModelConfig names them."""
    moe_topk: int = 2
    moe_ffn_hidden: int = 0
    shared_expert_ffn_hidden: int = 0
    moe_aux_loss_coeff: float = 0.0


class _Reader:
    """Typed access to one config.json that collects every missing or malformed key before failing."""

    def __init__(self, data: dict, where: str, architecture: str) -> None:
        self.data, self.where, self.architecture = data, where, architecture
        self.missing: list[str] = []
        self.bad: list[str] = []

    def int(self, *names: str, default: Optional[int] = None, required: bool = True) -> Optional[int]:
        """The first of `names` present (families renamed keys over time, e.g. Falcon's n_layer)."""
        for name in names:
            if name in self.data and self.data[name] is not None:
                value = self.data[name]
                low = MIN_POSITIONS if name in POSITION_KEYS else 1
                if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= MAX_SIZE:
                    self.bad.append(f"{name}={_short(value)}")
                    return None
                return value
        if default is None and required:
            self.missing.append(names[0])
        return default

    def flag(self, name: str, default: bool) -> bool:
        value = self.data.get(name, default)
        if value is None:
            return default
        if not isinstance(value, bool):
            self.bad.append(f"{name}={value!r}")
            return default
        return value

    def check(self) -> None:
        problems = []
        if self.missing:
            problems.append(f"lacks {', '.join(self.missing)}")
        if self.bad:
            problems.append(f"has {', '.join(self.bad)} (sizes are integers from 1 to {MAX_SIZE:,}, positions at least "
                            f"{MIN_POSITIONS}; flags true or false)")
        if problems:
            raise ConfigError(FIELD, self.where, f"{self.architecture}: {'; '.join(problems)}; a complete "
                              "config.json of this architecture names them")


def _llama_like(r: _Reader, kv_default: Optional[int] = None) -> HfShape:
    """Llama 1/2/3/3.1, Mistral, Qwen2/2.5: gated SiLU FFN (SwiGLU), RMSNorm, GQA, untied embeddings by default."""
    layers, hidden, heads = r.int("num_hidden_layers"), r.int("hidden_size"), r.int("num_attention_heads")
    kv = r.int("num_key_value_heads", default=kv_default or heads, required=False)
    shape = dict(layers=layers, hidden=hidden, heads=heads, kv_heads=kv, ffn_hidden=r.int("intermediate_size"),
                 swiglu=True, vocab=r.int("vocab_size"),
                 max_position=r.int("max_position_embeddings", required=False),
                 tied_embeddings=r.flag("tie_word_embeddings", False), norm="rmsnorm")
    return _finish(r, shape, head_dim=r.int("head_dim", required=False))


def _mistral(r: _Reader) -> HfShape:
    return _llama_like(r, kv_default=8)  # MistralConfig(num_key_value_heads=8): Mistral-7B's GQA


def _gpt2(r: _Reader) -> HfShape:
    """GPT-2: learned positions, LayerNorm, GELU FFN of n_inner (None: 4h), tied embeddings."""
    hidden = r.int("n_embd")
    shape = dict(layers=r.int("n_layer"), hidden=hidden, heads=r.int("n_head"), kv_heads=None,
                 ffn_hidden=r.int("n_inner", default=4 * hidden if hidden else None, required=False),
                 swiglu=False, vocab=r.int("vocab_size"), max_position=r.int("n_positions", required=False),
                 tied_embeddings=r.flag("tie_word_embeddings", True), norm="layernorm")
    return _finish(r, shape)


def _gpt_neox(r: _Reader) -> HfShape:
    """GPT-NeoX / Pythia: LayerNorm, GELU FFN of intermediate_size, untied embed_out by default."""
    shape = dict(layers=r.int("num_hidden_layers"), hidden=r.int("hidden_size"), heads=r.int("num_attention_heads"),
                 kv_heads=None, ffn_hidden=r.int("intermediate_size"), swiglu=False, vocab=r.int("vocab_size"),
                 max_position=r.int("max_position_embeddings", required=False),
                 tied_embeddings=r.flag("tie_word_embeddings", False), norm="layernorm")
    return _finish(r, shape)


def _falcon(r: _Reader) -> HfShape:
    """Falcon: LayerNorm, GELU FFN of ffn_hidden_size (default 4h), multi-query attention (7B) or grouped KV heads
    with the new decoder architecture (40B/180B), tied embeddings. Old RefinedWeb files use n_layer/n_head."""
    hidden = r.int("hidden_size")
    heads = r.int("num_attention_heads", "n_head")
    if r.flag("new_decoder_architecture", False):
        kv = r.int("num_kv_heads", "n_head_kv")
    elif r.flag("multi_query", True):  # FalconConfig(multi_query=True)
        kv = 1
    else:
        kv = heads
    shape = dict(layers=r.int("num_hidden_layers", "n_layer"), hidden=hidden, heads=heads, kv_heads=kv,
                 ffn_hidden=r.int("ffn_hidden_size", default=4 * hidden if hidden else None, required=False),
                 swiglu=False, vocab=r.int("vocab_size"),
                 max_position=r.int("max_position_embeddings", required=False),
                 tied_embeddings=r.flag("tie_word_embeddings", True), norm="layernorm")
    notes = ["parallel attention and MLP (Falcon-7B) modelled as sequential"] if r.data.get("parallel_attn") else []
    return _finish(r, shape, notes=notes)


def _gemma(r: _Reader) -> HfShape:
    """Gemma 1/2: gated GELU FFN (GeGLU, three matrices), RMSNorm, tied embeddings, head_dim of its own (256)."""
    shape = dict(layers=r.int("num_hidden_layers"), hidden=r.int("hidden_size"), heads=r.int("num_attention_heads"),
                 kv_heads=r.int("num_key_value_heads", required=False), ffn_hidden=r.int("intermediate_size"),
                 swiglu=True, vocab=r.int("vocab_size"),
                 max_position=r.int("max_position_embeddings", required=False),
                 tied_embeddings=r.flag("tie_word_embeddings", True), norm="rmsnorm")
    return _finish(r, shape, head_dim=r.int("head_dim", default=256, required=False))


def _coeff(r: _Reader, name: str) -> float:
    value = r.data.get(name)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else 0.0


def _mixtral(r: _Reader) -> HfShape:
    """Mixtral: Mistral's layers with num_local_experts SwiGLU experts of intermediate_size, top
    num_experts_per_tok, in every layer."""
    shape = _llama_like(r, kv_default=8)
    experts, topk = r.int("num_local_experts"), r.int("num_experts_per_tok")
    r.check()
    return replace(shape, num_experts=experts or 0, moe_topk=topk or 2, moe_ffn_hidden=shape.ffn_hidden,
                   moe_aux_loss_coeff=_coeff(r, "router_aux_loss_coef"))


def _qwen2_moe(r: _Reader) -> HfShape:
    """Qwen1.5-MoE / Qwen2-MoE: num_experts of moe_intermediate_size, top num_experts_per_tok, and a shared expert
    of shared_expert_intermediate_size (its sigmoid gate, h parameters, not modelled)."""
    shape = _llama_like(r)
    experts, topk, ffn = r.int("num_experts"), r.int("num_experts_per_tok"), r.int("moe_intermediate_size")
    shared = r.int("shared_expert_intermediate_size", default=0, required=False)
    r.check()
    notes = list(shape.notes)
    if r.data.get("decoder_sparse_step", 1) != 1 or r.data.get("mlp_only_layers"):
        notes.append("dense layers between the MoE layers (decoder_sparse_step/mlp_only_layers) modelled as MoE")
    return replace(shape, num_experts=experts or 0, moe_topk=topk or 2, moe_ffn_hidden=ffn or 0,
                   shared_expert_ffn_hidden=shared or 0, moe_aux_loss_coeff=_coeff(r, "router_aux_loss_coef"),
                   notes=tuple(notes))


def _deepseek(r: _Reader) -> HfShape:
    """DeepSeek-V2/V3 (DeepSeekMoE): n_routed_experts of moe_intermediate_size, top num_experts_per_tok,
    n_shared_experts shared experts of the same size (one shared FFN of n x moe_intermediate_size). What the estimator
    cannot represent is modelled approximately and said in notes: multi-head latent attention (kv_lora_rank) as
    plain attention at hidden/heads per head, the first first_k_dense_replace dense layers as MoE layers."""
    shape = _llama_like(r)
    experts, topk, ffn = r.int("n_routed_experts"), r.int("num_experts_per_tok"), r.int("moe_intermediate_size")
    shared = r.int("n_shared_experts", default=0, required=False)
    r.check()
    notes = list(shape.notes)
    if r.data.get("kv_lora_rank"):
        notes.append(f"multi-head latent attention (kv_lora_rank {r.data['kv_lora_rank']}) modelled as multi-head "
                     "attention of hidden/heads per head")
    dense = r.data.get("first_k_dense_replace") or 0
    if dense:
        notes.append(f"the first {dense} dense layer(s) (first_k_dense_replace) modelled as MoE layers")
    if (r.data.get("moe_layer_freq") or 1) != 1:
        notes.append(f"moe_layer_freq {r.data['moe_layer_freq']} modelled as MoE in every layer")
    return replace(shape, num_experts=experts or 0, moe_topk=topk or 2, moe_ffn_hidden=ffn or 0,
                   shared_expert_ffn_hidden=(shared or 0) * (ffn or 0), moe_aux_loss_coeff=_coeff(r, "aux_loss_alpha"),
                   notes=tuple(notes))


FAMILIES: dict[str, Callable[[_Reader], HfShape]] = {
    "llama": _llama_like, "mistral": _mistral, "qwen2": _llama_like, "gpt2": _gpt2, "gpt_neox": _gpt_neox,
    "falcon": _falcon, "RefinedWeb": _falcon, "RefinedWebModel": _falcon, "gemma": _gemma, "gemma2": _gemma,
    "mixtral": _mixtral, "qwen2_moe": _qwen2_moe, "deepseek_v2": _deepseek, "deepseek_v3": _deepseek,
}
"""model_type -> reader (model_type is what transformers' AutoConfig dispatches on)."""
ARCHITECTURES = {
    "LlamaForCausalLM": "llama", "MistralForCausalLM": "mistral", "Qwen2ForCausalLM": "qwen2",
    "GPT2LMHeadModel": "gpt2", "GPTNeoXForCausalLM": "gpt_neox", "FalconForCausalLM": "falcon",
    "RWForCausalLM": "falcon", "GemmaForCausalLM": "gemma", "Gemma2ForCausalLM": "gemma2",
    "MixtralForCausalLM": "mixtral", "Qwen2MoeForCausalLM": "qwen2_moe", "DeepseekV2ForCausalLM": "deepseek_v2",
    "DeepseekV3ForCausalLM": "deepseek_v3",
}
"""architectures[0] -> model_type, for files without a model_type."""
SUPPORTED = ("Llama 1/2/3/3.1, Mistral, Qwen2/2.5, GPT-2, GPT-NeoX/Pythia, Falcon, Gemma 1/2, Mixtral, "
             "Qwen-MoE, DeepSeek-V2/V3 (model_type "
             + ", ".join(sorted({k for k in FAMILIES if k.islower() or "_" in k})) + ")")


def _finish(r: _Reader, shape: dict, head_dim: Optional[int] = None, notes: Optional[list] = None) -> HfShape:
    r.check()
    notes = list(notes or [])
    if shape["kv_heads"] is None:
        shape["kv_heads"] = shape["heads"]
    if shape["hidden"] % shape["heads"]:
        raise ConfigError(FIELD, r.where, f"{r.architecture}: hidden_size {shape['hidden']} is not a multiple of "
                          f"num_attention_heads {shape['heads']}, which parasweep's estimator assumes")
    if shape["heads"] % shape["kv_heads"]:
        raise ConfigError(FIELD, r.where, f"{r.architecture}: num_attention_heads {shape['heads']} is not a "
                          f"multiple of the {shape['kv_heads']} key/value heads")
    if head_dim and head_dim * shape["heads"] != shape["hidden"]:
        # parasweep's shape has no head_dim: attention is modelled at hidden/heads per head (say how far off)
        modelled = shape["hidden"] // shape["heads"]
        notes.append(f"head_dim {head_dim} x {shape['heads']} heads != hidden {shape['hidden']}: modelled with "
                     f"head_dim {modelled} (attention weights and FLOPs {modelled / head_dim - 1:+.0%})")
    return HfShape(architecture=r.architecture, notes=tuple(notes), **shape)


def shape_from_config(data: Any, where: str = "config.json") -> HfShape:
    """The shape of the model a parsed config.json describes; `where` names the file in messages."""
    if not isinstance(data, dict):
        raise ConfigError(FIELD, where, f"holds {type(data).__name__}, not a JSON object: give a Hugging Face "
                          "config.json")
    architectures = data.get("architectures")
    first = architectures[0] if isinstance(architectures, list) and architectures and \
        isinstance(architectures[0], str) else ""
    model_type = data.get("model_type") if isinstance(data.get("model_type"), str) else ""
    family = model_type if model_type in FAMILIES else ARCHITECTURES.get(first, "")
    label = first or model_type or "no architectures/model_type"
    if model_type and model_type != label:
        label += f" (model_type {model_type})"
    label = " ".join(label.split())[:120] or repr(first)  # a name from the file, on one line (messages are one line)
    if not family:
        raise ConfigError(FIELD, where, f"architecture {label} is not supported; supported: {SUPPORTED}; for "
                          "another model write its shape in a model file (DIR/model/NAME.yaml, see conf/model/)")
    shape = FAMILIES[family](_Reader(data, where, label))
    return replace(shape, tokenizer=tokenizer_of(family, shape.vocab))


def tokenizer_of(family: str, vocab: int) -> str:
    """Which tokenizer files a family ships: GPT-2's BPE vocab + merges; a SentencePiece tokenizer.model (Llama 1/2,
    Mistral, Gemma); or Hugging Face tokenizer files (Llama 3's 128K tiktoken-style vocabulary, Qwen2, GPT-NeoX,
    Falcon)."""
    if family == "gpt2":
        return "gpt2"
    if family in ("mistral", "mixtral", "gemma", "gemma2") or (family == "llama" and vocab < 100_000):
        return "sentencepiece"
    return "huggingface"


def config_path(text: str) -> Path:
    """A config.json, or a folder holding one (a downloaded model's folder)."""
    path = Path(text).expanduser()
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        where = "" if path.is_absolute() else f" (a relative path: looked for in {Path.cwd()}, the directory the " \
            "command runs in)"
        raise ConfigError(FIELD, text, f"no such file{where}: give the path of a Hugging Face config.json (or of "
                          "the folder that holds it)" + (", or an absolute path" if where else ""))
    return path.resolve()


def load_shape(text: str) -> tuple[Path, HfShape]:
    path = config_path(text)
    try:
        size_bytes = path.stat().st_size
        if size_bytes > MAX_CONFIG_BYTES:
            raise ConfigError(FIELD, str(path), f"is {size_bytes:,} bytes: a config.json is a few KB; "
                              "give the model's config.json")
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:  # ValueError: bad JSON, or an integer of > 4300 digits
        why = "an integer of thousands of digits" if "integer string conversion" in str(exc) else \
            str(exc).splitlines()[0][:200]
        raise ConfigError(FIELD, str(path), f"is not readable JSON ({why}): give the model's config.json") from None
    except RecursionError:
        raise ConfigError(FIELD, str(path), "is not a model config (JSON nested too deep to read): give the model's "
                          "config.json") from None
    if not isinstance(data, dict):
        raise ConfigError(FIELD, str(path), f"is a JSON {type(data).__name__}, not a JSON object: give the model's "
                          "config.json")
    return path, shape_from_config(data, str(path))


SHAPE_FIELDS = ("layers", "hidden", "heads", "kv_heads", "ffn_hidden", "swiglu", "vocab", "max_position",
                "tied_embeddings", "norm", "num_experts", "moe_topk", "moe_ffn_hidden", "shared_expert_ffn_hidden",
                "moe_aux_loss_coeff")


def apply_to_fields(model: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """The model section's fields (a plain dict, before it becomes a ModelConfig) with the shape of its hf_config
    filled in; `defaults` are the schema's defaults (launcher.config.load calls this before converting).

    A shape field also given by hand must agree with the file. seq_len stays the user's: config.json holds no
    training length (max_position_embeddings is the context limit, 131,072 for Llama-3.1, which nobody pretrains
    at), so the schema default of 2048 stands, cut to max_position_embeddings where that is shorter (GPT-2: 1024).
    """
    if not model.get("hf_config"):
        raise ConfigError(FIELD, "", "model=hf reads the shape from a Hugging Face config.json: add "
                          f"{FIELD}=PATH/config.json (or the folder holding it)")
    out = dict(model)
    path, shape = load_shape(out["hf_config"])
    for key in SHAPE_FIELDS:
        given, read = out.get(key, defaults[key]), getattr(shape, key)
        if given != defaults[key] and given != read and read is not None:
            raise ConfigError(f"model.{key}", given, f"{path} gives {read!r}: leave model.{key} unset with {FIELD}, "
                              "or edit a copy of the config.json")
        out[key] = defaults[key] if read is None else read  # the schema's 0: derived from the others
    if out["max_position"] and out["seq_len"] > out["max_position"]:
        if out["seq_len"] != defaults["seq_len"]:
            raise ConfigError("model.seq_len", out["seq_len"], f"longer than max_position_embeddings "
                              f"{out['max_position']} in {path}: use {out['max_position']} or less")
        out["seq_len"] = out["max_position"]
    if out.get("name") in ("", "hf", "???", None):
        name = path.parent.name if path.name == "config.json" else path.stem
        out["name"] = name if name not in ("", "hf") else "hf-model"  # "hf" would ask for a config.json again
    if not out.get("source"):
        out["source"] = f"{path} ({shape.architecture})" + "".join(f"; {n}" for n in shape.notes)
    if not out.get("tokenizer"):
        out["tokenizer"] = shape.tokenizer
    return out
