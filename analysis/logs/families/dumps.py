"""Stack dumps of a live job: where its processes were stuck, not what they raised.

People dump the stacks of a job that has stopped printing (py-spy dump, faulthandler's dump_traceback_later or a
registered signal); the dump shows the innermost frame each thread waits in (a collective, a barrier, a queue,
deepspeed.initialize). Such a dump is a hang's evidence (issue 17), and its text is not the job's output: a
command line (`Process 7114: python train.py --max_steps 50 ...`), a frame's function name
(`_checkpoint_tag_validation`) or a local variable's value (py-spy --locals) must not be read as a configuration
rule or an error (batch 11: two py-spy dumps cut after their `Process N:` line were judged config_error from the
command line). So classify blanks every line of a live dump except one marker line (MARKER), and judges the dump
as a hang where nothing outside it says otherwise.

A dump after a fatal signal (`Fatal Python error: Segmentation fault`, then `Current thread 0x... (most recent call
first):`) is a crash's report, not a live dump: it is left as it is (the crash family reads it).

Formats (sources):
- py-spy src/main.rs and src/dump.rs (print_traces): `py-spy dump --pid 7114` (the command, as typed), then
  `Process 7114: <command line>`, `Python v3.10.12 (/usr/bin/python3.10)`, a blank line, and per thread
  `Thread 7114 (active+gil): "MainThread"` followed by frames `    func (path/file.py:123)`, native frames
  `    ncclGroupEnd (libnccl.so.2)` / `    0x7f3a... (libc.so.6)`, with --locals `        Arguments:` /
  `        Locals:` and `            name: value` lines.
- CPython Python/traceback.c and Modules/faulthandler.c: `Timeout (0:05:00)!` (dump_traceback_later), then
  `Thread 0x00007f... (most recent call first):` / `Current thread 0x... (most recent call first):` /
  `Stack (most recent call first):` and frames `  File "x.py", line 12 in func` (no comma before "in", unlike a
  traceback), `  <no Python frame>`.
"""

from __future__ import annotations

import re

_PY_SPY_COMMAND = (r"[ \t]{0,8}(?:[$#>%][ \t]{0,4})?(?:sudo[ \t]{1,4}(?:-E[ \t]{1,4})?)?py-spy[ \t]{1,4}dump\b"
                   r"[^\n]{0,300}")
_PYTHON_VERSION = r"[ \t]{0,8}Python v\d{1,2}\.\d{1,3}[\w.+-]{0,20}[ \t]{1,4}\([^\n]{1,300}\)[ \t]*"
_PY_SPY_THREAD = (r'[ \t]{0,8}Thread (?:0x[0-9a-fA-F]{1,16}|\d{1,12}) \((?:active|idle)(?:\+gil)?\)'
                  r'(?:: "[^"\n]{0,80}")?[ \t]*')
_FAULT_THREAD = (r"[ \t]{0,8}(?:(?:Current thread|Thread) 0x[0-9a-fA-F]{1,16}(?: \[[^\]\n]{0,60}\])?|Stack)"
                 r" \(most recent call first\):[ \t]*")
_TIMEOUT = r"[ \t]{0,8}Timeout \(\d{1,4}:\d\d:\d\d\)![ \t]*"
# The one line of a dump kept visible: what classify names as the hang's evidence. None of them carries the job's
# own text (a command line or a frame would).
MARKER = re.compile(rf"^(?:{_PY_SPY_COMMAND}|{_PYTHON_VERSION}|{_PY_SPY_THREAD}|{_FAULT_THREAD}|{_TIMEOUT})$",
                    re.MULTILINE)
MARKER_NEEDLES = ("py-spy", "Python v", "Thread ", "thread 0x", "Stack (most recent", "Timeout (")
# py-spy's process line: a dump's only when it follows the command or precedes the Python version line.
_PROCESS = re.compile(r"[ \t]{0,8}Process \d{1,10}: [^\n]{0,20000}")
# A dump's other lines: more thread headers, frames in either format, native frames, --locals, blank lines.
_BODY = re.compile(
    rf"(?:{_PYTHON_VERSION}|{_PY_SPY_THREAD}|{_FAULT_THREAD}|{_TIMEOUT}"
    r'|[ \t]{1,12}File "[^"\n]{1,400}", line \d{1,7} in [^\n]{1,200}'
    r"|[ \t]{1,12}[^\s(][^\n]{0,300} \([^()\n]{1,400}:\d{1,7}\)[ \t]*"  # py-spy frame: func (file.py:123)
    r"|[ \t]{1,12}[^\s(][^\n]{0,300} \([^()\n]{0,300}\.so[\d.]{0,12}\)[ \t]*"  # native frame (lib.so.2)
    r"|[ \t]{1,12}(?:Arguments|Locals):[ \t]*|[ \t]{6,20}[\w.*]{1,80}: [^\n]{0,2000}"  # py-spy --locals
    r"|[ \t]{0,12}<no Python frame>[ \t]*|[ \t]{1,12}\.{3}[ \t]*|[ \t]*)")
