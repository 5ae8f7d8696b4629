"""plan.prior_from: a sweep's calibration starts from a finished sweep's calibration.json, when it ran on the same
setup (the cluster and the software stack: `setup`, which calibration.json records)."""

from __future__ import annotations

import json
from pathlib import Path

from launcher.config.schema import RootConfig
from launcher.core.errors import ConfigError
from launcher.plan.calibrate import Prior
from launcher.plan.constants import Constants


def setup(cfg: RootConfig) -> dict:
    """What must match for one sweep's calibration to start another's: the cluster and the software stack."""
    return {"cluster": cfg.cluster.name, "gpu": cfg.cluster.gpu, "backend": cfg.backend.name,
            "precision": cfg.backend.precision}


def prior_from(cfg: RootConfig, constants: Constants) -> Constants | Prior:
    """The calibration's starting point: `constants` (the backend's, measured network applied), or with
    plan.prior_from the calibration.json of that finished sweep, checked to be of the same setup."""
    where = cfg.plan.prior_from
    if not where:
        return constants
    path = Path(where)
    path = path if path.suffix == ".json" else path / "calibration.json"
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError("plan.prior_from", where, f"cannot read {path} ({exc.__class__.__name__}): point it at a "
                          "finished sweep's folder, e.g. plan.prior_from=sweeps/NAME") from None
    theirs, ours = data.get("setup") or {}, setup(cfg)
    if theirs != ours:
        raise ConfigError("plan.prior_from", where, f"that sweep ran on {_setup_text(theirs)}, this one on "
                          f"{_setup_text(ours)}: a calibration carries over only on the same cluster and stack")
    if not data.get("applied"):
        raise ConfigError("plan.prior_from", where, f"its calibration was never applied ({data.get('note', '')}): "
                          "start from the a-priori constants (plan.prior_from='') or from a sweep with more "
                          "measured trials")
    return Prior.from_json(data, constants, source=str(where))


def _setup_text(s: dict) -> str:
    if not s:
        return "an unknown setup (no 'setup' in its calibration.json)"
    return f"cluster {s.get('cluster')} ({s.get('gpu')}), backend {s.get('backend')}, precision {s.get('precision')}"
