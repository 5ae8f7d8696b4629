"""Expert parallelism end to end on the local executor: `python -m launcher +sweep=moe-tiny` runs the tiny MoE GPT
on 4 CPU ranks at ep 1, 2 and 4 and ep 2 x etp 2, the tokens dispatched to their experts by real all-to-alls over
gloo (launcher/workload/moe.py)."""

from __future__ import annotations

import json
import sqlite3

import pytest
from conftest import run_launcher

pytestmark = pytest.mark.slow


def test_moe_tiny_sweep_runs_every_expert_layout(tmp_path):
    # Every expert layout once (analysis.confirm_top=0: no finalist measured again) with one warm-up and two measured
    # steps: the test checks that each layout runs its all-to-alls to a result, not how steady its figure is
    # (the layouts' numerics against a single process are tests/run/test_workload_moe.py's).
    proc = run_launcher("+sweep=moe-tiny", "tracking.enabled=false", "analysis.confirm_top=0", "backend.warmup_iters=1",
                        "backend.measure_iters=2", cwd=tmp_path, timeout_s=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    db = sqlite3.connect(tmp_path / "sweeps" / "moe-tiny" / "ledger.sqlite")
    db.row_factory = sqlite3.Row
    rows = [dict(r) for r in db.execute("SELECT * FROM trials ORDER BY position")]
    db.close()
    ok = {(r["tp"], r["ep"], r["etp"]): json.loads(r["metrics"]) for r in rows if r["state"] == "ok"}
    assert set(ok) == {(1, 1, 1), (1, 2, 1), (1, 4, 1), (2, 2, 2)}, [(r["ep"], r["state"], r["reason"])
                                                                      for r in rows]
    assert all(m["tokens_per_s"] > 0 for m in ok.values())
