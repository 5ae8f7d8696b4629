"""Progress of expanding and checking a big grid, on stderr, shown only once planning has taken a second.

    with PlanningProgress(reporter) as progress:
        plan = make_plan(cfg, progress)

On a terminal: a transient rich bar (gone when planning ends). Elsewhere (CI logs, pipes): one plain line every
few seconds. A grid planned in under a second prints nothing.
"""

from __future__ import annotations

import time
from typing import Any, Optional

from launcher.core.console import Reporter

SHOW_AFTER_S = 1.0
PLAIN_EVERY_S = 5.0


class PlanningProgress:
    def __init__(self, reporter: Reporter, show_after_s: float = SHOW_AFTER_S) -> None:
        self.show_after_s = show_after_s
        self.reporter = reporter
        self.stream = reporter.err
        self._started = time.monotonic()
        self._bar: Optional[Any] = None   # a rich Progress, once shown
        self._task: Optional[Any] = None
        self._last_plain = 0.0

    def __enter__(self) -> PlanningProgress:
        self._started = time.monotonic()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def __call__(self, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self._started < self.show_after_s:
            return
        if self._terminal():
            self._rich(done, total)
        elif now - self._last_plain >= PLAIN_EVERY_S or done >= total:
            self._last_plain = now
            self.reporter.note(f"planning: {done:,} of {total:,} grid points checked ({now - self._started:.0f} s)")

    def _terminal(self) -> bool:
        if self.reporter.quiet_mode:
            return False
        isatty: Optional[Any] = getattr(self.stream, "isatty", None)
        return bool(isatty and isatty())

    def _rich(self, done: int, total: int) -> None:
        if self._bar is None:
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

            self._bar = Progress(TextColumn("planning"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                                 console=Console(file=self.stream), transient=True)
            self._task = self._bar.add_task("grid", total=total)
            self._bar.start()
        assert self._task is not None
        self._bar.update(self._task, completed=done)
