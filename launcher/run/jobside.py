"""What submitit runs on the compute node: the trial's launch script, under a keeper that owns its processes.

Kept tiny and free of the planner's imports (hydra, mlflow, rich): it is unpickled on every node of every job.
The script's output goes to the job's stdout/stderr, which submitit writes into the job folder.

The process submitit starts for the job (local: a child of submitit's controller; SLURM: the task srun starts on
each node) becomes the trial's keeper (launcher/run/reaper.py):
1. it writes its identity (<job>_<task>_keeper.json) BEFORE leaving its process group, so a launcher that finds
   no keeper file knows that nothing of this attempt can be running outside its controller's process group;
2. it starts a new session (a Ctrl-C or SIGKILL sent to the launcher's process group, or a closed terminal, no
   longer reaches the trial: a restarted launcher re-attaches to it) and marks itself a child subreaper;
3. it runs `bash launch.sh` with the TRIAL_MARKER variable and a parent-death signal, waits for it, and enforces
   its own time limit (the local controller that would otherwise do it may have died with the launcher);
4. whatever happens - the script exits, SIGTERM (our cancel, scancel, SLURM's time limit), SIGINT (the local
   controller stopping the job), SIGUSR2 (submitit's time-limit warning, which raises inside this process) - it
   kills and reaps every process left below it, records how the trial ended in the keeper file, and only then
   returns or raises (so submitit's result pickle is written after the trial's processes are gone).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from launcher.run import reaper

POLL_S = 0.2
# SIGINT comes from submitit's local controller, which sends SIGKILL one second later: be quick.
GRACE_S = {"SIGINT": 0.5}
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


class TrialStopped(Exception):
    """The keeper was told to stop the trial (a signal) or the trial reached the keeper's time limit."""

    def __init__(self, why: str, message: str) -> None:
        self.why = why
        super().__init__(message)


def run_trial(script_path: str, time_limit_s: float = 0.0, detach: bool = False) -> dict:
    """submitit's entry point: keep one node's share of a trial. A non-zero exit raises, so submitit records the
    job as failed. `detach` (local executor): leave the launcher's session; under SLURM the task stays where
    slurmstepd put it, so that SLURM's own process tracking (proctrack/pgid included) still covers it."""
    folder, job_id, task = _submitit_job()
    return keep(script_path, reaper.keeper_path(folder, job_id, task), marker=str(folder), time_limit_s=time_limit_s,
                detach=detach)


def _submitit_job() -> tuple[Path, str, int]:
    import submitit

    env = submitit.JobEnvironment()
    return env.paths.folder, env.job_id, env.global_rank


def keep(script_path: str, keeper_file: Path, *, marker: str, time_limit_s: float = 0.0,
         detach: bool = False) -> dict:
    """Run `bash script_path` as a trial whose every process dies with it; see the module docstring."""
    record = reaper.KeeperRecord.of_this_process(marker, time_limit_s)
    record.write(keeper_file)
    if detach and os.getpid() != os.getpgid(0):  # a process-group leader cannot setsid (it is on its own already)
        os.setsid()
    reaper.become_subreaper()
    previous = {sig: signal.signal(sig, _stop) for sig in STOP_SIGNALS}
    quiet = [*previous, signal.SIGUSR2]
    why, exit_code, killed = "exit", None, 0
    try:
        proc = subprocess.Popen(["bash", script_path], stdin=subprocess.DEVNULL,
                                env={**os.environ, reaper.TRIAL_MARKER: marker}, preexec_fn=reaper.die_with_parent)
        exit_code = _wait(proc, record.started_at, time_limit_s)
        proc.returncode = exit_code  # reaped by us (waitpid(-1)), not by Popen
    except TrialStopped as stop:
        why = stop.why
        raise
    except BaseException as exc:  # submitit's SIGUSR2 handler raises here (timed out / requeue)
        why = "time_limit" if "timed-out" in str(exc) else type(exc).__name__
        raise
    finally:
        signal.pthread_sigmask(signal.SIG_BLOCK, quiet)  # nothing interrupts the clean-up
        killed, _ = reaper.kill_descendants(GRACE_S.get(why, reaper.TERM_GRACE_S))
        record.stopped = {"why": why, "exit_code": exit_code, "at": time.time(), "killed": killed}
        record.write(keeper_file)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, quiet)
    if exit_code != 0:
        raise RuntimeError(f"trial script {script_path} exited with code {exit_code}")
    return {"exit_code": 0, "processes_killed_after_exit": killed}


def _stop(signum: int, _frame: object) -> None:
    # The first stop signal wins: the others wait (blocked) until the clean-up is done. A second SIGTERM (the
    # launcher's cancel repeats its signal; scancel sends several) raised inside the clean-up would skip it: the
    # trial's processes left, its end never recorded, and a cancelled trial judged a crash (CI, 28 Nov).
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    name = signal.Signals(signum).name
    raise TrialStopped(name, f"trial stopped by {name} (cancelled)")


def _wait(proc: subprocess.Popen, started_at: float, time_limit_s: float) -> int:
    """Wait for the script, reaping every orphan re-parented to us on the way; its exit code."""
    while True:
        reaped = reaper.reap_children()
        if proc.pid in reaped:
            return reaped[proc.pid]
        if time_limit_s > 0 and time.time() >= started_at + time_limit_s:
            # "timed-out" is how submitit words it: the judge reads this as a time limit, like SLURM's TIMEOUT.
            raise TrialStopped("time_limit", f"parasweep: the trial reached its time limit of {time_limit_s:.0f} s: "
                               "this job is timed-out")
        time.sleep(POLL_S)
