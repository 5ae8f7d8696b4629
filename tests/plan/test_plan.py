import csv

import pytest

from launcher.backends import problems_of, require_runnable
from launcher.core.console import Reporter
from launcher.core.errors import ConfigError, PlanError
from launcher.core.objective import Objective
from launcher.plan.planner import make_plan, plan_rows
from launcher.plan.table import pruning_summary, write_plan_csv


def test_70b_plan_is_ranked_pruned_and_budgeted(load):
    cfg = load("+sweep=70b", "dry_run=true")
    plan = make_plan(cfg)
    assert len(plan.trials) == cfg.plan.max_trials
    goal = Objective(cfg.plan.objective)
    scores = [goal.score(t.estimate.tokens_per_s, t.layout.gpus) for t in plan.trials if t.selection == "predicted"]
    assert scores == sorted(scores, reverse=True)
    n_explore = sum(t.selection == "exploration" for t in plan.trials)
    n_band = sum(t.selection == "band" for t in plan.trials)   # a band trial drawn for exploration stays 'band'
    assert n_explore <= round(cfg.plan.max_trials * cfg.plan.exploration_share) <= n_explore + n_band
    for t in plan.trials:
        assert t.intervals is not None and t.intervals.peak_mem_gb_low <= cfg.cluster.gpu_mem_gb
        assert t.layout.tp * t.layout.pp * t.layout.dp == t.layout.gpus
    assert plan.pruned_counts()["predicted_oom"] > 0 and plan.pruned_counts()["budget"] > 0
    assert plan.gpu_hours > 0 and plan.n_points == 108


def test_exploration_picks_are_outside_the_predicted_top(load):
    cfg = load("+sweep=70b", "dry_run=true")
    plan = make_plan(cfg)
    goal = Objective(cfg.plan.objective)
    worst_top = min(goal.score(t.estimate.tokens_per_s, t.layout.gpus) for t in plan.trials
                    if t.selection == "predicted")
    for t in plan.trials:
        if t.selection == "exploration":
            assert goal.score(t.estimate.tokens_per_s, t.layout.gpus) <= worst_top


def test_the_margin_ends_predicted_to_fit_and_the_interval_decides_pruning(load):
    loose = make_plan(load("+sweep=70b", "dry_run=true", "plan.max_trials=0", "plan.keep_borderline=0"))
    tight_cfg = load("+sweep=70b", "dry_run=true", "plan.max_trials=0", "plan.keep_borderline=0",
                     "plan.mem_safety_margin=0.6")
    tight = make_plan(tight_cfg)
    capacity_gb = tight_cfg.cluster.gpu_mem_gb
    fits = [t for t in tight.trials if t.selection == "predicted"]
    assert len(fits) < sum(t.selection == "predicted" for t in loose.trials)
    assert all(t.estimate.peak_mem_gb <= 0.6 * capacity_gb for t in fits)
    # what is pruned depends on the interval's lower end, not on the margin: the tighter margin only moves trials
    # from 'predicted to fit' into the band
    assert {t.config_hash for t in tight.pruned} == {t.config_hash for t in loose.pruned}
    band = [t for t in tight.trials if t.selection == "band"]
    assert band and all(t.estimate.peak_mem_gb > 0.6 * capacity_gb for t in band)
    assert all(t.intervals and t.intervals.peak_mem_gb_low <= capacity_gb for t in band)
    assert all(t.intervals and t.intervals.peak_mem_gb_low > capacity_gb for t in tight.pruned)
    assert all(f"even the interval's lower end is over the {capacity_gb:g} GB" in t.pruned_reason for t in tight.pruned)


def test_the_band_runs_after_the_fits_smallest_predicted_peak_first(load):
    plan = make_plan(load("+sweep=70b", "dry_run=true", "plan.max_trials=0", "plan.keep_borderline=0"))
    labels = [t.selection for t in plan.trials]
    first_band = labels.index("band")
    assert set(labels[first_band:]) == {"band"}                # the fits (ranked by the objective) come first
    peaks = [t.estimate.peak_mem_gb for t in plan.trials[first_band:]]
    assert peaks == sorted(peaks)


def test_borderline_keeps_predicted_ooms_whose_whole_interval_is_over_capacity(load):
    cfg = load("+sweep=70b", "dry_run=true", "plan.max_trials=0", "plan.keep_borderline=0.5")
    plan = make_plan(cfg)
    borderline = [t for t in plan.trials if t.selection == "borderline"]
    capacity_gb = cfg.cluster.gpu_mem_gb
    assert borderline
    for t in borderline:
        assert t.intervals and t.intervals.peak_mem_gb_low > capacity_gb
        assert t.estimate.peak_mem_gb <= 1.4 * capacity_gb


