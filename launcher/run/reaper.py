"""A trial owns its processes: a per-trial subreaper (the "keeper") and the process-table helpers around it.

Why a subreaper: a trial's processes are the launch script, torchrun (or DeepSpeed's runner), every rank, and
whatever they start. torchrun puts each rank in its own session (`start_new_session=True` in
torch.distributed.elastic), so killing the script's process group misses the ranks, and a double fork
(`( setsid prog & )`) leaves a process whose parent is init, outside any tree walked from the script. The job-side
process that runs the trial script therefore marks itself a child subreaper (`prctl(PR_SET_CHILD_SUBREAPER)`,
Linux >= 3.4, no privileges needed): every orphan below it - including one that called `setsid` or double-forked -
is re-parented to it instead of to init, so "every descendant of the keeper" is exactly "every process of the
trial", and the keeper kills and reaps all of them when the trial ends (normally, at its time limit, or when it is
cancelled). A cgroup would do the same but needs privileges a login node or a SLURM job rarely grants.

Durable identity: the keeper writes `<job>_<task>_keeper.json` into the job folder (pid + kernel start time + boot
id, so a recycled pid is never mistaken for it). A launcher started again reads it to tell "alive" (re-attach)
from "gone" (judge the log, maybe resubmit). Every process of a trial also inherits the environment variable
TRIAL_MARKER (= the job folder): if the keeper itself is killed with SIGKILL, its orphans still carry the marker,
and the launcher finds and kills them by it (`marked_processes`).

Job side: imports only the standard library (it runs on every node of every job).
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import socket
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Optional

from launcher.core import strict_json
from launcher.core.files import write_atomic

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
PR_SET_CHILD_SUBREAPER = 36
TRIAL_MARKER = "PARASWEEP_TRIAL"
"""Environment variable every process of a trial inherits; its value names the trial's job folder."""
TERM_GRACE_S = 5.0
"""SIGTERM first (torchrun forwards it to the ranks, which may flush logs), SIGKILL what is left after this."""
EMPTY_SCANS = 2
"""Scans of the process table that must find nothing, one poll apart, before "nothing is left" is believed. One
scan lists /proc and then reads each process: a parent that exits after the listing, having forked a child
created after it (a double fork's middle process), is missed along with that child. The next scan finds the
child, re-parented by then."""


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, ctypes.c_ulong(value), ctypes.c_ulong(0), ctypes.c_ulong(0), ctypes.c_ulong(0)) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"prctl({option}, {value}): {os.strerror(errno)}")


def become_subreaper() -> None:
    """Orphans below this process are re-parented to it (not to init): no descendant can escape the tree."""
    _prctl(PR_SET_CHILD_SUBREAPER, 1)


def die_with_parent() -> None:
    """For a child's preexec_fn: SIGKILL it if its parent (the keeper) dies. Survives exec (not setuid binaries),
    so the launch script and the torchrun it execs go down with a keeper killed by SIGKILL."""
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


# -- the process table -----------------------------------------------------------------------------------------
def _stat_fields(pid: int) -> Optional[list[str]]:
    """Fields of /proc/PID/stat after the command name (state is [0], ppid [1], start time [19])."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def start_ticks(pid: int) -> Optional[int]:
    """The process's start time in clock ticks since boot (None if there is no such process)."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields else None


def is_zombie(pid: int) -> bool:
    fields = _stat_fields(pid)
    return fields is None or fields[0] in ("Z", "X")


def boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def children_by_parent() -> dict[int, list[int]]:
    """One pass over /proc: parent pid -> its children (a snapshot; processes come and go meanwhile)."""
    table: dict[int, list[int]] = {}
    for pid in _pids():
        fields = _stat_fields(pid)
        if fields:
            table.setdefault(int(fields[1]), []).append(pid)
    return table


def descendants(pid: int) -> list[int]:
    """Every process below `pid` (children first), from one /proc snapshot."""
    table = children_by_parent()
    found, frontier = [], [pid]
    while frontier:
        frontier = [child for parent in frontier for child in table.get(parent, [])]
        found += frontier
    return found


def marked_processes(marker: str, name: str = TRIAL_MARKER) -> list[int]:
    """Processes whose environment (as it was at their exec) holds NAME=marker: the processes of one trial, even
    after their keeper died."""
    return marker_table(name).get(marker, [])


def marker_table(name: str = TRIAL_MARKER) -> dict[str, list[int]]:
    """One pass over /proc: marker value -> live processes carrying it. Other users' processes are unreadable and
    skipped (they cannot be ours)."""
    prefix = f"{name}=".encode()
    me = os.getpid()
    table: dict[str, list[int]] = {}
    for pid in _pids():
        if pid == me:
            continue
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        for item in environ.split(b"\0"):
            if item.startswith(prefix):
                if not is_zombie(pid):
                    table.setdefault(item[len(prefix):].decode(errors="replace"), []).append(pid)
                break
    return table


