"""The end of a sweep, for the launcher and for `python -m analysis` alike: rank the trials (medians over
repeats), write best.json with the winner's exact command, print the results, explain the winner, recommend what
to try next, write plots/, export/ (the winner as a full-length training run) and report.html, attach them to the
parent MLflow run and finish it.

The last phase (docs/architecture.md): it reads the ledger (launcher.run.ledger), renders the winner's launch
(launcher.backends) and assembles this package's pure functions. Predictions come from the ledger, recorded at plan
time (numbers and breakdowns); the estimator is asked only about the one layout the plan never saw (the winner with
a doubled micro-batch, for the recommendation). Everything said goes through the caller's Reporter.
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

from analysis.report.explain import explain_winner, verdict
from analysis.report.export import SbatchSpec, gpus_to_request, run_comments, sbatch_script, time_limit_s, write_export
from analysis.report.html import ReportInput, failure_groups, read_tail, summary_rows, write_report
from analysis.report.plots import write_plots, write_search_plots
from analysis.report.recommend import SweepFacts, next_mbs_layout, recommend
from analysis.report.search_summary import progress_points, summary_metrics
from analysis.report.tracking_link import TrackingLink
from launcher.backends import LaunchSpec, get_backend, launch_command
from launcher.computebench.result import ComputeResult
from launcher.config.schema import RootConfig
from launcher.core import strict_json
from launcher.core.console import Reporter
from launcher.core.errors import ParasweepError
from launcher.core.layout import DIMENSIONS, Layout, label_of
from launcher.core.ranking import Decision, decide, group_repeats, rank
from launcher.core.record import TrialRecord
from launcher.core.states import TrialState
from launcher.core.strict_json import finite
from launcher.netbench import ProbeResult
from launcher.plan.constants import Constants, constants_for
from launcher.plan.estimator import estimate
from launcher.plan.inputs import workload_for
from launcher.plan.rules import check
from launcher.run import compute, network
from launcher.run.folder import SweepFolder
from launcher.run.ledger import Ledger
from launcher.run.prior import prior_from
from launcher.run.search import Search
from launcher.run.trial_files import spec_for

TOP_PRINTED = 30
DEFAULT_TRAIN_ITERS = 100_000


@dataclass
class Conclusion:
    """What the end of a sweep produced."""

    ranked: list
    """ok trials as plain dicts, best first (medians over repeats)."""
    best: Optional[TrialRecord]
    explanation: str = ""
    recommendations: list = field(default_factory=list)
    plots: list = field(default_factory=list)
    report: Optional[Path] = None
    export: dict = field(default_factory=dict)
    """file name -> path in export/, in the order a reader needs them."""
    runs_url: Optional[str] = None
    calibration: Optional[dict] = None
    """The sweep's calibration (Calibration.to_json()), None when nothing was measured."""
    network: Optional[dict] = None
    """The network probe the estimator used (launcher.netbench JSON), None without one."""
    compute: Optional[dict] = None
    """The compute probe the estimator used (launcher.computebench JSON) with its fitted profile under 'profile',
    None without one."""
    decision: Optional[Decision] = None
    """How sure the winner is: confirmed beyond the noise, or tied within it (None: no ok trial)."""
    verdict: str = ""
    """The decision in one sentence (analysis.report.explain.verdict), for the MLflow descriptions."""


