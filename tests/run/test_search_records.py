"""What the search reads of the records (launcher.run.search_records)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from launcher.core.layout import Layout
from launcher.run.search_records import LayoutDims


def test_a_trials_dims_read_as_its_layouts_dict():
    """Search.dims gives a LayoutDims (no dict kept per trial): what the scheduler and the residual design read of
    it is Layout.to_dict()'s: equal, the same keys in order, get and `in` alike, a KeyError for another name."""
    layout = Layout(gpus=8, nodes=1, tp=2, pp=2, dp=2, mbs=2, gbs=16, recompute="full", sequence_parallel=True)
    dims, plain = LayoutDims(layout), layout.to_dict()
    assert dims == plain and plain == dims and list(dims) == list(plain) and len(dims) == len(plain)
    assert dict(dims.items()) == plain and [dims[k] for k in plain] == list(plain.values())
    assert dims.get("tp") == 2 and dims.get("nope") is None and dims.get("nope", 3) == 3
    assert "recompute" in dims and "nope" not in dims
    with pytest.raises(KeyError):
        dims["nope"]
    assert LayoutDims(replace(layout, tp=4)) != plain
