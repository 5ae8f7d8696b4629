"""A log larger than the read window (launcher.core.logfile) is judged on its head and tail: the verdict at its
end is found, the evidence keeps the line number it has in the file, the outcome says what was not read, and
escape codes in a log never reach the evidence."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from analysis.logs.joblog import JobLog
from analysis.logs.judge import job_log
from analysis.logs.outcome import trial_outcome
from launcher.core.errors import ParseError
from launcher.core.logfile import read_window

RECORD = (" iteration {i:8d}/ 9999999 | consumed samples: {s:12d} | elapsed time per iteration (ms): 1400.0 | "
          "learning rate: 2.4E-04 | global batch size:   768 | lm loss: 5.905366E+00 | TFLOPs: 69.85 |\n")
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79 GiB"


def _big_log(path: Path, n_records: int, crlf_every: int = 0) -> int:
    """Megatron records then an allocator OOM; returns the OOM's line number in the file."""
    with path.open("w", newline="") as fh:
        for i in range(1, n_records + 1):
            line = RECORD.format(i=i, s=i * 768)
            fh.write(line.replace("\n", "\r\n") if crlf_every and i % crlf_every == 0 else line)
        fh.write("Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n")
        fh.write(f"\x1b[31m{OOM}\x1b[0m\n")
    return n_records + 3


def test_the_tail_of_a_large_log_is_judged_with_its_own_line_numbers(tmp_path):
    path = tmp_path / "7_0_log.err"
    oom_line = _big_log(path, 40_000, crlf_every=7)  # about 8 MB
    window = read_window(path, head_bytes=1_000_000, tail_bytes=2_000_000)
    assert not window.whole
    log = JobLog.join([("7_0_log.out", b"starting\n"), (path.name, window)])
    out = trial_outcome(log, exit_code=1, slurm_state="FAILED")
    assert out.failure_kind == "oom"
    assert out.evidence[0].file == path.name and out.evidence[0].line == oom_line
    assert out.evidence[0].text.startswith("torch.OutOfMemoryError") and "\x1b" not in out.evidence[0].text
    assert any("in its middle not read" in note and path.name in note for note in out.notes)


def test_a_log_smaller_than_the_window_is_judged_as_before(tmp_path):
    path = tmp_path / "7_0_log.err"
    oom_line = _big_log(path, 200)
    whole = trial_outcome(JobLog.join([(path.name, path.read_bytes())]), exit_code=1)
    windowed = trial_outcome(job_log([path]), exit_code=1)
    assert windowed == whole and windowed.evidence[0].line == oom_line
    assert not any("not read" in note for note in windowed.notes)


def test_the_sweep_judge_does_not_block_on_a_fifo(tmp_path):
    fifo = tmp_path / "7_0_log.out"
    os.mkfifo(fifo)
    with pytest.raises(ParseError, match=r"is a FIFO \(named pipe\), not a log file"):
        job_log([fifo])  # the sweep's guarded_outcome records the trial as `unknown` with this reason
