"""estimate(), the cluster-preset loader, conf_dir(), and the JSON-lines CLI `python -m launcher.estimate`."""

from __future__ import annotations

import dataclasses
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from launcher.config.paths import conf_dir
from launcher.config.schema import ModelConfig, swiglu_ffn
from launcher.core.errors import ConfigError
from launcher.core.layout import Layout
from launcher.estimate import Estimate, estimate, load_cluster_preset, main, parse_request

REPO = Path(__file__).resolve().parents[2]

# GPT-3 175B on 64 A100-80GB: tp 8 x pp 8, 64 micro-batches.
GOOD = dict(layers=96, hidden=12288, heads=96, seq_len=2048, vocab=51200, gpu="a100-80g", n_gpus=64, tp=8, pp=8,
            dp=1, mbs=1, gbs=64, recompute="selective", sequence_parallel=True)


def run_cli(lines: list[str]) -> tuple[list[dict], int]:
    out = io.StringIO()
    code = main(io.StringIO("".join(line + "\n" for line in lines)), out)
    return [json.loads(x) for x in out.getvalue().splitlines()], code


# ----------------------------------------------------------------------------------------------- presets, paths

def test_conf_dir_holds_the_cluster_presets():
    assert conf_dir() == REPO / "conf"
    assert (conf_dir() / "cluster" / "a100-80g.yaml").is_file()


def test_load_cluster_preset_reads_the_yaml():
    c = load_cluster_preset("h100-80g")
    assert (c.gpu_mem_gb, c.peak_tflops, c.gpus_per_node, c.intra_node_gbytes_per_s) == (85.5, 989, 8, 450)
    assert load_cluster_preset("h100-80g") is not c               # a fresh object each time
    with pytest.raises(dataclasses.FrozenInstanceError):          # and a frozen one: change it with replace()
        c.gpus_per_node = 4


def test_unknown_preset_lists_the_valid_names():
    with pytest.raises(ConfigError) as err:
        load_cluster_preset("a100-90g")
    assert err.value.field == "gpu"
    for name in ("a100-40g", "a100-80g", "h100-80g", "h200-141g", "v100-32g"):
        assert name in str(err.value)


# ----------------------------------------------------------------------------------------------- estimate()

def test_estimate_fields_are_consistent():
    r = parse_request(json.dumps(GOOD))
    e = estimate(r.model, r.cluster, r.layout, r.precision)
    assert isinstance(e, Estimate)
    assert e.headroom == pytest.approx(1 - e.peak_mem_gb / load_cluster_preset("a100-80g").gpu_mem_gb)
    assert sum(e.mem_breakdown_gb.values()) == pytest.approx(e.peak_mem_gb)
    assert set(e.mem_breakdown_gb) == {"weights", "grads", "optimizer", "gathered", "activations", "logits",
                                       "temporaries", "fragmentation", "context"}
    assert 0.3 < e.mfu < 0.65                               # published 175B runs: ~0.4-0.55
    assert 0 < e.headroom < 1


def test_unknown_precision_is_a_config_error():
    r = parse_request(json.dumps(GOOD))
    with pytest.raises(ConfigError) as err:
        estimate(r.model, r.cluster, r.layout, "int4")
    assert "fp8" in str(err.value)          # fp8 is priced (Transformer Engine FP8 GEMMs), int4 is not


def test_fp32_cpu_standin_materialises_attention_scores():
    cpu = load_cluster_preset("local-cpu")
    tiny = ModelConfig(name="tiny", layers=4, hidden=256, heads=4, seq_len=128, vocab=1024)
    lay = Layout(gpus=2, nodes=1, tp=1, pp=1, dp=2, mbs=2, gbs=8, recompute="none")
    e = estimate(tiny, cpu, lay, "fp32")
    overhead = sum(e.mem_breakdown_gb[k] for k in ("temporaries", "fragmentation", "context"))
    assert e.peak_mem_gb < cpu.gpu_mem_gb and overhead < 0.05
    with_scores = e.mem_breakdown_gb["activations"]
    # the same with flash attention would drop (2e+1)·a·s/h = 9·4·128/256 = 18 bytes per s·b·h per layer
    flash = estimate(tiny, cpu, lay, "fp32", flash_attention=True).mem_breakdown_gb["activations"]
    assert with_scores - flash == pytest.approx(4 * 18 * 128 * 2 * 256 / 1e9)


