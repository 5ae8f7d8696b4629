"""Submitting and watching trial jobs: submitit's LocalExecutor or SLURM job arrays. All process and SLURM
calls of the launcher live here.

Job state is read without submitit's per-job cache so that a restarted launcher can re-attach to jobs it did not
submit itself: SLURM jobs with ONE `sacct` call for all live jobs per poll; local jobs by their keeper's durable
identity (launcher/run/reaper.py): every local trial runs under a keeper process in its own session, which
outlives a launcher killed with its whole process group, kills every process of the trial when the trial ends, and
writes `<job>_0_keeper.json` (pid + kernel start time) into the job folder. A local job is
- running while its keeper is alive (or, if the keeper was killed, while processes carrying the trial's marker
  variable live on: they are followed until they end, and killed at the time limit);
- finished when submitit's result pickle exists (or the keeper recorded how the trial ended);
- interrupted (LOST) when none of its processes is left and nothing says how it ended: a launcher resubmits it
  without charging an attempt.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import re
import shlex
import shutil
import signal
import subprocess
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from launcher.config.schema import ClusterConfig, ExecutorConfig
from launcher.core.console import Reporter
from launcher.core.errors import ParseError, SubmissionError
from launcher.core.logfile import read_window
from launcher.core.names import ExecutorKind
from launcher.core.states import JobState
from launcher.run import reaper
from launcher.run.jobside import run_trial


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
    state: JobState
    """SLURM's words (PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT, ...), or LOST (launcher.core.states)."""
    exit_code: Optional[int] = None
    nodes: str = ""
    error: str = ""
    """The job's failure text from submitit's result pickle (the remote traceback's last line)."""
    interrupted: bool = False
    """Stopped from outside, not by a failure of its own (its keeper was signalled or vanished): the trial keeps
    its attempt, and a valid result in its log still counts."""

    def __post_init__(self) -> None:
        if not isinstance(self.state, JobState):  # sacct's text (tests, scripted runners)
            object.__setattr__(self, "state", JobState.parse(self.state))

    @property
    def live(self) -> bool:
        return self.state.live


def log_paths(job_dir: Path, job_id: str) -> list[Path]:
    """stdout/stderr files of every task of a job (task 0 first)."""
    return sorted(job_dir.glob(f"{job_id}_*_log.out")) + sorted(job_dir.glob(f"{job_id}_*_log.err"))


def read_logs(paths: Sequence[Path]) -> str:
    """All task logs of a job, task 0 first (rank 0 prints the results), each read as a bounded window (its head
    and tail: launcher.core.logfile) so that a huge log cannot take the launcher's memory. A missing file, or one
    that is not a regular file (a FIFO would block the launcher), adds nothing."""
    texts = []
    for path in paths:
        try:
            texts.append(read_window(Path(path)).data().decode(errors="replace"))
        except (ParseError, OSError):
            continue
    return "\n".join(texts)


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


def controller_setup(marker: str, err_path: Path, user_setup: Sequence[str]) -> list[str]:
    """The shell lines submitit's LocalExecutor runs before a job's controller (`python -m submitit.local._local`):
    its stderr goes to `err_path` in the job folder, and it and every process below it carry the trial's marker
    variable (launcher/run/reaper.py), then the user's executor.setup lines.

    The launcher's own environment and file descriptors are left alone: before, the marker was set in os.environ
    and fd 2 redirected around the submission. The controller runs in the launcher's process group, so a Ctrl-C
    reaches it too; its KeyboardInterrupt traceback lands in the job folder as evidence, not below the launcher's
    one-line message."""
    err_path.parent.mkdir(parents=True, exist_ok=True)
    return [f"exec 2>>{shlex.quote(str(err_path))}", f"export {reaper.TRIAL_MARKER}={shlex.quote(marker)}",
            *user_setup]