def test_grid_with_nothing_valid_names_the_constraint(load):
    with pytest.raises(PlanError) as err:
        make_plan(load("+sweep=70b", "dry_run=true", "grid.tp=[3]", "grid.nodes=[3]", "grid.pp=[1]"))
    assert "heads_tp removed 6" in str(err.value) and "all 6 grid points" in str(err.value)  # 3 mbs x 2 recompute


def test_everything_predicted_oom_says_so(load):
    with pytest.raises(PlanError, match="out of memory"):
        make_plan(load("+sweep=70b", "dry_run=true", "grid.nodes=[1]", "grid.tp=[1]", "grid.pp=[1]",
                       "grid.sequence_parallel=[false]"))


def test_backend_refusals_are_rejections(load):
    plan = make_plan(load("+sweep=70b", "dry_run=true", "grid.nodes=[8]", "grid.pp=[4]", "grid.vpp=[1,2]",
                          "plan.max_trials=0"))
    assert plan.rejected["mds_vpp"] > 0  # Megatron-DeepSpeed's own rule in the rules table
    assert all(t.layout.vpp == 1 for t in plan.trials)


def test_a_real_run_needs_the_backend_paths(load):
    cfg = load("+sweep=70b")
    with pytest.raises(ConfigError, match="backend.megatron.path"):
        require_runnable(cfg.backend, cfg.model)
    assert make_plan(cfg, notes=[str(p) for p in problems_of(cfg.backend, cfg.model)]).notes  # a dry run lists them


def test_plan_csv_has_every_valid_config(load, tmp_path):
    plan = make_plan(load("+sweep=70b", "dry_run=true"))
    path = tmp_path / "plan.csv"
    write_plan_csv(plan, path)
    rows = list(csv.DictReader(path.open()))
    assert len(rows) == len(plan.trials) + len(plan.pruned) == len(plan_rows(plan))
    assert rows[0]["rank"] == "1" and rows[-1]["rank"] == ""
    assert "rejected" in pruning_summary(plan)


def test_tiny_plan_keeps_a_predicted_oom_to_measure(load):
    plan = make_plan(load("+sweep=tiny"))
    assert len(plan.trials) >= 8
    assert any(t.selection == "borderline" for t in plan.trials)
    assert {t.layout.tp for t in plan.trials} >= {1, 2} and {t.layout.pp for t in plan.trials} >= {1, 2}
    assert any(t.layout.dp > 1 for t in plan.trials)


def test_impossible_layout_never_becomes_a_trial(load):
    # tp=3 cannot split 4 heads; an explicit include does not bypass the constraints.
    plan = make_plan(load("+sweep=tiny", "grid.include=[{gpus: 3, tp: 3, pp: 1, mbs: 1, gbs: 9}]"))
    assert all(t.layout.tp != 3 for t in plan.trials + plan.pruned)
    assert plan.rejected["heads_tp"] == 1 and "tp (3)" in plan.rejected_examples["heads_tp"]


def test_include_with_a_non_number_is_named(load):
    with pytest.raises(ConfigError, match=r"grid.include\[0\]"):
        make_plan(load("+sweep=tiny", "grid.include=[{tp: x}]"))


def test_workload_refusals_are_rejected_at_plan_time(load):
    # 2 micro-batches cannot fill a 4-stage 1F1B pipeline: the embedded workload would refuse it at run time.
    with pytest.raises(PlanError, match="pp_microbatches"):
        make_plan(load("+sweep=tiny", "grid.gpus=[4]", "grid.zip=[]", "grid.tp=[1]", "grid.pp=[4]", "grid.mbs=[1]",
                       "grid.gbs=[2]", "grid.include=[]"))


def test_objective_per_gpu_ranks_by_efficiency_and_the_table_shows_each_node_count(load, capsys):
    from launcher.plan.table import best_per_node_count, print_plan

    fastest = make_plan(load("+sweep=70b", "dry_run=true", "plan.objective=tokens_per_s"))
    efficient = make_plan(load("+sweep=70b", "dry_run=true", "plan.objective=tokens_per_s_per_gpu"))
    per_gpu = [t.estimate.tokens_per_s / t.layout.gpus for t in efficient.trials if t.selection == "predicted"]
    assert per_gpu == sorted(per_gpu, reverse=True)
    assert fastest.trials[0].layout.nodes == 32  # the most nodes give the most tokens/s ...
    best = best_per_node_count(efficient)       # ... but not the most tokens/s per GPU
    assert best[-1].layout.nodes == 32 and best[-1] is not efficient.trials[0]
    assert [t.layout.nodes for t in best] == [8, 16, 32]
    print_plan(load("+sweep=70b", "dry_run=true", "plan.objective=tokens_per_s_per_gpu"), efficient,
               Reporter.for_streams())
    out = capsys.readouterr().out
    assert "best predicted per node count" in out and "tok/s/GPU" in out


