"""Atomic file replacement with a unique temporary name.

Every file the launcher or `python -m analysis` rewrites (plan.csv, best.json, the report, plots, the export, the
keeper's record, a probe's JSON) goes through here: written beside its target under a name no other process uses
(pid and a random part: a fixed `x.tmp` let a sweep and an analysis running at once rename each other's half-written
file away, or fail on one already renamed), then moved over the target with os.replace, so a reader sees the old
file or the new one, never half of one. A failed write removes its temporary file.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Optional, Union


def temporary_beside(path: Path, suffix: str = ".tmp") -> Path:
    """A name in the target's folder that no other writer picks (a hidden file, so globs of the folder skip it)."""
    return path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}{suffix}")


@contextlib.contextmanager
def replacing(path: Path, suffix: str = ".tmp") -> Iterator[Path]:
    """Yields the temporary path to write; on success it replaces `path`, on an error it is removed."""
    tmp = temporary_beside(path, suffix)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()


def write_atomic(path: Path, data: Union[str, bytes], *, mode: Optional[int] = None, encoding: str = "utf-8") -> Path:
    """Write `data` to `path` atomically (text as `encoding`); `mode` sets the permission bits (e.g. 0o755)."""
    with replacing(path) as tmp:
        if isinstance(data, bytes):
            tmp.write_bytes(data)
        else:
            tmp.write_text(data, encoding=encoding)
        if mode is not None:
            tmp.chmod(mode)
    return path
