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
import dataclasses
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Optional

from launcher.config import checks, hf_config, messages
from launcher.config.paths import (
    CONFIG_DIR_FLAG,
    GROUPS,
    check_user_dir,
    conf_dir,
    describe,
    env_config_dirs,
    group_options,
)
from launcher.config.schema import ModelConfig, RootConfig
from launcher.core.errors import ConfigError, ParasweepError
from launcher.core.names import PrecisionSetting, resolve_precision


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


def compose(overrides: Sequence[str], config_dirs: Sequence[str] = ()) -> object:
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
        raise messages.missing_option(str(exc), user_dirs) from None
    except ConfigKeyError as exc:
        raise messages.unknown_key(str(exc)) from None
    except HydraException as exc:
        cause = exc.__cause__
        package = messages.missing_package_line(str(exc), str(cause or exc.__context__ or ""), user_dirs)
        if package is not None:
            raise package from None
        if cause is not None and "not in '" in str(cause):  # ConfigKeyError/ConfigAttributeError: misspelt key
            raise messages.unknown_key(str(cause)) from None
        if isinstance(cause, OmegaConfBaseException):  # a value of the wrong type
            raise messages.bad_value(str(cause), str(exc)) from None
        text = str(exc)
        if "Could not" in text:
            raise messages.missing_option(text, user_dirs) from None
        raise ParasweepError(messages.first_lines(text)) from None
    except OmegaConfBaseException as exc:
        raise ParasweepError(messages.first_lines(str(exc))) from None


@contextlib.contextmanager
def _file_errors_explained(overrides: Sequence[str], user_dirs: Sequence[Path] = ()):
    """YAML syntax errors, tabs, duplicate keys, non-UTF-8 files and unparsable overrides -> one message naming the
    file and line, or the override (launcher/config/messages.py)."""
    import yaml
    from hydra.errors import OverrideParseException

    try:
        yield
    except yaml.YAMLError as exc:
        raise messages.yaml_error(exc) from None
    except UnicodeDecodeError as exc:
        found = next((e for e in map(messages.find_undecodable, [*user_dirs, conf_dir()]) if e is not None), None)
        raise (found or ParasweepError(f"a config file is not UTF-8 text: {exc}")) from None
    except OverrideParseException as exc:
        raise messages.override_error(str(exc), overrides) from None


def register_configs() -> None:
    """Register the schema so that conf/config.yaml can extend it (`defaults: [base_config, ...]`)."""
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name="base_config", node=RootConfig)


def to_objects(node: Any) -> RootConfig:
    """The one conversion from OmegaConf to the schema's objects: a model read from a Hugging Face config.json
    gets its shape first (launcher.config.hf_config), then every value is checked (launcher.config.checks) and the
    precision resolved (`auto` -> what the cluster does well)."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    model = node.model
    if not OmegaConf.is_missing(node, "model") and (model.get("hf_config") or model.get("name") == "hf"):
        defaults = {f.name: f.default for f in dataclasses.fields(ModelConfig)}
        fields = OmegaConf.to_container(model)
        assert isinstance(fields, dict)
        for key, value in hf_config.apply_to_fields({str(k): v for k, v in fields.items()}, defaults).items():
            model[key] = value
    try:
        obj = OmegaConf.to_object(node)
    except OmegaConfBaseException as exc:
        cause = exc.__cause__ or exc.__context__
        if isinstance(cause, ParasweepError):
            raise cause from None
        raise messages.unknown_key(str(exc)) from None
    assert isinstance(obj, RootConfig)
    checks.check_config(obj)
    try:
        precision = resolve_precision(obj.backend.precision, obj.cluster.gpu)
    except ValueError:
        raise ConfigError("backend.precision", str(obj.backend.precision),
                          "use bf16, fp16, fp32, fp8 or auto") from None
    resolved = PrecisionSetting(precision.value)  # the field's type; never `auto` from here on
    return dataclasses.replace(obj, backend=dataclasses.replace(obj.backend, precision=resolved))


def load_config(overrides: Sequence[str], config_dirs: Sequence[str] = ()) -> RootConfig:
    """Compose, convert and check: frozen dataclasses whose every value was checked. `--config-dir DIR` in
    `overrides` is taken as a config folder too (the command line as the user typed it)."""
    flag_dirs, overrides = split_config_dirs(overrides)
    cfg = compose(overrides, [*flag_dirs, *config_dirs])
    checks.check_known_keys(cfg, RootConfig)  # a '+key=value' adds keys the conversion would silently drop
    return to_objects(cfg)


def load_saved(path: Path) -> RootConfig:
    """A sweep folder's config.yaml (written by to_yaml) as the schema's objects, checked like a fresh load."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    try:
        return to_objects(OmegaConf.merge(OmegaConf.structured(RootConfig), OmegaConf.load(path)))
    except (OmegaConfBaseException, ValueError) as exc:  # edited by hand or written by another version
        first = str(exc).splitlines()[0]
        raise ConfigError(str(path), "…", f"does not match this parasweep's schema ({first}); re-create it "
                          "by running the sweep's command again") from None


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
