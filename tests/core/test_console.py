"""launcher.core.console.Reporter: lines to stdout, warnings and errors to stderr, nothing from a quiet one."""

from __future__ import annotations

import io

from launcher.core.console import Reporter


def test_plain_reporter_writes_lines_and_prefixes_warnings_and_errors():
    out, err = io.StringIO(), io.StringIO()
    say = Reporter(out, err)
    say.info("hello")
    say.warn("careful")
    say.error("broken")
    say.note("planning: 10 of 20")
    assert out.getvalue() == "hello\n"
    assert err.getvalue() == "warning: careful\nerror: broken\nplanning: 10 of 20\n"
    assert not say.interactive  # not a terminal: change-only plain lines, no live view


def test_quiet_reporter_says_nothing_and_keeps_what_it_was_told(capsys):
    say = Reporter.quiet()
    say.info("a")
    say.warn("b")
    assert capsys.readouterr() == ("", "")
    assert say.lines == ["a", "warning: b"]


def test_two_reporters_share_nothing():
    a, b = Reporter.quiet(), Reporter.quiet()
    a.info("only a")
    assert b.lines == []
