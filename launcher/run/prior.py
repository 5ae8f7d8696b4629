"""plan.prior_from: a sweep's calibration starts from finished sweeps' calibration.json, when they ran on the same
setup (the cluster and the software stack: `setup`, which calibration.json records).

plan.prior_from names one finished sweep's folder (or its calibration.json), a list of them, or a folder of sweeps
(`sweeps/`: every finished sweep there). One sweep's calibration is the prior as it is (Prior.from_json); several
are pooled (launcher.plan.pooling). A sweep named explicitly must be of this setup and have an applied calibration
(else an error); in a folder of sweeps, those of another setup or never calibrated are skipped with a note, and an
error says so when none is left. The sweep's own folder is never its own history.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from launcher.config.schema import RootConfig
from launcher.core.errors import ConfigError
from launcher.plan.calibrate import Prior
from launcher.plan.constants import Constants
from launcher.plan.pooling import pooled

FIELD = "plan.prior_from"
CALIBRATION = "calibration.json"


def setup(cfg: RootConfig) -> dict:
    """What must match for one sweep's calibration to start another's: the cluster and the software stack."""
    return {"cluster": cfg.cluster.name, "gpu": cfg.cluster.gpu, "backend": cfg.backend.name,
            "precision": cfg.backend.precision}


def entries(value: Any) -> tuple[str, ...]:
    """plan.prior_from as a tuple of places ('' and [] : none)."""
    if isinstance(value, str):
        return (value,) if value else ()
    return tuple(str(v) for v in value)


@dataclass(frozen=True)
class History:
    """The finished sweeps a calibration starts from: (where, calibration.json's content) each, and what was
    skipped in a folder of sweeps (where, why)."""

    used: tuple[tuple[str, dict], ...]
    skipped: tuple[tuple[str, str], ...] = ()

    def notes(self) -> list[str]:
        names = ", ".join(where for where, _ in self.used)
        out = [f"calibration starts from {len(self.used)} finished sweep{'s' * (len(self.used) > 1)} of this setup "
               f"({names})" + (", pooled" if len(self.used) > 1 else "")]
        out += [f"{FIELD}: skipped {where}: {why}" for where, why in self.skipped]
        return out


def prior_from(cfg: RootConfig, constants: Constants, own: Optional[Path] = None,
               say: Callable[[str], None] = lambda line: None) -> Constants | Prior:
    """The calibration's starting point: `constants` (the backend's, measured network applied), or with
    plan.prior_from the calibration of the finished sweeps it names, checked to be of the same setup (`own`: this
    sweep's folder, never read; `say`: where the notes go, which sweeps were used and which skipped)."""
    history = read_history(cfg, own)
    if history is None:
        return constants
    for line in history.notes():
        say(line)
    return prior_of(history, constants)


def prior_of(history: History, constants: Constants) -> Prior:
    if len(history.used) == 1:
        where, data = history.used[0]
        return Prior.from_json(data, constants, source=where)
    source = "pool of " + ", ".join(where for where, _ in history.used)
    return pooled([data for _, data in history.used], constants, source)[0]


def read_history(cfg: RootConfig, own: Optional[Path] = None) -> Optional[History]:
    """The calibrations plan.prior_from names (None: it names none)."""
    places = entries(cfg.plan.prior_from)
    if not places:
        return None
    ours = setup(cfg)
    used: list[tuple[str, dict]] = []
    skipped: list[tuple[str, str]] = []
    for where in places:
        path = Path(where)
        if path.suffix == ".json" or (path / CALIBRATION).exists() or not path.is_dir():
            if own is not None and (path.parent if path.suffix == ".json" else path).resolve() == own.resolve():
                raise ConfigError(FIELD, where, "that is this sweep's own folder: a sweep never starts from itself; "
                                  "name earlier sweeps, or their folder (plan.prior_from=sweeps/)")
            used.append((where, _checked(where, _read(where, path), ours)))
            continue
        for sweep in sorted(p for p in path.iterdir() if p.is_dir()):
            found = _in_folder(sweep, ours, own)
            if isinstance(found, dict):
                used.append((str(sweep), found))
            elif found:
                skipped.append((str(sweep), found))
    if not used:
        raise ConfigError(FIELD, cfg.plan.prior_from, "no finished sweep of this setup (" + _setup_text(ours) + ") "
                          "there" + "".join(f"; skipped {w}: {why}" for w, why in skipped) + ": run one first, or "
                          "start from the a-priori constants (plan.prior_from='')")
    _no_repeats([w for w, _ in used], cfg)
    return History(tuple(used), tuple(skipped))


def _in_folder(sweep: Path, ours: dict, own: Optional[Path]) -> dict | str:
    """A folder of sweeps' member: its calibration, or why it was skipped ('' : not a sweep, no note)."""
    if own is not None and sweep.resolve() == Path(own).resolve():
        return "this sweep itself"
    path = sweep / CALIBRATION
    if not path.exists():
        return "no calibration.json (not finished)" if (sweep / "ledger.sqlite").exists() else ""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return f"cannot read {path} ({exc.__class__.__name__})"
    theirs = data.get("setup") or {}
    if theirs != ours:
        return f"ran on {_setup_text(theirs)}"
    if not data.get("applied"):
        return f"its calibration was never applied ({data.get('note', '')})"
    return dict(data)


def _no_repeats(places: Sequence[str], cfg: RootConfig) -> None:
    seen: set[Path] = set()
    for where in places:
        key = Path(where).resolve()
        key = key.parent if key.suffix == ".json" else key
        if key in seen:
            raise ConfigError(FIELD, cfg.plan.prior_from, f"{where} is named twice: name each finished sweep once")
        seen.add(key)


def _read(where: str, path: Path) -> dict:
    path = path if path.suffix == ".json" else path / CALIBRATION
    try:
        return dict(json.loads(path.read_text()))
    except (OSError, ValueError) as exc:
        raise ConfigError(FIELD, where, f"cannot read {path} ({exc.__class__.__name__}): point it at a finished "
                          "sweep's folder, e.g. plan.prior_from=sweeps/NAME, or a folder of them "
                          "(plan.prior_from=sweeps/)") from None


def _checked(where: str, data: dict, ours: dict) -> dict:
    theirs = data.get("setup") or {}
    if theirs != ours:
        raise ConfigError(FIELD, where, f"that sweep ran on {_setup_text(theirs)}, this one on {_setup_text(ours)}: "
                          "a calibration carries over only on the same cluster and stack")
    if not data.get("applied"):
        raise ConfigError(FIELD, where, f"its calibration was never applied ({data.get('note', '')}): start from "
                          "the a-priori constants (plan.prior_from='') or from a sweep with more measured trials")
    return data


def _setup_text(s: dict) -> str:
    if not s:
        return "an unknown setup (no 'setup' in its calibration.json)"
    return f"cluster {s.get('cluster')} ({s.get('gpu')}), backend {s.get('backend')}, precision {s.get('precision')}"
