"""Load the Hydra config tree into validated dataclasses (the one boundary where OmegaConf becomes objects).

The compose API is used instead of `@hydra.main` so that a user mistake (unknown model, misspelt key, bad value)
becomes one clear message and exit code 2 rather than Hydra's traceback and exit code 1, and so that no
`outputs/` folder is created for a dry run.

The search path: the user's own config folders (`--config-dir DIR`, then `hydra.searchpath=[file:///DIR]`, then
the PARASWEEP_CONFIG_DIR list) come before the shipped tree, so a user file shadows a shipped one of the same name
and adds the names the shipped tree lacks. A group option given as a file (`+sweep=DIR/sweep/NAME.yaml`) adds DIR.
"""

from __future__ import annotations

import contextlib
import difflib
import re
from pathlib import Path
from typing import Iterator, Optional, Sequence

from launcher import inputs
from launcher.errors import ConfigError, ParasweepError
from launcher.paths import GROUPS, check_user_dir, conf_dir, describe, env_config_dirs, group_options
from launcher.schema import RootConfig, register_configs

CONFIG_DIR_FLAG = "--config-dir"


def split_config_dirs(args: Sequence[str]) -> tuple[list[str], list[str]]:
    """Take `--config-dir DIR` / `--config-dir=DIR` (repeatable) out of the command line: (dirs, the rest)."""
    dirs: list[str] = []
    rest: list[str] = []
    items = iter(args)
    for arg in items:
        if arg == CONFIG_DIR_FLAG:
            value = next(items, None)
            if value is None or value.startswith("-") or "=" in value:
                raise ConfigError(CONFIG_DIR_FLAG, value or "", "give a folder: --config-dir DIR")
            dirs.append(value)
        elif arg.startswith(CONFIG_DIR_FLAG + "="):
            dirs.append(arg.split("=", 1)[1])
        else:
            rest.append(arg)
    return dirs, rest


def _searchpath_override(arg: str) -> Optional[list[str]]:
    """The entries of a `hydra.searchpath=[...]` override (None for any other argument)."""
    if not re.match(r"\+{0,2}hydra\.searchpath=", arg):
        return None
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        value = OverridesParser.create().parse_overrides([arg])[0].value()
    except HydraException:
        value = None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError("hydra.searchpath", arg.split("=", 1)[1], "give a list of folders: "
                          "hydra.searchpath=[file:///path/to/dir]")
    return value


_GROUP_FILE = re.compile(rf"(\+{{0,2}})({'|'.join(GROUPS)})=(.+\.ya?ml)")


def _group_file(match: re.Match) -> tuple[Path, str]:
    """`+sweep=DIR/sweep/NAME.yaml` -> (DIR, '+sweep=NAME'): Hydra finds group options by name on the search path,
    so a file given by path must lie in a folder named after its group."""
    plus, group, text = match.groups()
    path = Path(text).expanduser().resolve()
    if not path.is_file():
        raise ConfigError(f"{plus}{group}", text, "no such file")
    if path.parent.name != group:
        raise ConfigError(f"{plus}{group}", text, f"a {group} file given by path must lie in a folder named "
                          f"{group}/: move it to DIR/{group}/{path.name} and run with {CONFIG_DIR_FLAG} DIR "
                          f"{plus}{group}={path.stem}")
    return path.parent.parent, f"{plus}{group}={path.stem}"


def resolve_search_path(overrides: Sequence[str], config_dirs: Sequence[str] = (),
                        environ: Optional[dict] = None) -> tuple[list[Path], list[str]]:
    """(the user's config folders, first match first; the overrides left for Hydra)."""
    named: list[tuple[str, str]] = [(d, CONFIG_DIR_FLAG) for d in config_dirs]
    searchpath: list[tuple[str, str]] = []
    by_file: list[Path] = []
    rest: list[str] = []
    for arg in overrides:
        entries = _searchpath_override(arg)
        group_file = _GROUP_FILE.fullmatch(arg)
        if entries is not None:
            searchpath += [(e, "hydra.searchpath") for e in entries]
        elif group_file:
            folder, arg = _group_file(group_file)
            by_file.append(check_user_dir(str(folder), group_file.group(2)))
            rest.append(arg)
        else:
            rest.append(arg)
    env = [(d, "PARASWEEP_CONFIG_DIR") for d in env_config_dirs(environ)]
    dirs = by_file + [check_user_dir(text, origin) for text, origin in named + searchpath + env]
    unique: list[Path] = []
    for path in dirs:
        if path not in unique:
            unique.append(path)
    return unique, rest


