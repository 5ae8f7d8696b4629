"""Context parallelism (cp) end to end: a grid dimension, its rules, its memory and step-time effects, Megatron-LM's
flag, the refusals of the backends without it, and the ledger/estimate CLI keys that follow from the Layout."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from backend_helpers import a100_80g, assert_real_flags, backend_config, golden_layout, llama2_70b

from launcher.backends import render_launch
from launcher.core.layout import Layout
from launcher.plan.estimator import estimate
from launcher.plan.rules import check

LONG = replace(llama2_70b(), seq_len=32768, max_position=32768)   # a long-context run: where cp pays
BASE = dict(gpus=64, nodes=8, tp=8, pp=4, dp=2, mbs=1, gbs=64, recompute="selective", sequence_parallel=True)


def lay(**changes) -> Layout:
    return Layout(**{**BASE, **changes})


def codes(verdict) -> set[str]:
    return {i.code for i in verdict.reasons}


def test_cp_is_a_world_factor_and_dp_follows(load):
    from launcher.plan.grid import expand

    cfg = load("+sweep=70b", "grid.nodes=[8]", "grid.tp=[4]", "grid.pp=[4]", "grid.cp=[1,4]", "grid.mbs=[1]",
               "grid.recompute=[selective]", "grid.sequence_parallel=[true]", "grid.zero_stage=[0]", "dry_run=true")
    assert sorted((l.cp, l.dp) for l in expand(cfg.grid, cfg.cluster)) == [(1, 4), (4, 1)]


def test_cp_rules():
    ok = lay(tp=2, pp=4, dp=2, cp=4)
    assert check(LONG, a100_80g(), ok, backend="megatron_lm").ok
    assert "world" in codes(check(LONG, a100_80g(), lay(cp=2)))                     # 8*4*2*2 != 64
    assert "cp_seq" in codes(check(replace(LONG, seq_len=4100), a100_80g(), ok))     # 4100 % 8
    across = check(LONG, a100_80g(), lay(tp=8, pp=2, dp=1, cp=4))                  # tp*cp = 32 > 8: it runs
    assert across.ok and "cp_node" in {i.code for i in across.warnings}
    assert "mds_cp" in codes(check(LONG, a100_80g(), ok, backend="megatron_deepspeed"))
    assert "workload_cp" in codes(check(LONG, a100_80g(), ok, backend="torch"))


def test_cp_divides_activations_and_keeps_the_weights():
    one = estimate(LONG, a100_80g(), lay(tp=8, pp=4, dp=2, cp=1), "bf16", backend="megatron_lm")
    four = estimate(LONG, a100_80g(), lay(tp=2, pp=4, dp=2, cp=4), "bf16", backend="megatron_lm")
    tp8_cp1 = estimate(LONG, a100_80g(), lay(tp=2, pp=4, dp=8, cp=1), "bf16", backend="megatron_lm")
    # same tp x pp: cp shrinks the activations 4x, the model states stay
    assert four.mem_breakdown_gb["activations"] == pytest.approx(tp8_cp1.mem_breakdown_gb["activations"] / 4, rel=1e-6)
    assert four.mem_breakdown_gb["weights"] == pytest.approx(tp8_cp1.mem_breakdown_gb["weights"])
    assert one.time_breakdown_s["cp_comm"] == 0 and four.time_breakdown_s["cp_comm"] > 0


def test_cp_shards_the_distributed_optimizer_over_dp_x_cp():
    plain = estimate(LONG, a100_80g(), lay(tp=2, pp=4, dp=2, cp=4), "bf16")
    sharded = estimate(LONG, a100_80g(), lay(tp=2, pp=4, dp=2, cp=4, distributed_optimizer=True), "bf16")
    assert sharded.mem_breakdown_gb["optimizer"] == pytest.approx(plain.mem_breakdown_gb["optimizer"] / 8)


def test_megatron_lm_renders_the_flag_only_when_cp_is_used():
    backend = backend_config("megatron_lm", python="python", path="/m", tokenizer_type="NullTokenizer")
    argv = render_launch(LONG, a100_80g(), backend, lay(tp=2, pp=4, dp=2, cp=4), trial_dir="/t").program_argv
    assert argv[argv.index("--context-parallel-size") + 1] == "4"
    assert_real_flags(argv[2:], "megatron_lm")
    golden = render_launch(LONG, a100_80g(), backend, golden_layout(), trial_dir="/t").program_argv
    assert "--context-parallel-size" not in golden


def test_ledger_and_estimate_cli_know_cp_without_being_told(tmp_path):
    import io
    import sqlite3

    from launcher.core.record import TrialRecord
    from launcher.estimate import main
    from launcher.run.ledger import Ledger

    with Ledger(tmp_path / "l.sqlite") as led:
        led.add_trials([TrialRecord("a", 0, lay(tp=2, pp=4, dp=2, cp=4))])
        assert led.get("a").layout.cp == 4
    assert sqlite3.connect(tmp_path / "l.sqlite").execute("SELECT cp, dp FROM trials").fetchall() == [(4, 2)]
    request = {"layers": 80, "hidden": 8192, "heads": 64, "kv_heads": 8, "swiglu": True, "ffn_hidden": 28672,
               "seq_len": 32768, "vocab": 32000, "gpu": "a100-80g", "n_gpus": 64, "tp": 2, "pp": 4, "dp": 2, "cp": 4,
               "mbs": 1, "gbs": 64, "recompute": "selective", "sequence_parallel": True}
    out = io.StringIO()
    assert main(io.StringIO(json.dumps(request) + "\n"), out) == 0
    answer = json.loads(out.getvalue())
    assert answer["valid"] and answer["peak_mem_gb"] > 0


def test_an_older_hash_is_unchanged_by_the_new_dimension():
    assert lay().config_hash("x") == Layout(**BASE).config_hash("x")
    assert lay(cp=2, dp=1).config_hash("x") != lay(dp=1).config_hash("x")
