"""tests/fixtures/second_labeller.tsv: the blind second labels of held-out batches 43-51 (docs/labelling.md), read by
tests/benchmarks/bench_agreement.py. These tests keep the table tied to the batches it labels (every log of those
batches once, the first label as the batch's INDEX.tsv has it, kinds the sweep knows); they do not score the
classifier. The agreement arithmetic is checked on a small made-up table."""

from __future__ import annotations

import csv
import sys
from pathlib import Path

import pytest

from launcher.core.kinds import FailureKind

FIXTURES = Path(__file__).parents[1] / "fixtures"
TABLE = FIXTURES / "second_labeller.tsv"
LABELS = {k.value for k in FailureKind} - {"unknown", "invalid_measurement"}  # docs/labelling.md: never a label

sys.path.insert(0, str(Path(__file__).parents[1] / "benchmarks"))
from bench_agreement import Row, read_labels, summary  # noqa: E402


def _index(batch: int) -> dict[str, str]:
    with open(FIXTURES / f"oos-batch{batch}" / "INDEX.tsv", newline="") as f:
        return {r["path"]: r["kind"] for r in csv.DictReader(f, delimiter="\t")}


ROWS = read_labels(TABLE)
BATCHES = sorted({r.batch for r in ROWS})


@pytest.mark.parametrize("batch", BATCHES)
def test_every_log_of_a_relabelled_batch_is_there_once_with_its_first_label(batch):
    index = _index(batch)
    table = {r.path: r.first for r in ROWS if r.batch == batch}
    assert len(table) == sum(r.batch == batch for r in ROWS)  # no log twice
    assert table == index


def test_second_labels_are_kinds_the_rule_allows():
    assert {r.second for r in ROWS} <= LABELS
    assert {r.second_other for r in ROWS} <= LABELS | {""}
    assert all(r.second_other != r.second for r in ROWS)
    assert {r.frozen for r in ROWS} <= {k.value for k in FailureKind}


def test_summary_counts_agreement_and_each_labeller_apart():
    rows = [Row(1, "a", "nemo", "crashed", "config_error", "crashed", "crashed"),
            Row(1, "b", "nemo", "ok", "ok", "", "ok"),
            Row(1, "c", "nemo", "oom", "oom", "", "crashed"),
            Row(1, "d", "nemo", "hang", "cancelled", "", "hang")]
    current = {(1, "a"): "config_error", (1, "b"): "ok", (1, "c"): "oom", (1, "d"): "cancelled"}
    got = summary(rows, current)
    assert got["labellers agree"] == "2/4 (50%)"
    assert got["first among second's readings"] == "3/4 (75%)"
    assert got["frozen vs first"] == "3/4 (75%)"
    assert got["frozen vs second"] == "1/4 (25%)"
    assert got["frozen on agreed"] == "1/2 (50%)"
    assert got["now vs first"] == "2/4 (50%)"
    assert got["now vs second"] == "4/4 (100%)"
    assert got["now on agreed"] == "2/2 (100%)"
