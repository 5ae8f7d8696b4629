"""The search in the sweep loop (launcher.run.search): order, calibration, re-pruning, early stop and stop rule,
against a scripted runner that writes workload logs (no real jobs). The tiny sweep's real plan gives the trials
and their a-priori predictions."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from analysis.logs.progress import running_step_times
from analysis.report.tracking_link import TrackingLink
from launcher.__main__ import sweep_hooks
from launcher.core.console import Reporter
from launcher.core.errors import ConfigError
from launcher.core.states import TrialState
from launcher.plan.constants import constants_for
from launcher.plan.planner import make_plan
from launcher.plan.pooling import pooled
from launcher.run.executor import JobStatus, Submitted
from launcher.run.folder import SweepFolder
from launcher.run.ledger import Ledger
from launcher.run.loop import SweepLoop, _records
from launcher.run.prior import prior_from
from launcher.run.search import Search


def workload_log(step_times_s, tokens_per_step: int, peak_gb=None) -> str:
    """What the embedded workload prints: measured steps and, when it finished, its result line."""
    lines = [f"[parasweep] iteration {i + 1}/9 | phase measure | step time (ms): {s * 1e3:.3f} | lm loss: 1.0"
             for i, s in enumerate(step_times_s)]
    if peak_gb is not None:
        median = sorted(step_times_s)[len(step_times_s) // 2]
        result = {"step_time_s": median, "tokens_per_s": tokens_per_step / median, "peak_mem_gb": peak_gb}
        lines.append("PARASWEEP_RESULT " + json.dumps(result))
    return "\n".join(lines) + "\n"


class SearchRunner:
    """Jobs end at the first poll as `measure(record)` says: ('ok', step_s, peak_gb) or ('running', [step_s])
    (a job that keeps running, having logged those measured steps)."""

    name = "scripted"

    def __init__(self, jobs_dir: Path, records: dict, measure, slots: int = 1) -> None:
        self.jobs_dir, self.records, self.measure, self.slots = jobs_dir, records, measure, slots
        self.submitted: list[str] = []
        self.cancelled: list[str] = []
        self._key: dict[str, str] = {}

    def concurrency(self, ranks: int) -> int:
        return self.slots

    def submit(self, requests) -> Submitted:
        done = Submitted()
        for req in requests:
            job_id = str(len(self.submitted) + 1)
            self.submitted.append(req.key)
            self._key[job_id] = req.key
            (self.jobs_dir / job_id).mkdir(parents=True)
            done.jobs[req.key] = (job_id, self.jobs_dir / job_id)
        return done

    def poll(self, jobs: dict) -> dict:
        out = {}
        for job_id, folder in jobs.items():
            r = self.records[self._key[job_id]]
            tokens = r.layout.gbs * 128
            what = self.measure(r)
            if what[0] == "ok":
                (folder / f"{job_id}_0_log.out").write_text(workload_log([what[1]] * 4, tokens, what[2]))
                out[job_id] = JobStatus("COMPLETED", 0)
            else:
                (folder / f"{job_id}_0_log.out").write_text(workload_log(what[1], tokens))
                out[job_id] = JobStatus("RUNNING")
        return out

    def cancel(self, job_id: str) -> None:
        self.cancelled.append(self._key[job_id])


def sweep(load, tmp_path, measure, *overrides, slots=1):
    cfg = load("+sweep=tiny", "monitor.poll_interval_s=0.01", "tracking.enabled=false", *overrides)
    records = _records(make_plan(cfg))
    folder = SweepFolder(tmp_path / "sweeps" / "tiny")
    ledger = Ledger(folder.ledger)
    ledger.add_trials(records)
    loop = SweepLoop(cfg, folder, ledger, TrackingLink.disabled(cfg, ledger, folder),
                     {r.config_hash for r in records}, hooks=sweep_hooks(Reporter.quiet()),
                     reporter=Reporter.for_streams())
    loop.runner = SearchRunner(folder.jobs, {r.config_hash: r for r in records}, measure, slots)
    loop.run()
    return loop, {r.config_hash: r for r in ledger.trials()}


def slower(factor: float = 2.0):
    """Every trial measures `factor` x its a-priori step time and its predicted peak (it fits)."""
    return lambda r: ("ok", factor * r.predicted["step_time_s"], min(0.45, r.predicted["peak_mem_gb"]))


def test_the_best_predicted_trial_that_fits_runs_first(load, tmp_path, in_tmp):
    loop, trials = sweep(load, tmp_path, slower())
    submitted = loop.runner.submitted
    ledger_first = min(trials.values(), key=lambda r: r.position)
    assert ledger_first.layout.mbs == 64          # the plan's first row is the borderline predicted OOM ...
    assert submitted[0] != ledger_first.config_hash
    assert trials[submitted[0]].layout.label() == "tp1 pp1 dp4 mbs2 gbs8"   # ... the best one likely to fit goes
    assert trials[submitted[-1]].layout.mbs == 64                            # first; the unlikely fit goes last
    assert len(submitted) == len(trials)


def test_the_calibration_applies_after_three_measured_trials_and_re_predicts_the_queue(load, tmp_path, in_tmp,
                                                                                      capsys):
    loop, trials = sweep(load, tmp_path, slower(2.0))
    assert capsys.readouterr().out.count("calibration applied: fitted on 3 measured trials") == 1
    cal = json.loads(loop.folder.calibration.read_text())
    assert cal["applied"] and cal["n_trials"] == len(trials)
    order = [trials[k] for k in loop.runner.submitted]
    assert not order[0].calibrated                           # run before anything was measured: nothing learned
    for r in order[1:]:                                      # run after: what the search predicted, frozen
        assert r.calibrated["step_time_s"] == pytest.approx(r.metrics["step_time_s"], rel=0.25)
        assert r.predicted["step_time_s"] == pytest.approx(r.metrics["step_time_s"] / 2, rel=1e-6)
    assert [r.calibrated["n_fit"] for r in order[1:4]] == [1, 2, 3]   # the constants are refitted from the 3rd
    assert cal["n_holdout"] == len(order) - 1 and cal["holdout_error"] < 0.25


def test_a_resumed_sweep_recomputes_the_calibration_from_the_ledger(load, tmp_path, in_tmp):
    loop, trials = sweep(load, tmp_path, slower(2.0))
    first = json.loads(loop.folder.calibration.read_text())
    loop.folder.calibration.unlink()
    again = SweepLoop(loop.cfg, loop.folder, loop.ledger, loop.tracking, loop.allowed, hooks=loop.hooks,
                      reporter=loop.reporter)
    again.runner = loop.runner
    again.run()                                             # nothing left to run: it only learns
    assert json.loads(loop.folder.calibration.read_text()) == first


def test_the_calibrated_memory_model_prunes_what_it_puts_over_the_margin(load, tmp_path, in_tmp):
    # Every measured peak is 0.35 GB above the a-priori one (a larger context than the model's): the fitted memory
    # model moves every prediction up, and the trial needing most memory (mbs64, kept by the planner as borderline:
    # a-priori 0.84 GB, within 0.9 + 0.9 of 0.5 GB) goes over that with its whole calibrated interval over 0.5 GB,
    # unless it ran before the fit.
    def measure(r):
        return ("ok", 2 * r.predicted["step_time_s"], 0.35 + r.predicted["peak_mem_gb"])

    loop, trials = sweep(load, tmp_path, measure, "plan.keep_borderline=0.9")
    pruned = [r for r in trials.values() if r.pruned_by == "calibrated_oom"]
    assert pruned, {r.layout.label(): r.state for r in trials.values()}
    for r in pruned:
        assert r.state == "pruned" and "calibrated prediction" in r.reason and r.attempts == 0
        assert r.calibrated["peak_mem_gb"] * math.exp(-1.645 * r.calibrated["mem_sd"]) > 0.5
    fitted = [r for r in trials.values() if r.state == "ok"]
    assert all(r.calibrated.get("peak_mem_gb", 0) < min(p.calibrated["peak_mem_gb"] for p in pruned)
               for r in fitted if r.calibrated)


def test_a_running_trial_known_worse_than_the_best_is_stopped_early_and_kept(load, tmp_path, in_tmp):
    def measure(r):
        if r.layout.label() == "tp2 pp2 dp1 mbs1 gbs8":       # 3 measured steps, 5x slower than it should be
            return ("running", [5 * r.predicted["step_time_s"]] * 3)
        return ("ok", r.predicted["step_time_s"], 0.1)

    loop, trials = sweep(load, tmp_path, measure, "plan.early_stop=true")   # the tiny sweep turns it off
    slow = next(r for r in trials.values() if r.layout.label() == "tp2 pp2 dp1 mbs1 gbs8")
    assert slow.state == "stopped_early" and slow.attempts == 1 and loop.runner.cancelled == [slow.config_hash]
    assert slow.metrics["n_measured"] == 3 and slow.metrics["tokens_per_s"] > 0 and "below the best" in slow.reason
    assert loop._best(list(trials.values())).config_hash != slow.config_hash
    calibration = json.loads(loop.folder.calibration.read_text())
    assert calibration["n_trials"] == sum(r.state in ("ok", "stopped_early") for r in trials.values())


@pytest.mark.parametrize("steps, overrides", [
    (2, ("plan.early_stop=true",)),     # 2 < plan.early_stop_min_iters=3 measured steps: too few to judge
    (3, ("plan.early_stop=false",)),    # switched off
])
def test_a_slow_running_trial_runs_on_with_too_few_steps_or_early_stop_off(load, tmp_path, in_tmp, steps,
                                                                           overrides):
    def measure(r):
        if r.layout.label() == "tp2 pp2 dp1 mbs1 gbs8":
            return ("running", [5 * r.predicted["step_time_s"]] * steps)
        return ("ok", r.predicted["step_time_s"], 0.1)

    loop, trials = sweep(load, tmp_path, measure, "monitor.hang_timeout_min=0.003", "retry.max_attempts=1",
                         *overrides)
    slow = next(r for r in trials.values() if r.layout.label() == "tp2 pp2 dp1 mbs1 gbs8")
    assert slow.state is TrialState.HANG        # it ran on until the monitor's hang timeout (no new steps in this script)
    assert not any(r.state == "stopped_early" for r in trials.values())


def test_the_stop_rule_prunes_what_cannot_beat_the_best_and_says_why(load, tmp_path, in_tmp):
    # every trial 2x its a-priori time: once the level is learned the predictions hold, and the rest cannot win
    loop, trials = sweep(load, tmp_path, slower(), "plan.stop_when_converged=true")
    converged = [r for r in trials.values() if r.pruned_by == "converged"]
    assert converged and loop.stop_decision.startswith("converged")
    assert len(loop.runner.submitted) == len(trials) - len(converged) >= 3     # the minimum before it is trusted
    for r in converged:
        assert r.state == "pruned" and r.attempts == 0 and "converged" in r.reason


def test_the_stop_rule_prunes_nothing_while_the_predictions_miss_by_far_more_than_their_spreads(load, tmp_path,
                                                                                                in_tmp):
    # the best predicted trial is 5x faster than the rest, which the predictions then missed by 5x: a trial they
    # call hopeless may be as far off (launcher.plan.residuals.miss_floor; before, this sweep converged)
    def measure(r):
        factor = 0.2 if r.layout.label() == "tp1 pp1 dp4 mbs2 gbs8" else 1.0
        return ("ok", factor * r.predicted["step_time_s"], 0.1)

    loop, trials = sweep(load, tmp_path, measure, "plan.stop_when_converged=true")
    assert not [r for r in trials.values() if r.pruned_by == "converged"]
    assert len(loop.runner.submitted) == len(trials)


def test_the_stop_rule_is_off_by_default(load, tmp_path, in_tmp):
    def measure(r):
        factor = 0.2 if r.layout.label() == "tp1 pp1 dp4 mbs2 gbs8" else 2.0
        return ("ok", factor * r.predicted["step_time_s"], 0.1)

    loop, trials = sweep(load, tmp_path, measure)
    assert loop.stop_decision is None and len(loop.runner.submitted) == len(trials)


def test_the_per_gpu_objective_orders_by_throughput_per_gpu(load, tmp_path, in_tmp):
    loop, trials = sweep(load, tmp_path, slower(), "plan.objective=tokens_per_s_per_gpu")
    first = trials[loop.runner.submitted[0]]
    assert first.layout.label() == "tp1 pp1 dp2 mbs4 gbs8"     # 2 ranks: the best predicted per GPU, not overall


# -- pure helpers --------------------------------------------------------------------------------------------------
def test_running_step_times_are_the_measured_steps_or_those_after_the_warm_up():
    labelled = ("[parasweep] iteration 1/5 | phase warmup | step time (ms): 900.0 | lm loss: 1.0\n"
                "[parasweep] iteration 2/5 | phase measure | step time (ms): 100.0 | lm loss: 1.0\n"
                "[parasweep] iteration 3/5 | phase measure | step time (ms): 110.0 | lm loss: 1.0\n")
    assert running_step_times(labelled, warmup_iters=0) == pytest.approx([0.1, 0.11])
    megatron = "".join(f" iteration {i}/ 100 | elapsed time per iteration (ms): {ms} | lm loss: 1.0E+01 |\n"
                       for i, ms in enumerate([9000.0, 3000.0, 1000.0, 1010.0, 990.0, 1000.0], 1))
    assert running_step_times(megatron, warmup_iters=1) == pytest.approx([1.0, 1.01, 0.99, 1.0])


def test_a_steady_running_trial_ends_ok_with_fewer_measured_iterations(load, tmp_path, in_tmp):
    target = "tp2 pp2 dp1 mbs1 gbs8"

    def measure(r):
        if r.layout.label() == target:      # 3 of its 4 measured steps logged, within 0.1 % of each other (and
            s = r.predicted["step_time_s"] / 4           # the fastest trial: nothing to stop it early as a loser)
            return ("running", [s, 1.001 * s, 0.999 * s])
        return ("ok", r.predicted["step_time_s"], 0.1)

    loop, trials = sweep(load, tmp_path, measure, "plan.early_stop=true")
    steady = next(r for r in trials.values() if r.layout.label() == target)
    assert steady.state is TrialState.OK and loop.runner.cancelled == [steady.config_hash] and steady.attempts == 1
    assert steady.metrics["n_measured"] == 3 and "steady after 3 measured iterations" in steady.reason
    assert steady.metrics["tokens_per_s"] == pytest.approx(4 * 8 * 128 / steady.predicted["step_time_s"], rel=0.002)
    assert loop._best(list(trials.values())).config_hash == steady.config_hash
    assert steady.metrics.get("mfu", 0) > 0          # rates in the planner's FLOP convention, as a finished trial


def test_a_noisy_running_trial_is_not_steady(load, tmp_path, in_tmp):
    target = "tp2 pp2 dp1 mbs1 gbs8"

    def measure(r):
        if r.layout.label() == target:      # +-10 %: its mean is not known to 2 % after 3 steps
            s = r.predicted["step_time_s"] / 4
            return ("running", [s, 1.1 * s, 0.9 * s])
        return ("ok", r.predicted["step_time_s"], 0.1)

    loop, trials = sweep(load, tmp_path, measure, "plan.early_stop=true", "monitor.hang_timeout_min=0.003",
                         "retry.max_attempts=1")
    assert next(r for r in trials.values() if r.layout.label() == target).state is TrialState.HANG


def test_a_sweep_starts_from_a_finished_sweeps_calibration(load, tmp_path, in_tmp):
    first, _ = sweep(load, tmp_path / "a", slower(2.0))
    data = json.loads(first.folder.calibration.read_text())
    assert data["setup"] == {"cluster": "local-cpu", "gpu": "cpu", "backend": "torch", "precision": "fp32"}
    cfg = load("+sweep=tiny", f"plan.prior_from={first.folder.root}")
    prior = prior_from(cfg, first.search.prior.constants)
    assert prior.source == str(first.folder.root) and prior.constants.to_dict() == data["constants"]
    records = _records(make_plan(cfg))
    before = Search(cfg).predictions(records)
    warm = Search(cfg, prior).predictions(records)          # nothing measured yet: what the first sweep learned
    for key, p in warm.items():
        assert p["step_time_s"] == pytest.approx(2 * before[key]["step_time_s"], rel=0.15)


def test_prior_from_refuses_another_setup_and_a_missing_folder(load, tmp_path, in_tmp):
    first, _ = sweep(load, tmp_path / "a", slower(2.0))
    data = json.loads(first.folder.calibration.read_text())
    other = tmp_path / "other"
    other.mkdir()
    (other / "calibration.json").write_text(json.dumps({**data, "setup": {**data["setup"], "cluster": "dgx-h100"}}))
    cfg = load("+sweep=tiny", f"plan.prior_from={other}")
    with pytest.raises(ConfigError) as err:
        prior_from(cfg, first.search.prior.constants)
    assert "plan.prior_from" in str(err.value) and "dgx-h100" in str(err.value) and "local-cpu" in str(err.value)
    with pytest.raises(ConfigError, match="cannot read"):
        prior_from(load("+sweep=tiny", f"plan.prior_from={tmp_path / 'nowhere'}"), first.search.prior.constants)


def test_the_searchs_caches_predict_what_a_fresh_search_does(load, monkeypatch):
    """Search keeps one features table (built in chunks) and its prediction between polls: after trials are
    measured and pruned, its predictions are a fresh Search's over the same records, to the last bit."""
    import numpy as np

    from launcher.plan.calibrate import FeatureTable
    from launcher.run import search as search_module

    monkeypatch.setattr(search_module, "FEATURE_CHUNK", 3)
    cfg = load("+sweep=tiny")
    records = _records(make_plan(cfg))
    assert len(records) > 6
    kept = Search(cfg)
    chunked = kept._feature_table(records).expanded()
    whole = FeatureTable([kept._trial_features(r) for r in records])
    assert all(np.array_equal(getattr(chunked, k), getattr(whole, k)) for k, v in vars(whole).items()
               if isinstance(v, np.ndarray)) and chunked.n == whole.n
    assert kept.predictions(records)
    for i, r in enumerate(records[:5]):       # measured 1.5x slower than predicted; then one pruned
        records[i] = replace(r, state=TrialState.OK, metrics={"step_time_s": 1.5 * r.predicted["step_time_s"],
                                                              "peak_mem_gb": r.predicted["peak_mem_gb"]})
        kept.refit(records)
        kept.predictions(records)
    records[6] = replace(records[6], state=TrialState.PRUNED)
    kept.refit(records)
    fresh = Search(cfg)
    fresh.refit(records)
    assert kept.predictions(records) == fresh.predictions(records)
    assert records[6].config_hash not in kept.predictions(records)


