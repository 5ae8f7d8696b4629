"""`python -m analysis sweeps/<name>`: re-judge finished trials from their logs, re-sync MLflow, rank, explain.

The top floor of the project: the only analysis module that reads a sweep folder through the launcher's ledger.
Safe to run while the sweep runs (live trials are left to the launcher) and as often as wanted (idempotent).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Sequence


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


def rejudge(cfg, ledger) -> int:
    """Re-parse every trial whose job ended by itself; returns how many records changed."""
    from launcher.judge import judge

    changed = 0
    for r in ledger.trials():
        if not r.job_state or r.state in ("planned", "submitted", "running", "pruned") or r.failure_kind == "hang":
            continue  # live, never run, or judged by the monitor (a hang is not visible in the log alone)
        changes = judge(cfg, r, [Path(p) for p in r.log_paths], job_state=r.job_state, exit_code=r.exit_code,
                        job_error=r.job_error)
        current = {k: getattr(r, k) for k in changes}
        if changes != current:
            ledger.update(r.config_hash, "re-judged by python -m analysis", synced=False, **changes)
            changed += 1
    return changed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m analysis", description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="a sweep folder, e.g. sweeps/tiny")
    parser.add_argument("--no-mlflow", action="store_true", help="skip the MLflow sync")
    args = parser.parse_args(argv)

    from launcher.errors import ParasweepError

    try:
        return _run(args)
    except ParasweepError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code


def _run(args) -> int:
    from launcher.finish import print_results, write_best
    from launcher.ledger import Ledger
    from launcher.tracking_link import TrackingLink

    from analysis.select import rank

    cfg = _load_config(args.folder)
    folder = args.folder
    with Ledger(folder / "ledger.sqlite") as ledger:
        t0 = time.perf_counter()
        changed = rejudge(cfg, ledger)
        parse_s = time.perf_counter() - t0
        records = ledger.trials()
        ranked = rank([asdict(r) for r in records], cfg.analysis.noise_tolerance)
        best = ledger.get(ranked[0]["config_hash"]) if ranked else None
        write_best(cfg, folder, best)
        print_results(cfg, ranked, records)
        print(f"re-parsed {sum(1 for r in records if r.job_state)} trial logs in {parse_s:.2f} s ({changed} changed)")
        if not args.no_mlflow and cfg.tracking.enabled:
            t1 = time.perf_counter()
            tracking = TrackingLink.open(cfg, ledger, folder)
            for r in ledger.trials():
                tracking.sync(r)
            best = ledger.get(best.config_hash) if best else None
            url = tracking.finish(best, {"trials_ok": len(ranked), "trials_total": len(records)},
                                  [p for p in (folder / "plan.csv", folder / "best.json", folder / "config.yaml")
                                   if p.exists()])
            print(f"MLflow sync: {time.perf_counter() - t1:.2f} s" + (f"; runs: {url}" if url else " (unavailable)"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
