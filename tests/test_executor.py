import pickle

from launcher.executor import LocalRunner, exit_code_from_error, parse_sacct, read_result
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
    assert read_result(tmp_path, "77") == (None, "")
    (folder / "77_0_result.pkl").write_bytes(pickle.dumps(("error", "Traceback...\nRuntimeError: trial script x exited with code 1")))
    outcome, text = read_result(tmp_path, "77")
    assert outcome == "error" and exit_code_from_error(text) == 1
    (folder / "77_0_result.pkl").write_bytes(b"\x80\x04trunc")
    assert read_result(tmp_path, "77")[0] is None


def test_local_status_of_a_vanished_job_is_lost(tmp_path):
    runner = LocalRunner(ExecutorConfig(), tmp_path)
    # pid 1 exists but is not a submitit controller; no result pickle -> the job is gone.
    assert runner.poll(["1"])["1"].state == "LOST"


def test_local_concurrency_follows_cores(monkeypatch):
    monkeypatch.setattr("os.cpu_count", lambda: 8)
    runner = LocalRunner(ExecutorConfig(), None)
    assert runner.concurrency(4) == 2 and runner.concurrency(16) == 1
    assert LocalRunner(ExecutorConfig(max_concurrent=3), None).concurrency(4) == 3


def test_slurm_poll_makes_one_sacct_call_and_spots_vanished_pending_tasks(tmp_path, monkeypatch):
    from launcher.executor import SlurmRunner
    from launcher.schema import ClusterConfig

    calls = []

    def fake_run(cmd, **kw):
        calls.append(cmd)
        import subprocess
        return subprocess.CompletedProcess(cmd, 0, stdout="83_0|CANCELLED by 0|0:15|n1\n83_[2-4%1]|PENDING|0:0|\n", stderr="")

    monkeypatch.setattr("launcher.executor.subprocess.run", fake_run)
    runner = SlurmRunner(ExecutorConfig(name="slurm"), ClusterConfig(name="c", gpu="g"), tmp_path)
    status = runner.poll(["83_0", "83_1", "83_2", "90_0"])
    assert len(calls) == 1 and calls[0][-1] == "83,90"
    assert status["83_0"].state == "CANCELLED" and status["83_2"].state == "PENDING"
    assert status["83_1"].state == "CANCELLED"  # cancelled while pending: Slurm keeps no record of it
    assert status["90_0"].state == "PENDING"  # just submitted, not in sacct yet
