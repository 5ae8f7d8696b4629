"""`python -m analysis sweeps/<name>`: re-judge, rank, explain, recommend; write plots, report.html, export/.

Re-judges finished trials from their logs, syncs the trials MLflow does not have yet and attaches the plots and
the report to the sweep's parent run.

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
from pathlib import Path
from typing import Callable, Sequence



def _load_config(folder: Path):
    from omegaconf import OmegaConf

    from launcher.errors import ConfigError
    from launcher.schema import RootConfig

    path = folder / "config.yaml"
    if not path.is_file():
        raise ConfigError("sweep folder", str(folder), "give a folder made by `python -m launcher` (it holds "
                          "config.yaml and ledger.sqlite), e.g. sweeps/tiny")
    from omegaconf.errors import OmegaConfBaseException

    try:
        merged = OmegaConf.merge(OmegaConf.structured(RootConfig), OmegaConf.load(path))
        return OmegaConf.to_object(merged)
    except (OmegaConfBaseException, ValueError) as exc:  # edited by hand or written by another version
        first = str(exc).splitlines()[0]
        raise ConfigError(str(path), "…", f"does not match this parasweep's schema ({first}); re-create it "
                          "by running the sweep's command again") from None


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
    from launcher.run.judge import judge

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
    from launcher.conclude import conclude
    from launcher.run.ledger import Ledger
    from launcher.run.tracking_link import TrackingLink

    folder = args.folder.resolve()
    cfg = _load_config(folder)
    workdir = workdir_of(cfg, folder)
    resolve = log_resolver(cfg, folder, workdir)
    with _in_dir(workdir), Ledger(folder / "ledger.sqlite", create=False) as ledger:  # never create an empty one
        t0 = time.perf_counter()
        changed = rejudge(cfg, ledger, resolve)
        records = ledger.trials()
        print(f"re-parsed {sum(1 for r in records if r.job_state)} trial logs in {time.perf_counter() - t0:.2f} s "
              f"({changed} changed)")
        tracking = TrackingLink.disabled(cfg, ledger, folder)
        if not args.no_mlflow and cfg.tracking.enabled:
            tracking = _sync(cfg, folder, ledger, args.resync_all)
        conclude(cfg, folder, ledger, tracking, summary={}, train_iters=args.train_iters, resolve=resolve)
    return 0


def _sync(cfg, folder: Path, ledger, resync_all: bool):
    """Bring MLflow up to the ledger: the trials it does not have yet (or all of them), timed apart."""
    from launcher.run.tracking_link import TrackingLink

    t0 = time.perf_counter()
    tracking = TrackingLink.open(cfg, ledger, folder)
    if resync_all:  # e.g. the tracking store was replaced: the ledger's `synced` flags describe the old one
        for r in ledger.trials():
            tracking.sync(r)
    else:
        tracking.sync_pending()  # trials re-judged above were marked unsynced; the others are in MLflow already
    print(f"MLflow sync: {time.perf_counter() - t0:.2f} s" + ("" if tracking.active else " (unavailable)"))
    return tracking


if __name__ == "__main__":
    sys.exit(main())
