import pickle

from launcher.run.executor import LocalRunner, exit_code_from_error, parse_sacct, read_result
from launcher.schema import ExecutorConfig

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


def test_slurm_poll_makes_one_sacct_call_and_spots_vanished_pending_tasks(tmp_path, monkeypatch):
    from launcher.run.executor import SlurmRunner
    from launcher.schema import ClusterConfig

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


def test_sacct_failure_keeps_jobs_pending_and_warns(tmp_path, monkeypatch, capsys):
    import subprocess

    from launcher.run.executor import SlurmRunner
    from launcher.schema import ClusterConfig

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
    assert refusal_kind("sbatch: error: Batch job submission failed: Socket timed out on send/recv") == "crashed"


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
