"""`python -m analysis sweeps/<name>`: re-judge, rank, explain, recommend; write plots, report.html, export/.

Re-judges finished trials from their logs, syncs the trials MLflow does not have yet and attaches the plots and
the report to the sweep's parent run.

A command line (the last phase, docs/architecture.md): it sequences re-judging (analysis.logs), the MLflow sync and
the conclusion (analysis.report) over the sweep folder's ledger.
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
from collections.abc import Callable, Sequence
from pathlib import Path

from analysis.logs.judge import rejudge
from analysis.report.conclusion import conclude
from analysis.report.plan_summary import planned_only
from analysis.report.tracking_link import TrackingLink
from launcher.config.load import load_saved
from launcher.config.schema import RootConfig
from launcher.core.console import Reporter
from launcher.core.errors import ConfigError, ParasweepError
from launcher.run.folder import SweepFolder
from launcher.run.ledger import Ledger


def _load_config(folder: Path) -> RootConfig:
    path = folder / "config.yaml"
    if not path.is_file():
        raise ConfigError("sweep folder", str(folder), "give a folder made by `python -m launcher` (it holds "
                          "config.yaml and ledger.sqlite), e.g. sweeps/tiny")
    return load_saved(path)


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


# ------------------------------------------------------------------------------------------------ command line

def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m analysis", description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="a sweep folder, e.g. sweeps/tiny")
    parser.add_argument("--no-mlflow", action="store_true", help="skip the MLflow sync")
    parser.add_argument("--resync-all", action="store_true",
                        help="push every trial to MLflow again, not only those not synced yet")
    parser.add_argument("--train-iters", type=int, default=100_000,
                        help="iterations of the exported full-length run (default 100,000)")
    args = parser.parse_args(argv)
    reporter = Reporter.for_streams()
    try:
        if args.train_iters < 1:
            raise ConfigError("--train-iters", args.train_iters, "use a positive number of iterations")
        return _run(args, reporter)
    except ParasweepError as exc:
        reporter.error(str(exc))
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


def _run(args: argparse.Namespace, reporter: Reporter) -> int:
    folder = SweepFolder(args.folder.resolve())
    if not folder.ledger.exists() and folder.plan_csv.is_file():  # a dry run's folder: nothing ran yet
        reporter.info(planned_only(args.folder))
        return 0
    cfg = _load_config(folder.root)
    workdir = workdir_of(cfg, folder.root)
    resolve = log_resolver(cfg, folder.root, workdir)
    with _in_dir(workdir), Ledger(folder.ledger, create=False) as ledger:
        t0 = time.perf_counter()
        changed = rejudge(cfg, ledger, resolve, reporter)
        records = ledger.trials()
        judged = sum(1 for r in records if r.job_state)
        reporter.info(f"re-parsed {judged} trial logs in {time.perf_counter() - t0:.2f} s "
              f"({changed} changed)")
        tracking = TrackingLink.disabled(cfg, ledger, folder, reporter)
        if not args.no_mlflow and cfg.tracking.enabled:
            tracking = _sync(cfg, folder, ledger, args.resync_all, reporter)
        conclude(cfg, folder, ledger, tracking, summary={}, train_iters=args.train_iters, resolve=resolve,
                 reporter=reporter)
    return 0


def _sync(cfg: RootConfig, folder: SweepFolder, ledger: Ledger, resync_all: bool,
          reporter: Reporter) -> TrackingLink:
    """Bring MLflow up to the ledger: the trials it does not have yet (or all of them), timed apart."""
    t0 = time.perf_counter()
    tracking = TrackingLink.open(cfg, ledger, folder, reporter)
    if resync_all:  # e.g. the tracking store was replaced: the ledger's `synced` flags describe the old one
        for r in ledger.trials():
            tracking.sync(r)
    else:
        tracking.sync_pending()  # trials re-judged above were marked unsynced; the others are in MLflow already
    reporter.info(f"MLflow sync: {time.perf_counter() - t0:.2f} s" + ("" if tracking.active else " (unavailable)"))
    return tracking


if __name__ == "__main__":
    sys.exit(main())
