"""Live progress while a sweep runs: a rich view on a terminal, plain change-only lines otherwise (CI logs), through
the sweep's Reporter."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Optional

from launcher.core.console import Reporter
from launcher.core.record import TrialRecord
from launcher.core.states import TrialState
from launcher.run.budget import spent_gpu_hours

PLAIN_HEARTBEAT_S = 30.0


def format_eta(done: int, total: int, elapsed_s: float) -> str:
    if done <= 0 or total <= done:
        return "-" if total > done else "0s"
    remaining = elapsed_s / done * (total - done)
    return _duration(remaining)


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"


def done_count(records: list[TrialRecord]) -> int:
    return sum(r.state.finished for r in records)


def summary_line(records: list[TrialRecord], started_at: float, best: Optional[TrialRecord],
                 done_before: int = 0, budget_gpu_hours: float = 0.0, *,
                 counts: Optional[Mapping[TrialState, int]] = None,
                 ran: Optional[Sequence[TrialRecord]] = None) -> str:
    """One status line; the ETA extrapolates from the trials finished in THIS run (a resumed sweep's earlier
    trials took none of its time). It ends with the GPU-hours spent (of plan.max_gpu_hours when there is one).
    `counts` (state -> trials in it) and `ran` (the records with an attempt, in order), when the caller keeps
    them (launcher.run.view), stand for the passes over `records` that would count them."""
    counts = Counter(counts) if counts is not None else Counter(r.state for r in records)
    total = sum(n for s, n in counts.items() if s.counted)
    done = sum(n for s, n in counts.items() if s.finished)   # done_count, from the counts (one pass a poll)
    states = " ".join(f"{s}={counts[s]}" for s in TrialState if counts[s])
    elapsed = time.time() - started_at
    best_text = (f" | best {best.metrics.get('tokens_per_s', 0):,.0f} tok/s ({best.layout.label()})" if best
                 else "")
    eta = format_eta(done - done_before, total - done_before, elapsed)
    ran = [r for r in records if r.attempts] if ran is None else ran   # a trial never run held none
    spent = spent_gpu_hours(ran, time.time())
    hours = f"{spent:.3g}/{budget_gpu_hours:g}" if budget_gpu_hours else f"{spent:.3g}"
    # after the eta: a plain log prints a line when the part before ' | eta' changes, not at every poll
    return f"[{_duration(elapsed)}] {done}/{total} done | {states}{best_text} | eta {eta} | {hours} GPU-h"


LIVE_ROWS = 20


def _visible(records: list[TrialRecord]) -> list[TrialRecord]:
    """The rows worth a terminal line: live trials first, then the most recently finished; pruned never."""
    shown = [r for r in records if r.state.counted]
    shown.sort(key=lambda r: (not r.is_live, r.state is TrialState.PLANNED, -r.updated_at))
    return shown[:LIVE_ROWS]


class Progress:
    """Call update() after every poll; close() at the end."""

    def __init__(self, title: str, reporter: Reporter, interactive: Optional[bool] = None,
                 budget_gpu_hours: float = 0.0) -> None:
        self.title = title
        self.budget_gpu_hours = budget_gpu_hours
        self.reporter = reporter
        self.interactive = reporter.interactive if interactive is None else interactive
        self.started_at = time.time()
        self._last_key = ""
        self._last_print = 0.0
        self._live = None
        self._done_before: Optional[int] = None  # trials already finished when this run started (a resume)

    def update(self, records: list[TrialRecord], best: Optional[TrialRecord], *,
               counts: Optional[Mapping[TrialState, int]] = None, ran: Optional[Sequence[TrialRecord]] = None) -> None:
        """`counts` and `ran`: as summary_line's."""
        if self._done_before is None:
            self._done_before = done_count(records)
        line = summary_line(records, self.started_at, best, self._done_before, self.budget_gpu_hours,
                            counts=counts, ran=ran)
        if not self.interactive:
            # A line when a trial changes state, else a heartbeat every PLAIN_HEARTBEAT_S (CI logs stay short).
            key = line.split("] ", 1)[1].rsplit(" | eta", 1)[0]
            if key != self._last_key or time.time() - self._last_print > PLAIN_HEARTBEAT_S:
                self.reporter.info(line)
                self._last_key, self._last_print = key, time.time()
            return
        self._render(records, line)

    def _render(self, records: list[TrialRecord], line: str) -> None:
        from rich.table import Table

        table = Table(title=f"{self.title} — {line}", expand=False)
        for col in ("trial", "layout", "state", "attempts", "tokens/s", "peak GB", "note"):
            table.add_column(col)
        for r in _visible(records):
            table.add_row(r.config_hash[:8], r.layout.label(), str(r.state), str(r.attempts),
                          f"{r.metrics.get('tokens_per_s', 0):,.0f}" if r.metrics.get("tokens_per_s") else "",
                          f"{r.metrics.get('peak_mem_gb', 0):.2f}" if r.metrics.get("peak_mem_gb") else "",
                          (r.failure_kind or "")[:20])
        if self._live is None:
            self._live = self.reporter.live(table)
        else:
            self._live.update(table)

    def log(self, message: str) -> None:
        self.reporter.info(message)  # above the live view when one is shown

    def close(self) -> None:
        if self._live is not None:
            self.reporter.end_live(self._live)
            self._live = None
