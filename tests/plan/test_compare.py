"""A dry run beside a recorded plan.csv: which kept trials both plans hold and which only one of them has."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from launcher.core.layout import Layout
from launcher.plan.compare import plan_difference, row_layout


def trial(key: str, **dims: Any) -> SimpleNamespace:
    return SimpleNamespace(config_hash=key, layout=Layout(gpus=4, nodes=1, tp=1, pp=1, dp=4, **dims))


def row(key: str, selection: str = "default", **dims: Any) -> dict[str, str]:
    layout = Layout(gpus=4, nodes=1, tp=1, pp=1, dp=4, **dims).to_dict()
    return {"config_hash": key, "selection": selection, **{k: str(v) for k, v in layout.items()}}


def test_the_difference_names_each_sides_own_trials_and_counts_the_rest():
    plan = SimpleNamespace(trials=[trial("a", mbs=1), trial("n1", mbs=2), *(trial(f"x{i}", gbs=8 * i)
                                                                           for i in range(2, 7))])
    recorded = [row("a", mbs=1), row("o1", mbs=4, sequence_parallel=True), row("p", "pruned", mbs=8)]
    lines = plan_difference(plan, recorded, "plan.csv")  # type: ignore[arg-type]
    assert lines[0] == "compared with the recorded plan.csv (2 kept trials): 1 in both"
    new = [t.layout.label() for t in plan.trials[1:4]]
    assert lines[1] == f"  6 only in this dry run: {new[0]}, {new[1]}, {new[2]} and 3 more"
    assert lines[2] == f"  1 only in the recorded plan: {row_layout(recorded[1]).label()}"  # pruned: not kept
    assert plan_difference(SimpleNamespace(trials=[trial("a", mbs=1)]), recorded[:1] + recorded[2:],  # type: ignore[arg-type]
                           "plan.csv") == ["the same 1 kept trials as the recorded plan.csv"]


def test_a_rows_text_cells_come_back_as_the_layouts_types():
    assert row_layout(row("a", mbs=2, sequence_parallel=True)) == Layout(gpus=4, nodes=1, tp=1, pp=1, dp=4, mbs=2,
                                                                         sequence_parallel=True)
