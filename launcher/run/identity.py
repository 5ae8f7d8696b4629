"""What a sweep folder's measurements were measured with, and the refusal to mix in measurements of anything else.

A trial's config hash (Layout.config_hash with launcher.plan.planner.trial_context) names its layout within one
setup and must stay what earlier releases computed (tests/plan/test_trial_identity.py). The setup itself is wider:
every setting that changes what a trial measures. `identity(cfg)` spells it out, one dotted key per setting (the
model's shape and options, the backend's options, precision and program flags, the cluster's GPU, memory limit and
peak, the environment and srun flags of the jobs); the first launcher of a folder keeps it in the ledger, and a
resume with a different one is refused with one message naming each change and the two ways forward. Settings of
the schema that do not change a measurement (where a file came from, the nodes available, bandwidths the estimator
uses, time limits) are listed in NOT_MEASURED; a field a newer schema adds counts unless listed there.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

from launcher.config.schema import RootConfig
from launcher.core import strict_json
from launcher.core.errors import ConfigError
from launcher.plan.planner import trial_context
from launcher.run.folder import SweepFolder
from launcher.run.ledger import Ledger

NOT_MEASURED = frozenset({
    "model.source", "model.hf_config",  # where the shape was read from: the shape itself counts
    "cluster.source", "cluster.nodes", "cluster.partition", "cluster.intra_node_gbytes_per_s",
    "cluster.inter_node_gbytes_per_s", "cluster.hbm_gbytes_per_s",  # what is available, the estimator's datasheet
    "backend.startup_s",  # the GPU-hour estimate's start-up time
    "backend.python",  # which interpreter path: a fix for the nodes, not a change of program
})
EXECUTOR_MEASURED = ("env", "srun_args")
"""The executor's settings that reach the trial's processes (environment, srun flags); setup lines, limits and
SLURM's queue options do not change what a running trial measures."""


def identity(cfg: RootConfig) -> dict[str, str]:
    """Every setting that changes what a trial of this config measures, as dotted key -> JSON text."""
    sections: dict[str, Any] = {"model": asdict(cfg.model), "cluster": asdict(cfg.cluster),
                                "backend": asdict(cfg.backend),
                                "executor": {k: getattr(cfg.executor, k) for k in EXECUTOR_MEASURED}}
    flat: dict[str, str] = {}
    for section, values in sections.items():
        _flatten(section, values, flat)
    return {k: v for k, v in flat.items() if k not in NOT_MEASURED}


def _flatten(prefix: str, value: Any, out: dict[str, str]) -> None:
    if isinstance(value, dict) and prefix != "executor.env":
        for key, item in value.items():
            _flatten(f"{prefix}.{key}", item, out)
    else:
        out[prefix] = strict_json.dumps(value, sort_keys=True, default=str)


def changes(stored: dict[str, str], current: dict[str, str]) -> list[str]:
    """'key: old -> new' for every setting both know that differs (a setting one of them lacks came with another
    release's schema: it is not a change of this sweep)."""
    return [f"{key}: {_shown(stored[key])} -> {_shown(current[key])}" for key in sorted(stored.keys() & current.keys())
            if stored[key] != current[key]]


def _shown(text: str) -> str:
    return text if len(text) <= 60 else text[:57] + "..."


def check_same_setup(cfg: RootConfig, ledger: Ledger, folder: SweepFolder) -> None:
    """A folder holds the measurements of one setup: refuse a resume with another one (ConfigError, exit 2), then
    remember this one. A folder of a release that kept only the trial context is checked on that, and gains the
    full identity now."""
    current = identity(cfg)
    text = ledger.get_meta("identity")
    if text:
        try:
            stored = json.loads(text)
        except ValueError:
            stored = {}
        changed = changes(stored, current) if isinstance(stored, dict) else []
        if changed:
            raise ConfigError("sweep.name", cfg.sweep.name, f"{folder.root} holds trials measured with other "
                              f"settings ({'; '.join(changed)}): resuming would rank them with this run's. Add "
                              "sweep.fresh=true to start over (the old folder is kept), or pick another sweep.name")
    else:
        stored_context, context = ledger.get_meta("context"), trial_context(cfg)
        if stored_context and stored_context != context:
            raise ConfigError("sweep.name", cfg.sweep.name, f"{folder.root} holds trials of another setup "
                              f"({stored_context}; now {context}): add sweep.fresh=true to start over (the old "
                              "folder is kept) or pick another sweep.name")
    ledger.set_meta("context", trial_context(cfg))
    ledger.set_meta("identity", strict_json.dumps({**_known(text), **current}, sort_keys=True))


def _known(text: str | None) -> dict[str, str]:
    """The stored identity's settings this release does not know (kept for the release that does)."""
    try:
        stored = json.loads(text or "{}")
    except ValueError:
        return {}
    return stored if isinstance(stored, dict) else {}
