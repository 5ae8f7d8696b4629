"""MLflow records: one experiment per sweep name, one parent run per sweep, one child run per trial.

All MLflow calls of the project live here. Idempotent by construction: a child run is found again by its
`parasweep.config_hash` tag (and its remembered run id), so a resumed sweep or `python -m analysis` updates the
same runs and never creates a second child for a trial. Takes plain dicts, never imports the launcher.

What a person sees (MLflow 3.x UI): the printed link opens the experiment's "Training runs" table through a saved
view, in the UI's "Model training" navigation. MLflow 3.17 chooses GenAI or Model training navigation per browser
(the sidebar switch, kept in local storage as `mlflow.workflowType`, default GenAI) unless the page URL carries
`workflowType=machine_learning`: the printed link carries it. The experiment also gets the tag
`mlflow.experimentKind = custom_model_development` (the experiment type MLflow's API and earlier 3.x UIs read, and
what the UI's own "change experiment type" writes) and a description saying what the columns mean.

MLflow 3 keeps saved views as experiment tags `mlflow.sharedViewState.<key>` (the UI's Views menu and its
"share" links write them; the UI reads one when the URL carries `?viewStateShareKey=<key>`). The value is an
envelope {name, createdAt, updatedAt, state}; state is the JSON of the runs page's search facets (searchFilter,
orderByKey, orderByAsc, startTime, lifecycleFilter, modelVersionFilter, datasetsFilter: the same keys the page
accepts as plain URL parameters) and its UI state (selectedColumns, columnOrder, columnWidths, groupBy, ...: kept
only in the browser's local storage otherwise). parasweep writes one view per sweep folder: the sweep's runs,
sorted by measured tokens/s (descending: the winner first, failed trials without a throughput last), with the key
metrics, the status and the failure kind as columns, all within a 1600-pixel window. Without the view the table
shows one collapsed parent row and no metric column. Child run names are the layouts' labels (Layout.label); the
winner's starts with a star and carries a description.

Percentages are logged as percentages (`mfu_pct`, `headroom_pct`: 0-100); how far a measurement was from its
prediction as `<metric>_vs_predicted_pct` = 100 * (measured / predicted - 1): +20 means 20% more than predicted.
MLflow has no metric descriptions: the experiment's description (EXPERIMENT_NOTE) says this. `failure_kind` is
logged only on runs that did not finish ok.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import sys
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any, Optional

from analysis.report.search_summary import calibrated_bounds
from analysis.report.tracking_store import ready_store, sqlite_file, store_lock
from launcher.core import strict_json
from launcher.core.inside import inside
from launcher.core.kinds import FailureKind
from launcher.core.layout import label_of
from launcher.core.states import TrialState

MEASURED_METRICS = ("step_time_s", "tokens_per_s", "tflops_per_gpu", "model_tflops_per_gpu", "peak_mem_gb",
                    "step_time_std_s", "n_measured")
PREDICTED_METRICS = ("step_time_s", "tokens_per_s", "tflops_per_gpu", "model_tflops_per_gpu", "peak_mem_gb",
                     "peak_mem_gb_low", "peak_mem_gb_high", "tokens_per_s_low", "tokens_per_s_high")
"""predicted_<key>: the plan's estimate and its 90 % intervals (launcher.plan.band; absent in older ledgers)."""
CALIBRATED_METRICS = ("step_time_s", "tokens_per_s", "peak_mem_gb", "peak_mem_gb_low", "peak_mem_gb_high",
                      "tokens_per_s_low", "tokens_per_s_high")