def signal_all(pids: Iterable[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def reap_children() -> dict[int, int]:
    """Collect every exited child of this process without blocking: pid -> exit code (-N: killed by signal N)."""
    reaped: dict[int, int] = {}
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped
        if pid == 0:
            return reaped
        reaped[pid] = os.waitstatus_to_exitcode(status)


def kill_descendants(grace_s: float = TERM_GRACE_S, poll_s: float = 0.05) -> tuple[int, dict[int, int]]:
    """In a subreaper: SIGTERM every descendant, SIGKILL those still alive after `grace_s`, and repeat until none
    is left (a process forking meanwhile has its child found on the next pass). Every orphan comes back to us,
    so the loop also reaps them. Returns (processes signalled, exit codes of the children reaped)."""
    me = os.getpid()
    signalled: set[int] = set()
    reaped: dict[int, int] = {}
    deadline = time.monotonic() + grace_s
    empty_scans = 0
    while empty_scans < EMPTY_SCANS:
        reaped.update(reap_children())
        alive = [p for p in descendants(me) if not is_zombie(p)]
        empty_scans = 0 if alive else empty_scans + 1
        late = time.monotonic() >= deadline
        signal_all([p for p in alive if late or p not in signalled], signal.SIGKILL if late else signal.SIGTERM)
        signalled.update(alive)
        time.sleep(poll_s)
    reaped.update(reap_children())
    return len(signalled), reaped


def kill_marked(marker: str, grace_s: float = 2.0, poll_s: float = 0.1) -> int:
    """From outside the trial (the launcher): SIGTERM, then SIGKILL, every process carrying the trial's marker,
    until none is left or 2 x grace has passed. Returns how many were found."""
    found: set[int] = set()
    deadline = time.monotonic() + grace_s
    give_up = deadline + grace_s
    empty_scans = 0
    while empty_scans < EMPTY_SCANS and time.monotonic() < give_up:
        alive = marked_processes(marker)
        empty_scans = 0 if alive else empty_scans + 1
        late = time.monotonic() >= deadline
        signal_all([p for p in alive if late or p not in found], signal.SIGKILL if late else signal.SIGTERM)
        found.update(alive)
        time.sleep(poll_s)
    return len(found)


def confirmed_gone(marker: str, poll_s: float = 0.05) -> bool:
    """No process carries `marker`, in EMPTY_SCANS scans `poll_s` apart (see EMPTY_SCANS)."""
    for scan in range(EMPTY_SCANS):
        if scan:
            time.sleep(poll_s)
        if marked_processes(marker):
            return False
    return True


# -- the keeper's durable identity -----------------------------------------------------------------------------
@dataclass
class KeeperRecord:
    """What `<job>_<task>_keeper.json` holds: who keeps the trial, and (once it ended) how it ended."""

    pid: int
    start_ticks: int
    boot_id: str
    host: str
    marker: str
    started_at: float
    time_limit_s: float = 0.0
    """The keeper's own limit (0: none; SLURM enforces the job's)."""
    stopped: dict = field(default_factory=dict)
    """Once ended: {"why": "exit"|"SIGTERM"|"SIGINT"|"time_limit"|..., "exit_code": N, "at": t, "killed": n}."""

    @classmethod
    def of_this_process(cls, marker: str, time_limit_s: float = 0.0) -> KeeperRecord:
        pid = os.getpid()
        return cls(pid, start_ticks(pid) or 0, boot_id(), socket.gethostname(), marker, time.time(), time_limit_s)

    def alive(self) -> bool:
        """Is the keeper still running? Only answerable on its own machine (the local executor's case); a record
        from another boot (the machine restarted) or another host counts as gone."""
        if self.boot_id != boot_id() or self.host != socket.gethostname():
            return False
        return start_ticks(self.pid) == self.start_ticks and not is_zombie(self.pid)

    def write(self, path: Path) -> None:
        # a reader sees the old record or the new one
        write_atomic(path, strict_json.dumps(asdict(self), sort_keys=True))

    @classmethod
    def read(cls, path: Path) -> Optional[KeeperRecord]:
        try:
            data = json.loads(path.read_text())
            return cls(**data)
        except (OSError, ValueError, TypeError):
            return None


def keeper_path(folder: Path, job_id: str, task: int = 0) -> Path:
    """Next to submitit's own per-task files (<job>_<task>_log.out, <job>_<task>_result.pkl)."""
    return Path(folder) / f"{job_id}_{task}_keeper.json"
