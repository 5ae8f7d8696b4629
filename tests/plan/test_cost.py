"""The dry run's cost section: exhaustive, adaptive (the replay benchmark's shares), confirmation and the budget."""

from collections import Counter

from launcher.core.objective import Objective
from launcher.plan.cost import ADAPTIVE_SHARE_TO_BEST, ADAPTIVE_SHARE_TO_STOP, cost_lines, forecast
from launcher.plan.planner import job_duration_s, make_plan


def test_the_forecast_prices_the_plan_the_search_and_the_confirmation(load):
    cfg = load("+sweep=70b", "plan.stop_when_converged=true", "analysis.confirm_top=2", "analysis.repeats=3")
    plan = make_plan(cfg)
    cost = forecast(cfg, plan)
    assert cost.exhaustive_gpu_hours == plan.gpu_hours and cost.jobs == len(plan.trials)
    assert abs(cost.adaptive_gpu_hours - ADAPTIVE_SHARE_TO_STOP * plan.gpu_hours) < 1e-9
    assert abs(cost.to_best_gpu_hours - ADAPTIVE_SHARE_TO_BEST * plan.gpu_hours) < 1e-9
    top2 = sum(job_duration_s(cfg, t.estimate) * t.layout.gpus for t in plan.trials[:2]) / 3600
    assert abs(cost.confirm_gpu_hours - 2 * top2) < 1e-9  # two more runs of each of the 2 finalists
    without_stop = forecast(load("+sweep=70b", "plan.stop_when_converged=false"), plan)
    assert without_stop.adaptive_gpu_hours == plan.gpu_hours  # every trial runs


def test_the_lines_state_both_costs_and_the_budget(load):
    plan_cfg = load("+sweep=70b")
    plan = make_plan(plan_cfg)
    for budget, says in ((0, "budget: none"), (1e6, "above the expected"), (10, "below the expected")):
        cfg = load("+sweep=70b", f"plan.max_gpu_hours={budget}")
        text = "\n".join(cost_lines(forecast(cfg, plan), 1.0))
        assert "exhaustive: " in text and "adaptive search" in text and says in text, text


def test_the_shipped_70b_sweep_compares_node_counts_per_gpu_within_its_budget(load):
    """Issue 20: ranked by raw tokens/s, the 70b plan put most of its trials at its largest node count. Per GPU, each
    node count gets a share of the trials, and what the sweep is expected to spend is within its own budget."""
    cfg = load("+sweep=70b", "dry_run=true")
    plan = make_plan(cfg)
    assert Objective(cfg.plan.objective).per_gpu
    per_node = Counter(t.layout.nodes for t in plan.trials)
    assert set(per_node) == set(cfg.grid.nodes) and max(per_node.values()) <= len(plan.trials) / 2, per_node
    raw = Counter(t.layout.nodes for t in make_plan(load("+sweep=70b", "dry_run=true",
                                                          "plan.objective=tokens_per_s")).trials)
    assert max(raw.values()) > len(plan.trials) / 2, raw  # what the per-GPU objective avoids
    cost = forecast(cfg, plan)
    assert 0 < cost.expected_gpu_hours <= cfg.plan.max_gpu_hours < cost.exhaustive_gpu_hours + cost.confirm_gpu_hours
    text = "\n".join(cost_lines(cost, 1.0))
    assert f"budget: plan.max_gpu_hours={cfg.plan.max_gpu_hours:g}, above the expected" in text
