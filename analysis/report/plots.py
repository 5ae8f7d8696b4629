"""The sweep's plots (PNG, matplotlib's Agg renderer) for the report and the parent MLflow run.

Pure data first (`heatmap_cells`, `pareto_front`, `estimate_errors`, `trial_spans`: trial dicts in, numbers out),
drawing second (`draw_*` return a matplotlib Figure), files last (`write_plots`). matplotlib is imported only when
a figure is drawn, and without pyplot: no global figure registry, no GUI backend, nothing to close by hand.
Every plot copes with no data (a sweep with 0 ok trials draws a labelled empty panel rather than failing).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from launcher.core.files import replacing
from launcher.core.layout import Layout, as_layout, label_of
from launcher.core.states import TrialState

PLOT_FILES = {
    "heatmap": "throughput_heatmap.png",
    "headroom": "memory_headroom.png",
    "estimate": "predicted_vs_measured.png",
    "pareto": "pareto_front.png",
    "timeline": "trial_times.png",
}
NOT_RUN = frozenset(state for state in TrialState if not state.finished)
"""A trial in one of these states has not run (yet): planned, submitted, running, pruned."""
MAX_LABELLED = 40  # beyond this many trials, per-trial tick labels are unreadable: show indices only
DPI = 100


def label(trial: dict) -> str:
    """A trial's layout in its one spelling (launcher.core.layout.Layout.label)."""
    return label_of(trial["layout"])


def layout_of(trial: dict) -> Layout:
    """A trial's layout as a Layout (a trial dict holds it as plain data)."""
    return as_layout(trial["layout"])


def _measured(trial: dict, key: str) -> Optional[float]:
    value = trial.get("metrics", {}).get(key)
    return float(value) if isinstance(value, (int, float)) else None


def _value(trial: dict, key: str) -> float:
    """A measured number known to be there (the trial was filtered on it)."""
    value = _measured(trial, key)
    assert value is not None, key
    return value


def _ok(trials: Sequence[dict]) -> list[dict]:
    return [t for t in trials if t.get("state") == TrialState.OK and _measured(t, "tokens_per_s")]


# ------------------------------------------------------------------------------------------------- pure data

@dataclass(frozen=True)
class Cell:
    tokens_per_s: Optional[float]  # best ok trial of the cell (None: none ran ok)
    oom: bool                      # some trial of the cell ran out of memory
    failed: bool                   # some trial of the cell failed for another reason


def heatmap_cells(trials: Sequence[dict]) -> dict[int, dict[tuple[int, int], Cell]]:
    """mbs -> {(tp, pp): Cell}. Trials that never ran (planned, pruned) leave no cell."""
    raw: dict[int, dict[tuple[int, int], list[dict]]] = {}
    for t in trials:
        if t.get("state") in NOT_RUN:
            continue
        lay = layout_of(t)
        raw.setdefault(lay.mbs, {}).setdefault((lay.tp, lay.pp), []).append(t)
    out: dict[int, dict[tuple[int, int], Cell]] = {}
    for mbs, cells in sorted(raw.items()):
        out[mbs] = {}
        for key, group in cells.items():
            speeds = [s for t in _ok(group) if (s := _measured(t, "tokens_per_s")) is not None]
            out[mbs][key] = Cell(max(speeds) if speeds else None, any(t["state"] == TrialState.OOM for t in group),
                                 any(t["state"] not in (TrialState.OK, TrialState.OOM) for t in group))
    return out


def pareto_front(trials: Sequence[dict]) -> list[dict]:
    """Ok trials that no other ok trial beats on both throughput (higher) and peak memory (lower), by memory.

    Sweep in order of increasing memory: a trial is on the front iff it is faster than every trial that needs
    no more memory (of identical points one is kept)."""
    points = [t for t in _ok(trials) if _measured(t, "peak_mem_gb") is not None]
    points.sort(key=lambda t: (_value(t, "peak_mem_gb"), -_value(t, "tokens_per_s")))
    front, fastest = [], float("-inf")
    for t in points:
        if _value(t, "tokens_per_s") > fastest:
            front.append(t)
            fastest = _value(t, "tokens_per_s")
    return front


