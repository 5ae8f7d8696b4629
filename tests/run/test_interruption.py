"""Attempts count trial failures only (launcher/run/interruption.py)."""

from __future__ import annotations

from analysis.logs.judge import judge
from launcher.core.record import TrialRecord
from launcher.run.interruption import MAX_FREE_INTERRUPTIONS, NOT_COUNTED, interrupted_changes

RESULT = 'PARASWEEP_RESULT {"step_time_s": 0.01, "tokens_per_s": 321.0}\n'
LAYOUT = {"gpus": 1, "nodes": 1, "tp": 1, "pp": 1, "dp": 1, "vpp": 1, "mbs": 1, "gbs": 8, "recompute": "none",
          "sequence_parallel": False, "zero_stage": 0, "distributed_optimizer": False}


def judged(load, tmp_path, log: str, events=(), attempts: int = 1):
    cfg = load("+sweep=tiny")
    path = tmp_path / "1_0_log.out"
    path.write_text(log)
    record = TrialRecord("h", 0, LAYOUT, attempts=attempts)
    changes = judge(cfg, record, [path], job_state="LOST", exit_code=None, job_error="gone")
    return changes, interrupted_changes(cfg, record, [path], changes, list(events), judge)


def test_a_result_logged_before_the_interruption_counts(load, tmp_path):
    seen, settled = judged(load, tmp_path, "[parasweep] iteration 1/1 | step time (ms): 10.0\n" + RESULT)
    assert seen["failure_kind"] == "cancelled"  # what the bare job state says
    assert settled["failure_kind"] == "ok" and settled["metrics"]["tokens_per_s"] == 321.0
    assert settled.get("attempts") is None  # an ok trial is not rerun either way


def test_an_interrupted_trial_keeps_its_attempt(load, tmp_path):
    _, settled = judged(load, tmp_path, "[parasweep] iteration 1/9 | step time (ms): 10.0\n")
    assert settled["failure_kind"] == "cancelled" and settled["attempts"] == 0
    assert settled["reason"].startswith(NOT_COUNTED)


def test_a_real_failure_before_the_interruption_is_still_counted(load, tmp_path):
    _, settled = judged(load, tmp_path, "RuntimeError: DefaultCPUAllocator: can't allocate memory\n")
    assert settled["failure_kind"] == "oom" and "attempts" not in settled


def test_free_interruptions_are_limited(load, tmp_path):
    events = [{"detail": f"cancelled: {NOT_COUNTED}: ..."}] * MAX_FREE_INTERRUPTIONS
    _, settled = judged(load, tmp_path, "", events=events)
    assert settled["failure_kind"] == "cancelled" and "attempts" not in settled