class LocalRunner:
    """Trials as local processes (submitit LocalExecutor): one job per trial, the caller limits concurrency.

    Each job runs under a keeper (launcher/run/jobside.py) in its own session: it survives a launcher killed with its
    process group, and a new launcher re-attaches to it through the keeper file in the job folder."""

    name = "local"
    ORPHAN_GRACE_S = 60.0
    """An orphaned trial (its keeper was killed) is killed this long after its time limit."""
    EXIT_WAIT_S = 5.0
    """How long a job whose result pickle is written may take to exit: submitit writes the pickle first, then the
    interpreter prints the uncaught exception (a failed or stopped trial's last log line)."""

    def __init__(self, cfg: ExecutorConfig, jobs_dir: Path, gpus: Optional[list[int]] = None) -> None:
        self.cfg, self.jobs_dir = cfg, jobs_dir
        self.sbatch_calls = 0
        self._procs: dict = {}  # controller Popen objects of jobs this process started (reaped when polled)
        self._exits: dict[str, int] = {}  # job id -> exit code of a controller of ours that has ended
        self._folders: dict[str, Path] = {}  # job id -> job folder, from submit and poll (cancel needs it)
        self.gpus = local_gpus() if gpus is None else gpus
        """This machine's GPU ids (empty on a CPU machine, where each rank is a process on the cores)."""
        self._held: dict[str, list[int]] = {}  # job id -> the GPUs it was given
        self._marked: Optional[dict[str, list[int]]] = None  # marker -> live processes, read once per poll

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

    @property
    def signal_delay_s(self) -> int:
        return min(self.cfg.signal_delay_s, 30)

    def submit(self, requests: Sequence[JobRequest]) -> Submitted:
        from submitit.local.local import LocalExecutor


        done = Submitted()
        self._stop_earlier_attempts({req.key for req in requests})
        for req in requests:
            folder = attempt_folder(self.jobs_dir, req.key, req.attempt)
            devices = self._take_gpus(req.gpus_per_node) if self.gpus else []
            executor = LocalExecutor(folder=str(folder), max_num_timeout=0)
            # gpus_per_node=0 hides every GPU (CUDA_VISIBLE_DEVICES=''): right on a CPU machine only.
            setup = controller_setup(_marker(folder), folder / CONTROLLER_ERR, self.cfg.setup)
            executor.update_parameters(timeout_min=self.cfg.timeout_min, tasks_per_node=1,
                                       signal_delay_s=self.signal_delay_s, setup=setup,
                                       gpus_per_node=len(devices), visible_gpus=devices)
            # The keeper stops the trial when submitit's controller would warn it (USR2): the controller may be
            # gone with the launcher, the keeper is not.
            limit_s = max(1.0, self.cfg.timeout_min * 60 - self.signal_delay_s)
            job = executor.submit(run_trial, str(req.script), limit_s, True)
            done.jobs[req.key] = (str(job.job_id), folder)
            self._procs[str(job.job_id)] = job._process  # type: ignore[attr-defined]  # LocalJob's Popen
            self._folders[str(job.job_id)] = folder
            self._held[str(job.job_id)] = devices
        return done

    def poll(self, jobs: dict[str, Path]) -> dict[str, JobStatus]:
        """Status of each job id (-> its folder)."""
        self._folders.update({job_id: Path(folder) for job_id, folder in jobs.items()})
        self._marked = None  # read /proc at most once per poll, and only if a job needs it
        statuses = {job_id: self._status(job_id, Path(folder)) for job_id, folder in jobs.items()}
        for job_id, status in statuses.items():
            if not status.live:
                self._held.pop(job_id, None)  # its GPUs are free again
        return statuses

    def _status(self, job_id: str, folder: Path) -> JobStatus:
        self._reap(job_id)
        outcome, text = read_result(folder, job_id)
        keeper = reaper.KeeperRecord.read(reaper.keeper_path(folder, job_id))
        if outcome is not None:  # judged from its log next: let it finish writing the log first
            self._await_exit(job_id, keeper)
        if outcome == "success":
            return JobStatus(JobState.COMPLETED, 0)
        if outcome == "error":
            return _ended(keeper, text)
        if keeper is not None and keeper.alive():
            return JobStatus(JobState.RUNNING)
        if keeper is not None and keeper.stopped:  # killed between recording its end and writing the pickle
            return _ended(keeper, "")
        marker = keeper.marker if keeper else _marker(folder)
        # A second look before believing "gone": one scan can miss a process forked during it (reaper.EMPTY_SCANS).
        leftovers = bool(self._leftovers(marker)) or not reaper.confirmed_gone(marker)
        if keeper is None:  # not started yet (its controller is starting it), or never will be
            if leftovers:
                return JobStatus(JobState.PENDING)
            self._reap(job_id, wait_s=1.0)  # no process carries the marker: our controller has ended (or is ending)
            if self._exits.get(job_id, 0) > 0:  # our controller failed by itself (not killed): e.g. a setup line
                return JobStatus(JobState.FAILED, self._exits[job_id], error=f"the job exited with code "
                                 f"{self._exits[job_id]} before the trial started (check executor.setup)")
            return JobStatus(JobState.LOST, error="job process gone before the trial started", interrupted=True)
        if leftovers:  # the keeper was killed, its orphans live on: follow them until they end
            if keeper.time_limit_s and time.time() > keeper.started_at + keeper.time_limit_s + self.ORPHAN_GRACE_S:
                reaper.kill_marked(keeper.marker)
                return JobStatus(JobState.TIMEOUT, error="orphaned trial processes ran past the time limit: timed-out")
            return JobStatus(JobState.RUNNING)
        return JobStatus(JobState.LOST, error="the trial's processes are gone without a result (killed from outside)",
                         interrupted=True)

    def _await_exit(self, job_id: str, keeper: Optional[reaper.KeeperRecord]) -> None:
        """Wait (up to EXIT_WAIT_S) for a job that wrote its result to exit. Read earlier, a stopped trial's log
        ends inside its traceback, with no exception line, and reads as a crash (CI, 28 Nov: a SIGTERM'd sweep)."""
        if keeper is None:
            return
        deadline = time.monotonic() + self.EXIT_WAIT_S
        while keeper.alive() and time.monotonic() < deadline:
            time.sleep(0.02)
        if not keeper.alive():
            self._reap(job_id, wait_s=1.0)  # our controller is the keeper's process: collect it (no zombie)

    def _reap(self, job_id: str, wait_s: float = 0.0) -> None:
        """Collect our own controller once it ended (no zombie left), keeping its exit code."""
        proc = self._procs.get(job_id)
        if proc is None:
            return
        try:
            proc.wait(timeout=wait_s) if wait_s else proc.poll()
        except subprocess.TimeoutExpired:
            return
        if proc.returncode is not None:
            self._exits[job_id] = self._procs.pop(job_id).returncode

    def _leftovers(self, marker: str) -> list[int]:
        if self._marked is None:
            self._marked = reaper.marker_table()
        return self._marked.get(marker, [])

    def _stop_earlier_attempts(self, keys: set[str]) -> int:
        """Before a trial starts again, kill whatever an earlier attempt of it left running (one process-table scan
        for the batch). Its attempt was judged already; a process that outlived it (a keeper killed mid-clean-up)
        would share the machine with the new attempt and falsify both measurements."""
        prefixes = tuple(_marker(self.jobs_dir / f"{key}.a") for key in keys)
        stale = [marker for marker in reaper.marker_table() if marker.startswith(prefixes)]
        return sum(reaper.kill_marked(marker) for marker in stale)

    def stop_unrecorded(self, key: str, attempt: int) -> int:
        """Kill what a launcher started for this attempt but never recorded (it died in between): found by the
        marker of the attempt's folders. Returns how many processes were found."""
        names = (f"{key}.a{attempt}", f"{key}.a{attempt}.")
        return sum(reaper.kill_marked(_marker(folder)) for folder in self.jobs_dir.glob(f"{key}.a{attempt}*")
                   if folder.name == names[0] or folder.name.startswith(names[1]))

    def cancel_all(self, job_ids: Sequence[str]) -> None:
        """Stop several trials (the launcher terminated): every keeper is signalled first, so that their clean-ups
        run side by side, not one after the other."""
        for job_id in job_ids:
            folder = self._folders.get(job_id)
            keeper = reaper.KeeperRecord.read(reaper.keeper_path(folder, job_id)) if folder else None
            if keeper is not None and keeper.alive():
                reaper.signal_all([keeper.pid], signal.SIGTERM)
        for job_id in job_ids:
            self.cancel(job_id)

    def cancel(self, job_id: str) -> None:
        """Stop a trial: SIGTERM its keeper (which kills and reaps the whole trial), then make sure that no process
        carrying the trial's marker is left (the keeper may be gone, or not started yet)."""
        folder = self._folders.get(job_id)
        if folder is None:
            return
        keeper = reaper.KeeperRecord.read(reaper.keeper_path(folder, job_id))
        if keeper is not None and keeper.alive():
            reaper.signal_all([keeper.pid], signal.SIGTERM)
            deadline = time.monotonic() + reaper.TERM_GRACE_S + 5
            while keeper.alive() and time.monotonic() < deadline:
                time.sleep(0.1)
        reaper.kill_marked(keeper.marker if keeper else _marker(folder))
        proc = self._procs.get(job_id)
        if proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=5)


