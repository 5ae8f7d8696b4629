"""The search's features table (launcher.run.feature_tables): the class table prices what the trial-by-trial table
does to the last bit, and a table grown or streamed into its spare room is the stacked table (and never overwrites
another's rows), on the tiny sweep's real plan with several global batch sizes (so batch classes hold several
trials)."""

from __future__ import annotations

import numpy as np
import pytest

from launcher.plan.calibrate import STEP_PARAMETERS, FeatureTable, log_step_gradient_of
from launcher.plan.planner import make_plan
from launcher.run import feature_tables
from launcher.run.feature_tables import _grown, _stacked, streamed
from launcher.run.loop import _records
from launcher.run.search import Search


@pytest.fixture
def plan(load):
    cfg = load("+sweep=tiny", "grid.gbs=[8,16,32]")
    return cfg, _records(make_plan(cfg))


def test_the_class_table_prices_step_times_and_gradients_per_class_to_the_last_bit(plan):
    cfg, records = plan
    search = Search(cfg)
    table = search._feature_table(records)
    assert table.classes.n < table.n                    # classes of several trials: the per-class path is used
    whole = FeatureTable([search._trial_features(r) for r in records])
    constants = search.calibration.constants
    assert np.array_equal(table.step_time_s(constants), whole.step_time_s(constants))
    theta = np.random.default_rng(3).normal(0.0, 0.3, len(STEP_PARAMETERS))
    assert np.array_equal(table.log_step_gradient(constants, theta), log_step_gradient_of(whole, constants, theta))


def test_a_table_grown_into_its_spare_room_is_the_stacked_table_and_never_overwrites_another(plan, monkeypatch):
    monkeypatch.setattr(feature_tables, "SPARE_SHARE", 4.0)   # room for every part after the first two
    cfg, records = plan
    search = Search(cfg)
    parts = [search._feature_table(records[i:i + 2]).classes for i in range(0, 8, 2)]
    assert all(p.n for p in parts)

    def same(x, y) -> bool:
        return x.n == y.n and all(np.array_equal(getattr(x, k), v) and getattr(x, k).dtype == v.dtype
                                  for k, v in vars(y).items() if isinstance(v, np.ndarray))

    first = _grown(parts[0], parts[1])
    second = _grown(first, parts[2])                  # into first's room
    assert same(second, _stacked(parts[:3])) and same(first, _stacked(parts[:2]))
    other = _grown(first, parts[3])                   # first's room is second's now: a copy, not an overwrite
    assert same(other, _stacked([parts[0], parts[1], parts[3]])) and same(second, _stacked(parts[:3]))
    assert same(_grown(second, parts[3]), _stacked(parts))


def test_a_table_streamed_chunk_by_chunk_is_the_stacked_table_and_grows_in_its_room(plan):
    """streamed copies each chunk into arrays with spare rows as it is made (the chunks and their copy were all
    held at once: the first run's peak at 50k trials); the same arrays as _stacked, and with_room then takes its
    room as it is (no copy)."""
    cfg, records = plan
    search = Search(cfg)
    parts = [search._feature_table(records[i:i + 2]).classes for i in range(0, 8, 2)]
    whole = streamed(iter(parts), sum(p.n for p in parts))
    want = _stacked(parts)
    assert whole.n == want.n and all(np.array_equal(getattr(whole, k), v) and getattr(whole, k).dtype == v.dtype
                                     for k, v in vars(want).items() if isinstance(v, np.ndarray))
    roomy = _grown(whole, whole.subset([]))
    assert all(np.shares_memory(getattr(roomy, k), v) for k, v in vars(whole).items() if isinstance(v, np.ndarray))
    assert streamed(iter(parts[:1]), parts[0].n) is parts[0]      # one chunk: the table itself
