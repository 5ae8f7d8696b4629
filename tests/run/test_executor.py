import pickle
import subprocess

import pytest

from launcher.config.schema import ExecutorConfig
from launcher.run.executor import (
    LocalRunner,
    exit_code_from_error,
    parse_sacct,
    read_result,
)

SACCT = """\
101_0|COMPLETED|0:0|n1
101_1|CANCELLED by 0|0:15|n2
101_[2-4%2]|PENDING|0:0|None assigned
102|TIMEOUT|0:0|n[1-2]
103_5|RUNNING|0:0|n1
"""


def test_parse_sacct_expands_pending_array_tasks():
    table = parse_sacct(SACCT)
    assert table["101_0"].state == "COMPLETED" and table["101_0"].exit_code == 0
    assert table["101_1"].state == "CANCELLED"
    assert [table[f"101_{i}"].state for i in (2, 3, 4)] == ["PENDING"] * 3
    assert table["102"].state == "TIMEOUT" and table["102"].nodes == "n[1-2]"
    assert table["103_5"].live and not table["101_0"].live


def test_result_pickles(tmp_path):
    folder = tmp_path / "77"
    folder.mkdir()
    assert read_result(folder, "77") == (None, "")
    (folder / "77_0_result.pkl").write_bytes(pickle.dumps(("error", "Traceback...\nRuntimeError: trial script x exited with code 1")))
    outcome, text = read_result(folder, "77")
    assert outcome == "error" and exit_code_from_error(text) == 1
    (folder / "77_0_result.pkl").write_bytes(b"\x80\x04trunc")
    assert read_result(folder, "77")[0] is None


def test_local_status_of_a_vanished_job_is_lost(tmp_path):
    runner = LocalRunner(ExecutorConfig(), tmp_path)
    # pid 1 exists but is not a submitit controller; no result pickle -> the job is gone.
    assert runner.poll({"1": tmp_path})["1"].state == "LOST"


def test_local_concurrency_follows_cores(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 8)
    runner = LocalRunner(ExecutorConfig(), None, gpus=[])
    assert runner.concurrency(4) == 2 and runner.concurrency(16) == 1
    assert LocalRunner(ExecutorConfig(max_concurrent=3), None, gpus=[]).concurrency(4) == 3


def test_slurm_queues_waves_of_what_can_run_unless_told_to_queue_all(tmp_path):
    """Waves let the search pick each next trial after what it learnt; queue_all is the whole sweep in one go."""
    from launcher.config.schema import ClusterConfig
    from launcher.run.executor import SlurmRunner

    cluster = ClusterConfig(name="c", gpu="g", gpus_per_node=8, nodes=4)
    waves = SlurmRunner(ExecutorConfig(name="slurm"), cluster, tmp_path)
    assert [waves.concurrency(gpus) for gpus in (1, 8, 9, 16, 32, 64)] == [4, 4, 2, 2, 1, 1]  # nodes // trial's
    assert SlurmRunner(ExecutorConfig(name="slurm", max_concurrent=3), cluster, tmp_path).concurrency(8) == 3
    assert SlurmRunner(ExecutorConfig(name="slurm", queue_all=True), cluster, tmp_path).concurrency(8) >= 10**6


def test_slurm_poll_makes_one_sacct_call_and_spots_vanished_pending_tasks(tmp_path, monkeypatch):
    from launcher.config.schema import ClusterConfig
    from launcher.run.executor import SlurmRunner

    calls = []

    def fake_run(cmd, **kw):
        calls.append(cmd)
        import subprocess
        return subprocess.CompletedProcess(cmd, 0, stdout="83_0|CANCELLED by 0|0:15|n1\n83_[2-4%1]|PENDING|0:0|\n", stderr="")

    monkeypatch.setattr("launcher.run.executor.subprocess.run", fake_run)
    runner = SlurmRunner(ExecutorConfig(name="slurm"), ClusterConfig(name="c", gpu="g"), tmp_path)
    jobs = {j: tmp_path / j for j in ("83_0", "83_1", "83_2", "90_0")}
    first = runner.poll(jobs)
    assert len(calls) == 1 and calls[0][-1] == "83,90"
    assert first["83_0"].state == "CANCELLED" and first["83_2"].state == "PENDING"
    assert first["83_1"].state == "PENDING"  # absent once: maybe accounting lag, ask again
    second = runner.poll(jobs)
    assert second["83_1"].state == "CANCELLED"  # absent twice: cancelled while pending, Slurm keeps no record
    assert second["90_0"].state == "PENDING"  # just submitted, not in sacct yet