@contextlib.contextmanager
def _hydra(user_dirs: Sequence[Path]) -> Iterator[None]:
    """`initialize_config_dir(conf_dir())` with the user's folders put before the shipped tree.

    Hydra's own `hydra.searchpath` and `--config-dir` append after the primary config folder (the shipped file
    would win over the user's of the same name), so the search path is built here the way initialize_config_dir
    builds it, plus the user's folders ahead of it.
    """
    from hydra import version
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import create_config_search_path
    from hydra.core.config_search_path import SearchPathQuery
    from hydra.initialize import get_gh_backup, restore_gh_from_backup

    backup = get_gh_backup()
    try:
        version.setbase("1.3")
        search_path = create_config_search_path(search_path_dir=str(conf_dir()))
        for folder in user_dirs:  # each one just before the shipped tree: the order given is kept
            search_path.prepend("parasweep user config", f"file://{folder}", anchor=SearchPathQuery(provider="main"))
        Hydra.create_main_hydra2(task_name="parasweep", config_search_path=search_path)
        yield
    finally:
        restore_gh_from_backup(backup)


def _options_text(group: str, user_dirs: Sequence[Path]) -> str:
    options = group_options(group, user_dirs)
    names = ", ".join(o.name if o.shipped else f"{o.name} (from {o.folder})" for o in options)
    if user_dirs:
        return f"valid: {names}"
    return (f"valid: {names}; or your own: DIR/{group}/NAME.yaml with {CONFIG_DIR_FLAG} DIR "
            "(or PARASWEEP_CONFIG_DIR=DIR)")


def _group_options(group: str, user_dirs: Sequence[Path] = ()) -> list[str]:
    return [o.name for o in group_options(group, user_dirs)]


def _explain_missing(message: str, user_dirs: Sequence[Path] = ()) -> ParasweepError:
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


def _explain_package(message: str, cause: str, user_dirs: Sequence[Path]) -> Optional[ParasweepError]:
    """A sweep file without its `# @package _global_` line: its keys land under `sweep.` (sweep.grid, sweep.sweep)
    and OmegaConf reports "Key 'grid' not in 'SweepRunConfig'"; say what is missing instead."""
    from dataclasses import fields

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


