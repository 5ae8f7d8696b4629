"""The classifier's signature tables, row by row: each row's example line is classified as its table's kind, with
its needle in the reason; and harmless warnings that mention memory or NCCL do not make an ok run a failure."""

from __future__ import annotations

import pytest
from log_fixtures import body, corpus

from analysis.logs import patterns as P
from analysis.logs.classify import classify
from analysis.logs.outcome import trial_outcome

TABLES = [
    ("node_failure", P.GPU_FAULT), ("oom", P.DEVICE_OOM), ("oom", P.HOST_OOM), ("config_error", P.CONFIG),
    ("node_failure", P.NODE), ("preempted", P.PREEMPTED), ("time_limit", P.TIME_LIMIT), ("cancelled", P.CANCELLED),
    ("crashed", P.HARD_CRASH), ("comm_error", P.COMM), ("comm_error", P.NCCL_WARN_FAILURES), ("crashed", P.CRASH),
]
ROWS = [(kind, row) for kind, table in TABLES for row in table]


@pytest.mark.parametrize("kind, row", ROWS, ids=[f"{kind}:{row.needle[:40]}" for kind, row in ROWS])
def test_row(kind, row):
    assert row.needle in row.example  # the example shows what the row matches
    failure = classify(f"some start-up output\n{row.example}\nmore output\n")
    assert failure.kind == kind, failure.reason
    assert row.needle in failure.reason
    assert failure.evidence and failure.evidence[0][0] == 2 and row.needle in failure.evidence[0][1]


@pytest.mark.parametrize("point", P.STALL_POINTS, ids=[p.marker for p in P.STALL_POINTS])
def test_stall_point_rows(point):
    text = f"start-up\n{point.example}\n"
    assert classify(text).kind == "hang"  # a log alone that ends there
    assert classify(text, slurm_state="TIMEOUT").kind == "hang"
    assert classify(text, exit_code=1).kind == "crashed"  # it ended some other way
    for done in point.done:
        assert classify(f"{text}{done} x\n", slurm_state="TIMEOUT").kind == "time_limit"


@pytest.mark.parametrize("code, kind", [(79, "node_failure"), (48, "node_failure"), (94, "node_failure"),
                                        (13, "unknown"), (31, "unknown"), (43, "unknown")])
def test_xid_codes(code, kind):
    line = P.XID_EXAMPLE.replace(": 79,", f": {code},").replace("GPU has fallen off the bus.", "...")
    assert classify(f"{line}\n").kind == kind


@pytest.mark.parametrize("line, module", [
    ("ModuleNotFoundError: No module named 'transformer_engine'", "transformer_engine"),
    ("[rank0]: ModuleNotFoundError: No module named 'megatron.core'", "megatron.core"),
    ("ImportError: No module named apex", "apex"),
])
def test_missing_module_names_it_and_the_fix(line, module):
    failure = classify(f"Traceback (most recent call last):\n  File \"pretrain_gpt.py\", line 1\n{line}\n", exit_code=1)
    assert failure.kind == "config_error" and not failure.retryable
    assert f"'{module}'" in failure.reason and "backend.python" in failure.reason


# Real wordings of warnings that mention memory or NCCL and mean nothing is wrong.
HARMLESS = [
    "/usr/lib/python3.10/site-packages/torch/cuda/__init__.py:654: UserWarning: expandable_segments not supported on "
    "this platform (Triggered internally at ../c10/cuda/CUDAAllocatorConfig.h:28.)",
    "[2023-03-10 18:22:31,608] [WARNING] [stage3.py:1850:step] 4 pytorch allocator cache flushes since last step. "
    "this happens when there is high memory pressure and is detrimental to performance.",
    "n1:1:1 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/IB ; OOB ib0:10.0.0.1<0>",
    "n1:1:1 [0] NCCL WARN NET/Plugin : No plugin found (libnccl-net.so), using internal implementation",
    "/usr/local/lib/python3.10/dist-packages/torch/cuda/memory.py:343: FutureWarning: "
    "torch.cuda.reset_max_memory_allocated now calls torch.cuda.reset_peak_memory_stats, which resets /all/ peak "
    "memory stats.",
    "  make_vocab_size_divisible_by ................... 128",
    "Theoretical memory footprints: weight and optimizer=57438.81 MB",
    "[NeMo W 2024-01-01 00:00:00 nemo_logging:349] PossibleUserWarning: The dataloader, train_dataloader, does not "
    "have many workers which may be a bottleneck.",
]
OK_ROWS = [row for row in corpus() if row["kind"] == "ok"]


@pytest.mark.parametrize("row", OK_ROWS, ids=[r["path"] for r in OK_ROWS])
@pytest.mark.parametrize("where", ["before", "after"])
def test_harmless_warnings_do_not_fail_an_ok_run(row, where):
    noise = "\n".join(HARMLESS) + "\n"
    text = noise + body(row["path"]) if where == "before" else body(row["path"]) + "\n" + noise
    for context in ({}, {"exit_code": 0}, {"slurm_state": "COMPLETED"}):
        out = trial_outcome(text, **context)
        assert out.failure_kind == "ok", (context, out.reason)


def test_harmless_warnings_alone_are_no_failure_signature():
    assert classify("\n".join(HARMLESS) + "\n").kind == "unknown"
    assert classify("\n".join(HARMLESS) + "\n", exit_code=0).kind == "unknown"


def test_a_failure_after_the_last_progress_line_fails_a_log_alone_but_one_before_it_does_not():
    steps = body("megatron-logs/megatronlm_iter_ok_1.log")
    oom = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    assert trial_outcome(steps + oom).failure_kind == "oom"
    assert trial_outcome(oom + steps).failure_kind == "ok"  # e.g. a batch-size finder that backed off
    assert trial_outcome(steps + "Traceback (most recent call last):\nKeyError: 'x'\n").failure_kind == "crashed"
