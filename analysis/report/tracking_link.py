"""The ledger's link to MLflow: the sweep goes on (and warns once) when the tracking store is unreachable.

The ledger is the source of truth; MLflow is a view of it. A trial is marked `synced` only after its child run
was written, so `python -m analysis sweeps/<name>` can finish the job later.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Optional

from analysis.report.tracking import Tracker, TrackingUnavailable, store_errors
from analysis.report.tracking_store import absolute_uri
from launcher.config.schema import RootConfig
from launcher.core import strict_json
from launcher.core.console import Reporter
from launcher.core.files import write_atomic
from launcher.core.record import TrialRecord
from launcher.core.states import PruneReason, TrialState
from launcher.run.folder import SweepFolder
from launcher.run.ledger import Ledger


def trial_artifacts(folder: SweepFolder, record: TrialRecord) -> list[Path]:
    paths = [Path(p) for p in record.log_paths]
    return paths + sorted(p for p in folder.trial(record.config_hash).glob("*") if p.is_file())


def write_trial_config(cfg: RootConfig, folder: SweepFolder, record: TrialRecord) -> Path:
    """trials/<hash>/trial.json: the trial's resolved configuration (attached to its MLflow run)."""
    out = folder.trial(record.config_hash) / "trial.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    data = {"config_hash": record.config_hash, "layout": record.layout.to_dict(), "model": asdict(cfg.model),
            "cluster": asdict(cfg.cluster), "backend": asdict(cfg.backend), "predicted": record.predicted}
    # the launcher and an analysis both write it
    return write_atomic(out, strict_json.dumps(data, indent=2, sort_keys=True))


class TrackingLink:
    def __init__(self, cfg: RootConfig, ledger: Ledger, folder: SweepFolder, tracker: Optional[Tracker],
                 parent_id: str, reporter: Optional[Reporter] = None) -> None:
        self.reporter = reporter or Reporter.for_streams()
        self.cfg, self.ledger, self.folder = cfg, ledger, folder
        self.tracker, self.parent_id = tracker, parent_id
        self.uid = ledger.get_meta("sweep_uid", "") or ""
        self.context = {"model": cfg.model.name, "cluster": cfg.cluster.name, "backend": cfg.backend.name,
                        "executor": cfg.executor.name, "sweep": cfg.sweep.name}

    @classmethod
    def open(cls, cfg: RootConfig, ledger: Ledger, folder: SweepFolder,
             reporter: Optional[Reporter] = None) -> TrackingLink:
        if not cfg.tracking.enabled:
            return cls.disabled(cfg, ledger, folder, reporter)
        name = cfg.tracking.experiment or cfg.sweep.name
        say = reporter or Reporter.for_streams()
        try:
            tracker = Tracker.connect(sweep_tracking_uri(cfg, ledger), name, cfg.tracking.ui_url)
            if tracker.note:
                say.warn(tracker.note)
            before = ledger.get_meta("mlflow_parent_run_id", "") or ""
            parent = tracker.parent_run(cfg.sweep.name, ledger.get_meta("sweep_uid", "") or "", before,
                                        params=_parent_params(cfg), tags={"status": "running"})
            tracker.reopen(parent)
        except TrackingUnavailable as exc:
            say.warn(f"{exc}; the sweep goes on and records everything in the ledger. Sync later with: "
                     f"python -m analysis {folder.root}")
            return cls.disabled(cfg, ledger, folder, reporter)
        if before and parent != before:  # the store was replaced (moved aside, deleted): it has none of our runs
            ledger.update_many({r.config_hash: {"synced": False, "mlflow_run_id": ""} for r in ledger.trials()})
        ledger.set_meta("mlflow_parent_run_id", parent)
        ledger.set_meta("mlflow_experiment_id", tracker.experiment_id)
        ledger.set_meta("mlflow_runs_url", tracker.runs_url)
        return cls(cfg, ledger, folder, tracker, parent, reporter)

    @classmethod
    def disabled(cls, cfg: RootConfig, ledger: Ledger, folder: SweepFolder,
                 reporter: Optional[Reporter] = None) -> TrackingLink:
        return cls(cfg, ledger, folder, None, "", reporter)

    @property
    def active(self) -> bool:
        return self.tracker is not None

    @property
    def runs_url(self) -> Optional[str]:
        return self.tracker.runs_url if self.tracker is not None else None

    def sync(self, record: TrialRecord) -> None:
        if self.tracker is None or record.state is TrialState.PLANNED or record.is_live:
            return
        if record.pruned_by == PruneReason.PREDICTED_OOM:
            return  # never ran: summarised in the parent run's plan.csv, not a child run
        try:
            write_trial_config(self.cfg, self.folder, record)
            run_id = self.tracker.sync_trial(self.cfg.sweep.name, self.uid, self.parent_id, asdict(record),
                                             self.context, trial_artifacts(self.folder, record))
        except store_errors() as exc:  # the store went away mid-sweep: keep going on the ledger alone
            self.lost(exc)
            return
        self.ledger.update(record.config_hash, mlflow_run_id=run_id, synced=True)

    def sync_pending(self) -> int:
        pending = [r for r in self.ledger.trials() if not r.synced and r.state is not TrialState.PLANNED
                   and not r.is_live]
        for record in pending:
            if self.tracker is None:
                break
            self.sync(record)
        return len(pending)

    def attach_outputs(self, plots: list[Path], report_files: list[Path]) -> None:
        """The sweep's plots under 'plots/' and its report files under 'report/' of the parent run."""
        if self.tracker is None:
            return
        try:
            self.tracker.log_artifacts(self.parent_id, plots, "plots")
            self.tracker.log_artifacts(self.parent_id, report_files, "report")
        except store_errors() as exc:  # the store went away: the files are in the folder, python -m analysis attaches
            self.lost(exc)

    def finish(self, best: Optional[TrialRecord], summary: dict, artifacts: list[Path],
               ranked: Sequence[dict] = (), verdict: str = "") -> Optional[str]:
        """Star the winner, log the medians and spreads of the re-measured trials (`ranked`: medians over repeats,
        best first) on their runs, attach `artifacts` and finish the parent run. `verdict`: how sure the winner is
        (analysis.report.explain), for the descriptions."""
        if self.tracker is None:
            return None
        try:
            for entry in ranked:
                run_id = self.ledger.get(entry["config_hash"]).mlflow_run_id
                if entry.get("n_runs", 1) > 1 and run_id:
                    self.tracker.log_metrics(run_id, repeat_metrics(entry))
            if best is not None and best.mlflow_run_id:
                entry = ranked[0] if ranked else {}
                self.tracker.tag_best(best.mlflow_run_id, self.parent_id, best.config_hash,
                                      _best_note(self.cfg, best, entry.get("metrics", best.metrics),
                                                 int(entry.get("n_runs", 1)), verdict))
            self.tracker.log_artifacts(self.parent_id, artifacts)
            self.tracker.finish_parent(self.parent_id, "FINISHED", summary,
                                       {"status": "finished", "mlflow.note.content": _parent_note(self.cfg, best,
                                                                                                   summary, verdict)})
        except store_errors() as exc:
            self.lost(exc)
            return None
        return self.tracker.runs_url

    def link_text(self, url: str) -> str:
        """The printed link, and the command that makes it work when the store is a file (not a server)."""
        command = self.tracker.ui_command if self.tracker is not None else ""
        return f"MLflow runs: {url}" + (f"\n  (start the MLflow UI first: {command})" if command else "")

    def lost(self, exc: BaseException) -> None:
        first = str(exc).splitlines()[0][:160] if str(exc) else ""
        self.reporter.warn(f"MLflow write failed ({type(exc).__name__}: {first}); continuing on the "
             f"ledger only. Sync later with: python -m analysis {self.folder.root}")
        self.tracker = None