def conclude(cfg: RootConfig, folder: SweepFolder, ledger: Ledger, tracking: TrackingLink, *, summary: dict,
             train_iters: int = DEFAULT_TRAIN_ITERS, resolve: Optional[Callable[[str], Path]] = None,
             reporter: Optional[Reporter] = None) -> Conclusion:
    """Rank, write best.json, say the results, write the outputs, attach them and, once no trial is live, finish
    the parent run. Idempotent: run it as often as wanted. `reporter`: where it speaks (a plain one on this
    process's streams when not given)."""
    say = reporter or Reporter.for_streams()
    records = ledger.trials()
    trials = [asdict(r) for r in records]
    ranked = rank(group_repeats(trials), cfg.analysis.noise_tolerance, cfg.plan.objective)
    best = ledger.get(ranked[0]["config_hash"]) if ranked else None
    done = Conclusion(ranked, best, decision=decide(ranked, cfg.analysis.noise_tolerance, cfg.plan.objective))
    done.verdict = verdict(done.decision, cfg.analysis.noise_tolerance)
    benchmark = _benchmark_launch(cfg, folder, best, say)
    _write_best(cfg, folder, best, ranked[0] if ranked else None, benchmark, say, done.decision)
    print_results(cfg, ranked, records, folder, say)
    started = time.perf_counter()
    _explain_and_recommend(cfg, folder, done, trials)
    _write_outputs(cfg, folder, ledger, done, trials, train_iters, resolve or Path, say)
    print_outputs(done, folder, say)
    say.info(f"plots, report and export in {time.perf_counter() - started:.2f} s")
    done.runs_url = _record_in_mlflow(cfg, folder, tracking, done, records, summary)
    if done.runs_url:
        say.info(tracking.link_text(done.runs_url))
    return done


def finish_sweep(cfg: RootConfig, folder: SweepFolder, ledger: Ledger, tracking: TrackingLink,
                 elapsed_s: float, reporter: Optional[Reporter] = None) -> int:
    """The launcher's last step (launcher.run.hooks.SweepHooks.finish): sync what MLflow lacks, conclude; exit
    status 1 when no trial finished ok."""
    tracking.sync_pending()
    done = conclude(cfg, folder, ledger, tracking, summary={"elapsed_s": elapsed_s}, reporter=reporter)
    return 0 if done.best is not None else 1


# -- best.json and the printed results ------------------------------------------------------------------------------
def _benchmark_launch(cfg: RootConfig, folder: SweepFolder, best: Optional[TrialRecord],
                      say: Reporter) -> Optional[LaunchSpec]:
    if best is None:
        return None
    try:
        return spec_for(cfg, best.layout, folder.trial(best.config_hash))
    except ParasweepError as exc:  # e.g. the config was edited since: the rest of the analysis is still worth having
        say.warn(f"cannot render the winner's launch: {exc}")
        return None


def best_payload(cfg: RootConfig, folder: SweepFolder, best: TrialRecord, ranked_entry: Optional[dict],
                 benchmark: Optional[LaunchSpec], decision: Optional[Decision] = None) -> dict:
    """The winner: its configuration, what was measured (the median over repeats when it was repeated, with
    `tokens_per_s_spread`), how sure it is (`decision`: confirmed beyond the noise or tied within it), what was
    predicted, and the exact command that runs it."""
    entry = ranked_entry or {}
    return finite({"sweep": cfg.sweep.name, "config_hash": best.config_hash, "model": cfg.model.name,
                   "cluster": cfg.cluster.name, "backend": cfg.backend.name, "layout": best.layout.to_dict(),
                   "measured": entry.get("metrics", best.metrics), "n_runs": entry.get("n_runs", 1),
                   "decision": _decision_json(decision), "predicted": best.predicted,
                   "command": launch_command(benchmark) if benchmark else "",
                   "launch_script": str(folder.trial_launch(best.config_hash)), "mlflow_run_id": best.mlflow_run_id})


def _decision_json(decision: Optional[Decision]) -> dict:
    if decision is None:
        return {}
    return {"confirmed": decision.confirmed, "margin": decision.margin, "noise_band": decision.band,
            "tied_with": list(decision.tied), "n_runs": decision.n_runs, "noise_sd": decision.noise_sd,
            "noise_df": decision.noise_df, "confidence": decision.confidence}


