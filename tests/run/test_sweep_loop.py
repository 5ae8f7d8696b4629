"""The sweep loop against a scripted runner: submission, OOM dominance, retries, refusals, hangs (no real jobs)."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

from analysis.report.tracking_link import TrackingLink
from launcher.__main__ import sweep_hooks
from launcher.core.console import Reporter
from launcher.core.record import TrialRecord
from launcher.run.executor import JobStatus, Submitted
from launcher.run.folder import SweepFolder
from launcher.run.ledger import Ledger
from launcher.run.loop import SweepLoop

OK_LOG = ("[parasweep] iteration 1/1 | phase measure | step time (ms): 10.0 | lm loss: 1.0 | tokens/s: 100.0\n"
          'PARASWEEP_RESULT {"step_time_s": 0.01, "tokens_per_s": %s, "peak_mem_gb": 0.1}\n')
OOM_LOG = "RuntimeError: DefaultCPUAllocator: can't allocate memory: you tried to allocate 8 bytes\n"


class ScriptedRunner:
    """Each trial's attempts end as scripted: ('ok', tokens) | ('oom',) | ('lost',) | ('hang',)."""

    name = "scripted"

    def __init__(self, jobs_dir: Path, script: dict, refuse: set = frozenset(), slots: int = 2) -> None:
        self.jobs_dir, self.script, self.refuse, self.slots = jobs_dir, script, refuse, slots
        self.submitted: list[str] = []
        self.cancelled: list[str] = []
        self._outcome: dict[str, tuple] = {}

    def concurrency(self, ranks: int) -> int:
        return self.slots

    def submit(self, requests) -> Submitted:
        done = Submitted()
        for req in requests:
            if req.key in self.refuse:
                done.refused[req.key] = "sbatch: error: Batch job submission failed: Invalid partition name specified"
                continue
            job_id = f"{len(self.submitted) + 1}"
            self.submitted.append(req.key)
            folder = self.jobs_dir / job_id
            folder.mkdir(parents=True)
            attempts = self.script[req.key]
            self._outcome[job_id] = attempts[min(req.attempt, len(attempts)) - 1]
            done.jobs[req.key] = (job_id, folder)
        return done

    def poll(self, jobs: dict) -> dict:
        out = {}
        for job_id, folder in jobs.items():
            kind = self._outcome[job_id][0]
            log = folder / f"{job_id}_0_log.out"
            if kind == "ok":
                log.write_text(OK_LOG % self._outcome[job_id][1])
                out[job_id] = JobStatus("COMPLETED", 0)
            elif kind == "oom":
                log.write_text(OOM_LOG)
                out[job_id] = JobStatus("FAILED", 1)
            elif kind == "lost":
                log.write_text("")
                out[job_id] = JobStatus("LOST")
            else:  # hang: running, silent
                log.touch()
                out[job_id] = JobStatus("RUNNING")
        return out

    def cancel(self, job_id: str) -> None:
        self.cancelled.append(job_id)


def lay(mbs: int, tp: int = 1) -> dict:
    return {"gpus": 2, "nodes": 1, "tp": tp, "pp": 1, "dp": 2 // tp, "vpp": 1, "mbs": mbs, "gbs": 8 // tp * 2,
            "recompute": "none", "sequence_parallel": False, "zero_stage": 0, "distributed_optimizer": False}


def run_loop(load, tmp_path, script, records, refuse=frozenset(), slots=2, **overrides):
    cfg = load("+sweep=tiny", "monitor.poll_interval_s=0.01", *[f"{k}={v}" for k, v in overrides.items()])
    folder = SweepFolder(tmp_path / "sweeps" / "tiny")
    ledger = Ledger(folder.ledger)
    ledger.add_trials(records)
    loop = SweepLoop(cfg, folder, ledger, TrackingLink.disabled(cfg, ledger, folder), {r.config_hash for r in records},
                     hooks=sweep_hooks(Reporter.quiet()), reporter=Reporter.quiet())
    runner = ScriptedRunner(folder.jobs, script, refuse, slots)
    loop.runner = runner
    loop.run()
    return {r.config_hash: r for r in ledger.trials()}, runner


def test_oom_prunes_larger_micro_batches_and_naming_the_trial(load, tmp_path, in_tmp):
    records = [TrialRecord("small", 0, lay(2)), TrialRecord("big", 1, lay(4)), TrialRecord("tp", 2, lay(4, tp=2))]
    script = {"small": [("oom",)], "big": [("ok", 500)], "tp": [("ok", 300)]}
    trials, runner = run_loop(load, tmp_path, script, records, slots=1)  # one at a time: small ends before big
    assert trials["small"].state == "oom"
    assert trials["big"].state == "pruned" and "small" in trials["big"].reason
    assert trials["tp"].state == "ok"  # another tp: not ruled out
    assert runner.submitted == ["small", "tp"]


def test_lost_jobs_are_retried_then_given_up(load, tmp_path, in_tmp):
    records = [TrialRecord("a", 0, lay(1)), TrialRecord("b", 1, lay(2))]
    script = {"a": [("lost",), ("ok", 100)], "b": [("lost",), ("lost",), ("ok", 1)]}
    trials, runner = run_loop(load, tmp_path, script, records, **{"retry.max_attempts": 2})
    assert (trials["a"].state, trials["a"].attempts) == ("ok", 2)
    assert (trials["b"].state, trials["b"].attempts) == ("cancelled", 2)
    assert runner.submitted.count("b") == 2


