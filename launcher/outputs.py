"""A finished (or running) sweep's outputs for people: the winner explained, recommendations, plots/,
export/ (full-length launch + sbatch) and report.html; attached to the parent MLflow run.

Launcher side because it renders launches (launcher.backends) and re-estimates layouts; the pieces it assembles
are analysis's pure functions. Called at the end of every sweep (launcher.finish) and by `python -m analysis`.
"""

from __future__ import annotations

import sys
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable, Optional, Sequence

DEFAULT_TRAIN_ITERS = 100_000


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
    from launcher.constraints import check
    from launcher.estimate import estimate
    from launcher.layout import Layout

    lay = Layout.from_dict(layout)
    if not check(cfg.model, cfg.cluster, lay).ok:
        return None
    return estimate(cfg.model, cfg.cluster, lay, precision=cfg.backend.precision)


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
    from launcher.trial_files import spec_for

    return spec_for(cfg, layout.to_dict(), out, replace(cfg.backend, warmup_iters=0, measure_iters=train_iters))


def _export(cfg, folder: Path, best: dict, train_iters: int) -> dict:
    """Write export/: the full-length launch.sh (+ side files), its one-line command, train.sbatch."""
    from launcher.backends import launch_command
    from launcher.layout import Layout

    from analysis.export import SbatchSpec, run_comments, sbatch_script, time_limit_s, write_export

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
    dicts (dataclasses.asdict). Also the end-of-sweep call of launcher/finish.py."""
    from analysis.explain import explain_winner
    from analysis.plots import write_plots
    from analysis.report import ReportInput, failure_groups, read_tail, summary_rows, write_report
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
