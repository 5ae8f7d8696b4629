"""report.html: one self-contained page per sweep (plots embedded as data: URIs; no external CSS, JS or fonts,
because the page is read on machines without network), every dynamic string passed through html.escape.

Sections: summary, winner and recommendations, ranked table, plots, failures grouped by kind with log excerpts,
pruned trials, the winner's exported files. Pure builders (`log_excerpt`, `failure_groups`, `render_report`) and
one writer (`write_report`).
"""

from __future__ import annotations

import base64
import html
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from analysis.report.plots import NOT_RUN, label, layout_of, relative_error
from analysis.report.search_summary import (
    brought_back,
    calibrated_bounds,
    calibrated_error,
    interval_text,
    run_order,
    skipped,
    stopped_early,
)
from launcher.core.files import write_atomic
from launcher.core.states import TrialState

EXCERPT_LINES = 20
CONTEXT_AFTER = 5              # lines kept after the line the classifier quoted
MIN_EVIDENCE_CHARS = 8         # shorter quoted text would match unrelated lines
NOISE_PREFIXES = ("submitit INFO", "submitit WARNING")  # the job wrapper's chatter, never the cause
TAIL_BYTES = 2_000_000         # a runaway log is read from its end: the cause of a failure is printed last
OPEN_EXPORTS = ("train.sbatch", "command.txt")  # shown unfolded; the long launch scripts stay folded
PLOT_CAPTIONS = {
    "throughput_heatmap": "Measured tokens/s over tp x pp, one panel per micro-batch size; X: out of memory.",
    "memory_headroom": "Measured peak memory per trial against the device capacity (black: predicted peak).",
    "predicted_vs_measured": "The estimator against the measurement; labels: predicted / measured - 1.",
    "pareto_front": "Throughput against memory: the front holds the trials no other beats on both.",
    "trial_times": "When each trial ran and how long it took (last attempt), by state.",
    "search_progress": "Best measured tokens/s so far against the GPU-hours spent, in the order the trials ran.",
    "network_probe": "The network probe's bus bandwidth per message size (dashed: the cluster preset's datasheet "
                     "figures it replaced).",
    "calibration": "The estimator's constants fitted to the measured trials, as multipliers of their a-priori "
                   "values (grey: not constrained by the data).",
}
STYLE = """
body { font-family: sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th { background: #eee; } td.text { text-align: left; }
tr.best { background: #e6f4e6; font-weight: bold; }
pre { background: #f6f6f6; padding: 0.6em; white-space: pre-wrap; overflow-wrap: anywhere; font-size: 0.85em; }
pre mark { background: #ffd7d7; }
img { max-width: 100%; border: 1px solid #ddd; }
.warning { color: #a40000; } .info { color: #1a4d8f; }
"""


def e(value: object) -> str:
    return html.escape(str(value), quote=True)


# ------------------------------------------------------------------------------------------------ log excerpts

@dataclass(frozen=True)
class Excerpt:
    source: str
    lines: tuple[str, ...]
    marked: Optional[int] = None   # index in `lines` of the line the failure reason quotes


def _evidence(reason: str) -> str:
    """The log line a classifier reason quotes: 'out of memory: <line>' -> '<line>' (without the '...' that mark a
    long line's cut ends)."""
    quoted = reason.split(": ", 1)[1] if ": " in reason else reason
    return quoted.strip().removeprefix("...").removesuffix("...").strip()[:80]


def log_excerpt(text: str, reason: str = "", source: str = "", max_lines: int = EXCERPT_LINES,
                quoted: str = "") -> Excerpt:
    """About max_lines relevant lines: around the line `quoted` (a recorded evidence line) or else the reason
    quotes, else the last lines without noise."""
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.startswith(NOISE_PREFIXES)]
    evidence = quoted.strip()[:200] or _evidence(reason)
    if len(evidence) >= MIN_EVIDENCE_CHARS:
        for i, line in enumerate(lines):
            if evidence in line:
                start = max(0, min(i - (max_lines - CONTEXT_AFTER - 1), len(lines) - max_lines))
                return Excerpt(source, tuple(lines[start:start + max_lines]), i - start)
    return Excerpt(source, tuple(lines[-max_lines:]))


