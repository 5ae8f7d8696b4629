"""SLURM submission and monitoring cost for a 256-trial sweep on the local cluster.

    bash tests/slurm/localcluster.sh start && eval "$(bash tests/slurm/localcluster.sh env)"
    python tests/benchmarks/bench_slurm_queue.py

Targets (issue 4): all 256 trials queued in < 10 s with sbatch calls = distinct resource shapes; monitoring the
256 live jobs costs one `sacct` call per poll. The jobs are cancelled at the end (only 2 ever start: %2 throttle).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from launcher.config.load import load_config  # noqa: E402
from launcher.core.record import TrialRecord  # noqa: E402
from launcher.plan.planner import make_plan  # noqa: E402
from launcher.run import trial_files  # noqa: E402
from launcher.run.executor import JobRequest, SlurmRunner  # noqa: E402
from launcher.run.folder import SweepFolder  # noqa: E402

# executor.queue_all: the whole sweep at once (by default a sweep queues waves of what can run at once)
OVERRIDES = ["+sweep=tiny", "executor=slurm", "executor.queue_all=true", "executor.max_concurrent=2", "cluster.nodes=2",
             "grid.zip=[]", "grid.include=[]", "grid.gpus=[1,2,4,8]", "grid.tp=[1,2]", "grid.pp=[1,2]", "grid.mbs=[1,2,4,8]",
             "grid.gbs=[8,16,32,64]", "grid.recompute=[none,selective,full]", "plan.max_trials=0", "tracking.enabled=false"]


def main() -> None:
    start = time.perf_counter()  # from the config to every job in SLURM's queue: plan, trial files, sbatch
    cfg = load_config(OVERRIDES)
    plan = make_plan(cfg)
    by_world: dict[int, list] = {}
    for t in plan.trials:  # round-robin over world sizes, so that the arrays have several shapes
        by_world.setdefault(t.layout.gpus, []).append(t)
    rows = [group[i] for i in range(max(map(len, by_world.values()))) for group in by_world.values() if i < len(group)]
    trials = rows[:256]
    shapes = {(t.layout.nodes, t.layout.gpus_per_node) for t in trials}
    with tempfile.TemporaryDirectory(dir="/tmp") as tmp:
        folder = SweepFolder(Path(tmp) / "sweeps" / "bench")
        folder.create()
        runner = SlurmRunner(cfg.executor, cfg.cluster, folder.jobs)
        requests = []
        for t in trials:
            record = TrialRecord(t.config_hash, 0, t.layout)
            script = trial_files.write(cfg, folder, record)
            requests.append(JobRequest(t.config_hash, script, t.layout.nodes, t.layout.gpus_per_node))
        done = runner.submit(requests)
        assert not done.refused, done.refused
        ids = {key: job_id for key, (job_id, _) in done.jobs.items()}
        submitted_s = time.perf_counter() - start
        jobs = {job_id: job_dir for job_id, job_dir in done.jobs.values()}
        statuses = runner.poll(jobs)
        queued_s = time.perf_counter() - start
        print(f"{len(trials)} trials, {len(shapes)} distinct shapes: sbatch calls = {runner.sbatch_calls}; "
              f"all queued {submitted_s:.2f} s after loading the config (plan, 256 launch files, sbatch; visible in sacct "
              f"after {queued_s:.2f} s)  target < 10 s")
        polls, sacct_before = 3, runner.sacct_calls
        for _ in range(polls):
            poll_start = time.perf_counter()
            statuses = runner.poll(jobs)
            poll_s = time.perf_counter() - poll_start
        live = sum(s.live for s in statuses.values())
        print(f"monitoring {live} live jobs: {runner.sacct_calls - sacct_before} sacct calls for {polls} polls "
              f"({poll_s * 1000:.0f} ms per poll)  target: 1 per poll")
        bases = sorted({j.split('_')[0] for j in ids.values()})
        subprocess.run(["scancel", *bases], check=False)


if __name__ == "__main__":
    main()
