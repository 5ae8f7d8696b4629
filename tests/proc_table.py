"""Watching the process table during a test: which trial attempts have live processes, sampled in a thread."""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from pathlib import Path

from launcher.run.reaper import marker_table


def trial_processes(root: Path) -> dict[str, list[int]]:
    """Live processes whose trial marker lies under `root`: marker (the attempt's job folder) -> pids."""
    return {marker: pids for marker, pids in marker_table().items() if marker.startswith(str(root))}


def trial_of(marker: str) -> str:
    """jobs/<config hash>.a<attempt>[.<n>] -> the config hash."""
    return Path(marker).name.split(".a")[0]


class Sampler:
    """Samples the process table every `interval_s` and keeps, per trial, the most attempts alive at once."""

    def __init__(self, root: Path, interval_s: float = 0.2) -> None:
        self.root, self.interval_s = root, interval_s
        self.max_copies: dict[str, int] = defaultdict(int)
        self.doubles: list[tuple[float, str, list[str]]] = []
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def _run(self) -> None:
        while not self._stop.is_set():
            attempts: dict[str, list[str]] = defaultdict(list)
            for marker in trial_processes(self.root):
                attempts[trial_of(marker)].append(marker)
            for trial, markers in attempts.items():
                self.max_copies[trial] = max(self.max_copies[trial], len(markers))
                if len(markers) > 1:
                    self.doubles.append((time.time(), trial, sorted(markers)))
            self.samples += 1
            self._stop.wait(self.interval_s)
