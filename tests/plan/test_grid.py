import pytest

from launcher.config.schema import ClusterConfig, GridConfig
from launcher.core.errors import ConfigError
from launcher.plan.grid import expand, grid_size

CLUSTER = ClusterConfig(name="c", gpu="g", gpus_per_node=8, nodes=4)


def test_product_of_dimensions_with_dp_derived():
    grid = GridConfig(nodes=[1, 2], tp=[1, 2], pp=[1, 2], mbs=[1, 2], gbs=[64])
    layouts = list(expand(grid, CLUSTER))
    assert len(layouts) == 2 * 2 * 2 * 2 == grid_size(grid, CLUSTER)
    for lay in layouts:
        assert lay.dp * lay.tp * lay.pp == lay.gpus == lay.nodes * 8


def test_gpus_may_be_a_partial_node():
    (lay,) = expand(GridConfig(gpus=[4]), CLUSTER)
    assert (lay.gpus, lay.nodes, lay.dp) == (4, 1, 4)


def test_nodes_and_gpus_together_is_an_error():
    with pytest.raises(ConfigError, match="grid.gpus"):
        list(expand(GridConfig(nodes=[1], gpus=[8]), CLUSTER))


def test_zipped_dimensions_pair_up_instead_of_multiplying():
    grid = GridConfig(gpus=[8], tp=[1, 2, 4], pp=[4, 2, 1], zip=[["tp", "pp"]], mbs=[1, 2])
    pairs = sorted({(l.tp, l.pp) for l in expand(grid, CLUSTER)})
    assert pairs == [(1, 4), (2, 2), (4, 1)]
    assert len(list(expand(grid, CLUSTER))) == 6


def test_zip_of_unequal_lengths_names_the_lengths():
    grid = GridConfig(gpus=[8], tp=[1, 2], pp=[1], zip=[["tp", "pp"]])
    with pytest.raises(ConfigError, match="equal length"):
        list(expand(grid, CLUSTER))


def test_zip_with_unknown_dimension_lists_valid_ones():
    with pytest.raises(ConfigError, match="not a grid dimension"):
        list(expand(GridConfig(gpus=[8], zip=[["tp", "tpp"]]), CLUSTER))


def test_zip_can_pair_world_size_with_tp():
    grid = GridConfig(nodes=[1, 2], tp=[4, 8], zip=[["nodes", "tp"]])
    assert sorted((l.nodes, l.tp) for l in expand(grid, CLUSTER)) == [(1, 4), (2, 8)]


def test_include_adds_configs_with_first_values_as_defaults():
    grid = GridConfig(gpus=[8], tp=[2], mbs=[1], include=[{"tp": 4, "mbs": 8}, {"gpus": 4, "tp": 1}])
    layouts = list(expand(grid, CLUSTER))
    assert [(l.gpus, l.tp, l.mbs, l.dp) for l in layouts] == [(8, 2, 1, 4), (8, 4, 8, 2), (4, 1, 1, 4)]


def test_exclude_removes_partial_matches():
    grid = GridConfig(gpus=[8], tp=[1, 2, 4], mbs=[1, 2], exclude=[{"tp": 4}, {"tp": 2, "mbs": 2}])
    assert sorted((l.tp, l.mbs) for l in expand(grid, CLUSTER)) == [(1, 1), (1, 2), (2, 1)]


def test_unknown_key_in_include_is_named():
    with pytest.raises(ConfigError, match=r"grid.include\[0\]"):
        list(expand(GridConfig(gpus=[8], include=[{"tensor_parallel": 2}]), CLUSTER))


def test_duplicates_are_dropped():
    grid = GridConfig(gpus=[8], tp=[2, 2], include=[{"tp": 2}])
    assert len(list(expand(grid, CLUSTER))) == 1


def test_explicit_dp_is_kept_even_if_inconsistent():
    # The grid does not judge: the constraints reject world != tp*pp*dp with a reason.
    (lay,) = expand(GridConfig(gpus=[8], tp=[2], dp=[2]), CLUSTER)
    assert (lay.tp, lay.dp) == (2, 2)
