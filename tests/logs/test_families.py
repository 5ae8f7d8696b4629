"""The failure families (analysis.logs.families), row by row and by shape: each row's example is classified as
its kind with its needle in the reason; lines this project has never seen, written in a family's shape, map to the
family; and look-alike lines do not. All lines here are written for these tests."""

from __future__ import annotations

import pytest

from analysis.logs.classify import classify
from analysis.logs.families import completion, config, divergence, hardware, memory, network, orchestrator
from analysis.logs.outcome import trial_outcome
from launcher.core.kinds import FailureKind
from launcher.core.states import TrialState, state_for_kind

FAILURE_TABLES = {
    "hardware": hardware.GPU_HARDWARE + hardware.GPU_HARDWARE_SHAPES,
    "memory": memory.HOST_MEMORY,
    "network": network.NETWORK,
    "orchestrator": orchestrator.NODE_LOST + orchestrator.PREEMPTION + orchestrator.DEADLINE
    + orchestrator.OUTSIDE_STOP,
    "divergence": divergence.DIVERGENCE,
}
ROWS = [(family, row) for family, table in FAILURE_TABLES.items() for row in table]


@pytest.mark.parametrize("family, row", ROWS, ids=[f"{f}:{r.needle[:40]}" for f, r in ROWS])
def test_row_example_is_its_kind(family, row):
    assert row.needle in row.example and row.source
    failure = classify(f"start-up output\n{row.example}\nmore output\n")
    assert failure.kind == row.kind, failure.reason
    assert row.needle.strip() in failure.reason or row.shape is not None, failure.reason
    assert failure.evidence and failure.evidence[0][0] in (2, 3, 4)


@pytest.mark.parametrize("row", completion.COMPLETION + completion.PROGRESS,
                         ids=[r.needle[:40] for r in completion.COMPLETION + completion.PROGRESS])
def test_completion_rows_make_a_log_alone_ok(row):
    assert row.needle in row.example
    failure = classify(f"loading data\n{row.example}\n")
    assert failure.kind == "ok" and "no step time" in failure.reason
    # a failure printed after it still wins
    assert classify(f"{row.example}\nRuntimeError: CUDA error: an illegal memory access was encountered\n"
                    ).kind == "crashed"


# ---- hardware: Xid codes by the catalogue, and unknown codes by their text
@pytest.mark.parametrize("code, text, kind", [
    (145, "NVLink RLW error", "node_failure"), (119, "GSP RPC timeout", "node_failure"),
    (154, "GPU recovery action changed to 0x2 (reset required)", "node_failure"),
    (13, "Graphics Exception: ESR 0x5", "unknown"), (43, "Ch 00000008", "unknown"),
    (231, "uncorrectable DRAM ECC error in partition 3", "node_failure"),  # not in the catalogue; text says ECC
    (232, "unknown engine event 0x3", "unknown"),  # not in the catalogue; nothing says hardware
])
def test_xid_lines_by_catalogue_and_by_text(code, text, kind):
    line = f"kernel: NVRM: Xid (PCI:0000:5d:00): {code}, pid=8812, name=python, {text}"
    failure = classify(f"{line}\n")
    assert failure.kind == kind, failure.reason
    if kind == "node_failure":
        assert f"Xid {code}" in failure.reason


def test_catalogue_meanings_name_the_fault():
    assert hardware.XID_CATALOGUE[79][0] == "GPU has fallen off the bus" and 79 in hardware.HARDWARE_XIDS
    assert 31 not in hardware.HARDWARE_XIDS and 45 not in hardware.HARDWARE_XIDS


@pytest.mark.parametrize("line", [
    "GPU 2: NVLink 7 reported an uncorrectable error; link disabled",
    "ECC: double-bit error on GPU 0000:db:00.0, page retired",
    "pcieport 0000:80:03.0: AER: Uncorrected (Fatal) error received: id=8018",
])
def test_hardware_shapes(line):
    assert classify(f"training...\n{line}\n").kind == "node_failure"


