"""Submitting and watching trial jobs: submitit's LocalExecutor or SLURM job arrays. All process and SLURM
calls of the launcher live here.

Job state is read without submitit's per-job cache so that a restarted launcher can re-attach to jobs it did not
submit itself: local jobs by their controller pid, SLURM jobs with ONE `sacct` call for all live jobs per poll.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator, Optional, Sequence

from launcher.schema import ClusterConfig, ExecutorConfig

LIVE_SLURM_STATES = {"PENDING", "RUNNING", "REQUEUED", "RESIZING", "SUSPENDED", "CONFIGURING", "COMPLETING"}


@dataclass(frozen=True)
class JobRequest:
    key: str
    """The trial's config hash."""
    script: Path
    nodes: int
    gpus_per_node: int
    exclude_nodes: tuple[str, ...] = ()
    attempt: int = 1


@dataclass
class Submitted:
    """What a submission call achieved: job id and job folder per trial, and why the others were refused."""

    jobs: dict = field(default_factory=dict)
    """key -> (job id, job folder)."""
    refused: dict = field(default_factory=dict)
    """key -> sbatch's error (a refused array does not stop the others)."""


@dataclass(frozen=True)
class JobStatus:
    state: str
    """SLURM-style: PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT, NODE_FAIL, PREEMPTED, OUT_OF_MEMORY, LOST."""
    exit_code: Optional[int] = None
    nodes: str = ""
    error: str = ""
    """The job's failure text from submitit's result pickle (the remote traceback's last line)."""

    @property
    def live(self) -> bool:
        return self.state in LIVE_SLURM_STATES


def log_paths(job_dir: Path, job_id: str) -> list[Path]:
    """stdout/stderr files of every task of a job (task 0 first)."""
    return sorted(job_dir.glob(f"{job_id}_*_log.out")) + sorted(job_dir.glob(f"{job_id}_*_log.err"))


def read_result(job_dir: Path, job_id: str) -> tuple[Optional[str], str]:
    """submitit's result pickle of task 0: ('success'|'error'|None, text)."""
    path = job_dir / f"{job_id}_0_result.pkl"
    if not path.is_file():
        return None, ""
    try:
        with path.open("rb") as fh:
            outcome, payload = pickle.load(fh)
    except (EOFError, pickle.UnpicklingError, ValueError) as exc:  # written by a killed job: treat as missing
        return None, f"unreadable result pickle: {exc}"
    return outcome, str(payload)


def exit_code_from_error(text: str) -> Optional[int]:
    match = re.search(r"exited with code (-?\d+)", text)
    return int(match.group(1)) if match else None


CONTROLLER_ERR = "controller.err"


