"""SweepFolder: every path of a sweep folder (sweeps/<name>/), in one place.

    sweeps/<name>/
      config.yaml       the resolved config (what `python -m analysis` reloads)
      command.txt       the command that made the sweep (shlex.join; read back with shlex.split)
      plan.csv          the ranked plan, with what was pruned and why
      ledger.sqlite     the durable state (launcher.run.ledger)
      .lock             one launcher per folder (flock)
      trials/<hash>/    each trial's launch.sh, side files (ds_config.json) and trial.json
      jobs/             submitit's job folders and the task logs
      calibration.json  the estimator's constants fitted to the measured trials (launcher.run.search)
      netbench-<cluster>-<nodes>n.json, netbench/    the network probe's result and job (launcher.run.network)
      computebench-<cluster>-<gpu>.json, computebench/    the compute probe's result and job (launcher.run.compute)
      best.json         the winner and its exact command
      plots/, report.html, export/    the end-of-sweep outputs (analysis.report.conclusion)
"""

from __future__ import annotations

import contextlib
import fcntl
import shlex
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from launcher.core import files
from launcher.core.errors import ConfigError
from launcher.core.inside import inside


@dataclass(frozen=True)
class SweepFolder:
    root: Path

    @classmethod
    def of(cls, root_dir: str | Path, name: str) -> SweepFolder:
        return cls(inside(Path(root_dir), name, "sweep.name"))

    # -- files ------------------------------------------------------------------------------------------------
    @property
    def config(self) -> Path:
        return self.root / "config.yaml"

    @property
    def command(self) -> Path:
        return self.root / "command.txt"

    @property
    def plan_csv(self) -> Path:
        return self.root / "plan.csv"

    @property
    def ledger(self) -> Path:
        return self.root / "ledger.sqlite"

    @property
    def lock(self) -> Path:
        return self.root / ".lock"

    @property
    def calibration(self) -> Path:
        """The current calibration's fitted constants (launcher.run.search; recomputed from the ledger on resume)."""
        return self.root / "calibration.json"

    @property
    def best(self) -> Path:
        return self.root / "best.json"

    @property
    def report(self) -> Path:
        return self.root / "report.html"

    @property
    def plots(self) -> Path:
        return self.root / "plots"

    @property
    def export(self) -> Path:
        return self.root / "export"

    @property
    def jobs(self) -> Path:
        return self.root / "jobs"

    def trial(self, config_hash: str) -> Path:
        return self.root / "trials" / config_hash

    def trial_launch(self, config_hash: str) -> Path:
        return self.trial(config_hash) / "launch.sh"

    # -- the command that made the sweep ----------------------------------------------------------------------
    def write_command(self, argv: Sequence[str]) -> None:
        self.command.write_text(shlex.join(argv) + "\n")

    def read_command(self, fallback: str) -> str:
        return self.command.read_text().strip() if self.command.is_file() else fallback

    # -- life cycle -------------------------------------------------------------------------------------------
    def create(self) -> None:
        """The folder, or one message naming what stands in its way (a dangling link, a file of that name)."""
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise ConfigError("sweep.name", self.root.name, self._blocked_because()) from None

    def _blocked_because(self) -> str:
        for part in [self.root, *self.root.parents]:
            if part.is_symlink() and not part.exists():
                return (f"{part} is a symbolic link to {part.readlink()}, which does not exist: create the link's "
                        f"target, remove the link, or pick another sweep.name / sweep.root_dir")
            if part.exists() and not part.is_dir():
                return f"{part} is a file, not a folder: move it away, or pick another sweep.name / sweep.root_dir"
        return f"{self.root} cannot be created as a folder: pick another sweep.name / sweep.root_dir"

    def keep_aside(self) -> Path:
        """sweep.fresh=true: rename the folder to <name>.<mtime stamp> (never while a launcher works in it)."""
        with self.exclusive():
            pass
        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime(self.root.stat().st_mtime))
        kept = self.root.with_name(f"{self.root.name}.{stamp}")
        self.root.rename(kept)
        return kept

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[None]:
        """One launcher per sweep folder: a second one would resubmit the first one's in-flight trials."""
        with self.lock.open("a+") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise ConfigError("sweep.name", self.root.name, f"another launcher is running this sweep "
                                  f"({self.root}); wait for it, or stop it first") from None
            yield

    def write_atomic(self, path: Path, text: str) -> Path:
        """Write via a temporary file and rename: a reader never sees half a file."""
        return files.write_atomic(path, text)