@pytest.mark.parametrize("line", [
    "NCCL INFO Channel 00 : 0[0] -> 1[1] via P2P/NVLink",  # topology, not a fault
    "ECC mode: Enabled",
    "[rank0] NVLink SHARP enabled: 0",
])
def test_hardware_look_alikes(line):
    assert classify(f"{line}\n").kind == "unknown"


# ---- network: NCCL WARN failure forms, the NCCLCHECK trace, benign WARNs
@pytest.mark.parametrize("line", network.NCCL_WARN_EXAMPLES + (network.NCCL_TRACE_EXAMPLE,))
def test_nccl_failure_shapes(line):
    failure = classify(f"init\n{line}\n")
    assert failure.kind == "comm_error", failure.reason


@pytest.mark.parametrize("line", [
    "n1:1:1 [0] NCCL INFO NET/Plugin: Failed to find ncclNetPlugin_v8 symbol.",
    "n1:1:1 [0] NCCL WARN NET/Plugin : Plugin load (libnccl-net.so) returned 2 : libnccl-net.so: cannot open "
    "shared object file: No such file or directory",
    "n1:1:1 [0] NCCL INFO transport/net.cc:1302 -> 0",
    "n1:1:1 [0] NCCL WARN Could not find real path of /sys/class/net/eth0/device",
])
def test_nccl_chatter_is_not_a_failure(line):
    assert classify(f"{line}\n").kind == "unknown"


# ---- config: rules stated in any wording
@pytest.mark.parametrize("line", config.EXAMPLES)
def test_config_shapes(line):
    failure = classify(f"Traceback (most recent call last):\n  File \"train.py\", line 3\n{line}\n", exit_code=1)
    assert failure.kind == "config_error", failure.reason
    assert not failure.retryable


def test_a_bare_assertion_in_dataset_building_is_config():
    text = ("Traceback (most recent call last):\n  File \"/opt/megatron/core/datasets/blended_megatron_dataset_"
            "builder.py\", line 210, in build\n    assert sum(weights) > 0\nAssertionError\n")
    assert classify(text, exit_code=1).kind == "config_error"


@pytest.mark.parametrize("line", [
    "ValueError: could not convert string to float: 'abc'",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "AssertionError: 7 != 8",
    "RuntimeError: The size of tensor a (64) must match the size of tensor b (32) at non-singleton dimension 1",
])
def test_config_look_alikes(line):
    assert classify(f"Traceback (most recent call last):\n{line}\n", exit_code=1).kind != "config_error"


# ---- orchestrators
@pytest.mark.parametrize("line, kind", [
    ("W0101 10:00:00.000000 77 torch/distributed/elastic/agent/server/api.py:704] Received Signals.SIGHUP death "
     "signal, shutting down workers", "cancelled"),
    ("Warning  Preempted  pod/worker-1  Preempted by pod 99aa on node gpu-7", "preempted"),
    ("metadata agent: preemptible VM termination notice received", "preempted"),
    ("Reason: DeadlineExceeded  Message: Pod was active on the node longer than the specified deadline",
     "time_limit"),
    ("The node with node id: ab12 and address: 10.1.1.1 and node name: w3 has been marked dead because the detector "
     "has missed too many heartbeats from it.", "node_failure"),
])
def test_orchestrator_events(line, kind):
    failure = classify(f"step 1\n{line}\nTraceback (most recent call last):\nRuntimeError: x\n")
    assert failure.kind == kind, failure.reason


def test_a_time_limit_beats_the_death_signal_it_causes():
    text = ("slurmstepd: error: *** STEP 77.0 ON n3 CANCELLED AT 2025-01-01T00:00:00 DUE TO TIME LIMIT ***\n"
            "torch/distributed/elastic/agent/server/api.py:704] Received 15 death signal, shutting down workers\n")
    assert classify(text).kind == "time_limit"


