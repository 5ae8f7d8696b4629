"""pytest fixture for the local SLURM cluster. Use it with `pytest_plugins = ["slurm.fixtures"]`
in tests/conftest.py, or import `slurm_env` into a test module."""

from __future__ import annotations

import pytest

from slurm.cluster import current_skip_reason, ensure_cluster


@pytest.fixture(scope="session")
def slurm_env() -> dict[str, str]:
    """Env vars (SLURM_CONF) of the running local cluster; starts it once per session."""
    reason = current_skip_reason()
    if reason is not None:
        pytest.skip(reason)
    return ensure_cluster()
