"""The end of a sweep, for the launcher and for `python -m analysis`: rank the trials (medians over repeats),
write best.json with the winner's exact command, print the results, explain the winner, recommend what to try next,
write plots/, export/ (full-length launch + sbatch) and report.html, attach them to the parent MLflow run and
finish it.

Launcher side because it renders launches (launcher.backends); the pieces it assembles are analysis's pure
functions.
"""

from __future__ import annotations

import json
import sys
import time
from collections import Counter
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable, Optional, Sequence

from launcher.layout import Layout
from launcher.run.ledger import Ledger, TrialRecord
from launcher.run.tracking_link import TrackingLink
from launcher.schema import RootConfig

TOP_PRINTED = 30
DEFAULT_TRAIN_ITERS = 100_000


def best_payload(cfg: RootConfig, folder: Path, best: TrialRecord, ranked_entry: Optional[dict] = None) -> dict:
    """The winner: its configuration, what was measured (the median over repeats when it was repeated), what was
    predicted, and the exact command that runs it."""
    from launcher.backends import launch_command
    from launcher.run.trial_files import spec_for, trial_dir

    spec = spec_for(cfg, best.layout, trial_dir(folder, best.config_hash))
    return {"sweep": cfg.sweep.name, "config_hash": best.config_hash, "model": cfg.model.name,
            "cluster": cfg.cluster.name, "backend": cfg.backend.name, "layout": best.layout,
            "measured": (ranked_entry or {}).get("metrics", best.metrics), "n_runs": (ranked_entry or {}).get("n_runs", 1),
            "predicted": best.predicted, "command": launch_command(spec),
            "launch_script": str(trial_dir(folder, best.config_hash) / "launch.sh"),
            "mlflow_run_id": best.mlflow_run_id}


def write_best(cfg: RootConfig, folder: Path, best: Optional[TrialRecord],
               ranked_entry: Optional[dict] = None) -> Optional[Path]:
    path = folder / "best.json"
    if best is None:
        path.unlink(missing_ok=True)
        return None
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(best_payload(cfg, folder, best, ranked_entry), indent=2, sort_keys=True) + "\n")
    tmp.replace(path)
    return path


def print_results(cfg: RootConfig, ranked: list[dict], records: list[TrialRecord], folder: Path) -> None:
    """The ranked table (top TOP_PRINTED rows: a 1,000-trial table takes seconds to lay out and nobody reads it),
    then what did not finish ok."""
    from rich.console import Console
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 160)  # no 80-column wrap in CI logs and pipes
    table = Table(title=f"sweep {cfg.sweep.name}: ok trials, best first")
    repeated = any(t.get("n_runs", 1) > 1 for t in ranked)
    for col in ("#", "trial", "layout", "tokens/s", "TFLOPs/GPU", "MFU", "peak GB", "headroom", "pred tok/s"):
        table.add_column(col, justify="left" if col in ("trial", "layout") else "right")
    for i, t in enumerate(ranked[:TOP_PRINTED], 1):
        m, p, lay = t["metrics"], t["predicted"], t["layout"]
        tokens = f"{m.get('tokens_per_s', 0):,.0f}"
        if repeated and t.get("n_runs", 1) > 1:  # median of n runs, with the spread
            tokens += f" ±{m.get('tokens_per_s_spread', 0) / 2:.0%} (n={t['n_runs']})"
        table.add_row(str(i), t["config_hash"][:8], Layout.label(lay), tokens,
                      f"{m.get('tflops_per_gpu') or 0:.3g}", f"{m.get('mfu') or 0:.1%}",
                      f"{m.get('peak_mem_gb') or 0:.2f}", f"{m.get('headroom') or 0:.0%}",
                      f"{p.get('tokens_per_s', 0):,.0f}")
    console.print(table)
    if len(ranked) > TOP_PRINTED:
        console.print(f"... and {len(ranked) - TOP_PRINTED} more ok trials: all of them in {folder / 'report.html'}")
    failed = [r for r in records if r.state not in ("ok", "pruned")]
    if failed:
        console.print("not ok: " + ", ".join(f"{r.config_hash[:8]} {r.state}"
                                             f"{'/' + r.failure_kind if r.failure_kind else ''}" for r in failed))
    counts = Counter(r.state for r in records)
    console.print("trials by state: " + ", ".join(f"{k}={v}" for k, v in sorted(counts.items())))



