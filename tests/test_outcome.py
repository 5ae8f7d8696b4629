"""A job's log + its state -> failure kind, reason and metrics (the workload's format and Megatron's)."""

from pathlib import Path

import pytest

from analysis.outcome import trial_outcome
from test_parse_workload import RESULT, STEPS

FIXTURES = Path(__file__).parent / "fixtures" / "megatron-logs"


def outcome(text, **kw):
    defaults = dict(backend="torch", capacity_gb=0.5, tokens_per_step=4 * 128)
    return trial_outcome(text, **{**defaults, **kw})


def test_workload_result_gives_measurements_and_headroom():
    out = outcome(STEPS + RESULT, slurm_state="COMPLETED", exit_code=0)
    assert out.failure_kind == "ok"
    assert out.metrics["tokens_per_s"] == pytest.approx(1622.6189558314825)
    assert out.metrics["headroom"] == pytest.approx(1 - 0.08632659912109375 / 0.5)
    assert out.metrics["n_measured"] == 4 and out.metrics["step_time_std_s"] > 0


def test_truncated_result_with_a_clean_exit_is_an_unparseable_log_not_a_crash():
    out = outcome(STEPS + RESULT[:120] + "\n", slurm_state="COMPLETED", exit_code=0)
    assert out.failure_kind == "unknown" and out.reason.startswith("unparseable log")
    assert "finished, no metrics I can read" in out.reason
    assert out.metrics == {}


def test_no_output_at_all_after_success_is_unknown():
    out = outcome("", slurm_state="COMPLETED", exit_code=0)
    assert out.failure_kind == "unknown" and "no PARASWEEP_RESULT line" in out.reason


def test_lost_local_job_is_cancelled_and_timed_out_is_time_limit():
    assert outcome(STEPS, slurm_state="LOST").failure_kind == "cancelled"
    job_error = "submitit.core.utils.UncompletedJobError: Job 12 (task: 0) timed-out and not checkpointable"
    assert outcome(STEPS, slurm_state="FAILED", job_error=job_error).failure_kind == "time_limit"


def test_cpu_allocator_oom_keeps_its_reason():
    log = STEPS + ("[rank1]: RuntimeError: [enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: "
                   "can't allocate memory: you tried to allocate 1048576 bytes. Error code 12 (Cannot allocate memory)\n")
    out = outcome(log, slurm_state="FAILED", exit_code=1)
    assert out.failure_kind == "oom" and "DefaultCPUAllocator" in out.reason


def test_hang_needs_the_monitor_observation():
    assert outcome(STEPS, slurm_state="RUNNING", seconds_since_progress=400, hang_timeout_s=300).failure_kind == "hang"


def test_megatron_log_metrics_from_steady_state_and_memory_report():
    text = (FIXTURES / "megatronlm_iter_mem_new_1.log").read_text()
    out = outcome(text, backend="megatron_lm", capacity_gb=80.0, tokens_per_step=16 * 4096,
                  slurm_state="COMPLETED", exit_code=0)
    assert out.failure_kind == "ok"
    assert out.metrics["step_time_s"] == pytest.approx(0.744)
    assert out.metrics["tokens_per_s"] == pytest.approx(16 * 4096 / 0.744)
    assert out.metrics["peak_mem_gb"] == pytest.approx(6406.00 * 2**20 / 1e9)  # max reserved, MiB -> GB


def test_megatron_oom_fixture():
    text = (FIXTURES / "megatronlm_oom_1.log").read_text()
    out = outcome(text, backend="megatron_lm", capacity_gb=80.0, tokens_per_step=1, slurm_state="FAILED",
                  exit_code=1)
    assert out.failure_kind == "oom"
