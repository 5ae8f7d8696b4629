"""The estimator's inputs from the config (launcher.plan.inputs): the stack the configured program runs and the FSDP
the embedded workload applies, the same for the plan, the search's calibration features and the report."""

from __future__ import annotations

import dataclasses

import pytest

from launcher.core.layout import Layout
from launcher.core.record import TrialRecord
from launcher.plan.calibrate import FeatureTable
from launcher.plan.constants import constants_for
from launcher.plan.estimator import estimate
from launcher.plan.inputs import constants_of, stack_of, workload_for
from launcher.plan.planner import make_plan
from launcher.run.search import Search


def test_megatron_lm_without_transformer_engine_is_priced_as_its_own_stack(load):
    te = load("+sweep=70b", "dry_run=true", "backend=megatron_lm", "grid.zero_stage=[0]")
    local = load("+sweep=70b", "dry_run=true", "backend=megatron_lm", "grid.zero_stage=[0]",
                 "backend.megatron.transformer_impl=local", "backend.flash_attention=false")
    assert (stack_of(te.backend), stack_of(local.backend)) == ("megatron_lm", "megatron_local")
    assert constants_of(local.backend) is constants_for("megatron_local")
    layout = make_plan(te).trials[0].layout
    flash_off = dataclasses.replace(te.backend, flash_attention=False)
    fused = estimate(te.model, te.cluster, layout, "bf16", flash_attention=False, backend="megatron_lm",
                     workload=workload_for(flash_off, layout))
    unfused = estimate(te.model, te.cluster, layout, "bf16", flash_attention=False, backend="megatron_lm",
                       workload=workload_for(local.backend, layout))
    assert unfused.step_time_s > fused.step_time_s        # eager element-wise kernels, unfused wgrad accumulation


@pytest.mark.parametrize("zero_stage, fsdp, resharded", [(0, "", True), (1, "", True), (2, "shard_grad_op", False),
                                                         (3, "fsdp2", True)])
def test_the_embedded_workload_shards_zero_2_and_3_with_fsdp2(load, zero_stage, fsdp, resharded):
    cfg = load("+sweep=tiny", "dry_run=true")
    w = workload_for(cfg.backend, Layout(gpus=2, nodes=1, tp=1, pp=1, dp=2, gbs=8, zero_stage=zero_stage))
    assert (w.stack, w.fsdp, w.resharded) == ("parasweep_workload", fsdp, resharded)


def test_the_plan_and_the_search_features_use_the_same_inputs(load):
    """A plan's estimate and the calibration's features of the same trial predict the same step time and peak."""
    cfg = load("+sweep=tiny", "dry_run=true", "grid.zero_stage=[3]", "grid.zip=[]", "grid.tp=[1]", "grid.pp=[1]",
               "grid.include=[]")
    trial = make_plan(cfg).trials[0]
    search = Search(cfg)
    record = TrialRecord(trial.config_hash, 0, trial.layout, dataclasses.asdict(trial.estimate))
    table = FeatureTable([search.features(record)])
    assert table.step_time_s(search.prior.constants)[0] == pytest.approx(trial.estimate.step_time_s, rel=1e-9)
    assert table.peak_mem_gb(search.prior.constants)[0] == pytest.approx(trial.estimate.peak_mem_gb, rel=1e-9)
