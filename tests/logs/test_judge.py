"""Ledger changes from a finished job: metrics in one FLOP convention whatever the backend printed."""

import pytest

from analysis.logs.judge import judge, one_flop_convention
from launcher.core.record import TrialRecord

LAYOUT = {"gpus": 64, "nodes": 8, "tp": 8, "pp": 4, "dp": 2, "vpp": 1, "mbs": 1, "gbs": 1024, "recompute": "selective",
          "sequence_parallel": True, "zero_stage": 0, "distributed_optimizer": True}
PREDICTED = {"step_time_s": 10.0, "tflops_per_gpu": 180.0, "model_tflops_per_gpu": 170.0}


def test_megatron_rates_are_rescaled_to_the_planner_conventions():
    out = one_flop_convention(PREDICTED, {"step_time_s": 12.5, "tflops_per_gpu": 150.0, "tokens_per_s": 1.0}, 312.0)
    assert out["reported_tflops_per_gpu"] == 150.0  # what Megatron-LM printed (its own convention)
    assert out["tflops_per_gpu"] == pytest.approx(180.0 * 10 / 12.5)
    assert out["model_tflops_per_gpu"] == pytest.approx(136.0)
    assert out["mfu"] == pytest.approx(136.0 / 312)


def test_embedded_workload_metrics_are_kept(load, tmp_path):
    """The workload prints both FLOP conventions itself: judge keeps its rates as they are."""
    cfg = load("+sweep=tiny")
    log = tmp_path / "5_0_log.out"
    log.write_text('PARASWEEP_RESULT {"step_time_s": 1.0, "tokens_per_s": 8.0, "tflops_per_gpu": 0.01, '
                   '"model_tflops_per_gpu": 0.01, "mfu": 0.1}\n')
    record = TrialRecord("h", 0, {**LAYOUT, "gpus": 4, "nodes": 1}, PREDICTED)
    changes = judge(cfg, record, [log], job_state="COMPLETED", exit_code=0)
    assert changes["state"] == "ok" and changes["metrics"]["tflops_per_gpu"] == 0.01
    assert "reported_tflops_per_gpu" not in changes["metrics"]


def test_judge_reads_the_logs_and_keeps_where_it_ran(load, tmp_path):
    cfg = load("+sweep=tiny")
    log = tmp_path / "5_0_log.err"
    log.write_text("[rank0]: RuntimeError: DefaultCPUAllocator: can't allocate memory: you tried to allocate 8 bytes\n")
    record = TrialRecord("h", 0, {**LAYOUT, "gpus": 4, "nodes": 1}, PREDICTED, node_list="n1")
    changes = judge(cfg, record, [log], job_state="FAILED", exit_code=1)
    assert changes["state"] == "oom" and changes["failure_kind"] == "oom" and changes["node_list"] == "n1"
    assert changes["log_paths"] == [str(log)] and changes["excluded_nodes"] == []


def test_judge_reads_the_out_and_err_together_and_records_the_evidence_in_its_file(load, tmp_path):
    cfg = load("+sweep=tiny")
    out, err = tmp_path / "5_0_log.out", tmp_path / "5_0_log.err"
    out.write_text("submitit INFO (2026) - Starting\nsubmitit ERROR (2026) - Submitted job triggered an exception\n")
    line = "[rank0]: RuntimeError: DefaultCPUAllocator: can't allocate memory: you tried to allocate 8 bytes"
    err.write_text(f"warmup\n{line}\nRuntimeError: trial script launch.sh exited with code 1\n")
    record = TrialRecord("h", 0, {**LAYOUT, "gpus": 4, "nodes": 1}, PREDICTED)
    changes = judge(cfg, record, [out, err], job_state="FAILED", exit_code=1)
    assert changes["failure_kind"] == "oom"
    assert changes["evidence"] == [{"file": "5_0_log.err", "line": 2, "text": line}]
    assert judge(cfg, record, [tmp_path / "missing.out"], job_state="FAILED", exit_code=1)["evidence"] == []


def test_an_unexpected_judging_error_marks_the_trial_unknown_and_warns(load, tmp_path, monkeypatch, capsys):
    import analysis.logs.judge

    def boom(*args, **kwargs):
        raise RecursionError("synthetic")
    monkeypatch.setattr(analysis.logs.judge, "trial_outcome", boom)
    cfg = load("+sweep=tiny")
    record = TrialRecord("h", 0, {**LAYOUT, "gpus": 4, "nodes": 1}, PREDICTED)
    changes = judge(cfg, record, [tmp_path / "missing.out"], job_state="COMPLETED", exit_code=0)
    assert changes["state"] == "failed" and changes["failure_kind"] == "unknown"
    assert changes["reason"] == "judging failed (RecursionError: synthetic)"
    assert "warning: trial h: judging failed" in capsys.readouterr().err


def test_a_rate_above_the_cluster_peak_is_an_invalid_measurement(load, tmp_path):
    import json

    cfg = load("+sweep=tiny", "cluster=h100-80g")  # a datasheet peak: a real bound
    log = tmp_path / "7_0_log.out"
    result = {"step_time_s": 0.5, "tokens_per_s": 8 * cfg.model.seq_len / 0.5,
              "tflops_per_gpu": 2 * cfg.cluster.peak_tflops, "peak_mem_gb": 0.1}
    log.write_text("PARASWEEP_RESULT " + json.dumps(result) + "\n")
    record = TrialRecord("h", 0, {**LAYOUT, "gpus": 4, "nodes": 1, "gbs": 8}, PREDICTED)
    changes = judge(cfg, record, [log], job_state="COMPLETED", exit_code=0)
    assert changes["state"] == "failed" and changes["failure_kind"] == "invalid_measurement"
    assert f"above the cluster's peak {cfg.cluster.peak_tflops:g}" in changes["reason"] and changes["metrics"] == {}


def test_the_cpu_stand_in_s_nominal_peak_bounds_nothing(load, tmp_path):
    """A fast CPU beats local-cpu's nominal 0.1 TFLOP/s honestly: its trial is ok, not an impossible measurement."""
    import json

    cfg = load("+sweep=tiny")
    log = tmp_path / "7_0_log.out"
    result = {"step_time_s": 0.5, "tokens_per_s": 8 * cfg.model.seq_len / 0.5, "tflops_per_gpu": 0.3,
              "model_tflops_per_gpu": 0.3, "mfu": 3.0, "peak_mem_gb": 0.1}
    log.write_text("PARASWEEP_RESULT " + json.dumps(result) + "\n")
    record = TrialRecord("h", 0, {**LAYOUT, "gpus": 4, "nodes": 1, "gbs": 8}, PREDICTED)
    assert judge(cfg, record, [log], job_state="COMPLETED", exit_code=0)["state"] == "ok"
