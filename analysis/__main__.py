"""`python -m analysis sweeps/<name>`: re-judge finished trials from their logs, rank, explain, recommend, write
plots + report.html + export/, re-sync MLflow and attach the plots and the report to the sweep's parent run.

The top floor of the project: the only analysis module that reads a sweep folder through the launcher's ledger.
Safe to run while the sweep runs (live trials are left to the launcher) and as often as wanted (idempotent).
Runs from any directory: log paths and a relative sqlite URI are resolved against the launcher's working
directory (the folder above sweep.root_dir).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Callable, Optional, Sequence

DEFAULT_TRAIN_ITERS = 100_000
TOP_PRINTED = 30  # rows of the terminal table; a 1,000-trial table takes seconds to lay out and nobody reads it


def _load_config(folder: Path):
    from omegaconf import OmegaConf

    from launcher.errors import ConfigError
    from launcher.schema import RootConfig

    path = folder / "config.yaml"
    if not path.is_file():
        raise ConfigError("sweep folder", str(folder), "give a folder made by `python -m launcher` (it holds "
                          "config.yaml and ledger.sqlite), e.g. sweeps/tiny")
    merged = OmegaConf.merge(OmegaConf.structured(RootConfig), OmegaConf.load(path))
    return OmegaConf.to_object(merged)


def workdir_of(cfg, folder: Path) -> Path:
    """Where the launcher ran: the folder above sweep.root_dir (the cwd when the folder is elsewhere)."""
    root = Path(cfg.sweep.root_dir)
    parent = folder.resolve().parent
    if not root.is_absolute() and parent.parts[-len(root.parts):] == root.parts:
        return parent.parents[len(root.parts) - 1]
    return Path.cwd()


def log_resolver(cfg, folder: Path, workdir: Path) -> Callable[[str], Path]:
    """Ledger log paths are relative to the launcher's cwd ('sweeps/tiny/jobs/...'); a folder renamed by
    sweep.fresh keeps its logs, so the sweep's own prefix is rebased onto the folder actually given."""
    prefix = Path(cfg.sweep.root_dir) / cfg.sweep.name

    def resolve(text: str) -> Path:
        path = Path(text)
        if path.is_absolute():
            return path
        if path.parts[:len(prefix.parts)] == prefix.parts:
            return folder.resolve() / Path(*path.parts[len(prefix.parts):])
        return workdir / path

    return resolve


def rejudge(cfg, ledger, resolve: Callable[[str], Path] = Path) -> int:
    """Re-parse every trial whose job ended by itself; returns how many records changed."""
    from launcher.judge import judge

    changed = 0
    for r in ledger.trials():
        if not r.job_state or r.state in ("planned", "submitted", "running", "pruned") or r.failure_kind == "hang":
            continue  # live, never run, or judged by the monitor (a hang is not visible in the log alone)
        changes = judge(cfg, r, [resolve(p) for p in r.log_paths], job_state=r.job_state, exit_code=r.exit_code,
                        job_error=r.job_error)
        changes["log_paths"] = r.log_paths  # stored as the launcher wrote them, not as resolved here
        current = {k: getattr(r, k) for k in changes}
        if changes != current:
            ledger.update(r.config_hash, "re-judged by python -m analysis", synced=False, **changes)
            changed += 1
    return changed


# ------------------------------------------------------------------------------------------------ outputs

@dataclass
class AnalysisOutputs:
    explanation: str
    recommendations: list
    plots: list = field(default_factory=list)
    report: Optional[Path] = None
    export: dict = field(default_factory=dict)   # name -> path


def _facts(cfg, folder: Path):
    from analysis.recommend import SweepFacts

    command_file = folder / "command.txt"
    command = command_file.read_text().strip() if command_file.is_file() else f"python -m launcher +sweep={cfg.sweep.name}"
    grid_first = {k: v[0] for k, v in asdict(cfg.grid).items() if isinstance(v, list) and v and k not in ("zip", "include", "exclude")}
    return SweepFacts(cfg.cluster.gpu_mem_gb, cfg.cluster.gpus_per_node, command, tuple(cfg.grid.include), grid_first)


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