# ----------------------------------------------------------------------------------------------- request parsing

def test_defaults_for_optional_keys():
    r = parse_request(json.dumps({**GOOD, "sequence_parallel": None}))
    model, layout = r.model, r.layout
    assert model.kv_heads == 96 and model.ffn_hidden == 4 * 12288 and r.precision == "bf16"
    assert (layout.vpp, layout.zero_stage, layout.distributed_optimizer, layout.sequence_parallel) == (1, 0, False,
                                                                                                      False)
    assert layout.nodes == 8 and r.cluster.gpus_per_node == 8
    assert (r.flash_attention, r.backend) == (None, "")
    swiglu = parse_request(json.dumps({**GOOD, "swiglu": True, "hidden": 8192, "heads": 64})).model
    assert swiglu.ffn_hidden == swiglu_ffn(8192) == 22016


def test_gpus_per_node_override_changes_nodes():
    r = parse_request(json.dumps({**GOOD, "gpus_per_node": 4}))
    assert r.cluster.gpus_per_node == 4 and r.layout.nodes == 16      # ceil(64 / 4)


# ----------------------------------------------------------------------------------------------- the CLI

def test_cli_answers_every_line_in_order():
    lines = [
        json.dumps(GOOD),
        json.dumps({**GOOD, "dp": 2}),                             # 8*8*2 != 64 GPUs
        "{not json",
        json.dumps({k: v for k, v in GOOD.items() if k != "gbs"}),
        json.dumps({**GOOD, "tp": "8"}),
        json.dumps({**GOOD, "gpu": "a100-90g"}),
        json.dumps({**GOOD, "layers": -4}),
        json.dumps({**GOOD, "tp": 5, "dp": 1, "n_gpus": 40}),      # 96 heads not divisible by 5
        json.dumps({**GOOD, "colour": "blue"}),
        json.dumps({**GOOD, "heads": 96, "kv_heads": 7}),          # model validation: heads % kv_heads
    ]
    out, code = run_cli(lines)
    assert code == 0 and len(out) == len(lines)
    ok = out[0]
    assert ok["valid"] is True and ok["reasons"] == []
    assert list(ok) == ["valid", "reasons", "warnings", "peak_mem_gb", "headroom", "step_time_s", "tokens_per_s",
                        "tflops_per_gpu", "model_tflops_per_gpu", "mfu"]
    assert ok["tokens_per_s"] == pytest.approx(64 * 2048 / ok["step_time_s"], rel=1e-4)
    assert out[1]["valid"] is False and "tp*pp*dp = 8*8*2 = 128 != gpus (64)" in out[1]["reasons"][0]
    assert out[2] == {"error": out[2]["error"], "line": 3, "field": None} and "not valid JSON" in out[2]["error"]
    assert (out[3]["line"], out[3]["field"]) == (4, "gbs")
    assert (out[4]["line"], out[4]["field"]) == (5, "tp") and "integer" in out[4]["error"]
    assert out[5]["field"] == "gpu" and "a100-80g" in out[5]["error"]
    assert out[6]["field"] == "layers" and "> 0" in out[6]["error"]
    bad = out[7]
    assert bad["valid"] is False and any("heads (96) not divisible by tp (5)" in r for r in bad["reasons"])
    assert bad["peak_mem_gb"] is None and bad["mfu"] is None
    assert out[8]["field"] == "colour"
    assert out[9]["field"] == "kv_heads"


def test_blank_lines_skipped_and_line_numbers_are_physical():
    out, code = run_cli([json.dumps(GOOD), "", "nope"])
    assert len(out) == 2 and out[1]["line"] == 3 and code == 0


