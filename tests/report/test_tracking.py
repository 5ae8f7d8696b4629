"""MLflow records on a real sqlite store: idempotent parent/child runs, best tag, metrics beside predictions."""

import math

import pytest

from analysis.report.tracking import Tracker, TrackingUnavailable, runs_table_url, trial_metrics, trial_tags

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


def test_the_evidence_line_is_a_tag_with_its_file_and_line():
    line = "[rank1]: RuntimeError: [enforce fail at alloc_cpu.cpp:127] DefaultCPUAllocator: can't allocate memory"
    oom = {**trial("b", state="oom"), "evidence": [{"file": "9_0_log.err", "line": 60, "text": line},
                                                   {"file": "9_0_log.out", "line": 2, "text": "second"}]}
    assert trial_tags(oom)["failure_evidence"] == f"9_0_log.err:60: {line}"
    assert trial_tags(trial("a"))["failure_evidence"] == ""  # judged before evidence was recorded, or ok


def test_best_tag_moves_with_the_winner(tracker):
    parent = tracker.parent_run("s", "u1", "", params={}, tags={})
    a = tracker.sync_trial("s", "u1", parent, trial("a"), {})
    b = tracker.sync_trial("s", "u1", parent, trial("b"), {})
    tracker.tag_best(a, parent, "a")
    tracker.tag_best(b, parent, "b")
    tags = {r.info.run_id: r.data.tags.get("parasweep.best") for r in children(tracker, parent)}
    assert tags == {a: "false", b: "true"}
    assert tracker.client.get_run(parent).data.tags["parasweep.best_config_hash"] == "b"


def test_predicted_beside_measured_with_the_error_in_percent_of_the_prediction():
    m = trial_metrics(trial("a"))  # measured 100 tokens/s and 0.1 GB against predicted 80 and 0.12
    assert m["predicted_tokens_per_s"] == 80.0 and m["tokens_per_s_vs_predicted_pct"] == pytest.approx(25.0)
    assert m["peak_mem_vs_predicted_pct"] == pytest.approx(100 * (0.1 / 0.12 - 1))  # less memory than predicted: < 0
    assert not any(k.startswith("calibrated_") for k in m)   # no calibration applied before it ran
    assert not any(k.startswith("estimate_error") for k in m)  # the old predicted/measured - 1 fractions are gone


def test_fractions_are_logged_as_percentages_and_throughput_also_per_gpu():
    t = trial("a", tokens=300.0)
    t["metrics"].update(mfu=0.235991, headroom=0.8)
    t["predicted"].update(mfu=0.2, headroom=0.75)
    m = trial_metrics({**t, "layout": {**LAYOUT, "gpus": 4}})
    assert (m["mfu_pct"], m["headroom_pct"]) == (pytest.approx(23.5991), pytest.approx(80.0))
    assert (m["predicted_mfu_pct"], m["predicted_headroom_pct"]) == (pytest.approx(20.0), pytest.approx(75.0))
    assert "mfu" not in m and "headroom" not in m
    assert m["tokens_per_s_per_gpu"] == pytest.approx(75.0)
    assert "tokens_per_s_per_gpu" not in trial_metrics(trial("b", state="oom", tokens=0.0))


def test_the_calibrated_prediction_beside_the_a_priori_one():
    m = trial_metrics({**trial("a"), "calibrated": {"tokens_per_s": 110.0, "step_time_s": 0.5, "peak_mem_gb": 0.1}})
    assert m["calibrated_tokens_per_s"] == 110.0 and m["calibrated_peak_mem_gb"] == 0.1
    assert m["tokens_per_s_vs_calibrated_pct"] == pytest.approx(100 * (m["tokens_per_s"] / 110.0 - 1.0))