def read_tail(path: Path, max_bytes: int = TAIL_BYTES) -> Optional[str]:
    """The end of a log file (None when it does not exist)."""
    if not path.is_file():
        return None
    with path.open("rb") as fh:
        size = fh.seek(0, 2)
        fh.seek(max(0, size - max_bytes))
        return fh.read().decode("utf-8", errors="replace")


def _recorded_evidence(trial: dict) -> list[tuple[str, str]]:
    """(file name, line) of the evidence the judge recorded (analysis.logs.joblog), the line the reason quotes
    first; [] for a trial judged before evidence was recorded."""
    items = trial.get("evidence") or []
    return [(str(e.get("file", "")), str(e.get("text", ""))) for e in items if isinstance(e, dict) and e.get("text")]


def best_excerpt(trial: dict, read_log: Callable[[str], Optional[str]]) -> Optional[Excerpt]:
    """The excerpt around the recorded evidence line, in the file it is in (a job's .out and .err are judged
    together: the cause may be in either, and a wrapper's traceback at the end of the .err is never it); else
    the excerpt of the trial's log file that holds the line the reason quotes; else of its last non-empty file."""
    paths = [(path, Path(path).name) for path in trial.get("log_paths", [])]
    for file, line in _recorded_evidence(trial):
        for path, name in paths:
            text = read_log(path) if name == file else None
            excerpt = log_excerpt(text, source=name, quoted=line) if text else None
            if excerpt is not None and excerpt.marked is not None:
                return excerpt
    found = []
    for path, name in paths:
        text = read_log(path)
        if text:
            found.append(log_excerpt(text, trial.get("reason", ""), name))
    marked = [x for x in found if x.marked is not None]
    if marked:
        return marked[0]
    non_empty = [x for x in found if x.lines]
    return non_empty[-1] if non_empty else None


@dataclass(frozen=True)
class FailureGroup:
    kind: str
    trials: list = field(default_factory=list)   # [(trial dict, Excerpt or None)]


def failure_groups(trials: Sequence[dict], read_log: Callable[[str], Optional[str]]) -> list[FailureGroup]:
    """Finished trials that are not ok, grouped by failure kind (largest group first)."""
    groups: dict[str, list] = {}
    for t in trials:
        # stopped early: known worse, not a failure
        if t.get("state") in (TrialState.OK, TrialState.STOPPED_EARLY, *NOT_RUN):
            continue
        kind = t.get("failure_kind") or t["state"]
        groups.setdefault(kind, []).append((t, best_excerpt(t, read_log)))
    return [FailureGroup(k, v) for k, v in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))]


# ------------------------------------------------------------------------------------------------ HTML

def summary_rows(model: dict, cluster: dict, backend: dict, executor: str, trials: Sequence[dict],
                 noise_tolerance: float, budget_gpu_hours: float = 0.0) -> dict:
    """The summary table: what was swept where, how the trials ended, how long it took, the GPU-hours it spent (of
    plan.max_gpu_hours when there is one)."""
    m, c, b = model, cluster, backend
    counts = Counter(t["state"] for t in trials)
    spans = [(t["submitted_at"], t["finished_at"]) for t in trials if t.get("submitted_at") and t.get("finished_at")]
    wall_s = max(f for _, f in spans) - min(s for s, _ in spans) if spans else 0.0
    return {"model": f"{m['name']}: {m['layers']} layers, hidden {m['hidden']}, {m['heads']} heads, seq {m['seq_len']}",
            "cluster": f"{c['name']}: {c['gpu']}, {c['gpu_mem_gb']:g} GB, {c['gpus_per_node']} GPUs/node, "
                       f"{c['nodes']} node(s), partition {c['partition']}",
            "backend": f"{b['name']} ({b['precision']}, {b['warmup_iters']} warm-up + {b['measure_iters']} measured "
                       "iterations)",
            "executor": executor,
            "trials": f"{len(trials)}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())),
            "elapsed": f"{wall_s:,.0f} s from the first submission to the last finish; "
                       f"{sum(f - s for s, f in spans):,.0f} s of trial time",
            "GPU-hours": _gpu_hours(trials, budget_gpu_hours),
            "ranking": f"measured tokens/s, the median of a configuration's runs; two configurations tie when they "
                       f"differ by less than {noise_tolerance:.0%} plus the larger spread of their runs, and a tie "
                       "goes to memory headroom",
            "generated": time.strftime("%Y-%m-%d %H:%M:%S")}


