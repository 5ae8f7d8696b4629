"""analysis.report.plots: the data behind each plot, and the drawn figures (OOM crosses, empty sweeps, PNG files)."""

from __future__ import annotations

import pytest

from analysis.report.plots import (
    PLOT_FILES,
    draw_heatmap,
    estimate_errors,
    heatmap_cells,
    pareto_front,
    relative_error,
    trial_spans,
    write_plots,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def trial(tp=1, pp=1, mbs=1, state="ok", tokens=1000.0, mem=0.1, chash=None, gbs=8, predicted=None,
          submitted_at=100.0, finished_at=110.0) -> dict:
    dp = 4 // (tp * pp) or 1
    metrics = {"tokens_per_s": tokens, "peak_mem_gb": mem, "headroom": 1 - mem / 0.5} if state == "ok" else {}
    return {"config_hash": chash or f"{tp}{pp}{mbs}{state}{tokens}", "state": state,
            "layout": {"gpus": tp * pp * dp, "nodes": 1, "tp": tp, "pp": pp, "dp": dp, "vpp": 1, "mbs": mbs,
                       "gbs": gbs, "recompute": "none"},
            "metrics": metrics, "predicted": predicted or {}, "failure_kind": "" if state == "ok" else state,
            "reason": "", "log_paths": [], "submitted_at": submitted_at, "finished_at": finished_at}


def test_heatmap_cells_keep_the_best_ok_trial_and_mark_ooms():
    trials = [trial(1, 1, 1, tokens=100), trial(1, 1, 1, tokens=300, gbs=16), trial(2, 1, 1, state="oom"),
              trial(1, 2, 2, state="failed"), trial(2, 2, 1, state="pruned"), trial(2, 2, 4, state="planned")]
    cells = heatmap_cells(trials)
    assert set(cells) == {1, 2}                    # pruned / planned trials never ran: no cell, no mbs panel
    assert cells[1][(1, 1)].tokens_per_s == 300 and not cells[1][(1, 1)].oom
    assert cells[1][(2, 1)].oom and cells[1][(2, 1)].tokens_per_s is None
    assert cells[2][(1, 2)].failed and not cells[2][(1, 2)].oom
    assert (2, 2) not in cells[1]


def _texts(ax) -> dict[tuple[float, float], str]:
    return {tuple(t.get_position()): t.get_text() for t in ax.texts}


def test_heatmap_draws_an_x_on_the_oom_cell_only():
    fig = draw_heatmap([trial(1, 1, 1, tokens=1234), trial(2, 1, 1, state="oom"), trial(1, 2, 1, tokens=999)])
    ax = fig.axes[0]  # the only mbs panel (the colour bar is the second axes)
    texts = _texts(ax)
    # rows are tp values (1, 2), columns pp values (1, 2): (x=pp index, y=tp index)
    assert texts[(0, 1)] == "X"
    assert texts[(0, 0)] == "1,234" and texts[(1, 0)] == "999"
    assert list(texts.values()).count("X") == 1


def test_heatmap_marks_an_oom_beside_the_value_when_the_cell_also_has_an_ok_trial():
    fig = draw_heatmap([trial(1, 1, 1, tokens=500), trial(1, 1, 1, state="oom", gbs=64)])
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "X" in texts and "500" in texts


def test_pareto_front_excludes_dominated_points():
    fast_big = trial(chash="fast_big", tokens=900, mem=0.30)
    slow_small = trial(chash="slow_small", tokens=300, mem=0.05)
    middle = trial(chash="middle", tokens=600, mem=0.10)
    dominated = trial(chash="dominated", tokens=500, mem=0.20)      # middle is faster and leaner
    same_mem_slower = trial(chash="same_mem_slower", tokens=200, mem=0.05)
    failed = trial(chash="failed", state="oom")
    front = pareto_front([dominated, fast_big, failed, middle, same_mem_slower, slow_small])
    assert [t["config_hash"] for t in front] == ["slow_small", "middle", "fast_big"]


def test_estimate_errors_use_predicted_over_measured():
    rows = estimate_errors([trial(tokens=1000, mem=0.2, predicted={"tokens_per_s": 1500, "peak_mem_gb": 0.1}),
                            trial(state="oom", predicted={"tokens_per_s": 1.0})])
    assert len(rows) == 1
    assert rows[0]["tokens_error"] == pytest.approx(0.5) and rows[0]["mem_error"] == pytest.approx(-0.5)
    assert relative_error(None, 3.0) is None and relative_error(2.0, 0.0) is None


def test_trial_spans_measure_from_the_first_submission():
    spans = trial_spans([trial(submitted_at=110, finished_at=130), trial(submitted_at=100, finished_at=105),
                         trial(state="planned", submitted_at=0, finished_at=0)])
    assert [(s, d) for _, s, d in spans] == [(10, 20), (0, 5)]


@pytest.mark.parametrize("trials", [
    [],
    [trial(state="oom"), trial(state="failed"), trial(state="planned", submitted_at=0, finished_at=0)],
    [trial()],
    [trial(tp=t, pp=p, mbs=m, tokens=100.0 * i, predicted={"tokens_per_s": 90.0 * i, "peak_mem_gb": 0.05})
     for i, (t, p, m) in enumerate([(1, 1, 1), (1, 2, 1), (2, 1, 2), (2, 2, 2)], 1)] * 15,  # 60: unlabelled
], ids=["empty", "no-ok-trial", "one-trial", "sixty-trials"])
def test_write_plots_always_writes_every_png(tmp_path, trials):
    paths = write_plots(trials, 0.5, tmp_path / "plots", best_hash="x")
    assert [p.name for p in paths] == list(PLOT_FILES.values())
    for path in paths:
        assert path.read_bytes().startswith(PNG_MAGIC) and path.stat().st_size > 1000
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == sorted(PLOT_FILES.values())  # no temporaries


def test_the_memory_legend_hides_no_marker_bar_or_label():
    """The tiny sweep's first trial is the mbs-64 OOM, predicted far above capacity: its marker sat under the
    legend in the upper left corner."""
    from analysis.report.plots import draw_headroom

    trials = [trial(1, 1, 64, state="oom", predicted={"peak_mem_gb": 0.87}, chash="big")]
    trials += [trial(tp, pp, mbs, mem=0.05 + 0.01 * i, predicted={"peak_mem_gb": 0.04 + 0.01 * i}, chash=f"t{i}")
               for i, (tp, pp, mbs) in enumerate([(1, 1, 2), (2, 1, 2), (1, 1, 1), (2, 2, 1), (1, 2, 1)])]
    fig = draw_headroom(trials, 0.5)
    fig.canvas.draw()
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent()
    markers = ax.transData.transform(ax.collections[0].get_offsets())
    assert len(markers) == len(trials)
    assert not any(legend.contains(x, y) for x, y in markers)
    assert not any(legend.overlaps(p.get_window_extent()) for p in ax.patches)
    assert not any(legend.overlaps(t.get_window_extent()) for t in ax.texts)


# ------------------------------------------------------------------------------------------------- the search

from analysis.report.plots import (  # noqa: E402
    SEARCH_PLOT_FILES,
    best_so_far,
    draw_calibration,
    draw_network,
    draw_search_progress,
    hours_to_within,
    network_series,
    write_search_plots,
)


def test_best_so_far_starts_at_the_first_measurement_and_only_rises():
    points = [(0.1, None), (0.3, 100.0), (0.4, 80.0), (0.7, None), (1.0, 120.0), (1.2, 119.0)]
    assert best_so_far(points) == [(0.3, 100.0), (0.4, 100.0), (0.7, 100.0), (1.0, 120.0), (1.2, 120.0)]
    assert best_so_far([(0.1, None)]) == []
    assert hours_to_within(points, 121.0) == 1.0 and hours_to_within(points, 130.0) is None
    assert hours_to_within(points, 102.0) == 0.3          # 100 is within 2 % of 102


def test_search_progress_draws_one_step_curve_per_strategy():
    curves = {"adaptive": [(1.0, 90.0), (2.0, 100.0)], "exhaustive": [(1.0, 50.0), (3.0, 90.0), (5.0, 100.0)]}
    fig = draw_search_progress(curves, best_tokens_per_s=100.0)
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(t.startswith("adaptive: 2 trials, 2 GPU-h, within 2% after 2 GPU-h") for t in labels), labels
    assert any(t.startswith("exhaustive: 3 trials, 5 GPU-h") for t in labels), labels
    assert len(ax.lines) == 2
    empty = draw_search_progress({"adaptive": [(1.0, None)]})
    assert "no trial measured" in empty.axes[0].texts[0].get_text()


def test_calibration_plot_shows_multipliers_and_what_the_data_constrain():
    fig = draw_calibration({"compute": (0.8, 0.05), "network": (1.0, 0.7)}, supported=["compute"], note="3 trials")
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_yticklabels()] == ["compute", "network"]
    assert {t.get_text().strip() for t in ax.texts} == {"x0.8", "x1"}
    assert "3 trials" in ax.get_title()
    assert "no calibration" in draw_calibration({}).axes[0].texts[0].get_text()


