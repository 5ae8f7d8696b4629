"""families.memory: host allocators' out-of-memory wordings (judge37a, batch 33's misses)."""

from __future__ import annotations

import pytest

from analysis.logs.families import first_match
from analysis.logs.families.memory import HOST_MEMORY
from analysis.logs.outcome import trial_outcome
from launcher.core.kinds import FailureKind

# deepspeedai/DeepSpeedExamples#321 (DeepSpeed-Chat step 2): Rust's default_alloc_error_hook on every rank, two of
# them interleaved, then the launcher's sigkill_handler
_RUST = ("memory allocation of memory allocation of 20971522097152 bytes failed\n"
         " bytes failed\n"
         "memory allocation of 2097152 bytes failed\n"
         "[2023-04-16 21:54:13,235] [INFO] [launch.py:428:sigkill_handler] Killing subprocess 62215\n")


def test_rust_allocation_failure_is_a_host_oom():
    assert first_match(_RUST, HOST_MEMORY) is not None
    out = trial_outcome(_RUST)
    assert out.failure_kind == FailureKind.OOM.value
    assert "host" in out.reason


@pytest.mark.parametrize("line", [
    "Memory allocation of 4096 bytes failed.",  # an emulator's notice, not Rust's hook
    "memory allocation of 2097152 bytes failed, retrying with a smaller buffer",
    "[WARN] memory allocation of 2097152 bytes failed",
])
def test_lookalikes_are_not_the_rust_hook(line):
    assert first_match(line + "\n", HOST_MEMORY) is None
