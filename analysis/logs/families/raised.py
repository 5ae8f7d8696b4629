"""config_error from the messages the frameworks raise in their own argument/config validation, kept as data.

raised_messages.tsv holds one row per message: framework, the source file at the commit it was read from, and the
message template (`{}` stands for an f-string/format field: a number, a name). The table was written from
Megatron-LM validate_args and megatron/core `*_config.py` __post_init__ checks, parallel_state initialisation,
DeepSpeed runtime/config.py, zero/config.py, offload_config.py and engine.py optimizer checks,
Megatron-DeepSpeed arguments.py and Transformer Engine's attention-backend refusal, not from the logs it is tested
on. Templates with fewer than MIN_WORDS fixed words, or that occur in a healthy fixture log, were left out.
Every raised_messages*.tsv beside this module is read (in name order, same columns): raised_messages_others.tsv holds
the checks of the trainers run beside them (transformers, accelerate, TRL, PEFT, Lightning, torchtitan, veRL,
OpenRLHF, LLaMA-Factory, ms-swift, ColossalAI). One harvester writes both from the frameworks' source:
`python -m analysis.logs.families.harvest --mirror DIR` (families/harvest.py; which files go to which table is its
SOURCES); raised_messages_others.tsv is written whole by it, raised_messages.tsv also holds rows read by hand. Each
source is read at HEAD and at every earlier release (its tags, a few pinned commits, transformers' wheels): a run on
DeepSpeed 0.9 or transformers 4.36 prints that release's wording (stop 42: 1,039 such rows, 381 of which no generic
rule read as a configuration error).

Matching: each template compiles once into a regex of its fixed words (whitespace-tolerant, fields as short
wildcards); the longest fixed fragment is its anchor. Only the neighbourhood of error lines (an exception, an assert,
an error-level record: found by str.find of a few needles) is searched, and a template is tried there only when its
anchor is in it, so a 20 MB log costs a few passes, not one per template. A match is evidence only on an error line,
so a warning that prints the same words does not fail a healthy run.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

TABLE = Path(__file__).with_name("raised_messages.tsv")  # the first table; every raised_messages*.tsv beside it is read
MIN_WORDS = 3  # fixed words (3+ letters) a template needs to be evidence
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
    anchor: str  # whitespace runs as one space: a log may wrap or re-space the message (batch 42's DeepSpeed assert)
    lead: str = ""  # the first CUT_MIN_WORDS words of a long message without a field among them ('' if none)
    lead_anchor: str = ""  # the longest word of `lead`: a window without it cannot hold the cut message

    @property
    def pattern(self) -> re.Pattern[str]:
        # Compiled on first use: a log's error lines reach a few dozen of the ~2,000 templates (their anchor words
        # must be on the line first), and compiling them all took a second of the 20 MB benchmark's five.
        return compile_template(self.text)


# A message quoted cut at the end of its line (a report's prose, a search excerpt, a terminal's width: batch 10's
# "assertion error：Not sure how to proceed, we were given deepspeed configs in the deepspeed arguments and
# deepspeed."): it counts when its first CUT_MIN_WORDS words are there and what follows on the line is the rest of the
# message as far as it goes (the last word may be cut). Eight words of a validation message are no warning's words.
CUT_MIN_WORDS = 8


def fixed_words(text: str) -> int:
    return sum(len(_WORD.findall(part)) for part in text.split(_FIELD))


@cache
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
    return " ".join(max((" ".join(p.split()) for p in text.split(_FIELD)), key=len).split())


def flat(text: str) -> str:
    """`text` with each whitespace run (line breaks included) as one space: where a template's anchor is looked for.
    The source's own spacing (DeepSpeed's 13-space runs between sentences) and a log's wrapping both differ from run to
    run; the pattern that decides is whitespace-tolerant, so the quick test before it must be too."""
    return " ".join(text.split())


def tables(folder: Path = TABLE.parent) -> list[Path]:
    """Every raised_messages*.tsv in `folder`, sorted by name: one table per harvest (the four frameworks',
    the other trainers'), same columns, so each can be regenerated on its own."""
    return sorted(folder.glob("raised_messages*.tsv"))


def read_tables(paths: list[Path]) -> tuple[Template, ...]:
    out = []
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line or line.startswith("#") or line.startswith("framework\t"):
                continue
            framework, source, text = line.split("\t")
            lead = _lead(text)
            lead_anchor = max(lead.split(), key=len) if lead else ""
            out.append(Template(framework, source, text, _anchor(text), lead, lead_anchor))
    return tuple(out)


@cache
def templates() -> tuple[Template, ...]:
    return read_tables(tables())


def _lead(text: str) -> str:
    """The message's first CUT_MIN_WORDS words when no field is among them and more words follow; '' otherwise."""
    words = text.split(_FIELD, 1)[0].split()
    return " ".join(words[:CUT_MIN_WORDS]) if len(words) > CUT_MIN_WORDS else ""


def cut_at(line: str, tpl: Template) -> bool:
    """Does `line` end with `tpl`'s message cut short: its lead, then the following words of the message up to the
    line's end (the last of them possibly cut)?"""
    if not tpl.lead:
        return False
    at = " ".join(line.split()).find(tpl.lead)
    if at < 0:
        return False
    rest = " ".join(line.split())[at + len(tpl.lead):].split()
    expected = tpl.text.split(_FIELD, 1)[0].split()[CUT_MIN_WORDS:]
    if not rest or len(rest) > len(expected):
        return len(rest) == 0
    *whole, last = rest
    return whole == expected[: len(whole)] and expected[len(whole)].startswith(last.rstrip(".,;:"))


def stated_in(line: str) -> Template | None:
    """The table's message that `line` states (whole, or cut at the line's end), whatever the line's prefix: for a
    line that is known to be the error by where it stands (the last activity of a log alone), not by its words."""
    line_flat = flat(line)
    for tpl in templates():
        if (tpl.anchor in line_flat and tpl.pattern.search(line) is not None) \
                or (tpl.lead_anchor and tpl.lead_anchor in line and cut_at(line, tpl)):
            return tpl
    return None


def is_error_line(line: str) -> bool:
    return ERROR_LINE.search(line) is not None and _NOT_ERROR.search(line) is None


MAX_ERROR_LINES = 2000  # error lines whose neighbourhood is tested (a log of repeated errors is decided early)


def first_raised(text: str, start: int = 0) -> tuple[int, Template] | None:
    """The earliest error line at or after start that states one of the table's validation messages. Only the
    neighbourhood of error lines is searched (the line before, the line and the two after: a message continued from a
    bare `XError:` line, or wrapped over lines), so a 20 MB log costs one pass for its error lines, not one pass per
    template (535 templates: ~4 s on 20 MB of binary junk). In a window only the templates whose key word it holds
    are tried (_candidates), so the cost does not grow with the table."""
    for line_start in _error_line_starts(text, start):
        prev_start = text.rfind("\n", max(0, line_start - 2000), max(0, line_start - 1)) + 1 if line_start else 0
        end = line_start
        for _ in range(3):  # the line and the two after it
            nxt = text.find("\n", end, end + 2000)
            end = len(text) if nxt < 0 else nxt + 1
        window = text[prev_start:end]
        candidates = _candidates(window)
        window_flat = flat(window) if candidates else ""
        for tpl in candidates:
            if tpl.anchor in window_flat:
                hit = _error_hit(text, window, prev_start, tpl)
                if hit is not None:
                    return hit, tpl
            elif tpl.lead_anchor and tpl.lead_anchor in window:
                hit = _cut_hit(text, line_start, tpl)
                if hit is not None:
                    return hit, tpl
    return None


def _inner_words(fragment: str) -> list[str]:
    """The words (as _WORD reads them) of a fragment that do not touch its ends: a window that holds the fragment
    holds each of them as a whole word (a word at an end may be glued to the text beside it)."""
    return [m.group(0) for m in _WORD.finditer(fragment) if m.start() > 0 and m.end() < len(fragment)]


@cache
def _index() -> tuple[dict[str, tuple[int, ...]], tuple[int, ...]]:
    """Template numbers by key word (the longest inner word of the anchor, and of the cut-message lead), and the
    numbers of the templates without one (tried in every window)."""
    by_word: dict[str, list[int]] = {}
    always = []
    for i, tpl in enumerate(templates()):
        for fragment in (tpl.anchor, tpl.lead):
            if not fragment:
                continue
            words = _inner_words(fragment)
            if words:
                by_word.setdefault(max(words, key=len), []).append(i)
            else:
                always.append(i)
    return {w: tuple(v) for w, v in by_word.items()}, tuple(always)


def _candidates(window: str) -> list[Template]:
    """The templates, in table order, whose anchor or lead may be in `window` (every one whose anchor or lead is)."""
    by_word, always = _index()
    numbers = set(always)
    for word in set(_WORD.findall(window)):
        numbers.update(by_word.get(word, ()))
    rows = templates()
    return [rows[i] for i in sorted(numbers)]


_ERROR_NEEDLES = ("Error", "Exception", "assert", "ERROR", "FATAL", "CRITICAL", "failed")


def _error_line_starts(text: str, start: int) -> list[int]:
    """Starts of the first MAX_ERROR_LINES lines at or after start that ERROR_LINE accepts, in order: each needle found
    with str.find (one C pass each; a regex with a leading \\w* over 20 MB took 1.4 s)."""
    starts: set[int] = set()
    for needle in _ERROR_NEEDLES:
        idx, n = text.find(needle, start), 0
        while idx >= 0 and n < MAX_ERROR_LINES:
            line_start = text.rfind("\n", max(0, idx - 2000), idx) + 1
            end = text.find("\n", idx, idx + 2000)
            if ERROR_LINE.search(text, max(line_start, idx - 200), (idx + 2000) if end < 0 else end):
                starts.add(line_start)
            idx = text.find(needle, (idx + 2000) if end < 0 else end)
            n += 1
    return sorted(starts)[:MAX_ERROR_LINES]


def _error_hit(text: str, window: str, offset: int, tpl: Template) -> int | None:
    """Start of the error line where `tpl`'s message starts in `window` (text[offset:...]); None when the message is
    there only on lines that are not errors."""
    for match in tpl.pattern.finditer(window):
        head_start = window.rfind("\n", 0, match.start()) + 1
        head_end = window.find("\n", match.start())
        head = window[head_start: len(window) if head_end < 0 else head_end]
        anchor_at = window.find(tpl.anchor, match.start())  # -1 when wrapped: then the line the message starts on
        line_start = window.rfind("\n", 0, anchor_at if anchor_at >= 0 else match.start()) + 1
        line_end = window.find("\n", line_start)
        line = window[line_start: len(window) if line_end < 0 else line_end]
        if is_error_line(head) or is_error_line(line) or _follows_error(text, offset + line_start):
            return offset + line_start
    return None


def _cut_hit(text: str, line_start: int, tpl: Template) -> int | None:
    """line_start when the error line there ends with `tpl`'s message cut short (cut_at); None otherwise."""
    end = text.find("\n", line_start, line_start + 2000)
    line = text[line_start: (line_start + 2000) if end < 0 else end]
    return line_start if is_error_line(line) and cut_at(line, tpl) else None


def _follows_error(text: str, line_start: int) -> bool:
    """A message continued from the line above (`AssertionError:` then the message on the next line)."""
    prev_start = text.rfind("\n", max(0, line_start - 500), max(0, line_start - 1)) + 1
    prev = text[prev_start: line_start].strip()
    return prev.endswith(("Error:", "Exception:", "AssertionError")) and _NOT_ERROR.search(prev) is None
