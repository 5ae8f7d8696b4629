"""The planner's one pass over a batch class (launcher.plan.pricing) gives what the two passes it replaces gave:
the estimator's estimate of every layout and the calibration's features of every kept class (trial_features), to
the last bit, on generated grids (pipelines with and without interleaving, every ZeRO stage, MoE, micro-batch
counts under and over the in-flight cap); and a plan made with the features is the plan made without them."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from test_batch_class import valid_layouts

from launcher.plan import calibrate as cal
from launcher.plan.batch_class import batch_class
from launcher.plan.estimator import estimate
from launcher.plan.inputs import workload_for
from launcher.plan.planner import make_plan
from launcher.plan.pricing import ClassPricer, with_units
from launcher.plan.step_time import StageMemo, class_step, combine, step_pieces, step_time_at

GRIDS = {
    "torch-70b": ["+sweep=70b", "backend=torch", "cluster.nodes=8", "grid.nodes=[1,8]", "grid.tp=[2,8]",
                  "grid.pp=[1,2,4,5]", "grid.mbs=[1,2]", "grid.gbs=[16,64,512,4096]",
                  "grid.recompute=[none,selective,full]", "grid.zero_stage=[0,1,2,3]", "grid.vpp=[1,2]",
                  "grid.sequence_parallel=[false,true]"],
    "megatron-moe": ["model=mixtral-8x7b", "backend=megatron_lm", "cluster.nodes=4", "grid.nodes=[2,4]",
                     "grid.tp=[1,2]", "grid.pp=[2,4]", "grid.ep=[1,8]", "grid.mbs=[1,4]",
                     "grid.gbs=[32,256,2048]", "grid.vpp=[1,2]", "grid.distributed_optimizer=[false,true]"],
}


def bits(x: object) -> object:
    """A value as its exact bits: floats by repr (0.0 and -0.0 apart), arrays by their bytes and shape."""
    if isinstance(x, np.ndarray):
        return (x.dtype.str, x.shape, x.tobytes())
    if isinstance(x, dict):
        return {k: bits(v) for k, v in x.items()}
    if isinstance(x, (tuple, list)):
        return tuple(bits(v) for v in x)
    return (type(x).__name__, repr(x))


def fields_bits(obj: object) -> dict:
    return {f.name: bits(getattr(obj, f.name)) for f in dataclasses.fields(obj)}


@pytest.mark.parametrize("name", sorted(GRIDS))
def test_one_pass_prices_what_the_estimator_and_the_calibration_price_apart(load, name):
    cfg = load(*GRIDS[name])
    b = cfg.backend
    layouts = valid_layouts(cfg)
    pricer = ClassPricer(cfg.model, cfg.cluster, b.precision, b.flash_attention, b.name)
    with_features = {batch_class(lay) for lay in layouts[::2]}   # the others' classes priced without
    for lay in layouts:
        wl = workload_for(b, lay)
        alone = estimate(cfg.model, cfg.cluster, lay, b.precision, flash_attention=b.flash_attention,
                         backend=b.name, workload=wl)
        priced = pricer.estimate(lay, wl, features=batch_class(lay) in with_features)
        assert fields_bits(priced) == fields_bits(alone), lay.label()
    assert set(pricer.features) == with_features
    for cls, features in pricer.features.items():
        apart = cal.trial_features(cfg.model, cfg.cluster, cls, b.precision, b.flash_attention, backend=b.name,
                                   workload=workload_for(b, cls))
        assert fields_bits(features) == fields_bits(apart), cls.label()


def test_a_plan_with_the_features_is_the_plan_without(load):
    cfg = load(*GRIDS["torch-70b"], "plan.keep_borderline=0.05", "plan.max_trials=0")
    plain, priced = make_plan(cfg), make_plan(cfg, features=True)
    assert not plain.class_features
    assert plain == priced   # the trials, their order, estimates and intervals, what was pruned and counted
    assert [bits(t.estimate.step_time_s) for t in plain.trials] == [bits(t.estimate.step_time_s)
                                                                    for t in priced.trials]
    assert set(priced.class_features) == {batch_class(t.layout) for t in priced.trials}
    assert plain.pruned_total and len(priced.pruned) <= sum(priced.pruned_total.values())


@pytest.mark.parametrize("name", sorted(GRIDS))
def test_a_class_s_step_time_parts_give_combine_s_step_at_every_micro_batch_count(load, name):
    """step_time.class_step is computed once per class (the pricer keeps it) and step_time_at gives each layout's
    step from it: the step `combine` computes with that micro-batch count, to the last bit, its breakdown summing
    to it."""
    cfg = load(*GRIDS[name])
    b = cfg.backend
    pricer = ClassPricer(cfg.model, cfg.cluster, b.precision, b.flash_attention, b.name)
    for lay in valid_layouts(cfg)[::7]:
        pricer.estimate(lay, workload_for(b, lay))
    assert pricer.classes
    for (_, workload), price in pricer.classes.items():
        constants = pricer._of(workload)[0]
        assert price.step is not None and price.pieces is not None
        assert bits(price.step) == bits(class_step(price.pieces, constants, pricer.cpu))
        pc = price.pieces._replace(interference=constants.overlap_interference,
                                   tp_interference=constants.tp_overlap_interference)
        for m in (1, 3, 8, 64):
            step, breakdown = step_time_at(price.step, m)
            assert bits(step) == bits(combine(pc._replace(microbatches=m))[0])
            assert sum(breakdown.values()) == pytest.approx(step, rel=1e-9)


MEMO_GRIDS = {**GRIDS, "cp-every": ["+sweep=70b", "backend=megatron_lm", "cluster.nodes=8", "grid.nodes=[1,2,8]",
                                     "grid.tp=[2,4,8]", "grid.pp=[1,2,4]", "grid.cp=[1,2]", "grid.mbs=[1,2]",
                                     "grid.gbs=[64,512]", "grid.recompute=[none,full]",
                                     "grid.recompute_every=[1,2]", "grid.zero_stage=[0,1]",
                                     "grid.sequence_parallel=[false,true]", "grid.distributed_optimizer=[false,true]"]}


@pytest.mark.parametrize("name", sorted(MEMO_GRIDS))
def test_step_pieces_with_a_memo_shared_by_a_plan_are_those_without(load, name):
    """step_pieces' memo (one per rates, kept across a plan's layouts) gives each layout the pieces of a call of
    its own, with float rates and with unit vectors, to the last bit; and it is used (stages shared)."""
    cfg = load(*MEMO_GRIDS[name])
    b = cfg.backend
    pricer = ClassPricer(cfg.model, cfg.cluster, b.precision, b.flash_attention, b.name)
    memos: dict = {}
    layouts = valid_layouts(cfg)
    for lay in layouts:
        wl = workload_for(b, lay)
        own = pricer._of(wl)[1]
        for r in (own, with_units(own)):
            memo = memos.setdefault(id(r), (r, StageMemo()))[1]
            args = (cfg.model, cfg.cluster, lay, b.precision, pricer.flash, r, pricer.cpu)
            shared = step_pieces(*args, workload=wl, backend=b.name, memo=memo)
            alone = step_pieces(*args, workload=wl, backend=b.name)
            assert bits(shared) == bits(alone), lay.label()
    stored = sum(len(memo) for _, memo in memos.values())
    if cfg.model.is_moe:   # MoE stages read the expert groups: not memoised
        assert stored == 0
    else:   # without sharing, at least one stage per layout and rates
        assert 0 < stored < 2 * len(layouts)