def _ended(keeper: Optional[reaper.KeeperRecord], error_text: str) -> JobStatus:
    """How a local job ended, from submitit's error text and what its keeper recorded."""
    stopped = keeper.stopped if keeper is not None else {}
    why = stopped.get("why", "")
    last = error_text.strip().splitlines()[-1][:500] if error_text.strip() else f"trial ended ({why or 'unknown'})"
    if why in ("SIGTERM", "SIGINT", "SIGHUP"):  # a cancel, a Ctrl-C, the controller stopping it: not the trial's fault
        return JobStatus(JobState.CANCELLED, error=last, interrupted=True)
    if why == "time_limit":
        return JobStatus(JobState.TIMEOUT, error=last)
    if why == "exit" and stopped.get("exit_code") == 0 and not error_text:
        return JobStatus(JobState.COMPLETED, 0)
    code = exit_code_from_error(error_text)
    return JobStatus(JobState.FAILED, code if code is not None else stopped.get("exit_code"), error=last)


def attempt_folder(jobs_dir: Path, key: str, attempt: int) -> Path:
    """A fresh folder per trial attempt (a local job id is a pid, which the system reuses; an interrupted attempt
    keeps its number, so its folder may exist already)."""
    folder = jobs_dir / f"{key}.a{attempt}"
    n = 1
    while folder.exists():
        n += 1
        folder = jobs_dir / f"{key}.a{attempt}.{n}"
    return folder