def _runner_answering(sacct_stdout: str, tmp_path, monkeypatch):
    """A SlurmRunner whose every sacct call prints `sacct_stdout`."""
    import subprocess

    from launcher.config.schema import ClusterConfig
    from launcher.run.executor import SlurmRunner

    monkeypatch.setattr("launcher.run.executor.subprocess.run", lambda cmd, **kw: subprocess.CompletedProcess(
        cmd, 0, stdout=sacct_stdout, stderr=""))
    return SlurmRunner(ExecutorConfig(name="slurm"), ClusterConfig(name="c", gpu="g"), tmp_path)


def test_an_array_listed_under_its_bare_id_is_pending_not_cancelled(tmp_path, monkeypatch):
    # Slurm 23's sacct, polled in the seconds after `sbatch --array=0-1`, lists the array as "370|PENDING" before the
    # scheduler splits it (seen on the local cluster); two such polls read its tasks as cancelled before this rule
    runner = _runner_answering("370|PENDING|0:0|\n", tmp_path, monkeypatch)
    jobs = {j: tmp_path / j for j in ("370_0", "370_1")}
    for _ in range(3):
        assert {s.state for s in runner.poll(jobs).values()} == {"PENDING"}


def test_an_array_cancelled_under_its_bare_id_is_cancelled(tmp_path, monkeypatch):
    runner = _runner_answering("371|CANCELLED by 0|0:0|\n", tmp_path, monkeypatch)
    jobs = {"371_0": tmp_path / "371_0"}
    runner.poll(jobs)
    assert runner.poll(jobs)["371_0"].state == "CANCELLED"


def test_sacct_failure_keeps_jobs_pending_and_warns(tmp_path, monkeypatch, capsys):
    import subprocess

    from launcher.config.schema import ClusterConfig
    from launcher.run.executor import SlurmRunner

    monkeypatch.setattr("launcher.run.executor.subprocess.run", lambda cmd, **kw: subprocess.CompletedProcess(
        cmd, 1, stdout="", stderr="sacct: error: Problem talking to the database: Connection refused"))
    runner = SlurmRunner(ExecutorConfig(name="slurm"), ClusterConfig(name="c", gpu="g"), tmp_path)
    assert runner.poll({"5_0": tmp_path})["5_0"].state == "PENDING"
    runner.poll({"5_0": tmp_path})
    err = capsys.readouterr().err
    assert err.count("sacct failed") == 1 and "Connection refused" in err


def test_refused_submissions_are_classified():
    from launcher.run.policy import refusal_kind

    assert refusal_kind("sbatch: error: Batch job submission failed: Invalid partition name specified") == "config_error"
    assert refusal_kind("sbatch: error: Batch job submission failed: Socket timed out on send/recv") == "submit_refused"


def test_local_gpus_are_split_between_concurrent_trials(tmp_path, monkeypatch):
    from launcher.run.executor import JobRequest

    runner = LocalRunner(ExecutorConfig(), tmp_path, gpus=[0, 1, 2, 3])
    assert runner.concurrency(2) == 2 and runner.concurrency(8) == 1
    given = []

    class FakeExecutor:
        def __init__(self, folder, max_num_timeout):
            pass

        def update_parameters(self, **params):
            given.append((params["gpus_per_node"], params["visible_gpus"]))

        def submit(self, fn, *args):
            class Job:
                job_id = str(1000 + len(given))
                _process = None
            return Job()

    monkeypatch.setattr("submitit.local.local.LocalExecutor", FakeExecutor)
    done = runner.submit([JobRequest("a", tmp_path / "a.sh", 1, 2), JobRequest("b", tmp_path / "b.sh", 1, 2)])
    assert given == [(2, [0, 1]), (2, [2, 3])]
    runner.poll({done.jobs["a"][0]: tmp_path})  # job a is gone (no process, no result): its GPUs are free
    runner.submit([JobRequest("c", tmp_path / "c.sh", 1, 2)])
    assert given[-1] == (2, [0, 1])


