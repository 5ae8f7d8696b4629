"""The shipped MoE sweeps: Mixtral's dry run prunes and ranks with the expert terms; moe-tiny plans ep 1/2/4 and
ep x etp on the CPU stand-in."""

from __future__ import annotations

from launcher.core.states import PruneReason
from launcher.plan.estimator import estimate
from launcher.plan.planner import make_plan, trial_context


def test_mixtral_dry_run_prunes_and_ranks_with_the_expert_terms(load):
    cfg = load("+sweep=mixtral", "dry_run=true")
    assert cfg.model.num_experts == 8 and cfg.model.moe_topk == 2
    plan = make_plan(cfg)
    # the expert rules cut the grid: 8 experts over ep 16, ep x etp not dividing tp x dp, MoE + tp without SP
    assert {"experts_ep", "ep_world", "moe_tp_sp"} <= set(plan.rejected)
    assert plan.pruned_counts()[str(PruneReason.PREDICTED_OOM)] > 0
    best = plan.trials[0]
    assert best.layout.ep > 1 and best.estimate.time_breakdown_s["ep_comm"] > 0
    # the same layout without expert parallelism holds all 8 experts per rank: predicted out of memory, pruned
    alone = estimate(cfg.model, cfg.cluster, best.layout.replace(ep=1), precision=cfg.backend.precision,
                     flash_attention=cfg.backend.flash_attention, backend=cfg.backend.name)
    limit = (cfg.plan.mem_safety_margin + cfg.plan.keep_borderline) * cfg.cluster.gpu_mem_gb
    assert alone.peak_mem_gb > limit >= best.estimate.peak_mem_gb
    assert alone.mem_breakdown_gb["weights"] > 4 * best.estimate.mem_breakdown_gb["weights"]
    # an MoE model has its own trial identity
    assert "x8e2k14336f0s|" in trial_context(cfg)


def test_moe_tiny_plans_every_expert_layout_on_the_cpu(load):
    cfg = load("+sweep=moe-tiny")
    plan = make_plan(cfg)
    assert sorted((t.layout.tp, t.layout.ep, t.layout.etp) for t in plan.trials) == [
        (1, 1, 1), (1, 2, 1), (1, 4, 1), (2, 2, 2)]
    assert all(t.estimate.time_breakdown_s["ep_comm"] > 0 for t in plan.trials if t.layout.ep > 1)
