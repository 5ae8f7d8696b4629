"""config_error from the messages the frameworks raise in their own argument/config validation, kept as data.

raised_messages.tsv holds one row per message: framework, the source file at the commit it was read from, and the
message template (`{}` stands for an f-string/format field: a number, a name). The table was written from
Megatron-LM validate_args and megatron/core `*_config.py` __post_init__ checks, parallel_state initialisation,
DeepSpeed runtime/config.py, zero/config.py, offload_config.py and engine.py optimizer checks,
Megatron-DeepSpeed arguments.py and Transformer Engine's attention-backend refusal, not from the logs it is tested
on. Templates with fewer than MIN_WORDS fixed words, or that occur in a healthy fixture log, were left out.

Matching: each template compiles once into a regex of its fixed words (whitespace-tolerant, fields as short
wildcards); the longest fixed fragment is its anchor, found with str.find (in C), and only lines holding an anchor
are tested. A match is evidence only on an error line (an exception, an assert, an error-level record), so a
warning that prints the same words does not fail a healthy run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

TABLE = Path(__file__).with_name("raised_messages.tsv")
MIN_WORDS = 3  # fixed words (3+ letters) a template needs to be evidence
MAX_ANCHOR_HITS = 200  # occurrences of one anchor that are tested
_FIELD = "{}"
_WORD = re.compile(r"[A-Za-z_]{3,}")
# An error line: an exception type, an assert, or an error-level logging record.
ERROR_LINE = re.compile(r"\w*(?:Error|Exception)\b|\bassert|\bERROR\b|\bFATAL\b|\bCRITICAL\b|\bfailed\b")
# A warning or info record is not the failure, even with the same words.
_NOT_ERROR = re.compile(r"\b(?:WARNING|WARN|INFO|DEBUG)\b|UserWarning|FutureWarning|DeprecationWarning")


@dataclass(frozen=True)
class Template:
    framework: str
    source: str
    text: str
    anchor: str
    pattern: re.Pattern[str]


def fixed_words(text: str) -> int:
    return sum(len(_WORD.findall(part)) for part in text.split(_FIELD))


def compile_template(text: str) -> re.Pattern[str]:
    """The fixed parts literally (any run of spaces as `\\s+`), each field as up to 200 characters (a field may hold a
    line break: a printed class name or list that wraps)."""
    parts = []
    for part in text.split(_FIELD):
        words = part.split()
        body = r"\s+".join(re.escape(w) for w in words)
        if part[:1].isspace() and body:
            body = r"\s*" + body
        if part[-1:].isspace() and body:
            body += r"\s*"
        parts.append(body)
    return re.compile(r"[\s\S]{0,200}?".join(parts))


def _anchor(text: str) -> str:
    return max((p.strip() for p in text.split(_FIELD)), key=len)


@cache
def templates() -> tuple[Template, ...]:
    out = []
    for line in TABLE.read_text(encoding="utf-8").splitlines():
        if not line or line.startswith("#") or line.startswith("framework\t"):
            continue
        framework, source, text = line.split("\t")
        out.append(Template(framework, source, text, _anchor(text), compile_template(text)))
    return tuple(out)


def _line(text: str, idx: int) -> tuple[int, str, str]:
    """(start, the line holding text[idx], that line with its neighbours): a field that wraps (a printed class name
    or list) puts the message on two lines, and the anchor may be on either."""
    start = text.rfind("\n", max(0, idx - 2000), idx) + 1
    end = text.find("\n", idx, idx + 2000)
    line_end = idx + 2000 if end < 0 else end
    prev = text.rfind("\n", max(0, start - 2000), max(0, start - 1)) + 1 if start > 0 else start
    nxt = text.find("\n", line_end + 1, line_end + 2000) if end >= 0 else -1
    window_end = line_end if end < 0 else (line_end + 2000 if nxt < 0 else nxt)
    return start, text[start:line_end], text[prev:window_end]


def is_error_line(line: str) -> bool:
    return ERROR_LINE.search(line) is not None and _NOT_ERROR.search(line) is None


def first_raised(text: str, start: int = 0) -> tuple[int, Template] | None:
    """The earliest error line at or after start that states one of the table's validation messages."""
    best: tuple[int, Template] | None = None
    for tpl in templates():
        idx, n = text.find(tpl.anchor, start), 0
        while idx >= 0 and n < MAX_ANCHOR_HITS and (best is None or idx < best[0]):
            line_start, line, window = _line(text, idx)
            match = tpl.pattern.search(window)
            if match is not None:
                # the error line is the one where the message starts (the anchor may be on its continuation)
                head_start = window.rfind("\n", 0, match.start()) + 1
                head_end = window.find("\n", match.start())
                head = window[head_start: len(window) if head_end < 0 else head_end]
                if is_error_line(head) or is_error_line(line) or _follows_error(text, line_start):
                    best = (line_start, tpl)
                    break
            idx = text.find(tpl.anchor, idx + len(tpl.anchor))
            n += 1
    return best


def _follows_error(text: str, line_start: int) -> bool:
    """A message continued from the line above (`AssertionError:` then the message on the next line)."""
    prev_start = text.rfind("\n", max(0, line_start - 500), max(0, line_start - 1)) + 1
    prev = text[prev_start: line_start].strip()
    return prev.endswith(("Error:", "Exception:", "AssertionError")) and _NOT_ERROR.search(prev) is None
