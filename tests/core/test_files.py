"""Atomic replacement under concurrent writers (issue 19 point 4: a sweep and three `python -m analysis` at once
renamed each other's fixed `best.json.tmp` away and crashed)."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest

from launcher.core.files import replacing, temporary_beside, write_atomic


def _hammer(args: tuple[str, int]) -> int:
    path, writer = args
    for i in range(200):
        write_atomic(Path(path), f"writer {writer} round {i}\n" * 500)
    return writer


def test_concurrent_writers_of_one_file_never_fail_and_leave_one_whole_version(tmp_path):
    target = tmp_path / "best.json"
    with multiprocessing.get_context("fork").Pool(4) as pool:
        assert sorted(pool.map(_hammer, [(str(target), w) for w in range(4)])) == [0, 1, 2, 3]
    lines = target.read_text().splitlines()
    assert len(lines) == 500 and len(set(lines)) == 1  # one writer's whole file, never a mix or a half
    assert [p.name for p in tmp_path.iterdir()] == ["best.json"]  # no temporary file left behind


def test_temporary_names_differ_between_calls_and_stay_beside_the_target(tmp_path):
    target = tmp_path / "plots" / "a.png"
    names = {temporary_beside(target, ".png") for _ in range(50)}
    assert len(names) == 50
    assert all(n.parent == target.parent and n.name.endswith(".png") and n.name.startswith(".a.png.") for n in names)


def test_a_failed_write_keeps_the_old_file_and_removes_its_temporary(tmp_path):
    target = tmp_path / "report.html"
    target.write_text("old")
    with pytest.raises(RuntimeError), replacing(target) as tmp:
        tmp.write_text("half")
        raise RuntimeError("disk full")
    assert target.read_text() == "old" and [p.name for p in tmp_path.iterdir()] == ["report.html"]


def test_mode_is_applied_before_the_file_appears(tmp_path):
    script = write_atomic(tmp_path / "launch.sh", "#!/bin/sh\n", mode=0o755)
    assert script.stat().st_mode & 0o777 == 0o755
