"""The calibrated memory rule (launcher.run.memory_prune); in the sweep loop: tests/run/test_search_loop.py, on
columns: tests/run/test_poll_columns.py."""

from __future__ import annotations

from launcher.core.record import TrialRecord
from launcher.run.memory_prune import calibrated_ooms


def test_calibrated_ooms_never_prune_what_a_measured_trial_needing_as_much_shows_to_fit():
    lay = {"gpus": 2, "nodes": 1, "tp": 1, "pp": 1, "dp": 2, "vpp": 1, "mbs": 1, "gbs": 8, "recompute": "none",
           "sequence_parallel": False, "zero_stage": 0, "distributed_optimizer": False}
    ran = TrialRecord("ran", 0, lay, {"step_time_s": 1.0, "peak_mem_gb": 0.3}, state="ok")
    big = TrialRecord("big", 1, lay | {"mbs": 2}, {"step_time_s": 1.0, "peak_mem_gb": 0.3})
    bigger = TrialRecord("bigger", 2, lay | {"mbs": 4}, {"step_time_s": 1.0, "peak_mem_gb": 0.4})
    predictions = {"ran": {"peak_mem_gb": 0.7, "n_fit": 3}, "big": {"peak_mem_gb": 0.6, "n_fit": 3},
                   "bigger": {"peak_mem_gb": 0.8, "n_fit": 3}}
    out = dict(calibrated_ooms([ran, big, bigger], predictions, capacity_gb=0.5, margin=0.9))
    assert list(out) == ["bigger"] and "0.8 GB (90 % interval from 0.8 GB) > 0.5 GB" in out["bigger"]
