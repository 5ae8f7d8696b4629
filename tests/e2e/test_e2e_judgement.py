"""End to end: a tiny sweep in which one trial's workload reports impossible numbers (1e30 tokens/s, negative
memory, NaN MFU) and another's reports zero and negative step times. The sweep finishes (exit 0), those trials
are invalid_measurement (never ranked), and the winner and best.json (strict JSON) are the real best.

Slow (a few minutes on a shared 2-core machine): `python -m pytest -m slow tests/e2e/test_e2e_judgement.py`.
"""

from __future__ import annotations

import json

import pytest
from conftest import run_launcher
from test_e2e_local import FEW_STEPS, ledger_rows

pytestmark = pytest.mark.slow


def dp_of(row: dict) -> int:
    """The trial's data-parallel size (main's typed ledger has a column per layout dimension; before it, one JSON
    layout column)."""
    return row["dp"] if "dp" in row else json.loads(row["layout"])["dp"]


def strict_loads(text: str):
    def refuse(constant):
        raise ValueError(f"not strict JSON: {constant}")
    return json.loads(text, parse_constant=refuse)


def test_impossible_measurements_are_rejected_and_the_real_best_wins(tmp_path):
    # 4 ranks as tp x pp = 1x1 (dp 4), 2x1 (dp 2), 1x2 (dp 2), 2x2 (dp 1): the faults pick the dp=1 and dp=4 trials
    faults = "[--fault,impossible,--fault-if,'dp=1',--fault,zero-step,--fault-if,'dp=4']"
    # few steps: the faults falsify the result line whatever the number of steps, and the real best is the faster
    # of the two real trials, however steady their figures
    proc = run_launcher("+sweep=tiny", "grid.mbs=[1]", "grid.include=[]", "retry.max_attempts=1", "analysis.confirm_top=0",
                        f"backend.extra_args={faults}", *FEW_STEPS, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    rows = {dp_of(r): r for r in ledger_rows(tmp_path)}
    assert sorted(rows) == [1, 2, 4]  # dp=2 holds two trials; the dict keeps one, checked below by state
    impossible, zero_step = rows[1], rows[4]
    assert (impossible["state"], impossible["failure_kind"]) == ("failed", "invalid_measurement")
    assert impossible["reason"].startswith("impossible measurement: ")
    assert any(name in impossible["reason"] for name in ("tokens_per_s", "peak_mem_gb", "mfu"))
    assert (zero_step["state"], zero_step["failure_kind"]) == ("failed", "invalid_measurement")
    assert "step_time_s = 0.0" in zero_step["reason"]

    all_rows = ledger_rows(tmp_path)
    real = [r for r in all_rows if r["state"] == "ok"]
    assert len(real) == 2 and all(dp_of(r) == 2 for r in real)
    for row in all_rows:  # the ledger holds strict JSON only
        strict_loads(row["metrics"] or "{}")
    best = strict_loads((tmp_path / "sweeps" / "tiny" / "best.json").read_text())
    fastest = max(real, key=lambda r: json.loads(r["metrics"])["tokens_per_s"])
    assert best["config_hash"] == fastest["config_hash"]
    assert best["measured"]["tokens_per_s"] == json.loads(fastest["metrics"])["tokens_per_s"] < 1e9
