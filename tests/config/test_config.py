"""Every shipped config composes and validates; user mistakes become one clear ConfigError."""

from pathlib import Path

import pytest

from launcher.core.errors import ConfigError, ParasweepError

CONF = Path(__file__).resolve().parents[2] / "conf"


def names(group):
    return sorted(p.stem for p in (CONF / group).glob("*.yaml"))


def test_registry_has_the_required_models_and_clusters():
    assert {"gpt-1.7b", "gpt-1t", "gpt3-175b", "bloom-176b", "llama2-70b", "llama3-70b", "tiny"} <= set(names("model"))
    assert {"llama2-7b", "llama2-13b", "llama3.1-8b", "llama3.1-70b", "llama3.1-405b", "mistral-7b", "qwen2.5-7b",
            "qwen2.5-72b", "hf"} <= set(names("model"))
    assert len([n for n in names("model") if n.startswith("gpt-")]) == 10
    assert {"a100-40g", "a100-80g", "h100-80g", "h200-141g", "v100-32g", "local-cpu"} <= set(names("cluster"))


@pytest.mark.parametrize("model", names("model"))
def test_every_model_composes_and_names_its_source(load, model):
    if model == "hf":  # the shape comes from a config.json (tests/config/test_hf_config.py); its name from its folder
        cfg = load("model=hf", f"model.hf_config={CONF.parent / 'tests' / 'fixtures' / 'hf' / 'gpt2'}")
        assert cfg.model.name == "gpt2"
    else:
        cfg = load(f"model={model}")
        assert cfg.model.name == model
    assert cfg.model.source
    assert (CONF / "model" / f"{model}.yaml").read_text().startswith("#")
    assert cfg.model.hidden % cfg.model.heads == 0


@pytest.mark.parametrize("cluster", names("cluster"))
def test_every_cluster_composes(load, cluster):
    cfg = load(f"cluster={cluster}")
    assert cfg.cluster.name == cluster and cfg.cluster.peak_tflops > 0 and cfg.cluster.partition


@pytest.mark.parametrize("sweep", names("sweep"))
def test_every_sweep_composes(load, sweep):
    cfg = load(f"+sweep={sweep}")
    assert cfg.sweep.name == sweep
    assert (CONF / "sweep" / f"{sweep}.yaml").read_text().startswith("# @package _global_")


@pytest.mark.parametrize("group", ["backend", "executor"])
def test_every_backend_and_executor_composes(load, group):
    for name in names(group):
        assert getattr(load(f"{group}={name}"), group).name == name


def test_llama2_shape(load):
    m = load("model=llama2-70b").model
    assert (m.layers, m.hidden, m.heads, m.kv_heads, m.ffn_hidden, m.vocab, m.swiglu) == (80, 8192, 64, 8, 28672, 32000, True)


def test_gpt_models_default_to_multi_head_attention(load):
    m = load("model=gpt-1.7b").model
    assert m.kv_heads == m.heads == 24 and m.ffn_hidden == 4 * 2304


def test_unknown_model_lists_valid_ones(load):
    with pytest.raises(ConfigError) as err:
        load("model=llama-70b")
    assert "llama2-70b" in str(err.value) and "did you mean" in str(err.value)


def test_unknown_sweep_and_missing_plus(load):
    with pytest.raises(ConfigError, match="valid: 70b"):
        load("+sweep=7b")
    with pytest.raises(ConfigError, match=r"\+sweep=NAME"):
        load("sweep=70b")


def test_misspelt_key_is_named_with_suggestion(load):
    with pytest.raises(ConfigError) as err:
        load("+sweep=70b", "grid.tpp=[1,2]")
    assert "grid.tpp" in str(err.value) and "'tp'" in str(err.value)


def test_unknown_executor_key_lists_valid_keys(load):
    with pytest.raises(ConfigError) as err:
        load("executor.partiton=gpu")
    assert "timeout_min" in str(err.value) and "executor.partiton" in str(err.value)


@pytest.mark.parametrize("override, field", [
    ("model.layers=0", "model.layers"), ("model.hidden=-64", "model.hidden"), ("grid.mbs=[0]", "grid.mbs"),
    ("cluster.gpu_mem_gb=-1", "cluster.gpu_mem_gb"), ("grid.recompute=[fulll]", "grid.recompute"),
    ("grid.zero_stage=[4]", "grid.zero_stage"), ("backend.precision=fp8", "backend.precision"),
    ("cluster.gpu_mem_gb=lots", "cluster.gpu_mem_gb"), ("executor.timeout_min=0", "executor.timeout_min"),
    ("monitor.poll_interval_s=-1", "monitor.poll_interval_s"), ("retry.max_attempts=0", "retry.max_attempts"),
    ("sweep.name=", "sweep.name"), ("sweep.name=../x", "sweep.name"),
])
def test_bad_values_name_the_field(load, override, field):
    with pytest.raises(ParasweepError) as err:
        load(override)
    assert field in str(err.value)


def test_fresh_is_a_value_override(load):
    assert load("+sweep=tiny", "sweep.fresh=true").sweep.fresh is True


@pytest.mark.parametrize("override, message", [
    ("grid.tp=four", "grid.tp='four': give a list, e.g. grid.tp=[1,2,4]"),
    ("grid.tp=[1,four]", "grid.tp[1]='four': give an integer"),
    ("cluster.gpu_mem_gb=lots", "cluster.gpu_mem_gb='lots': give a float"),
    ("plan.keep_borderline=-1", "plan.keep_borderline=-1.0: use 0 (prune at the margin) or more"),
    ("plan.max_trials=-1", "plan.max_trials=-1: use 0 (no budget) or more"),
])
def test_bad_values_name_the_field_and_the_value_given(load, override, message):
    with pytest.raises(ConfigError) as err:
        load(override)
    assert str(err.value) == message


def test_the_tiny_sweep_comment_counts_its_trials(load):
    """conf/sweep/tiny.yaml says how many trials it runs: the plan must agree (it once said 8 and ran 10)."""
    import re

    from launcher.plan.planner import make_plan

    said = int(re.search(r"# (\d+) trials", (CONF / "sweep" / "tiny.yaml").read_text()).group(1))
    assert len(make_plan(load("+sweep=tiny")).trials) == said
