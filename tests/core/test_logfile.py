"""launcher.core.logfile: a log is read as a bounded window whose tail keeps its line numbers, what is not a
regular file is refused without blocking, and terminal escape codes never survive into quoted text."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from launcher.core.errors import ParseError
from launcher.core.logfile import HEAD_BYTES, TAIL_BYTES, read_window, strip_controls


def _lines(n: int, end: str = "\n") -> str:
    return "".join(f"line {i:06d} of the log{end}" for i in range(1, n + 1))


def test_a_small_log_is_read_whole(tmp_path):
    path = tmp_path / "a.log"
    path.write_text(_lines(100))
    window = read_window(path, head_bytes=10_000, tail_bytes=10_000)
    assert window.whole and window.data() == path.read_bytes()


@pytest.mark.parametrize("end", ["\n", "\r\n", "\r"])
@pytest.mark.parametrize("chunk_bytes", [7, 4096])
def test_a_large_log_keeps_its_ends_and_counts_the_lines_it_skips(tmp_path, end, chunk_bytes):
    path = tmp_path / "a.log"
    path.write_text(_lines(5000, end), newline="")
    window = read_window(path, head_bytes=3000, tail_bytes=5000, chunk_bytes=chunk_bytes)
    assert not window.whole and len(window.head) <= 3000 and len(window.tail) <= 5000 + chunk_bytes
    assert window.head + window.tail != path.read_bytes()
    assert len(window.head) + window.skipped_bytes + len(window.tail) == path.stat().st_size
    head_lines = window.head.decode().replace("\r\n", "\n").replace("\r", "\n").count("\n")
    first_tail = window.tail.decode().replace("\r\n", "\n").replace("\r", "\n").split("\n", 1)[0]
    assert first_tail == f"line {head_lines + window.skipped_lines + 1:06d} of the log"  # its number in the file
    assert window.tail.endswith(f"line 005000 of the log{end}".encode())


def test_memory_is_bounded_by_the_window_whatever_the_size(tmp_path):
    path = tmp_path / "big.log"
    with path.open("wb") as fh:
        fh.write(b"start\n")
        fh.truncate(48 * 2**20)  # 48 MiB, one line of zero bytes after the first
    window = read_window(path)
    assert len(window.head) + len(window.tail) <= HEAD_BYTES + TAIL_BYTES
    assert window.skipped_bytes >= 48 * 2**20 - HEAD_BYTES - TAIL_BYTES - 2**20


def test_a_fifo_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "job.log"
    os.mkfifo(fifo)
    with pytest.raises(ParseError, match=r"job\.log: is a FIFO \(named pipe\), not a log file"):
        read_window(fifo)


@pytest.mark.parametrize(("path", "what"), [("/dev/null", "a character device"), (".", "a folder")])
def test_devices_and_folders_are_refused(tmp_path, path, what):
    with pytest.raises(ParseError, match=f"is {what}, not a log file"):
        read_window(tmp_path if path == "." else Path(path))


def test_a_missing_file_is_an_os_error(tmp_path):
    with pytest.raises(FileNotFoundError):
        read_window(tmp_path / "missing.log")


@pytest.mark.parametrize(("raw", "clean"), [
    ("\x1b[1;31mRuntimeError\x1b[0m: CUDA out of memory", "RuntimeError: CUDA out of memory"),
    ("\x1b]0;owned title\x07step 3", "step 3"),
    ("\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", "link"),
    ("a\x1b[2J\x1b[Hb\x1b7c\x1b8", "abc"),
    ("bell\x07 back\x08space \x9b31mcsi", "bell backspace csi"),
    ("tab\tand\nnewline stay", "tab\tand\nnewline stay"),
    ("plain text, unchanged: ü €", "plain text, unchanged: ü €"),
])
def test_strip_controls(raw, clean):
    assert strip_controls(raw) == clean