def test_exit_status_2_only_when_every_line_fails():
    assert run_cli(["nope", "{}"])[1] == 2
    assert run_cli([])[1] == 0


def test_request_id_is_echoed():
    out, _ = run_cli([json.dumps({**GOOD, "id": "row-7"})])
    assert out[0]["id"] == "row-7" and out[0]["valid"]


def test_module_runs_as_a_script_without_heavy_imports():
    script = ("import sys, runpy; sys.argv = ['x'];\n"
              "import launcher.estimate\n"
              "heavy = [m for m in ('torch', 'submitit', 'mlflow', 'hydra') if m in sys.modules]\n"
              "assert not heavy, heavy\n")
    subprocess.run([sys.executable, "-c", script], cwd=REPO, check=True)
    done = subprocess.run([sys.executable, "-m", "launcher.estimate"], cwd=REPO, input=json.dumps(GOOD) + "\n",
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["valid"] is True and "Traceback" not in done.stderr


def test_flash_attention_key_changes_memory_and_time():
    """Without flash attention the s x s scores are stored (memory) and written/read (time): the H100 trial that the
    plan once predicted to fit with flash assumed ran out of memory without it."""
    h100_mbs8 = dict(layers=24, hidden=2304, heads=24, seq_len=2048, vocab=51200, gpu="h100-80g", n_gpus=1, tp=1,
                     pp=1, dp=1, mbs=8, gbs=16, recompute="none")
    out, _ = run_cli([json.dumps(h100_mbs8), json.dumps({**h100_mbs8, "flash_attention": True}),
                      json.dumps({**h100_mbs8, "flash_attention": False}), json.dumps({**h100_mbs8,
                                                                                        "flash_attention": "no"})])
    default, flash, no_flash, bad = out
    assert default == flash                                       # bf16: flash assumed, as before
    assert no_flash["peak_mem_gb"] > 80 > flash["peak_mem_gb"]    # measured: a real CUDA OOM
    assert no_flash["step_time_s"] > flash["step_time_s"]
    assert bad["field"] == "flash_attention"


def test_backend_key_selects_the_stack_fixed_costs():
    small = dict(layers=24, hidden=2304, heads=24, seq_len=2048, vocab=51200, gpu="h100-80g", n_gpus=1, tp=1, pp=1,
                 dp=1, mbs=1, gbs=8, recompute="full")
    out, _ = run_cli([json.dumps(small), json.dumps({**small, "backend": "megatron_lm"}),
                      json.dumps({**small, "backend": "torch"}), json.dumps({**small, "backend": "jax"})])
    assert out[0] == out[1]                                       # no backend: Megatron's constants
    assert out[2]["step_time_s"] > 1.5 * out[1]["step_time_s"]    # autocast casts + CPU dispatch at mbs 1
    assert out[3]["field"] == "backend" and "megatron_lm" in out[3]["error"]


def test_every_answer_is_strict_json_and_a_non_finite_id_is_refused():
    base = {"layers": 2, "hidden": 64, "heads": 4, "seq_len": 128, "vocab": 1000, "gpu": "h100-80g", "n_gpus": 1,
            "tp": 1, "pp": 1, "dp": 1, "mbs": 1, "gbs": 8, "recompute": "none"}
    lines = [json.dumps({**base, "layers": 10**300, "hidden": 12288, "heads": 96}),  # overflows to inf and nan
             json.dumps(base)[:-1] + ', "id": NaN}', json.dumps(base)[:-1] + ', "id": 1e999}']
    out = io.StringIO()
    main(io.StringIO("\n".join(lines) + "\n"), out)

    def refuse(name):
        raise ValueError(f"not JSON: {name}")

    answers = [json.loads(line, parse_constant=refuse) for line in out.getvalue().splitlines()]
    assert answers[0]["valid"] is not None and answers[0]["step_time_s"] is None
    assert [a.get("field") for a in answers[1:]] == ["id", "id"] and "NaN and Infinity" in answers[1]["error"]