def relative_error(predicted: Optional[float], measured: Optional[float]) -> Optional[float]:
    """predicted / measured - 1 (+0.38: the estimate is 38% too high), the convention of the MLflow metrics."""
    if not predicted or not measured:
        return None
    return predicted / measured - 1.0


def estimate_errors(trials: Sequence[dict]) -> list[dict]:
    """Per ok trial: measured and predicted tokens/s and peak memory with the estimator's relative errors."""
    rows = []
    for t in _ok(trials):
        pred = t.get("predicted", {})
        row = {"trial": t, "tokens_measured": _measured(t, "tokens_per_s"),
               "tokens_predicted": pred.get("tokens_per_s"), "mem_measured": _measured(t, "peak_mem_gb"),
               "mem_predicted": pred.get("peak_mem_gb")}
        row["tokens_error"] = relative_error(row["tokens_predicted"], row["tokens_measured"])
        row["mem_error"] = relative_error(row["mem_predicted"], row["mem_measured"])
        rows.append(row)
    return rows


def trial_spans(trials: Sequence[dict]) -> list[tuple[dict, float, float]]:
    """(trial, start, duration) in seconds from the first submission, for trials that finished."""
    done = [t for t in trials if t.get("submitted_at") and t.get("finished_at", 0) >= t["submitted_at"]]
    if not done:
        return []
    origin = min(t["submitted_at"] for t in done)
    return [(t, t["submitted_at"] - origin, t["finished_at"] - t["submitted_at"]) for t in done]


# ------------------------------------------------------------------------------------------------- drawing

def _figure(width_in: float, height_in: float, ncols: int = 1):
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width_in, height_in), dpi=DPI, layout="constrained")
    axes = fig.subplots(1, ncols, squeeze=False)[0]
    return fig, list(axes)


def _empty(ax, text: str) -> None:
    ax.text(0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="0.4")
    ax.set_xticks([])
    ax.set_yticks([])


def draw_heatmap(trials: Sequence[dict]):
    """One panel per mbs: tokens/s over tp (rows) x pp (columns); a red X on cells that ran out of memory."""
    cells = heatmap_cells(trials)
    fig, axes = _figure(4.2 * max(1, len(cells)), 3.8, max(1, len(cells)))
    if not cells:
        _empty(axes[0], "no trial has finished yet")
        return fig
    ok_speeds = [c.tokens_per_s for grid in cells.values() for c in grid.values() if c.tokens_per_s]
    vmax = max(ok_speeds) if ok_speeds else 1.0
    tps = sorted({tp for grid in cells.values() for tp, _ in grid})
    pps = sorted({pp for grid in cells.values() for _, pp in grid})
    image = None
    for ax, (mbs, grid) in zip(axes, cells.items()):
        values = [[float("nan")] * len(pps) for _ in tps]
        for (tp, pp), cell in grid.items():
            if cell.tokens_per_s:
                values[tps.index(tp)][pps.index(pp)] = cell.tokens_per_s
        image = ax.imshow(values, cmap="viridis", vmin=0, vmax=vmax, origin="lower", aspect="auto")
        for (tp, pp), cell in grid.items():
            x, y = pps.index(pp), tps.index(tp)
            if cell.oom:  # beside the value when another trial of the same cell (other gbs, ...) fitted
                ax.text(x + (0.3 if cell.tokens_per_s else 0), y, "X", ha="center", va="center", color="red",
                        fontsize=14 if cell.tokens_per_s else 22, fontweight="bold")
            if cell.tokens_per_s:
                color = "black" if cell.tokens_per_s > 0.6 * vmax else "white"  # readable on viridis' yellow end
                ax.text(x, y, f"{cell.tokens_per_s:,.0f}", ha="center", va="center", color=color, fontsize=9)
            elif cell.failed and not cell.oom:
                ax.text(x, y, "failed", ha="center", va="center", color="0.3", fontsize=9)
        ax.set_xticks(range(len(pps)), [str(p) for p in pps])
        ax.set_yticks(range(len(tps)), [str(t) for t in tps])
        ax.set_xlabel("pp")
        ax.set_ylabel("tp")
        ax.set_title(f"mbs {mbs} ({_gpu_counts(trials, mbs)})")
    fig.colorbar(image, ax=axes, label="tokens/s (best ok trial; X = out of memory)")
    return fig


