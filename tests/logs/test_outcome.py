"""A job's log + its state -> failure kind, reason and metrics (the workload's format and Megatron's)."""

from pathlib import Path

import pytest
from test_parse_workload import RESULT, STEPS

from analysis.logs.outcome import trial_outcome

FIXTURES = Path(__file__).parent.parent / "fixtures" / "megatron-logs"


def outcome(text, **kw):
    defaults = dict(log_format="workload", capacity_gb=0.5, tokens_per_step=4 * 128)
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
    out = outcome(text, log_format="megatron", capacity_gb=80.0, tokens_per_step=16 * 4096,
                  slurm_state="COMPLETED", exit_code=0)
    assert out.failure_kind == "ok"
    assert out.metrics["step_time_s"] == pytest.approx(0.744)
    assert out.metrics["tokens_per_s"] == pytest.approx(16 * 4096 / 0.744)
    assert out.metrics["peak_mem_gb"] == pytest.approx(6406.00 * 2**20 / 1e9)  # max reserved, MiB -> GB


def test_megatron_oom_fixture():
    text = (FIXTURES / "megatronlm_oom_1.log").read_text()
    out = outcome(text, log_format="megatron", capacity_gb=80.0, tokens_per_step=1, slurm_state="FAILED",
                  exit_code=1)
    assert out.failure_kind == "oom"


# ---- impossible measurements, totality, the unknown verdict for unreadable finished runs

def _result(**overrides) -> str:
    import json

    result = {"step_time_s": 0.5, "tokens_per_s": 1024.0, "tflops_per_gpu": 0.01, "model_tflops_per_gpu": 0.009,
              "mfu": 0.09, "peak_mem_gb": 0.2, "world_size": 2, **overrides}
    return STEPS + "PARASWEEP_RESULT " + json.dumps(result) + "\n"


@pytest.mark.parametrize("overrides, words", [
    ({"tokens_per_s": 1e30}, "tokens_per_s"), ({"peak_mem_gb": -1.0}, "peak_mem_gb"),
    ({"mfu": float("nan")}, "mfu"), ({"step_time_s": 0.0}, "step_time_s"), ({"step_time_s": -0.5}, "step_time_s"),
    ({"tflops_per_gpu": 5.0}, "above the cluster's peak"), ({"peak_mem_gb": 0.6}, "above the device capacity"),
])
def test_impossible_numbers_are_an_invalid_measurement_never_ok(overrides, words):
    out = outcome(_result(**overrides), slurm_state="COMPLETED", exit_code=0, peak_tflops=0.1)
    assert out.failure_kind == "invalid_measurement" and words in out.reason and out.metrics == {}


def test_a_plausible_workload_result_is_ok():
    out = outcome(_result(), slurm_state="COMPLETED", exit_code=0, peak_tflops=0.1)
    assert out.failure_kind == "ok" and out.metrics["tokens_per_s"] == 1024.0


def test_megatron_log_whose_every_step_time_is_impossible_is_invalid_not_unknown():
    text = "".join(f" iteration {i}/ 3 | elapsed time per iteration (ms): {t} | lm loss: 1.0E+00 |\n"
                   for i, t in ((1, "0.0"), (2, "-5.0"), (3, "nan")))
    out = outcome(text, log_format="megatron", tokens_per_step=1, slurm_state="COMPLETED", exit_code=0)
    assert out.failure_kind == "invalid_measurement" and "zero, negative or not finite" in out.reason


def test_megatron_tokens_per_s_from_the_logs_own_argument_dump():
    text = (FIXTURES.parent / "megatron-logs" / "megatronlm_iter_ok_1.log").read_text()
    dump = "  global_batch_size ............................... 128\n  seq_length ...................................... 4096\n"
    out = trial_outcome(dump + text, log_format="auto", slurm_state="COMPLETED", exit_code=0)
    assert out.metrics["tokens_per_s"] == pytest.approx(128 * 4096 / out.metrics["step_time_s"])


def test_bytes_and_garbage_are_judged_not_raised():
    raw = b"\x00\xff\xfe garbage \x80\n" + _result().encode() + b"\xc3\x28\n"
    assert outcome(raw, slurm_state="COMPLETED", exit_code=0).failure_kind == "ok"
    out = trial_outcome(b"\x00" * 1000, log_format="megatron", exit_code=0)
    assert out.failure_kind == "unknown" and out.reason.startswith("finished, no metrics I can read")


def test_an_unexpected_error_becomes_unknown_with_the_error_named(monkeypatch):
    import analysis.logs.outcome as mod

    def boom(*args, **kwargs):
        raise ZeroDivisionError("synthetic")
    monkeypatch.setattr(mod, "read_log", boom)
    out = outcome(_result(), exit_code=0)
    assert out.failure_kind == "unknown" and "judging failed (ZeroDivisionError: synthetic)" in out.reason


def test_metrics_are_strict_json_whatever_the_log():
    from launcher.core.strict_json import dumps

    out = outcome(STEPS + "PARASWEEP_RESULT {\"step_time_s\": 0.5, \"tokens_per_s\": 1024.0, \"peak_mem_gb\": "
                          "Infinity}\n", exit_code=1)
    dumps(out.metrics)  # raises on NaN/Infinity
    assert all(v == v and abs(v) != float("inf") for v in out.metrics.values() if isinstance(v, float))
