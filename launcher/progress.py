"""Live progress while a sweep runs: a rich view on a terminal, plain lines otherwise (CI logs)."""

from __future__ import annotations

import sys
import time
from collections import Counter
from typing import Optional

from launcher.ledger import TrialRecord

PLAIN_HEARTBEAT_S = 30.0
ORDER = ("planned", "submitted", "running", "ok", "oom", "failed", "timeout", "hang", "cancelled", "pruned")


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


def summary_line(records: list[TrialRecord], started_at: float, best: Optional[TrialRecord]) -> str:
    counts = Counter(r.state for r in records)
    total = sum(n for s, n in counts.items() if s != "pruned")
    done = sum(counts[s] for s in ("ok", "oom", "failed", "timeout", "hang", "cancelled"))
    states = " ".join(f"{s}={counts[s]}" for s in ORDER if counts[s])
    elapsed = time.time() - started_at
    best_text = (f" | best {best.metrics.get('tokens_per_s', 0):,.0f} tok/s ({_label(best)})" if best else "")
    return f"[{_duration(elapsed)}] {done}/{total} done | {states}{best_text} | eta {format_eta(done, total, elapsed)}"


def _label(record: TrialRecord) -> str:
    lay = record.layout
    return f"tp{lay['tp']} pp{lay['pp']} dp{lay['dp']} mbs{lay['mbs']}"


LIVE_ROWS = 20


def _visible(records: list[TrialRecord]) -> list[TrialRecord]:
    """The rows worth a terminal line: live trials first, then the most recently finished; pruned never."""
    shown = [r for r in records if r.state != "pruned"]
    shown.sort(key=lambda r: (not r.is_live, r.state == "planned", -r.updated_at))
    return shown[:LIVE_ROWS]


class Progress:
    """Call update() after every poll; close() at the end."""

    def __init__(self, title: str, interactive: Optional[bool] = None) -> None:
        self.title = title
        self.interactive = sys.stdout.isatty() if interactive is None else interactive
        self.started_at = time.time()
        self._last_key = ""
        self._last_print = 0.0
        self._live = None

    def update(self, records: list[TrialRecord], best: Optional[TrialRecord]) -> None:
        line = summary_line(records, self.started_at, best)
        if not self.interactive:
            # A line when a trial changes state, else a heartbeat every PLAIN_HEARTBEAT_S (CI logs stay short).
            key = line.split("] ", 1)[1].rsplit(" | eta", 1)[0]
            if key != self._last_key or time.time() - self._last_print > PLAIN_HEARTBEAT_S:
                print(line, flush=True)
                self._last_key, self._last_print = key, time.time()
            return
        self._render(records, line)

    def _render(self, records: list[TrialRecord], line: str) -> None:
        from rich.live import Live
        from rich.table import Table

        table = Table(title=f"{self.title} — {line}", expand=False)
        for col in ("trial", "layout", "state", "attempts", "tokens/s", "peak GB", "note"):
            table.add_column(col)
        for r in _visible(records):
            table.add_row(r.config_hash[:8], _label(r), r.state, str(r.attempts),
                          f"{r.metrics.get('tokens_per_s', 0):,.0f}" if r.metrics.get("tokens_per_s") else "",
                          f"{r.metrics.get('peak_mem_gb', 0):.2f}" if r.metrics.get("peak_mem_gb") else "",
                          (r.failure_kind or "")[:20])
        if self._live is None:
            self._live = Live(table, refresh_per_second=2, transient=False)
            self._live.start()
        else:
            self._live.update(table)

    def log(self, message: str) -> None:
        if self._live is not None:
            self._live.console.print(message)
        else:
            print(message, flush=True)

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
