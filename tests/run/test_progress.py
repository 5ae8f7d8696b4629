import time

from launcher.core.console import Reporter
from launcher.core.record import TrialRecord
from launcher.core.states import TrialState
from launcher.run.progress import LIVE_ROWS, Progress, _visible, format_eta, summary_line

LAY = {"gpus": 4, "nodes": 1, "tp": 1, "pp": 2, "dp": 2, "mbs": 1, "gbs": 8}


def test_eta_from_finished_share():
    assert format_eta(0, 10, 5.0) == "-"
    assert format_eta(5, 10, 100.0) == "1m40s"
    assert format_eta(10, 10, 100.0) == "0s"


def test_summary_counts_states_and_names_the_best():
    recs = [TrialRecord("a", 0, LAY, state="ok", metrics={"tokens_per_s": 1234.0}),
            TrialRecord("b", 1, LAY, state="running"), TrialRecord("c", 2, LAY, state="pruned")]
    line = summary_line(recs, time.time() - 61, recs[0])
    assert "1/2 done" in line and "ok=1" in line and "running=1" in line and "1,234 tok/s" in line
    assert line.startswith("[1m01s]")


def test_live_rows_show_running_first_and_are_capped():
    recs = [TrialRecord(f"d{i}", i, LAY, state="ok", updated_at=i) for i in range(30)]
    recs.append(TrialRecord("live", 99, LAY, state="running", updated_at=0))
    shown = _visible(recs)
    assert len(shown) == LIVE_ROWS and shown[0].config_hash == "live" and shown[1].config_hash == "d29"


def test_plain_output_prints_changes_not_every_poll(capsys):
    progress = Progress("sweep t", Reporter.for_streams(), interactive=False)
    recs = [TrialRecord("a", 0, LAY, state="running", attempts=1, started_at=time.time() - 3600)]
    progress.update(recs, None)
    time.sleep(0.05)  # the GPU-hours of the running trial grow between polls: not a change worth a line
    progress.update(recs, None)
    recs = [TrialRecord("a", 0, LAY, state="ok", metrics={"tokens_per_s": 5.0})]
    progress.update(recs, recs[0])
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2 and "ok=1" in lines[1]


def test_eta_of_a_resumed_sweep_counts_only_this_runs_trials():
    recs = [TrialRecord(f"d{i}", i, LAY, state="ok") for i in range(8)] + \
           [TrialRecord("n", 8, LAY, state="ok"), TrialRecord("m", 9, LAY, state="running")]
    # 8 done before this run, 1 done in 60 s of this run, 1 to go: about a minute, not seconds
    line = summary_line(recs, time.time() - 60, None, done_before=8)
    assert "eta 1m00s |" in line or "eta 59s |" in line


def test_the_line_ends_with_the_gpu_hours_spent_of_the_budget():
    now = time.time()
    recs = [TrialRecord("a", 0, LAY, state="ok", attempts=1, started_at=now - 1800, finished_at=now - 900),
            TrialRecord("b", 1, LAY, state="running", attempts=1, started_at=now - 900),
            TrialRecord("c", 2, LAY, state="submitted", attempts=1, submitted_at=now - 900)]  # queued: no GPU
    assert summary_line(recs, now - 1800, None).endswith("| 2 GPU-h")  # 4 GPUs x (15 + 15 min)
    assert summary_line(recs, now - 1800, None, budget_gpu_hours=5).endswith("| 2/5 GPU-h")


def test_the_line_from_kept_counts_is_the_line_from_the_records():
    now = time.time()
    recs = [TrialRecord("a", 0, LAY, state="ok", attempts=1, started_at=now - 1800, finished_at=now - 900),
            TrialRecord("b", 1, LAY, state="planned", attempts=2, started_at=now - 900, finished_at=now - 600),
            TrialRecord("c", 2, LAY, state="planned"), TrialRecord("d", 3, LAY, state="pruned")]
    counts = {TrialState.OK: 1, TrialState.PLANNED: 2, TrialState.PRUNED: 1}
    kept = summary_line(recs, now - 60, None, counts=counts, ran=recs[:2])
    assert kept == summary_line(recs, now - 60, None) and "| 1.33 GPU-h" in kept   # 4 GPUs x (15 + 5 min)
    assert summary_line(recs, now - 60, None, counts=counts, ran=recs[:1]) != kept  # `ran` is what is summed
