"""End to end on this machine (local executor, real CPU trials): a configuration the a-priori memory model prunes
with its whole interval over the device's memory, while it really fits, is brought back by the calibration and runs.

The a-priori model is made to over-count: the launcher runs with the CPU stand-in's context memory set to
CONTEXT_GB (launcher.plan.constants: 0 GB a-priori, the post-init footprint is outside the rank's cap), as a model
that counts memory the device does not use would. The calibration fits that constant to the measured peaks
(launcher.plan.calibrate's mem_context) and the pruned configuration's calibrated interval drops under capacity.
Slow (a few minutes): `python -m pytest -m slow tests/e2e/test_e2e_bringback.py`.
"""

from __future__ import annotations

import csv
import json
import os
import sqlite3
import subprocess
import sys

import pytest
from conftest import REPO

pytestmark = pytest.mark.slow

CONTEXT_GB = 0.36
"""Over-counted by the a-priori model: mbs 1-2 are predicted 0.43-0.44 GB (fit under 90 % of 0.5 GB), mbs 4 0.46 GB
(the band: its interval from 0.41 GB), mbs 16 0.61 GB with its interval from 0.55 GB (pruned); mbs 16 really peaks
near 0.35 GB (tests/data/replay/cpu_tiny_r1.csv)."""
WRAPPER = f"""
import runpy, sys
import launcher.plan.constants as constants
_apriori = constants._stack_constants
constants._stack_constants = lambda stack: _apriori(stack).with_values(cpu_context_gb={CONTEXT_GB})
sys.argv = ["launcher", *sys.argv[1:]]
runpy.run_module("launcher", run_name="__main__", alter_sys=True)
"""
ARGS = ["+sweep=tiny", "grid.gpus=[1]", "grid.zip=[]", "grid.tp=[1]", "grid.pp=[1]", "grid.mbs=[1,2,4]", "grid.gbs=[4]",
        "grid.include=[{gpus: 1, tp: 1, pp: 1, mbs: 16, gbs: 16}]", "backend.warmup_iters=1", "backend.measure_iters=3",
        "plan.keep_borderline=0", "analysis.confirm_top=0", "tracking.enabled=false"]


def test_a_planner_pruned_configuration_that_fits_is_brought_back_and_runs(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run([sys.executable, "-c", WRAPPER, *ARGS], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    folder = tmp_path / "sweeps" / "tiny"
    with (folder / "plan.csv").open() as fh:
        plan = {int(row["mbs"]): row for row in csv.DictReader(fh)}
    assert plan[4]["selection"] == "band" and plan[1]["selection"] == "predicted"
    assert plan[16]["selection"] == "pruned" and plan[16]["pruned_by"] == "predicted_oom"
    assert float(plan[16]["peak_mem_gb_low"]) > 0.5                      # the whole a-priori interval is over
    assert "even the interval's lower end is over the 0.5 GB" in plan[16]["pruned_reason"]
    db = sqlite3.connect(folder / "ledger.sqlite")
    db.row_factory = sqlite3.Row
    trials = {r["config_hash"]: dict(r) for r in db.execute("SELECT * FROM trials")}
    events = [dict(r) for r in db.execute("SELECT * FROM events ORDER BY id")]
    db.close()
    big = trials[plan[16]["config_hash"]]
    assert big["state"] == "ok" and big["selection"] == "brought_back", big
    back = [e for e in events if e["config_hash"] == big["config_hash"] and "brought back" in e["detail"]]
    assert len(back) == 1 and "the calibrated model says" in back[0]["detail"]        # once, with its reason
    assert all(r["state"] == "ok" for r in trials.values()), {r["config_hash"]: r["state"] for r in trials.values()}
    metrics = json.loads(big["metrics"])
    assert metrics["peak_mem_gb"] < 0.5 < json.loads(big["predicted"])["peak_mem_gb_low"]
    calibrated = json.loads(big["calibrated"])                              # what brought it back
    assert calibrated["peak_mem_gb"] < json.loads(big["predicted"])["peak_mem_gb"]
    assert "brought back: the calibrated model says" in proc.stdout + proc.stderr
    assert "Brought back after calibration (1)" in (folder / "report.html").read_text()
