"""The public corpus of measured training runs, tests/data/published/<source_id>.csv (issue 15, item 1).

Each file is one independent source: `# ` comment lines (SOURCE and HOW first), then a header and rows in the fixed
column set below. These checks keep the corpus usable for leave-one-source-out evaluation and constant fitting:
every row names its source, uses the shared vocabularies, has a consistent layout, carries a measurement when it
ran, and says how each number was obtained. csv module only, so it stays fast and dependency-free.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

CORPUS = Path(__file__).parents[1] / "data" / "published"

COLUMNS = ["source_id", "row_ref", "model", "params_b", "layers", "hidden", "ffn_hidden", "heads", "kv_heads", "vocab", "seq_len", "gated_ffn", "tied_embeddings", "num_experts", "gpu", "n_gpus", "gpus_per_node", "network", "stack", "stack_version", "precision", "tp", "pp", "dp", "cp", "vpp", "ep", "mbs", "gbs", "recompute", "sequence_parallel", "zero_stage", "fsdp", "reshard_after_forward", "distributed_optimizer", "flash_attention", "torch_compile", "state", "step_time_s", "step_time_how", "tokens_per_s_per_gpu", "tflops_per_gpu", "tflops_convention", "mfu", "peak_mem_gb", "mem_how", "notes"]

# The issue's list plus the precise names the sources use (GB200/GB300 superchips, B300).
GPUS = {"a100-40g", "a100-80g", "h100-80g", "h100-pcie", "h200-141g", "b200", "b300", "gb200", "gb300",
        "mi250x", "mi300x", "v100-32g"}
STACKS = {"megatron_lm", "nemo", "megatron_deepspeed", "deepspeed", "pytorch_fsdp", "torchtitan_like", "colossalai",
          "nanotron", "jax"}
# fp8 covers tensor/delayed/current scaling; Blackwell's block-scaled formats are kept apart because their
# speed differs (mxfp8) or they are a different width altogether (nvfp4).
PRECISIONS = {"bf16", "fp16", "fp8", "fp32", "mxfp8", "nvfp4"}
RECOMPUTE = {"none", "selective", "full", "offload"}
FSDP = {"", "full_shard", "shard_grad_op", "hybrid_shard", "fsdp2"}
STATES = {"ok", "oom"}
SHAPE_FIELDS = ("layers", "hidden", "ffn_hidden", "heads", "kv_heads", "vocab", "seq_len")
LAYOUT_FIELDS = ("n_gpus", "gpus_per_node", "tp", "pp", "dp", "cp", "vpp", "ep", "mbs", "gbs")
BOOL_FIELDS = ("gated_ffn", "tied_embeddings", "sequence_parallel", "reshard_after_forward", "distributed_optimizer",
               "flash_attention", "torch_compile")
MEASURES = ("step_time_s", "tokens_per_s_per_gpu", "tflops_per_gpu", "mfu", "peak_mem_gb")


def read_source(path: Path) -> tuple[list[str], list[str], list[dict[str, str]]]:
    """(comment lines without '# ', header, rows) of one corpus file."""
    lines = path.read_text().splitlines()
    comments = [line[2:] for line in lines if line.startswith("# ")]
    reader = csv.DictReader(line for line in lines if not line.startswith("#"))
    rows = list(reader)
    return comments, list(reader.fieldnames or []), rows


FILES = sorted(CORPUS.glob("*.csv"))
SOURCES = {path.stem: read_source(path) for path in FILES}
ALL_ROWS = [(sid, i, row) for sid, (_, _, rows) in SOURCES.items() for i, row in enumerate(rows, 1)]


def where(sid: str, i: int, field: str, value: str) -> str:
    return f"{sid}.csv data row {i}: {field}={value!r}"


def test_corpus_meets_the_issue_thresholds():
    """>= 250 rows from >= 10 sources (issue 15); rows of the three named stacks, A100 and H100, CP, long context."""
    assert len(SOURCES) >= 10, f"only {len(SOURCES)} source files in {CORPUS}: add sources (one CSV each)"
    assert len(ALL_ROWS) >= 250, f"only {len(ALL_ROWS)} rows in {CORPUS}: add measured rows"
    stacks = {row["stack"] for _, _, row in ALL_ROWS}
    assert {"megatron_deepspeed", "pytorch_fsdp"} <= stacks and stacks & {"megatron_lm", "nemo"}, stacks
    gpus = {row["gpu"] for _, _, row in ALL_ROWS}
    assert {"a100-80g", "h100-80g"} <= gpus, gpus
    assert any(row["cp"] not in ("", "1") for _, _, row in ALL_ROWS), "no context-parallel row"
    assert any(int(row["seq_len"]) >= 32768 for _, _, row in ALL_ROWS if row["seq_len"]), "no row at 32k or longer"
    assert any(row["state"] == "oom" for _, _, row in ALL_ROWS), "no out-of-memory row"
    assert any(row["peak_mem_gb"] for _, _, row in ALL_ROWS), "no row with peak memory"


@pytest.mark.parametrize("sid", sorted(SOURCES))
def test_source_file_is_documented_and_uses_the_fixed_columns(sid: str):
    comments, header, rows = SOURCES[sid]
    assert header == COLUMNS, f"{sid}.csv: header differs from the corpus columns; write exactly {','.join(COLUMNS)}"
    assert comments and comments[0].startswith("SOURCE: "), f"{sid}.csv: first comment must be '# SOURCE: <reference>'"
    assert any(c.startswith("HOW: ") for c in comments), f"{sid}.csv: add a '# HOW: <how numbers were obtained>' line"
    assert rows, f"{sid}.csv has no data rows"


@pytest.mark.parametrize("sid,i,row", ALL_ROWS, ids=[f"{s}-{i}" for s, i, _ in ALL_ROWS])
def test_row_is_consistent(sid: str, i: int, row: dict[str, str]):
    assert row["source_id"] == sid, where(sid, i, "source_id", row["source_id"]) + f"; must equal the file name {sid}"
    assert row["row_ref"], where(sid, i, "row_ref", "") + "; say which table/figure/row of the source"
    check_vocabulary(sid, i, row)
    check_numbers(sid, i, row)
    check_layout_product(sid, i, row)
    check_measurement(sid, i, row)


def check_vocabulary(sid: str, i: int, row: dict[str, str]) -> None:
    assert row["gpu"] in GPUS, where(sid, i, "gpu", row["gpu"]) + f"; use one of {sorted(GPUS)}"
    stack = row["stack"]
    assert stack in STACKS or (stack.startswith("other:") and len(stack) > 6), \
        where(sid, i, "stack", stack) + f"; use one of {sorted(STACKS)} or other:<name>"
    assert row["precision"] in PRECISIONS, where(sid, i, "precision", row["precision"]) + f"; use {sorted(PRECISIONS)}"
    rc = row["recompute"]
    assert (rc == "" or rc in RECOMPUTE or rc.startswith("other:")
            or (rc.startswith("full_every_k:") and rc.split(":", 1)[1].isdigit())
            or (rc.startswith("unstated:") and rc.split(":", 1)[1] in RECOMPUTE - {"offload"})), \
        where(sid, i, "recompute", rc) + (f"; use {sorted(RECOMPUTE)}, full_every_k:<k>, other:<text> or "
                                          "unstated:<none|selective|full> (not stated; the likeliest mode)")
    assert row["fsdp"] in FSDP, where(sid, i, "fsdp", row["fsdp"]) + f"; use one of {sorted(FSDP)}"
    assert row["zero_stage"] in ("", "0", "1", "2", "3"), where(sid, i, "zero_stage", row["zero_stage"]) + "; 0-3"
    assert row["state"] in STATES, where(sid, i, "state", row["state"]) + f"; use one of {sorted(STATES)}"
    for field in BOOL_FIELDS:
        assert row[field] in ("", "true", "false"), where(sid, i, field, row[field]) + "; write true, false or nothing"


def check_numbers(sid: str, i: int, row: dict[str, str]) -> None:
    for field in SHAPE_FIELDS + LAYOUT_FIELDS + ("num_experts",):
        value = row[field]
        assert value == "" or (value.isdigit() and int(value) > 0), \
            where(sid, i, field, value) + "; a positive integer, or empty when the source does not say"
    for field in ("params_b",) + MEASURES:
        value = row[field]
        if value:
            assert float(value) > 0, where(sid, i, field, value) + "; a positive number or empty"
    if row["mfu"]:
        assert float(row["mfu"]) <= 1, where(sid, i, "mfu", row["mfu"]) + "; a fraction (0.43), not a percentage"


def check_layout_product(sid: str, i: int, row: dict[str, str]) -> None:
    """tp*pp*cp*dp must be the GPU count (cp empty counts as 1); expert layouts must say why in notes."""
    parts = [row[f] for f in ("tp", "pp", "dp", "n_gpus")]
    if "" in parts:
        return
    tp, pp, dp, n = map(int, parts)
    cp = int(row["cp"] or 1)
    if tp * pp * cp * dp != n:
        assert row["ep"] and row["notes"], \
            where(sid, i, "tp*pp*cp*dp", str(tp * pp * cp * dp)) + f" != n_gpus {n}; fix the layout or explain in notes"


def check_measurement(sid: str, i: int, row: dict[str, str]) -> None:
    if row["state"] == "ok":
        assert any(row[f] for f in MEASURES), \
            where(sid, i, "state", "ok") + f" without any of {MEASURES}; record the measurement or drop the row"
    if row["step_time_s"]:
        how = row["step_time_how"]
        assert how.startswith(("stated", "derived:")), \
            where(sid, i, "step_time_how", how) + "; write 'stated' or 'derived:<formula>'"
    if row["peak_mem_gb"]:
        assert row["mem_how"], where(sid, i, "mem_how", "") + "; say how peak memory was measured"
    if row["tflops_per_gpu"] or row["mfu"]:
        assert row["tflops_convention"], where(sid, i, "tflops_convention", "") + "; say which FLOP count it uses"
