"""The out-of-sample batches (tests/fixtures/oos-batch*/): real logs kept apart from the corpus the classifier is
tuned on, scored by tests/benchmarks/bench_oos.py. These tests keep each batch's index honest (every log listed
once, with its source on the first line, a known framework and kind, and evidence that is really in the file);
they do not score the classifier, so a later classifier change cannot make them pass or fail."""

from __future__ import annotations

import csv
import re
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


# GitHub repositories that were renamed or moved: a thread keeps its number, so the old and the new address name the
# same thread (NeMo moved from NVIDIA/NeMo to NVIDIA-NeMo/NeMo and is now NVIDIA-NeMo/Speech; DeepSpeed moved from
# microsoft to deepspeedai). Without this, one thread could enter two batches under two addresses.
RENAMED_REPOS = {"nvidia/nemo": "nvidia-nemo/speech", "nvidia-nemo/nemo": "nvidia-nemo/speech",
                 "microsoft/deepspeed": "deepspeedai/deepspeed",
                 "microsoft/deepspeedexamples": "deepspeedai/deepspeedexamples",
                 "microsoft/megatron-deepspeed": "deepspeedai/megatron-deepspeed",
                 "volcengine/verl": "verl-project/verl",
                 "pytorchlightning/pytorch-lightning": "lightning-ai/pytorch-lightning"}
THREAD_URL = re.compile(r"https://github\.com/([^/\s]+/[^/\s]+)/(?:issues|pull|discussions)/(\d+)")


def source_key(source: str) -> str:
    """The thread or page a source names: 'owner/repo#N' for a GitHub issue or pull request (an issue and a pull
    request share one number space; renamed repositories map to their current name), else the URL, or 'owner/repo
    path' for a 'github owner/repo path ...' one."""
    words = source.split()
    if words[0] == "github":
        return " ".join(words[1:3])
    thread = THREAD_URL.match(words[0])
    if thread:
        repo = thread.group(1).lower()
        return f"{RENAMED_REPOS.get(repo, repo)}#{thread.group(2)}"
    return words[0]


def test_source_key_names_one_thread_under_its_old_and_new_address():
    new = source_key("https://github.com/NVIDIA-NeMo/Speech/issues/14883 (someone, turn 1)")
    assert source_key("https://github.com/NVIDIA/NeMo/issues/14883 (someone)") == new
    assert source_key("https://github.com/NVIDIA-NeMo/NeMo/pull/14883") == new
    assert source_key("https://github.com/microsoft/DeepSpeed/issues/5066") == source_key(
        "https://github.com/deepspeedai/DeepSpeed/issues/5066 (x)")
    assert source_key("https://github.com/NVIDIA/NeMo/issues/14884") != new
    assert source_key("https://github.com/bigscience-workshop/Megatron-DeepSpeed/issues/407") != source_key(
        "https://github.com/deepspeedai/Megatron-DeepSpeed/issues/407")
    assert source_key("github saltysoup/a3-bootcamp-ce Day1/README.md (example output)") == (
        "saltysoup/a3-bootcamp-ce Day1/README.md")


# Batches that were used as a development set and then copied into the corpus (OUT_OF_SAMPLE.md says when):
# their scores are in-sample from then on. Every later batch must stay out of sample. oos-batch2 was measured on
# the frozen classifier of 4e42b17 first, then used to fix the causes of its misses and copied into the corpus;
# oos-batch3 likewise, measured on the frozen classifier of 50f0cb0 first (OUT_OF_SAMPLE.md, "Batch 3").
# oos-batch4 is the last held-out batch of issue 17 (collected up to and after the freeze, measured on the frozen
# classifier of 595378b, OUT_OF_SAMPLE.md "Batch 4"): it stays out of sample, so the corpus test below applies to it.
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