def test_trials_added_after_a_refit_join_its_prediction_to_the_last_bit(load):
    """Trials the search meets after a refit (brought back, or a resumed plan's) are predicted alone and joined to
    the refit's prediction (at 50k trials a whole prediction costs ~1 s): the same numbers as predicting them all."""
    cfg = load("+sweep=tiny")
    records = _records(make_plan(cfg))
    for i, r in enumerate(records[:5]):
        records[i] = replace(r, state=TrialState.OK, metrics={"step_time_s": 1.5 * r.predicted["step_time_s"],
                                                              "peak_mem_gb": r.predicted["peak_mem_gb"]})
    kept, fresh = Search(cfg), Search(cfg)
    kept.refit(records)
    fresh.refit(records)
    assert kept.calibration.covariance     # the spreads price the fitted constants: the costly part is exercised
    kept.predictions(records[: len(records) // 2])
    assert kept.predictions(records) == fresh.predictions(records)


def test_a_planner_pruned_trial_the_calibrated_model_keeps_is_brought_back_once_and_runs(load, tmp_path, in_tmp,
                                                                                          capsys):
    # The planner prunes mbs64 (a-priori 0.84 GB, its interval from 0.75 GB over the 0.5 GB device); every trial
    # really needs 40 % of its a-priori peak: the fitted memory model brings mbs64 under 0.5 GB and it runs.
    def measure(r):
        return ("ok", 2 * r.predicted["step_time_s"], 0.4 * r.predicted["peak_mem_gb"])

    loop, trials = sweep(load, tmp_path, measure, "plan.keep_borderline=0")
    big = next(r for r in trials.values() if r.layout.mbs == 64)
    assert big.predicted["peak_mem_gb_low"] > 0.5
    assert big.state == "ok" and big.selection == "brought_back" and big.config_hash in loop.runner.submitted
    events = [e["detail"] for e in loop.ledger.events(big.config_hash)]
    assert sum(d.startswith("brought back: the calibrated model says") for d in events) == 1
    assert big.calibrated["peak_mem_gb"] * math.exp(-1.645 * big.calibrated["mem_sd"]) <= 0.5
    assert "brought back: the calibrated model says" in capsys.readouterr().out
    assert all(r.state == "ok" for r in trials.values())


def test_the_feature_table_by_batch_class_equals_the_trial_by_trial_one(load, monkeypatch):
    """Search._feature_table computes each batch class's features once and takes the trials' rows from the classes'
    table (their micro-batch counts and tokens per step set column-wise): equal, to the last bit, to a table of
    every trial's own features, on a grid where most classes hold several trials (FEATURE_CHUNK small: chunks)."""
    import numpy as np

    from launcher.plan.batch_class import batch_class
    from launcher.plan.calibrate import FeatureTable, Observation, calibrate, for_layout, trial_features
    from launcher.plan.inputs import workload_for
    from launcher.run import search as search_module

    monkeypatch.setattr(search_module, "FEATURE_CHUNK", 4)
    cfg = load("+sweep=tiny", "grid.gbs=[8,16,32,64,128,256]", "grid.mbs=[1,2]")
    records = _records(make_plan(cfg))
    assert len({batch_class(r.layout) for r in records}) < len(records) - 4
    b = cfg.backend
    own = [for_layout(trial_features(cfg.model, cfg.cluster, r.layout, b.precision, b.flash_attention,
                                     backend=b.name, workload=workload_for(b, r.layout)), r.layout, cfg.model.seq_len)
           for r in records]
    whole, table = FeatureTable(own), Search(cfg)._feature_table(records)
    assert table.n == whole.n == len(records) and table.classes.n < table.n
    for name, value in vars(whole).items():
        if isinstance(value, np.ndarray):
            assert np.array_equal(getattr(table.expanded(), name), value), name
    # its predictions, a fitted calibration's spreads included, are the per-trial table's, also for a subset and
    # for two tables joined (a resume's new trials)
    truth = [1.4 * s for s in whole.step_time_s(Search(cfg).prior.constants)]
    cal = calibrate([Observation(f, t) for f, t in zip(own[:6], truth)], Search(cfg).prior, min_trials=3)
    assert cal.applied and cal.covariance
    joined = table.subset(range(5)).concat(Search(cfg)._feature_table(records[5:]))
    for candidate in (table, joined):
        got, want = cal.predict(candidate), cal.predict(whole)
        assert all(np.array_equal(getattr(got, k), getattr(want, k)) for k in ("step_time_s", "step_sd",
                                                                               "peak_mem_gb", "mem_sd"))
    assert np.array_equal(table.subset([3, 1]).step_time_s(cal.constants), whole.step_time_s(cal.constants)[[3, 1]])


def test_the_loop_changes_no_shared_prediction_part_in_place(load, tmp_path, in_tmp):
    """The ledger's reads share one memory breakdown dict between the trials that hold the same (Ledger reads,
    `SHARED_PARTS`): after a sweep, and after a resume that reads every trial again, every trial's prediction as the
    loop holds it is still its row's JSON text (nothing wrote into a dict that other trials share)."""
    loop, _ = sweep(load, tmp_path, slower(2.0), "grid.gbs=[8,16]")   # two trials per batch class
    again = SweepLoop(loop.cfg, loop.folder, loop.ledger, loop.tracking, loop.allowed, hooks=loop.hooks,
                      reporter=loop.reporter)
    again.runner = loop.runner
    again.run()
    rows = dict(loop.ledger._db.execute("SELECT config_hash, predicted FROM trials").fetchall())
    for view in (loop.view, again.view):
        held = view.trials()
        parts = [r.predicted["mem_breakdown_gb"] for r in held]
        assert len({id(p) for p in parts}) < len(parts)     # shared: what this test is about
        assert {r.config_hash: json.dumps(r.predicted) for r in held} == rows


def test_a_folder_of_sweeps_starts_the_calibration_from_their_pool(load, tmp_path, in_tmp, capsys):
    """plan.prior_from=<folder of sweeps>: every finished sweep there of this setup, pooled; one of another setup
    and the sweep's own folder (an earlier, interrupted run of it) never reach its prior."""
    history = tmp_path / "h" / "sweeps"
    for name, factor in (("a", 2.0), ("b", 3.0)):
        done, _ = sweep(load, tmp_path / name, slower(factor))
        (history / name).mkdir(parents=True)
        (history / name / "calibration.json").write_text(done.folder.calibration.read_text())
    data = json.loads((history / "a" / "calibration.json").read_text())
    (history / "elsewhere").mkdir()
    (history / "elsewhere" / "calibration.json").write_text(json.dumps({**data, "setup": {**data["setup"],
                                                                                           "cluster": "dgx-h100"}}))
    (history / "tiny").mkdir()      # this sweep's own folder, with a calibration 10x off
    (history / "tiny" / "calibration.json").write_text(json.dumps(
        {**data, "constants": {**data["constants"], "gemm_eff_max": data["constants"]["gemm_eff_max"] / 10}}))
    capsys.readouterr()
    loop, _ = sweep(load, tmp_path / "h", slower(2.5), f"plan.prior_from={history}")
    said = capsys.readouterr().out
    assert "2 finished sweeps" in said and "skipped" in said and "dgx-h100" in said and "this sweep itself" in said
    prior = loop.search.prior
    assert prior.source.startswith("pool of") and str(history / "tiny") not in prior.source
    expected, _ = pooled([json.loads((history / n / "calibration.json").read_text()) for n in ("a", "b")],
                         constants_for(loop.cfg.backend.name))
    assert prior.constants == expected.constants
    # before anything is measured the sweep predicts as the pool says: between the earlier sweeps' 2x and 3x
    records = _records(make_plan(loop.cfg))
    cold, warm = Search(loop.cfg).predictions(records), Search(loop.cfg, prior).predictions(records)
    ratios = [warm[k]["step_time_s"] / cold[k]["step_time_s"] for k in warm]
    assert min(ratios) > 2.0 and max(ratios) < 3.0


def test_prior_from_a_folder_with_no_sweep_of_this_setup_names_the_field(load, tmp_path, in_tmp):
    first, _ = sweep(load, tmp_path / "a", slower(2.0))
    data = json.loads(first.folder.calibration.read_text())
    history = tmp_path / "history"
    (history / "other").mkdir(parents=True)
    (history / "other" / "calibration.json").write_text(json.dumps({**data, "setup": {**data["setup"],
                                                                                      "precision": "bf16"}}))
    with pytest.raises(ConfigError) as err:
        prior_from(load("+sweep=tiny", f"plan.prior_from={history}"), first.search.prior.constants)
    assert "plan.prior_from" in str(err.value) and "no finished sweep of this setup" in str(err.value)
    assert "precision bf16" in str(err.value)
    with pytest.raises(ConfigError, match="never starts from itself"):
        prior_from(load("+sweep=tiny", f"plan.prior_from={first.folder.root}"), first.search.prior.constants,
                   own=first.folder.root)


def test_prior_from_takes_a_list_checked_at_load(load, tmp_path, in_tmp):
    assert load("+sweep=tiny", "plan.prior_from=[sweeps/a,sweeps/b]").plan.prior_from == ["sweeps/a", "sweeps/b"]
    with pytest.raises(ConfigError, match="name each finished sweep once"):
        load("+sweep=tiny", "plan.prior_from=[sweeps/a,sweeps/a]")
    with pytest.raises(ConfigError, match="plan.prior_from"):
        load("+sweep=tiny", "plan.prior_from=[sweeps/a,3]")
