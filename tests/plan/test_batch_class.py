"""Layouts of one batch class (launcher.plan.batch_class) are priced from one layout's memory, step pieces and
calibration features: on generated grids (pipelines with and without interleaving, every ZeRO stage, micro-batch
counts under and over the in-flight cap) the shared estimate and features equal the per-layout ones exactly."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from launcher.core.layout import Layout
from launcher.plan import calibrate as cal
from launcher.plan.batch_class import batch_class, inflight_cap
from launcher.plan.estimator import SharedParts, estimate
from launcher.plan.grid import expand, key_space
from launcher.plan.inputs import workload_for
from launcher.plan.rules import Checker

GRIDS = {
    "torch-70b": ["+sweep=70b", "backend=torch", "cluster.nodes=8", "grid.nodes=[1,8]", "grid.tp=[2,8]",
                  "grid.pp=[1,2,4,5]", "grid.mbs=[1,2]", "grid.gbs=[16,64,512,4096]",
                  "grid.recompute=[none,full]", "grid.zero_stage=[0,1,2,3]", "grid.vpp=[1,2]",
                  "grid.sequence_parallel=[false,true]"],
    "megatron-moe": ["model=mixtral-8x7b", "backend=megatron_lm", "cluster.nodes=4", "grid.nodes=[2,4]",
                     "grid.tp=[1,2]", "grid.pp=[2,4]", "grid.ep=[1,8]", "grid.mbs=[1,4]",
                     "grid.gbs=[32,256,2048]", "grid.vpp=[1,2]", "grid.distributed_optimizer=[false,true]"],
}


def valid_layouts(cfg) -> list[Layout]:
    checker = Checker(cfg.model, cfg.cluster, cfg.backend.name, allow_tp_across_nodes=cfg.plan.allow_tp_across_nodes,
                      key_space=key_space(cfg.grid, cfg.cluster))
    return [lay for lay in expand(cfg.grid, cfg.cluster) if checker.check(lay).ok]


def same_features(a: cal.TrialFeatures, b: cal.TrialFeatures) -> bool:
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if not (np.array_equal(x, y) if isinstance(x, np.ndarray) else x == y):
            return False
    return True


@pytest.mark.parametrize("name", sorted(GRIDS))
def test_layouts_of_one_batch_class_are_priced_as_each_alone(load, name):
    cfg = load(*GRIDS[name])
    layouts = valid_layouts(cfg)
    b, shared = cfg.backend, SharedParts()
    classes = {batch_class(lay) for lay in layouts}
    assert len(classes) < len(layouts), "the grid must hold layouts that share a class"
    assert any(lay.microbatches < inflight_cap(lay) for lay in layouts)  # and ones under the cap
    for lay in layouts:
        kwargs = dict(precision=b.precision, flash_attention=b.flash_attention, backend=b.name,
                      workload=workload_for(b, lay))
        alone = estimate(cfg.model, cfg.cluster, lay, **kwargs)
        assert estimate(cfg.model, cfg.cluster, lay, shared=shared, **kwargs) == alone, lay.label()
    assert len(shared) == len({(batch_class(lay), workload_for(b, lay)) for lay in layouts})
    for lay in layouts[::3]:
        def features(of: Layout) -> cal.TrialFeatures:
            return cal.trial_features(cfg.model, cfg.cluster, of, b.precision, b.flash_attention, backend=b.name,
                                      workload=workload_for(b, of))
        from_class = cal.for_layout(features(batch_class(lay)), lay, cfg.model.seq_len)
        assert same_features(from_class, features(lay)), lay.label()


def test_the_class_keeps_everything_but_gbs_and_caps_the_micro_batches():
    lay = Layout(gpus=16, nodes=2, tp=2, pp=4, dp=2, mbs=2, gbs=4096, vpp=2)
    rep = batch_class(lay)
    assert rep.microbatches == inflight_cap(lay) == 13
    assert dataclasses.replace(rep, gbs=lay.gbs) == lay
    small = dataclasses.replace(lay, gbs=lay.mbs * lay.dp * 8)
    assert batch_class(small) is small


def test_layouts_apart_in_gbs_alone_share_one_class_and_others_do_not():
    """batch_class keeps one Layout per class (made once: dataclasses.replace per call cost ~7 us at ~100k calls a
    sweep): layouts apart in gbs alone get the same object, one apart in anything else its own class."""
    lay = Layout(gpus=16, nodes=2, tp=2, pp=4, dp=2, mbs=2, gbs=4096, vpp=2)
    assert batch_class(dataclasses.replace(lay, gbs=2048)) is batch_class(lay)
    for change in ({"recompute": "full"}, {"sequence_parallel": True}, {"zero_stage": 1}, {"mbs": 1, "gbs": 2048}):
        other = dataclasses.replace(lay, **change)
        assert batch_class(other) == dataclasses.replace(other, gbs=inflight_cap(other) * other.mbs * other.dp)
        assert batch_class(other) != batch_class(lay)
