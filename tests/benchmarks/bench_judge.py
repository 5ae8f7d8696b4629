"""Benchmark of judging hostile and huge logs: trial_outcome on logs of tens of megabytes, each shape built to
defeat a naive parser (one giant line full of needles, a million records, progress-bar redraws, binary junk).

    python tests/benchmarks/bench_judge.py [--mb 20]

Prints seconds and MB/s per shape. Judging must stay linear: the target is under 5 s for each 20 MB log on one
core (the sweep judges one trial at a time, and a log this size is already pathological).
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

RECORD = (" iteration {i:8d}/ 9999999 | consumed samples: {s:12d} | elapsed time per iteration (ms): {ms:.1f} | "
          "learning rate: 2.407E-04 | global batch size:   768 | lm loss: 5.905366E+00 | TFLOPs: 69.85 |")
NEEDLES = ["memory (MB) | ", "iteration 12/", "Epoch 3:", "Traceback (most recent call last)", "NCCL WARN ",
           "NVRM: Xid (PCI:0000:00:00): ", "AssertionError", "exitcode", "No module named ", "PARASWEEP_RESULT {",
           "'train_runtime': ", "epoch=0/micro_step=1/global_step=", "Using x as PyTorch extensions root",
           # the shapes added for batch 2 (OUT_OF_SAMPLE.md): unknown-total bars, DeepSpeed skip counts and
           # overflows, frames without a traceback header, epoch counters, magnitude suffixes, step budgets
           "614/? [23:53<00:00, ", "step=10, skipped=", "Attempted loss scale: 4, reducing to 2", '  File "x.py", ',
           "Epoch(train) [3][", "11.5K", "max training steps reached", "Dataset does not exist: "]


def giant_line(size: int) -> str:
    rng = random.Random(0)
    parts, n = [], 0
    while n < size:
        piece = rng.choice(NEEDLES) + "x" * rng.randint(0, 200) + rng.choice(["9" * 50, " | ", "[rank3]:", ""])
        parts.append(piece)
        n += len(piece)
    return "".join(parts)


def many_records(size: int) -> str:
    lines, n, i = [], 0, 0
    while n < size:
        i += 1
        line = RECORD.format(i=i, s=i * 768, ms=14000 + i % 97)
        lines.append(f"[default{i % 8}]:" + line)
        n += len(line) + 12
    return "\n".join(lines) + "\nRuntimeError: CUDA error: an illegal memory access was encountered\n"


def progress_redraws(size: int) -> str:
    bars, n, i = [], 0, 0
    while n < size:
        i += 1
        bar = (f"Epoch 0:  {i % 100}%|█▏ | {i}/100000000 [01:23<10:12, 1.44it/s, loss=2.1, v_num=0, "
               f"reduced_train_loss=2.1, global_step={i}.0, train_step_timing in s=0.{i % 9 + 1}]")
        bars.append(bar)
        n += len(bar) + 1
    return "\r".join(bars)


def newer_shapes(size: int) -> str:
    """Lines of the formats read since batch 2, each repeated, with no traceback: every needle is searched to its
    cap (mmengine records, headerless exception lines above frames, unknown-total bars, DeepSpeed overflows)."""
    lines, n, i = [], 0, 0
    while n < size:
        i += 1
        line = (f"Epoch(train) [{i % 9}][{i % 5000:4d}/5000] time: 0.4{i % 9} loss: 2.1 | {i}/? [00:{i % 60:02d}<00:00, "
                f"v_num=] | ValueError: x\n  File \"a.py\", line {i}, in f | step={i}, skipped={i} | "
                f"Attempted loss scale: {2 ** (i % 20)}, reducing to {2 ** (i % 20 + 1)} | 7.5K")
        lines.append(line)
        n += len(line) + 1
    return "\n".join(lines)


def binary_junk(size: int) -> bytes:
    rng = random.Random(1)
    return bytes(rng.getrandbits(8) for _ in range(size // 64)) * 64


SHAPES: dict[str, Callable[[int], str | bytes]] = {
    "one giant line of needles": giant_line, "records of 8 ranks + a crash": many_records,
    "NeMo progress-bar redraws": progress_redraws, "binary junk": binary_junk,
    "batch-2 formats, repeated": newer_shapes,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=20.0, help="size of each log in MB (default 20)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(REPO))
    from analysis.logs.outcome import trial_outcome

    size = int(args.mb * 1e6)
    worst = 0.0
    for name, build in SHAPES.items():
        log = build(size)
        t0 = time.perf_counter()
        out = trial_outcome(log, log_format="auto", capacity_gb=80.0, tokens_per_step=4096, peak_tflops=989.0)
        wall_s = time.perf_counter() - t0
        worst = max(worst, wall_s)
        print(f"{name:32s} {len(log) / 1e6:6.1f} MB  {wall_s:6.2f} s  {len(log) / 1e6 / wall_s:7.1f} MB/s  "
              f"-> {out.failure_kind}: {out.reason[:70]}")
    print(f"slowest: {worst:.2f} s for {args.mb:g} MB (target < 5 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