def conclude(cfg: RootConfig, folder: Path, ledger: Ledger, tracking: TrackingLink, *, summary: dict,
             train_iters: Optional[int] = None, resolve=None) -> Optional[TrialRecord]:
    """The end of a sweep, and of every `python -m analysis`: rank (medians over repeats), write best.json, print
    the results, write plots/report.html/export/, attach them to the parent run and, once no trial is live, finish
    it. Returns the winner (None without an ok trial)."""
    from analysis.select import group_repeats, rank

    records = ledger.trials()
    ranked = rank(group_repeats([asdict(r) for r in records]), cfg.analysis.noise_tolerance)
    best = ledger.get(ranked[0]["config_hash"]) if ranked else None
    best_path = write_best(cfg, folder, best, ranked[0] if ranked else None)
    print_results(cfg, ranked, records, folder)
    if best is not None:
        print(f"best: {best.config_hash} {Layout.label(best.layout)} — {ranked[0]['metrics'].get('tokens_per_s', 0):,.0f} "
              f"tokens/s; command in {best_path}")
    else:
        print("no trial finished ok: nothing to select (see the failures above)")
    started = time.perf_counter()
    outputs = write_analysis(cfg, folder, [asdict(r) for r in records], train_iters=train_iters or DEFAULT_TRAIN_ITERS,
                             runs_url=ledger.get_meta("mlflow_runs_url", "") or "", resolve=resolve)
    print_outputs(outputs, folder)
    print(f"plots, report and export in {time.perf_counter() - started:.2f} s")
    if tracking.active:
        try:
            attach_outputs(tracking.tracker, tracking.parent_id, outputs)
        except Exception as exc:  # the store went away: the files are in the folder, python -m analysis attaches
            tracking.lost(exc)
    if any(r.is_live for r in records):  # a launcher is still at work: it finishes the parent run itself
        url = tracking.runs_url
    else:
        summary = {**summary, "trials_ok": sum(r.state == "ok" for r in records), "trials_total": len(records)}
        if ranked:
            summary["best_tokens_per_s"] = ranked[0]["metrics"].get("tokens_per_s", 0.0)
        url = tracking.finish(best, summary, [p for p in (folder / "plan.csv", best_path, folder / "config.yaml")
                                              if p and p.exists()])
    if url:
        print(f"MLflow runs: {url}")
    return best


def finish_sweep(cfg: RootConfig, folder: Path, ledger: Ledger, tracking: TrackingLink, elapsed_s: float) -> int:
    tracking.sync_pending()
    best = conclude(cfg, folder, ledger, tracking, summary={"elapsed_s": elapsed_s})
    return 0 if best is not None else 1

@dataclass
class AnalysisOutputs:
    explanation: str
    recommendations: list
    plots: list = field(default_factory=list)
    report: Optional[Path] = None
    export: dict = field(default_factory=dict)   # name -> path


def _facts(cfg, folder: Path):
    from analysis.recommend import SweepFacts

    path = folder / "command.txt"
    command = path.read_text().strip() if path.is_file() else f"python -m launcher +sweep={cfg.sweep.name}"
    grid_first = {k: v[0] for k, v in asdict(cfg.grid).items()
                  if isinstance(v, list) and v and k not in ("zip", "include", "exclude")}
    return SweepFacts(cfg.cluster.gpu_mem_gb, cfg.cluster.gpus_per_node, command, tuple(cfg.grid.include),
                      grid_first)


def _estimate(cfg, layout: dict):
    """The estimator's view of one layout (None when the layout breaks a constraint)."""
    from launcher.layout import Layout
    from launcher.plan.estimator import estimate
    from launcher.plan.rules import check

    lay = Layout.from_dict(layout)
    if not check(cfg.model, cfg.cluster, lay).ok:
        return None
    return estimate(cfg.model, cfg.cluster, lay, precision=cfg.backend.precision,
                    flash_attention=cfg.backend.flash_attention, backend=cfg.backend.name)


def _recommendations(cfg, folder: Path, ranked: list, trials: list) -> list:
    from analysis.recommend import next_mbs_layout, recommend

    if not ranked:
        return []
    est = _estimate(cfg, ranked[0]["layout"])
    nxt = _estimate(cfg, next_mbs_layout(ranked[0]["layout"]))
    return recommend(ranked, trials, _facts(cfg, folder), time_breakdown_s=est.time_breakdown_s if est else None,
                     mem_breakdown_gb=est.mem_breakdown_gb if est else None,
                     next_predicted_peak_gb=nxt.peak_mem_gb if nxt else None)


def _full_length_spec(cfg, layout, train_iters: int, out: Path):
    """The winner's launch rendered for a long run: warmup 0 + measure N, which Megatron renders as
    --train-iters N --exit-interval N (megatron_common.run_args) and the embedded workload as
    --warmup-iters 0 --measure-iters N; everything else is the benchmarked configuration."""
    from launcher.run.trial_files import spec_for

    return spec_for(cfg, layout.to_dict(), out, replace(cfg.backend, warmup_iters=0, measure_iters=train_iters))