def _write_best(cfg: RootConfig, folder: SweepFolder, best: Optional[TrialRecord], ranked_entry: Optional[dict],
                benchmark: Optional[LaunchSpec], say: Reporter, decision: Optional[Decision] = None) -> None:
    if best is None:
        folder.best.unlink(missing_ok=True)
        say.info("no trial finished ok: nothing to select (see the failures above)")
        return
    payload = best_payload(cfg, folder, best, ranked_entry, benchmark, decision)
    folder.write_atomic(folder.best, strict_json.dumps(payload, indent=2, sort_keys=True) + "\n")
    measured = payload["measured"]
    runs = (f" (median of {payload['n_runs']}, spread {measured.get('tokens_per_s_spread') or 0:.0%})"
            if payload["n_runs"] > 1 else "")
    sure = "" if decision is None or decision.margin is None else (
        "; confirmed beyond the noise" if decision.confirmed else "; tied within noise (see below)")
    say.info(f"best: {best.config_hash} {best.layout.label()} — {measured.get('tokens_per_s') or 0:,.0f} "
             f"tokens/s{runs}{sure}; command in {folder.best}")


def print_results(cfg: RootConfig, ranked: list[dict], records: list[TrialRecord], folder: SweepFolder,
                  console: Reporter) -> None:
    """The ranked table (top TOP_PRINTED rows: a 1,000-trial table takes seconds to lay out and nobody reads it),
    then what did not finish ok."""
    from rich.table import Table

    table = Table(title=f"sweep {cfg.sweep.name}: ok trials, best first")
    repeated = any(t.get("n_runs", 1) > 1 for t in ranked)
    for col in ("#", "trial", "layout", "tokens/s", "TFLOPs/GPU", "MFU", "peak GB", "headroom", "pred tok/s"):
        table.add_column(col, justify="left" if col in ("trial", "layout") else "right")
    for i, t in enumerate(ranked[:TOP_PRINTED], 1):
        m, p = t["metrics"], t["predicted"]
        tokens = f"{m.get('tokens_per_s', 0):,.0f}"
        if repeated and t.get("n_runs", 1) > 1:  # median of n runs, with the spread (max - min) / median
            tokens += f" spread {m.get('tokens_per_s_spread', 0):.0%} (n={t['n_runs']})"
        table.add_row(str(i), t["config_hash"][:8], label_of(t["layout"]), tokens,
                      f"{m.get('tflops_per_gpu') or 0:.3g}", f"{m.get('mfu') or 0:.1%}",
                      f"{m.get('peak_mem_gb') or 0:.2f}", f"{m.get('headroom') or 0:.0%}",
                      f"{p.get('tokens_per_s', 0):,.0f}")
    console.say(table)
    if len(ranked) > TOP_PRINTED:
        console.say(f"... and {len(ranked) - TOP_PRINTED} more ok trials: all of them in {folder.report}")
    failed = [r for r in records if r.state not in (TrialState.OK, TrialState.PRUNED, TrialState.STOPPED_EARLY)]
    stopped = [r for r in records if r.state is TrialState.STOPPED_EARLY]
    if stopped:
        console.say("stopped early (known worse than the best): " + ", ".join(
            f"{r.config_hash[:8]} {r.metrics.get('tokens_per_s') or 0:,.0f} tokens/s" for r in stopped))
    if failed:
        console.say("not ok: " + ", ".join(f"{r.config_hash[:8]} {r.state}"
                                             f"{'/' + r.failure_kind if r.failure_kind else ''}" for r in failed))
    counts = Counter(str(r.state) for r in records)
    console.say("trials by state: " + ", ".join(f"{k}={v}" for k, v in sorted(counts.items())))


# -- explanation, recommendations, plots, export, report -----------------------------------------------------------
def _explain_and_recommend(cfg: RootConfig, folder: SweepFolder, done: Conclusion, trials: list[dict]) -> None:
    done.explanation = explain_winner(done.ranked, cfg.cluster.gpu_mem_gb, cfg.analysis.noise_tolerance,
                                      cfg.plan.objective)
    if not done.ranked:
        return
    predicted = done.ranked[0].get("predicted", {})
    nxt = _predicted_peak_gb(cfg, next_mbs_layout(done.ranked[0]["layout"]))
    done.recommendations = recommend(done.ranked, trials, _facts(cfg, folder),
                                     time_breakdown_s=predicted.get("time_breakdown_s"),
                                     mem_breakdown_gb=predicted.get("mem_breakdown_gb"), next_predicted_peak_gb=nxt)