def sweep_tracking_uri(cfg: RootConfig, ledger: Ledger) -> str:
    """The sweep's store, whatever the working directory: a relative sqlite URI is made absolute once, by the
    launcher that first opens the sweep, and kept in the ledger; later launchers and `python -m analysis` use that
    store as long as tracking.uri is the text it was (a changed tracking.uri is a deliberate move: it is used, and
    kept instead)."""
    configured = cfg.tracking.uri
    if ledger.get_meta("tracking_uri_text") == configured and ledger.get_meta("tracking_uri"):
        return ledger.get_meta("tracking_uri") or configured
    uri = absolute_uri(configured)
    ledger.set_meta("tracking_uri_text", configured)
    ledger.set_meta("tracking_uri", uri)
    return uri


def _parent_params(cfg: RootConfig) -> dict:
    return {"model": cfg.model.name, "cluster": cfg.cluster.name, "backend": cfg.backend.name,
            "executor": cfg.executor.name, "sweep": cfg.sweep.name, "gpu_mem_gb": cfg.cluster.gpu_mem_gb,
            "peak_tflops": cfg.cluster.peak_tflops, "seq_len": cfg.model.seq_len}


def repeat_metrics(entry: dict) -> dict:
    """A re-measured configuration's median, spread (in %) and number of ok measurements, for its run."""
    m = entry.get("metrics", {})
    return {"tokens_per_s_median": m.get("tokens_per_s"), "tokens_per_s_spread_pct": 100 * (m.get(
        "tokens_per_s_spread") or 0.0), "n_runs": entry.get("n_runs", 1)}


def _best_note(cfg: RootConfig, best: TrialRecord, measured: dict, n_runs: int, verdict: str) -> str:
    """The winner's run description: `measured` is the median over its `n_runs` measurements."""
    m = measured
    runs = (f" (median of {n_runs} runs, spread {m.get('tokens_per_s_spread') or 0:.0%})" if n_runs > 1
            else " (one run)")
    return (f"Best trial of sweep {cfg.sweep.name}: {best.layout.label()}, "
            f"{m.get('tokens_per_s', 0):,.0f} tokens/s{runs}, {m.get('mfu') or 0:.1%} MFU, "
            f"peak {m.get('peak_mem_gb') or 0:.3g}"
            f" of {cfg.cluster.gpu_mem_gb:g} GB per GPU (trial {best.config_hash}). {verdict}The exact command is in "
            f"{cfg.sweep.root_dir}/{cfg.sweep.name}/best.json; the full-length job in the parent run's "
            "report/train.sbatch.")


def _parent_note(cfg: RootConfig, best: Optional[TrialRecord], summary: dict, verdict: str = "") -> str:
    """The parent run's description."""
    head = (f"parasweep sweep {cfg.sweep.name}: {cfg.model.name} on {cfg.cluster.name} ({cfg.backend.name}), "
            f"{summary.get('trials_ok', 0)} of {summary.get('trials_total', 0)} trials ok.")
    if best is None:
        return head + " No trial finished ok."
    tokens = summary.get("best_tokens_per_s", best.metrics.get("tokens_per_s", 0))
    return (head + f" Winner: {_winner_name(best)} at {tokens:,.0f} tokens/s. {verdict}"
            "Plots under plots/, report.html and train.sbatch under report/.")


def _winner_name(best: TrialRecord) -> str:
    return f"{best.layout.label()} ({best.config_hash[:8]})"
