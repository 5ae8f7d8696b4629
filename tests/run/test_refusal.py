"""Submissions sbatch refuses at submit time: `submit_refused`, not an attempt, not retried in the same run, named
with the command that submits them again, and submitted again by that command."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_sweep_loop import OK_LOG, lay

from launcher.__main__ import sweep_hooks
from launcher.core.console import Reporter
from launcher.core.kinds import FailureKind
from launcher.core.record import TrialRecord
from launcher.run import loop as loop_module
from launcher.run.executor import JobStatus, Submitted
from launcher.run.ledger import Ledger
from launcher.run.policy import refusal_kind
from launcher.run.refusal import plan_refused_again, refused_changes, refused_note

DOWN = ("sbatch refused an array of 2 trials: sbatch: error: Batch job submission failed: Unable to contact slurm "
        "controller (connect failure)")


class RefusingRunner:
    """Refuses every submission while `down`, else runs each trial to an ok result at once."""

    name = "scripted"

    def __init__(self, down: bool) -> None:
        self.down, self.calls = down, 0
        self.folders: dict[str, Path] = {}

    def concurrency(self, ranks: int) -> int:
        return 4

    def submit(self, requests) -> Submitted:
        self.calls += 1
        done = Submitted()
        for req in requests:
            if self.down:
                done.refused[req.key] = DOWN
                continue
            job_id = f"{self.calls}-{req.key}"
            folder = Path(req.script).parent / "job"
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{job_id}_0_log.out").write_text(OK_LOG % 100)
            done.jobs[req.key] = (job_id, folder)
        return done

    def poll(self, jobs: dict) -> dict:
        return {job_id: JobStatus("COMPLETED", 0) for job_id in jobs}

    def cancel(self, job_id: str) -> None:
        pass


def test_only_what_slurm_can_never_satisfy_is_a_config_error():
    assert refusal_kind("sbatch: error: Batch job submission failed: Invalid partition name specified") == "config_error"
    assert refusal_kind(DOWN) is FailureKind.SUBMIT_REFUSED
    assert refusal_kind("Batch job submission failed: Socket timed out on send/recv operation") == "submit_refused"


def test_a_refusal_gives_the_attempt_back_and_a_config_error_keeps_it():
    marked = TrialRecord("a", 0, lay(1), attempts=2)
    assert refused_changes(marked, DOWN, 5.0)["attempts"] == 1
    assert "attempts" not in refused_changes(marked, "Invalid account or account/partition combination", 5.0)


def test_refused_trials_are_planned_again_and_named_with_the_command(tmp_path):
    with Ledger(tmp_path / "ledger.sqlite") as ledger:
        ledger.add_trials([TrialRecord("a", 0, lay(1)), TrialRecord("b", 1, lay(2))])
        ledger.update("a", "refused", **refused_changes(ledger.get("a"), DOWN, 1.0))
        note = refused_note(ledger, "python -m launcher +sweep=tiny executor=slurm")
        assert note is not None and note.startswith("1 trial(s) were never run")
        assert "Unable to contact slurm controller" in note and note.endswith("+sweep=tiny executor=slurm")
        assert plan_refused_again(ledger) == 1
        assert ledger.get("a").state == "planned" and not ledger.get("a").failure_kind
        assert refused_note(ledger, "x") is None and plan_refused_again(ledger) == 0


@pytest.mark.slow  # two runs of the sweep, report included: 6-15 s on the shared 2-core machine
def test_a_sweep_sbatch_refuses_exits_1_naming_the_command_and_the_same_command_runs_it(load, in_tmp, monkeypatch,
                                                                                     capsys):
    args = ["+sweep=tiny", "tracking.enabled=false", "analysis.confirm_top=0", "monitor.poll_interval_s=0.01",
            "grid.gpus=[2]", "grid.zip=[]", "grid.tp=[1]", "grid.pp=[1]", "grid.mbs=[1,2]", "grid.gbs=[8]",
            "grid.include=[]"]
    cfg = load(*args)
    for down in (True, False):
        runner = RefusingRunner(down)
        monkeypatch.setattr(loop_module, "make_runner", lambda *_, r=runner: r)
        status = loop_module.run_sweep(cfg, args, hooks=sweep_hooks(Reporter.quiet()),
                                       reporter=Reporter.for_streams())
        err = capsys.readouterr().err
        with Ledger(in_tmp / "sweeps" / "tiny" / "ledger.sqlite") as ledger:
            rows = ledger.trials()
        if down:
            assert status == 1 and runner.calls == 1  # refused once, not resubmitted in the same run
            assert [(r.state, r.failure_kind, r.attempts) for r in rows] == [("failed", "submit_refused", 0)] * 2
            assert "2 trial(s) were never run" in err and "python -m launcher +sweep=tiny" in err, err
        else:
            assert status == 0 and [(r.state, r.attempts) for r in rows] == [("ok", 1)] * 2
            assert "never run" not in err