"""calibrated_<key>: what the calibrated model predicted before the trial ran, with its 90 % intervals."""
PERCENT_METRICS = {"mfu": "mfu_pct", "headroom": "headroom_pct"}
"""Fractions in the ledger (0.235991), logged as percentages (23.5991) under these names, measured and predicted."""
VERSUS_PREDICTED = {"tokens_per_s": "tokens_per_s_vs_predicted_pct", "peak_mem_gb": "peak_mem_vs_predicted_pct"}
"""100 * (measured / predicted - 1), under these names: +20 means 20% more than predicted."""
RUN_STATUS = {"ok": "FINISHED", "cancelled": "KILLED", "pruned": "KILLED", "stopped_early": "KILLED"}
HASH_TAG = "parasweep.config_hash"
SWEEP_TAG = "parasweep.sweep"
UID_TAG = "parasweep.sweep_uid"
"""Identifies one sweep folder: a fresh sweep of the same name (same config hashes) gets new runs."""
BEST_TAG = "parasweep.best"
BEST_MARK = "\u2605 "
"""A star before the winner's run name: visible in the runs table whatever columns are shown."""
NOTE_TAG = "mlflow.note.content"
"""MLflow's run description (shown on the run page)."""
ACTIVE_TAG = "parasweep.active_ms"
SESSION_TAG = "parasweep.session_started_ms"
VIEW_TAG_PREFIX = "mlflow.sharedViewState."
EXPERIMENT_KIND_TAG = "mlflow.experimentKind"
TRAINING_KIND = "custom_model_development"
"""The experiment type MLflow calls 'Machine learning' / 'Model training' (the other is 'genai_development')."""
TRAINING_WORKFLOW = "workflowType=machine_learning"
"""The URL parameter that makes MLflow 3.17's UI show the Model training navigation, whatever the browser chose."""
EXPERIMENT_NOTE = (
    "parasweep: `tokens_per_s_vs_predicted_pct` and `peak_mem_vs_predicted_pct` are measured vs predicted in %, "
    "100 * (measured / predicted - 1): +20 means the measurement was 20% above the estimator's prediction (faster, "
    "or more memory, than predicted), -20 means 20% below. `mfu_pct` (model FLOPs utilisation) and `headroom_pct` "
    "(GPU memory left free at the peak) are percentages; `tokens_per_s` is the whole job's, "
    "`tokens_per_s_per_gpu` divided by its GPUs, `peak_mem_gb` per GPU; `predicted_*` are the estimator's figures "
    "before the run, `predicted_*_low`/`_high` their 90 % interval (the estimator's out-of-sample errors), "
    "`calibrated_*` (and their `_low`/`_high`) what the calibrated model predicted just before the trial ran. "
    "One parent run per sweep, one child run per trial; \u2605 marks the winner; `failure_kind` "
    "says why a trial did not finish ok (none on ok runs).")
"""The experiment's description (MLflow has no metric descriptions): what each column means and the error's sign."""
NOTE_MARK = "parasweep: "
"""How a description written by parasweep starts: only those are replaced when the text changes."""
VIEW_METRICS = ("tokens_per_s", "tokens_per_s_per_gpu", "mfu_pct", "peak_mem_gb", "headroom_pct")
"""The view's metric columns, the status and failure kind after them; all fit a 1600-pixel window."""
VIEW_TAGS = ("status", "failure_kind")
VIEW_WIDTH_PX = 1600
"""The window the view is made for (the browser test checks every view column's header lies within it)."""
RUN_NAME_WIDTH_PX = 230
"""The run name column: a star and a 24-character layout label without an ellipsis."""
SIGNIFICANT_DIGITS = 6
"""Metrics are logged to 6 significant digits: a benchmark's throughput varies by about 1%, and a value such as
3893.05083868526 fills the table's column with noise (the ledger keeps the exact figures)."""
REPEAT_MARK = " rep"
"""After a repeated measurement's run name."""


class TrackingUnavailable(Exception):
    """The tracking server cannot be reached; the sweep goes on and `python -m analysis` syncs later."""


def store_errors() -> tuple[type[BaseException], ...]:
    """What an unreachable or broken tracking store raises: MLflow's own errors (a REST failure after its retries,
    a refused request), network errors, sqlite and SQLAlchemy errors (a locked or unwritable store), file-system
    errors (an artifact folder that cannot be written) and a missing mlflow installation. Anything else is a bug
    and must propagate, not be taken for "MLflow unreachable"."""
    import sqlite3

    errors: list[type[BaseException]] = [TrackingUnavailable, OSError, sqlite3.Error, ImportError]
    try:
        from mlflow.exceptions import MlflowException

        errors.append(MlflowException)
    except ImportError:
        pass
    for module, name in (("requests.exceptions", "RequestException"), ("sqlalchemy.exc", "SQLAlchemyError")):
        with contextlib.suppress(ImportError, AttributeError):
            errors.append(getattr(__import__(module, fromlist=[name]), name))
    return tuple(errors)