def _export(cfg, folder: Path, best: dict, train_iters: int) -> dict:
    """Render the winner for a full-length run and write export/ (launch.sh, side files, train.sbatch)."""
    from launcher.backends import launch_command, render_launch
    from launcher.backends.launch import env_exports
    from launcher.layout import Layout
    from launcher.trial_files import mem_limit_mb

    from analysis.export import SbatchSpec, sbatch_script, time_limit_s, write_export

    out = folder.resolve() / "export"
    # warmup 0 + measure N: Megatron renders --train-iters N --exit-interval N (megatron_common.run_args), the
    # embedded workload --warmup-iters 0 --measure-iters N; everything else is the benchmarked configuration.
    backend = replace(cfg.backend, warmup_iters=0, measure_iters=train_iters)
    if cfg.executor.name == "local" and backend.python == "python":
        backend = replace(backend, python=sys.executable)  # as trial_files.spec_for: local jobs use this Python
    lay = Layout.from_dict(best["layout"])
    spec = render_launch(cfg.model, cfg.cluster, backend, lay, trial_dir=str(out), mem_limit_mb=mem_limit_mb(cfg))
    env = {**cfg.executor.env, **spec.env}
    script = spec.script if not env else spec.script.replace("set -euo pipefail\n",
                                                              "set -euo pipefail\n" + env_exports(env), 1)
    step_s = best["metrics"].get("step_time_s")
    limit_s = time_limit_s(step_s, train_iters, cfg.backend.startup_s)
    b, m = cfg.backend, best["metrics"]
    changed = (f"--train-iters {train_iters} --exit-interval {train_iters} (benchmark: {b.warmup_iters}+"
               f"{b.measure_iters}); kept from the benchmark: no evaluation, constant --lr, no --save/--load: add "
               f"checkpointing, an LR schedule and evaluation before a production run"
               if b.name != "torch" else f"--warmup-iters 0 --measure-iters {train_iters} (benchmark: "
               f"{b.warmup_iters}+{b.measure_iters}) of the embedded workload")
    comments = [f"parasweep: full-length training run of the winner of sweep {cfg.sweep.name}: trial "
                f"{best['config_hash']}, {lay.short()}, {lay.gpus} x {cfg.cluster.gpu} on cluster {cfg.cluster.name}.",
                f"Benchmark measured {m.get('tokens_per_s', 0):,.0f} tokens/s, {step_s or 0:.3g} s/step, peak "
                f"{m.get('peak_mem_gb') or 0:.3g} of {cfg.cluster.gpu_mem_gb:g} GB per GPU.",
                f"Changed from the benchmark trial: {changed}.",
                f"--time: start-up {b.startup_s:g} s + {train_iters} iterations x {step_s or 0:.3g} s x 1.2 margin "
                f"(at least 10 min).", f"Submit with: sbatch {out / 'train.sbatch'}"]
    ex = cfg.executor
    sbatch = sbatch_script(SbatchSpec(
        job_name=f"{cfg.sweep.name}-train-{best['config_hash'][:8]}", partition=cfg.cluster.partition,
        nodes=lay.nodes, gpus_per_node=lay.gpus_per_node, time_s=limit_s, workdir=str(out), exclusive=ex.exclusive,
        account=ex.account, qos=ex.qos, constraint=ex.constraint, reservation=ex.reservation,
        cpus_per_task=ex.cpus_per_task, mem_gb=ex.mem_gb, exclude=tuple(ex.exclude_nodes), extra=dict(ex.sbatch_args),
        setup=tuple(ex.setup), srun_args=tuple(ex.srun_args), comments=comments))
    benchmark = folder / "trials" / best["config_hash"] / "launch.sh"
    return write_export(out, launch_script=script, files=spec.files, command=launch_command(replace(spec, env=env)),
                        sbatch_text=sbatch, benchmark_script=benchmark.read_text() if benchmark.is_file() else None)


def _summary(cfg, trials: list, noise_tolerance: float) -> dict:
    from collections import Counter

    m, c, b = cfg.model, cfg.cluster, cfg.backend
    counts = Counter(t["state"] for t in trials)
    spans = [(t["submitted_at"], t["finished_at"]) for t in trials if t["submitted_at"] and t["finished_at"]]
    wall_s = max(f for _, f in spans) - min(s for s, _ in spans) if spans else 0.0
    return {"model": f"{m.name}: {m.layers} layers, hidden {m.hidden}, {m.heads} heads, seq {m.seq_len}",
            "cluster": f"{c.name}: {c.gpu}, {c.gpu_mem_gb:g} GB, {c.gpus_per_node} GPUs/node, {c.nodes} node(s), "
                       f"partition {c.partition}",
            "backend": f"{b.name} ({b.precision}, {b.warmup_iters} warm-up + {b.measure_iters} measured iterations)",
            "executor": cfg.executor.name,
            "trials": f"{len(trials)}: " + ", ".join(f"{k} {v}" for k, v in sorted(counts.items())),
            "elapsed": f"{wall_s:,.0f} s from the first submission to the last finish; "
                       f"{sum(f - s for s, f in spans):,.0f} s of trial time",
            "ranking": f"measured tokens/s; ties within {noise_tolerance:.0%} go to memory headroom",
            "generated": time.strftime("%Y-%m-%d %H:%M:%S")}


