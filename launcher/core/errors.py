"""The one exception hierarchy of parasweep, shared by every phase (config, plan, run, logs, report).

Every user mistake becomes a ParasweepError: the command lines print its message (no traceback) and exit with
its exit_code. What is not a user mistake (a bug) is never caught as one of these.
"""

from __future__ import annotations


class ParasweepError(Exception):
    """Base class: a problem the user can fix, reported as one message without a traceback."""

    exit_code = 2


class ConfigError(ParasweepError):
    """A config value is invalid. The message names the field, the value and the fix."""

    def __init__(self, field: str, value: object, fix: str) -> None:
        self.field, self.value, self.fix = field, value, fix
        super().__init__(f"{field}={value!r}: {fix}")


class PlanError(ParasweepError):
    """The grid leaves nothing to run (the message says which constraint removed everything)."""


class SubmissionError(ParasweepError):
    """A job could not be submitted (sbatch refused it, submitit failed)."""


class StorageError(ParasweepError):
    """A sweep folder's file cannot be used (corrupt, another program's, written by a newer parasweep)."""


class ParseError(ParasweepError):
    """A log or result could not be read. The message names the file/line and what was expected.

    The sweep loop never lets one escape for a trial: judging a log is total (analysis.logs.judge records the
    trial as `unknown` with the error in its reason instead of stopping the sweep)."""

    def __init__(self, message: str, *, source: str | None = None, line_no: int | None = None) -> None:
        self.source, self.line_no = source, line_no
        where = source or "<log>"
        if line_no is not None:
            where = f"{where}:{line_no}"
        super().__init__(f"{where}: {message}")
