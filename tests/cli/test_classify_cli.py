"""`python -m analysis.classify`: usage, exit codes, JSON output, a log alone."""

import json
import os
import subprocess
import sys

import pytest
from log_fixtures import CORPUS_FILES, ROOT

from analysis.classify.__main__ import JSON_KEYS, main

REPO = ROOT.parents[1]


def run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "analysis.classify", *args], capture_output=True, text=True,
                          env=env, timeout=60)


def test_help_shows_an_example():
    proc = run("--help")
    assert proc.returncode == 0 and "python -m analysis.classify slurm-4242.out" in proc.stdout


def test_usage_error_and_unreadable_file_exit_2_with_one_message(tmp_path):
    assert run().returncode == 2
    proc = run(str(tmp_path / "missing.log"))
    assert proc.returncode == 2 and proc.stderr.strip() == f"error: cannot read {tmp_path / 'missing.log'}: " \
                                                          "No such file or directory"
    assert "Traceback" not in proc.stderr
    proc = run(str(tmp_path))  # a folder
    assert proc.returncode == 2 and proc.stderr.startswith("error: cannot read")


def test_text_output_has_kind_reason_evidence_and_figures(capsys):
    assert main([str(ROOT / "megatron-logs/megatronlm_oom_1.log")]) == 0
    out = capsys.readouterr().out
    assert "megatronlm_oom_1.log: oom" in out and "evidence: line " in out and "Tried to allocate" in out
    assert main([str(ROOT / "megatron-logs/megatronlm_iter_ok_1.log"), "--tokens-per-step", "524288"]) == 0
    out = capsys.readouterr().out
    assert ": ok" in out and "5.471 s/step" in out and "tokens/s" in out and "TFLOP/s/GPU" in out


