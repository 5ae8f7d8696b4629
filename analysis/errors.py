"""Errors raised by the analysis library.

`analysis` must not import `launcher` (the dependency points launcher -> analysis), so this is a separate small
hierarchy; the launcher catches `ParseError` per trial and records it instead of stopping the sweep.
"""

from __future__ import annotations


class ParseError(Exception):
    """A log or result could not be read. The message names the file/line and what was expected."""

    def __init__(self, message: str, *, source: str | None = None, line_no: int | None = None) -> None:
        self.source, self.line_no = source, line_no
        where = source or "<log>"
        if line_no is not None:
            where = f"{where}:{line_no}"
        super().__init__(f"{where}: {message}")
