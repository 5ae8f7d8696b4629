"""plan.max_gpu_hours: what is spent, what the next trial costs, and the loop stopping at the budget."""

from __future__ import annotations

import time

from test_sweep_loop import lay, run_loop

from launcher.core.record import TrialRecord
from launcher.plan.planner import make_plan
from launcher.run.budget import committed_gpu_hours, held_gpu_hours, predicted_gpu_hours, within_budget

NOW = 1_000_000.0


def test_a_trial_spends_from_when_it_runs_and_a_queued_one_nothing():
    ran = TrialRecord("a", 0, lay(1), state="ok", attempts=1, submitted_at=NOW - 7200, started_at=NOW - 3600,
                      finished_at=NOW - 1800)
    running = TrialRecord("b", 1, lay(1), state="running", attempts=1, started_at=NOW - 900)
    queued = TrialRecord("c", 2, lay(1), state="submitted", attempts=1, submitted_at=NOW - 900)
    assert held_gpu_hours(ran, NOW) == 1.0            # 2 GPUs x 30 min; the queue time is not counted
    assert held_gpu_hours(running, NOW) == 0.5 and held_gpu_hours(queued, NOW) == 0.0


def test_the_predicted_cost_uses_the_calibrated_step_time_first(load):
    cfg = load("+sweep=tiny")  # start-up 10 s, 2 warm-up + 4 measured iterations
    plain = TrialRecord("a", 0, lay(1), predicted={"step_time_s": 5.0})
    assert abs(predicted_gpu_hours(cfg, plain) - (10 + 6 * 5.0) * 2 / 3600) < 1e-12
    calibrated = TrialRecord("a", 0, lay(1), predicted={"step_time_s": 5.0}, calibrated={"step_time_s": 15.0})
    assert abs(predicted_gpu_hours(cfg, calibrated) - (10 + 6 * 15.0) * 2 / 3600) < 1e-12
    assert predicted_gpu_hours(cfg, TrialRecord("x", 0, lay(1))) == 0.0


def test_trials_are_held_back_in_order_once_the_budget_is_committed(load):
    cfg = load("+sweep=tiny", "plan.max_gpu_hours=0.2")
    step = (0.05 * 3600 / 2 - 10) / 6  # 0.05 GPU-hours a trial
    live = TrialRecord("live", 0, lay(1), state="running", attempts=1, started_at=NOW - 36,
                       predicted={"step_time_s": step})  # held 0.02 of its 0.05
    assert abs(committed_gpu_hours(cfg, [live], NOW) - 0.05) < 1e-9
    batch = [TrialRecord(h, i, lay(1), predicted={"step_time_s": step * (3 if h == "big" else 1)})
             for i, h in enumerate(("p", "q", "big", "r"))]
    fitting, why = within_budget(cfg, [live, *batch], batch, NOW)
    assert [r.config_hash for r in fitting] == ["p", "q"]   # 0.05 + 0.05 + 0.05; "big" would pass 0.2; r waits
    assert "big" in why and "plan.max_gpu_hours=0.2" in why
    assert within_budget(load("+sweep=tiny"), [live, *batch], batch, NOW) == (batch, None)  # no budget


def test_the_loop_stops_at_the_budget_and_prunes_what_is_left(load, tmp_path, in_tmp):
    now = time.time()
    spent = TrialRecord("old", 0, lay(1), state="ok", attempts=1, started_at=now - 3600, finished_at=now,
                        metrics={"tokens_per_s": 100.0})  # 2 GPU-hours already spent
    step = (1.0 * 3600 / 2 - 10) / 6  # 1 GPU-hour a trial
    records = [spent] + [TrialRecord(h, i, lay(i), predicted={"step_time_s": step}) for i, h in enumerate("ab", 1)]
    trials, runner = run_loop(load, tmp_path, {"a": [("ok", 10)], "b": [("ok", 20)]}, records, slots=4,
                              **{"plan.max_gpu_hours": 2.5})
    assert runner.submitted == []
    assert {h: (trials[h].state, trials[h].pruned_by) for h in "ab"} == {"a": ("pruned", "gpu_budget"),
                                                                          "b": ("pruned", "gpu_budget")}
    assert "plan.max_gpu_hours=2.5" in trials["a"].reason


def test_the_shipped_70b_budget_holds_back_the_trials_past_it(load):
    """The 70b sweep's plan.max_gpu_hours is below running every kept trial: submitted in order against it, the
    trials stop where the next would pass the budget, priced as the dry run prices them."""
    cfg = load("+sweep=70b", "dry_run=true")
    plan = make_plan(cfg)
    batch = [TrialRecord(t.config_hash, i, t.layout, predicted={"step_time_s": t.estimate.step_time_s})
             for i, t in enumerate(plan.trials)]
    assert abs(sum(predicted_gpu_hours(cfg, r) for r in batch) - plan.gpu_hours) < 1e-6 * plan.gpu_hours
    fitting, why = within_budget(cfg, batch, batch, NOW)
    assert 0 < len(fitting) < len(batch) and why and f"plan.max_gpu_hours={cfg.plan.max_gpu_hours:g}" in why
    assert sum(predicted_gpu_hours(cfg, r) for r in fitting) <= cfg.plan.max_gpu_hours
