"""MLflow records on a real sqlite store: idempotent parent/child runs, best tag, metrics beside predictions."""

import pytest

from analysis.tracking import Tracker, TrackingUnavailable, runs_table_url, trial_metrics

LAYOUT = {"gpus": 2, "nodes": 1, "tp": 1, "pp": 2, "dp": 1, "vpp": 1, "mbs": 1, "gbs": 8, "recompute": "none",
          "sequence_parallel": False, "zero_stage": 0, "distributed_optimizer": False}


def trial(h, state="ok", tokens=100.0, run_id=""):
    return {"config_hash": h, "layout": LAYOUT, "state": state, "failure_kind": "" if state == "ok" else state,
            "reason": "", "job_id": "7", "selection": "predicted", "attempts": 1, "mlflow_run_id": run_id,
            "metrics": {"tokens_per_s": tokens, "peak_mem_gb": 0.1, "headroom": 0.8},
            "predicted": {"tokens_per_s": 80.0, "peak_mem_gb": 0.12}, "submitted_at": 1.0e9, "finished_at": 1.0e9 + 5}


@pytest.fixture
def tracker(tmp_path):
    return Tracker(f"sqlite:///{tmp_path / 'mlflow.db'}", "exp")


def children(tracker, parent):
    return tracker.client.search_runs([tracker.experiment_id], f"tags.mlflow.parentRunId = '{parent}'")


def test_parent_is_found_again_and_children_are_not_duplicated(tracker, tmp_path):
    parent = tracker.parent_run("s", "u1", "", params={"model": "tiny"}, tags={})
    assert tracker.parent_run("s", "u1", "", params={"model": "tiny"}, tags={}) == parent  # found by tag
    first = tracker.sync_trial("s", "u1", parent, trial("a"), {"model": "tiny"})
    # the ledger lost the run id (crash between MLflow write and ledger write): found by its config-hash tag
    again = tracker.sync_trial("s", "u1", parent, trial("a", tokens=120.0), {"model": "tiny"})
    assert again == first and len(children(tracker, parent)) == 1
    run = tracker.client.get_run(first)
    assert run.data.metrics["tokens_per_s"] == 120.0 and run.data.params["pp"] == "2"
    assert run.info.status == "FINISHED" and run.info.end_time == int((1.0e9 + 5) * 1000)


def test_failed_trial_run_status_and_log_artifact(tracker, tmp_path):
    parent = tracker.parent_run("s", "u1", "", params={}, tags={})
    log = tmp_path / "9_0_log.err"
    log.write_text("DefaultCPUAllocator: can't allocate memory\n")
    run_id = tracker.sync_trial("s", "u1", parent, trial("b", state="oom"), {}, [log])
    run = tracker.client.get_run(run_id)
    assert run.info.status == "FAILED" and run.data.tags["status"] == "oom"
    assert [a.path for a in tracker.client.list_artifacts(run_id, "logs")] == ["logs/9_0_log.err.log"]


def test_best_tag_moves_with_the_winner(tracker):
    parent = tracker.parent_run("s", "u1", "", params={}, tags={})
    a = tracker.sync_trial("s", "u1", parent, trial("a"), {})
    b = tracker.sync_trial("s", "u1", parent, trial("b"), {})
    tracker.tag_best(a, parent, "a")
    tracker.tag_best(b, parent, "b")
    tags = {r.info.run_id: r.data.tags.get("parasweep.best") for r in children(tracker, parent)}
    assert tags == {a: "false", b: "true"}
    assert tracker.client.get_run(parent).data.tags["parasweep.best_config_hash"] == "b"


def test_predicted_beside_measured_with_the_error():
    m = trial_metrics(trial("a"))
    assert m["predicted_tokens_per_s"] == 80.0 and m["estimate_error_tokens"] == pytest.approx(-0.2)
    assert m["estimate_error_mem"] == pytest.approx(0.2)


def test_unreachable_server_fails_fast():
    import time

    start = time.time()
    with pytest.raises(TrackingUnavailable, match="unreachable"):
        Tracker.connect("http://127.0.0.1:9", "exp")
    assert time.time() - start < 30


def test_runs_table_link():
    assert runs_table_url("http://h:5000/", "3") == "http://h:5000/#/experiments/3/runs"


def test_a_fresh_sweep_of_the_same_name_gets_new_runs(tracker):
    old_parent = tracker.parent_run("s", "u1", "", params={}, tags={})
    old_child = tracker.sync_trial("s", "u1", old_parent, trial("a"), {})
    new_parent = tracker.parent_run("s", "u2", "", params={}, tags={})
    new_child = tracker.sync_trial("s", "u2", new_parent, trial("a", tokens=5.0), {})
    assert new_parent != old_parent and new_child != old_child
    assert tracker.client.get_run(old_child).data.metrics["tokens_per_s"] == 100.0  # the kept sweep is untouched


def test_a_huge_log_reaches_mlflow_as_its_head_and_tail(tracker, tmp_path):
    from analysis.tracking import log_excerpt

    log = tmp_path / "5_0_log.out"
    with log.open("wb") as fh:  # 12 MB: start-up, a long middle, and the result at the very end
        fh.write(b"starting rank 0\n")
        fh.write(b"x" * (12 * 1024 * 1024))
        fh.write(b"\nPARASWEEP_RESULT {}\n")
    text = log_excerpt(log, head_bytes=1024 * 1024, tail_bytes=1024 * 1024)
    assert len(text) < 2.2 * 1024 * 1024 and text.startswith("starting rank 0")
    assert text.rstrip().endswith("PARASWEEP_RESULT {}") and str(log.resolve()) in text
    small = tmp_path / "6_0_log.out"
    small.write_text("whole\n")
    assert log_excerpt(small) == "whole\n"
    parent = tracker.parent_run("s", "u1", "", params={}, tags={})
    run_id = tracker.sync_trial("s", "u1", parent, trial("c"), {}, [log])
    stored = tracker.client.download_artifacts(run_id, "logs/5_0_log.out.log", str(tmp_path / "dl"))
    from pathlib import Path

    assert Path(stored).stat().st_size < 4.2 * 1024 * 1024  # at most the first and last 2 MB (plus a line)
