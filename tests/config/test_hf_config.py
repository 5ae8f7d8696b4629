"""launcher.config.hf_config on real Hugging Face config.json files (tests/fixtures/hf, sources in INDEX.tsv); every
shipped model file that cites a config.json equals what the reader derives from it; hostile files give one
ConfigError naming the file, the architecture and the fields."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from launcher.config.hf_config import SHAPE_FIELDS, HfShape, apply_to_fields, load_shape, shape_from_config
from launcher.core.errors import ConfigError

REPO = Path(__file__).resolve().parents[2]
HF = REPO / "tests" / "fixtures" / "hf"
INDEX = {row[0]: row[1:] for row in (line.split("\t") for line in (HF / "INDEX.tsv").read_text().splitlines()
                                     if line and not line.startswith("#"))}

# Fields a reader of the family must get right, written out from each model's card (not computed by the reader):
# (layers, hidden, heads, kv_heads, ffn_hidden, swiglu, vocab, max_position, tied_embeddings, norm)
EXPECTED = {
    "gpt2": (12, 768, 12, 12, 3072, False, 50257, 1024, True, "layernorm"),
    "gpt-neox-20b": (44, 6144, 64, 64, 24576, False, 50432, 2048, False, "layernorm"),
    "falcon-7b": (32, 4544, 71, 1, 18176, False, 65024, None, True, "layernorm"),
    "gemma-7b": (28, 3072, 16, 16, 24576, True, 256000, 8192, True, "rmsnorm"),
    "gemma-2-9b": (42, 3584, 16, 8, 14336, True, 256000, 8192, True, "rmsnorm"),
    "Mistral-7B-v0.1": (32, 4096, 32, 8, 14336, True, 32000, 32768, False, "rmsnorm"),
    "Llama-2-7b-hf": (32, 4096, 32, 32, 11008, True, 32000, 4096, False, "rmsnorm"),
    "Llama-3.1-405B": (126, 16384, 128, 8, 53248, True, 128256, 131072, False, "rmsnorm"),
    "Qwen2.5-7B": (28, 3584, 28, 4, 18944, True, 152064, 131072, False, "rmsnorm"),
}

# (num_experts, moe_topk, moe_ffn_hidden, shared_expert_ffn_hidden, moe_aux_loss_coeff), from the model cards
MOE_EXPECTED = {
    "Mixtral-8x7B-v0.1": (8, 2, 14336, 0, 0.02),
    "Qwen1.5-MoE-A2.7B": (60, 4, 1408, 5632, 0.001),
    "DeepSeek-V2-Lite": (64, 6, 1408, 2 * 1408, 0.001),      # 2 shared experts of 1408: one FFN of 2816
}
EXPECTED |= {
    "Mixtral-8x7B-v0.1": (32, 4096, 32, 8, 14336, True, 32000, 32768, False, "rmsnorm"),
    "Qwen1.5-MoE-A2.7B": (24, 2048, 16, 16, 5632, True, 151936, 8192, False, "rmsnorm"),
    "DeepSeek-V2-Lite": (27, 2048, 16, 16, 10944, True, 102400, 163840, False, "rmsnorm"),
}

SHIPPED = {  # conf/model/NAME.yaml -> the fixture of the config.json it cites
    "llama2-7b": "Llama-2-7b-hf", "llama2-13b": "Llama-2-13b-hf", "llama3.1-8b": "Llama-3.1-8B",
    "llama3.1-70b": "Llama-3.1-70B", "llama3.1-405b": "Llama-3.1-405B", "mistral-7b": "Mistral-7B-v0.1",
    "qwen2.5-7b": "Qwen2.5-7B", "qwen2.5-72b": "Qwen2.5-72B-Instruct", "mixtral-8x7b": "Mixtral-8x7B-v0.1",
}


def shape(folder: str) -> HfShape:
    return load_shape(str(HF / folder))[1]


DENSE_FIELDS = SHAPE_FIELDS[:10]
"""The dense shape (EXPECTED's order); the rest are the mixture-of-experts fields (MOE_EXPECTED)."""
MOE_FIELDS = SHAPE_FIELDS[10:]


def as_tuple(s) -> tuple:
    return tuple(getattr(s, k) for k in DENSE_FIELDS)


def test_every_fixture_is_listed_with_its_source_and_the_families_are_covered():
    folders = {p.parent.name for p in HF.glob("*/config.json")}
    assert folders == set(INDEX)
    assert all(url.startswith("https://huggingface.co/") and url.endswith("/config.json") for url, _ in INDEX.values())
    assert {family for _, family in INDEX.values()} == {"llama", "mistral", "qwen2", "gpt2", "gpt_neox", "falcon",
                                                        "gemma", "gemma2", "mixtral", "qwen2_moe", "deepseek_v2"}


@pytest.mark.parametrize("folder", sorted(INDEX))
def test_every_real_config_reads_into_a_consistent_shape(folder):
    s = shape(folder)
    assert s.architecture.startswith(json.loads((HF / folder / "config.json").read_text())["architectures"][0])
    assert s.hidden % s.heads == 0 and s.heads % s.kv_heads == 0
    if folder in EXPECTED:
        assert as_tuple(s) == EXPECTED[folder]
    assert tuple(getattr(s, k) for k in MOE_FIELDS) == MOE_EXPECTED.get(folder, (0, 2, 0, 0, 0.0))


def test_what_the_estimator_cannot_represent_of_deepseek_is_said():
    notes = " ".join(shape("DeepSeek-V2-Lite").notes)
    assert "multi-head latent attention (kv_lora_rank 512)" in notes
    assert "the first 1 dense layer(s) (first_k_dense_replace) modelled as MoE layers" in notes
    assert shape("Mixtral-8x7B-v0.1").notes == () and shape("Qwen1.5-MoE-A2.7B").notes == ()


def test_model_hf_reads_an_moe_model_into_a_checked_model_config(load):
    model = load("model=hf", f"model.hf_config={HF / 'Qwen1.5-MoE-A2.7B'}").model
    assert (model.num_experts, model.moe_topk, model.moe_ffn_hidden, model.shared_expert_ffn_hidden) == (
        60, 4, 1408, 5632)
    assert model.is_moe and model.tokenizer == "huggingface"


def test_gemma_head_dim_is_approximated_and_said():
    notes = " ".join(shape("gemma-7b").notes)
    assert "head_dim 256 x 16 heads != hidden 3072" in notes and "-25%" in notes
    assert shape("Llama-3.1-8B").notes == ()  # head_dim absent: hidden/heads, nothing to say


@pytest.mark.parametrize("name, folder", sorted(SHIPPED.items()))
def test_shipped_model_equals_what_its_config_json_gives(name, folder):
    data = yaml.safe_load((REPO / "conf" / "model" / f"{name}.yaml").read_text())
    assert tuple(data[k] for k in DENSE_FIELDS) == as_tuple(shape(folder))
    defaults = (0, 2, 0, 0, 0.0)      # a dense model file leaves the expert fields out
    assert tuple(data.get(k, d) for k, d in zip(MOE_FIELDS, defaults)) == tuple(
        getattr(shape(folder), k) for k in MOE_FIELDS)
    assert data["tokenizer"] == shape(folder).tokenizer  # what the Megatron backends load
    assert data["source"] == INDEX[folder][0]
    assert data["seq_len"] <= data["max_position"]


def test_model_hf_takes_name_source_and_shape_from_the_file(load):
    model = load("model=hf", f"model.hf_config={HF / 'Llama-2-7b-hf'}").model
    assert model.name == "Llama-2-7b-hf" and str(HF / "Llama-2-7b-hf" / "config.json") in model.source
    assert as_tuple(model) == EXPECTED["Llama-2-7b-hf"] and model.seq_len == 2048
    assert load("model=hf", f"model.hf_config={HF / 'gpt2' / 'config.json'}").model.seq_len == 1024  # capped
    assert load("model=hf", f"model.hf_config={HF / 'gpt2'}", "model.seq_len=512").model.seq_len == 512
    agreeing = load("model=hf", f"model.hf_config={HF / 'gpt2'}", "model.layers=12").model
    assert agreeing.layers == 12


@pytest.mark.parametrize("overrides, needle", [
    (["model=hf"], "model=hf reads the shape from a Hugging Face config.json"),
    (["model=hf", "model.hf_config=/nowhere/config.json"], "no such file"),
    (["model=hf", "model.hf_config={hf}/gpt2", "model.layers=6"], "model.layers=6: "),
    (["model=hf", "model.hf_config={hf}/gpt2", "model.seq_len=4096"], "longer than max_position_embeddings 1024"),
])
def test_model_hf_mistakes_are_one_message(load, overrides, needle):
    with pytest.raises(ConfigError) as err:
        load(*[o.format(hf=HF) for o in overrides])
    assert needle in str(err.value) and "\n" not in str(err.value)


def test_missing_fields_are_all_named_with_the_file_and_architecture(tmp_path):
    data = json.loads((HF / "Qwen2.5-7B" / "config.json").read_text())
    for key in ("num_hidden_layers", "intermediate_size"):
        del data[key]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError) as err:
        load_shape(str(tmp_path))
    message = str(err.value)
    assert str(path) in message and "Qwen2ForCausalLM (model_type qwen2)" in message
    assert "lacks num_hidden_layers, intermediate_size" in message


