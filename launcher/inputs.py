"""Input safety: every config value is checked at load, so that nothing reaches a shell, an #SBATCH header, the
filesystem or a report unchecked, and every mistake is one message naming the field (exit code 2).

Generic, so that it follows the schema as it grows: the checks walk the dataclass fields of the loaded RootConfig
(nested sections, lists and dicts included) instead of naming fields one by one.
- Every string (values, list items, dict keys and values) is one line: no newline, carriage return or NUL. A value
  lands in an `#SBATCH` line, a `srun` line or a generated script, where a newline starts a command (submitit
  writes `#SBATCH --account=VALUE` as is). Everything else in the generated scripts is shell-quoted
  (launcher/backends/launch.py, analysis/export.py); `executor.setup` lines are shell code by design.
- Dict keys follow the rule of what they become: `executor.env` keys are environment variable names
  (`export NAME=...`), `executor.sbatch_args` keys are sbatch option names (`#SBATCH --NAME=...`), any other dict
  key is a plain name.
- Every float is finite (`nan` would switch hang detection off, `inf` would never fire).
- No key the schema does not know: Hydra's append syntax (`+grid.tpp=[1,2]`) adds keys to a structured config
  without complaint, and the dataclass conversion silently drops them. Only `+sweep=NAME` takes a plus.
- The config files themselves: YAML syntax errors, tabs, duplicate keys and non-UTF-8 bytes are reported with the
  file and line; a sweep file without `# @package _global_` is named.
- The run environment (`check_environment`, not part of loading, so that tests can load any config): the sweep
  folder can be created and written, and `executor=slurm` finds SLURM's commands.
"""

from __future__ import annotations

import dataclasses
import errno
import math
import os
import re
import shutil
import tempfile
import typing
from pathlib import Path
from typing import Any, Iterator, Optional, Sequence

from launcher.errors import ConfigError, ParasweepError

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
SBATCH_OPTION = re.compile(r"[A-Za-z][A-Za-z0-9-]*")
PLAIN_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
KEY_RULES = {
    "executor.env": (ENV_NAME, "an environment variable name (letters, digits, '_'; not starting with a digit)"),
    "executor.sbatch_args": (SBATCH_OPTION, "an sbatch option name without dashes, e.g. mail-type"),
}
SHELL_CODE_FIELDS = ("executor.setup",)
"""Fields whose lines are shell code by design (module load, venv activation): one line each, run as written."""
FORBIDDEN_CHARS = {"\n": "a newline", "\r": "a carriage return", "\0": "a NUL byte"}
MAX_VALUE_CHARS = 4096
SLURM_COMMANDS = ("sbatch", "sacct", "scancel")
"""What the launcher itself runs for executor=slurm (scontrol runs in the job, on the nodes)."""


