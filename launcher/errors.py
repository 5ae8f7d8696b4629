"""The small exception hierarchy: every user mistake becomes one of these and exits with code 2."""

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