def test_a_refused_submission_fails_its_trials_and_the_rest_goes_on(load, tmp_path, in_tmp):
    records = [TrialRecord("a", 0, lay(1)), TrialRecord("b", 1, lay(2))]
    trials, _ = run_loop(load, tmp_path, {"a": [("ok", 10)], "b": [("ok", 20)]}, records, refuse={"a"})
    assert trials["a"].state == "failed" and trials["a"].failure_kind == "config_error"
    assert "Invalid partition" in trials["a"].reason
    assert trials["b"].state == "ok"


def test_a_silent_job_is_cancelled_as_a_hang(load, tmp_path, in_tmp):
    records = [TrialRecord("h", 0, lay(1))]
    trials, runner = run_loop(load, tmp_path, {"h": [("hang",)]}, records,
                              **{"monitor.hang_timeout_min": 0.002, "retry.max_attempts": 1})
    assert trials["h"].state == "hang" and runner.cancelled == ["1"]
    # GPU-hours count from when it was seen running (a queued job holds no GPU)
    assert trials["h"].submitted_at <= trials["h"].started_at <= trials["h"].finished_at
    assert trials["h"].started_at > 0


def test_trials_outside_the_current_plan_are_not_submitted(load, tmp_path, in_tmp):
    cfg = load("+sweep=tiny", "monitor.poll_interval_s=0.01")
    folder = SweepFolder(tmp_path / "sweeps" / "tiny")
    ledger = Ledger(folder.ledger)
    ledger.add_trials([TrialRecord("old", 0, lay(1)), TrialRecord("new", 1, lay(2))])
    loop = SweepLoop(cfg, folder, ledger, TrackingLink.disabled(cfg, ledger, folder), {"new"},
                     hooks=sweep_hooks(Reporter.quiet()), reporter=Reporter.quiet())
    loop.runner = ScriptedRunner(folder.jobs, {"new": [("ok", 1)]})
    loop.run()
    assert loop.runner.submitted == ["new"] and ledger.get("old").state == "planned"


def test_the_finalists_are_measured_again_and_the_band_widens_with_their_spread(load, tmp_path, in_tmp):
    """a 1000, b 900, c 850, d 400: only a is within 2% of the best, so round 1 re-measures a alone; its second run
    (700) shows a 35% spread, so round 2 re-measures b and c too; d stays out. Each finalist ends with 2 runs."""
    from launcher.run.loop import confirm_finalists

    records = [TrialRecord(h, i, lay(1 + i % 2, tp=1 + i // 2)) for i, h in enumerate("abcd")]
    script = {"a": [("ok", 1000)], "b": [("ok", 900)], "c": [("ok", 850)], "d": [("ok", 400)],
              "a~r1": [("ok", 700)], "b~r1": [("ok", 880)], "c~r1": [("ok", 860)]}
    cfg = load("+sweep=tiny", "monitor.poll_interval_s=0.01", "analysis.confirm_top=3", "analysis.repeats=2")
    folder = SweepFolder(tmp_path / "sweeps" / "tiny")
    ledger = Ledger(folder.ledger)
    ledger.add_trials(records)
    loop = SweepLoop(cfg, folder, ledger, TrackingLink.disabled(cfg, ledger, folder), set("abcd"),
                     hooks=sweep_hooks(Reporter.quiet()), reporter=Reporter.quiet())
    loop.runner = runner = ScriptedRunner(folder.jobs, script, slots=4)
    loop.run()
    confirm_finalists(cfg, ledger, loop, Reporter.quiet())
    assert runner.submitted[4:] == ["a~r1", "b~r1", "c~r1"]
    assert {r.config_hash: r.state for r in ledger.trials() if r.repeat_of} == {"a~r1": "ok", "b~r1": "ok",
                                                                                "c~r1": "ok"}


def test_a_finalist_whose_median_falls_behind_hands_the_confirmation_to_the_new_winner(load, tmp_path, in_tmp):
    """confirm_top=1: a (1000) is re-measured first; its second run (600) brings its median (800) below b (900),
    so b is now the winner and is re-measured too: the winner never stands on a single run."""
    from launcher.core.ranking import group_repeats, select_best
    from launcher.run.loop import confirm_finalists

    records = [TrialRecord(h, i, lay(1 + i % 2, tp=1 + i // 2)) for i, h in enumerate("abc")]
    script = {"a": [("ok", 1000)], "b": [("ok", 900)], "c": [("ok", 400)], "a~r1": [("ok", 600)],
              "b~r1": [("ok", 910)]}
    cfg = load("+sweep=tiny", "monitor.poll_interval_s=0.01", "analysis.confirm_top=1", "analysis.repeats=2")
    folder = SweepFolder(tmp_path / "sweeps" / "tiny")
    ledger = Ledger(folder.ledger)
    ledger.add_trials(records)
    loop = SweepLoop(cfg, folder, ledger, TrackingLink.disabled(cfg, ledger, folder), set("abc"),
                     hooks=sweep_hooks(Reporter.quiet()), reporter=Reporter.quiet())
    loop.runner = runner = ScriptedRunner(folder.jobs, script, slots=3)
    loop.run()
    confirm_finalists(cfg, ledger, loop, Reporter.quiet())
    assert runner.submitted[3:] == ["a~r1", "b~r1"]
    best = select_best(group_repeats([asdict(r) for r in ledger.trials()]), cfg.analysis.noise_tolerance)
    assert best is not None and best["config_hash"] == "b" and best["n_runs"] == 2