def test_time_to_target_needs_the_token_count_and_prints_wall_clock(load, capsys):
    from launcher.core.errors import ConfigError
    from launcher.plan.table import print_plan

    with pytest.raises(ConfigError, match="plan.target_tokens"):
        load("+sweep=70b", "dry_run=true", "plan.objective=time_to_target")
    cfg = load("+sweep=70b", "dry_run=true", "plan.objective=time_to_target", "plan.target_tokens=2e12")
    plan = make_plan(cfg)
    print_plan(cfg, plan, Reporter.for_streams())
    out = capsys.readouterr().out
    days = 2e12 / plan.trials[0].estimate.tokens_per_s / 86400
    assert f"{days:,.1f} d" in out and "GPU-h to" in out


def test_a_warning_kind_is_summarised_once_not_per_message(load, capsys):
    from launcher.plan.table import print_plan

    cfg = load("+sweep=70b", "dry_run=true")
    print_plan(cfg, make_plan(cfg), Reporter.for_streams())
    out = capsys.readouterr().out
    # once, whether it concerns some kept trials ("gemm_vocab on N of M kept trials") or all of them ("every kept
    # trial (gemm_vocab)": which trials are kept follows the estimator's memory predictions)
    assert out.count("gemm_vocab") == 1 and "kept trial" in out


def test_plan_honours_backend_flash_attention(load):
    """Without flash attention the s x s scores are stored: more memory predicted, more trials pruned (the H100
    trial the plan once predicted to fit with flash assumed ran out of memory without it)."""
    def peaks(*overrides):
        plan = make_plan(load("+sweep=70b", "dry_run=true", *overrides))
        return {t.config_hash: t.estimate.peak_mem_gb for t in plan.trials + plan.pruned
                if t.layout.recompute == "none"}, plan
    with_flash, _ = peaks()
    without, plan = peaks("backend.flash_attention=false")
    common = set(with_flash) & set(without)
    assert common and all(without[k] > with_flash[k] for k in common)
    assert plan.pruned_counts()["predicted_oom"] > make_plan(load("+sweep=70b", "dry_run=true")).pruned_counts()[
        "predicted_oom"]


def test_the_dry_run_shows_each_prediction_with_its_interval(load, capsys):
    """Beside a predicted peak and step time, the 90 % interval of the estimator's out-of-sample error for the
    configured backend's stack (launcher/plan/spread.json), and a line saying whose residuals it comes from."""
    from launcher.plan import spread
    from launcher.plan.inputs import stack_of
    from launcher.plan.table import print_plan

    cfg = load("+sweep=70b", "dry_run=true")
    plan = make_plan(cfg)
    print_plan(cfg, plan, Reporter.for_streams())
    out = capsys.readouterr().out
    stack = stack_of(cfg.backend)
    best = plan.trials[0].estimate
    step_lo, step_hi = spread.interval("step_time", best.step_time_s, stack, 0.05, 0.95)
    mem_lo, mem_hi = spread.interval("peak_mem", best.peak_mem_gb, stack, 0.05, 0.95)
    assert step_lo < best.step_time_s < step_hi and mem_lo < best.peak_mem_gb < mem_hi
    first_row = next(line for line in out.splitlines() if plan.trials[0].layout.label() in line)
    assert f"{best.step_time_s:.3g} ({step_lo:.0f}–{step_hi:.0f})" in first_row
    assert f"{best.peak_mem_gb:.1f} ({mem_lo:.0f}–{mem_hi:.0f})" in first_row
    assert "90 % interval" in out and f"{spread.basis('step_time', stack)[1]} {stack} rows" in out


def test_an_interval_falls_back_to_all_sources_for_a_stack_with_few_rows():
    from launcher.plan import spread
    from launcher.plan.table import interval_note, with_interval

    few = next(name for name, s in spread.load_spread()["peak_mem"]["per_stack"].items() if s["n"] < spread.MIN_ROWS)
    assert spread.basis("peak_mem", few) == ("all", spread.load_spread()["peak_mem"]["all"]["n"])
    assert "peak memory from all" in interval_note(few) and f"({few} has fewer than" in interval_note(few)
    lo, hi = spread.interval("peak_mem", 0.5, few)
    assert with_interval("peak_mem", 0.5, few) == f"0.5 ({lo:.2g}–{hi:.2g})"


def test_without_spread_data_the_table_shows_bare_predictions(monkeypatch):
    from launcher.plan import spread
    from launcher.plan.table import interval_note, with_interval

    monkeypatch.setattr(spread, "load_spread", lambda path=spread.SPREAD_FILE: {})
    assert with_interval("peak_mem", 76.44, "megatron_lm") == "76.4"
    assert with_interval("step_time", 0.2014, "megatron_lm") == "0.201"
    assert interval_note("megatron_lm") == ""
