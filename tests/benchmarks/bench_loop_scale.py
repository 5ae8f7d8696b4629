"""The sweep loop on a 50,000-trial plan, with a scripted runner (jobs end at the next poll, every 4th an OOM):
time to the first progress line, time per poll, time to resume, peak memory.

    python tests/benchmarks/bench_loop_scale.py [--polls N] [--small | --mid]

Targets (issue 19): first progress line < 10 s, a poll < 0.5 s, a resume < 10 s to its first progress line, peak
RSS < 500 MB. The plan is Llama-2-70B with the embedded backend over a wide grid (161,280 points, 50,408 kept
trials); --small takes a 1/18 grid (quick check), --mid a 1/4.5 grid. MLflow is off (its cost is measured in bench_sweep.py). Times
are wall-clock (this machine is shared: the CPU time of the process is printed beside them).
"""

from __future__ import annotations

import io
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from launcher.__main__ import sweep_hooks  # noqa: E402
from launcher.config.load import load_config  # noqa: E402
from launcher.core.console import Reporter  # noqa: E402
from launcher.run import loop  # noqa: E402
from launcher.run.executor import JobStatus, Submitted  # noqa: E402
from launcher.run.ledger import Ledger  # noqa: E402

GRID = ["+sweep=70b", "backend=torch", "executor=local", "cluster.nodes=64", "grid.nodes=[1,2,4,8,16,32,64]",
        "grid.tp=[1,2,4,8]", "grid.pp=[1,2,4,5,8,10,16,20]", "grid.mbs=[1,2,4,8,16]",
        "grid.gbs=[512,1024,1536,2048,3072,4096]", "grid.recompute=[none,selective,full]",
        "grid.sequence_parallel=[false,true]", "grid.zero_stage=[0,1]", "grid.vpp=[1,2]", "plan.keep_borderline=10",
        "plan.max_trials=0", "plan.max_gpu_hours=0", "plan.stop_when_converged=false", "plan.objective=tokens_per_s",
        "backend.warmup_iters=3", "backend.measure_iters=7", "tracking.enabled=false", "plan.compute_probe=false", "monitor.poll_interval_s=0.001", "executor.max_concurrent=8"]
SMALL = ["grid.gbs=[1024]", "grid.recompute=[none]"]
MID = ["grid.gbs=[1024,2048]", "grid.recompute=[none,full]"]
OK_LOG = ("[parasweep] iteration 1/1 | phase measure | step time (ms): 10.0 | lm loss: 1.0 | tokens/s: 100.0\n"
          'PARASWEEP_RESULT {"step_time_s": 1.0, "tokens_per_s": %d, "peak_mem_gb": 50.0}\n')
OOM_LOG = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"


class Stop(Exception):
    """Ends a run of the loop after its polls."""


class ScriptedRunner:
    """Jobs end at the poll after their submission; every 4th runs out of memory."""

    name = "scripted"

    def __init__(self, jobs_dir: Path, polls: int, clock: list[float], cpu_clock: list[float]) -> None:
        self.jobs_dir, self.polls, self.clock, self.cpu_clock = jobs_dir, polls, clock, cpu_clock
        self.n = 0

    def concurrency(self, ranks: int) -> int:
        return 8

    def submit(self, requests) -> Submitted:
        done = Submitted()
        for req in requests:
            self.n += 1
            folder = self.jobs_dir / str(self.n)
            folder.mkdir(parents=True, exist_ok=True)
            text = OOM_LOG if self.n % 4 == 0 else OK_LOG % (1000 + self.n)
            (folder / f"{self.n}_0_log.out").write_text(text)
            done.jobs[req.key] = (str(self.n), folder)
        return done

    def poll(self, jobs: dict) -> dict:
        self.clock.append(time.perf_counter())
        self.cpu_clock.append(time.process_time())
        if len(self.clock) > self.polls:
            raise Stop
        return {job_id: JobStatus("FAILED", 1) if "OutOfMemory" in (Path(folder) / f"{job_id}_0_log.out").read_text()
                else JobStatus("COMPLETED", 0) for job_id, folder in jobs.items()}

    def cancel(self, job_id: str) -> None:
        return None