def test_the_predictions_90_percent_intervals_are_metrics_beside_them():
    t = trial("a")
    t["predicted"].update(peak_mem_gb_low=0.1, peak_mem_gb_high=0.13, tokens_per_s_low=70.0, tokens_per_s_high=95.0)
    calibrated = {"tokens_per_s": 110.0, "step_time_s": 0.5, "step_sd": 0.1, "peak_mem_gb": 0.1, "mem_sd": 0.05}
    m = trial_metrics({**t, "calibrated": calibrated})
    assert (m["predicted_peak_mem_gb_low"], m["predicted_peak_mem_gb_high"]) == (0.1, 0.13)
    assert (m["predicted_tokens_per_s_low"], m["predicted_tokens_per_s_high"]) == (70.0, 95.0)
    assert m["calibrated_peak_mem_gb_low"] == pytest.approx(0.1 * math.exp(-1.6448536 * 0.05))
    assert m["calibrated_peak_mem_gb_high"] == pytest.approx(0.1 * math.exp(1.6448536 * 0.05))
    assert m["calibrated_tokens_per_s_low"] == pytest.approx(110.0 * math.exp(-1.6448536 * 0.1))
    assert "predicted_peak_mem_gb_low" not in trial_metrics(trial("b"))    # a ledger from before the intervals


def test_failure_kind_only_on_runs_that_did_not_finish_ok(tracker):
    assert "failure_kind" not in trial_tags({**trial("a"), "failure_kind": "ok"})
    assert trial_tags(trial("b", state="oom"))["failure_kind"] == "oom"
    parent = tracker.parent_run("s", "u1", "", params={}, tags={})
    run = tracker.sync_trial("s", "u1", parent, {**trial("a", state="failed"), "failure_kind": "nccl_error"}, {})
    assert tracker.client.get_run(run).data.tags["failure_kind"] == "nccl_error"
    tracker.sync_trial("s", "u1", parent, {**trial("a"), "failure_kind": "ok"}, {})  # re-judged ok, synced again
    tags = tracker.client.get_run(run).data.tags
    assert tags["status"] == "ok" and "failure_kind" not in tags


def test_unreachable_server_fails_fast():
    import time

    start = time.time()
    with pytest.raises(TrackingUnavailable, match="unreachable"):
        Tracker.connect("http://127.0.0.1:9", "exp")
    assert time.time() - start < 30


def test_runs_table_link_opens_the_model_training_navigation():
    assert runs_table_url("http://h:5000/", "3") == "http://h:5000/#/experiments/3/runs?workflowType=machine_learning"
    assert runs_table_url("http://h:5000", "3", "k") == ("http://h:5000/#/experiments/3/runs?workflowType="
                                                         "machine_learning&viewStateShareKey=k")


def test_experiments_are_model_training_ones_with_the_columns_explained(tmp_path):
    from mlflow.tracking import MlflowClient

    from analysis.report.tracking import EXPERIMENT_KIND_TAG, EXPERIMENT_NOTE, NOTE_TAG

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    tags = MlflowClient(uri).get_experiment(Tracker(uri, "fresh").experiment_id).tags
    assert tags[EXPERIMENT_KIND_TAG] == "custom_model_development" and tags[NOTE_TAG] == EXPERIMENT_NOTE
    assert "100 * (measured / predicted - 1): +20 means the measurement was 20% above" in EXPERIMENT_NOTE
    client = MlflowClient(uri)
    old = client.create_experiment("old")  # made before parasweep typed its experiments: no kind, no description
    mine = client.create_experiment("mine", tags={EXPERIMENT_KIND_TAG: "genai_development", NOTE_TAG: "my notes"})
    Tracker(uri, "old"), Tracker(uri, "mine")
    assert client.get_experiment(old).tags[EXPERIMENT_KIND_TAG] == "custom_model_development"
    assert client.get_experiment(old).tags[NOTE_TAG] == EXPERIMENT_NOTE
    assert {k: client.get_experiment(mine).tags[k] for k in (EXPERIMENT_KIND_TAG, NOTE_TAG)} == {
        EXPERIMENT_KIND_TAG: "genai_development", NOTE_TAG: "my notes"}  # a type and a text someone chose stay


def test_a_fresh_sweep_of_the_same_name_gets_new_runs(tracker):
    old_parent = tracker.parent_run("s", "u1", "", params={}, tags={})
    old_child = tracker.sync_trial("s", "u1", old_parent, trial("a"), {})
    new_parent = tracker.parent_run("s", "u2", "", params={}, tags={})
    new_child = tracker.sync_trial("s", "u2", new_parent, trial("a", tokens=5.0), {})
    assert new_parent != old_parent and new_child != old_child
    assert tracker.client.get_run(old_child).data.metrics["tokens_per_s"] == 100.0  # the kept sweep is untouched


