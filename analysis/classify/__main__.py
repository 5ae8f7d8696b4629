"""`python -m analysis.classify LOG|JOB_DIR...`: why did this job end? For any job log, from any framework.

Prints, per log, the kind (ok, oom, comm_error, ...), the reason, the evidence (line numbers and lines) and, when
the log has iterations or final speed metrics, the steady-state step time, throughput, TFLOPs and peak memory.
Works on a log alone; --exit-code and --slurm-state (sacct's State) sharpen the verdict when known.
A job folder (a sweep's sweeps/<name>/jobs/<trial>.a<attempt>/ or SLURM's jobs/<job id>/) is judged as the sweep
judges it: all its task logs (.out and .err) read together (analysis.logs.joblog), one verdict per job, with the
exit status its keeper recorded unless --exit-code is given; the evidence names the file each line is in. The
kind is the same in text and in --json: one judgement, two renderings.
Exit status: 0 whatever the verdicts; 2 for a usage error or a file that cannot be read (one line on stderr).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from analysis.logs.joblog import JobLog
from analysis.logs.outcome import Measured, Outcome, measurements, trial_outcome
from launcher.core import strict_json
from launcher.core.errors import ParseError
from launcher.core.logfile import read_window
from launcher.core.names import BackendName
from launcher.run.executor import log_paths
from launcher.run.reaper import KeeperRecord, keeper_path

EXAMPLES = """\
examples:
  python -m analysis.classify slurm-4242.out
  python -m analysis.classify logs/*.log --exit-code 1 --slurm-state FAILED
  python -m analysis.classify sweeps/tiny/jobs/1234/1234_0_log.err --backend torch --json | jq .kind
  python -m analysis.classify sweeps/tiny/jobs/8837e147865a.a1     # a job folder: its .out and .err together
"""
JSON_KEYS = ("file", "kind", "reason", "evidence_lines", "step_time_s", "tokens_per_s", "tflops_per_gpu",
             "peak_mem_gb")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m analysis.classify", description=__doc__.splitlines()[0],
                                epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("logs", nargs="+", metavar="LOG", type=Path,
                   help="job log file(s), any framework, or job folder(s) (all task logs judged together)")
    p.add_argument("--exit-code", type=int, default=None, help="the job's exit code, when known")
    p.add_argument("--slurm-state", default=None, metavar="STATE",
                   help="the job's SLURM state (sacct State: COMPLETED, FAILED, TIMEOUT, OUT_OF_MEMORY, ...)")
    p.add_argument("--backend", default="auto", metavar="NAME",
                   help="torch (the embedded workload's result line), megatron_lm, megatron_deepspeed, or auto "
                        "(default: recognise the format)")
    p.add_argument("--tokens-per-step", type=int, default=None, metavar="N",
                   help="global batch x sequence length, for tokens/s when the log does not print them")
    p.add_argument("--capacity-gb", type=float, default=None, metavar="GB",
                   help="device memory, to flag a peak above it as an impossible measurement")
    p.add_argument("--peak-tflops", type=float, default=None, metavar="T",
                   help="per-GPU peak TFLOP/s, to flag a rate above it as an impossible measurement")
    p.add_argument("--json", action="store_true", help="one JSON object per log, one per line")
    return p


_TASK_LOG = re.compile(r"^(?P<job>.+)_(?P<task>\d{1,6})_log\.(?:out|err)$")


@dataclass(frozen=True)
class Job:
    """What one verdict is about: a log file, or a job's task logs read together."""

    label: str
    log: JobLog
    exit_code: Optional[int] = None  # what the job's keeper recorded (None: not known)
    slurm_state: Optional[str] = None  # the keeper's record in SLURM's words (CANCELLED, TIMEOUT), or None
    folder: bool = False
    others: tuple[str, ...] = ()  # a task log's siblings of the same job, judged with it only in its folder


def _keeper_status(folder: Path, job_id: str, tasks: int) -> tuple[Optional[int], Optional[str]]:
    """(exit code, state) from the tasks' keeper records, mapped as the local executor maps them
    (launcher.run.executor._ended): a signal is a cancellation, the keeper's limit a time limit; else the first
    non-zero exit code, 0 when every task exited 0, None when a task left no record."""
    codes = []
    for task in range(tasks):
        record = KeeperRecord.read(keeper_path(folder, job_id, task))
        stopped = record.stopped if record is not None and isinstance(record.stopped, dict) else {}
        why, code = stopped.get("why"), stopped.get("exit_code")
        if why in ("SIGTERM", "SIGINT", "SIGHUP"):
            return None, "CANCELLED"
        if why == "time_limit":
            return None, "TIMEOUT"
        if why != "exit" or not isinstance(code, int):
            return None, None
        codes.append(code)
    return next((c for c in codes if c != 0), 0 if codes else None), None


def _siblings(path: Path) -> tuple[str, ...]:
    """The other task logs of the job a task log file belongs to (its cause is often in the .err beside the .out)."""
    match = _TASK_LOG.match(path.name)
    if match is None:
        return ()
    try:
        found = [p for p in log_paths(path.parent, match.group("job")) if p.name != path.name]
        return tuple(p.name for p in found if p.is_file() and p.stat().st_size > 0)
    except OSError:  # a hint only: a folder that cannot be listed does not stop judging the file
        return ()


def read_jobs(path: Path) -> list[Job]:
    """A log file -> one Job; a job folder -> one Job per job id in it (launcher.run.executor.log_paths: the
    order the sweep's judge reads). Each file is read as a bounded window (launcher.core.logfile). Raises
    ParseError for what cannot be read or is not a regular file (a FIFO, a device), and OSError for a folder
    without task logs."""
    if not path.is_dir():
        return [Job(str(path), JobLog.join([(path.name, read_window(path))]), others=_siblings(path))]
    tasks: dict[str, set[int]] = {}
    for child in path.iterdir():
        match = _TASK_LOG.match(child.name)
        if match is not None and child.is_file():
            tasks.setdefault(match.group("job"), set()).add(int(match.group("task")))
    if not tasks:
        raise OSError("no task logs (<job>_<task>_log.out / .err) in this folder")
    jobs = []
    for job_id in sorted(tasks):
        paths = log_paths(path, job_id)
        code, state = _keeper_status(path, job_id, max(tasks[job_id]) + 1)
        label = f"{path} (job {job_id})" if len(tasks) > 1 else str(path)
        jobs.append(Job(label, JobLog.join([(p.name, read_window(p)) for p in paths]), code, state, folder=True))
    return jobs


def _figures(metrics: dict) -> dict:
    return {key: metrics.get(key) for key in ("step_time_s", "tokens_per_s", "tflops_per_gpu", "peak_mem_gb")}


def _as_json(job: Job, outcome: Outcome, metrics: dict) -> str:
    lines = [ev._asdict() for ev in outcome.evidence]
    row = {"file": job.label, "kind": outcome.failure_kind, "reason": outcome.reason, "evidence_lines": lines,
           **_figures(metrics)}
    return strict_json.dumps({k: row[k] for k in JSON_KEYS})


def _fmt(value: float | None, spec: str, unit: str) -> str | None:
    return None if value is None else f"{value:{spec}}{unit}"


def _as_text(job: Job, outcome: Outcome, metrics: dict, n_iterations: int) -> str:
    lines = [f"{job.label}: {outcome.failure_kind}", f"  reason:   {outcome.reason}"]
    for ev in outcome.evidence:
        lines.append(f"  evidence: {ev.file + ' ' if job.folder else ''}line {ev.line}: {ev.text}")
    if job.folder:
        status = (f"exit code {job.exit_code}" if job.exit_code is not None else job.slurm_state
                  or "exit status not recorded")
        lines.append(f"  read:     {', '.join(job.log.files) or '(all empty)'} ({status}, from the keeper's record)")
    if job.others:
        lines.append(f"  note:     one of its job's task logs; {', '.join(job.others)} not read: "
                     f"`python -m analysis.classify {Path(job.label).parent}` judges them together, as the sweep does")
    if outcome.log_format:
        what = f"{n_iterations} iterations" if n_iterations else "final metrics"
        lines.append(f"  format:   {outcome.log_format} ({what})")
    figures = _figures(strict_json.finite(metrics))
    if figures["step_time_s"] is not None:
        used = metrics.get("n_measured")
        # the median of every steady step; `used` (n_measured) leaves out the outliers, as the spread does
        parts = [str(_fmt(figures["step_time_s"], ".4g", " s/step")) + (f" (median of the steady steps, {used} of "
                                                                    f"them not outliers)" if used else ""),
                 _fmt(figures["tokens_per_s"], ",.0f", " tokens/s"),
                 _fmt(figures["tflops_per_gpu"], ".1f", " TFLOP/s/GPU"),
                 _fmt(figures["peak_mem_gb"], ".2f", " GB peak memory")]
        lines.append("  measured: " + "; ".join(p for p in parts if p))
    elif figures["peak_mem_gb"] is not None:
        lines.append(f"  measured: {figures['peak_mem_gb']:.2f} GB peak memory")
    for note in outcome.notes[:5]:
        lines.append(f"  note:     {note}")
    return "\n".join(lines)


def judge_job(job: Job, args: argparse.Namespace) -> tuple[Outcome, dict, int]:
    """The one judgement of a job, whatever it is printed as: (outcome, metrics, iterations read)."""
    log_format = "workload" if args.backend in (BackendName.torch, "workload") else "auto"
    exit_code = args.exit_code if args.exit_code is not None else job.exit_code
    slurm_state = args.slurm_state if args.slurm_state is not None else job.slurm_state
    try:  # read once, for the verdict and for the figures printed with it
        measured: Optional[Measured] = measurements(job.log.text, log_format=log_format,
                                                    capacity_gb=args.capacity_gb, tokens_per_step=args.tokens_per_step)
    except Exception:  # noqa: BLE001 - trial_outcome reads again and reports the failure to judge in its reason
        measured = None
    outcome = trial_outcome(job.log, log_format=log_format, capacity_gb=args.capacity_gb,
                            tokens_per_step=args.tokens_per_step, peak_tflops=args.peak_tflops,
                            slurm_state=slurm_state, exit_code=exit_code, measured=measured)
    if measured is None:
        return outcome, {}, 0
    return outcome, measured[0], len(measured[2].iterations)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)  # a usage error exits 2 with argparse's one-line message
    status = 0
    for path in args.logs:
        try:
            jobs = read_jobs(path)
        except ParseError as exc:
            print(f"error: {exc}", file=sys.stderr)
            status = 2
            continue
        except OSError as exc:
            print(f"error: cannot read {path}: {exc.strerror or exc}", file=sys.stderr)
            status = 2
            continue
        for job in jobs:
            outcome, metrics, n_iterations = judge_job(job, args)
            print(_as_json(job, outcome, metrics) if args.json
                  else _as_text(job, outcome, metrics, n_iterations), flush=True)
    return status


def _run() -> int:
    try:
        return main()
    except BrokenPipeError:  # `... | head`: the reader left; not an error of ours
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(_run())
