"""What submitit runs on the compute node: the trial's launch script, nothing else.

Kept tiny and free of the planner's imports (hydra, mlflow, rich): it is unpickled on every node of every job.
The script's output goes to the job's stdout/stderr, which submitit writes into the job folder.
"""

from __future__ import annotations

import subprocess


def run_trial(script_path: str) -> dict:
    """Run one node's share of a trial. A non-zero exit raises, so submitit records the job as failed."""
    proc = subprocess.run(["bash", script_path], stdin=subprocess.DEVNULL, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"trial script {script_path} exited with code {proc.returncode}")
    return {"exit_code": 0}