def test_child_names_are_the_layouts_one_label():
    """A run's name is Layout.label(), the spelling of the terminal, the plan, the plots and the report: every
    dimension not at its default, cp and vpp included (cp=1 and cp=4 never share a name)."""
    from analysis.report.tracking import run_label
    from launcher.core.layout import Layout

    assert run_label(LAYOUT) == "tp1 pp2 dp1 mbs1 gbs8" == Layout.from_dict(LAYOUT).label()
    assert run_label({**LAYOUT, "gbs": 256, "mbs": 64}) == "tp1 pp2 dp1 mbs64 gbs256"
    assert run_label({**LAYOUT, "recompute": "selective"}, repeat=True) == "tp1 pp2 dp1 mbs1 gbs8 rc=selective rep"
    assert run_label({**LAYOUT, "sequence_parallel": True}) == "tp1 pp2 dp1 mbs1 gbs8 sp"
    assert run_label({**LAYOUT, "cp": 4, "gpus": 8}) == "tp1 pp2 dp1 cp4 mbs1 gbs8"
    assert run_label({**LAYOUT, "vpp": 2}) == "tp1 pp2 dp1 vpp2 mbs1 gbs8"


def test_the_link_opens_a_saved_view_of_this_sweep_sorted_by_throughput(tracker):
    import json

    from analysis.report.tracking import VIEW_TAG_PREFIX

    tracker.parent_run("s", "u123456789abcdef", "", params={}, tags={})
    assert tracker.runs_url.endswith(f"/#/experiments/{tracker.experiment_id}/runs?workflowType=machine_learning"
                                     "&viewStateShareKey=parasweep-u123456789ab")
    tags = tracker.client.get_experiment(tracker.experiment_id).tags
    envelope = json.loads(tags[VIEW_TAG_PREFIX + "parasweep-u123456789ab"])
    state = json.loads(envelope["state"])
    assert state["searchFilter"] == "tags.`parasweep.sweep_uid` = 'u123456789abcdef'"
    assert (state["orderByKey"], state["orderByAsc"]) == ("metrics.`tokens_per_s`", False)
    assert state["selectedColumns"] == ["metrics.`tokens_per_s`", "metrics.`tokens_per_s_per_gpu`",
                                        "metrics.`mfu_pct`", "metrics.`peak_mem_gb`", "metrics.`headroom_pct`",
                                        "tags.`status`", "tags.`failure_kind`"]
    assert envelope["name"].startswith("parasweep: sweep s") and isinstance(envelope["createdAt"], int)
    tracker.parent_run("s", "u123456789abcdef", "", params={}, tags={})  # a resume: the same view, not rewritten
    assert tracker.client.get_experiment(tracker.experiment_id).tags[VIEW_TAG_PREFIX + "parasweep-u123456789ab"] \
        == json.dumps(envelope)


def test_the_winner_is_starred_and_described_and_loses_both_when_overtaken(tracker):
    parent = tracker.parent_run("s", "u1", "", params={}, tags={})
    a = tracker.sync_trial("s", "u1", parent, trial("a"), {})
    b = tracker.sync_trial("s", "u1", parent, {**trial("b"), "layout": {**LAYOUT, "mbs": 2}}, {})
    tracker.tag_best(a, parent, "a", note="Best trial of sweep s: a")
    assert tracker.client.get_run(a).info.run_name == "\u2605 tp1 pp2 dp1 mbs1 gbs8"
    tracker.tag_best(a, parent, "a", note="Best trial of sweep s: a")  # again (python -m analysis): one star
    assert tracker.client.get_run(a).info.run_name == "\u2605 tp1 pp2 dp1 mbs1 gbs8"
    tracker.tag_best(b, parent, "b", note="Best trial of sweep s: b")
    run_a, run_b = tracker.client.get_run(a), tracker.client.get_run(b)
    assert (run_a.info.run_name, run_b.info.run_name) == ("tp1 pp2 dp1 mbs1 gbs8", "\u2605 tp1 pp2 dp1 mbs2 gbs8")
    assert run_a.data.tags["mlflow.note.content"] == "" and run_b.data.tags["mlflow.note.content"].endswith(": b")


