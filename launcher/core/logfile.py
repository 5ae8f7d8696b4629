"""Reading a job's log file with bounded memory, and making log text safe to print.

A trial's log can be hundreds of MB (a run printing every step of every rank, a stack of NCCL debug lines), and
whoever hands a path to `python -m analysis.classify` can hand a FIFO or a device. So a log file is read:
- only when it is a regular file (a FIFO would block the reader, /dev/zero never ends, a folder is not a log):
  anything else is a ParseError naming the path and what it is;
- as a window: its first `HEAD_BYTES` and its last `TAIL_BYTES`, each cut at a line break. The middle is streamed
  through in chunks to count its line breaks (so that a tail line keeps its line number in the file) and is not
  kept: memory stays bounded by the window whatever the file's size. A log smaller than the window is read whole.
  What judging needs is at the ends: the launch (config dumps, the first iterations) and how the run ended (the
  last iterations, the traceback, the result line).

`strip_controls` removes terminal escape sequences (colours, cursor moves, OSC titles) and other control
characters from log text, so that a log cannot recolour or rewrite the terminal (or an HTML report, or MLflow)
of whoever reads a verdict quoting it.
"""

from __future__ import annotations

import os
import re
import stat
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from launcher.core.errors import ParseError

HEAD_BYTES = 4 * 2**20
TAIL_BYTES = 16 * 2**20
CHUNK_BYTES = 2**20

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))

# ESC-introduced sequences: CSI (ESC [ ... final byte), OSC (ESC ] ... BEL or ESC \), DCS/SOS/PM/APC strings,
# two-byte escapes (ESC + one byte); the C1 controls (U+0080-U+009F, UTF-8 \xc2\x80-\xc2\x9f), among them the
# one-character CSI (U+009B) and OSC (U+009D). Matched on the UTF-8 bytes, each alternative behind one literal
# first byte, and the other C0 control bytes dropped with bytes.translate: a per-character substitution on text
# took 5 s for 20 MB of binary junk.
_ESCAPES = re.compile(
    rb"\x1b(?:\[[0-?]{0,64}[ -/]{0,16}[@-~]?|[\]PX^_][^\x07\x1b\n]{0,4096}(?:\x07|\x1b\\)?|[ -~]?)")
_C1 = re.compile(rb"\xc2(?:\x9b[0-?]{0,64}[ -/]{0,16}[@-~]?|\x9d[^\x07\x1b\n]{0,4096}(?:\x07|\xc2\x9c)?|[\x80-\x9f])")
_C0 = bytes([*range(0x00, 0x09), *range(0x0B, 0x20), 0x7F])
_HAS_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def strip_controls(text: str) -> str:
    """`text` without terminal escape sequences and control characters (tab and newline are kept)."""
    if _HAS_CONTROL.search(text) is None:
        return text
    data = text.encode("utf-8", "surrogatepass")
    if b"\x1b" in data:
        data = _ESCAPES.sub(b"", data)
    if b"\xc2" in data:
        data = _C1.sub(b"", data)
    return data.translate(None, _C0).decode("utf-8", "replace")  # a cut multi-byte character: U+FFFD


@dataclass(frozen=True)
class LogWindow:
    """What was read of one log file: all of it (`tail` empty, nothing skipped), or its head and its tail."""

    head: bytes
    tail: bytes = b""
    skipped_bytes: int = 0
    skipped_lines: int = 0
    """Line breaks in the skipped middle (LF, CR LF and a lone CR each count one, as the log decoder does), so the
    tail's first line is line `head's line breaks + skipped_lines + 1` of the file."""

    @property
    def whole(self) -> bool:
        return self.skipped_bytes == 0

    def data(self) -> bytes:
        """Head and tail as one text (the tail starts at a line start), for readers that need no line numbers."""
        return self.head + self.tail


def check_regular_file(path: Path) -> os.stat_result:
    """The file's stat; ParseError naming the path when it is not a regular file (OSError when it is missing)."""
    info = os.stat(path)
    _require_regular(path, info)
    return info


def _require_regular(path: Path, info: os.stat_result) -> None:
    if stat.S_ISREG(info.st_mode):
        return
    what = next((name for test, name in _KINDS if test(info.st_mode)), "not a regular file")
    raise ParseError(f"is {what}, not a log file: give a regular file (a job's log, or its job folder)",
                     source=str(path))


def read_window(path: Path, *, head_bytes: int = HEAD_BYTES, tail_bytes: int = TAIL_BYTES,
                chunk_bytes: int = CHUNK_BYTES) -> LogWindow:
    """The log file at `path` read with bounded memory (module docstring). Raises ParseError for a path that is
    not a regular file, OSError for one that cannot be read. The file is opened without blocking and checked
    after opening, so a path swapped for a FIFO between a check and the read cannot hang it."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        _require_regular(path, os.fstat(fd))
    except ParseError:
        os.close(fd)
        raise
    with os.fdopen(fd, "rb", buffering=0) as fh:
        return _read(fh, head_bytes, tail_bytes, chunk_bytes)


def _read_full(fh: BinaryIO, size: int) -> bytes:
    """Up to `size` bytes (fewer only at the end of the file): raw reads may return less than asked."""
    parts, got = [], 0
    while got < size:
        part = fh.read(min(size - got, CHUNK_BYTES * 8))
        if not part:
            break
        parts.append(part)
        got += len(part)
    return b"".join(parts)


def _read(fh: BinaryIO, head_bytes: int, tail_bytes: int, chunk_bytes: int) -> LogWindow:
    head = _read_full(fh, head_bytes)
    if len(head) < head_bytes:
        return LogWindow(head)
    cut = head.rfind(b"\n") + 1 or head.rfind(b"\r") + 1 or len(head)
    head, rest = head[:cut], head[cut:]
    ring: deque[bytes] = deque([rest] if rest else [])
    held = len(rest)
    middle = _BreakCounter(head.endswith(b"\r"))
    while True:
        chunk = _read_full(fh, chunk_bytes)
        if not chunk:
            break
        ring.append(chunk)
        held += len(chunk)
        while ring and held - len(ring[0]) >= tail_bytes:
            held -= len(ring[0])
            middle.add(ring.popleft())
    tail = b"".join(ring)
    if middle.n_bytes == 0:
        return LogWindow(head + tail)
    start = _after_first_break(tail)  # the tail starts at a line start (0: one line longer than the window)
    middle.add(tail[:start])
    return LogWindow(head, tail[start:], middle.n_bytes, middle.n_breaks)


def _after_first_break(data: bytes) -> int:
    """Where the line after the first line break (LF, CR LF or a lone CR) of `data` starts; 0 when it has none."""
    lf, cr = data.find(b"\n"), data.find(b"\r")
    if cr >= 0 and (lf < 0 or cr < lf):
        return cr + 2 if data[cr + 1:cr + 2] == b"\n" else cr + 1
    return lf + 1


class _BreakCounter:
    """Counts the bytes and the line breaks of a stream fed in pieces (a CR LF split between two pieces is one)."""

    def __init__(self, after_cr: bool) -> None:
        self.after_cr, self.n_bytes, self.n_breaks = after_cr, 0, 0

    def add(self, piece: bytes) -> None:
        if not piece:
            return
        self.n_bytes += len(piece)
        self.n_breaks += piece.count(b"\n")
        if b"\r" in piece:  # most logs have none: three passes over a GB cost seconds, one and a search less
            self.n_breaks += piece.count(b"\r") - piece.count(b"\r\n")
        if self.after_cr and piece.startswith(b"\n"):
            self.n_breaks -= 1
        self.after_cr = piece.endswith(b"\r")
