"""Overhead of the embedded workload's machinery at tp = pp = dp = 1, against a plain torch training loop.

    python tests/benchmarks/bench_workload.py [--rounds 3] [--iters 10]

Both sides train the same model (launcher.workload.model, same seed), on the same synthetic batches, with the
same AdamW and gradient accumulation, in separate processes with the same environment. The workload runs as a
job does (torchrun, 1 process); the plain loop is `model(x) -> loss -> backward` and `optimizer.step()`.
Rounds alternate A/B so that load from other processes hits both; each side keeps its best round.
Target (issue 3): workload tokens/s >= 0.90 x plain loop tokens/s.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The platform notes' tiny GPT (3.7 M parameters) with 4 microbatches of 2 sequences per step.
MODEL = dict(layers=4, hidden=256, heads=4, seq_len=128, vocab=1024)
MBS, GBS, WARMUP, SEED = 2, 8, 3, 1234
TARGET_RATIO = 0.90


def workload_tokens_per_s(iters: int) -> float:
    args = [f"--{k.replace('_', '-')}={v}" for k, v in MODEL.items()]
    args += [f"--mbs={MBS}", f"--gbs={GBS}", f"--warmup-iters={WARMUP}", f"--measure-iters={iters}",
             f"--seed={SEED}"]
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=1",
           "-m", "launcher.workload", *args]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("PARASWEEP_RESULT ")), None)
    if proc.returncode != 0 or line is None:
        raise SystemExit(f"workload failed (status {proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(line.removeprefix("PARASWEEP_RESULT "))["tokens_per_s"]


def plain_tokens_per_s(iters: int) -> float:
    proc = subprocess.run([sys.executable, __file__, "--plain-loop", f"--iters={iters}"], cwd=REPO,
                          capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(REPO)})
    if proc.returncode != 0:
        raise SystemExit(f"plain loop failed (status {proc.returncode}):\n{proc.stderr[-3000:]}")
    return float(proc.stdout.strip().splitlines()[-1])


def plain_loop(iters: int) -> float:
    """The reference: the same model and data, no process group, no mesh, no wrappers. Returns tokens/s
    from the median measured step, timed like the workload (data generation outside the clock)."""
    import torch
    import torch.nn.functional as F

    from launcher.workload.model import GPTConfig, StageModel
    from launcher.workload.train import synthetic_batch

    cfg = GPTConfig(kv_heads=MODEL["heads"], ffn_hidden=4 * MODEL["hidden"], **MODEL)
    model = StageModel(cfg, list(range(cfg.layers)), has_embedding=True, has_head=True, seed=SEED)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.0)
    m = GBS // MBS
    times = []
    for step in range(WARMUP + iters):
        batch = synthetic_batch(SEED, step, GBS, cfg.seq_len, cfg.vocab)
        tokens, labels = batch[:, :-1], batch[:, 1:]
        start = time.perf_counter()
        for x, y in zip(tokens.chunk(m), labels.chunk(m)):
            loss = F.cross_entropy(model(x).flatten(0, 1), y.flatten(0, 1))
            (loss / m).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        loss.item()
        if step >= WARMUP:
            times.append(time.perf_counter() - start)
    return GBS * cfg.seq_len / statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--plain-loop", action="store_true", help=argparse.SUPPRESS)
    a = parser.parse_args()
    if a.plain_loop:
        print(plain_loop(a.iters))
        return 0
    workload, plain = [], []
    for r in range(a.rounds):
        workload.append(workload_tokens_per_s(a.iters))
        plain.append(plain_tokens_per_s(a.iters))
        print(f"round {r + 1}: workload {workload[-1]:.1f} tokens/s, plain loop {plain[-1]:.1f} tokens/s",
              flush=True)
    ratio = max(workload) / max(plain)
    print(f"workload (tp=pp=dp=1): {max(workload):.1f} tokens/s")
    print(f"plain torch loop:      {max(plain):.1f} tokens/s")
    print(f"ratio: {ratio:.3f} (target >= {TARGET_RATIO})  {'OK' if ratio >= TARGET_RATIO else 'BELOW TARGET'}")
    return 0 if ratio >= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