def test_the_parent_lasts_the_active_time_not_the_wall_time_across_resumes(tracker, monkeypatch):
    import analysis.report.tracking as tracking

    parent = tracker.parent_run("s", "u1", "", params={}, tags={})
    t0 = tracker.client.get_run(parent).info.start_time
    clock = {"now": t0}
    monkeypatch.setattr(tracking, "_now_ms", lambda: clock["now"])
    tracker.reopen(parent)
    clock["now"] = t0 + 60_000                          # first session: 60 s
    tracker.finish_parent(parent, "FINISHED", {}, {})
    clock["now"] = t0 + 3_600_000                       # resumed an hour later
    tracker.reopen(parent)
    child = tracker.sync_trial("s", "u1", parent, {**trial("a"), "submitted_at": (t0 + 3_600_000) / 1000,
                                                   "finished_at": (t0 + 3_640_000) / 1000}, {})
    clock["now"] = t0 + 7_200_000                       # killed: no finish; the next session credits up to the trial
    tracker.reopen(parent)
    clock["now"] = t0 + 7_230_000                       # third session: 30 s, finished
    tracker.finish_parent(parent, "FINISHED", {"elapsed_s": 30}, {})
    run = tracker.client.get_run(parent)
    assert run.info.end_time - run.info.start_time == 60_000 + 40_000 + 30_000
    assert run.data.metrics["active_time_s"] == 130 and run.info.status == "FINISHED"
    assert tracker.client.get_run(child).info.end_time == t0 + 3_640_000


def test_the_ui_command_serves_the_store_at_the_printed_port(tmp_path, monkeypatch):
    from analysis.report.tracking import ui_command

    monkeypatch.chdir(tmp_path)
    command = ui_command("sqlite:///mlflow.db", "http://127.0.0.1:5123")
    assert command.split()[-5:] == ["ui", "--backend-store-uri", f"sqlite:///{tmp_path / 'mlflow.db'}", "--port",
                                    "5123"]
    assert "--host login01" in ui_command("sqlite:///x.db", "http://login01:8080")
    assert ui_command("http://tracking:5000", "http://127.0.0.1:5000") == ""


def test_metrics_are_logged_to_six_significant_digits(tracker):
    parent = tracker.parent_run("s", "u1", "", params={}, tags={})
    run = tracker.sync_trial("s", "u1", parent, trial("a", tokens=3893.05083868526), {})
    assert tracker.client.get_run(run).data.metrics["tokens_per_s"] == 3893.05


def test_only_store_errors_count_as_mlflow_going_away(load, tmp_path, in_tmp):
    """An unreachable store costs a warning and the sweep goes on; a bug in our own code is not hidden as one."""
    from mlflow.exceptions import MlflowException

    from analysis.report.tracking_link import TrackingLink
    from launcher.core.record import TrialRecord
    from launcher.run.folder import SweepFolder
    from launcher.run.ledger import Ledger

    cfg = load("+sweep=tiny")
    folder = SweepFolder(tmp_path / "sweeps" / "tiny")
    folder.create()
    with Ledger(folder.ledger) as ledger:
        layout = {"gpus": 1, "nodes": 1, "tp": 1, "pp": 1, "dp": 1, "mbs": 1, "gbs": 8}
        ledger.add_trials([TrialRecord("a", 0, layout, state="ok"), TrialRecord("b", 1, layout, state="ok")])

        class Broken:
            def __init__(self, error):
                self.error = error

            def sync_trial(self, *args, **kwargs):
                raise self.error

        link = TrackingLink(cfg, ledger, folder, Broken(TypeError("a bug")), "parent")
        with pytest.raises(TypeError, match="a bug"):
            link.sync(ledger.get("a"))
        link = TrackingLink(cfg, ledger, folder, Broken(MlflowException("connection refused")), "parent")
        link.sync(ledger.get("a"))
        assert not link.active and not ledger.get("a").synced  # python -m analysis syncs it later


def test_a_huge_log_reaches_mlflow_as_its_head_and_tail(tracker, tmp_path):
    from analysis.report.tracking import log_excerpt

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
