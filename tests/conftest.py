"""Shared fixtures: composed configs for the shipped sweeps and a scratch working directory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# The session fixture `slurm_env` starts the real local SLURM cluster (tests/slurm/localcluster.sh) on demand.
pytest_plugins = ["slurm.fixtures"]

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def load():
    """load(*overrides) -> RootConfig, composed from conf/ exactly as `python -m launcher` does."""
    from launcher.config import load_config

    return lambda *overrides: load_config(list(overrides))


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    """Run in an empty working directory (sweeps/, mlflow.db and mlruns/ land there)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path