def test_unknown_architecture_is_named_with_what_is_supported():
    with pytest.raises(ConfigError) as err:
        shape_from_config({"architectures": ["MambaForCausalLM"], "model_type": "mamba", "hidden_size": 768},
                          "/m/config.json")
    assert "MambaForCausalLM (model_type mamba) is not supported" in str(err.value)
    assert "gpt_neox" in str(err.value) and "/m/config.json" in str(err.value)


@pytest.mark.parametrize("text, needle", [("{", "is not readable JSON"), ("[1, 2]", "not a JSON object"),
                                          ('{"model_type": "gpt2", "n_layer": "12", "n_embd": 768, "n_head": 12, '
                                           '"vocab_size": 50257}', "n_layer='12'")])
def test_malformed_files(tmp_path, text, needle):
    (tmp_path / "config.json").write_text(text)
    with pytest.raises(ConfigError, match=needle):
        load_shape(str(tmp_path / "config.json"))


KEYS = ["num_hidden_layers", "hidden_size", "num_attention_heads", "num_key_value_heads", "intermediate_size",
        "vocab_size", "max_position_embeddings", "tie_word_embeddings", "head_dim", "n_layer", "n_embd", "n_head",
        "n_inner", "n_positions", "multi_query", "new_decoder_architecture", "num_kv_heads", "ffn_hidden_size"]