def _facts(cfg: RootConfig, folder: SweepFolder) -> SweepFacts:
    command = folder.read_command(f"python -m launcher +sweep={cfg.sweep.name}")
    grid_first = {d.name: getattr(cfg.grid, d.name)[0] for d in DIMENSIONS
                  if isinstance(getattr(cfg.grid, d.name, None), list) and getattr(cfg.grid, d.name)}
    implied = tuple(d.name for d in DIMENSIONS if d.name != "gpus" and (d.kind == "world" or d.dim.grid is None))
    return SweepFacts(cfg.cluster.gpu_mem_gb, cfg.cluster.gpus_per_node, command, tuple(cfg.grid.include),
                      grid_first, implied)


def _predicted_peak_gb(cfg: RootConfig, layout: dict) -> Optional[float]:
    """The estimator's peak for a layout the plan never saw (None when the rules refuse it)."""
    lay = Layout.from_dict(layout)
    if not check(cfg.model, cfg.cluster, lay, backend=cfg.backend.name).ok:
        return None
    return estimate(cfg.model, cfg.cluster, lay, precision=cfg.backend.precision,
                    flash_attention=cfg.backend.flash_attention, backend=cfg.backend.name,
                    workload=workload_for(cfg.backend, lay)).peak_mem_gb


def _write_outputs(cfg: RootConfig, folder: SweepFolder, ledger: Ledger, done: Conclusion, trials: list[dict],
                   train_iters: int, resolve: Callable[[str], Path], say: Reporter) -> None:
    done.plots = write_plots(trials, cfg.cluster.gpu_mem_gb, folder.plots,
                             done.ranked[0]["config_hash"] if done.ranked else "")
    measured_cfg, constants, probe = estimator_inputs(cfg, folder)
    done.network = probe.to_json() if probe is not None else None
    done.compute = compute_used(cfg, folder)
    done.calibration = sweep_calibration(measured_cfg, folder, ledger, constants)
    done.plots += _search_plots(cfg, folder, trials, done.calibration, done.network)
    if done.ranked:
        try:
            done.export = _export(cfg, folder, done.ranked[0], train_iters)
        except ParasweepError as exc:  # e.g. a placeholder path: the rest of the analysis is still worth having
            say.warn(f"no export of the winner: {exc}")
    runs_url = ledger.get_meta("mlflow_runs_url", "") or ""
    summary = summary_rows(asdict(cfg.model), asdict(cfg.cluster), asdict(cfg.backend), cfg.executor.name, trials,
                           cfg.analysis.noise_tolerance, cfg.plan.max_gpu_hours)
    data = ReportInput(cfg.sweep.name, summary, done.ranked, trials, done.plots, done.explanation,
                       done.recommendations, failure_groups(trials, lambda p: read_tail(resolve(p))),
                       {name: path.read_text() for name, path in done.export.items()},
                       {"MLflow runs": runs_url} if runs_url else {}, done.calibration,
                       _network_line(cfg, done.network), _compute_line(done.compute))
    done.report = write_report(folder.report, data)


def estimator_inputs(cfg: RootConfig, folder: SweepFolder) -> tuple[RootConfig, Constants, Optional[ProbeResult]]:
    """(config, constants, probe) the sweep's estimator used: with plan.network_probe, the probe saved in the
    folder applied to the preset's bandwidths (launcher.run.network), as the loop did."""
    probe = network.folder_probe(folder, cfg.cluster.name) if network.probe_enabled(cfg) else None
    measured, constants = network.with_network(cfg, probe)
    constants, _ = compute.with_compute(cfg, constants, _compute_probe(cfg, folder))
    return measured, constants, probe


