"""A damaged or hand-edited ledger is one LedgerError naming the file, the value and the fix, and the file is left
exactly as it was (no column added, no version rewritten): a page of garbage, a state no parasweep writes, a
split size of 0, JSON that is not JSON, a newer or non-numeric ledger_version."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from launcher.core.record import TrialRecord
from launcher.run.ledger import LEDGER_VERSION, Ledger, LedgerError


def rec(h: str, pos: int = 0) -> TrialRecord:
    return TrialRecord(h, pos, {"gpus": 1, "nodes": 1, "tp": 1, "pp": 1, "dp": 1, "mbs": 1, "gbs": 8},
                       {"tokens_per_s": 10.0, "note": "x" * 200})


def _ledger(path: Path, n: int = 3) -> Path:
    with Ledger(path) as led:
        led.add_trials([rec(f"h{i}", i) for i in range(n)])
        led.update("h0", state="ok", metrics={"tokens_per_s": 5.0})
    return path


def _edit(path: Path, sql: str) -> None:
    db = sqlite3.connect(path)
    db.execute(sql)
    db.commit()
    db.close()


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_page_of_garbage_is_found_at_open_and_the_file_is_left_alone(tmp_path):
    path = _ledger(tmp_path / "l.sqlite", n=300)
    pages = path.stat().st_size // 4096
    with path.open("r+b") as fh:  # a page in the middle of the trials table, overwritten
        fh.seek(pages // 2 * 4096 + 8)
        fh.write(b"\xff" * 3000)
    before = _digest(path)
    with pytest.raises(LedgerError) as err:
        Ledger(path)
    message = str(err.value)
    assert message.startswith(f"{path} is damaged") and "\n" not in message and "sweep.fresh=true" in message
    assert _digest(path) == before


def test_damage_met_after_opening_is_a_ledger_error_too(tmp_path):
    path = _ledger(tmp_path / "l.sqlite")
    with Ledger(path) as led:
        _edit(path, "DROP TABLE trials")  # another program breaks the file while the ledger is open
        with pytest.raises(LedgerError, match=r"is damaged \(no such table: trials\)"):
            led.trials()


@pytest.mark.parametrize(("sql", "named"), [
    ("UPDATE trials SET state = 'paused' WHERE config_hash = 'h1'", "state='paused' is not a value"),
    ("UPDATE trials SET tp = 0 WHERE config_hash = 'h1'", "tp=0 is not a value"),
    ("UPDATE trials SET gbs = 'eight' WHERE config_hash = 'h1'", "gbs='eight' is not a value"),
    ("UPDATE trials SET zero_stage = 7 WHERE config_hash = 'h1'", "zero_stage=7 is not a value"),
    ("UPDATE trials SET recompute = 'some' WHERE config_hash = 'h1'", "recompute='some' is not a value"),
])
def test_a_value_no_parasweep_writes_is_refused_at_open(tmp_path, sql, named):
    path = _ledger(tmp_path / "l.sqlite")
    _edit(path, sql)
    before = _digest(path)
    with pytest.raises(LedgerError) as err:
        Ledger(path)
    message = str(err.value)
    assert f"trial h1: {named}" in message and "valid:" in message and "\n" not in message
    assert _digest(path) == before


def test_unreadable_json_names_the_trial_and_the_field(tmp_path):
    path = _ledger(tmp_path / "l.sqlite")
    _edit(path, "UPDATE trials SET metrics = '{not json' WHERE config_hash = 'h0'")
    with Ledger(path) as led:
        with pytest.raises(LedgerError, match=r"trial h0: metrics='\{not json' is not the JSON"):
            led.trials()
        assert led.get("h1").config_hash == "h1"  # the other trials still read


@pytest.mark.parametrize("version", ["10", "3"])
def test_a_newer_ledger_is_refused_and_left_as_it_is(tmp_path, version):
    path = _ledger(tmp_path / "l.sqlite")
    _edit(path, f"UPDATE meta SET value = '{version}' WHERE key = 'ledger_version'")
    _edit(path, "ALTER TABLE trials DROP COLUMN calibrated")  # a column this version would add on opening
    before = _digest(path)
    with pytest.raises(LedgerError, match=f"written by a newer parasweep \\(ledger version {version}"):
        Ledger(path)
    assert _digest(path) == before
    db = sqlite3.connect(path)
    assert db.execute("SELECT value FROM meta WHERE key = 'ledger_version'").fetchone() == (version,)


def test_a_version_that_is_not_a_number_is_refused(tmp_path):
    path = _ledger(tmp_path / "l.sqlite")
    _edit(path, "UPDATE meta SET value = 'two' WHERE key = 'ledger_version'")
    with pytest.raises(LedgerError, match="ledger_version='two' is not a version number"):
        Ledger(path)


def test_an_older_version_opens_and_is_brought_up_to_date(tmp_path):
    path = _ledger(tmp_path / "l.sqlite")
    _edit(path, "UPDATE meta SET value = '1' WHERE key = 'ledger_version'")
    with Ledger(path) as led:
        assert led.get_meta("ledger_version") == LEDGER_VERSION and len(led.trials()) == 3
