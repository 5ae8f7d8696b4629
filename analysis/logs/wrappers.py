"""Wrappers: the programs between the job and the training process, and what they print when their child fails.

A failed trial's log ends with one traceback per layer it went through: the rank's own exception (the cause), then
torchrun's summary of its failed workers, then the job wrapper's re-raise of the script's exit status (submitit,
parasweep's keeper). The wrappers only say that something below them failed, so their tracebacks are context,
never the evidence of a verdict while the rank's own exception, a crash marker or a launcher's report of the
child's exit status is in the log (analysis.logs.classify uses them only when nothing else is there).

A wrapper traceback is told by its exception line (the last line of the traceback):

| shape                                   | printed by                                                              |
|-----------------------------------------|-------------------------------------------------------------------------|
| `...ChildFailedError:`                  | torch.distributed.elastic (torchrun, `torch.distributed.run`): the      |
|                                         | agent's summary of failed workers, with a per-rank `exitcode :` table    |
| `subprocess.CalledProcessError: ...`    | launchers that run the training as a child process and check its status |
|                                         | (`accelerate launch`, DeepSpeed's multinode runners, Lightning and NeMo  |
|                                         | launch scripts: `subprocess.check_call` / `run(check=True)`)             |
| `...FailedJobError:`, `...Uncompleted`  | submitit, when the submitting side reads a failed job's result          |
| `JobError:`                             |                                                                         |
| `RuntimeError: trial script X exited    | parasweep's keeper (launcher/run/jobside.py), re-raised by submitit's   |
| with code N`                            | `process_job` ("Submitted job triggered an exception")                  |

An exception raised inside a wrapper for a reason of its own (torchrun's rendezvous timing out, a keeper stopped
by a signal) is not in this table: it is the cause of that job's end.
"""

from __future__ import annotations

import re

WRAPPER_EXCEPTION = re.compile(
    r"^(?:[A-Za-z_][\w.]{0,200}\.)?(?:ChildFailedError|CalledProcessError|FailedJobError|UncompletedJobError)\b"
    r"|^RuntimeError: trial script .{1,4000} exited with code -?\d{1,4}$")


def is_wrapper_exception(line: str) -> bool:
    """Is this exception line (without its rank prefix) one that a wrapper raises about a failed child?"""
    return WRAPPER_EXCEPTION.search(line.strip()[:5000]) is not None