def _fail_fast_http() -> None:
    # MLflow retries an unreachable server for minutes by default; one quick probe is what a sweep can afford.
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")


def runs_table_url(ui_url: str, experiment_id: str, view_key: str = "") -> str:
    """The 'Training runs' table in the Model training navigation (the experiment's default page in MLflow 3 is a
    GenAI overview without runs), opened through the sweep's saved view when there is one."""
    url = f"{ui_url.rstrip('/')}/#/experiments/{experiment_id}/runs?{TRAINING_WORKFLOW}"
    return f"{url}&viewStateShareKey={view_key}" if view_key else url


def run_label(layout: Mapping[str, Any], repeat: bool = False) -> str:
    """A child run's name: the layout's one label (launcher.core.layout.Layout.label), ' rep' after a repeat."""
    return label_of(layout) + (REPEAT_MARK if repeat else "")


def view_key(uid: str, sweep: str) -> str:
    return f"parasweep-{uid[:12] or sweep}"


def view_state(uid: str, sweep: str) -> dict:
    """The runs page of one sweep folder: its runs, best measured throughput first, key metrics as columns. MLflow
    draws the pinned Run Name and Created columns first, then metrics, then tags, then Duration (whatever the
    order asked for); the widths keep each header readable and the whole row within VIEW_WIDTH_PX."""
    columns = [f"metrics.`{m}`" for m in VIEW_METRICS] + [f"tags.`{t}`" for t in VIEW_TAGS]
    where = f"tags.`{UID_TAG}` = '{uid}'" if uid else f"tags.`{SWEEP_TAG}` = '{sweep}'"
    order_by = "metrics.`tokens_per_s`"
    return {"searchFilter": where, "orderByKey": order_by, "orderByAsc": False, "startTime": "ALL",
            "lifecycleFilter": "Active", "modelVersionFilter": "All Runs", "datasetsFilter": [],
            "selectedColumns": columns,
            # widths apply to the columns named in columnOrder (MLflow 3.17 applies them together); the order
            # itself is applied only when the grid has drawn those columns already, so it is a wish, not a promise
            "columnOrder": ["attributes.`Run Name`", *columns, "runDateAndNestInfo", "duration"],
            "columnWidths": {"attributes.`Run Name`": RUN_NAME_WIDTH_PX,
                             **{c: _header_width_px(c) for c in columns}}}


def _header_width_px(column: str) -> int:
    """Wide enough for the header's name (about 7 px a character and 30 px of padding), at least 96 px."""
    return max(96, 7 * len(column.split("`")[1]) + 30)


def view_tag_value(name: str, state: dict, now_ms: int) -> str:
    """A saved view as the MLflow 3 UI stores it: an envelope around the JSON of the page state."""
    return strict_json.dumps({"name": name, "createdAt": now_ms, "updatedAt": now_ms,
                              "state": strict_json.dumps(state)})


def ui_command(uri: str, ui_url: str) -> str:
    """The command that serves `uri` at `ui_url` (so that the printed link works), or '' for a tracking server
    (the link is the server's own). The sqlite path is made absolute: the command works from any directory."""
    if uri.startswith("http"):
        return ""
    from urllib.parse import urlsplit

    parts = urlsplit(ui_url)
    store = uri
    if uri.startswith("sqlite:///"):
        store = "sqlite:///" + str(Path(uri[len("sqlite:///"):]).resolve())
    args = [_mlflow_program(), "ui", "--backend-store-uri", store]
    if parts.hostname and parts.hostname not in ("127.0.0.1", "localhost"):
        args += ["--host", parts.hostname]
    args += ["--port", str(parts.port or 5000)]
    return " ".join(shlex.quote(a) if a != args[0] else a for a in args)


def _mlflow_program() -> str:
    """`mlflow` when the one on PATH belongs to this interpreter's environment, else `<python> -m mlflow`."""
    import shutil

    found = shutil.which("mlflow")
    if found and Path(found).resolve().parent == Path(sys.executable).resolve().parent:
        return "mlflow"
    return f"{shlex.quote(sys.executable)} -m mlflow"