VALUES = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**6), st.floats(allow_nan=True), st.text(max_size=5),
                   st.lists(st.integers(), max_size=2))


@settings(max_examples=300, deadline=None)
@given(model_type=st.sampled_from(["llama", "mistral", "qwen2", "gpt2", "gpt_neox", "falcon", "gemma", "gemma2",
                                   "RefinedWeb", "other", ""]),
       fields=st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=len(KEYS)),
       architectures=st.one_of(st.none(), st.lists(st.one_of(st.text(max_size=20), st.integers()), max_size=2)))
def test_hostile_configs_give_a_shape_or_one_config_error(model_type, fields, architectures):
    data = {"model_type": model_type, "architectures": architectures, **fields}
    try:
        s = shape_from_config(data, "x/config.json")
    except ConfigError as exc:
        assert "x/config.json" in str(exc) and "\n" not in str(exc)
        return
    assert all(isinstance(v, int) and v > 0 for v in (s.layers, s.hidden, s.heads, s.kv_heads, s.ffn_hidden, s.vocab))
    assert s.hidden % s.heads == 0 and s.heads % s.kv_heads == 0


def test_the_written_config_holds_the_shape_and_reloads_without_the_file(load, tmp_path):
    from omegaconf import OmegaConf

    from launcher.config.load import to_yaml
    from launcher.config.schema import RootConfig

    folder = tmp_path / "hf"  # a folder named like the group must not make the model ask for a config.json again
    folder.mkdir()
    (folder / "config.json").write_text((HF / "Mistral-7B-v0.1" / "config.json").read_text())
    cfg = load("model=hf", f"model.hf_config={folder}")
    text = to_yaml(cfg)
    (folder / "config.json").unlink()  # python -m analysis later reads config.yaml alone
    again = OmegaConf.to_object(OmegaConf.merge(OmegaConf.structured(RootConfig), OmegaConf.create(text)))
    assert as_tuple(again.model) == as_tuple(cfg.model) and again.model.name == "hf-model"
    assert str(folder / "config.json") in again.model.source


@pytest.mark.parametrize("folder, tokenizer", [("Llama-2-7b-hf", "sentencepiece"), ("Llama-3.1-8B", "huggingface"),
                                               ("Mistral-7B-v0.1", "sentencepiece"), ("Qwen2.5-7B", "huggingface"),
                                               ("gpt2", "gpt2"), ("gemma-7b", "sentencepiece")])
def test_the_tokenizer_kind_follows_the_family(folder, tokenizer):
    from launcher.config.hf_config import load_shape

    assert load_shape(str(HF / folder))[1].tokenizer == tokenizer


def test_a_missing_relative_path_says_relative_to_what(load, tmp_path, monkeypatch):
    """Issue 20: a relative model.hf_config run from another directory only said 'no such file'."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as err:
        load("model=hf", "model.hf_config=models/Llama-2-7b-hf")
    assert f"a relative path: looked for in {tmp_path}, the directory the command runs in" in str(err.value)
    assert "or an absolute path" in str(err.value)
    with pytest.raises(ConfigError) as err:
        load("model=hf", "model.hf_config=/nowhere/config.json")
    assert "relative" not in str(err.value)


LLAMA = ('{"model_type": "llama", "hidden_size": %s, "num_attention_heads": 4, "num_hidden_layers": 2, '
         '"vocab_size": 100, "intermediate_size": 128, "max_position_embeddings": %s}')


@pytest.mark.parametrize("text, needle", [
    ('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deep"),       # RecursionError in json
    (LLAMA % ("9" * 5000, 4096), "an integer of thousands of digits"),        # int digits limit (ValueError)
    (LLAMA % (10**12, 4096), "hidden_size=1000000000000"),                     # beyond any model: overflow later
    (LLAMA % (64, 1), "max_position_embeddings=1"),                          # seq_len was silently cut to 1
], ids=["deep", "digits", "huge", "one-position"])
def test_hostile_files_are_one_config_error(tmp_path, text, needle):
    """Issue 19 point 7: these gave a RecursionError / ValueError traceback, or a sweep at seq_len 1."""
    (tmp_path / "config.json").write_text(text)
    with pytest.raises(ConfigError, match=needle) as err:
        apply_to_fields({"hf_config": str(tmp_path / "config.json"), "seq_len": 2048},
                        {k: 0 for k in SHAPE_FIELDS} | {"seq_len": 2048})
    assert "\n" not in str(err.value)
