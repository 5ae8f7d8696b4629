"""Every message about a configuration problem, in one place: what Hydra, OmegaConf, YAML and the file system say,
rephrased as one line that names the field (or the file and line), the value and the fix (a ConfigError or a
ParasweepError: exit code 2), and the one line for a sweep folder that cannot be written mid-run."""

from __future__ import annotations

import difflib
import errno
import re
import sqlite3
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Optional

from launcher.config import schema
from launcher.config.paths import CONFIG_DIR_FLAG, GROUPS, group_options
from launcher.config.schema import RootConfig
from launcher.core.errors import ConfigError, ParasweepError


def _options_text(group: str, user_dirs: Sequence[Path]) -> str:
    options = group_options(group, user_dirs)
    names = ", ".join(o.name if o.shipped else f"{o.name} (from {o.folder})" for o in options)
    if user_dirs:
        return f"valid: {names}"
    return (f"valid: {names}; or your own: DIR/{group}/NAME.yaml with {CONFIG_DIR_FLAG} DIR "
            "(or PARASWEEP_CONFIG_DIR=DIR)")


def _group_options(group: str, user_dirs: Sequence[Path] = ()) -> list[str]:
    return [o.name for o in group_options(group, user_dirs)]


def missing_option(message: str, user_dirs: Sequence[Path] = ()) -> ParasweepError:
    """Hydra's 'Could not find' / 'Could not override' errors, rephrased with the valid options."""
    match = re.search(r"Could not (?:find|load) '([\w\-]+)/([^']+)'", message)
    if match and match.group(1) in GROUPS:
        group, name = match.group(1), match.group(2)
        close = difflib.get_close_matches(name, _group_options(group, user_dirs), n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return ConfigError(group, name, f"is not a supported {group}{hint}; {_options_text(group, user_dirs)}")
    if "Could not override 'sweep'" in message:
        return ConfigError("sweep", "…", "select a sweep with a leading plus: +sweep=NAME "
                           f"({_options_text('sweep', user_dirs)})")
    return ParasweepError(message.splitlines()[0])


def missing_package_line(message: str, cause: str, user_dirs: Sequence[Path]) -> Optional[ParasweepError]:
    """A sweep file without its `# @package _global_` line: its keys land under `sweep.` (sweep.grid, sweep.sweep)
    and OmegaConf reports "Key 'grid' not in 'SweepRunConfig'"; say what is missing instead."""
    where = re.search(r"In '(\w+)/([^']+)'", message)
    full = re.search(r"full_key: (\w+)\.(\w+)", cause) or re.search(r"Could not override '(?:\w+)@(\w+)\.(\w+)'",
                                                                      message)
    if not (where and full and where.group(1) == full.group(1)):
        return None
    group, name = where.groups()
    if full.group(2) not in {f.name for f in fields(RootConfig)}:
        return None
    files = [o.path for o in group_options(group, user_dirs) if o.name == name]
    path = files[0] if files else f"{group}/{name}.yaml"
    return ConfigError(f"+{group}", name, f"{path} must start with the line '# @package _global_' (a {group} file "
                       f"sets top-level keys such as {full.group(2)}); add it as the first line")


def unknown_key(message: str) -> ParasweepError:
    """OmegaConf 'Key X not in Y' (a misspelt key) -> name the key and the valid ones."""
    key = re.search(r"Key '([^']+)' not in '(\w+)'", message)
    full = re.search(r"full_key: ([\w.\[\]]+)", message)
    if key:
        cls = getattr(schema, key.group(2), None)
        valid = ", ".join(f.name for f in fields(cls)) if cls else "see conf/"
        name = full.group(1) if full else key.group(1)
        close = difflib.get_close_matches(key.group(1), [f.name for f in fields(cls)] if cls else [], n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return ConfigError(name, "<unknown key>", f"no such key{hint}; valid keys: {valid}")
    first = message.splitlines()[0]
    return ParasweepError(f"{first}" + (f" (at {full.group(1)})" if full else ""))


def bad_value(message: str, context: str = "") -> ParasweepError:
    """OmegaConf ValidationError ("Value 'abc' of type 'str' could not be converted to Float"); `context` is
    Hydra's "Error merging override KEY=VALUE", which holds the value when OmegaConf's message does not."""
    full = re.search(r"full_key: ([\w.\[\]]+)", message)
    first = message.splitlines()[0]
    if not full:
        return ParasweepError(first)
    value = re.search(r"Value '([^']*)'", first) or re.search(r"override [^=\s]+=(.*)$", context.splitlines()[0]
                                                                if context else "")
    key = full.group(1)
    if "is not a ListConfig" in first:  # a single value where the schema wants a list (grid dimensions)
        return ConfigError(key, value.group(1) if value else "…", f"give a list, e.g. {key}=[1,2,4]")
    kind = re.search(r"could not be converted to (\w+)", first)
    fix = f"give {'an' if kind.group(1)[0] in 'AEIOU' else 'a'} {kind.group(1).lower()}" if kind else \
        f"{first}; give a value of that type"
    return ConfigError(key, value.group(1) if value else "…", fix)


def first_lines(text: str, n: int = 3) -> str:
    return " ".join(line.strip() for line in text.strip().splitlines()[:n])


def unknown_composed_key(path: str, key: str, valid: Sequence[str]) -> ConfigError:
    close = difflib.get_close_matches(key, valid, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return ConfigError(path, "<unknown key>", f"no such key{hint}; valid keys here: {', '.join(valid)}. Only "
                       "+sweep=NAME takes a leading '+': set other keys without it (key=value)")


def decode_error(path: Path, data: bytes, exc: UnicodeDecodeError) -> ParasweepError:
    line = data.count(b"\n", 0, exc.start) + 1
    return ParasweepError(f"{path}:{line}: not UTF-8 text (byte {data[exc.start:exc.start + 1]!r} at offset "
                          f"{exc.start}): save the file as UTF-8")


def find_undecodable(conf: Path) -> Optional[ParasweepError]:
    """Hydra's UnicodeDecodeError does not name the file: find it."""
    for path in sorted(conf.rglob("*.yaml")):
        data = path.read_bytes()
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            return decode_error(path, data, exc)
    return None


def yaml_error(exc: Exception) -> ParasweepError:
    """A YAML syntax error, tab or duplicate key -> 'FILE:LINE: what' (one line)."""
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = (getattr(exc, "problem", None) or str(exc).splitlines()[0]).strip()
    if "'\\t'" in problem:
        problem = "a tab character: YAML indents with spaces"
    elif "duplicate key" in problem:
        problem = f"{problem}: each key may appear once per section"
    where = f"{mark.name}:{mark.line + 1}:{mark.column + 1}" if mark is not None else "a config file"
    return ParasweepError(f"{where}: YAML error: {problem}")


def override_error(message: str, overrides: Sequence[str]) -> ParasweepError:
    """Hydra's override grammar error ("mismatched input '(' ...") -> which override, and how to write it."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    first = message.strip().splitlines()[0] if message.strip() else "cannot parse"
    parser = OverridesParser.create()
    for override in overrides:
        try:
            parser.parse_overrides([override])
        except OverrideParseException:
            key, _, value = override.partition("=")
            return ConfigError(key.lstrip("+~"), value, f"cannot be parsed as an override ({first}): quote a value "
                               f"holding spaces or ()[]{{}}:;$` characters, e.g. {key}='...'; dict keys must be "
                               "plain names")
    return ParasweepError(f"cannot parse the command line: {first}")


STORAGE_ERRNOS = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is exhausted",
                  errno.EROFS: "the file system is read-only", errno.EACCES: "permission denied",
                  errno.EPERM: "operation not permitted", errno.EIO: "an I/O error"}


SQLITE_STORAGE = ("disk is full", "readonly database", "disk i/o error", "unable to open database file")


def storage_problem(exc: BaseException) -> Optional[str]:
    """One line for a write that failed because of the storage (full disk, read-only folder), else None.

    The ledger is safe: every change is one sqlite transaction, and a failed one is rolled back, so the same
    command resumes once there is room again."""
    if isinstance(exc, OSError) and exc.errno in STORAGE_ERRNOS:
        where = f" ({exc.filename})" if exc.filename else ""
        what = STORAGE_ERRNOS[exc.errno]
    elif isinstance(exc, sqlite3.Error) and any(text in str(exc).lower() for text in SQLITE_STORAGE):
        where, what = " (the ledger)", f"the sweep folder cannot be written: {exc}"
    else:
        return None
    return (f"cannot write{where}: {what}. The ledger is intact and running local trials go on: free space or fix "
            "the folder's permissions, then run the same command again to resume")
