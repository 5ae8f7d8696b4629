"""Load the Hydra config tree into validated dataclasses (the one boundary where OmegaConf becomes objects).

The compose API is used instead of `@hydra.main` so that a user mistake (unknown model, misspelt key, bad value)
becomes one clear message and exit code 2 rather than Hydra's traceback and exit code 1, and so that no
`outputs/` folder is created for a dry run.
"""

from __future__ import annotations

import contextlib
import difflib
import re
from typing import Sequence

from launcher import inputs
from launcher.errors import ConfigError, ParasweepError
from launcher.paths import conf_dir
from launcher.schema import RootConfig, register_configs


def _group_options(group: str) -> list[str]:
    folder = conf_dir() / group
    return sorted(p.stem for p in folder.glob("*.yaml"))


def _explain_missing(message: str) -> ParasweepError:
    """Hydra's 'Could not find' / 'Could not override' errors, rephrased with the valid options."""
    match = re.search(r"Could not (?:find|load) '([\w\-/.]+)/([\w\-.]+)'", message)
    if match:
        group, name = match.group(1), match.group(2)
        options = _group_options(group)
        close = difflib.get_close_matches(name, options, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        return ConfigError(group, name, f"is not a supported {group}{hint}; valid: {', '.join(options)}")
    if "Could not override 'sweep'" in message:
        return ConfigError("sweep", "…", "select a sweep with a leading plus: +sweep=NAME "
                           f"(valid: {', '.join(_group_options('sweep'))})")
    return ParasweepError(message.splitlines()[0])


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


def _explain_value(message: str) -> ParasweepError:
    """OmegaConf ValidationError ("Value 'abc' of type 'str' could not be converted to Float")."""
    full = re.search(r"full_key: ([\w.\[\]]+)", message)
    first = message.splitlines()[0]
    if full:
        value = re.search(r"Value '([^']*)'", first)
        return ConfigError(full.group(1), value.group(1) if value else "?", f"{first}; give a value of that type")
    return ParasweepError(first)


def compose(overrides: Sequence[str]) -> "object":
    """Compose conf/config.yaml with the command-line overrides; returns the OmegaConf DictConfig."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir
    from hydra.errors import HydraException, MissingConfigException
    from omegaconf.errors import ConfigKeyError, OmegaConfBaseException

    register_configs()
    inputs.check_sweep_file(conf_dir(), overrides)
    try:
        with _file_errors_explained(overrides):
            with initialize_config_dir(config_dir=str(conf_dir()), version_base="1.3"):
                return hydra_compose(config_name="config", overrides=list(overrides))
    except MissingConfigException as exc:
        raise _explain_missing(str(exc)) from None
    except ConfigKeyError as exc:
        raise _explain_key(str(exc)) from None
    except HydraException as exc:
        cause = exc.__cause__
        if cause is not None and "not in '" in str(cause):  # ConfigKeyError/ConfigAttributeError: misspelt key
            raise _explain_key(str(cause)) from None
        if isinstance(cause, OmegaConfBaseException):  # a value of the wrong type
            raise _explain_value(str(cause)) from None
        text = str(exc)
        if "Could not" in text:
            raise _explain_missing(text) from None
        raise ParasweepError(_first_lines(text)) from None
    except OmegaConfBaseException as exc:
        raise ParasweepError(_first_lines(str(exc))) from None


@contextlib.contextmanager
def _file_errors_explained(overrides: Sequence[str]):
    """YAML syntax errors, tabs, duplicate keys, non-UTF-8 files and unparsable overrides -> one message naming the
    file and line, or the override (launcher/inputs.py)."""
    import yaml
    from hydra.errors import OverrideParseException

    try:
        yield
    except yaml.YAMLError as exc:
        raise inputs.yaml_error(exc) from None
    except UnicodeDecodeError as exc:
        raise (inputs.find_undecodable(conf_dir()) or ParasweepError(f"a config file is not UTF-8 text: {exc}")) from None
    except OverrideParseException as exc:
        raise inputs.override_error(str(exc), overrides) from None


def _first_lines(text: str, n: int = 3) -> str:
    return " ".join(line.strip() for line in text.strip().splitlines()[:n])


def load_config(overrides: Sequence[str]) -> RootConfig:
    """Compose and validate: returns dataclasses with __post_init__ checks already run."""
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    cfg = compose(overrides)
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
    return obj


def to_yaml(cfg: RootConfig) -> str:
    from omegaconf import OmegaConf

    return OmegaConf.to_yaml(OmegaConf.structured(cfg))
