"""Shared fixtures: composed configs for the shipped sweeps and a scratch working directory."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

# The session fixture `slurm_env` starts the real local SLURM cluster (tests/slurm/localcluster.sh) on demand.
pytest_plugins = ["slurm.fixtures"]

REPO = Path(__file__).resolve().parent.parent


def pytest_configure(config: pytest.Config) -> None:
    """Give Ctrl-C back to the processes the tests start, when the suite itself was started with SIGINT ignored.

    A shell without job control (a script, `nohup cmd &`, CI runners) starts background commands with SIGINT
    ignored, and an ignored signal stays ignored across fork and exec: the launchers, submitit controllers and
    keepers the tests Ctrl-C would then never see the SIGINT (a trial ran to its end instead of being cancelled).
    A handler installed here is reset to the default by exec, so every child gets the terminal's Ctrl-C again."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def load():
    """load(*overrides) -> RootConfig, composed from conf/ exactly as `python -m launcher` does."""
    from launcher.config.load import load_config

    return lambda *overrides: load_config(list(overrides))


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    """Run in an empty working directory (sweeps/, mlflow.db and mlruns/ land there)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run_launcher(*args: str, cwd: Path, timeout_s: float = 900, env: dict | None = None):
    """Run `python -m launcher ARGS` as a user would (a subprocess in `cwd`); returns the CompletedProcess."""
    import subprocess
    import sys

    full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run([sys.executable, "-m", "launcher", *args], cwd=cwd, env=full_env, capture_output=True,
                          text=True, timeout=timeout_s)


@pytest.fixture(scope="session")
def tiny_sweep(tmp_path_factory):
    """The README's main job, run once per test session: `python -m launcher +sweep=tiny` in a fresh directory.

    Returns (working directory, CompletedProcess). Its sweep folder is <dir>/sweeps/tiny and its MLflow store is
    <dir>/mlflow.db. Tests that only read the result share it; tests that break things run their own sweep.
    """
    work = tmp_path_factory.mktemp("tiny-sweep")
    proc = run_launcher("+sweep=tiny", cwd=work)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return work, proc