def _explain_key(message: str) -> ParasweepError:
    """OmegaConf 'Key X not in Y' (a misspelt key) -> name the key and the valid ones."""
    key = re.search(r"Key '([^']+)' not in '(\w+)'", message)
    full = re.search(r"full_key: ([\w.\[\]]+)", message)
    if key:
        from dataclasses import fields

        from launcher import schema

        cls = getattr(schema, key.group(2), None)
        valid = ", ".join(f.name for f in fields(cls)) if cls else "see conf/"
        name = full.group(1) if full else key.group(1)
        close = difflib.get_close_matches(key.group(1), [f.name for f in fields(cls)] if cls else [], n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return ConfigError(name, "<unknown key>", f"no such key{hint}; valid keys: {valid}")
    first = message.splitlines()[0]
    return ParasweepError(f"{first}" + (f" (at {full.group(1)})" if full else ""))


def _explain_value(message: str, context: str = "") -> ParasweepError:
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


def compose(overrides: Sequence[str], config_dirs: Sequence[str] = ()) -> "object":
    """Compose conf/config.yaml with the command-line overrides; returns the OmegaConf DictConfig.

    `config_dirs` are the user's config folders from the command line (--config-dir), searched first."""
    from hydra import compose as hydra_compose
    from hydra.errors import HydraException, MissingConfigException
    from omegaconf.errors import ConfigKeyError, OmegaConfBaseException

    register_configs()
    user_dirs, overrides = resolve_search_path(overrides, config_dirs)
    try:
        with _file_errors_explained(overrides, user_dirs), _hydra(user_dirs):
            return hydra_compose(config_name="config", overrides=list(overrides))
    except MissingConfigException as exc:
        raise _explain_missing(str(exc), user_dirs) from None
    except ConfigKeyError as exc:
        raise _explain_key(str(exc)) from None
    except HydraException as exc:
        cause = exc.__cause__
        package = _explain_package(str(exc), str(cause or exc.__context__ or ""), user_dirs)
        if package is not None:
            raise package from None
        if cause is not None and "not in '" in str(cause):  # ConfigKeyError/ConfigAttributeError: misspelt key
            raise _explain_key(str(cause)) from None
        if isinstance(cause, OmegaConfBaseException):  # a value of the wrong type
            raise _explain_value(str(cause), str(exc)) from None
        text = str(exc)
        if "Could not" in text:
            raise _explain_missing(text, user_dirs) from None
        raise ParasweepError(_first_lines(text)) from None
    except OmegaConfBaseException as exc:
        raise ParasweepError(_first_lines(str(exc))) from None


@contextlib.contextmanager
def _file_errors_explained(overrides: Sequence[str], user_dirs: Sequence[Path] = ()):
    """YAML syntax errors, tabs, duplicate keys, non-UTF-8 files and unparsable overrides -> one message naming the
    file and line, or the override (launcher/inputs.py)."""
    import yaml
    from hydra.errors import OverrideParseException

    try:
        yield
    except yaml.YAMLError as exc:
        raise inputs.yaml_error(exc) from None
    except UnicodeDecodeError as exc:
        found = next((e for e in map(inputs.find_undecodable, [*user_dirs, conf_dir()]) if e is not None), None)
        raise (found or ParasweepError(f"a config file is not UTF-8 text: {exc}")) from None
    except OverrideParseException as exc:
        raise inputs.override_error(str(exc), overrides) from None


def _first_lines(text: str, n: int = 3) -> str:
    return " ".join(line.strip() for line in text.strip().splitlines()[:n])


def load_config(overrides: Sequence[str], config_dirs: Sequence[str] = ()) -> RootConfig:
    """Compose and validate: returns dataclasses with __post_init__ checks already run. `--config-dir DIR` in
    `overrides` is taken as a config folder too (the command line as the user typed it)."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    flag_dirs, overrides = split_config_dirs(overrides)
    cfg = compose(overrides, [*flag_dirs, *config_dirs])
    inputs.check_known_keys(cfg, RootConfig)  # a '+key=value' adds keys the conversion would silently drop
    try:
        obj = OmegaConf.to_object(cfg)
    except ConfigError:
        raise
    except OmegaConfBaseException as exc:
        cause = exc.__cause__ or exc.__context__
        if isinstance(cause, ParasweepError):
            raise cause from None
        raise _explain_key(str(exc)) from None
    assert isinstance(obj, RootConfig)
    inputs.check_values(obj)  # one-line strings, valid dict keys, finite floats
    from launcher.plan.constants import resolve_precision

    obj.backend.precision = resolve_precision(obj.backend.precision, obj.cluster)
    return obj


def reproducible_args(args: Sequence[str]) -> list[str]:
    """The command line with every config folder in effect spelt out as --config-dir (PARASWEEP_CONFIG_DIR
    included), so that command.txt reruns the sweep without the environment it was started in."""
    flag_dirs, rest = split_config_dirs(args)
    user_dirs, _ = resolve_search_path(rest, flag_dirs)
    searchpath_free = [a for a in rest if _searchpath_override(a) is None]
    return [part for d in user_dirs for part in (CONFIG_DIR_FLAG, str(d))] + [
        _GROUP_FILE.sub(lambda m: _group_file(m)[1], a) for a in searchpath_free]


def describe_groups(args: Sequence[str] = ()) -> str:
    """`python -m launcher --list`: every option of every group, shipped and the user's, with where it comes from
    and the first comment line of its file."""
    flag_dirs, rest = split_config_dirs(args)
    user_dirs, _ = resolve_search_path(rest, flag_dirs)
    lines = [f"shipped configs: {conf_dir()}",
             "your config folders: " + (", ".join(map(str, user_dirs)) if user_dirs else
                                        f"none (add {CONFIG_DIR_FLAG} DIR or PARASWEEP_CONFIG_DIR=DIR)")]
    for group in GROUPS:
        options = group_options(group, user_dirs)
        select = "+sweep=NAME" if group == "sweep" else f"{group}=NAME"
        lines.append(f"\n{group} ({select}):")
        width = max((len(o.name) for o in options), default=0)
        for o in options:
            origin = "shipped" if o.shipped else f"{o.folder}" + (" (shadows the shipped one)" if o.shadows else "")
            about = describe(o.path)
            lines.append(f"  {o.name:<{width}}  {origin}" + (f": {about}" if about else ""))
    return "\n".join(lines)


def to_yaml(cfg: RootConfig) -> str:
    """The resolved config (the sweep folder's config.yaml). A model read from a config.json is written with its
    shape and without hf_config, so that `python -m analysis` never needs that file again (model.source names it)."""
    from dataclasses import replace

    from omegaconf import OmegaConf

    if cfg.model.hf_config:
        cfg = replace(cfg, model=replace(cfg.model, hf_config=""))
    return OmegaConf.to_yaml(OmegaConf.structured(cfg))
