"""Paths built from user strings stay inside their root.

A sweep name, an MLflow experiment name or a file name from a config becomes a path component. The config checks
allow plain names only (launcher.config.checks), and every place that joins such a string to a folder goes through
`inside` as well, so that `../../x`, an absolute path or a name with '/' can never write outside the folder it is
meant for, whatever called it (a test, a saved config.yaml edited by hand, a future caller that skips the checks).
"""

from __future__ import annotations

import os
from pathlib import Path

from launcher.core.errors import ConfigError


def inside(root: Path, name: str, field: str) -> Path:
    """`root / name`, when `name` is one plain path component: not empty, not '.' or '..', no '/' or NUL, and
    the joined path is below `root`. Else a ConfigError naming `field`. The check is on the names, not on where
    symbolic links lead: a sweep folder linked to a scratch filesystem is the user's choice."""
    plain = bool(name) and name not in (".", "..") and "/" not in name and "\0" not in name \
        and (os.altsep is None or os.altsep not in name)
    path = root / name if plain else root
    if not plain or not _below(path, root):
        raise ConfigError(field, name, f"use a plain name (letters, digits, '.', '_', '-'): it becomes a folder "
                                       f"inside {root}, and may not lead out of it")
    return path


def _below(path: Path, root: Path) -> bool:
    top, joined = Path(os.path.normpath(root.absolute())), Path(os.path.normpath(path.absolute()))
    return joined != top and joined.is_relative_to(top)