def test_cpu_machine_hides_gpus(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    from launcher.run.executor import local_gpus

    assert local_gpus() == []


def test_a_ctrl_c_leaves_the_local_controllers_traceback_in_the_job_folder(tmp_path, capfd):
    """Ctrl-C signals the whole foreground process group, submitit's job controller included: its KeyboardInterrupt
    traceback must not follow the launcher's one-line message on the terminal. The job's process is the shell that
    runs the controller after its setup lines (launcher.run.executor.controller_setup): both get the signal."""
    import os
    import signal
    import time

    from launcher.run.executor import CONTROLLER_ERR, JobRequest

    script = tmp_path / "trial.sh"
    script.write_text("sleep 30\n")
    runner = LocalRunner(ExecutorConfig(timeout_min=2), tmp_path / "jobs", gpus=[])
    done = runner.submit([JobRequest("abc", script, nodes=1, gpus_per_node=1)])
    job_id, folder = done.jobs["abc"]
    # Each wait has its own deadline, generous because it ends as soon as its condition holds: with one 60 s
    # deadline for both, a machine under load (8 helpers on 2 cores) spent it reaching RUNNING, and the cancel
    # below SIGTERMed the controller before it could handle its SIGINT ("Terminated" in controller.err).
    deadline = time.time() + 300
    while runner.poll({job_id: folder})[job_id].state != "RUNNING" and time.time() < deadline:
        time.sleep(0.2)
    assert runner.poll({job_id: folder})[job_id].state == "RUNNING", "the job did not start in 300 s"
    time.sleep(2)  # the controller is inside its wait loop
    children = subprocess.run(["pgrep", "-P", job_id], capture_output=True, text=True).stdout.split()
    for pid in [job_id, *children]:  # what the terminal sends the foreground group on Ctrl-C
        os.kill(int(pid), signal.SIGINT)
    deadline = time.time() + 300
    while runner.poll({job_id: folder})[job_id].live and time.time() < deadline:
        time.sleep(0.2)
    assert not runner.poll({job_id: folder})[job_id].live, "the job outlived its Ctrl-C by 300 s"
    runner.cancel(job_id)
    assert "Traceback" not in capfd.readouterr().err
    assert "KeyboardInterrupt" in (folder / CONTROLLER_ERR).read_text()


def test_a_trial_runs_the_launcher_s_interpreter_unless_told_otherwise(load, tmp_path):
    import sys

    from launcher.core.layout import Layout
    from launcher.run.trial_files import spec_for

    lay = Layout(gpus=1, nodes=1, tp=1, pp=1, dp=1, gbs=8)
    assert spec_for(load("+sweep=tiny"), lay, tmp_path).program_argv[0] == sys.executable
    assert spec_for(load("+sweep=tiny", "executor=slurm"), lay, tmp_path).program_argv[0] == sys.executable
    assert spec_for(load("+sweep=tiny", "backend.python=python3"), lay, tmp_path).program_argv[0] == "python3"


# -- local jobs re-attached through their keeper's identity (launcher/run/reaper.py) ------------------------------
def _keeper(tmp_path, job_id="500", *, alive=True, stopped=None):
    import dataclasses

    from launcher.run.reaper import KeeperRecord, keeper_path

    me = KeeperRecord.of_this_process(str(tmp_path), time_limit_s=60)
    if not alive:  # this very pid, but started at another time: a recycled pid, i.e. the keeper is gone
        me = dataclasses.replace(me, start_ticks=me.start_ticks + 1)
    me.stopped = stopped or {}
    me.write(keeper_path(tmp_path, job_id))


def _pickle(tmp_path, job_id, outcome, payload):
    (tmp_path / f"{job_id}_0_result.pkl").write_bytes(pickle.dumps((outcome, payload)))


def test_local_job_is_running_while_its_keeper_lives_even_without_its_controller(tmp_path):
    _keeper(tmp_path, alive=True)
    assert LocalRunner(ExecutorConfig(), tmp_path, gpus=[]).poll({"500": tmp_path})["500"].state == "RUNNING"


def test_local_job_whose_keeper_vanished_is_interrupted_not_failed(tmp_path):
    _keeper(tmp_path, alive=False)
    status = LocalRunner(ExecutorConfig(), tmp_path, gpus=[]).poll({"500": tmp_path})["500"]
    assert status.state == "LOST" and status.interrupted


def test_local_job_outcomes_from_the_keeper_record(tmp_path):
    runner = LocalRunner(ExecutorConfig(), tmp_path, gpus=[])
    _keeper(tmp_path, "1", alive=False, stopped={"why": "SIGINT", "exit_code": None})
    _pickle(tmp_path, "1", "error", "Traceback\nlauncher.run.jobside.TrialStopped: trial stopped by SIGINT (cancelled)")
    _keeper(tmp_path, "2", alive=False, stopped={"why": "time_limit", "exit_code": None})
    _pickle(tmp_path, "2", "error", "TrialStopped: the trial reached its time limit of 30 s: this job is timed-out")
    _keeper(tmp_path, "3", alive=False, stopped={"why": "exit", "exit_code": 1})
    _pickle(tmp_path, "3", "error", "RuntimeError: trial script x exited with code 1")
    _keeper(tmp_path, "4", alive=False, stopped={"why": "exit", "exit_code": 0})  # killed before its pickle
    _keeper(tmp_path, "5", alive=False, stopped={"why": "exit", "exit_code": 7})
    got = runner.poll({j: tmp_path for j in "12345"})
    assert (got["1"].state, got["1"].interrupted) == ("CANCELLED", True)
    assert (got["2"].state, got["2"].interrupted) == ("TIMEOUT", False) and "timed-out" in got["2"].error
    assert (got["3"].state, got["3"].exit_code, got["3"].interrupted) == ("FAILED", 1, False)
    assert got["4"].state == "COMPLETED"
    assert (got["5"].state, got["5"].exit_code) == ("FAILED", 7)


def test_attempt_folders_are_never_reused(tmp_path):
    from launcher.run.executor import attempt_folder

    first = attempt_folder(tmp_path, "abc", 1)
    first.mkdir()
    second = attempt_folder(tmp_path, "abc", 1)  # an interrupted attempt keeps its number
    assert first.name == "abc.a1" and second.name == "abc.a1.2"


def test_a_local_job_whose_setup_fails_is_a_failure_not_an_interruption(tmp_path):
    """A setup line that fails ends the job before its keeper starts: the trial's own fault, counted."""
    from launcher.run.executor import JobRequest

    script = tmp_path / "trial.sh"
    script.write_text("echo never\n")
    runner = LocalRunner(ExecutorConfig(timeout_min=1, setup=["exit 3"]), tmp_path / "jobs", gpus=[])
    job_id, folder = runner.submit([JobRequest("k", script, 1, 1)]).jobs["k"]
    import time

    deadline = time.time() + 60
    while (status := runner.poll({job_id: folder})[job_id]).live and time.time() < deadline:
        time.sleep(0.1)
    assert (status.state, status.exit_code, status.interrupted) == ("FAILED", 3, False), status
    assert "executor.setup" in status.error


def test_a_refused_sbatch_is_a_submission_error_and_a_bug_is_not(tmp_path, monkeypatch):
    """sbatch's refusal fails only that array's trials (with sbatch's words); a programming error propagates."""
    from submitit.core.utils import FailedJobError

    from launcher.config.schema import ClusterConfig
    from launcher.run.executor import JobRequest, SlurmRunner

    runner = SlurmRunner(ExecutorConfig(name="slurm"), ClusterConfig(name="c", gpu="A100", nodes=2), tmp_path)
    script = tmp_path / "t.sh"
    script.write_text("true\n")

    class Refusing:
        def __init__(self, error):
            self.error = error

        def map_array(self, *args, **kwargs):
            raise self.error

    monkeypatch.setattr(runner, "_executor", lambda *a: Refusing(FailedJobError("Invalid partition name specified")))
    done = runner.submit([JobRequest("a", script, 1, 8)])
    assert "Invalid partition name specified" in done.refused["a"] and not done.jobs
    monkeypatch.setattr(runner, "_executor", lambda *a: Refusing(TypeError("a bug")))
    with pytest.raises(TypeError, match="a bug"):
        runner.submit([JobRequest("a", script, 1, 8)])


def test_a_new_attempt_never_starts_beside_what_an_earlier_one_left_running(tmp_path):
    """A keeper killed in the middle of its clean-up can leave a process of the old attempt behind: submitting the
    trial again kills it first (by its marker), and leaves other trials' processes alone."""
    import os
    import subprocess
    import time

    from launcher.run import reaper
    from launcher.run.executor import JobRequest, _marker

    jobs = tmp_path / "jobs"
    jobs.mkdir()

    def leftover(folder_name: str) -> subprocess.Popen:
        (jobs / folder_name).mkdir()
        return subprocess.Popen(["sleep", "120"], env={**os.environ, reaper.TRIAL_MARKER: _marker(jobs / folder_name)})

    old, other = leftover("k.a1"), leftover("kk.a1")  # an earlier attempt of k; a trial whose hash starts alike
    try:
        deadline = time.time() + 10
        while len(reaper.marker_table()) < 2 and time.time() < deadline:  # until both have exec'd sleep
            time.sleep(0.05)
        script = tmp_path / "trial.sh"
        script.write_text("exit 0\n")
        runner = LocalRunner(ExecutorConfig(timeout_min=1), jobs, gpus=[])
        job_id, folder = runner.submit([JobRequest("k", script, 1, 1)]).jobs["k"]
        assert folder.name == "k.a1.2"
        assert old.wait(timeout=10) is not None
        assert other.poll() is None
    finally:
        for proc in (old, other):
            proc.kill()
            proc.wait()


def test_submitting_leaves_the_launchers_environment_and_stderr_alone(tmp_path):
    """The trial's marker and the controller's stderr file reach the controller through its setup lines
    (controller_setup), not through the launcher's os.environ or file descriptor 2."""
    import os
    import time

    from launcher.run import reaper
    from launcher.run.executor import CONTROLLER_ERR, JobRequest

    script = tmp_path / "trial.sh"
    script.write_text("echo done\n")
    environ, stderr = dict(os.environ), os.fstat(2)
    runner = LocalRunner(ExecutorConfig(timeout_min=2), tmp_path / "jobs", gpus=[])
    job_id, folder = runner.submit([JobRequest("abc", script, nodes=1, gpus_per_node=1)]).jobs["abc"]
    assert dict(os.environ) == environ and reaper.TRIAL_MARKER not in os.environ
    after = os.fstat(2)
    assert (after.st_dev, after.st_ino) == (stderr.st_dev, stderr.st_ino)
    deadline = time.time() + 120
    while runner.poll({job_id: folder})[job_id].live and time.time() < deadline:
        time.sleep(0.2)
    assert runner.poll({job_id: folder})[job_id].state == "COMPLETED"
    assert (folder / CONTROLLER_ERR).is_file()  # the controller's stderr went to the job folder


def test_the_controller_setup_lines_mark_the_trial_and_redirect_stderr(tmp_path):
    from launcher.run import reaper
    from launcher.run.executor import controller_setup

    lines = controller_setup("/jobs/a b", tmp_path / "c.err", ["module load x"])
    assert lines[0] == f"exec 2>>{tmp_path / 'c.err'}"
    assert lines[1] == f"export {reaper.TRIAL_MARKER}='/jobs/a b'" and lines[2:] == ["module load x"]


def test_a_job_that_wrote_its_result_is_judged_once_it_has_exited(tmp_path):
    """submitit writes the result pickle, then the interpreter prints the uncaught exception: a poll in between
    read a stopped trial's log cut inside its traceback, and judged it a crash (CI, 28 Nov)."""
    import socket

    from launcher.run.reaper import KeeperRecord, boot_id, keeper_path, start_ticks

    log = tmp_path / "600_0_log.err"
    log.write_text("Traceback (most recent call last):\n")
    printer = subprocess.Popen(["python3", "-c", "import sys, time; time.sleep(0.6); "
                                f"open({str(log)!r}, 'a').write('TrialStopped: trial stopped by SIGTERM\\n')"])
    KeeperRecord(printer.pid, start_ticks(printer.pid), boot_id(), socket.gethostname(), str(tmp_path), 0.0,
                 stopped={"why": "SIGTERM"}).write(keeper_path(tmp_path, "600"))
    _pickle(tmp_path, "600", "error", "launcher.run.jobside.TrialStopped: trial stopped by SIGTERM (cancelled)")
    status = LocalRunner(ExecutorConfig(), tmp_path, gpus=[]).poll({"600": tmp_path})["600"]
    assert status.state == "CANCELLED" and status.interrupted
    assert log.read_text().endswith("TrialStopped: trial stopped by SIGTERM\n")  # the log was complete when judged
    printer.wait()
