"""The sweep loop's tailing of running jobs' logs (launcher.run.loop._new_iterations): bounded reads, a record cut
between two chunks still found, a FIFO never read."""

from __future__ import annotations

import os

from launcher.core.logfile import CHUNK_BYTES
from launcher.run.loop import _new_iterations


class Progress:
    """Counts the text it is shown; an iteration is the word ITERATION."""

    def __init__(self) -> None:
        self.largest = 0

    def has_iteration(self, text: str) -> bool:
        self.largest = max(self.largest, len(text))
        return "ITERATION" in text

    def step_times(self, text: str, warmup_iters: int) -> list[float]:
        return []


def test_a_log_that_grew_by_far_more_than_a_chunk_is_read_a_chunk_at_a_time(tmp_path):
    path = tmp_path / "1_0_log.out"
    path.write_bytes(b"x" * (5 * CHUNK_BYTES) + b"\nITERATION 1\n")
    offsets: dict = {}
    progress = Progress()
    assert _new_iterations([path], offsets, progress)
    assert progress.largest <= CHUNK_BYTES + 64 * 1024 and offsets[path] == path.stat().st_size
    assert not _new_iterations([path], offsets, Progress())  # nothing new since


def test_a_record_cut_between_two_chunks_is_found(tmp_path):
    path = tmp_path / "1_0_log.out"
    path.write_bytes(b"y" * (CHUNK_BYTES - 4) + b"\nITERATION 2\n")  # the word straddles the chunk boundary
    assert _new_iterations([path], {}, Progress())


def test_a_fifo_among_the_logs_is_skipped(tmp_path):
    fifo, log = tmp_path / "1_0_log.err", tmp_path / "1_0_log.out"
    os.mkfifo(fifo)
    log.write_text("ITERATION 3\n")
    assert _new_iterations([fifo, log], {}, Progress())
