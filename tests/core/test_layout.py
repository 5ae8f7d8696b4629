"""Layout: one vocabulary of parallel dimensions, from which the grid schema, labels, hashes and columns derive."""

from __future__ import annotations

import dataclasses

import pytest

from launcher.config.schema import GridConfig
from launcher.core.layout import DIMENSIONS, FACTORS, GRID_DIMENSIONS, NAMES, SHAPE, Layout, dimension, label_of
from launcher.plan.planner import PLAN_COLUMNS
from launcher.run.ledger import COLUMNS

BASE = dict(gpus=8, nodes=2, tp=2, pp=2, dp=2)


def test_grid_schema_has_one_list_per_dimension_plus_world_and_combinators():
    names = [f.name for f in dataclasses.fields(GridConfig)]
    assert names == ["nodes", "gpus", *GRID_DIMENSIONS, "zip", "include", "exclude"]
    grid = GridConfig()
    for d in DIMENSIONS:
        if d.kind != "world":
            assert getattr(grid, d.name) == (None if d.dim.grid is None else list(d.dim.grid)), d.name


def test_grid_values_are_checked_against_the_dimension():
    from launcher.config.checks import check_grid
    from launcher.core.errors import ConfigError

    with pytest.raises(ConfigError, match="grid.zero_stage=4"):
        check_grid(GridConfig(zero_stage=[4]))
    with pytest.raises(ConfigError, match="grid.mbs=0"):
        check_grid(GridConfig(mbs=[0]))
    with pytest.raises(ConfigError, match="grid.recompute='some'"):
        check_grid(GridConfig(recompute=["some"]))


def test_every_derived_list_covers_every_dimension():
    assert set(NAMES) <= set(PLAN_COLUMNS) and set(NAMES) <= set(COLUMNS)
    assert set(SHAPE) == set(NAMES) - {d.name for d in DIMENSIONS if d.kind == "batch"}
    assert FACTORS == ("tp", "pp", "dp", "cp")


def test_world_and_model_parallel_size_come_from_the_factors():
    lay = Layout(**BASE)
    assert (lay.world, lay.model_parallel, lay.gpus_per_node) == (8, 4, 4)
    assert Layout(**{**BASE, "gbs": 16, "mbs": 2}).microbatches == 4


def test_short_label_leaves_defaults_out_and_puts_the_world_last():
    assert Layout(**BASE).label() == "tp2 pp2 dp2 mbs1 gbs1 2n"
    full = Layout(**BASE, vpp=2, recompute="full", sequence_parallel=True, zero_stage=1, distributed_optimizer=True)
    assert full.label() == "tp2 pp2 dp2 vpp2 mbs1 gbs1 rc=full sp zero1 distopt 2n"
    assert label_of({**BASE, "nodes": 1, "gpus": 8, "unknown_key": 3}) == "tp2 pp2 dp2 mbs1 gbs1"


def test_config_hash_is_stable_across_releases():
    # Computed by the first release (layout as a dict of its 12 fields, sorted JSON, sha256): a resumed sweep must
    # find its trials under the same hashes.
    lay = Layout(gpus=8, nodes=2, tp=2, pp=2, dp=2, vpp=2, recompute="full", sequence_parallel=True)
    assert lay.config_hash("ctx") == "5ac9870c9626"


def test_a_dimension_added_later_stays_out_of_the_hash_at_its_default():
    d = dimension("tp")
    assert d.dim.hashed_at_default  # the first release's dimensions are always hashed
    for dim in DIMENSIONS:
        if not dim.dim.hashed_at_default:
            lay = Layout(**BASE)
            assert lay.config_hash() == lay.replace(**{dim.name: dim.default}).config_hash()
            assert lay.replace(**{dim.name: 2}).config_hash() != lay.config_hash()


def test_from_dict_ignores_unknown_keys_and_fills_defaults():
    lay = Layout.from_dict({**BASE, "colour": "red"})
    assert lay == Layout(**BASE) and lay.vpp == 1 and lay.recompute == "none"
