"""Benchmark of `python -m analysis`: a synthetic sweep folder of 1,000 trials with 200-iteration workload logs.

    python tests/benchmarks/bench_analysis.py [--trials 1000] [--iters 200] [--keep DIR] [--mlflow]

The folder looks like one the launcher leaves: config.yaml, command.txt, ledger.sqlite written through
launcher.run.ledger.Ledger (job_state set, so every trial is re-judged from its log) and submitit-style log files
with paths relative to the working directory. The first run re-judges every trial (their recorded metrics are
stale on purpose: each one is an update), the second finds nothing to change. Target: < 10 s per run without
MLflow. `build_sweep` is also the fixture builder of tests/cli/test_analysis_cli.py.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
OOM_LINE = ("[rank1]: RuntimeError: [enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't "
            "allocate memory: you tried to allocate 8388608 bytes. Error code 12 (Cannot allocate memory)")


def tiny_layouts() -> list[dict]:
    """Valid layouts of the tiny model (4 layers, 4 heads) on up to 8 ranks."""
    out = []
    for gpus, tp, pp, mbs, k in itertools.product((1, 2, 4, 8), (1, 2, 4), (1, 2, 4), (1, 2, 4, 8), (1, 2, 4)):
        if gpus % (tp * pp):
            continue
        dp = gpus // (tp * pp)
        out.append(dict(gpus=gpus, nodes=1, tp=tp, pp=pp, dp=dp, vpp=1, mbs=mbs, gbs=mbs * dp * k,
                        recompute="none", sequence_parallel=False, zero_stage=0, distributed_optimizer=False))
    return out


def _ok_log(layout: dict, iters: int, seq_len: int, rng: random.Random) -> tuple[str, dict]:
    base_ms = 40.0 * layout["gbs"] / (layout["gpus"] * (1 + 0.2 * layout["mbs"])) * (1 + 0.3 * (layout["tp"] - 1))
    tokens = layout["gbs"] * seq_len
    warmup = min(3, iters - 1)
    lines = ["submitit INFO (2026-11-22 00:00:22,465) - Starting with JobEnvironment(job_id=1, hostname=vm)",
             "[parasweep] init done in 1.12 s"]
    steps, losses = [], []
    for i in range(1, iters + 1):
        ms = base_ms * (1.5 if i <= warmup else 1.0) * (1 + rng.uniform(-0.05, 0.05))
        loss = 7.0 - 0.001 * i + rng.uniform(-0.02, 0.02)
        phase = "warmup" if i <= warmup else "measure"
        steps.append(ms) if phase == "measure" else None
        losses.append(loss)
        lines.append(f"[parasweep] iteration {i}/{iters} | phase {phase} | step time (ms): {ms:.2f} | "
                     f"lm loss: {loss:.6f} | tokens/s: {tokens / ms * 1000:.1f}")
    step_s = sorted(steps)[len(steps) // 2] / 1000
    peak = 0.02 + 0.012 * layout["mbs"] * layout["pp"] / layout["tp"]
    result = {"step_time_s": step_s, "tokens_per_s": tokens / step_s, "tflops_per_gpu": 0.01,
              "model_tflops_per_gpu": 0.01, "mfu": 0.1, "peak_mem_gb": peak,
              "peak_mem_gb_per_rank": [peak] * layout["gpus"], "losses": losses, "world_size": layout["gpus"],
              "n_params": 3445248, "config": {k: layout[k] for k in ("tp", "pp", "dp", "mbs", "gbs")}}
    lines += ["PARASWEEP_RESULT " + json.dumps(result), "submitit INFO (2026-11-22 00:00:28,404) - Job completed"]
    return "\n".join(lines) + "\n", result


def _failed_log(kind: str) -> str:
    if kind == "oom":
        body = ["[rank1]: Traceback (most recent call last):", '[rank1]:   File "model.py", line 82, in forward',
                OOM_LINE, "torch.distributed.elastic.multiprocessing.errors.ChildFailedError:"]
    else:
        body = ["Traceback (most recent call last):", '  File "train.py", line 12, in <module>',
                "ValueError: bad value <script>alert('x')</script> in the data loader"]
    return "\n".join(["submitit INFO (2026-11-22 00:00:22,465) - Starting", *body]) + "\n"


def build_sweep(workdir: Path, n_trials: int, iters: int, overrides: Sequence[str] = ("+sweep=tiny",),
                oom_every: int = 10, crash_every: int = 37, seed: int = 0) -> Path:
    """Write workdir/sweeps/<name>/ as the launcher would leave it after n_trials finished; returns the folder."""
    from launcher.config.load import load_config, to_yaml
    from launcher.core.record import TrialRecord
    from launcher.run.ledger import Ledger

    cfg = load_config(list(overrides))
    rel = Path(cfg.sweep.root_dir) / cfg.sweep.name
    folder = workdir / rel
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text(to_yaml(cfg))
    (folder / "command.txt").write_text("python -m launcher " + " ".join(overrides) + "\n")
    rng = random.Random(seed)
    layouts = tiny_layouts()
    t0 = 1_800_000_000.0
    records, updates = [], []
    for i in range(n_trials):
        layout = layouts[i % len(layouts)]
        chash = hashlib.sha256(f"trial {i}".encode()).hexdigest()[:12]
        kind = "oom" if oom_every and i % oom_every == oom_every - 1 else (
            "crashed" if crash_every and i % crash_every == crash_every - 1 else "ok")
        job = str(1000 + i)
        jobs = folder / "jobs" / job
        jobs.mkdir(parents=True)
        out, err = jobs / f"{job}_0_log.out", jobs / f"{job}_0_log.err"
        if kind == "ok":
            text, result = _ok_log(layout, iters, cfg.model.seq_len, rng)
            out.write_text(text)
            err.write_text("")
        else:
            out.write_text("submitit INFO - Starting\n[parasweep] init done in 1.0 s\n")
            err.write_text(_failed_log(kind))
            result = {"tokens_per_s": 5000.0, "step_time_s": 0.2, "peak_mem_gb": 0.5}
        speedup = rng.uniform(0.6, 1.6)  # the estimator's error on this trial
        predicted = {"tokens_per_s": result["tokens_per_s"] * speedup,
                     "step_time_s": result["step_time_s"] / speedup, "peak_mem_gb": result["peak_mem_gb"] * 0.8,
                     "headroom": 1 - result["peak_mem_gb"] * 0.8 / cfg.cluster.gpu_mem_gb}
        records.append(TrialRecord(chash, i, layout, predicted))
        updates.append((chash, dict(
            state="ok" if kind == "ok" else "failed", job_id=job, attempts=1, metrics={},  # stale: re-judged
            job_state="COMPLETED" if kind == "ok" else "FAILED", exit_code=0 if kind == "ok" else 1,
            log_paths=[str(rel / "jobs" / job / out.name), str(rel / "jobs" / job / err.name)],
            submitted_at=t0 + 20 * i, finished_at=t0 + 20 * i + 15 + rng.uniform(0, 5))))
    with Ledger(folder / "ledger.sqlite") as ledger:
        ledger.add_trials(records)
        for chash, changes in updates:
            ledger.update(chash, **changes)
    return folder


def run_analysis(folder: Path, *extra: str, cwd: Path) -> tuple[float, subprocess.CompletedProcess]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "analysis", str(folder), *extra], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900)
    return time.perf_counter() - t0, proc


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--iters", type=int, default=200)
    parser.add_argument("--keep", type=Path, help="build in this (new) directory and keep it")
    parser.add_argument("--mlflow", action="store_true", help="also time a run with the MLflow sync (sqlite)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    workdir = args.keep or Path(tempfile.mkdtemp(prefix="bench-analysis-"))
    t0 = time.perf_counter()
    folder = build_sweep(workdir, args.trials, args.iters)
    size_mb = sum(p.stat().st_size for p in (folder / "jobs").rglob("*.out")) / 1e6
    print(f"built {args.trials} trials x {args.iters} iterations ({size_mb:.0f} MB of logs) "
          f"in {time.perf_counter() - t0:.1f} s: {folder}")
    failures = 0
    for run in ("first run (every trial re-judged)", "second run (nothing changed)"):
        wall_s, proc = run_analysis(folder, "--no-mlflow", cwd=workdir)
        failures += proc.returncode != 0
        timings = [ln for ln in proc.stdout.splitlines() if ln.startswith(("re-parsed", "plots, report"))]
        print(f"{run}: {wall_s:.2f} s wall (exit {proc.returncode}); " + "; ".join(timings))
    if args.mlflow:
        wall_s, proc = run_analysis(folder, cwd=workdir)
        failures += proc.returncode != 0
        sync = [ln for ln in proc.stdout.splitlines() if ln.startswith("MLflow sync")]
        print(f"with MLflow (sqlite in {workdir}): {wall_s:.2f} s wall (exit {proc.returncode}); " + "; ".join(sync))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
