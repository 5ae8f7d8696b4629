"""Raw job output -> text the parsers can read.

Real logs are not clean text: a dying process leaves NUL bytes or half a UTF-8 sequence, progress bars redraw with
carriage returns, and launchers merge the output of many ranks, each line prefixed with where it came from:
- torchrun --tee / --role:  `[default3]:text`            - torch >= 2.2 log prefixes:  `[rank3]:text`
- srun --label:             `3: text` (padded: ` 3: `)    - mpirun --tag-output:        `[1,3]<stdout>:text`
- pdsh (deepspeed launcher): `worker-1: text`
Two ranks writing at once can put one record right after another on the same physical line
(`... TFLOPs: 141.3 |[default1]: iteration 8/ 10 | ...`). `normalize` decodes and puts such records back on
lines of their own; `split_prefix` tells a line's origin from its text. Everything here is linear in the size of
the log and never raises.
"""

from __future__ import annotations

import re

from launcher.core.logfile import strip_controls

# A rank prefix written in the middle of a line means a second record starts there.
_MIDLINE_RANK = re.compile(r"\[(?:default|rank)\d{1,6}\]:")
_PREFIX = re.compile(
    r"^\s*(?:\[(?:default|rank)(?P<tee>\d{1,6})\]: ?"  # torchrun --tee, torch's [rankN]: (its separator too)
    r"|\[\d{1,6},(?P<mpi>\d{1,6})\]<std(?:out|err)>:"  # mpirun --tag-output
    r"|(?P<srun>\d{1,6}): "  # srun --label
    r"|(?P<host>[A-Za-z][\w.-]{0,63}): )"  # pdsh / deepspeed launcher host prefix
)


def decode(data: bytes | str) -> str:
    """Bytes -> str (invalid UTF-8 replaced, never an error); NULs dropped; CR LF and lone CR become LF (a
    progress bar's redraws become lines, so the last one is not glued to the next log line); terminal escape
    sequences (colours, cursor moves) and other control characters dropped (launcher.core.logfile.strip_controls:
    what the tools quote from a log must not drive the reader's terminal)."""
    text = data.decode("utf-8", errors="replace") if isinstance(data, (bytes, bytearray)) else str(data)
    if "\x00" in text:
        text = text.replace("\x00", "")
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return strip_controls(text)


def unmerge(text: str) -> str:
    """Put a rank's record that was written onto another record's line back on a line of its own."""
    if "[default" not in text and "[rank" not in text:
        return text

    def split(match: re.Match[str]) -> str:
        start = match.start()
        return match.group(0) if start == 0 or match.string[start - 1] == "\n" else "\n" + match.group(0)

    return _MIDLINE_RANK.sub(split, text)


def normalize(data: bytes | str) -> str:
    """decode + unmerge: what every reader of a raw log should start from."""
    return unmerge(decode(data))


def split_prefix(line: str) -> tuple[str | None, str]:
    """(the rank or host the line came from, the line without its prefix); (None, line) when unprefixed.
    A host prefix is only taken when the rest looks like log text, not for 'Error: ...' or 'Note: ...'."""
    match = _PREFIX.match(line)
    if match is None:
        return None, line
    origin = match.group("tee") or match.group("mpi") or match.group("srun") or match.group("host")
    if match.group("host") is not None and not any(c.isdigit() for c in origin):
        return None, line  # 'RuntimeError: ...', 'WARNING: ...': a message, not a host name
    return origin, line[match.end():]



# A leading timestamp, as loggers and `ts`/launchers write it: "2024-05-01 10:00:00,123 ", "[2024-05-01T10:00:00Z]",
# "05/17/2024 01:30:26 - ", optionally followed by a " - " / " | " / ": " separator.
_STAMP = re.compile(r"\s*\[?(?:\d{4}[-/.]\d\d[-/.]\d\d|\d\d/\d\d/\d{4})[ T_-]\d\d:\d\d:\d\d(?:[.,:]\d{1,9})?"
                    r"(?:Z|[+-]\d\d:?\d\d)?\]?(?:\s{0,4}[-|:](?=\s))?\s{1,4}")
_MAX_PREFIXES = 4  # "server1: [rank3]: 2024-05-01 10:00:00 text": a host, a rank and a time, in any order


def message_of(line: str) -> str:
    """The line without every launcher prefix (split_prefix) and leading timestamp in front of it: the text every
    failure family matches against (issue 17: a pdsh `server1:` or `0: ` in front of an error must not hide it)."""
    for _ in range(_MAX_PREFIXES):
        origin, body = split_prefix(line)
        stamp = _STAMP.match(body)
        if stamp is not None and stamp.end() < len(body):
            body = body[stamp.end():]
        if body == line:
            return line
        line = body
    return line


def last_line_starts(text: str, needles: tuple[str, ...], per_needle: int) -> set[int]:
    """The start offsets of the lines holding the last `per_needle` occurrences of each needle, found from the end
    (a hostile log may repeat a needle millions of times: the count bounds the work)."""
    starts: set[int] = set()
    for needle in needles:
        idx, looked = text.rfind(needle), 0
        while idx >= 0 and looked < per_needle:
            starts.add(text.rfind("\n", 0, idx) + 1)
            idx, looked = text.rfind(needle, 0, idx), looked + 1
    return starts