def _compute_probe(cfg: RootConfig, folder: SweepFolder) -> Optional[ComputeResult]:
    return compute.folder_probe(folder, cfg) if compute.probe_used(cfg) else None


def compute_used(cfg: RootConfig, folder: SweepFolder) -> Optional[dict]:
    """The compute probe the sweep's estimator used (plan.compute_probe, the file in the folder) as its JSON, with
    the efficiency curve fitted to it and the a-priori efficiency at its shapes under 'profile' and the report's
    sentence under 'line'; None without one."""
    probe = _compute_probe(cfg, folder)
    _, profile = compute.with_compute(cfg, network.with_network(cfg, None)[1], probe)
    if probe is None or profile is None:
        return None
    return {**probe.to_json(), "profile": profile.to_json(), "line": compute.describe(cfg, profile)}


def _compute_line(done_compute: Optional[dict]) -> str:
    return str(done_compute["line"]) if done_compute else ""


def sweep_calibration(cfg: RootConfig, folder: SweepFolder, ledger: Ledger,
                      constants: Optional[Constants] = None) -> Optional[dict]:
    """The calibration of the sweep's measured trials, recomputed from the ledger (a pure function of them, as
    the loop computes it) and written to calibration.json; None when no trial was measured."""
    search = Search(cfg, prior_from(cfg, constants or constants_for(cfg.backend.name)))
    records = ledger.trials()
    if not search.observations(records):
        return None
    search.refit(records)
    data = search.calibration_json()
    folder.write_atomic(folder.calibration, strict_json.dumps(data, indent=2, sort_keys=True))
    return data


def _search_plots(cfg: RootConfig, folder: SweepFolder, trials: list[dict], calibration: Optional[dict],
                  network: Optional[dict]) -> list[Path]:
    points = progress_points(trials)
    fitted = ({name: (value, calibration["parameter_sd"].get(name, 0.0))
               for name, value in calibration["parameters"].items()} if calibration else None)
    measured = any(speed for _, speed in points)  # nothing ok: no curve to draw
    datasheet = {"intra_node": cfg.cluster.intra_node_gbytes_per_s, "inter_node": cfg.cluster.inter_node_gbytes_per_s}
    return write_search_plots(folder.plots, {"this sweep": points} if measured else None,
                              calibration=fitted, supported=(calibration or {}).get("supported", ()),
                              network=network["measurements"] if network else None, datasheet_gbytes_per_s=datasheet)


def _network_line(cfg: RootConfig, network: Optional[dict]) -> str:
    if not network:
        return ""
    p = network["summary"]

    def gb(key: str) -> str:
        value = p.get(f"{key}_gbytes_per_s")
        sheet = getattr(cfg.cluster, f"{key}_gbytes_per_s")
        return f"not measured (datasheet {sheet:g})" if value is None else f"{value:.3g} (datasheet {sheet:g})"

    latency = f", latency {p['latency_s'] * 1e6:.0f} us" if p.get("latency_s") else ""
    return (f"{p.get('source', 'netbench')}: all-reduce bus bandwidth GB/s per GPU intra-node {gb('intra_node')}, "
            f"inter-node {gb('inter_node')}{latency}; the estimator used the measured figures")


