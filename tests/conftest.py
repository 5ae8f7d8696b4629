"""Shared fixtures: composed configs for the shipped sweeps and a scratch working directory."""

from __future__ import annotations

import os
import signal
from collections.abc import Generator
from pathlib import Path
from typing import Any

import pytest

try:  # the test extra installs pytest-xdist; without it (or with -p no:xdist) the suite runs in one process
    from xdist.scheduler import LoadScopeScheduling
except ImportError:
    LoadScopeScheduling = None

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


# Two xdist workers (pyproject's addopts): the tests that run real trials (the local executor's torch ranks, the SLURM
# cluster, the MLflow server and the browser) keep to one worker, in file order, started first: they share the
# session's tiny sweep and the two-node cluster, and their time limits and hang windows assume they do not race each
# other. Everything else spreads over the other worker. The controller sees only node ids, so the group is named by
# path; the workers, which see the fixtures and marks, check that every such test is named so.
SERIAL_GROUP = "real-trials"
SERIAL_PATHS = ("tests/e2e/", "tests/run/test_slurm_cluster.py")
SERIAL_NAME_PART = "_slurm_nodes"  # a cluster test beside the unit tests of what it runs there
SERIAL_MARKERS = ("slurm", "browser")
SERIAL_FIXTURES = ("tiny_sweep", "slurm_env")


def in_serial_group(nodeid: str) -> bool:
    path, _, name = nodeid.partition("::")
    return path.startswith(SERIAL_PATHS) or SERIAL_NAME_PART in name


def runs_real_trials(item: pytest.Item) -> bool:
    marked = any(item.get_closest_marker(name) for name in SERIAL_MARKERS)
    return marked or any(name in getattr(item, "fixturenames", ()) for name in SERIAL_FIXTURES)


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> Generator[None, None, None]:
    misplaced = [item.nodeid for item in items if runs_real_trials(item) and not in_serial_group(item.nodeid)]
    if misplaced:
        raise pytest.UsageError(f"{misplaced[:3]} use the SLURM cluster, the tiny sweep or the browser: put them under "
                                f"{SERIAL_PATHS[0]} or name them with '{SERIAL_NAME_PART}' (tests/conftest.py)")
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items.sort(key=lambda item: not in_serial_group(item.nodeid))  # the long group first: it sets the pace
    return (yield)


if LoadScopeScheduling is not None:
    class RealTrialsApart(LoadScopeScheduling):
        """xdist's per-module scheduling, with every test of the serial group in one unit."""

        def _split_scope(self, nodeid: str) -> str:
            return SERIAL_GROUP if in_serial_group(nodeid) else super()._split_scope(nodeid)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if LoadScopeScheduling is None or config.getvalue("dist") != "loadscope":
        return None
    config.option.loadscopereorder = False  # keep the collection's order: the serial group first
    return RealTrialsApart(config, log)


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
