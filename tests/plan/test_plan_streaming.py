"""Big grids: expanding and checking streams (nothing kept per point), a grid over the cap is refused up front
naming the product of its dimensions, pruned layouts are counted with examples kept, and progress is reported."""

from __future__ import annotations

import itertools
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from launcher.config.schema import ClusterConfig, GridConfig
from launcher.core.errors import ConfigError
from launcher.core.layout import Layout
from launcher.plan import planner
from launcher.plan.grid import expand, grid_factors

CLUSTER = ClusterConfig(name="c", gpu="g", gpus_per_node=8, nodes=4)


def reference(grid: GridConfig) -> list[Layout]:
    """The grid by the definition: the product of every dimension (dp derived), distinct, excludes removed,
    then the includes not already there."""
    worlds = [(n * 8, n) for n in grid.nodes]
    out: list[Layout] = []
    for (gpus, nodes), tp, pp, mbs, rc in itertools.product(worlds, grid.tp, grid.pp, grid.mbs, grid.recompute):
        lay = Layout(gpus=gpus, nodes=nodes, tp=tp, pp=pp, dp=gpus // (tp * pp), mbs=mbs, gbs=grid.gbs[0],
                     recompute=rc)
        if lay not in out and not any(all(getattr(lay, k) == v for k, v in e.items()) for e in grid.exclude):
            out.append(lay)
    return out


small = st.lists(st.sampled_from([1, 2, 4]), min_size=1, max_size=4)


@settings(max_examples=60, deadline=None)
@given(nodes=small, tp=small, pp=small, mbs=small, rc=st.lists(st.sampled_from(["none", "full"]), min_size=1,
                                                                max_size=3),
       exclude_tp=st.sampled_from([None, 1, 2]))
def test_expansion_is_the_distinct_product_even_with_repeated_values(nodes, tp, pp, mbs, rc, exclude_tp):
    exclude = [{"tp": exclude_tp}] if exclude_tp else []
    grid = GridConfig(nodes=nodes, tp=tp, pp=pp, mbs=mbs, gbs=[64], recompute=rc, exclude=exclude)
    got = list(expand(grid, CLUSTER))
    assert sorted(got, key=repr) == sorted(reference(grid), key=repr)  # the same points (order: product order)
    assert len(set(got)) == len(got)


def test_includes_already_in_the_product_are_not_repeated_but_excluded_ones_come_back():
    grid = GridConfig(nodes=[1], tp=[1, 2], pp=[1], exclude=[{"tp": 2}],
                      include=[{"nodes": 1, "tp": 1, "pp": 1}, {"nodes": 1, "tp": 2, "pp": 1},
                               {"nodes": 1, "tp": 2, "pp": 1}])
    assert [(l.tp, l.dp) for l in expand(grid, CLUSTER)] == [(1, 8), (2, 4)]


def test_expansion_keeps_nothing_per_point():
    # 6 x 5 x 5 x 5 x 4 x 3 x 2 x 2 = 36,000 points; remembering them all would take ~6 MB
    grid = GridConfig(nodes=[1, 2, 3, 4, 5, 6], tp=[1, 2, 4, 8, 16], pp=[1, 2, 4, 8, 16], mbs=[1, 2, 4, 8, 16],
                      gbs=[64, 128, 256, 512], recompute=["none", "selective", "full"],
                      sequence_parallel=[False, True], zero_stage=[0, 1])
    tracemalloc.start()
    n = sum(1 for _ in expand(grid, CLUSTER))
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert n == 36_000 and peak < 1_000_000, peak


def test_a_grid_over_the_cap_is_refused_naming_its_product(load):
    cfg = load("+sweep=70b", "dry_run=true", "grid.tp=[1,2,4,8]", "grid.pp=[1,2,4,8]", "grid.mbs=[1,2,4]",
               "plan.max_grid_points=100")
    factors, total = grid_factors(cfg.grid, cfg.cluster)
    assert dict(factors)["tp"] == 4 and total > 100
    with pytest.raises(ConfigError, match=r"plan\.max_grid_points") as info:
        planner.make_plan(cfg, progress=lambda done, total: pytest.fail("expanded before the cap was checked"))
    assert f"= {total:,} points" in str(info.value) and "tp 4 x pp 4 x mbs 3" in str(info.value)


def test_pruned_layouts_are_counted_and_only_examples_kept(load, monkeypatch):
    cfg = load("+sweep=70b", "dry_run=true", "plan.max_trials=0", "plan.keep_borderline=0")
    full = planner.make_plan(cfg)
    monkeypatch.setattr(planner, "MAX_PRUNED_KEPT", 2)
    seen = []
    capped = planner.make_plan(cfg, progress=lambda done, total: seen.append((done, total)))
    assert capped.pruned_counts() == full.pruned_counts() and full.pruned_counts()["predicted_oom"] > 2
    assert len(capped.pruned) == 2 and [t.config_hash for t in capped.trials] == [t.config_hash for t in full.trials]
    assert seen[-1] == (full.n_points, full.n_points)  # the last call: everything checked
