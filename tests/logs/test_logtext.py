"""Raw output -> text: bytes, NULs, carriage returns, rank prefixes, two ranks' records on one line."""

import pytest

from analysis.logs.classify import classify
from analysis.logs.logtext import decode, normalize, split_prefix, unmerge
from launcher.core.kinds import FailureKind


def test_decode_never_fails():
    raw = b"ok \xff\xfe\x00 line\r\nbar 1%\rbar 2%\rdone\n"
    assert decode(raw) == "ok \ufffd\ufffd line\nbar 1%\nbar 2%\ndone\n"
    assert decode("x\x00y") == "xy"


def test_unmerge_puts_a_second_rank_on_its_own_line():
    text = "[default0]: iteration 7/ 9 | a: 1 |[default1]: iteration 7/ 9 | a: 2 |\n[rank3]:x[rank4]:y"
    assert unmerge(text) == ("[default0]: iteration 7/ 9 | a: 1 |\n[default1]: iteration 7/ 9 | a: 2 |\n"
                             "[rank3]:x\n[rank4]:y")
    assert unmerge("no prefixes here") == "no prefixes here"
    assert normalize(b"[rank0]:a\r[rank1]:b") == "[rank0]:a\n[rank1]:b"


@pytest.mark.parametrize("line, origin, rest", [
    ("[default3]: iteration 1/ 2 |", "3", "iteration 1/ 2 |"),  # the separator is the prefix's
    ("[rank3]: KeyError: 'use_muon'", "3", "KeyError: 'use_muon'"),
    ("[rank3]:   File \"/x/Muon.py\", line 104, in <listcomp>", "3", "  File \"/x/Muon.py\", line 104, in <listcomp>"),
    ("[rank12]:[E ProcessGroupNCCL.cpp:1]", "12", "[E ProcessGroupNCCL.cpp:1]"),
    ("  3: iteration 5/ 9 |", "3", "iteration 5/ 9 |"),
    ("[1,7]<stdout>:Traceback (most recent call last):", "7", "Traceback (most recent call last):"),
    ("gpu-q-13: [2023-02-22 14:30:50,121] [INFO] x", "gpu-q-13", "[2023-02-22 14:30:50,121] [INFO] x"),
    ("RuntimeError: CUDA error: out of memory", None, "RuntimeError: CUDA error: out of memory"),
    ("WARNING: something", None, "WARNING: something"),
])
def test_split_prefix(line, origin, rest):
    assert split_prefix(line) == (origin, rest)


def test_a_rank_prefixed_excerpt_below_its_header_ends_in_its_exception():
    """Batch 14 (KellerJordan/Muon#9): torch's `[rankN]: ` separator left a space before the exception line, so an
    excerpt cut below its Traceback header read as a traceback cut before its exception."""
    log = ("[rank3]:   File \"/x/optimizer/Muon.py\", line 104, in <listcomp>\n"
           "[rank3]:     params = [p for p in group['params'] if self.state[p]['use_muon']]\n"
           "[rank3]: KeyError: 'use_muon'\n")
    verdict = classify(log)
    assert verdict.kind == FailureKind.CRASHED and "KeyError: 'use_muon'" in verdict.reason
    assert "before its exception line" in classify(log.rsplit("[rank3]: KeyError", 1)[0]).reason
