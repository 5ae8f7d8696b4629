"""The trial record: everything the sweep knows about one trial, as the ledger stores it and every later phase reads
it (the run loop, the judge, the report, MLflow, `python -m analysis`).

Identity (config hash, position, repeat_of), the Layout, where it stands (state, pruned_by, failure kind and
reason), what was measured (metrics), what the plan predicted (predicted, recorded at plan time with its memory
and step-time breakdowns) and what the calibration predicted before it ran (calibrated), its job (id, folder,
SLURM state, exit code, nodes), attempts, and its timings. The ledger's columns are derived from these fields
(launcher.run.ledger), so adding a field here adds a column to every sweep folder opened afterwards.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from launcher.core.layout import Layout
from launcher.core.states import TrialState


@dataclass
class TrialRecord:
    config_hash: str
    position: int
    layout: Layout
    predicted: dict[str, Any] = field(default_factory=dict)
    """The plan's estimate, recorded at plan time: numbers plus the memory and step-time breakdowns."""
    selection: str = "predicted"
    repeat_of: str = ""
    """For a repeated measurement: the config hash of the trial it repeats."""
    state: TrialState = TrialState.PLANNED
    pruned_by: str = ""
    """A PruneReason value when the trial is pruned ('' otherwise)."""
    job_id: str = ""
    job_dir: str = ""
    """The job's folder (submitit's files and the task logs), relative to the launcher's working directory."""
    job_state: str = ""
    """How the job ended in SLURM's words (COMPLETED, FAILED, TIMEOUT, ...), kept so the log can be re-judged."""
    exit_code: Optional[int] = None
    job_error: str = ""
    node_list: str = ""
    """Where the job ran (SLURM's NodeList, e.g. 'n[1-2]')."""
    attempts: int = 0
    log_paths: list[str] = field(default_factory=list)
    metrics: dict[str, Any] = field(default_factory=dict)
    failure_kind: str = ""
    reason: str = ""
    evidence: list[dict[str, Any]] = field(default_factory=list)
    """The log lines the verdict rests on: {"file": the log file's name, "line": its 1-based line number in that
    file, "text": the line} (analysis.logs.joblog), first the one the reason quotes; [] when none."""
    excluded_nodes: list[str] = field(default_factory=list)
    mlflow_run_id: str = ""
    synced: bool = False
    submitted_at: float = 0.0
    started_at: float = 0.0
    """When the launcher first saw the job running (within a poll; 0: never seen running, e.g. a trial that ended
    between two polls). GPU-hours count from here: a job waiting in the queue holds no GPU."""
    finished_at: float = 0.0
    updated_at: float = 0.0
    calibrated: dict[str, Any] = field(default_factory=dict)
    """The calibrated prediction (launcher.run.search): step_time_s, tokens_per_s, peak_mem_gb and their log-space
    sds, and n_fit (measured trials the calibration was fitted on). Updated while the trial is planned, frozen
    when it is submitted: for a measured trial it is what the calibration predicted before it ran ({}: no
    calibration applied yet)."""

    def __post_init__(self) -> None:
        if isinstance(self.layout, dict):  # records built from plain data (tests, older callers)
            self.layout = Layout.from_dict(self.layout)
        self.state = TrialState(self.state)

    @property
    def is_live(self) -> bool:
        return self.state.live
