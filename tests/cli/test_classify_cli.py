"""`python -m analysis.classify`: usage, exit codes, JSON output, a log alone."""

import json
import os
import subprocess
import sys

from log_fixtures import ROOT

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