class TimedReporter(Reporter):
    """Notes when the first progress line ('[elapsed] n/N done | ...') is said."""

    def __init__(self) -> None:
        super().__init__(io.StringIO(), io.StringIO(), interactive=False)
        self.first_progress: float | None = None
        self.first_progress_cpu: float | None = None
        """The process's CPU time then (the wall time varies with the machine's load)."""

    def info(self, message: str) -> None:
        if self.first_progress is None and message.startswith("[") and " done |" in message:
            self.first_progress, self.first_progress_cpu = time.perf_counter(), time.process_time()
        super().info(message)


class RssSampler:
    """The process's resident set size every few ms (Linux /proc; ru_maxrss is the whole process's peak): the peak
    of one run of the loop, when the first and the resumed run share the process."""

    def __init__(self, every_s: float = 0.01) -> None:
        self.every_s, self.peak_mb = every_s, float("nan")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        page_mb = resource.getpagesize() / 2 ** 20
        while True:
            try:
                with open("/proc/self/statm") as statm:
                    mb = int(statm.read().split()[1]) * page_mb
            except OSError:
                return
            self.peak_mb = mb if not self.peak_mb >= mb else self.peak_mb
            if self._stop.wait(self.every_s):
                return

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def run_once(overrides: list[str], polls: int) -> dict:
    with RssSampler() as rss:
        out = _run_once(overrides, polls)
    return {**out, "peak_mb": rss.peak_mb}


def _run_once(overrides: list[str], polls: int) -> dict:
    cfg = load_config(overrides)
    clock: list[float] = []
    cpu_clock: list[float] = []
    reporter = TimedReporter()
    make_runner = loop.make_runner
    loop.make_runner = lambda cfg_, cluster, jobs_dir, reporter_=None: ScriptedRunner(jobs_dir, polls, clock,
                                                                                              cpu_clock)
    started, cpu = time.perf_counter(), time.process_time()
    try:
        loop.run_sweep(cfg, hooks=sweep_hooks(reporter), reporter=reporter)
    except Stop:
        pass
    finally:
        loop.make_runner = make_runner
    gaps = [b - a - cfg.monitor.poll_interval_s for a, b in zip(clock[1:], clock[2:])]
    cpu_gaps = [b - a for a, b in zip(cpu_clock[1:], cpu_clock[2:])]
    return {"first_s": (reporter.first_progress or float("nan")) - started, "cpu_s": time.process_time() - cpu,
            "first_cpu_s": (reporter.first_progress_cpu or float("nan")) - cpu,
            "poll_mean_s": sum(gaps) / len(gaps), "poll_max_s": max(gaps), "polls": len(gaps),
            "poll_cpu_s": sum(cpu_gaps) / len(cpu_gaps)}


def main() -> None:
    polls = int(sys.argv[sys.argv.index("--polls") + 1]) if "--polls" in sys.argv else 20
    with tempfile.TemporaryDirectory() as work:
        overrides = [*GRID, *(SMALL if "--small" in sys.argv else MID if "--mid" in sys.argv else []), f"sweep.root_dir={work}", "sweep.name=scale"]
        first = run_once(overrides, polls)
        with Ledger(Path(work) / "scale" / "ledger.sqlite") as ledger:
            trials = len(ledger.trials())
        again = run_once(overrides, polls)
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"plan: {trials:,} trials in the ledger")
    print(f"first progress line: {first['first_s']:.2f} s (CPU {first['first_cpu_s']:.2f} s)  target < 10 s")
    print(f"per poll: mean {first['poll_mean_s']:.3f} s, max {first['poll_max_s']:.3f} s over {first['polls']} polls "
          f"(resumed run: mean {again['poll_mean_s']:.3f} s, max {again['poll_max_s']:.3f} s)  target < 0.5 s")
    print(f"resume to its first progress line: {again['first_s']:.2f} s  target < 10 s")
    print(f"peak RSS: {rss_mb:.0f} MB (first run {first['peak_mb']:.0f} MB, resume {again['peak_mb']:.0f} MB, "
          "sampled every 10 ms)  target < 500 MB")
    print(f"CPU time of the process: first run {first['cpu_s']:.1f} s, resume {again['cpu_s']:.1f} s; a poll "
          f"{first['poll_cpu_s']:.3f} s (resumed run {again['poll_cpu_s']:.3f} s)")


if __name__ == "__main__":
    main()