def write_analysis(cfg, folder: Path, trials: Sequence[dict], *, train_iters: int = DEFAULT_TRAIN_ITERS,
                   runs_url: str = "", resolve: Optional[Callable[[str], Path]] = None) -> AnalysisOutputs:
    """Explanation, recommendations, plots/, export/ and report.html of a sweep; `trials` are ledger records as
    dicts (dataclasses.asdict). Also the end-of-sweep call of launcher/finish.py."""
    from analysis.explain import explain_winner
    from analysis.plots import write_plots
    from analysis.report import ReportInput, failure_groups, read_tail, write_report
    from analysis.select import rank

    trials = list(trials)
    resolve = resolve or Path
    ranked = rank(trials, cfg.analysis.noise_tolerance)
    outputs = AnalysisOutputs(explain_winner(ranked, cfg.cluster.gpu_mem_gb, cfg.analysis.noise_tolerance),
                              _recommendations(cfg, folder, ranked, trials))
    outputs.plots = write_plots(trials, cfg.cluster.gpu_mem_gb, folder / "plots",
                                ranked[0]["config_hash"] if ranked else "")
    if ranked:
        outputs.export = _export(cfg, folder, ranked[0], train_iters)
    data = ReportInput(cfg.sweep.name, _summary(cfg, trials, cfg.analysis.noise_tolerance), ranked, trials,
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


# ------------------------------------------------------------------------------------------------ command line

def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m analysis", description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="a sweep folder, e.g. sweeps/tiny")
    parser.add_argument("--no-mlflow", action="store_true", help="skip the MLflow sync")
    parser.add_argument("--train-iters", type=int, default=DEFAULT_TRAIN_ITERS,
                        help=f"iterations of the exported full-length run (default {DEFAULT_TRAIN_ITERS:,})")
    args = parser.parse_args(argv)

    from launcher.errors import ConfigError, ParasweepError

    try:
        if args.train_iters < 1:
            raise ConfigError("--train-iters", args.train_iters, "use a positive number of iterations")
        return _run(args)
    except ParasweepError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code


@contextlib.contextmanager
def _in_dir(path: Path):
    """Relative paths of the sweep (sqlite URI, MLflow artifact paths) mean what they meant to the launcher."""
    before = Path.cwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(before)


def _run(args) -> int:
    from launcher.finish import print_results, write_best
    from launcher.ledger import Ledger

    folder = args.folder.resolve()
    cfg = _load_config(folder)
    workdir = workdir_of(cfg, folder)
    resolve = log_resolver(cfg, folder, workdir)
    with _in_dir(workdir), Ledger(folder / "ledger.sqlite") as ledger:
        t0 = time.perf_counter()
        changed = rejudge(cfg, ledger, resolve)
        parse_s = time.perf_counter() - t0
        records = ledger.trials()
        trials = [asdict(r) for r in records]
        from analysis.select import rank

        ranked = rank(trials, cfg.analysis.noise_tolerance)
        write_best(cfg, folder, ledger.get(ranked[0]["config_hash"]) if ranked else None)
        print_results(cfg, ranked[:TOP_PRINTED], records)
        if len(ranked) > TOP_PRINTED:
            print(f"... and {len(ranked) - TOP_PRINTED} more ok trials: all of them in {folder / 'report.html'}")
        print(f"re-parsed {sum(1 for r in records if r.job_state)} trial logs in {parse_s:.2f} s ({changed} changed)")
        t1 = time.perf_counter()
        outputs = write_analysis(cfg, folder, trials, train_iters=args.train_iters, resolve=resolve,
                                 runs_url=ledger.get_meta("mlflow_runs_url", "") or "")
        print_outputs(outputs, folder)
        print(f"plots, report and export in {time.perf_counter() - t1:.2f} s")
        if not args.no_mlflow and cfg.tracking.enabled:
            _sync(cfg, folder, ledger, ranked, outputs)
    return 0


def _sync(cfg, folder: Path, ledger, ranked: list, outputs: AnalysisOutputs) -> None:
    from launcher.tracking_link import TrackingLink

    t0 = time.perf_counter()
    tracking = TrackingLink.open(cfg, ledger, folder)
    for r in ledger.trials():
        tracking.sync(r)
    best = ledger.get(ranked[0]["config_hash"]) if ranked else None
    if tracking.active:
        try:
            attach_outputs(tracking.tracker, tracking.parent_id, outputs)
        except Exception as exc:  # the store went away: the files are in the folder, the next run attaches them
            from analysis.tracking import warn

            warn(f"attaching plots/report to MLflow failed ({type(exc).__name__}: {str(exc)[:160]})")
    url = tracking.finish(best, {"trials_ok": len(ranked), "trials_total": len(ledger.trials())},
                          [p for p in (folder / "plan.csv", folder / "best.json", folder / "config.yaml") if p.exists()])
    print(f"MLflow sync: {time.perf_counter() - t0:.2f} s" + (f"; runs: {url}" if url else " (unavailable)"))


if __name__ == "__main__":
    sys.exit(main())