# A fatal signal's report above the dump: CPython faulthandler's fatal_error()
_FATAL = "Fatal Python error"
_FATAL_LOOKBACK_CHARS = 400
MAX_DUMPS = 200  # dumps looked at in one log (one per process and dump; a hostile log could hold thousands)


def _lines_from(text: str, pos: int) -> tuple[str, int]:
    """The line starting at `pos` and the position after its newline."""
    end = text.find("\n", pos)
    end = len(text) if end < 0 else end
    return text[pos:end], end + 1


def _span_end(text: str, pos: int) -> int:
    """End of the dump whose marker line starts at `pos`: after the last line that belongs to it."""
    _, nxt = _lines_from(text, pos)
    end = nxt
    # the py-spy command is followed by its Process line
    process_ok = _PY_SPY_COMMAND_RE.fullmatch(_lines_from(text, pos)[0]) is not None
    while nxt < len(text):
        line, after = _lines_from(text, nxt)
        if _BODY.fullmatch(line) is not None or (process_ok and _PROCESS.fullmatch(line) is not None):
            process_ok = _PY_SPY_COMMAND_RE.fullmatch(line) is not None
            if line.strip():
                end = after
            nxt = after
            continue
        break
    return min(end, len(text))


_PY_SPY_COMMAND_RE = re.compile(_PY_SPY_COMMAND)


def _start_with_process(text: str, pos: int) -> int:
    """A `Process N:` line right above a `Python v...` marker belongs to the dump: its start, else `pos`."""
    above_end = pos - 1
    if above_end <= 0:
        return pos
    above_start = text.rfind("\n", 0, above_end) + 1
    return above_start if _PROCESS.fullmatch(text[above_start:above_end]) is not None else pos


def live_dumps(text: str) -> list[tuple[int, int, int]]:
    """(start, end, marker position) of every live stack dump in `text` (the module docstring's formats), in order;
    a dump under a fatal signal's report is left out."""
    if not any(n in text for n in MARKER_NEEDLES):
        return []
    out: list[tuple[int, int, int]] = []
    pos = 0
    while len(out) < MAX_DUMPS:
        m = MARKER.search(text, pos)
        if m is None:
            break
        start = _start_with_process(text, m.start())
        end = _span_end(text, m.start())
        if _FATAL not in text[max(0, start - _FATAL_LOOKBACK_CHARS): start]:
            out.append((start, end, m.start()))
        pos = max(end, m.end() + 1)
    return out


def masked(text: str, dumps: list[tuple[int, int, int]]) -> str:
    """`text` with every line of each dump blanked (spaces; newlines and positions kept) except its marker line."""
    if not dumps:
        return text
    parts: list[str] = []
    last = 0
    for start, end, marker in dumps:
        marker_end = text.find("\n", marker)
        marker_end = end if marker_end < 0 or marker_end > end else marker_end
        parts.append(text[last:start])
        parts.append(_blank(text[start:marker]))
        parts.append(text[marker:marker_end])
        parts.append(_blank(text[marker_end:end]))
        last = end
    parts.append(text[last:])
    return "".join(parts)


def _blank(chunk: str) -> str:
    return re.sub(r"[^\n]", " ", chunk)


def live_marker(text: str, start: int) -> int | None:
    """Position of the first marker line of a live dump at or after `start` (in a text masked by `masked`, the
    dump's one visible line); None when there is none."""
    if not any(n in text for n in MARKER_NEEDLES):
        return None
    pos = start
    for _ in range(MAX_DUMPS):
        m = MARKER.search(text, pos)
        if m is None:
            return None
        if _FATAL not in text[max(0, m.start() - _FATAL_LOOKBACK_CHARS): m.start()]:
            return m.start()
        pos = m.end()
    return None