def _gpu_counts(trials: Sequence[dict], mbs: int) -> str:
    counts = sorted({lay.gpus for lay in map(layout_of, trials) if lay.mbs == mbs})
    return "/".join(str(c) for c in counts) + " GPUs"


def draw_headroom(trials: Sequence[dict], capacity_gb: float):
    """Measured peak memory per trial against the device capacity; predicted peaks as black ticks."""
    ran = [t for t in trials if t.get("state") not in NOT_RUN]
    fig, (ax,) = _figure(min(16.0, max(6.0, 0.35 * len(ran) + 2.5)), 4.2)
    if not ran:
        _empty(ax, "no trial has finished yet")
        return fig
    xs = range(len(ran))
    peaks = [_measured(t, "peak_mem_gb") or 0.0 for t in ran]
    ooms = [t["state"] == TrialState.OOM for t in ran]
    heights = [capacity_gb if oom and not peak else peak for peak, oom in zip(peaks, ooms)]
    colors = ["tab:red" if oom else "tab:blue" if t["state"] == TrialState.OK else "0.6" for t, oom in zip(ran, ooms)]
    labelled = len(ran) <= MAX_LABELLED
    if labelled:
        for bar, t, oom in zip(ax.bar(xs, heights, color=colors), ran, ooms):
            headroom = _measured(t, "headroom")
            text = "OOM" if oom else f"{headroom:.0%}" if headroom is not None else t["state"]
            ax.annotate(text, (bar.get_x() + bar.get_width() / 2, bar.get_height()), ha="center", va="bottom",
                        fontsize=7, xytext=(0, 2), textcoords="offset points")
    else:  # one LineCollection instead of a thousand Rectangle artists: seconds less to draw
        ax.vlines(list(xs), 0, heights, colors=colors, linewidth=max(0.5, 800 / len(ran)))
    predicted = [t.get("predicted", {}).get("peak_mem_gb") for t in ran]
    ax.scatter([x for x, p in zip(xs, predicted) if p], [p for p in predicted if p], marker="_", s=200,
               color="black", label="predicted peak", zorder=3)
    ax.axhline(capacity_gb, color="tab:red", linestyle="--", label=f"capacity {capacity_gb:g} GB")
    ax.set_ylabel("peak memory per GPU (GB)")
    ax.set_title("memory per trial" + (" (label: measured headroom)" if labelled else " (red: out of memory)"))
    _trial_ticks(ax, ran)
    # Outside the axes, right of the plot: inside, any corner can cover a bar, its label or a predicted peak (the
    # tiny sweep's first trial is an OOM predicted far above capacity, right under the upper-left corner).
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, fontsize=8)
    return fig


def _trial_ticks(ax, trials: Sequence[dict]) -> None:
    if len(trials) <= MAX_LABELLED:
        ax.set_xticks(range(len(trials)), [label(t) for t in trials], rotation=60, ha="right", fontsize=7)
    else:
        ax.set_xlabel("trial (plan order)")


