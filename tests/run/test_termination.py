"""SIGTERM and SIGHUP end the launcher as a Ctrl-C does: raised where it is, the live trials stopped and recorded
as interrupted (or, with executor.detach_on_term, SLURM jobs left running), one line, exit 128 + the signal."""

from __future__ import annotations

import os
import signal

import pytest
from test_sweep_loop import ScriptedRunner, lay

from analysis.report.tracking_link import TrackingLink
from launcher.__main__ import sweep_hooks
from launcher.core.console import Reporter
from launcher.core.record import TrialRecord
from launcher.core.states import TrialState
from launcher.run.folder import SweepFolder
from launcher.run.interruption import NOT_COUNTED, Terminated, stop_live_trials, terminate_on_signals
from launcher.run.ledger import Ledger
from launcher.run.loop import SweepLoop


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129)])
def test_the_signal_raises_terminated_once_and_the_handlers_come_back(sig, code):
    before = signal.getsignal(sig)
    with pytest.raises(Terminated) as info, terminate_on_signals():
        try:
            os.kill(os.getpid(), sig)  # the handler runs before the next line
        finally:
            os.kill(os.getpid(), signal.SIGTERM)  # a second signal during the clean-up: ignored, not raised
            os.kill(os.getpid(), signal.SIGHUP)
    assert info.value.signum == sig and info.value.exit_code == code
    assert signal.getsignal(sig) == before


def test_the_line_says_what_happened_to_the_trials():
    term = Terminated(signal.SIGTERM)
    assert term.message() == "terminated by SIGTERM: the ledger is intact; run the same command again to resume"
    term.stopped = 2
    assert "2 live trial(s) stopped and recorded as interrupted" in term.message()
    term.detached = 3
    assert term.message().startswith("terminated by SIGTERM: 3 SLURM job(s) left running")
    assert "re-attach" in term.message()


def live_loop(load, tmp_path):
    """A loop with two trials running (scripted jobs that never end) and one marked submitted without a job id."""
    cfg = load("+sweep=tiny", "monitor.poll_interval_s=0.01")
    folder = SweepFolder(tmp_path / "sweeps" / "tiny")
    ledger = Ledger(folder.ledger)
    records = [TrialRecord("a", 0, lay(1)), TrialRecord("b", 1, lay(2)), TrialRecord("c", 2, lay(4))]
    ledger.add_trials(records)
    loop = SweepLoop(cfg, folder, ledger, TrackingLink.disabled(cfg, ledger, folder), {"a", "b", "c"},
                     hooks=sweep_hooks(Reporter.quiet()), reporter=Reporter.quiet())
    loop.runner = ScriptedRunner(folder.jobs, {"a": [("hang",)], "b": [("hang",)], "c": [("hang",)]}, slots=2)
    loop._submit()
    loop._collect()
    ledger.update("c", "marked", state=TrialState.SUBMITTED, attempts=1, job_id="")
    return loop, ledger


def test_the_live_trials_are_stopped_and_keep_their_attempts(load, tmp_path, in_tmp):
    loop, ledger = live_loop(load, tmp_path)
    assert {r.config_hash: r.state for r in ledger.trials()} == {"a": "running", "b": "running", "c": "submitted"}
    stopped = stop_live_trials(loop.runner, ledger, loop._finish, loop._forget_unrecorded, detach=False)
    assert stopped == (2, 0)
    assert sorted(loop.runner.cancelled) == ["1", "2"]
    for r in ledger.trials():
        assert (r.state, r.attempts) == ("cancelled", 0) and r.reason.startswith(NOT_COUNTED), r


def test_detached_jobs_are_left_to_the_next_run(load, tmp_path, in_tmp):
    loop, ledger = live_loop(load, tmp_path)
    assert stop_live_trials(loop.runner, ledger, loop._finish, loop._forget_unrecorded, detach=True) == (0, 3)
    assert loop.runner.cancelled == []
    assert {r.config_hash: r.state for r in ledger.trials()} == {"a": "running", "b": "running", "c": "submitted"}


def test_outside_the_main_thread_nothing_is_installed():
    import threading

    seen = []

    def run() -> None:
        with terminate_on_signals():
            seen.append(signal.getsignal(signal.SIGTERM))

    thread = threading.Thread(target=run)
    thread.start()
    thread.join()
    assert seen == [signal.getsignal(signal.SIGTERM)]