def _marker(folder: Path) -> str:
    """The trial's marker value: its job folder as submitit spells it on the job side (absolute, not resolved)."""
    return str(Path(folder).expanduser().absolute())


def job_options(cfg: ExecutorConfig, exclude: Iterable[str] = ()) -> dict[str, str]:
    """The sbatch options a trial's job carries besides its shape, partition and time (empty ones left out), as
    sbatch spells them: the array jobs (SlurmRunner) and the preflight's `sbatch --test-only` ask for the same."""
    options = {"account": cfg.account, "qos": cfg.qos, "constraint": cfg.constraint,
               "exclude": ",".join(sorted(set(cfg.exclude_nodes) | set(exclude))),
               "cpus-per-task": str(cfg.cpus_per_task or ""), "mem": f"{cfg.mem_gb}G" if cfg.mem_gb else ""}
    return {k: v for k, v in options.items() if v}


class SlurmRunner:
    """Trials as SLURM job arrays: one `sbatch` per resource shape, throttled with %N."""

    name = "slurm"

    def __init__(self, cfg: ExecutorConfig, cluster: ClusterConfig, jobs_dir: Path,
                 reporter: Optional[Reporter] = None) -> None:
        self.cfg, self.cluster, self.jobs_dir = cfg, cluster, jobs_dir
        self.reporter = reporter or Reporter.for_streams()
        self.sbatch_calls = 0
        self.sacct_calls = 0
        self._sacct_failures = 0
        self._missing: dict[str, int] = {}  # array task -> consecutive polls it was absent from sacct

    def concurrency(self, ranks_per_trial: int) -> int:
        """Trials to have in SLURM at once: everything with executor.queue_all, else a wave of what can run at
        once, so that the launcher picks each next trial after what it has learnt."""
        if self.cfg.queue_all:
            return 1 << 30  # the %N throttle limits what runs
        return self._throttle(-(-ranks_per_trial // max(1, self.cluster.gpus_per_node)))

    def _throttle(self, nodes_per_trial: int) -> int:
        return self.cfg.max_concurrent or max(1, self.cluster.nodes // max(1, nodes_per_trial))

    def _executor(self, nodes: int, gpus_per_node: int, exclude: Sequence[str]):
        from submitit.slurm.slurm import SlurmExecutor

        executor = SlurmExecutor(folder=str(self.jobs_dir / "%j"), max_num_timeout=0)
        throttle = self._throttle(nodes)
        extra = dict(self.cfg.sbatch_args)
        if self.cfg.reservation:
            extra["reservation"] = self.cfg.reservation
        params = dict(partition=self.cluster.partition, nodes=nodes, ntasks_per_node=1, gpus_per_node=gpus_per_node,
                      time=self.cfg.timeout_min, signal_delay_s=self.cfg.signal_delay_s, array_parallelism=throttle,
                      exclusive=self.cfg.exclusive, setup=list(self.cfg.setup), srun_args=list(self.cfg.srun_args),
                      additional_parameters=extra, job_name="parasweep")
        params.update({k.replace("-", "_"): v for k, v in job_options(self.cfg, exclude).items()})
        executor.update_parameters(**params)
        return executor

    def submit(self, requests: Sequence[JobRequest]) -> Submitted:
        """One array per resource shape. A refused array is reported, and the others still go out."""
        groups: dict[tuple, list[JobRequest]] = defaultdict(list)
        for req in requests:
            groups[(req.nodes, req.gpus_per_node, req.exclude_nodes)].append(req)
        done = Submitted()
        for (nodes, gpn, exclude), reqs in groups.items():
            executor = self._executor(nodes, gpn, exclude)
            try:
                scripts = [str(r.script) for r in reqs]
                jobs = _submitted(lambda ex=executor, s=scripts: ex.map_array(run_trial, s),
                                  f"sbatch refused an array of {len(reqs)} trials ({nodes} node(s) x {gpn} GPUs on "
                                  f"partition {self.cluster.partition!r})")
            except SubmissionError as exc:  # this array only: say what and why, the others still go out
                done.refused.update({r.key: str(exc) for r in reqs})
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
            return {job_id: JobStatus(JobState.PENDING) for job_id in jobs}  # unknown: keep waiting, ask again
        self._sacct_failures = 0
        table = parse_sacct(proc.stdout)
        known_bases = {jid.split("_")[0] for jid in table}
        # An array sacct still lists under its bare id ("370|PENDING", for the seconds before the scheduler splits
        # it into tasks, longer on a busy controller) holds every task of it: they are pending, not gone.
        whole_pending = {jid for jid, st in table.items() if "_" not in jid and st.live}
        out = {}
        for job_id, folder in jobs.items():
            status = table.get(job_id)
            base = job_id.split("_")[0]
            missing = status is None and base in known_bases and base not in whole_pending
            self._missing[job_id] = self._missing.get(job_id, 0) + 1 if missing else 0
            if missing and self._missing[job_id] >= 2:
                # sacct lists every live element of an array it knows (pending ones as 12_[3-7]); an element
                # absent from two polls in a row was cancelled while pending, which Slurm does not record.
                status = JobStatus(JobState.CANCELLED, error="array task cancelled while pending (not in sacct)")
            elif status is None:
                status = JobStatus(JobState.PENDING)  # not in sacct yet: just submitted
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
            self.reporter.warn(f"sacct failed ({self._sacct_failures} poll(s) in a row): "
                               f"{stderr.strip().splitlines()[-1] if stderr.strip() else 'no message'}; jobs keep "
                               "their last known state until it answers (is slurmdbd up?)")

    def stop_unrecorded(self, key: str, attempt: int) -> int:
        """An array submitted by a launcher that died before recording its ids cannot be told from other
        parasweep jobs here (same job name): nothing is stopped; `squeue --me` shows them."""
        return 0

    def cancel(self, job_id: str) -> None:
        subprocess.run(["scancel", job_id], capture_output=True, check=False)

    def cancel_all(self, job_ids: Sequence[str]) -> None:
        """One scancel for all of them (the launcher terminated: SLURM's KillWait leaves it seconds)."""
        if job_ids:
            subprocess.run(["scancel", *job_ids], capture_output=True, check=False)


def _submitted(submit, what: str):
    """submit(), with what submitit and the system can raise for a refused or failed submission (sbatch's error,
    a missing command, a reply submitit cannot parse) turned into one SubmissionError naming `what`; anything else
    is a bug and propagates."""
    from submitit.core.utils import FailedSubmissionError, UncompletedJobError

    try:
        return submit()
    except (UncompletedJobError, FailedSubmissionError, subprocess.SubprocessError, OSError) as exc:
        raise SubmissionError(f"{what}: {str(exc).strip()[:400]}") from exc


def parse_sacct(text: str) -> dict[str, JobStatus]:
    """`sacct -X -n --parsable2 -o JobID,State,ExitCode,NodeList` lines -> status per job id (arrays expanded)."""
    out = {}
    for line in text.splitlines():
        parts = line.strip().split("|")
        if len(parts) < 4 or not parts[0]:
            continue
        job_id, state, exit_code, nodes = parts[:4]
        code = int(exit_code.split(":")[0]) if exit_code and exit_code.split(":")[0].isdigit() else None
        for jid in _expand_array_id(job_id):
            out[jid] = JobStatus(JobState.parse(state), code, nodes)  # "CANCELLED by 0" -> CANCELLED
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
    return [i for i, _ in enumerate(row for row in listing.splitlines() if row.startswith("GPU "))]


def make_runner(cfg: ExecutorConfig, cluster: ClusterConfig, jobs_dir: Path,
                reporter: Optional[Reporter] = None) -> LocalRunner | SlurmRunner:
    jobs_dir.mkdir(parents=True, exist_ok=True)
    if cfg.name is ExecutorKind.slurm:
        return SlurmRunner(cfg, cluster, jobs_dir, reporter)
    return LocalRunner(cfg, jobs_dir)