def test_node_memory_eviction_is_oom_other_evictions_are_preemptions():
    assert classify("Reason: Evicted  Message: The node was low on resource: memory.\n").kind == "oom"
    assert classify("Reason: Evicted  Message: The node was low on resource: ephemeral-storage.\n").kind == "preempted"


# ---- divergence: text, Megatron records, loss series
def test_a_loss_that_ends_nan_is_diverged_and_not_retried():
    text = "\n".join([f"iter {i}: loss {3.0 - i / 100:.4f}, time 500.00ms" for i in range(1, 30)]
                     + [f"iter {i}: loss nan, time 480.00ms" for i in range(30, 33)])
    out = trial_outcome(text)
    assert out.failure_kind == "diverged" and "nan" in out.reason and out.metrics == {}
    failure = classify(text, losses=(1.0, float("nan")))
    assert (failure.retryable, failure.exclude_node, failure.max_retries) == (False, False, 0)


def test_a_nan_the_run_got_past_is_not_diverged():
    text = "\n".join(f"iter {i}: loss {'nan' if i == 10 else '2.5'}, time 500.00ms" for i in range(1, 30))
    assert trial_outcome(text).failure_kind == "ok"


def _megatron(i: int, fields: str) -> str:
    return (f" iteration {i:8d}/ 100000 | consumed samples: {i * 64:10d} | elapsed time per iteration (ms): 900.0 | "
            f"learning rate: 1.000E-04 | global batch size: 64 | {fields}")


def test_megatron_records_without_a_loss():
    healthy = [_megatron(i, "lm loss: 2.500000E+00 | loss scale: 1.0 | number of skipped iterations: 0 | "
                            "number of nan iterations: 0 |") for i in (10, 20, 30)]
    nan_loss = _megatron(40, "loss scale: 1.0 | grad norm: nan | number of skipped iterations: 0 | "
                             "number of nan iterations: 0 |")
    out = trial_outcome("\n".join(healthy + [nan_loss]) + "\n")
    assert out.failure_kind == "diverged" and "no loss" in out.reason
    fp16_search = [_megatron(i, f"loss scale: {2.0 ** (32 - i // 5):.1f} | number of skipped iterations: 5 | "
                                "number of nan iterations: 0 |") for i in (5, 10)]
    assert trial_outcome("\n".join(fp16_search) + "\n").failure_kind != "diverged"  # the start of fp16 training
    skipping = [_megatron(i, f"loss scale: {2.0 ** -i:.6f} | number of skipped iterations: 10 | "
                             "number of nan iterations: 0 |") for i in (50, 60, 70)]
    out = trial_outcome("\n".join(healthy + skipping) + "\n")
    assert out.failure_kind == "diverged" and "skipped" in out.reason
    nan_counted = _megatron(40, "lm loss: 2.4E+00 | loss scale: 1.0 | number of skipped iterations: 0 | "
                                "number of nan iterations: 3 |")
    assert trial_outcome("\n".join(healthy + [nan_counted]) + "\n").failure_kind == "diverged"


def test_diverged_is_a_failed_trial_in_the_ledger():
    assert state_for_kind("diverged") is TrialState.FAILED
    assert FailureKind("diverged") is FailureKind.DIVERGED and not FailureKind.DIVERGED.retryable
    assert "same seed" in FailureKind.DIVERGED.description


def test_a_long_log_is_searched_in_its_head_and_tail_with_true_line_numbers():
    filler = "".join(f"info line {i} nothing to see\n" for i in range(300_000))  # ~8.7 MB
    assert len(filler) > 8_000_000
    text = "start\n" + filler + "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    failure = classify(text)
    assert failure.kind == "crashed"
    assert failure.evidence[0] == (300_002, "RuntimeError: CUDA error: an illegal memory access was encountered")
    early = "ModuleNotFoundError: No module named 'apex'\n" + filler
    assert classify(early, exit_code=1).kind == "config_error"
