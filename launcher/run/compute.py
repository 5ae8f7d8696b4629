"""The compute probe before the trials (plan.compute_probe): time the plan's GEMMs and one transformer layer with
`python -m launcher.computebench`, run as one job on one GPU through the sweep's own runner (the network probe's
machinery, launcher.run.network.run_job), and hand the estimator the measured GEMM efficiency in place of the
a-priori one (launcher.computebench.view.apply_compute).

The probe's JSON is kept in the sweep folder as computebench-<cluster>-<gpu>.json and reused: on resume, and by
later sweeps of the same cluster preset and GPU under sweep.root_dir (unless sweep.fresh), when it was measured in
the precision this sweep trains in. A probe that fails (refused, crashed, no file) is reported and the sweep goes
on with the a-priori constants.
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Optional

from launcher.computebench.result import ComputeProbeError, ComputeResult, load
from launcher.computebench.view import (
    ComputeProfile,
    apply_compute,
    cache_name,
    find_cached,
    fit_profile,
    precision_for,
    probe_args,
    save,
)
from launcher.config.schema import RootConfig
from launcher.core.console import Reporter
from launcher.core.layout import Layout
from launcher.core.names import ExecutorKind, is_cpu_standin
from launcher.netbench import ProbeError, sweep_folders
from launcher.plan.constants import Constants
from launcher.plan.inputs import constants_of
from launcher.run.executor import JobRequest, local_gpus
from launcher.run.folder import SweepFolder
from launcher.run.network import probe_files, run_job

PROBE_KEY = "computebench"
"""The probe job's key in the runner (not a trial: never in the ledger)."""
CPU_BUDGET_S = 7.0
"""Timing budget of the probe on the CPU stand-in: it measures for about this long, and starts nothing more after
twice this (loaded shared cores); the job takes a few seconds more for torch's import."""


def probe_enabled(cfg: RootConfig) -> bool:
    """plan.compute_probe, or when unset: on SLURM; on the local executor when it is fast, i.e. on a GPU preset with
    a GPU on this machine (seconds); not on the CPU stand-in, whose GEMMs on shared cores would cost every local
    sweep ~15 s, nor for a GPU preset planned on a machine without one (it would time the CPU)."""
    if cfg.plan.compute_probe is not None:
        return cfg.plan.compute_probe
    if cfg.executor.name is ExecutorKind.slurm:
        return True
    return not is_cpu_standin(cfg.cluster.gpu) and bool(local_gpus())


def probe_used(cfg: RootConfig) -> bool:
    """Whether a probe file in the sweep folder is the estimator's input (the report, after the sweep): unless
    plan.compute_probe=false, the loop saved one there only when it used it (saved_probe, run_probe)."""
    return cfg.plan.compute_probe is not False


def probe_dir(folder: SweepFolder) -> Path:
    return folder.root / "computebench"


def probe_precision(cfg: RootConfig) -> str:
    return precision_for(cfg.cluster, str(cfg.backend.precision))


def saved_probe(cfg: RootConfig, folder: SweepFolder) -> Optional[ComputeResult]:
    """This sweep's probe, else (unless sweep.fresh) the newest one of another sweep of the same cluster and GPU
    under sweep.root_dir (copied into this folder, so that a resume finds it here)."""
    folders = [folder.root] if cfg.sweep.fresh else sweep_folders(Path(cfg.sweep.root_dir), folder.root)
    found = find_cached(folders, cfg.cluster, probe_precision(cfg))
    path = folder.root / cache_name(cfg.cluster)
    if found is not None and not path.is_file():
        save(found, path)
    return found


def probe_script(python: str, out_path: str, args: Sequence[str]) -> str:
    """Bash text of the probe job: one process on one GPU (or the CPU)."""
    command = " ".join(shlex.quote(a) for a in [python, "-m", "launcher.computebench", "--out", out_path, *args])
    return f"#!/bin/bash\nset -euo pipefail\nexec {command}\n"


def run_probe(cfg: RootConfig, folder: SweepFolder, runner: Any, layouts: Sequence[Layout], poll_s: float,
              timeout_s: float, reporter: Reporter) -> Optional[ComputeResult]:
    """Submit the probe as one job, wait for it, read its JSON; None (with a warning) when it gave nothing."""
    out, script = probe_files(probe_dir(folder))
    args = probe_args(cfg, layouts)
    if is_cpu_standin(cfg.cluster.gpu):
        args += ["--budget-s", f"{CPU_BUDGET_S:g}"]
    script.write_text(probe_script(cfg.backend.python or sys.executable, str(out), args))
    script.chmod(0o755)
    try:
        job_id, job_dir, state = run_job(runner, JobRequest(PROBE_KEY, script, 1, 1), poll_s, timeout_s)
    except ProbeError as exc:
        return _gave_nothing(str(exc), reporter)
    try:
        result = load(out)
        fit_profile(result, cfg.cluster, constants_of(cfg.backend))   # usable: GEMMs, of this GPU
    except ComputeProbeError as exc:
        return _gave_nothing(f"job {job_id} ended {state} without a usable result ({exc}); its log is in "
                             f"{job_dir}", reporter)
    save(result, folder.root / cache_name(cfg.cluster))
    return result


def _gave_nothing(why: str, reporter: Reporter) -> Optional[ComputeResult]:
    """Warn that the probe gave nothing: the estimator keeps the a-priori GEMM efficiency (always None)."""
    reporter.warn(f"compute probe: {why}; the estimator keeps the a-priori GEMM efficiency")
    return None


def with_compute(cfg: RootConfig, constants: Constants,
                 probe: Optional[ComputeResult]) -> tuple[Constants, Optional[ComputeProfile]]:
    """The constants the estimator should use (the measured GEMM efficiency when a probe is given) and the
    profile fitted to the probe (None without one)."""
    if probe is None:
        return constants, None
    try:
        profile = fit_profile(probe, cfg.cluster, constants)
    except ComputeProbeError:   # not this GPU's (run_probe and find_cached keep such a file out of the loop)
        return constants, None
    return apply_compute(cfg.cluster, constants, profile), profile


def folder_probe(folder: SweepFolder, cfg: RootConfig) -> Optional[ComputeResult]:
    """The probe this sweep used (its computebench-<cluster>-<gpu>.json), for the report; None without one."""
    path = folder.root / cache_name(cfg.cluster)
    try:
        return load(path) if path.is_file() else None
    except ComputeProbeError:
        return None


def describe(cfg: RootConfig, profile: ComputeProfile) -> str:
    """One line for the console and the report: measured vs a-priori GEMM efficiency."""
    layer = (f"; one layer fwd+bwd {profile.layer_tflops:.3g} model TFLOP/s"
             if profile.layer_tflops is not None else "")
    return (f"{profile.source}: GEMM efficiency {100 * profile.measured_eff:.1f}% of the {profile.peak_tflops:g} "
            f"TFLOP/s peak of {cfg.cluster.name} (a-priori {100 * profile.datasheet_eff:.1f}% at the same shapes; "
            f"fitted ceiling {100 * profile.gemm_eff:.1f}%, size scale {profile.gemm_dim_scale:.3g}){layer}; "
            f"{_how_used(profile)}")


def _how_used(profile: ComputeProfile) -> str:
    ref, relative = profile.reference_eff, profile.relative
    if ref is None or relative is None:
        return "the estimator used the measured efficiency"
    return (f"a nominal card of this generation measures {100 * ref:.1f}% (launcher.computebench."
            f"view.REFERENCE_PROBES): the estimator scaled its GEMM efficiency by {relative:.3f}")
