"""The out-of-sample batches (tests/fixtures/oos-batch*/): real logs kept apart from the corpus the classifier is
tuned on, scored by tests/benchmarks/bench_oos.py. These tests keep each batch's index honest (every log listed
once, with its source on the first line, a known framework and kind, and evidence that is really in the file);
they do not score the classifier, so a later classifier change cannot make them pass or fail."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from launcher.core.kinds import FailureKind

FIXTURES = Path(__file__).parents[1] / "fixtures"
BATCHES = sorted(p for p in FIXTURES.glob("oos-batch*") if p.is_dir())
FRAMEWORKS = {"megatron_lm", "megatron_deepspeed", "nemo", "deepspeed", "hf_trainer", "pytorch", "torchtitan",
              "lightning", "accelerate", "ray", "kubernetes", "slurm", "other"}
KINDS = {k.value for k in FailureKind}


def rows(batch: Path) -> list[dict]:
    with open(batch / "INDEX.tsv", newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def test_there_is_a_batch():
    assert BATCHES, "no tests/fixtures/oos-batch* folder"


@pytest.mark.parametrize("batch", BATCHES, ids=[b.name for b in BATCHES])
def test_index_lists_every_log_once(batch):
    listed = [r["path"] for r in rows(batch)]
    on_disk = sorted(str(p.relative_to(batch)) for p in batch.rglob("*.log"))
    assert sorted(listed) == on_disk
    assert len(set(listed)) == len(listed)


@pytest.mark.parametrize("batch", BATCHES, ids=[b.name for b in BATCHES])
def test_rows_are_well_formed(batch):
    for row in rows(batch):
        text = (batch / row["path"]).read_text()
        assert text.splitlines()[0] == f"# SOURCE: {row['source']}", row["path"]
        assert row["path"].split("/")[0] == row["framework"] and row["framework"] in FRAMEWORKS, row["path"]
        assert row["kind"] in KINDS, row["path"]
        assert row["evidence"] and row["evidence"] in text, row["path"]
        if row["step_time_s"]:
            assert row["kind"] == "ok" and float(row["step_time_s"]) > 0, row["path"]


def source_key(source: str) -> str:
    """The thread or page a source names: its URL, or 'owner/repo path' for a 'github owner/repo path ...' one."""
    words = source.split()
    return " ".join(words[1:3]) if words[0] == "github" else words[0]


# Batches that were used as a development set and then copied into the corpus (OUT_OF_SAMPLE.md says when):
# their scores are in-sample from then on. Every later batch must stay out of sample. oos-batch2 was measured on
# the frozen classifier of 4e42b17 first, then used to fix the causes of its misses and copied into the corpus;
# oos-batch3 likewise, measured on the frozen classifier of 50f0cb0 first (OUT_OF_SAMPLE.md, "Batch 3").
IN_SAMPLE_BATCHES = {"oos-batch1", "oos-batch2", "oos-batch3"}


def test_sources_are_not_in_the_tuning_corpus():
    """Out of sample means a different thread or page from every source of tests/fixtures/INDEX.tsv."""
    with open(FIXTURES / "INDEX.tsv", newline="") as f:
        corpus = {source_key(r["source"]) for r in csv.DictReader(f, delimiter="\t")}
    for batch in BATCHES:
        if batch.name in IN_SAMPLE_BATCHES:
            continue
        for row in rows(batch):
            assert source_key(row["source"]) not in corpus, row["path"]


def test_batches_do_not_share_sources():
    """A later batch is collected after the earlier ones were looked at: no thread or page appears in two batches
    (one page may give several logs within a batch, e.g. two runs on one tutorial page)."""
    earlier: dict[str, str] = {}
    for batch in BATCHES:
        keys = {source_key(row["source"]): row["path"] for row in rows(batch)}
        for key, path in keys.items():
            assert key not in earlier, f"{batch.name}/{path} repeats the source of {earlier[key]}"
        earlier.update({key: f"{batch.name}/{path}" for key, path in keys.items()})


def test_in_sample_batches_are_in_the_corpus():
    """A batch marked in-sample has its logs (all but those OUT_OF_SAMPLE.md names) in the corpus, same bytes."""
    with open(FIXTURES / "INDEX.tsv", newline="") as f:
        corpus = {Path(r["path"]).name: FIXTURES / r["path"] for r in csv.DictReader(f, delimiter="\t")}
    for batch in BATCHES:
        if batch.name not in IN_SAMPLE_BATCHES:
            continue
        copied = [r for r in rows(batch) if Path(r["path"]).name in corpus]
        kept_out = 1 if batch.name == "oos-batch1" else 0  # batch 1's DeepSpeed -9 log (OUT_OF_SAMPLE.md)
        assert len(copied) >= len(rows(batch)) - kept_out
        for row in copied:
            assert corpus[Path(row["path"]).name].read_bytes() == (batch / row["path"]).read_bytes()