def _gpu_hours(trials: Sequence[dict], budget: float) -> str:
    order = run_order(trials)
    spent = order[-1].spent_gpu_hours if order else 0.0
    pruned = sum(t.get("pruned_by") == "gpu_budget" for t in trials)
    text = f"{spent:.3g} spent" + (f" of the {budget:g} budget (plan.max_gpu_hours)" if budget else "")
    return text + (f"; {pruned} trial(s) left unrun at the budget" if pruned else "")


@dataclass
class ReportInput:
    sweep: str
    summary: dict                       # label -> value, shown in order
    ranked: list                        # ok trials, best first (launcher.core.ranking.rank)
    trials: list                        # every trial of the ledger
    plots: list = field(default_factory=list)           # PNG paths
    explanation: str = ""
    recommendations: list = field(default_factory=list)  # analysis.report.recommend.Recommendation
    failures: list = field(default_factory=list)         # FailureGroup
    export_files: dict = field(default_factory=dict)     # name -> text
    links: dict = field(default_factory=dict)            # label -> URL (MLflow runs)
    calibration: Optional[dict] = None                   # launcher.plan.calibrate.Calibration.to_json()
    network: str = ""                                    # what the network probe measured ('' without one)
    compute: str = ""                                    # what the compute probe measured ('' without one)


def _table(header: Sequence[str], rows: Sequence[Sequence[object]], text_cols: Sequence[int] = (),
           row_classes: Sequence[str] = ()) -> str:
    head = f"<thead><tr>{''.join(f'<th>{e(h)}</th>' for h in header)}</tr></thead>" if header else ""
    body = []
    for i, row in enumerate(rows):
        cls = f' class="{e(row_classes[i])}"' if i < len(row_classes) and row_classes[i] else ""
        cells = "".join(f'<td class="text">{e(c)}</td>' if j in text_cols else f"<td>{e(c)}</td>"
                        for j, c in enumerate(row))
        body.append(f"<tr{cls}>{cells}</tr>")
    return f"<table>{head}<tbody>{''.join(body)}</tbody></table>"


def _pct(value: Optional[float], signed: bool = False) -> str:
    return "" if value is None else f"{value:+.0%}" if signed else f"{value:.0%}"


def _ranked_rows(ranked: Sequence[dict]) -> list[list[object]]:
    rows = []
    for i, t in enumerate(ranked, 1):
        m, p = t.get("metrics", {}), t.get("predicted", {})
        runs = int(t.get("n_runs") or 1)
        rows.append([i, t["config_hash"], label(t), layout_of(t).gpus,
                     f"{m.get('tokens_per_s', 0):,.0f}",
                     f"{runs} (spread {m.get('tokens_per_s_spread') or 0:.0%})" if runs > 1 else "1",
                     f"{m.get('tflops_per_gpu') or 0:.3g}",
                     _pct(m.get("mfu")), f"{m.get('peak_mem_gb') or 0:.3g}", _pct(m.get("headroom")),
                     _predicted(p, "tokens_per_s"),
                     _pct(relative_error(p.get("tokens_per_s"), m.get("tokens_per_s")), signed=True)])
    return rows


def _predicted(prediction: dict, key: str) -> str:
    """A prediction with its 90 % interval (launcher.plan.band: `<key>_low`, `<key>_high`), e.g.
    '8,788 (7,912–9,655)'."""
    return interval_text(prediction.get(key), prediction.get(f"{key}_low"), prediction.get(f"{key}_high"))


def _calibrated(calibrated: dict, key: str) -> str:
    return _predicted({**calibrated, **calibrated_bounds(calibrated)}, key)


def _section(ident: str, title: str, body: str) -> str:
    return f'<section id="{e(ident)}"><h2>{e(title)}</h2>{body}</section>'


def _summary(data: ReportInput) -> str:
    rows = [[k, v] for k, v in data.summary.items()]
    links = "".join(f'<p><a href="{e(url)}">{e(name)}</a>: {e(url)}</p>' for name, url in data.links.items())
    return _table([], rows, text_cols=(0, 1)) + links


