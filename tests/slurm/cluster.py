"""Bring up the local SLURM cluster (tests/slurm/localcluster.sh) and hand its client env vars to tests.

Side effects live here only: running the shell script. `parse_exports` and `skip_reason` are pure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

SCRIPT_PATH = Path(__file__).with_name("localcluster.sh")
REQUIRE_ENV_VAR = "PARASWEEP_REQUIRE_SLURM"
# A cold start may have to apt-get install the packages first (about 65 s measured, more on a slow mirror).
START_TIMEOUT_S = 900.0


def parse_exports(text: str) -> dict[str, str]:
    """`export K=V` lines (what `localcluster.sh env` prints) -> {K: V}; other lines are ignored."""
    env: dict[str, str] = {}
    for line in text.splitlines():
        if line.startswith("export ") and "=" in line:
            key, value = line[len("export "):].split("=", 1)
            env[key.strip()] = value.strip().strip("'\"")
    return env


def skip_reason(sinfo_path: str | None, environ: dict[str, str]) -> str | None:
    """Why the SLURM tests must be skipped, or None when they must run (and then fail if SLURM is broken).

    They are skipped only when the SLURM client is absent AND nobody asked for them: with
    PARASWEEP_REQUIRE_SLURM set, `ensure_cluster` installs the packages or the tests fail.
    """
    if sinfo_path is not None or environ.get(REQUIRE_ENV_VAR):
        return None
    return (
        "SLURM is not installed (no `sinfo` on PATH). Run `bash tests/slurm/localcluster.sh start` as root "
        f"(it installs the Debian packages), or set {REQUIRE_ENV_VAR}=1 to make this a failure."
    )


def current_skip_reason() -> str | None:
    return skip_reason(shutil.which("sinfo"), dict(os.environ))


def _run_script(command: str, nodes: int | None, timeout_s: float) -> str:
    env = dict(os.environ)
    if nodes is not None:
        env["NODES"] = str(nodes)
    proc = subprocess.run(
        ["bash", str(SCRIPT_PATH), command],
        env=env, capture_output=True, text=True, timeout=timeout_s, check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(
            f"`bash {SCRIPT_PATH} {command}` exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
        )
    return proc.stdout


def cluster_env() -> dict[str, str]:
    """The env vars (SLURM_CONF) that point SLURM clients at the local cluster; does not start it."""
    return parse_exports(_run_script("env", None, 60.0))


def ensure_cluster(nodes: int = 2, timeout_s: float = START_TIMEOUT_S) -> dict[str, str]:
    """Start the local cluster with `nodes` nodes unless it is up already (~0.1 s then); return its env vars.

    Raises RuntimeError with the script's output when it cannot start (e.g. not root, or a cluster
    with another node count is running: stop it first).
    """
    _run_script("start", nodes, timeout_s)
    return cluster_env()