class Tracker:
    def __init__(self, uri: str, experiment: str, ui_url: str = "http://127.0.0.1:5000") -> None:
        _fail_fast_http()
        from mlflow.tracking import MlflowClient

        self.uri = uri
        self.ui_url = uri if uri.startswith("http") else ui_url
        self.note = ""
        """One message for the person when the store had to be repaired (tracking_store.ready_store)."""
        db = sqlite_file(uri)
        with store_lock(db) if db is not None else contextlib.nullcontext():
            if db is not None:  # created or migrated once, whole, before any client uses it
                self.note = ready_store(db)
            self.client = MlflowClient(tracking_uri=uri)
            self.experiment_id = self._experiment(experiment)
        self.view_key = ""

    @classmethod
    def connect(cls, uri: str, experiment: str, ui_url: str = "http://127.0.0.1:5000") -> Tracker:
        try:
            return cls(uri, experiment, ui_url)
        except store_errors() as exc:  # the store cannot be reached: one warning, the ledger keeps everything
            raise TrackingUnavailable(f"MLflow at {uri} unreachable ({type(exc).__name__}: "
                                      f"{str(exc).splitlines()[0][:160]})") from exc

    def _experiment(self, name: str) -> str:
        found = self.client.get_experiment_by_name(name)
        if found is not None:
            self._training_experiment(found.experiment_id, found.tags)
            return found.experiment_id
        location = None
        if self.uri.startswith("sqlite:///"):
            # Absolute artifact folder beside the database, so the UI and `python -m analysis` find the
            # artifacts whatever directory they are started from.
            db = Path(self.uri[len("sqlite:///"):]).resolve()
            location = inside(db.parent / "mlartifacts", name, "tracking.experiment").as_uri()
        return self.client.create_experiment(name, artifact_location=location,
                                             tags={EXPERIMENT_KIND_TAG: TRAINING_KIND, NOTE_TAG: EXPERIMENT_NOTE})

    def _training_experiment(self, experiment_id: str, tags: Mapping[str, str]) -> None:
        """An experiment from before parasweep typed its experiments (or with MLflow's own guess, '..._inferred')
        becomes a Model training one and gets the column notes; a type or a description someone chose is kept."""
        if not tags.get(EXPERIMENT_KIND_TAG) or tags[EXPERIMENT_KIND_TAG].endswith("_inferred"):
            self.client.set_experiment_tag(experiment_id, EXPERIMENT_KIND_TAG, TRAINING_KIND)
        note = tags.get(NOTE_TAG, "")
        if note != EXPERIMENT_NOTE and (not note.strip() or note.startswith(NOTE_MARK)):
            self.client.set_experiment_tag(experiment_id, NOTE_TAG, EXPERIMENT_NOTE)

    @property
    def runs_url(self) -> str:
        return runs_table_url(self.ui_url, self.experiment_id, self.view_key)

    @property
    def ui_command(self) -> str:
        return ui_command(self.uri, self.ui_url)

    # -- parent -----------------------------------------------------------------------------------------------
    def parent_run(self, sweep: str, uid: str, run_id: str, params: dict, tags: dict) -> str:
        """The sweep's parent run: the remembered one if it still exists, else found by tag, else created. Also
        writes the sweep's saved view of the runs table (see the module docstring)."""
        run_id = self._existing(run_id) or self._find({UID_TAG: uid, "parasweep.role": "sweep"})
        if not run_id:
            run = self.client.create_run(self.experiment_id, run_name=f"sweep {sweep}",
                                         tags={SWEEP_TAG: sweep, UID_TAG: uid, "parasweep.role": "sweep"})
            run_id = run.info.run_id
            self._log(run_id, params=params)
        self._log(run_id, tags=tags)
        self._saved_view(sweep, uid)
        return run_id

    def _saved_view(self, sweep: str, uid: str) -> None:
        key = view_key(uid, sweep)
        tag = VIEW_TAG_PREFIX + key
        state = view_state(uid, sweep)
        current = self.client.get_experiment(self.experiment_id).tags.get(tag)
        try:
            unchanged = current is not None and json.loads(json.loads(current)["state"]) == state
        except (ValueError, KeyError, TypeError):
            unchanged = False
        if not unchanged:
            name = f"parasweep: sweep {sweep}" + (f" ({uid[:8]})" if uid else "") + " by tokens/s"
            self.client.set_experiment_tag(self.experiment_id, tag, view_tag_value(name, state, _now_ms()))
        self.view_key = key

    def reopen(self, run_id: str) -> None:
        """A session of the sweep begins (launcher or python -m analysis): the parent runs again, and the time from
        now to finish_parent counts as active. A session that ended without finish_parent (the launcher was
        killed) counts up to the last trial it recorded."""
        run = self.client.get_run(run_id)
        started = _int(run.data.tags.get(SESSION_TAG))
        if started:
            ends = [r.info.end_time for r in self._children(run_id) if r.info.end_time and r.info.end_time > started]
            self._add_active(run_id, run, max(ends, default=started) - started)
        self.client.set_tag(run_id, SESSION_TAG, str(_now_ms()))
        self.client.update_run(run_id, status="RUNNING")

    def finish_parent(self, run_id: str, status: str, metrics: dict, tags: dict) -> None:
        """End the session: its time is added to the active time, and the parent's end time is set so that its
        duration in the UI is the sweep's active time, not the wall time across resumes."""
        run = self.client.get_run(run_id)
        started = _int(run.data.tags.get(SESSION_TAG))
        total = self._add_active(run_id, run, _now_ms() - started if started else 0)
        self._log(run_id, metrics={**metrics, "active_time_s": total / 1000}, tags=tags)
        self.client.set_terminated(run_id, status, end_time=run.info.start_time + total)

    def _add_active(self, run_id: str, run, ms: int) -> int:
        total = _int(run.data.tags.get(ACTIVE_TAG)) + max(0, ms)
        self.client.set_tag(run_id, ACTIVE_TAG, str(total))
        self.client.set_tag(run_id, SESSION_TAG, "")
        return total

    # -- children ---------------------------------------------------------------------------------------------
    def sync_trial(self, sweep: str, uid: str, parent_id: str, trial: dict, context: dict,
                   artifacts: Iterable[Path] = ()) -> str:
        """Create or update the child run of one trial; returns its run id."""
        chash = trial["config_hash"]
        run_id = self._existing(trial.get("mlflow_run_id", "")) or self._find({HASH_TAG: chash, UID_TAG: uid})
        existed = bool(run_id)
        if not run_id:
            name = run_label(trial["layout"], repeat=bool(trial.get("repeat_of")))
            started_ms = int(trial["submitted_at"] * 1000) if trial.get("submitted_at") else None
            run = self.client.create_run(self.experiment_id, run_name=name, start_time=started_ms,
                                         tags={HASH_TAG: chash, SWEEP_TAG: sweep, UID_TAG: uid,
                                               "mlflow.parentRunId": parent_id})
            run_id = run.info.run_id
            params = dict(trial["layout"])  # every dimension of the layout, as the launcher defines them
            params.update(context)
            params["config_hash"] = chash
            self._log(run_id, params=params)
        tags = trial_tags(trial)
        self._log(run_id, metrics=trial_metrics(trial), tags=tags)
        if existed and "failure_kind" not in tags:  # ok now: a kind an earlier verdict (or version) logged goes
            self._drop_tag(run_id, "failure_kind")
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

    def tag_best(self, run_id: str, parent_id: str, best_hash: str, note: str = "") -> None:
        """Mark the winner: tag parasweep.best, a star before its name, `note` as its description; the previous
        winner loses all three when the winner changes."""
        for run in self._children(parent_id):
            name = run.info.run_name or ""
            if run.info.run_id == run_id:
                if not name.startswith(BEST_MARK):
                    self.client.update_run(run_id, name=BEST_MARK + name)
            elif run.data.tags.get(BEST_TAG) == "true" or name.startswith(BEST_MARK):
                self.client.set_tag(run.info.run_id, BEST_TAG, "false")
                self.client.update_run(run.info.run_id, name=name.removeprefix(BEST_MARK))
                if run.data.tags.get(NOTE_TAG, "").startswith("Best trial"):
                    self.client.set_tag(run.info.run_id, NOTE_TAG, "")
        self.client.set_tag(run_id, BEST_TAG, "true")
        if note:
            self.client.set_tag(run_id, NOTE_TAG, note)
        self.client.set_tag(parent_id, "parasweep.best_config_hash", best_hash)

    def log_metrics(self, run_id: str, metrics: dict) -> None:
        self._log(run_id, metrics=metrics)

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

    def _drop_tag(self, run_id: str, key: str) -> None:
        if key in self.client.get_run(run_id).data.tags:
            self.client.delete_tag(run_id, key)

    def _find(self, tags: dict) -> str:
        query = " and ".join(f"tags.`{k}` = '{v}'" for k, v in tags.items())
        runs = self.client.search_runs([self.experiment_id], query, max_results=1)
        return runs[0].info.run_id if runs else ""

    def _log(self, run_id: str, params: Optional[dict] = None, metrics: Optional[dict] = None,
             tags: Optional[dict] = None) -> None:
        from mlflow.entities import Metric, Param, RunTag

        now = _now_ms()
        self.client.log_batch(
            run_id,
            metrics=[Metric(k, _rounded(v), now, 0) for k, v in (metrics or {}).items() if v is not None],
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
    """A trial's MLflow metrics: measured under their own names, the estimate as predicted_*, fractions as
    percentages (PERCENT_METRICS), measured vs predicted in % (VERSUS_PREDICTED), throughput per GPU."""
    out = {}
    measured, predicted = trial.get("metrics", {}), trial.get("predicted", {})
    for key in MEASURED_METRICS:
        if _is_number(measured.get(key)):
            out[key] = measured[key]
    for key in PREDICTED_METRICS:
        if _is_number(predicted.get(key)):
            out[f"predicted_{key}"] = predicted[key]
    for key, name in PERCENT_METRICS.items():
        if _is_number(measured.get(key)):
            out[name] = 100.0 * measured[key]
        if _is_number(predicted.get(key)):
            out[f"predicted_{name}"] = 100.0 * predicted[key]
    gpus = trial.get("layout", {}).get("gpus")
    if out.get("tokens_per_s") and _is_number(gpus) and gpus > 0:
        out["tokens_per_s_per_gpu"] = out["tokens_per_s"] / gpus
    for key, name in VERSUS_PREDICTED.items():
        if out.get(key) and out.get(f"predicted_{key}"):
            out[name] = versus_pct(out[key], out[f"predicted_{key}"])
    calibrated = trial.get("calibrated") or {}   # what the calibration predicted before it ran
    calibrated = {**calibrated, **calibrated_bounds(calibrated)}
    for key in CALIBRATED_METRICS:
        if _is_number(calibrated.get(key)):
            out[f"calibrated_{key}"] = calibrated[key]
    if out.get("tokens_per_s") and out.get("calibrated_tokens_per_s"):
        out["tokens_per_s_vs_calibrated_pct"] = versus_pct(out["tokens_per_s"], out["calibrated_tokens_per_s"])
    out["attempts"] = trial.get("attempts", 0)
    return out


def versus_pct(measured: float, predicted: float) -> float:
    """How far a measurement was from its prediction, in % of the prediction: +20 is 20% more than predicted."""
    return 100.0 * (measured / predicted - 1.0)


def trial_tags(trial: dict) -> dict:
    """A trial's MLflow tags; `failure_kind` only when it did not finish ok (an ok run's kind would read 'ok')."""
    tags = {"status": trial["state"], "failure_reason": trial.get("reason", "")[:500],
            "failure_evidence": evidence_tag(trial), "job_id": trial.get("job_id", ""),
            HASH_TAG: trial["config_hash"], "selection": trial.get("selection", "")}
    kind = trial.get("failure_kind") or ""
    if trial["state"] != TrialState.OK and kind and kind != FailureKind.OK:
        tags["failure_kind"] = kind
    return tags


def evidence_tag(trial: dict) -> str:
    """The line the verdict rests on, as 'file:line: text' (analysis.logs.joblog's evidence; '' when none)."""
    items = [x for x in trial.get("evidence") or [] if isinstance(x, dict) and x.get("text")]
    if not items:
        return ""
    first = items[0]
    return f"{first.get('file', '')}:{first.get('line', '?')}: {first['text']}"[:500]


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _rounded(value: float) -> float:
    return float(f"{float(value):.{SIGNIFICANT_DIGITS}g}")


def _now_ms() -> int:
    return int(time.time() * 1000)


def _int(text: Optional[str]) -> int:
    try:
        return int(text or 0)
    except ValueError:
        return 0