def _export(cfg: RootConfig, folder: SweepFolder, best: dict, train_iters: int) -> dict[str, Path]:
    """export/: the winner's full-length launch.sh (+ side files), its one-line command and train.sbatch."""
    out = folder.export.resolve()
    layout = Layout.from_dict(best["layout"])
    backend = get_backend(cfg.backend.name)
    spec = spec_for(cfg, layout, out, backend.full_length(cfg.backend, train_iters))
    ex = cfg.executor
    sbatch = sbatch_script(SbatchSpec(
        job_name=f"{cfg.sweep.name}-train-{best['config_hash'][:8]}", partition=cfg.cluster.partition,
        nodes=layout.nodes, gpus_per_node=gpus_to_request(asdict(cfg.cluster), layout.gpus_per_node),
        workdir=str(out),
        time_s=time_limit_s(best["metrics"].get("step_time_s"), train_iters, cfg.backend.startup_s),
        exclusive=ex.exclusive, account=ex.account, qos=ex.qos, constraint=ex.constraint,
        reservation=ex.reservation, cpus_per_task=ex.cpus_per_task, mem_gb=ex.mem_gb,
        exclude=tuple(ex.exclude_nodes), extra=dict(ex.sbatch_args), setup=tuple(ex.setup),
        srun_args=tuple(ex.srun_args),
        comments=run_comments(best, layout.label(), cfg.sweep.name, asdict(cfg.cluster), asdict(cfg.backend),
                              train_iters, str(out / "train.sbatch"),
                              backend.full_length_note(cfg.backend, train_iters))))
    benchmark = folder.trial_launch(best["config_hash"])
    return write_export(out, launch_script=spec.script, files=spec.files, command=launch_command(spec),
                        sbatch_text=sbatch, benchmark_script=benchmark.read_text() if benchmark.is_file() else None)


def print_outputs(done: Conclusion, folder: SweepFolder, say: Reporter) -> None:
    say.info(f"winner: {done.explanation}")
    for r in done.recommendations:
        say.info(f"  [{r.severity}] {r.message}" + (f"\n      {r.command}" if r.command else ""))
    export = f"; export: {', '.join(done.export)} in {folder.export}" if done.export else ""
    say.info(f"wrote {len(done.plots)} plots in {folder.plots}, {done.report}{export}")


# -- MLflow ------------------------------------------------------------------------------------------------------
def _record_in_mlflow(cfg: RootConfig, folder: SweepFolder, tracking: TrackingLink, done: Conclusion,
                      records: list[TrialRecord], summary: dict) -> Optional[str]:
    """Plots under 'plots/', the report (+ train.sbatch) under 'report/' of the parent run; the parent is finished
    only when no trial is live (a launcher still at work finishes it itself)."""
    tracking.attach_outputs(done.plots, [p for p in (done.report, done.export.get("train.sbatch")) if p])
    if any(r.is_live for r in records):
        return tracking.runs_url

    summary = {**summary, "trials_ok": sum(r.state is TrialState.OK for r in records), "trials_total": len(records),
               **summary_metrics([asdict(r) for r in records], done.calibration)}
    if cfg.plan.max_gpu_hours:
        summary["gpu_hours_budget"] = cfg.plan.max_gpu_hours
    if done.ranked:
        winner = done.ranked[0]
        summary["best_tokens_per_s"] = winner["metrics"].get("tokens_per_s", 0.0)
        summary["best_tokens_per_s_spread_pct"] = 100 * (winner["metrics"].get("tokens_per_s_spread") or 0.0)
        summary["best_n_runs"] = winner.get("n_runs", 1)
    if done.decision is not None and done.decision.margin is not None:
        summary["winner_margin_pct"] = 100 * done.decision.margin
        summary["winner_confirmed"] = int(done.decision.confirmed)
    if done.network:
        summary.update({f"network_{k}": v for k, v in done.network["summary"].items()
                        if k.endswith("_gbytes_per_s") or k == "latency_s"})
    if done.compute:
        summary.update({f"compute_{k}": v for k, v in done.compute["profile"].items()
                        if isinstance(v, (int, float)) and v is not None})
        summary["compute_gemm_tflops_median"] = statistics.median(g["tflops"] for g in done.compute["gemms"])
    probes = sorted([*folder.root.glob("netbench-*.json"), *folder.root.glob("computebench-*.json")])
    return tracking.finish(done.best, summary, [p for p in (folder.plan_csv, folder.best, folder.config,
                                                            folder.calibration, *probes) if p.exists()],
                           done.ranked, done.verdict)