def _winner(data: ReportInput) -> str:
    items = []
    for r in data.recommendations:
        command = f"<pre>{e(r.command)}</pre>" if r.command else ""
        items.append(f'<li class="{e(r.severity)}"><b>{e(r.severity)}</b> ({e(r.kind)}): {e(r.message)}'
                     f"{command}</li>")
    recs = f"<h3>Recommendations</h3><ul>{''.join(items)}</ul>" if items else "<p>No recommendation.</p>"
    return f'<p id="winner-text">{e(data.explanation)}</p>{recs}'


def _plots(paths: Sequence[Path]) -> str:
    figures = []
    for path in paths:
        data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
        caption = PLOT_CAPTIONS.get(Path(path).stem, Path(path).stem)
        figures.append(f'<figure><img src="data:image/png;base64,{data}" alt="{e(Path(path).stem)}">'
                       f"<figcaption>{e(caption)}</figcaption></figure>")
    return "".join(figures) or "<p>No plots.</p>"


def _failures(groups: Sequence[FailureGroup]) -> str:
    if not groups:
        return "<p>No failed trial.</p>"
    parts = []
    for group in groups:
        parts.append(f"<h3>{e(group.kind)} ({len(group.trials)})</h3>")
        for t, excerpt in group.trials:
            parts.append(f"<p><b>{e(t['config_hash'])}</b> {e(label(t))}: "
                         f"{e(t['state'])}, {e(t.get('reason', ''))} (attempts: {e(t.get('attempts', 0))})</p>")
            parts.append(_evidence_line(t))
            if excerpt is None:
                parts.append("<p>(no log file found)</p>")
                continue
            lines = [f"<mark>{e(ln)}</mark>" if i == excerpt.marked else e(ln) for i, ln in enumerate(excerpt.lines)]
            where = "lines around the evidence in" if excerpt.marked is not None else "last relevant lines of"
            parts.append(f"<p>{where} {e(excerpt.source)}:</p><pre>{chr(10).join(lines)}</pre>")
    return "".join(parts)


def _evidence_line(trial: dict) -> str:
    """The first line the verdict rests on, with its file and line number ('' when none was recorded)."""
    items = [x for x in trial.get("evidence") or [] if isinstance(x, dict) and x.get("text")]
    if not items:
        return ""
    first = items[0]
    where = f"{e(first.get('file', ''))} line {e(first.get('line', '?'))}"
    return f"<p>evidence: {where}: <code>{e(first['text'])}</code></p>"


def _pruned(trials: Sequence[dict]) -> str:
    rows = [[t["config_hash"], label(t), _predicted(t.get("predicted") or {}, "peak_mem_gb"), t.get("pruned_by", ""),
             t.get("reason", "")]
            for t in trials if t.get("state") == TrialState.PRUNED]
    return (_table(["trial", "layout", "a-priori peak GB (90 %)", "pruned by", "reason"], rows,
                   text_cols=(0, 1, 2, 3, 4)) if rows else "<p>None.</p>")


def _calibration(cal: Optional[dict]) -> str:
    if not cal:
        return "<p>No calibration (no trial measured).</p>"
    head = (f"<p>{'Applied' if cal.get('applied') else 'Not applied'}: {e(cal.get('note', ''))}. Model error after "
            f"the fit: ±{cal.get('residual_sd', 0):.1%} (step time), ±{cal.get('memory_residual_sd', 0):.1%} (peak "
            "memory)")
    if cal.get("holdout_error") is not None:
        head += (f"; on the {cal.get('n_holdout', 0)} trials measured after a fit predicted them: median "
                 f"|error| {cal['holdout_error']:.1%}")
    rows = [[name, f"x{value:.3g}", f"±{cal.get('parameter_sd', {}).get(name, 0):.2f}",
             "yes" if name in cal.get("supported", ()) else ""] for name, value in cal.get("parameters", {}).items()]
    return head + ".</p>" + _table(["parameter", "fitted / a-priori", "sd (log)", "constrained by the data"], rows,
                                   text_cols=(0,))


def _tokens(value: Optional[float]) -> str:
    return "" if not value else f"{value:,.0f}"