def test_network_plot_one_panel_per_scope_with_the_datasheet_line():
    rows = [{"op": op, "scope": scope, "bytes": size, "busbw_gbytes_per_s": size / 1e6}
            for scope in ("inter_node", "intra_node") for op in ("all_reduce", "sendrecv") for size in (4096, 1 << 20)]
    series = network_series(rows)
    assert series[("intra_node", "all_reduce")] == [(4096, 4096 / 1e6), (1 << 20, (1 << 20) / 1e6)]
    fig = draw_network(rows, {"intra_node": 5.0})
    intra, inter = fig.axes[:2]
    assert intra.get_title() == "intra-node" and inter.get_title() == "inter-node"
    assert len(intra.lines) == 3 and len(inter.lines) == 2          # + the dashed datasheet line
    assert "no network measurement" in draw_network([]).axes[0].texts[0].get_text()


def test_write_search_plots_only_what_has_data(tmp_path):
    paths = write_search_plots(tmp_path, curves={"adaptive": [(1.0, 5.0)]}, calibration={"compute": (1.1, 0.1)})
    assert [p.name for p in paths] == [SEARCH_PLOT_FILES["search"], SEARCH_PLOT_FILES["calibration"]]
    assert all(p.read_bytes().startswith(PNG_MAGIC) for p in paths)
    assert not (tmp_path / SEARCH_PLOT_FILES["network"]).exists()
