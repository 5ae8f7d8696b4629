"""One trial, one judgement: a job's logs are read together, and judged once.

A job leaves its evidence in several files: per task (one per node) submitit's `<job>_<task>_log.out` (stdout:
progress, the result line) and `<job>_<task>_log.err` (stderr: tracebacks, allocator and NCCL errors, torchrun's
and submitit's reports), each holding the lines of every rank on that node (`[rankN]:` prefixes). The sweep's
judge (analysis.logs.judge) and `python -m analysis.classify JOB_DIR` read the same files in the same order
(launcher.run.executor.log_paths: the tasks' .out files, task 0 first, then their .err files) and judge them with
one call of the classifier, so that the two cannot disagree.

The rule. The order in which lines of different files were written is unknowable (two streams, buffered
separately), so no verdict may depend on it:
1. Every failure family is searched in every file; the verdict is the first family in the classifier's priority
   order (analysis.logs.classify: node fault > oom > config > diverged > node lost/preempted > hang > time limit
   > cancelled > hard crash > communication > crash) that any file shows. An allocator OOM in task 1's .err beats
   an NCCL error in task 0's .out, whichever was printed first.
2. Within one family, the family table's row order, then the reading order above, pick the evidence line.
3. A wrapper's traceback (torchrun's ChildFailedError, submitit's re-raise, parasweep's keeper, a launcher's
   CalledProcessError: analysis.logs.wrappers) is context, never evidence while the job's own exception, crash
   marker or a launcher's report of the child's exit status is in any of the files.
4. With the job's exit status unknown (a log alone), a result or step records in a .out do not excuse a failure
   signature in a .err: every .err is read after every .out, so its lines count as coming after the last
   progress.
Each evidence line names its file and its line number in that file (after decoding: a carriage-return redraw is
a line of its own), so the report and MLflow quote the allocator line of the file it is in.

A file larger than the read window (launcher.core.logfile) is judged on its head and its tail: the tail's lines
keep their line numbers in the file (the skipped middle's line breaks are counted), and the outcome's notes say
what was skipped.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

from analysis.logs.logtext import normalize_lines
from launcher.core.logfile import HEAD_BYTES, TAIL_BYTES, LogWindow


class Gap(NamedTuple):
    """The middle of a file that was not read: the tail resumes at joined line `at`, `lines` file lines later."""

    file: str
    at: int
    lines: int
    bytes: int
    shift: int  # what a line from `at` on adds to its joined-text offset to get its line number in the file


def _with_tail(name: str, line: int, head: str, head_dropped: int,
               window: LogWindow) -> tuple[str, Gap, tuple[int, ...]]:
    """A file's head text followed by its tail's, the gap between them (`line`: where the file starts) and the
    tail's dropped copies numbered as lines of the head and tail read (`head_dropped`: how many the head lost)."""
    breaks = head.count("\n")
    tail, dropped = normalize_lines(window.tail)
    if head.endswith("\n"):  # the head ends at a line break (always, unless one line fills the whole head)
        return (head + tail, Gap(name, line + breaks, window.skipped_lines, window.skipped_bytes,
                                 window.skipped_lines), tuple(breaks + head_dropped + d for d in dropped))
    # the head's last line was cut: the tail is put on a line of its own, one joined line further
    return (f"{head}\n{tail}",
            Gap(name, line + breaks + 1, window.skipped_lines, window.skipped_bytes, window.skipped_lines - 1),
            tuple(breaks + 1 + head_dropped + d for d in dropped))


class EvidenceLine(NamedTuple):
    file: str  # the log file's name; "" for a text judged on its own
    line: int  # 1-based line number in that file
    text: str

    def as_dict(self) -> dict[str, object]:
        return {"file": self.file, "line": self.line, "text": self.text}


@dataclass(frozen=True)
class JobLog:
    """A job's log files as one normalised text: the files in reading order, one line break between two."""

    files: tuple[str, ...]
    text: str
    first_lines: tuple[int, ...]  # the joined text's line number at which each file starts
    gaps: tuple[Gap, ...] = ()  # the middles skipped in files larger than the read window, in joined-line order
    # per file, the lines (numbered as in the text read, before the gap) that undouble dropped as a rank's copies
    dropped: tuple[tuple[int, ...], ...] = ()

    @classmethod
    def join(cls, parts: Sequence[tuple[str, str | bytes | LogWindow]]) -> JobLog:
        """(file name, raw content or the window read of it) in reading order -> the job's text; empty files are
        left out."""
        files, texts, first_lines, gaps, dropped, line = [], [], [], [], [], 1
        for name, data in parts:
            text, copies = normalize_lines(data.head if isinstance(data, LogWindow) else data)
            if isinstance(data, LogWindow) and not data.whole:
                text, gap, tail_copies = _with_tail(name, line, text, len(copies), data)
                gaps.append(gap)
                copies += tail_copies
            if text.endswith("\n"):
                text = text[:-1]  # the joining newline ends the file's last line: file lines = joined lines
            if not text:
                continue
            files.append(name)
            texts.append(text)
            first_lines.append(line)
            dropped.append(copies)
            line += text.count("\n") + 1
        return cls(tuple(files), "\n".join(texts), tuple(first_lines), tuple(gaps), tuple(dropped))

    def locate(self, line: int) -> tuple[str, int]:
        """A line number of the joined text -> (file name, line number in that file)."""
        i = bisect_right(self.first_lines, line) - 1
        if i < 0:
            return "", line
        skipped = sum(g.shift for g in self.gaps if g.file == self.files[i] and self.first_lines[i] <= g.at <= line)
        read = line - self.first_lines[i] + 1
        for copy in self.dropped[i] if i < len(self.dropped) else ():
            if copy > read:
                break
            read += 1  # a rank's copy that undouble dropped above this line still counts in the file
        return self.files[i], read + skipped

    @property
    def notes(self) -> tuple[str, ...]:
        """What was not read, one note per file read as a window."""
        return tuple(f"{g.file or 'the log'}: {g.bytes / 1e6:,.0f} MB ({g.lines:,} lines) in its middle not read "
                     f"(a large log is judged on its first {HEAD_BYTES // 2**20} MiB and last "
                     f"{TAIL_BYTES // 2**20} MiB)" for g in self.gaps)

    def evidence(self, lines: Sequence[tuple[int, str]]) -> tuple[EvidenceLine, ...]:
        return tuple(EvidenceLine(*self.locate(n), text) for n, text in lines)
