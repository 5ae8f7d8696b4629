"""The real-log corpus, judged file by file: kind, reason and steady-state step time for every log in
tests/fixtures/INDEX.tsv, through the library (trial_outcome) and through the triage command (on the files as they
are, source header included)."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from log_fixtures import CORPUS_FILES, ROOT, body, context, corpus

from analysis.classify.__main__ import JSON_KEYS
from analysis.classify.__main__ import main as classify_main
from analysis.logs.logtext import normalize
from analysis.logs.outcome import measurements, trial_outcome

ROWS = corpus()
IDS = [row["path"] for row in ROWS]


def test_index_lists_every_fixture_with_its_source():
    assert sorted(IDS) == CORPUS_FILES
    for row in ROWS:
        first = (ROOT / row["path"]).read_text().splitlines()[0]
        assert first == f"# SOURCE: {row['source']}", row["path"]


def test_corpus_is_large_and_varied():
    kinds = Counter(row["kind"] for row in ROWS)
    assert len(ROWS) >= 80 and kinds["ok"] >= 20
    for kind in ("oom", "comm_error", "node_failure", "config_error", "crashed", "hang", "time_limit", "preempted",
                 "cancelled", "unknown", "diverged"):
        assert kinds[kind] >= 1, kind
    folders = Counter(row["path"].split("/")[0] for row in ROWS)
    # other-logs: stacks and orchestrators outside PyTorch/Megatron/NeMo/HF (Ray, MaxText, fairseq, torchrun agents)
    assert set(folders) == {"megatron-logs", "nemo-logs", "hf-logs", "torch-logs", "slurm-logs", "other-logs"}


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_verdict(row):
    out = trial_outcome(body(row["path"]), **context(row))
    assert out.failure_kind == row["kind"], out.reason
    assert row["reason"] in out.reason


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_steady_state_step_time(row):
    metrics, _, _ = measurements(normalize(body(row["path"])))
    expected = float(row["step_time_s"]) if row["step_time_s"] else None
    assert metrics.get("step_time_s") == (None if expected is None else pytest.approx(expected, rel=1e-6))


def _flags(row: dict) -> list[str]:
    flags = []
    for key, value in context(row).items():
        if key in ("exit_code", "slurm_state"):
            flags += [f"--{key.replace('_', '-')}", str(value)]
    return flags


@pytest.mark.parametrize("row", [r for r in ROWS if "seconds_since_progress" not in r["context"]],
                         ids=[r["path"] for r in ROWS if "seconds_since_progress" not in r["context"]])
def test_triage_command_on_the_file_as_it_is(row, capsys):
    assert classify_main([str(ROOT / row["path"]), "--json", *_flags(row)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert tuple(result) == JSON_KEYS
    assert result["kind"] == row["kind"] and row["reason"] in result["reason"]
    if row["step_time_s"]:
        assert result["step_time_s"] == pytest.approx(float(row["step_time_s"]), rel=1e-6)
