"""The plan a sweep folder's ledger was given, kept with it: a resume of the same sweep does not plan again.

Planning a 161k-point grid prices ~17k batch classes (~11 s, issue 19), and a resume of the same command gets the
same plan. Ledger.add_trials keeps, in the transaction that inserts the plan's trials, the plan's key and its kept
trials' config hashes in plan order, with the size and digest of the plan.csv written with them; a resume whose key
matches, and whose plan.csv is that one, reads them back (with the layouts from the trials' rows) instead of
planning. The key covers what a plan depends on: the whole config, the estimator's constants
(a measured network or GEMM efficiency) and the planner's own code and data (launcher/plan, launcher/core,
launcher/config). The ledger stays the one source of truth: a plan's trials and its key are committed together or
not at all, so a launcher killed while planning or inserting leaves no key, and the next one plans again.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Optional

from launcher.config.schema import RootConfig
from launcher.core import strict_json
from launcher.core.console import Reporter
from launcher.core.layout import Layout
from launcher.plan.constants import Constants
from launcher.run.folder import SweepFolder
from launcher.run.ledger import Ledger

_PACKAGE = Path(__file__).resolve().parents[1]
PLANNER_SOURCES = ("plan", "core", "config")
"""launcher's sub-packages whose code and data make a plan (their .py and .json files go into the key)."""


@dataclass(frozen=True)
class StoredPlan:
    """A plan as the ledger keeps it: its key and its kept trials, in plan order (their estimates are in the
    ledger's rows, and plan.csv holds the rest)."""

    key: str
    config_hashes: tuple[str, ...]
    ledger_path: Path

    @functools.cached_property
    def layouts(self) -> tuple[Layout, ...]:
        """The kept trials' layouts, from their rows (read when asked: only SLURM's preflight and the probes need
        them, ~0.5 s at 50k trials)."""
        with Ledger(self.ledger_path, create=False) as ledger:
            by_hash = ledger.layouts()
        return tuple(by_hash[h] for h in self.config_hashes)


@functools.lru_cache(maxsize=1)
def planner_digest() -> str:
    """sha256 of the planner's sources (a new release's planner may plan differently: a resume plans again)."""
    digest = hashlib.sha256()
    for sub in PLANNER_SOURCES:
        for path in sorted((_PACKAGE / sub).rglob("*")):
            if path.suffix in (".py", ".json") and path.is_file():
                digest.update(str(path.relative_to(_PACKAGE)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def plan_key(cfg: RootConfig, constants: Optional[Constants] = None) -> str:
    """What a plan made by make_plan(cfg, constants=constants) depends on, as one hash."""
    text = strict_json.dumps({"config": asdict(cfg), "constants": repr(constants), "planner": planner_digest()},
                             sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def load(cfg: RootConfig, reporter: Reporter) -> Optional[StoredPlan]:
    """The plan the sweep folder's ledger holds, on a resume (not sweep.fresh); None when there is none to use (one
    line says why, when a ledger exists)."""
    folder = SweepFolder.of(cfg.sweep.root_dir, cfg.sweep.name)
    if cfg.sweep.fresh or not folder.ledger.is_file():
        return None
    with Ledger(folder.ledger, create=False) as ledger:
        stored = ledger.stored_plan()
        if stored is None:
            reporter.info(f"no stored plan in {folder.ledger} (a folder of an earlier release): planning again")
            return None
        key, hashes = stored
        known = ledger.config_hashes()
    key, _, stamp = key.partition("|")
    if stamp != csv_stamp(folder.plan_csv):
        reporter.info(f"{folder.plan_csv} is not the one written with the stored plan (missing or changed): "
                      "planning again")
        return None
    missing = [h for h in hashes if h not in known]
    if missing or not hashes:
        reporter.info(f"the stored plan in {folder.ledger} names {len(missing)} trial(s) the ledger lacks "
                      f"(e.g. {(missing or ['none'])[0]}): planning again")
        return None
    return StoredPlan(key, tuple(hashes), folder.ledger)


def stored_key(key: str, plan_csv: Path) -> str:
    """What the ledger keeps as the plan's key: the key and the stamp of the plan.csv written with the plan (a
    launcher killed between writing another plan's plan.csv and the ledger leaves a stamp that no longer holds)."""
    return f"{key}|{csv_stamp(plan_csv)}"


def csv_stamp(path: Path) -> str:
    """plan.csv's size and sha256 ('' when it is missing). Its content, not its modification time: a sweep folder
    copied or unpacked elsewhere (tar keeps whole seconds, a copy may keep none) holds the same plan and resumes
    without planning again; a plan.csv rewritten by another plan differs in content."""
    digest = hashlib.sha256()
    try:
        with path.open("rb") as stream:
            for block in iter(functools.partial(stream.read, 1 << 20), b""):
                digest.update(block)
            size = stream.tell()
    except FileNotFoundError:
        return ""
    return f"{size}:{digest.hexdigest()}"
