"""The network probe before the trials (plan.network_probe): measure the cluster's bus bandwidths with
`python -m launcher.netbench`, run as one job through the sweep's own runner, and hand the estimator the measured
numbers in place of the cluster preset's datasheet ones (launcher.netbench.apply_network).

The probe's JSON is kept in the sweep folder as netbench-<cluster>-<nodes>n.json and reused: on resume, and by
later sweeps of the same cluster preset and node count under sweep.root_dir (unless sweep.fresh). A probe that
fails (refused, crashed, no file) is reported and the sweep goes on with the datasheet numbers.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from pathlib import Path
from typing import Any, Optional

from launcher.config.schema import RootConfig
from launcher.core.console import Reporter
from launcher.core.names import ExecutorKind
from launcher.netbench import (
    ProbeError,
    ProbeResult,
    apply_network,
    cache_name,
    find_cached,
    load,
    probe_script,
    save,
    sweep_folders,
)
from launcher.plan.constants import Constants
from launcher.plan.inputs import constants_of
from launcher.run.executor import JobRequest
from launcher.run.folder import SweepFolder

PROBE_KEY = "netbench"
"""The probe job's key in the runner (not a trial: never in the ledger)."""


def probe_enabled(cfg: RootConfig) -> bool:
    """plan.network_probe, or when unset: on SLURM (a real network to measure), not on the local executor."""
    if cfg.plan.network_probe is not None:
        return cfg.plan.network_probe
    return cfg.executor.name is ExecutorKind.slurm


def probe_nodes(cfg: RootConfig, largest_trial_nodes: int) -> int:
    """As many nodes as the largest trial, and at least 2 when the cluster has them (to measure the inter-node
    link, which is what a datasheet knows least)."""
    return max(largest_trial_nodes, min(2, cfg.cluster.nodes))


def probe_dir(folder: SweepFolder) -> Path:
    return folder.root / "netbench"


def saved_probe(cfg: RootConfig, folder: SweepFolder, nodes: int) -> Optional[ProbeResult]:
    """This sweep's probe, else (unless sweep.fresh) the newest one of another sweep of the same cluster and node
    count under sweep.root_dir (copied into this folder, so that a resume finds it here)."""
    folders = [folder.root] if cfg.sweep.fresh else sweep_folders(Path(cfg.sweep.root_dir), folder.root)
    found = find_cached(folders, cfg.cluster.name, nodes)
    path = folder.root / cache_name(cfg.cluster.name, nodes)
    if found is not None and not path.is_file():
        save(found, path)
    return found


def run_probe(cfg: RootConfig, folder: SweepFolder, runner: Any, nodes: int, poll_s: float,
              timeout_s: float, reporter: Reporter) -> Optional[ProbeResult]:
    """Submit the probe as one job, wait for it, read its JSON; None (with a warning) when it gave nothing."""
    out, script = probe_files(probe_dir(folder))
    python = cfg.backend.python or sys.executable
    script.write_text(probe_script(nodes, cfg.cluster.gpus_per_node, python, str(out), ["--cluster", cfg.cluster.name]))
    script.chmod(0o755)
    try:
        job_id, job_dir, state = run_job(runner, JobRequest(PROBE_KEY, script, nodes, cfg.cluster.gpus_per_node),
                                         poll_s, timeout_s)
    except ProbeError as exc:
        return _gave_nothing(str(exc), reporter)
    try:
        result = load(out)
    except ProbeError as exc:
        return _gave_nothing(f"job {job_id} ended {state} without a usable result ({exc}); its log is in "
                             f"{job_dir}", reporter)
    save(result, folder.root / cache_name(cfg.cluster.name, nodes))
    return result


def probe_files(out_dir: Path) -> tuple[Path, Path]:
    """(the JSON a probe job writes, its script) in `out_dir`, an earlier run's JSON removed: a probe that writes
    nothing must not be read as the old one. The compute probe (launcher.run.compute) uses this too."""
    out_dir.mkdir(parents=True, exist_ok=True)
    out = (out_dir / "probe.json").resolve()
    out.unlink(missing_ok=True)
    return out, out_dir / "probe.sh"


def run_job(runner: Any, request: JobRequest, poll_s: float, timeout_s: float) -> tuple[str, Path, str]:
    """Submit one probe job (not a trial) through the sweep's runner and wait for its end: (job id, job folder,
    final state). ProbeError saying why when it was refused, or ran past `timeout_s` (then it is cancelled).
    The compute probe (launcher.run.compute) runs its job through this too."""
    done = runner.submit([request])
    if request.key not in done.jobs:
        raise ProbeError(done.refused.get(request.key, "not submitted"))
    job_id, job_dir = done.jobs[request.key]
    deadline = time.monotonic() + timeout_s
    while True:
        status = runner.poll({job_id: Path(job_dir)})[job_id]
        if not status.live:
            return job_id, Path(job_dir), str(status.state)
        if time.monotonic() > deadline:
            runner.cancel(job_id)
            raise ProbeError(f"still running after {timeout_s:.0f} s: cancelled")
        time.sleep(poll_s)


def _gave_nothing(why: str, reporter: Reporter) -> Optional[ProbeResult]:
    """Warn that the probe gave nothing: the estimator keeps the preset's numbers (always None)."""
    reporter.warn(f"network probe: {why}; the estimator keeps the cluster preset's bandwidths")
    return None


def with_network(cfg: RootConfig, probe: Optional[ProbeResult]) -> tuple[RootConfig, Constants]:
    """The config and constants the estimator should use: the cluster's measured bandwidths (and latency) when a
    probe is given, else the config as it is and the backend's a-priori constants."""
    constants = constants_of(cfg.backend)
    if probe is None:
        return cfg, constants
    cluster, constants = apply_network(cfg.cluster, constants, probe.profile())
    return dataclasses.replace(cfg, cluster=cluster), constants


def folder_probe(folder: SweepFolder, cluster: str) -> Optional[ProbeResult]:
    """The probe this sweep used (the newest netbench-<cluster>-*.json in its folder), for the report."""
    found = None
    for path in sorted(folder.root.glob(f"netbench-{cluster}-*n.json")):
        try:
            probe = load(path)
        except ProbeError:
            continue
        if found is None or probe.created_at > found.created_at:
            found = probe
    return found
