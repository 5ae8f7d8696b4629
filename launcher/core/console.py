"""The reporter: the one way library code says something to the person running parasweep.

Library modules never print(); they take a Reporter, which the command line makes once and passes down:
- `Reporter.for_streams()`: rich tables and live views on a terminal; plain lines (tables 160 columns wide, live
  views as one line per change) when stdout is not a terminal (CI logs, pipes);
- `Reporter.quiet()`: says nothing and keeps what it was told in `.lines` (tests, benchmarks).
Messages go to stdout; warnings and errors ('warning: ...', 'error: ...') to stderr. A Reporter holds no global
state: two of them never interfere, and nothing needs resetting between tests.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any, Optional, TextIO

if TYPE_CHECKING:  # rich is imported when a table or a live view is drawn
    from rich.console import Console

PLAIN_WIDTH = 160
"""Width of tables off a terminal: no 80-column wrap in CI logs and pipes."""


class Reporter:
    def __init__(self, out: Optional[TextIO] = None, err: Optional[TextIO] = None, *,
                 interactive: Optional[bool] = None, quiet: bool = False) -> None:
        self.out = out if out is not None else sys.stdout
        self.err = err if err is not None else sys.stderr
        self.quiet_mode = quiet
        self.interactive = (not quiet) and (_isatty(self.out) if interactive is None else interactive)
        """rich live views (progress tables) only on a terminal; plain change-only lines otherwise."""
        self.lines: list[str] = []
        """Everything said (quiet reporters keep it for tests to read)."""
        self._console: Optional[Console] = None

    @classmethod
    def for_streams(cls, out: Optional[TextIO] = None, err: Optional[TextIO] = None) -> Reporter:
        """The command lines' reporter: rich on a terminal, plain lines elsewhere."""
        return cls(out, err)

    @classmethod
    def quiet(cls) -> Reporter:
        return cls(quiet=True)

    # -- lines --------------------------------------------------------------------------------------------------
    def info(self, message: str) -> None:
        """A line for the person running the sweep (stdout)."""
        self._say(self.out, message)

    def warn(self, message: str) -> None:
        """'warning: MESSAGE' on stderr: something went wrong and the work goes on."""
        self._say(self.err, f"warning: {message}")

    def error(self, message: str) -> None:
        """'error: MESSAGE' on stderr: the command stops (the caller returns the exit code)."""
        self._say(self.err, f"error: {message}")

    def note(self, message: str) -> None:
        """A line on stderr without a prefix (progress of a long step, hints)."""
        self._say(self.err, message)

    def _say(self, stream: TextIO, message: str) -> None:
        self.lines.append(message)
        if self.quiet_mode:
            return
        if self._live_console is not None and stream is self.out:
            self._live_console.print(message, markup=False, highlight=False)
            return
        print(message, file=stream, flush=True)

    # -- rich ---------------------------------------------------------------------------------------------------
    def say(self, renderable: Any) -> None:
        """A rich renderable (a Table) or rich text on stdout, laid out for a terminal or at PLAIN_WIDTH columns."""
        self.lines.append(renderable if isinstance(renderable, str) else
                          str(getattr(renderable, "title", "") or "<table>"))
        if not self.quiet_mode:
            self.console.print(renderable)

    @property
    def console(self) -> Console:
        if self._console is None:
            from rich.console import Console

            self._console = Console(file=self.out, width=None if _isatty(self.out) else PLAIN_WIDTH)
        return self._console

    _live_console: Optional[Console] = None
    """The console of the live view being shown (lines go above it), None when none is."""

    def live(self, renderable: Any) -> Any:
        """Start a rich live view of `renderable` (interactive reporters only); returns it, to update and stop."""
        from rich.live import Live

        view = Live(renderable, console=self.console, refresh_per_second=2, transient=False)
        view.start()
        self._live_console = view.console
        return view

    def end_live(self, view: Any) -> None:
        view.stop()
        self._live_console = None


def _isatty(stream: Any) -> bool:
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False
