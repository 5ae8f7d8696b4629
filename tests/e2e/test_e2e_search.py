"""End to end on this machine: the tiny sweep with the whole search switched on (scheduler order, calibration,
early stop, stop rule) against real CPU trials. Slow (a minute or two): `python -m pytest -m slow
tests/e2e/test_e2e_search.py`."""

from __future__ import annotations

import json
import sqlite3

import pytest
from conftest import run_launcher

pytestmark = pytest.mark.slow

ARGS = ["+sweep=tiny", "grid.mbs=[1]", "grid.include=[{gpus: 4, tp: 1, pp: 1, mbs: 64, gbs: 256}]",
        "tracking.enabled=false", "plan.early_stop=true", "plan.stop_when_converged=true"]


def test_tiny_sweep_with_the_search_ends_with_a_winner_and_a_calibration(tmp_path):
    proc = run_launcher(*ARGS, cwd=tmp_path, timeout_s=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    folder = tmp_path / "sweeps" / "tiny"
    db = sqlite3.connect(folder / "ledger.sqlite")
    rows = {h: (state, pruned_by) for h, state, pruned_by in
            db.execute("SELECT config_hash, state, pruned_by FROM trials")}
    db.close()
    states = {state for state, _ in rows.values()}
    assert states <= {"ok", "stopped_early", "oom", "pruned"}, rows
    best = json.loads((folder / "best.json").read_text())
    assert rows[best["config_hash"]][0] == "ok"                      # never a stopped_early trial
    calibration = json.loads((folder / "calibration.json").read_text())
    measured = sum(state in ("ok", "stopped_early") for state, _ in rows.values())
    assert calibration["n_trials"] == measured and calibration["applied"] is (measured >= 3)
    report = (folder / "report.html").read_text()
    assert 'id="search"' in report and "Trials in the order they ran" in report
    assert (folder / "plots" / "search_progress.png").is_file()