@contextlib.contextmanager
def children_stderr_to(path: Path) -> Iterator[None]:
    """Processes started inside the block write their stderr (fd 2) to `path`; the launcher's own is restored.

    submitit's LocalExecutor starts each job's controller (`python -m submitit.local._local`) with the launcher's
    stderr and in its process group, so a Ctrl-C reaches the controller too, and its KeyboardInterrupt traceback
    used to land below the launcher's one-line message. In the job folder it is evidence instead of noise.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with path.open("ab") as handle:
            os.dup2(handle.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


class LocalRunner:
    """Trials as local processes (submitit LocalExecutor): one job per trial, the caller limits concurrency."""

    name = "local"

    def __init__(self, cfg: ExecutorConfig, jobs_dir: Path, gpus: Optional[list[int]] = None) -> None:
        self.cfg, self.jobs_dir = cfg, jobs_dir
        self.sbatch_calls = 0
        self._procs: dict = {}  # controller Popen objects of jobs this process started (reaped when polled)
        self.gpus = local_gpus() if gpus is None else gpus
        """This machine's GPU ids (empty on a CPU machine, where each rank is a process on the cores)."""
        self._held: dict[str, list[int]] = {}  # job id -> the GPUs it was given

    def concurrency(self, ranks_per_trial: int) -> int:
        if self.cfg.max_concurrent:
            return self.cfg.max_concurrent
        if self.gpus:  # one rank per GPU: trials must not share devices
            return max(1, len(self.gpus) // max(1, ranks_per_trial))
        # Each rank is a busy process: more trials than cores would measure the scheduler, not the layout.
        return max(1, (os.cpu_count() or 1) // max(1, ranks_per_trial))

    def _take_gpus(self, n: int) -> list[int]:
        busy = {g for held in self._held.values() for g in held}
        free = [g for g in self.gpus if g not in busy]
        return free[:n] if len(free) >= n else []

    def submit(self, requests: Sequence[JobRequest]) -> Submitted:
        from submitit.local.local import LocalExecutor

        from launcher.run.jobside import run_trial

        done = Submitted()
        for req in requests:
            # One folder per trial attempt: a local job id is a pid, which the system reuses.
            folder = self.jobs_dir / f"{req.key}.a{req.attempt}"
            devices = self._take_gpus(req.gpus_per_node) if self.gpus else []
            executor = LocalExecutor(folder=str(folder), max_num_timeout=0)
            # gpus_per_node=0 hides every GPU (CUDA_VISIBLE_DEVICES=''): right on a CPU machine only.
            executor.update_parameters(timeout_min=self.cfg.timeout_min, tasks_per_node=1,
                                       signal_delay_s=min(self.cfg.signal_delay_s, 30), setup=list(self.cfg.setup),
                                       gpus_per_node=len(devices), visible_gpus=devices)
            with children_stderr_to(folder / CONTROLLER_ERR):
                job = executor.submit(run_trial, str(req.script))
            done.jobs[req.key] = (str(job.job_id), folder)
            self._procs[str(job.job_id)] = job._process
            self._held[str(job.job_id)] = devices
        return done

    def poll(self, jobs: dict[str, Path]) -> dict[str, JobStatus]:
        """Status of each job id (-> its folder)."""
        statuses = {job_id: self._status(job_id, folder) for job_id, folder in jobs.items()}
        for job_id, status in statuses.items():
            if not status.live:
                self._held.pop(job_id, None)  # its GPUs are free again
        return statuses

    def _status(self, job_id: str, folder: Path) -> JobStatus:
        proc = self._procs.get(job_id)
        if proc is not None and proc.poll() is not None:  # reap our own child so it is not left a zombie
            self._procs.pop(job_id)
        alive = _is_submitit_controller(int(job_id))
        outcome, text = read_result(folder, job_id)
        if outcome == "success":
            return JobStatus("COMPLETED", 0)
        if outcome == "error":
            return JobStatus("FAILED", exit_code_from_error(text), error=text.strip().splitlines()[-1][:500])
        if alive:
            return JobStatus("RUNNING")
        return JobStatus("LOST", error="job process gone without a result (killed)")

    def cancel(self, job_id: str) -> None:
        _kill_tree(int(job_id))


class SlurmRunner:
    """Trials as SLURM job arrays: one `sbatch` per resource shape, throttled with %N."""

    name = "slurm"

    def __init__(self, cfg: ExecutorConfig, cluster: ClusterConfig, jobs_dir: Path) -> None:
        self.cfg, self.cluster, self.jobs_dir = cfg, cluster, jobs_dir
        self.sbatch_calls = 0
        self.sacct_calls = 0
        self._sacct_failures = 0
        self._missing: dict[str, int] = {}  # array task -> consecutive polls it was absent from sacct

    def concurrency(self, ranks_per_trial: int) -> int:
        return 1 << 30  # SLURM queues everything; the %N throttle limits what runs

    def _executor(self, nodes: int, gpus_per_node: int, exclude: Sequence[str]):
        from submitit.slurm.slurm import SlurmExecutor

        executor = SlurmExecutor(folder=str(self.jobs_dir / "%j"), max_num_timeout=0)
        throttle = self.cfg.max_concurrent or max(1, self.cluster.nodes // max(1, nodes))
        extra = dict(self.cfg.sbatch_args)
        if self.cfg.reservation:
            extra["reservation"] = self.cfg.reservation
        params = dict(partition=self.cluster.partition, nodes=nodes, ntasks_per_node=1, gpus_per_node=gpus_per_node,
                      time=self.cfg.timeout_min, signal_delay_s=self.cfg.signal_delay_s, array_parallelism=throttle,
                      exclusive=self.cfg.exclusive, setup=list(self.cfg.setup), srun_args=list(self.cfg.srun_args),
                      additional_parameters=extra, job_name="parasweep")
        optional = dict(account=self.cfg.account, qos=self.cfg.qos, constraint=self.cfg.constraint,
                        exclude=",".join(sorted(set(self.cfg.exclude_nodes) | set(exclude))),
                        cpus_per_task=self.cfg.cpus_per_task, mem=f"{self.cfg.mem_gb}G" if self.cfg.mem_gb else "")
        params.update({k: v for k, v in optional.items() if v})
        executor.update_parameters(**params)
        return executor

    def submit(self, requests: Sequence[JobRequest]) -> Submitted:
        """One array per resource shape. A refused array is reported, and the others still go out."""
        from launcher.run.jobside import run_trial

        groups: dict[tuple, list[JobRequest]] = defaultdict(list)
        for req in requests:
            groups[(req.nodes, req.gpus_per_node, req.exclude_nodes)].append(req)
        done = Submitted()
        for (nodes, gpn, exclude), reqs in groups.items():
            executor = self._executor(nodes, gpn, exclude)
            try:
                jobs = executor.map_array(run_trial, [str(r.script) for r in reqs])
            except Exception as exc:  # sbatch refused this array: say what and why
                why = (f"sbatch refused an array of {len(reqs)} trials ({nodes} node(s) x {gpn} GPUs on partition "
                       f"{self.cluster.partition!r}): {str(exc).strip()[:400]}")
                done.refused.update({r.key: why for r in reqs})
                continue
            self.sbatch_calls += 1
            done.jobs.update({r.key: (str(j.job_id), self.jobs_dir / str(j.job_id)) for r, j in zip(reqs, jobs)})
        return done

    def poll(self, jobs: dict[str, Path]) -> dict[str, JobStatus]:
        """Status of each job id (-> its folder), from ONE sacct call for all of them."""
        if not jobs:
            return {}
        bases = sorted({j.split("_")[0] for j in jobs})
        self.sacct_calls += 1
        proc = subprocess.run(["sacct", "-X", "-n", "--parsable2", "-o", "JobID,State,ExitCode,NodeList",
                               "-j", ",".join(bases)], capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            self._sacct_failed(proc.stderr)
            return {job_id: JobStatus("PENDING") for job_id in jobs}  # unknown: keep waiting, ask again
        self._sacct_failures = 0
        table = parse_sacct(proc.stdout)
        known_bases = {jid.split("_")[0] for jid in table}
        out = {}
        for job_id, folder in jobs.items():
            status = table.get(job_id)
            missing = status is None and job_id.split("_")[0] in known_bases
            self._missing[job_id] = self._missing.get(job_id, 0) + 1 if missing else 0
            if missing and self._missing[job_id] >= 2:
                # sacct lists every live element of an array it knows (pending ones as 12_[3-7]); an element
                # absent from two polls in a row was cancelled while pending, which Slurm does not record.
                status = JobStatus("CANCELLED", error="array task cancelled while pending (not in sacct)")
            elif status is None:
                status = JobStatus("PENDING")  # not in sacct yet: just submitted
            if not status.live:
                outcome, text = read_result(folder, job_id)
                if outcome == "error":
                    status = JobStatus(status.state, exit_code_from_error(text) or status.exit_code, status.nodes,
                                       text.strip().splitlines()[-1][:500])
            out[job_id] = status
        return out

    def _sacct_failed(self, stderr: str) -> None:
        self._sacct_failures += 1
        if self._sacct_failures in (1, 10, 100):  # say it, without flooding the log on every poll
            print(f"warning: sacct failed ({self._sacct_failures} poll(s) in a row): "
                  f"{stderr.strip().splitlines()[-1] if stderr.strip() else 'no message'}; jobs keep their last "
                  "known state until it answers (is slurmdbd up?)", file=sys.stderr, flush=True)

    def cancel(self, job_id: str) -> None:
        subprocess.run(["scancel", job_id], capture_output=True, check=False)


def parse_sacct(text: str) -> dict[str, JobStatus]:
    """`sacct -X -n --parsable2 -o JobID,State,ExitCode,NodeList` lines -> status per job id (arrays expanded)."""
    out = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) < 4 or not parts[0]:
            continue
        job_id, state, exit_code, nodes = parts[:4]
        state = state.split()[0]  # "CANCELLED by 0" -> CANCELLED
        code = int(exit_code.split(":")[0]) if exit_code and exit_code.split(":")[0].isdigit() else None
        for jid in _expand_array_id(job_id):
            out[jid] = JobStatus(state, code, nodes)
    return out


def _expand_array_id(job_id: str) -> list[str]:
    """'12_[0-3,7%2]' (pending array tasks) -> ['12_0', ..., '12_3', '12_7']."""
    match = re.fullmatch(r"(\d+)_\[([^\]]+)\]", job_id)
    if not match:
        return [job_id]
    base, spec = match.group(1), match.group(2).split("%")[0]
    ids = []
    for part in spec.split(","):
        lo, _, hi = part.partition("-")
        ids += [f"{base}_{i}" for i in range(int(lo), int(hi or lo) + 1)]
    return ids


def local_gpus() -> list[int]:
    """GPU ids a local job may use: CUDA_VISIBLE_DEVICES if set, else what `nvidia-smi -L` lists (no torch import)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [int(v) for v in visible.split(",") if v.strip().isdigit()]
    if shutil.which("nvidia-smi") is None:
        return []
    listing = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False).stdout
    return [i for i, line in enumerate(l for l in listing.splitlines() if l.startswith("GPU "))]


def make_runner(cfg: ExecutorConfig, cluster: ClusterConfig, jobs_dir: Path):
    jobs_dir.mkdir(parents=True, exist_ok=True)
    if cfg.name == "slurm":
        return SlurmRunner(cfg, cluster, jobs_dir)
    return LocalRunner(cfg, jobs_dir)


# -- local process helpers -------------------------------------------------------------------------------------
def _is_submitit_controller(pid: int) -> bool:
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
    return b"submitit" in cmdline


def _children(pid: int) -> list[int]:
    kids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid:
            kids.append(int(entry.name))
    return kids


def _kill_tree(pid: int, grace_s: float = 3.0) -> None:
    """SIGTERM the job's whole process tree (torchrun and its ranks), then SIGKILL what is left."""
    tree, frontier = [pid], [pid]
    while frontier:
        frontier = [c for p in frontier for c in _children(p)]
        tree += frontier
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in reversed(tree):
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
        deadline = time.time() + grace_s
        while time.time() < deadline and any(Path(f"/proc/{p}").exists() and not _is_zombie(p) for p in tree):
            time.sleep(0.1)


def _is_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True