def test_json_is_one_strict_object_per_log(tmp_path, capsys):
    weird = tmp_path / "weird.log"
    weird.write_bytes(b"\xff\x00 iteration 1/ 2 | elapsed time per iteration (ms): nan |\n")
    files = [str(ROOT / "nemo-logs/nemo1_grok1_314b_bar_1.log"), str(weird)]
    assert main([*files, "--json", "--exit-code", "0"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 2
    rows = [json.loads(line, parse_constant=lambda c: (_ for _ in ()).throw(ValueError(c))) for line in lines]
    assert all(tuple(row) == JSON_KEYS for row in rows)
    assert rows[0]["kind"] == "ok" and rows[0]["step_time_s"] == 24.0 and rows[0]["tokens_per_s"] is None
    assert rows[1]["kind"] == "invalid_measurement" and rows[1]["step_time_s"] is None


def test_an_unreadable_file_among_others_still_reports_the_others(tmp_path, capsys):
    assert main([str(tmp_path / "nope.log"), str(ROOT / "megatron-logs/mds_oom_1.log")]) == 2
    assert "mds_oom_1.log: oom" in capsys.readouterr().out


JOBS = ROOT / "jobs"
LOCAL_OOM, SLURM_OOM = JOBS / "local-tiny-mbs64-oom", JOBS / "slurm-tiny-mbs64-oom"
SLURM_2NODE = JOBS / "slurm-2node-tiny-mbs64-oom"
ALLOCATOR = "DefaultCPUAllocator: can't allocate memory"


def verdicts(capsys, *args: str) -> tuple[list[str], list[dict]]:
    """(kind per verdict in text, JSON objects) of the same arguments."""
    assert main([*args]) == 0
    text = capsys.readouterr().out
    kinds = [line.rsplit(": ", 1)[1] for line in text.splitlines() if not line.startswith(" ")]
    assert main([*args, "--json"]) == 0
    return kinds, [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_a_job_folder_is_judged_as_one_trial_from_its_out_and_err(capsys):
    # The tiny sweep's mbs-64 trial (a real CPU-allocator OOM): its .out alone has nothing to judge, its .err the
    # allocator line of every rank and, at its end, the wrappers' tracebacks.
    for folder, err in ((LOCAL_OOM, "8556_0_log.err"), (SLURM_OOM, "109_0_log.err"), (SLURM_2NODE, "113_0_log.err")):
        kinds, rows = verdicts(capsys, str(folder))
        assert kinds == ["oom"] and [row["kind"] for row in rows] == ["oom"]
        first = rows[0]["evidence_lines"][0]
        assert first["file"] == err and ALLOCATOR in first["text"]
        assert (folder / err).read_text().splitlines()[first["line"] - 1].strip() == first["text"]
        assert main([str(folder)]) == 0
        out = capsys.readouterr().out
        assert f"evidence: {err} line {first['line']}: " in out and "(exit code 1, from the keeper's record)" in out


def test_a_task_log_alone_names_the_logs_it_was_not_judged_with(capsys, tmp_path):
    # The .out alone has nothing to judge (unknown): the text says where the cause may be, the kind stays the same.
    kinds, rows = verdicts(capsys, str(LOCAL_OOM / "8556_0_log.out"))
    assert kinds == ["unknown"] and rows[0]["kind"] == "unknown"
    assert main([str(LOCAL_OOM / "8556_0_log.out")]) == 0
    assert f"note:     one of its job's task logs; 8556_0_log.err not read: `python -m analysis.classify {LOCAL_OOM}`" \
        in capsys.readouterr().out
    alone = tmp_path / "8556_0_log.out"
    alone.write_bytes((LOCAL_OOM / "8556_0_log.out").read_bytes())
    (tmp_path / "8556_0_log.err").write_text("")  # an empty sibling holds nothing to read
    assert main([str(alone)]) == 0
    assert "note:" not in capsys.readouterr().out


@pytest.mark.parametrize("name", ["local-tiny-mbs64-oom/8556_0_log.out", "local-tiny-mbs64-oom/8556_0_log.err",
                                  "local-tiny-mbs64-oom", "slurm-tiny-mbs64-oom", "slurm-2node-tiny-mbs64-oom"])
def test_text_and_json_give_the_same_kind(capsys, name):
    kinds, rows = verdicts(capsys, str(JOBS / name))
    assert kinds == [row["kind"] for row in rows]


def test_text_and_json_give_the_same_kind_across_the_corpus(capsys):
    logs = [str(ROOT / path) for path in CORPUS_FILES[::7]]
    kinds, rows = verdicts(capsys, *logs)
    assert len(kinds) == len(logs) and kinds == [row["kind"] for row in rows]


def test_every_task_of_a_two_node_job_is_read_in_the_sweeps_order(capsys):
    assert main([str(SLURM_2NODE)]) == 0
    assert "read:     113_0_log.out, 113_1_log.out, 113_0_log.err, 113_1_log.err (exit code 1" in capsys.readouterr().out


def test_the_keepers_exit_code_is_used_unless_one_is_given(tmp_path, capsys):
    folder = tmp_path / "job"
    folder.mkdir()
    (folder / "7_0_log.out").write_text("[parasweep] init done in 1.0 s\n")
    (folder / "7_0_log.err").write_text("W warning: nothing fatal here\n")
    keeper = json.loads((LOCAL_OOM / "8556_0_keeper.json").read_text())
    (folder / "7_0_keeper.json").write_text(json.dumps({**keeper, "stopped": {**keeper["stopped"], "exit_code": 3}}))
    assert main([str(folder), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["reason"].startswith("crashed (exit code 3)")
    assert main([str(folder), "--json", "--exit-code", "0"]) == 0
    assert json.loads(capsys.readouterr().out)["kind"] == "unknown"  # finished, no metrics
    (folder / "7_0_keeper.json").write_text(json.dumps({**keeper, "stopped": {"why": "time_limit"}}))
    assert main([str(folder), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["kind"] == "time_limit"


def test_a_folder_with_two_jobs_gives_two_verdicts_and_one_without_logs_is_an_error(tmp_path, capsys):
    for job in ("11", "12"):
        (tmp_path / f"{job}_0_log.err").write_text((LOCAL_OOM / "8556_0_log.err").read_text())
    assert main([str(tmp_path)]) == 0
    heads = [line for line in capsys.readouterr().out.splitlines() if not line.startswith(" ")]
    assert heads == [f"{tmp_path} (job 11): oom", f"{tmp_path} (job 12): oom"]
    empty = tmp_path / "empty"
    empty.mkdir()
    proc = run(str(empty))
    assert proc.returncode == 2 and proc.stderr.strip() == f"error: cannot read {empty}: no task logs " \
                                                          "(<job>_<task>_log.out / .err) in this folder"


def test_a_fifo_a_device_or_a_folder_without_logs_is_refused_with_one_line(tmp_path):
    fifo = tmp_path / "job.log"
    os.mkfifo(fifo)
    proc = run(str(fifo))  # read naively, this blocks until the 60 s timeout
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.strip() == f"error: {fifo}: is a FIFO (named pipe), not a log file: give a regular file " \
                                  "(a job's log, or its job folder)"
    proc = run("/dev/zero")  # never ends
    assert proc.returncode == 2 and "is a character device, not a log file" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize("as_json", [False, True])
def test_escape_codes_of_a_log_never_reach_the_output(tmp_path, capsys, as_json):
    log = tmp_path / "colour.log"
    log.write_bytes(b"\x1b]0;pwned\x07\x1b[2J starting\n\x1b[1;31mtorch.OutOfMemoryError: CUDA out of memory. "
                    b"Tried to allocate 2.00 GiB\x1b[0m\x07\n")
    assert main([str(log), *(["--json"] if as_json else [])]) == 0
    out = capsys.readouterr().out
    assert "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB" in out
    assert not any(c in out for c in "\x1b\x07\x9b")