def _search(data: ReportInput) -> str:
    rows = []
    for i, r in enumerate(run_order(data.trials), 1):
        t = r.trial
        measured = (t.get("metrics") or {}).get("tokens_per_s")
        rows.append([i, t["config_hash"], label(t), t["state"],
                     _predicted(t.get("predicted") or {}, "tokens_per_s"),
                     _calibrated(t.get("calibrated") or {}, "tokens_per_s"), _tokens(measured),
                     _pct(calibrated_error(t), signed=True), f"{r.spent_gpu_hours:.3g}", _tokens(r.best_tokens_per_s)])
    order = (_table(["#", "trial", "layout", "state", "a-priori tokens/s (90 %)",
                     "calibrated tokens/s (90 %, before it ran)",
                     "measured tokens/s", "calibrated error", "GPU-h spent", "best so far"], rows, text_cols=(1, 2, 3))
             if rows else "<p>No trial ran.</p>")
    stopped = [[t["config_hash"], label(t),
                _tokens((t.get("metrics") or {}).get("tokens_per_s")), t.get("reason", "")]
               for t in stopped_early(data.trials)]
    skips = [[t["config_hash"], label(t), t.get("pruned_by", ""), t.get("reason", "")]
             for t in skipped(data.trials)]
    back = [[t["config_hash"], label(t), _predicted(t.get("predicted") or {}, "peak_mem_gb"),
             _calibrated(t.get("calibrated") or {}, "peak_mem_gb"), t["state"],
             f"{(t.get('metrics') or {}).get('peak_mem_gb') or 0:.3g}" if (t.get("metrics") or {}).get("peak_mem_gb")
             else ""] for t in brought_back(data.trials)]
    network = f"<h3>Network probe</h3><p>{e(data.network)}</p>" if data.network else ""
    network += f"<h3>Compute probe</h3><p>{e(data.compute)}</p>" if data.compute else ""
    return ("<h3>Trials in the order they ran</h3>" + order + network
            + f"<h3>Calibration</h3>{_calibration(data.calibration)}"
            + f"<h3>Stopped early ({len(stopped)})</h3>"
            + (_table(["trial", "layout", "partial tokens/s", "why"], stopped, text_cols=(0, 1, 3)) if stopped
               else "<p>None.</p>")
            + f"<h3>Brought back after calibration ({len(back)})</h3>"
            + (_table(["trial", "layout", "a-priori peak GB (90 %): pruned", "calibrated peak GB (90 %): kept",
                       "state", "measured peak GB"], back, text_cols=(0, 1, 2, 3, 4)) if back
               else "<p>None: the planner pruned a layout only when its whole a-priori memory interval was over the "
                    "device, and no calibration put one back under it.</p>")
            + f"<h3>Skipped while the sweep ran ({len(skips)})</h3>"
            + (_table(["trial", "layout", "reason", "why"], skips, text_cols=(0, 1, 2, 3)) if skips
               else "<p>None.</p>"))


def _exports(files: dict) -> str:
    if not files:
        return "<p>Nothing exported (no trial finished ok).</p>"
    return "".join(f"<details{' open' if name in OPEN_EXPORTS else ''}><summary><code>{e(name)}</code></summary>"
                   f"<pre>{e(text)}</pre></details>" for name, text in files.items())


def render_report(data: ReportInput) -> str:
    counts = Counter(t.get("state") for t in data.trials)
    body = [
        f"<h1>parasweep sweep {e(data.sweep)}</h1>",
        _section("summary", "Summary", _summary(data)),
        _section("winner", "Winner", _winner(data)),
        _section("ranked", f"Ok trials, best first ({len(data.ranked)})",
                 _table(["#", "trial", "layout", "GPUs", "tokens/s", "runs", "TFLOPs/GPU", "MFU", "peak GB", "headroom",
                         "predicted tokens/s", "estimate error"], _ranked_rows(data.ranked), text_cols=(1, 2),
                        row_classes=["best"] if data.ranked else [])),
        _section("plots", "Plots", _plots(data.plots)),
        _section("search", "Search: run order, calibration, early stops and skips", _search(data)),
        _section("failures", f"Failures ({sum(len(g.trials) for g in data.failures)})", _failures(data.failures)),
        _section("pruned", f"Pruned before running ({counts.get(TrialState.PRUNED, 0)})", _pruned(data.trials)),
        _section("export", "Exported files of the winner", _exports(data.export_files)),
    ]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>parasweep {e(data.sweep)}</title><style>{STYLE}</style></head><body>"
            + "\n".join(body) + "</body></html>\n")


def write_report(path: Path, data: ReportInput) -> Path:
    return write_atomic(path, render_report(data))