# -- the loaded config ---------------------------------------------------------------------------------------------
def walk(obj: Any, prefix: str = "") -> Iterator[tuple[str, Any, Optional[str]]]:
    """(field path, value, dict-key-of) for every leaf of a dataclass tree; dict keys come as their own leaves
    (third item = the dict's path), list items as path[i]."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        for f in dataclasses.fields(obj):
            yield from walk(getattr(obj, f.name), f"{prefix}.{f.name}" if prefix else f.name)
    elif isinstance(obj, dict):
        for key, value in obj.items():
            yield f"{prefix}[{key!r}]", key, prefix
            yield from walk(value, f"{prefix}.{key}")
    elif isinstance(obj, (list, tuple)):
        for i, item in enumerate(obj):
            yield from walk(item, f"{prefix}[{i}]")
    else:
        yield prefix, obj, None


def check_values(cfg: Any) -> None:
    """Every string one line, every dict key a valid name, every float finite (ConfigError naming the field)."""
    for path, value, key_of in walk(cfg):
        if key_of is not None:
            _check_key(key_of, value)
        if isinstance(value, str):
            _check_string(path, value)
        elif isinstance(value, float) and not math.isfinite(value):
            raise ConfigError(path, value, "use a finite number")


def _check_string(path: str, value: str) -> None:
    for char, name in FORBIDDEN_CHARS.items():
        if char in value:
            where = "one shell line each" if _base(path) in SHELL_CODE_FIELDS else "one line"
            raise ConfigError(path, value, f"contains {name}: values must be {where} (they end up in #SBATCH lines "
                              "and generated scripts)")
    if len(value) > MAX_VALUE_CHARS:
        raise ConfigError(path, value[:40] + "...", f"is {len(value)} characters long: use at most {MAX_VALUE_CHARS}")


def _check_key(dict_path: str, key: Any) -> None:
    pattern, what = KEY_RULES.get(_base(dict_path), (PLAIN_KEY, "a plain name (letters, digits, '_', '.', '-')"))
    if not isinstance(key, str) or not pattern.fullmatch(key):
        raise ConfigError(f"{dict_path}[{key!r}]", key, f"this key must be {what}")


def _base(path: str) -> str:
    """executor.setup[2] -> executor.setup; grid.include[0].tp -> grid.include.tp."""
    return re.sub(r"\[[^\]]*\]", "", path)


# -- the composed (not yet converted) config -----------------------------------------------------------------------
def check_known_keys(node: Any, schema: type, prefix: str = "") -> None:
    """Every key of the composed OmegaConf node is a field of its dataclass (recursing into nested sections)."""
    hints = typing.get_type_hints(schema)
    names = [f.name for f in dataclasses.fields(schema)]
    for key in node.keys():
        path = f"{prefix}.{key}" if prefix else str(key)
        if key not in names:
            raise _unknown_key(path, str(key), names)
        sub = hints.get(key)
        if dataclasses.is_dataclass(sub) and _is_mapping(node, key):
            check_known_keys(node[key], sub, path)


def _is_mapping(node: Any, key: str) -> bool:
    from omegaconf import DictConfig, OmegaConf

    return not OmegaConf.is_missing(node, key) and isinstance(node._get_node(key), DictConfig)


def _unknown_key(path: str, key: str, valid: Sequence[str]) -> ConfigError:
    import difflib

    close = difflib.get_close_matches(key, valid, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return ConfigError(path, "<unknown key>", f"no such key{hint}; valid keys here: {', '.join(valid)}. Only "
                       "+sweep=NAME takes a leading '+': set other keys without it (key=value)")


# -- the config files --------------------------------------------------------------------------------------------
PACKAGE_GLOBAL = "# @package _global_"


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise decode_error(path, path.read_bytes(), exc) from None


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


# -- the run environment -------------------------------------------------------------------------------------------
def check_environment(cfg: Any) -> None:
    """What must hold before a run or a dry run touches anything: a writable sweep folder; SLURM's commands."""
    check_writable_folder(Path(cfg.sweep.root_dir) / cfg.sweep.name, "sweep.root_dir", cfg.sweep.root_dir)
    if cfg.executor.name == "slurm" and not cfg.dry_run:
        missing = [cmd for cmd in SLURM_COMMANDS if shutil.which(cmd) is None]
        if missing:
            raise ConfigError("executor.name", "slurm", f"SLURM's {', '.join(missing)} not found on PATH: run on a "
                              "login node of the cluster (or load its slurm module), or use executor=local")


def check_writable_folder(folder: Path, field: str, value: str) -> None:
    """The folder exists and is writable, or can be created: tried for real (root ignores permission bits, a
    read-only mount or /proc do not show in them) with a probe directory that is removed at once."""
    if len(os.fsencode(folder.name)) > 200 or len(os.fsencode(str(folder.absolute()))) > 3000:
        raise ConfigError(field, value, f"{folder} is too long a path: use a shorter sweep.root_dir / sweep.name")
    probe = folder
    while not probe.exists() and probe.parent != probe:
        probe = probe.parent
    if not probe.is_dir():
        raise ConfigError(field, value, f"cannot create {folder}: {probe} is not a directory")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".parasweep-probe-", dir=probe))
    except OSError as exc:
        raise ConfigError(field, value, f"cannot write in {probe} ({exc.strerror}): pick a folder you can write "
                          "(sweep.root_dir=PATH)") from None


# -- storage failures mid-run ------------------------------------------------------------------------------------
STORAGE_ERRNOS = {errno.ENOSPC: "the disk is full", errno.EDQUOT: "the disk quota is exhausted",
                  errno.EROFS: "the file system is read-only", errno.EACCES: "permission denied",
                  errno.EPERM: "operation not permitted", errno.EIO: "an I/O error"}
SQLITE_STORAGE = ("disk is full", "readonly database", "disk i/o error", "unable to open database file")


def storage_problem(exc: BaseException) -> Optional[str]:
    """One line for a write that failed because of the storage (full disk, read-only folder), else None.

    The ledger is safe: every change is one sqlite transaction, and a failed one is rolled back, so the same
    command resumes once there is room again."""
    import sqlite3

    if isinstance(exc, OSError) and exc.errno in STORAGE_ERRNOS:
        where = f" ({exc.filename})" if exc.filename else ""
        what = STORAGE_ERRNOS[exc.errno]
    elif isinstance(exc, sqlite3.Error) and any(text in str(exc).lower() for text in SQLITE_STORAGE):
        where, what = " (the ledger)", f"the sweep folder cannot be written: {exc}"
    else:
        return None
    return (f"cannot write{where}: {what}. The ledger is intact and running local trials go on: free space or fix "
            "the folder's permissions, then run the same command again to resume")
