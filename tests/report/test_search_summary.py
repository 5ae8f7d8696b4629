"""analysis.report.search_summary: run order, GPU-hours and best so far, calibrated errors and the parent run's numbers."""

from __future__ import annotations

import pytest

from analysis.report.search_summary import calibrated_error, hours_to_best, progress_points, run_order, summary_metrics


def t(key: str, state: str, start_s: float, end_s: float, tokens=None, gpus: int = 4, **extra) -> dict:
    return {"config_hash": key, "state": state, "attempts": 1, "submitted_at": start_s, "finished_at": end_s,
            "layout": {"gpus": gpus}, "metrics": {"tokens_per_s": tokens} if tokens else {}, **extra}


TRIALS = [t("b", "ok", 900, 1800, 200.0), t("a", "ok", 0, 900, 100.0), t("c", "stopped_early", 1800, 2700, 50.0),
          t("d", "oom", 2700, 3600), {"config_hash": "e", "state": "planned", "attempts": 0, "layout": {"gpus": 4}}]


def test_run_order_counts_gpu_hours_and_the_best_ok_throughput_so_far():
    order = run_order(TRIALS)
    assert [r.trial["config_hash"] for r in order] == ["a", "b", "c", "d"]
    assert [r.spent_gpu_hours for r in order] == pytest.approx([1.0, 2.0, 3.0, 4.0])   # 900 s x 4 GPUs each
    assert [r.best_tokens_per_s for r in order] == [100.0, 200.0, 200.0, 200.0]
    assert progress_points(TRIALS)[2] == (pytest.approx(3.0), None)   # stopped early: measured, but never the best


def test_hours_to_best_and_the_parent_run_summary():
    assert hours_to_best(TRIALS) == pytest.approx(2.0)
    calibration = {"applied": True, "n_trials": 3, "residual_sd": 0.05, "n_holdout": 1, "holdout_error": 0.03}
    pruned = {"config_hash": "f", "state": "pruned", "pruned_by": "converged", "layout": {"gpus": 4}}
    out = summary_metrics(TRIALS + [pruned], calibration)
    assert out["gpu_hours_spent"] == pytest.approx(4.0) and out["trials_stopped_early"] == 1
    assert out["trials_skipped"] == 1 and out["calibration_applied"] == 1.0 and out["calibration_holdout_error"] == 0.03
    assert "gpu_hours_to_best" not in summary_metrics([], None)


def test_calibrated_error_only_for_measured_trials_with_a_calibrated_prediction():
    assert calibrated_error(t("a", "ok", 0, 1, 100.0, calibrated={"tokens_per_s": 110.0})) == pytest.approx(0.1)
    assert calibrated_error(t("a", "ok", 0, 1, 100.0)) is None
    assert calibrated_error(t("d", "oom", 0, 1, calibrated={"tokens_per_s": 110.0})) is None


def test_gpu_hours_count_from_the_start_not_from_the_queue():
    queued = t("q", "ok", 0, 1800, 100.0, started_at=900)  # waited 900 s in the queue, ran 900 s
    never_seen_running = t("n", "ok", 1800, 2700, 100.0)    # ended between two polls: from its submission
    assert [r.gpu_hours for r in run_order([queued, never_seen_running])] == pytest.approx([1.0, 1.0])
