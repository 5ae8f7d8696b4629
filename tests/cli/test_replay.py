"""python -m launcher.replay and the measured tables it reads: invariants of the replay (costs add up, exhaustive
search has no regret, a seed gives one result), the CLI's output, and hostile tables."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from launcher.core.layout import Layout
from launcher.core.states import TrialState
from launcher.measured import TableError, format_table, read_rows, read_table, table_row
from launcher.replay import JSON_KEYS, STRATEGIES, Costs, main, megatron_startup_s, replay_sweep, steady_iters, totals

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "replay"
TABLES = sorted(DATA.glob("*.csv"))


def test_every_table_names_its_source_and_has_sweeps_with_an_ok_row():
    assert {p.name for p in TABLES} >= {"h100_single_gpu.csv", "tiny_cpu.csv", "bloom_tr11_a100.csv"}
    for path in TABLES:
        assert path.read_text().startswith("# SOURCE:"), path
        for sweep in read_table(path):
            assert any(r.state == "ok" for r in sweep.rows), (path, sweep.name)


def test_rows_of_one_model_gpu_and_gpu_count_form_a_sweep():
    sweeps = read_table(DATA / "tiny_cpu.csv")
    assert [(s.name, len(s.rows)) for s in sweeps] == [("tiny-4gpu", 9), ("tiny-2gpu", 1)]   # 4 and 2 ranks
    h100 = read_table(DATA / "h100_single_gpu.csv")
    assert [s.name for s in h100] == ["h100one", "h100two", "h100mlm", "h100one-fp32"]   # the sweep column splits


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("table", ["h100_single_gpu.csv", "bloom_tr11_a100.csv"])
def test_costs_add_up(strategy, table):
    costs = Costs()
    for sweep in read_table(DATA / table):
        result = replay_sweep(sweep, strategy, seed=3, costs=costs)
        by_key = {f"line {r.line}: {r.request.layout.label()}": r for r in sweep.rows}
        spent = 0.0
        for step in result.steps:
            row = by_key[step.key]
            spent += costs.gpu_hours(row, measured_iters=step.measured_iters)
            assert step.gpu_hours == pytest.approx(spent)
            if step.state == "stopped_early":
                assert step.measured_iters == costs.min_measured_iters
            elif row.state == "oom":
                assert step.measured_iters == 0
            else:   # ok: in full, or fewer once steady (adaptive and oracle only)
                assert step.measured_iters <= costs.measure_iters
                assert step.measured_iters == costs.measure_iters or strategy in ("adaptive", "oracle")
        assert result.gpu_hours == pytest.approx(spent)
        assert result.trials_run == len(result.steps) == len({s.key for s in result.steps})
        assert result.exhaustive_gpu_hours == pytest.approx(sum(costs.gpu_hours(r) for r in sweep.rows))
        assert 0.0 <= result.final_regret < 1.0
        if result.gpu_hours_to_within_2pct is not None:
            assert result.gpu_hours_to_within_2pct <= result.gpu_hours


@pytest.mark.parametrize("table", [p.name for p in TABLES])
def test_exhaustive_search_runs_everything_and_has_no_regret(table):
    for sweep in read_table(DATA / table):
        result = replay_sweep(sweep, "exhaustive")
        assert result.final_regret == 0.0 and result.trials_run == len(sweep.rows)
        assert result.gpu_hours == pytest.approx(result.exhaustive_gpu_hours)
        assert all(s.state != "stopped_early" for s in result.steps)


@pytest.mark.parametrize("strategy", ["random", "adaptive"])
def test_same_seed_same_result(strategy):
    sweep = read_table(DATA / "h100_single_gpu.csv")[0]
    first, again = (replay_sweep(sweep, strategy, seed=7) for _ in range(2))
    assert [s.key for s in first.steps] == [s.key for s in again.steps] and first.as_json() == again.as_json()
    if strategy == "random":
        orders = {tuple(s.key for s in replay_sweep(sweep, "random", seed=k).steps) for k in range(5)}
        assert len(orders) > 1


def test_oom_costs_the_startup_and_early_stop_fewer_iterations():
    sweep = read_table(DATA / "h100_single_gpu.csv")[1]
    costs = Costs(startup_s=100, warmup_iters=3, measure_iters=5, min_measured_iters=2)
    oom = next(r for r in sweep.rows if r.state == "oom")
    ok = next(r for r in sweep.rows if r.state == "ok")
    assert costs.gpu_hours(oom) == pytest.approx(100 / 3600)
    assert costs.gpu_hours(ok) == pytest.approx((100 + 8 * ok.step_time_s) / 3600)
    assert costs.gpu_hours(ok, stopped_early=True) == pytest.approx((100 + 5 * ok.step_time_s) / 3600)


def test_startup_grows_with_the_nodes_and_steady_trials_measure_fewer_iterations():
    assert megatron_startup_s(1) == 120.0 and megatron_startup_s(64) == pytest.approx(150.0)
    assert megatron_startup_s(8) < megatron_startup_s(16) < megatron_startup_s(64)
    # 1 % noise per iteration: 4 iterations pin the mean to 2 % (t(3) x 1 % / 2 = 1.6 %); 3 do not (2.5 %)
    assert steady_iters(0.01, 0.02, 2, 10) == 4
    assert steady_iters(0.002, 0.02, 2, 10) == 3          # very steady: the minimum (never fewer than 3)
    assert steady_iters(0.10, 0.02, 2, 10) == 10          # too noisy: every measured iteration
    costs = Costs(startup_s=60, warmup_iters=5, measure_iters=10, iteration_cv=0.01)
    assert costs.measured_iters(TrialState.OK, 0.02, steady=True) == 4
    assert costs.measured_iters(TrialState.OK, 0.02) == 10
    assert costs.measured_iters(TrialState.STOPPED_EARLY) == costs.min_measured_iters
    assert costs.measured_iters(TrialState.OOM) == 0


def test_max_trials_caps_the_replay():
    sweep = read_table(DATA / "h100_single_gpu.csv")[0]
    result = replay_sweep(sweep, "adaptive", max_trials=2)
    assert result.trials_run == 2 and "max_trials" in result.stop_reason


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "launcher.replay", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=300, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})


def test_cli_json_one_object_per_sweep_then_the_total():
    proc = run_cli(str(DATA / "h100_single_gpu.csv"), "--strategy", "adaptive", "--seed", "1", "--json")
    assert proc.returncode == 0, proc.stderr
    objects = [json.loads(line) for line in proc.stdout.splitlines()]
    *sweeps, total = objects
    assert [list(o) for o in sweeps] == [list(JSON_KEYS)] * 4
    assert total["total"] is True and set(total) == set(JSON_KEYS) | {"total"}
    for key in ("trials_run", "gpu_hours", "exhaustive_gpu_hours", "gpu_hours_to_within_2pct"):
        assert total[key] == pytest.approx(sum(o[key] for o in sweeps))
    assert total["final_regret"] == max(o["final_regret"] for o in sweeps)


def test_cli_table_and_errors(tmp_path, capsys):
    assert main([str(DATA / "tiny_cpu.csv"), "--strategy", "exhaustive"]) == 0
    out = capsys.readouterr().out
    assert "GPU-h to 2%" in out and out.count("exhaustive") >= 3
    assert main([str(tmp_path / "missing.csv")]) == 2
    assert "cannot read" in capsys.readouterr().err
    bad = tmp_path / "bad.csv"
    bad.write_text((DATA / "tiny_cpu.csv").read_text().replace(",ok,", ",fine,", 1))
    assert main([str(bad)]) == 2
    err = capsys.readouterr().err
    assert "state='fine'" in err and "bad.csv:" in err


def test_totals_over_sweeps():
    results = [replay_sweep(s, "exhaustive") for s in read_table(DATA / "bloom_tr11_a100.csv")]
    t = totals(results)
    assert t["trials_run"] == 11 and t["final_regret"] == 0.0 and t["total"] is True


def test_export_round_trip():
    from launcher.config.schema import ModelConfig
    from launcher.estimate import load_cluster_preset

    model = ModelConfig(name="tiny", layers=4, hidden=256, heads=4, seq_len=128, vocab=1024)
    cluster = load_cluster_preset("local-cpu")
    layout = {"gpus": 4, "nodes": 1, "tp": 2, "pp": 1, "dp": 2, "cp": 1, "vpp": 1, "mbs": 2, "gbs": 8, "recompute": "full",
              "sequence_parallel": True, "zero_stage": 1, "distributed_optimizer": False}
    rows = [table_row("s", model, cluster, "torch", "fp32", True, layout, "ok", {"step_time_s": 0.5,
                                                                              "peak_mem_gb": 0.1}),
            table_row("s", model, cluster, "torch", "fp32", True, layout, "oom", {}),
            table_row("s", model, cluster, "torch", "fp32", True, layout, "failed", {})]
    assert rows[2] is None
    (sweep,) = read_rows(format_table([r for r in rows if r], ["SOURCE: test"]).splitlines())
    first, second = sweep.rows
    assert first.request.layout == Layout.from_dict(layout) and first.request.backend == "torch"
    assert (first.state, first.step_time_s, first.peak_mem_gb, second.state) == ("ok", 0.5, 0.1, "oom")
    assert first.request.flash_attention is True and first.request.precision == "fp32"


HEADER = "layers,hidden,heads,seq_len,vocab,gpu,n_gpus,tp,pp,dp,mbs,gbs,recompute,state,step_time_s"


@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from("0123456789abcx,.-#\" \n"), max_size=60), max_size=5))
def test_hostile_tables_fail_with_a_table_error_only(lines):
    good = "4,256,4,128,1024,local-cpu,1,1,1,1,1,8,none,ok,0.1"
    try:
        sweeps = read_rows([HEADER, good, *lines], "hostile.csv")
    except TableError as exc:
        assert "hostile.csv" in str(exc)
    else:
        assert sweeps and all(r.request.layout.gpus >= 1 for s in sweeps for r in s.rows)


def test_a_sweep_folder_exports_as_a_replay_table(load, tmp_path):
    """python -m launcher.measured: the ledger's measured trials (ok, stopped early, oom) become table rows."""
    from launcher.config.load import to_yaml
    from launcher.core.record import TrialRecord
    from launcher.measured import main as export_main
    from launcher.run.ledger import Ledger

    cfg = load("+sweep=tiny")
    folder = tmp_path / "sweeps" / "tiny"
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text(to_yaml(cfg))
    lay = {"gpus": 4, "nodes": 1, "tp": 2, "pp": 1, "dp": 2, "vpp": 1, "mbs": 1, "gbs": 8, "recompute": "none",
           "sequence_parallel": False, "zero_stage": 0, "distributed_optimizer": False}
    with Ledger(folder / "ledger.sqlite") as ledger:
        ledger.add_trials([TrialRecord("a", 0, lay), TrialRecord("b", 1, {**lay, "mbs": 2}),
                           TrialRecord("c", 2, {**lay, "mbs": 4}), TrialRecord("d", 3, {**lay, "tp": 1, "dp": 4})])
        ledger.update("a", state="ok", metrics={"step_time_s": 0.5, "peak_mem_gb": 0.1})
        ledger.update("b", state="oom")
        ledger.update("c", state="failed")
    out = tmp_path / "table.csv"
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert export_main([str(folder)]) == 0
    out.write_text(buffer.getvalue())
    (sweep,) = read_table(out)
    assert [(r.request.layout.mbs, r.state, r.step_time_s) for r in sweep.rows] == [(1, "ok", 0.5), (2, "oom", None)]
    assert sweep.rows[0].request.backend == "torch" and sweep.rows[0].request.cluster.name == "local-cpu"
    assert export_main([str(tmp_path)]) == 2