def draw_estimate(trials: Sequence[dict]):
    """Predicted against measured tokens/s and peak memory; each point labelled with the estimator's error."""
    rows = estimate_errors(trials)
    fig, axes = _figure(10.0, 4.4, 2)
    panels = (("tokens", "tokens/s", axes[0]), ("mem", "peak memory (GB)", axes[1]))
    for key, unit, ax in panels:
        pairs = [(r[f"{key}_measured"], r[f"{key}_predicted"], r[f"{key}_error"]) for r in rows
                 if r[f"{key}_error"] is not None]
        if not pairs:
            _empty(ax, "no ok trial with both values")
            continue
        xs, ys, errors = zip(*pairs)
        top = max(max(xs), max(ys)) * 1.1
        ax.plot([0, top], [0, top], color="0.6", linestyle="--", label="perfect estimate")
        ax.scatter(xs, ys, color="tab:blue", zorder=3)
        if len(pairs) <= MAX_LABELLED:
            for x, y, err in pairs:
                ax.annotate(f"{err:+.0%}", (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
        mean_abs = sum(abs(e) for e in errors) / len(errors)
        ax.set_title(f"{unit}: mean |error| {mean_abs:.0%}")
        ax.set_xlabel(f"measured {unit}")
        ax.set_ylabel(f"predicted {unit}")
        ax.set_xlim(0, top)
        ax.set_ylim(0, top)
        ax.legend(loc="upper left", fontsize=8)
    return fig


def draw_pareto(trials: Sequence[dict], best_hash: str = ""):
    """Throughput against peak memory; the front (no trial both faster and leaner) joined by a line."""
    points = [t for t in _ok(trials) if _measured(t, "peak_mem_gb") is not None]
    fig, (ax,) = _figure(6.4, 4.4)
    if not points:
        _empty(ax, "no ok trial with a measured peak memory")
        return fig
    front = pareto_front(points)
    ax.scatter([_measured(t, "peak_mem_gb") for t in points], [_measured(t, "tokens_per_s") for t in points],
               color="0.6", label="dominated")
    fx = [_measured(t, "peak_mem_gb") for t in front]
    fy = [_measured(t, "tokens_per_s") for t in front]
    ax.plot(fx, fy, "-o", color="tab:orange", drawstyle="steps-post", label="Pareto front", zorder=3)
    for t in front:
        ax.annotate(label(t), (_measured(t, "peak_mem_gb"), _measured(t, "tokens_per_s")), fontsize=7,
                    xytext=(4, -10), textcoords="offset points")
    best = [t for t in points if t["config_hash"] == best_hash]
    if best:
        ax.scatter([_measured(best[0], "peak_mem_gb")], [_measured(best[0], "tokens_per_s")], marker="*", s=260,
                   color="tab:red", label="selected", zorder=4)
    ax.set_xlabel("peak memory per GPU (GB)")
    ax.set_ylabel("tokens/s")
    ax.set_title("throughput vs memory")
    ax.legend(loc="lower right", fontsize=8)
    return fig


STATE_COLORS = {TrialState.OK: "tab:green", TrialState.OOM: "tab:red", TrialState.TIMEOUT: "tab:orange",
                TrialState.HANG: "tab:purple", TrialState.CANCELLED: "0.5", TrialState.FAILED: "tab:brown",
                TrialState.STOPPED_EARLY: "tab:olive"}


def draw_timeline(trials: Sequence[dict]):
    """When each trial ran (last attempt), coloured by its state: the bar length is the time it cost."""
    spans = trial_spans(trials)
    fig, (ax,) = _figure(8.0, max(3.0, 0.25 * min(len(spans), MAX_LABELLED) + 1.5))
    if not spans:
        _empty(ax, "no trial has finished yet")
        return fig
    ys = range(len(spans))
    colors = [STATE_COLORS.get(t["state"], "0.3") for t, _, _ in spans]
    if len(spans) > MAX_LABELLED:  # one LineCollection instead of a thousand Rectangle artists
        ax.hlines(list(ys), [s for _, s, _ in spans], [s + d for _, s, d in spans], colors=colors,
                  linewidth=max(0.5, 600 / len(spans)))
    else:
        ax.barh(ys, [d for _, _, d in spans], left=[s for _, s, _ in spans], color=colors)
    if len(spans) <= MAX_LABELLED:
        ax.set_yticks(ys, [f"{label(t)} ({d:.0f} s)" for t, _, d in spans], fontsize=7)
    for state in sorted({t["state"] for t, _, _ in spans}):
        ax.barh([0], [0], color=STATE_COLORS.get(state, "0.3"), label=state)
    ax.invert_yaxis()
    ax.set_xlabel("seconds since the first submission")
    total = sum(d for _, _, d in spans)
    ax.set_title(f"time per trial ({len(spans)} trials, {total:,.0f} s of trial time)")
    ax.legend(loc="best", fontsize=8)
    return fig


def write_plots(trials: Sequence[dict], capacity_gb: float, out_dir: Path, best_hash: str = "") -> list[Path]:
    """Draw every plot into out_dir (created); returns the PNG paths in PLOT_FILES order."""
    out_dir.mkdir(parents=True, exist_ok=True)
    figures = {"heatmap": lambda: draw_heatmap(trials), "headroom": lambda: draw_headroom(trials, capacity_gb),
               "estimate": lambda: draw_estimate(trials), "pareto": lambda: draw_pareto(trials, best_hash),
               "timeline": lambda: draw_timeline(trials)}
    return _write(figures, PLOT_FILES, out_dir)


def _write(figures: dict, files: dict[str, str], out_dir: Path) -> list[Path]:
    paths = []
    for name, draw in figures.items():
        path = out_dir / files[name]
        with replacing(path, ".png") as tmp:  # a report or MLflow upload never sees a half-written image
            draw().savefig(tmp, format="png")
        paths.append(path)
    return paths


# ------------------------------------------------------------------------------------------------- the search
# Plain data in (no launcher types): run-order curves of (cumulative GPU-hours, measured tokens/s or None), the
# calibration's fitted multipliers, the network probe's measurements as dicts (launcher.netbench JSON rows).

SEARCH_PLOT_FILES = {
    "search": "search_progress.png",
    "calibration": "calibration.png",
    "network": "network_probe.png",
}


def best_so_far(points: Sequence[tuple[float, Optional[float]]]) -> list[tuple[float, float]]:
    """(GPU-hours spent, tokens/s or None) in run order -> the best measured so far after each trial, starting at
    the first measured one (a step curve: failed or slower trials keep the level and move it right)."""
    out: list[tuple[float, float]] = []
    best: Optional[float] = None
    for hours, speed in points:
        if speed is not None and (best is None or speed > best):
            best = speed
        if best is not None:
            out.append((hours, best))
    return out


def hours_to_within(points: Sequence[tuple[float, Optional[float]]], target: float,
                    within: float = 0.02) -> Optional[float]:
    """GPU-hours spent when a trial within `within` of `target` tokens/s was first measured (None: never)."""
    return next((h for h, s in points if s is not None and s >= (1.0 - within) * target), None)


def draw_search_progress(curves: dict[str, Sequence[tuple[float, Optional[float]]]],
                         best_tokens_per_s: Optional[float] = None, within: float = 0.02):
    """Best-so-far throughput against GPU-hours spent, one curve per strategy (e.g. this sweep and, when replay
    data exists, exhaustive search); a band marks `within` of the best known."""
    fig, (ax,) = _figure(7.0, 4.2)
    drawn = {name: best_so_far(points) for name, points in curves.items()}
    if not any(drawn.values()):
        _empty(ax, "no trial measured yet")
        return fig
    top = best_tokens_per_s or max(s for c in drawn.values() for _, s in c)
    ax.axhspan((1.0 - within) * top, top, color="tab:green", alpha=0.15, label=f"within {within:.0%} of the best")
    for name, curve in drawn.items():
        if not curve:
            continue
        xs, ys = zip(*curve)
        found = hours_to_within(curves[name], top, within)
        tail = f", within {within:.0%} after {found:.3g} GPU-h" if found is not None else ""
        ax.step(xs, ys, where="post", marker="o", markersize=3,
                label=f"{name}: {len(curves[name])} trials, {xs[-1]:.3g} GPU-h{tail}")
    ax.set_xlabel("GPU-hours spent")
    ax.set_ylabel("best tokens/s so far")
    ax.set_title("search progress")
    ax.legend(loc="lower right", fontsize=8)
    return fig


def draw_calibration(parameters: dict[str, tuple[float, float]], supported: Sequence[str] = (), note: str = ""):
    """The calibration's fitted constants as multipliers of their a-priori values (1 = unchanged), with the
    posterior +-1 sd (log-space) as error bars; parameters the measurements constrain are drawn solid."""
    fig, (ax,) = _figure(7.0, 0.35 * max(3, len(parameters)) + 1.4)
    if not parameters:
        _empty(ax, "no calibration")
        return fig
    names = list(parameters)
    ys = range(len(names))
    values = [parameters[n][0] for n in names]
    lo = [v - v * math.exp(-parameters[n][1]) for n, v in zip(names, values)]
    hi = [v * math.exp(parameters[n][1]) - v for n, v in zip(names, values)]
    colors = ["tab:blue" if n in supported else "0.7" for n in names]
    ax.barh(ys, [v - 1.0 for v in values], left=1.0, color=colors, xerr=[lo, hi], ecolor="0.3", capsize=3)
    ax.axvline(1.0, color="black", linewidth=0.8)
    for y, v in zip(ys, values):
        ax.text(max(v, 1.0), y, f" x{v:.3g}", va="center", fontsize=8)
    ax.set_yticks(ys, names)
    ax.set_xscale("log")
    from matplotlib.ticker import NullFormatter

    ax.xaxis.set_minor_formatter(NullFormatter())   # log-axis minor labels overlap
    ax.set_xlabel("fitted / a-priori value (log scale; grey: not constrained by the data)")
    ax.set_title("calibration" + (f": {note}" if note else ""), fontsize=9)
    return fig


def network_series(measurements: Sequence[dict]) -> dict[tuple[str, str], list[tuple[int, float]]]:
    """(scope, op) -> [(bytes, bus GB/s)] sorted by size, from probe measurement rows."""
    out: dict[tuple[str, str], list[tuple[int, float]]] = {}
    for m in measurements:
        out.setdefault((m["scope"], m["op"]), []).append((int(m["bytes"]), float(m["busbw_gbytes_per_s"])))
    return {k: sorted(v) for k, v in sorted(out.items())}


def draw_network(measurements: Sequence[dict], datasheet_gbytes_per_s: Optional[dict[str, float]] = None):
    """Bus bandwidth against message size per operation, one panel per scope (intra-node, inter-node); dashed
    lines at the datasheet bandwidths the estimator would otherwise use."""
    series = network_series(measurements)
    scopes = [s for s in ("intra_node", "inter_node") if any(k[0] == s for k in series)] or ["intra_node"]
    fig, axes = _figure(5.2 * len(scopes), 4.0, len(scopes))
    if not series:
        _empty(axes[0], "no network measurement")
        return fig
    for ax, scope in zip(axes, scopes):
        for (s, op), points in series.items():
            if s == scope:
                xs, ys = zip(*points)
                ax.plot(xs, ys, marker="o", markersize=3, label=op)
        sheet = (datasheet_gbytes_per_s or {}).get(scope)
        if sheet:
            ax.axhline(sheet, color="0.4", linestyle="--", label=f"datasheet {sheet:g} GB/s")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message size (bytes)")
        ax.set_ylabel("bus bandwidth (GB/s; x8 = Gbit/s)")
        ax.set_title(scope.replace("_", "-"))
        ax.legend(loc="upper left", fontsize=8)
    return fig


def write_search_plots(out_dir: Path, curves: Optional[dict] = None, best_tokens_per_s: Optional[float] = None,
                       calibration: Optional[dict] = None, supported: Sequence[str] = (),
                       network: Optional[Sequence[dict]] = None,
                       datasheet_gbytes_per_s: Optional[dict[str, float]] = None) -> list[Path]:
    """Draw the search plots whose data is given into out_dir; returns their PNG paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    figures = {}
    if curves is not None:
        figures["search"] = lambda: draw_search_progress(curves, best_tokens_per_s)
    if calibration is not None:
        figures["calibration"] = lambda: draw_calibration(calibration, supported)
    if network is not None:
        figures["network"] = lambda: draw_network(network, datasheet_gbytes_per_s)
    return _write(figures, SEARCH_PLOT_FILES, out_dir)