def _export(cfg, folder: Path, best: dict, train_iters: int) -> dict:
    """Write export/: the full-length launch.sh (+ side files), its one-line command, train.sbatch."""
    from analysis.export import (
        SbatchSpec,
        run_comments,
        sbatch_script,
        time_limit_s,
        write_export,
    )
    from launcher.backends import launch_command
    from launcher.layout import Layout

    out = folder.resolve() / "export"
    layout = Layout.from_dict(best["layout"])
    spec = _full_length_spec(cfg, layout, train_iters, out)
    ex = cfg.executor
    sbatch = sbatch_script(SbatchSpec(
        job_name=f"{cfg.sweep.name}-train-{best['config_hash'][:8]}", partition=cfg.cluster.partition,
        nodes=layout.nodes, gpus_per_node=layout.gpus_per_node, workdir=str(out),
        time_s=time_limit_s(best["metrics"].get("step_time_s"), train_iters, cfg.backend.startup_s),
        exclusive=ex.exclusive, account=ex.account, qos=ex.qos, constraint=ex.constraint,
        reservation=ex.reservation, cpus_per_task=ex.cpus_per_task, mem_gb=ex.mem_gb,
        exclude=tuple(ex.exclude_nodes), extra=dict(ex.sbatch_args), setup=tuple(ex.setup),
        srun_args=tuple(ex.srun_args),
        comments=run_comments(best, layout.short(), cfg.sweep.name, asdict(cfg.cluster), asdict(cfg.backend),
                              train_iters, str(out / "train.sbatch"))))
    benchmark = folder / "trials" / best["config_hash"] / "launch.sh"
    return write_export(out, launch_script=spec.script, files=spec.files, command=launch_command(spec),
                        sbatch_text=sbatch, benchmark_script=benchmark.read_text() if benchmark.is_file() else None)


def write_analysis(cfg, folder: Path, trials: Sequence[dict], *, train_iters: int = DEFAULT_TRAIN_ITERS,
                   runs_url: str = "", resolve: Optional[Callable[[str], Path]] = None) -> AnalysisOutputs:
    """Explanation, recommendations, plots/, export/ and report.html of a sweep; `trials` are ledger records as
    dicts (dataclasses.asdict)."""
    from analysis.explain import explain_winner
    from analysis.plots import write_plots
    from analysis.report import (
        ReportInput,
        failure_groups,
        read_tail,
        summary_rows,
        write_report,
    )
    from analysis.select import group_repeats, rank

    trials = list(trials)
    resolve = resolve or Path
    ranked = rank(group_repeats(trials), cfg.analysis.noise_tolerance)
    outputs = AnalysisOutputs(explain_winner(ranked, cfg.cluster.gpu_mem_gb, cfg.analysis.noise_tolerance),
                              _recommendations(cfg, folder, ranked, trials))
    outputs.plots = write_plots(trials, cfg.cluster.gpu_mem_gb, folder / "plots",
                                ranked[0]["config_hash"] if ranked else "")
    if ranked:
        from launcher.errors import ParasweepError

        try:
            outputs.export = _export(cfg, folder, ranked[0], train_iters)
        except ParasweepError as exc:  # e.g. a placeholder path: the rest of the analysis is still worth having
            print(f"warning: no export of the winner: {exc}", file=sys.stderr)
    summary = summary_rows(asdict(cfg.model), asdict(cfg.cluster), asdict(cfg.backend), cfg.executor.name, trials,
                           cfg.analysis.noise_tolerance)
    data = ReportInput(cfg.sweep.name, summary, ranked, trials,
                       outputs.plots, outputs.explanation, outputs.recommendations,
                       failure_groups(trials, lambda p: read_tail(resolve(p))),
                       {name: path.read_text() for name, path in outputs.export.items()},
                       {"MLflow runs": runs_url} if runs_url else {})
    outputs.report = write_report(folder / "report.html", data)
    return outputs


def attach_outputs(tracker, parent_id: str, outputs: AnalysisOutputs) -> None:
    """Plots under 'plots/' and the report (+ train.sbatch) under 'report/' of the parent MLflow run."""
    tracker.log_artifacts(parent_id, outputs.plots, "plots")
    tracker.log_artifacts(parent_id, [p for p in (outputs.report, outputs.export.get("train.sbatch")) if p],
                          "report")


def print_outputs(outputs: AnalysisOutputs, folder: Path) -> None:
    print(f"winner: {outputs.explanation}")
    for r in outputs.recommendations:
        print(f"  [{r.severity}] {r.message}" + (f"\n      {r.command}" if r.command else ""))
    export = f"; export: {', '.join(outputs.export)} in {folder / 'export'}" if outputs.export else ""
    print(f"wrote {len(outputs.plots)} plots in {folder / 'plots'}, {outputs.report}{export}")
