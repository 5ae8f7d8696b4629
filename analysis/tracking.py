"""MLflow records: one experiment per sweep name, one parent run per sweep, one child run per trial.

All MLflow calls of the project live here. Idempotent by construction: a child run is found again by its
`parasweep.config_hash` tag (and its remembered run id), so a resumed sweep or `python -m analysis` updates the
same runs and never creates a second child for a trial. Takes plain dicts, never imports the launcher.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Iterable, Optional

GRID_PARAMS = ("gpus", "nodes", "tp", "pp", "dp", "vpp", "mbs", "gbs", "recompute", "sequence_parallel",
               "zero_stage", "distributed_optimizer")
MEASURED_METRICS = ("step_time_s", "tokens_per_s", "tflops_per_gpu", "model_tflops_per_gpu", "mfu", "peak_mem_gb",
                    "headroom", "step_time_std_s", "n_measured")
PREDICTED_METRICS = ("step_time_s", "tokens_per_s", "tflops_per_gpu", "model_tflops_per_gpu", "mfu", "peak_mem_gb",
                     "headroom")
RUN_STATUS = {"ok": "FINISHED", "cancelled": "KILLED", "pruned": "KILLED"}
HASH_TAG = "parasweep.config_hash"
SWEEP_TAG = "parasweep.sweep"
UID_TAG = "parasweep.sweep_uid"
"""Identifies one sweep folder: a fresh sweep of the same name (same config hashes) gets new runs."""


class TrackingUnavailable(Exception):
    """The tracking server cannot be reached; the sweep goes on and `python -m analysis` syncs later."""


def _fail_fast_http() -> None:
    # MLflow retries an unreachable server for minutes by default; one quick probe is what a sweep can afford.
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")


def runs_table_url(ui_url: str, experiment_id: str) -> str:
    """The 'Training runs' table (the experiment's default page in MLflow 3 is a GenAI overview without runs)."""
    return f"{ui_url.rstrip('/')}/#/experiments/{experiment_id}/runs"


class Tracker:
    def __init__(self, uri: str, experiment: str, ui_url: str = "http://127.0.0.1:5000") -> None:
        _fail_fast_http()
        from mlflow.tracking import MlflowClient

        self.uri = uri
        self.ui_url = uri if uri.startswith("http") else ui_url
        self.client = MlflowClient(tracking_uri=uri)
        self.experiment_id = self._experiment(experiment)

    @classmethod
    def connect(cls, uri: str, experiment: str, ui_url: str = "http://127.0.0.1:5000") -> "Tracker":
        try:
            return cls(uri, experiment, ui_url)
        except Exception as exc:  # any failure to reach the store: one warning, the ledger keeps everything
            raise TrackingUnavailable(f"MLflow at {uri} unreachable ({type(exc).__name__}: "
                                      f"{str(exc).splitlines()[0][:160]})") from exc

    def _experiment(self, name: str) -> str:
        found = self.client.get_experiment_by_name(name)
        if found is not None:
            return found.experiment_id
        location = None
        if self.uri.startswith("sqlite:///"):
            # Absolute artifact folder beside the database, so the UI and `python -m analysis` find the
            # artifacts whatever directory they are started from.
            db = Path(self.uri[len("sqlite:///"):]).resolve()
            location = (db.parent / "mlartifacts" / name).as_uri()
        return self.client.create_experiment(name, artifact_location=location)

    @property
    def runs_url(self) -> str:
        return runs_table_url(self.ui_url, self.experiment_id)

    # -- parent -----------------------------------------------------------------------------------------------
    def parent_run(self, sweep: str, uid: str, run_id: str, params: dict, tags: dict) -> str:
        """The sweep's parent run: the remembered one if it still exists, else found by tag, else created."""
        run_id = self._existing(run_id) or self._find({UID_TAG: uid, "parasweep.role": "sweep"})
        if not run_id:
            run = self.client.create_run(self.experiment_id, run_name=f"sweep {sweep}",
                                         tags={SWEEP_TAG: sweep, UID_TAG: uid, "parasweep.role": "sweep"})
            run_id = run.info.run_id
            self._log(run_id, params=params)
        self._log(run_id, tags=tags)
        return run_id

    def finish_parent(self, run_id: str, status: str, metrics: dict, tags: dict) -> None:
        self._log(run_id, metrics=metrics, tags=tags)
        self.client.set_terminated(run_id, status)

    def reopen(self, run_id: str) -> None:
        self.client.update_run(run_id, status="RUNNING")

    # -- children ---------------------------------------------------------------------------------------------
    def sync_trial(self, sweep: str, uid: str, parent_id: str, trial: dict, context: dict,
                   artifacts: Iterable[Path] = ()) -> str:
        """Create or update the child run of one trial; returns its run id."""
        chash = trial["config_hash"]
        run_id = self._existing(trial.get("mlflow_run_id", "")) or self._find({HASH_TAG: chash, UID_TAG: uid})
        if not run_id:
            layout = trial["layout"]
            name = " ".join(f"{k}{layout[k]}" for k in ("tp", "pp", "dp", "mbs")) + f" {chash[:6]}"
            started_ms = int(trial["submitted_at"] * 1000) if trial.get("submitted_at") else None
            run = self.client.create_run(self.experiment_id, run_name=name, start_time=started_ms,
                                         tags={HASH_TAG: chash, SWEEP_TAG: sweep, UID_TAG: uid,
                                               "mlflow.parentRunId": parent_id})
            run_id = run.info.run_id
            params = {k: trial["layout"][k] for k in GRID_PARAMS if k in trial["layout"]}
            params.update(context)
            params["config_hash"] = chash
            self._log(run_id, params=params)
        self._log(run_id, metrics=trial_metrics(trial), tags=trial_tags(trial))
        for path in artifacts:
            path = Path(path)
            if path.suffix in (".out", ".err") and path.is_file():
                # Job logs as .log text: the MLflow UI previews .log/.txt files but not .out/.err.
                self.client.log_text(run_id, log_excerpt(path), f"logs/{path.name}.log")
            elif path.is_file():
                self.client.log_artifact(run_id, str(path))
        if trial["state"] not in ("planned", "submitted", "running"):
            ended_ms = int(trial["finished_at"] * 1000) if trial.get("finished_at") else None
            self.client.set_terminated(run_id, RUN_STATUS.get(trial["state"], "FAILED"), end_time=ended_ms)
        return run_id

    def tag_best(self, run_id: str, parent_id: str, best_hash: str) -> None:
        for run in self._children(parent_id):  # the previous best loses its tag when the winner changes
            if run.data.tags.get("parasweep.best") == "true" and run.info.run_id != run_id:
                self.client.set_tag(run.info.run_id, "parasweep.best", "false")
        self.client.set_tag(run_id, "parasweep.best", "true")
        self.client.set_tag(parent_id, "parasweep.best_config_hash", best_hash)

    def log_artifacts(self, run_id: str, paths: Iterable[Path], artifact_path: Optional[str] = None) -> None:
        for path in paths:
            if Path(path).is_file():
                self.client.log_artifact(run_id, str(path), artifact_path)

    # -- internals --------------------------------------------------------------------------------------------
    def _children(self, parent_id: str) -> list:
        return self.client.search_runs([self.experiment_id], f"tags.mlflow.parentRunId = '{parent_id}'",
                                       max_results=5000)

    def _existing(self, run_id: str) -> str:
        if not run_id:
            return ""
        from mlflow.exceptions import MlflowException

        try:
            run = self.client.get_run(run_id)
        except MlflowException:  # deleted or from another store: find it by tag instead
            return ""
        return run_id if run.info.lifecycle_stage == "active" else ""

    def _find(self, tags: dict) -> str:
        query = " and ".join(f"tags.`{k}` = '{v}'" for k, v in tags.items())
        runs = self.client.search_runs([self.experiment_id], query, max_results=1)
        return runs[0].info.run_id if runs else ""

    def _log(self, run_id: str, params: Optional[dict] = None, metrics: Optional[dict] = None,
             tags: Optional[dict] = None) -> None:
        from mlflow.entities import Metric, Param, RunTag

        now = int(time.time() * 1000)
        self.client.log_batch(
            run_id,
            metrics=[Metric(k, float(v), now, 0) for k, v in (metrics or {}).items() if v is not None],
            params=[Param(k, str(v)) for k, v in (params or {}).items()],
            tags=[RunTag(k, str(v)) for k, v in (tags or {}).items()],
        )


LOG_HEAD_BYTES = 2 * 1024 * 1024
LOG_TAIL_BYTES = 2 * 1024 * 1024


def log_excerpt(path: Path, head_bytes: int = LOG_HEAD_BYTES, tail_bytes: int = LOG_TAIL_BYTES) -> str:
    """A job log for MLflow: whole when small; else its first and last few MB (start-up and the end, where the
    result or the failure is) around a line saying what was left out. The full log stays in the sweep folder."""
    size = path.stat().st_size
    with path.open("rb") as fh:
        if size <= head_bytes + tail_bytes:
            return fh.read().decode(errors="replace")
        head = fh.read(head_bytes)
        fh.seek(size - tail_bytes)
        tail = fh.read(tail_bytes)
    skipped = size - head_bytes - tail_bytes
    note = (f"\n[... {skipped:,} bytes of {size:,} left out here: the full log is {path.resolve()} in the sweep "
            "folder ...]\n")
    return head.decode(errors="replace") + note + tail.decode(errors="replace")


def trial_metrics(trial: dict) -> dict:
    out = {}
    measured, predicted = trial.get("metrics", {}), trial.get("predicted", {})
    for key in MEASURED_METRICS:
        if isinstance(measured.get(key), (int, float)):
            out[key] = measured[key]
    for key in PREDICTED_METRICS:
        if isinstance(predicted.get(key), (int, float)):
            out[f"predicted_{key}"] = predicted[key]
    if out.get("tokens_per_s") and out.get("predicted_tokens_per_s"):
        out["estimate_error_tokens"] = out["predicted_tokens_per_s"] / out["tokens_per_s"] - 1.0
    if out.get("peak_mem_gb") and out.get("predicted_peak_mem_gb"):
        out["estimate_error_mem"] = out["predicted_peak_mem_gb"] / out["peak_mem_gb"] - 1.0
    out["attempts"] = trial.get("attempts", 0)
    return out


def trial_tags(trial: dict) -> dict:
    return {"status": trial["state"], "failure_kind": trial.get("failure_kind", ""),
            "failure_reason": trial.get("reason", "")[:500], "job_id": trial.get("job_id", ""),
            HASH_TAG: trial["config_hash"], "selection": trial.get("selection", "")}


def warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)
