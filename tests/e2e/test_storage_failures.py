"""A full disk or a read-only sweep folder mid-run: one message, a non-zero exit, the ledger intact, and the same
command resumes. Simulated in-process (writes that fail with ENOSPC / sqlite's "disk is full") and for real (a
small tmpfs that fills up, then is remounted read-only) in a private mount namespace."""

from __future__ import annotations

import errno
import pydoc
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import REPO
from proc_table import trial_processes
from test_resume_processes import sweep_args

from launcher.__main__ import main


def ledger_rows(folder: Path) -> list[tuple]:
    db = sqlite3.connect(folder / "ledger.sqlite")
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    rows = db.execute("SELECT state, attempts FROM trials").fetchall()
    db.close()
    return rows


def fail_on_call(n: int, exc: BaseException, real):
    calls = {"n": 0}

    def wrapper(*args, **kwargs):
        calls["n"] += 1
        if calls["n"] == n:
            raise exc
        return real(*args, **kwargs)

    return wrapper


@pytest.mark.parametrize("target, exc, needle", [
    ("launcher.run.trial_files.write", OSError(errno.ENOSPC, "No space left on device", "sweeps/tiny/trials/x"),
     "the disk is full"),
    ("launcher.run.ledger.Ledger.update", sqlite3.OperationalError("database or disk is full"), "disk is full"),
    ("launcher.run.trial_files.write", PermissionError(errno.EROFS, "Read-only file system", "sweeps/tiny"),
     "read-only"),
])
def test_a_failing_write_mid_run_is_one_message_and_the_same_command_resumes(in_tmp, monkeypatch, capsys, target,
                                                                             exc, needle):
    args = sweep_args(in_tmp, seconds=0.5)
    real = pydoc.locate(target)
    monkeypatch.setattr(target, fail_on_call(3, exc, real))
    assert main(args) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err and "run the same command again" in err, err
    folder = in_tmp / "sweeps" / "tiny"
    assert len(ledger_rows(folder)) == 3  # readable, consistent
    monkeypatch.setattr(target, real)
    assert main(args) == 0
    rows = ledger_rows(folder)
    assert [s for s, _ in rows] == ["ok"] * 3 and all(a == 1 for _, a in rows), rows  # retry.max_attempts=1
    assert trial_processes(in_tmp / "sweeps") == {}


# -- for real: a tmpfs in a private mount namespace -------------------------------------------------------------
DRIVER = r"""
set -u
mount -t tmpfs -o size=2m tmpfs "$DISK" || exit 90
mkdir -p "$DISK/work"
cd "$DISK/work"
run() { "$PY" -m launcher "$@" sweep.root_dir="$DISK/work/sweeps"; }
# 1. the disk fills up while trials run
run "${ARGS[@]}" 2> "$OUT/err1" > /dev/null &
pid=$!
until "$PY" -c "import sqlite3,sys; sys.exit(0 if sqlite3.connect('$DISK/work/sweeps/tiny/ledger.sqlite').execute(\"SELECT count(*) FROM trials WHERE state='running'\").fetchone()[0] else 1)" 2>/dev/null; do
  kill -0 $pid 2>/dev/null || break; sleep 0.2; done
dd if=/dev/zero of="$DISK/filler" bs=64k 2>/dev/null
wait $pid; echo $? > "$OUT/rc1"
# 2. room again, but the folder is read-only (once the trials of run 1, which go on, have ended: a file open for
#    writing keeps a remount from succeeding)
rm -f "$DISK/filler"
until "$PY" -c "import sys; from launcher.run.reaper import marker_table; sys.exit(any(m.startswith('$DISK') for m in marker_table()))"; do
  sleep 0.2; done
mount -o remount,ro "$DISK" || exit 91
run "${ARGS[@]}" 2> "$OUT/err2" > /dev/null; echo $? > "$OUT/rc2"
# 3. writable again: the same command resumes
mount -o remount,rw "$DISK"
run "${ARGS[@]}" 2> "$OUT/err3" > /dev/null; echo $? > "$OUT/rc3"
cp -r "$DISK/work/sweeps" "$OUT/sweeps"
"""


def namespace_prefix() -> list[str] | None:
    """unshare as root, or with a user namespace (--map-root-user) otherwise; None if neither can mount."""
    if shutil.which("unshare") is None:
        return None
    for prefix in (["unshare", "--mount", "--propagation", "private"],
                   ["unshare", "--user", "--map-root-user", "--mount", "--propagation", "private"]):
        probe = subprocess.run([*prefix, "sh", "-c", "mount -t tmpfs -o size=1m tmpfs /mnt"], capture_output=True)
        if probe.returncode == 0:
            return prefix
    return None


@pytest.mark.slow
def test_a_full_then_read_only_disk_for_real(tmp_path):
    prefix = namespace_prefix()
    if prefix is None:
        pytest.skip("cannot mount a tmpfs here (no unshare, or neither root nor user namespaces)")
    out, disk = tmp_path / "out", tmp_path / "disk"
    out.mkdir()
    disk.mkdir()
    args = " ".join(f"'{a}'" for a in sweep_args(tmp_path, seconds=2))
    script = f"ARGS=({args})\n" + DRIVER
    env = {"DISK": str(disk), "OUT": str(out), "PY": sys.executable, "PYTHONPATH": str(REPO),
           "PATH": "/usr/bin:/bin:/usr/sbin:/sbin"}
    proc = subprocess.run([*prefix, "bash", "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rc = [int((out / f"rc{i}").read_text()) for i in (1, 2, 3)]
    errs = [(out / f"err{i}").read_text().strip() for i in (1, 2, 3)]
    assert rc[0] != 0 and len(errs[0].splitlines()) == 1 and "full" in errs[0], errs[0]
    assert rc[1] != 0 and len(errs[1].splitlines()) == 1 and "read-only" in errs[1].lower(), errs[1]
    assert rc[2] == 0, errs[2]
    rows = ledger_rows(out / "sweeps" / "tiny")
    assert [s for s, _ in rows] == ["ok"] * 3, rows
