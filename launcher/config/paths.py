"""Where parasweep's config files live: the shipped tree (from a checkout or an installed wheel) and the user's own
config folders, which come first on the search path so that a user file shadows a shipped one of the same name."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from launcher.core.errors import ConfigError

CONFIG_DIR_FLAG = "--config-dir"
"""The command-line flag naming a user config folder (repeatable)."""
CONFIG_DIR_ENV = "PARASWEEP_CONFIG_DIR"
"""Colon-separated user config folders (like PATH), searched after --config-dir and before the shipped tree."""
GROUPS = ("model", "cluster", "backend", "executor", "sweep")
"""The config groups a user folder may hold, one sub-folder each (model/NAME.yaml, ...)."""


def conf_dir() -> Path:
    """The Hydra config tree (model/, cluster/, ...).

    A wheel ships `conf/` as the package `launcher.conf` (pyproject's package-dir mapping), so that is tried first;
    in a checkout (or an editable install) `launcher.conf` does not exist and `conf/` sits next to `launcher/`.
    """
    from importlib import resources

    try:
        packaged = resources.files("launcher.conf")
    except ModuleNotFoundError:  # checkout or editable install: no launcher.conf package
        packaged = None
    if packaged is not None and packaged.is_dir() and packaged.joinpath("cluster").is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[2] / "conf"   # launcher/config/paths.py -> the checkout's root


def env_config_dirs(environ: Optional[Mapping[str, str]] = None) -> list[str]:
    """The folders named by PARASWEEP_CONFIG_DIR (empty entries are ignored, as in PATH)."""
    value = (os.environ if environ is None else environ).get(CONFIG_DIR_ENV, "")
    return [part for part in value.split(os.pathsep) if part.strip()]


def check_user_dir(text: str, origin: str) -> Path:
    """A user config folder as an absolute path; a folder that is missing, or that holds no config group (the usual
    slip: the project folder instead of its conf folder), or that would replace the shipped defaults, is refused."""
    path = Path(text.removeprefix("file://")).expanduser().resolve()
    if not path.is_dir():
        raise ConfigError(origin, text, "no such folder: give a folder holding model/, cluster/, backend/, "
                          "executor/ or sweep/ sub-folders of YAML files")
    if not any((path / group).is_dir() for group in GROUPS):
        raise ConfigError(origin, text, f"holds none of {', '.join(g + '/' for g in GROUPS)}: give the folder that "
                          "holds them (your files go in e.g. DIR/model/NAME.yaml)")
    if (path / "config.yaml").is_file():
        raise ConfigError(origin, text, "holds a config.yaml, which would replace parasweep's own defaults: move "
                          "it away (choose your model/cluster/backend in a sweep file's defaults instead)")
    return path


def search_dirs(user_dirs: Sequence[Path]) -> list[Path]:
    """The folders searched for a group option, first match wins: the user's, then the shipped tree."""
    out: list[Path] = []
    for path in [*user_dirs, conf_dir()]:
        if path not in out:
            out.append(path)
    return out


@dataclass(frozen=True)
class GroupOption:
    group: str
    name: str
    """The option's name (the file name without .yaml), as given on the command line: model=NAME."""
    folder: Path
    """The config folder it comes from (the user's, or the shipped tree)."""
    shipped: bool
    shadows: bool = False
    """A user file with the name of a shipped one: the user's is used."""

    @property
    def path(self) -> Path:
        return self.folder / self.group / f"{self.name}.yaml"


def group_options(group: str, user_dirs: Sequence[Path] = ()) -> list[GroupOption]:
    """Every option of a group, sorted by name; where a name exists in several folders, the first folder's wins."""
    shipped_dir = conf_dir()
    shipped = {p.stem for p in (shipped_dir / group).glob("*.yaml")}
    found: dict[str, GroupOption] = {}
    for folder in search_dirs(user_dirs):
        for path in sorted((folder / group).glob("*.yaml")):
            if path.stem not in found:
                is_shipped = folder == shipped_dir
                found[path.stem] = GroupOption(group, path.stem, folder, is_shipped,
                                               shadows=not is_shipped and path.stem in shipped)
    return [found[name] for name in sorted(found)]


def describe(path: Path) -> str:
    """The first comment line of a config file (each shipped file starts with one saying what it is)."""
    try:
        with path.open() as handle:
            for line in handle:
                text = line.strip()
                if text.startswith("#") and "@package" not in text:
                    return text.lstrip("#").strip()
                if text and not text.startswith("#"):
                    break
    except OSError:
        pass
    return ""
