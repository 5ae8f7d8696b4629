"""Metamorphic audit of the failure classifier: does a verdict survive the way a log was captured?

    python tests/benchmarks/bench_invariance.py [--sample N] [--jobs J] [--only NAME,...] [--batches 1,2,...]

Every labelled fixture (tests/fixtures/INDEX.tsv and every oos-batch*/INDEX.tsv) is judged as it is and after each
transformation below, in memory, the way `python -m analysis.classify --json LOG` judges a file (the fixture's
`# SOURCE` note removed, JobLog.join, measurements, trial_outcome). A transformation wraps the same framework lines
the way some launcher, console or collector does; none changes what the log says. Printed per transformation: how
many verdicts change (the kind, or the step time by more than 1 %), how many of those were right before (right ->
wrong matters most), and each changed file (original kind -> transformed kind, the transformed reason).
"""

from __future__ import annotations

import argparse
import csv
import random
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "fixtures"
STEP_TOLERANCE = 0.01


def _each_line(text: str, wrap: Callable[[int, str], str]) -> str:
    """Apply `wrap(index, line)` to every line, keeping the final newline (or its absence)."""
    lines = text.split("\n")
    tail = lines.pop() if lines and lines[-1] == "" else None
    out = [wrap(i, line) for i, line in enumerate(lines)]
    return "\n".join(out) + ("\n" if tail is not None else "")


def torchrun_tee(text: str) -> str:
    """torchrun --tee 3 / --log-dir: every line of local rank 0 as `[default0]:text`."""
    return _each_line(text, lambda _, line: f"[default0]:{line}")


def torch_rank(text: str) -> str:
    """torch >= 2.2 (TORCHELASTIC_ENABLE_FILE_TIMER off, torchrun --local-ranks-filter): `[rank0]:text`."""
    return _each_line(text, lambda _, line: f"[rank0]:{line}")


def srun_label(text: str) -> str:
    """srun --label (and the Slurm launchers of NeMo-Run / submitit with it): `0: text`."""
    return _each_line(text, lambda _, line: f"0: {line}")


def mpirun_tag(text: str) -> str:
    """Open MPI's mpirun --tag-output: `[1,0]<stdout>:text`."""
    return _each_line(text, lambda _, line: f"[1,0]<stdout>:{line}")


def ray_worker(text: str) -> str:
    """Ray Train: every worker's stdout reaches the driver as `(RayTrainWorker pid=1234, ip=10.0.0.1) text`."""
    return _each_line(text, lambda _, line: f"(RayTrainWorker pid=1234, ip=10.0.0.1) {line}")


def pdsh_host(text: str) -> str:
    """pdsh (the DeepSpeed multi-node launcher's default runner): `node012: text`."""
    return _each_line(text, lambda _, line: f"node012: {line}")


def kubectl_timestamps(text: str) -> str:
    """`kubectl logs --timestamps`: an RFC 3339 nanosecond stamp in front of every line, one millisecond apart."""
    def stamp(i: int, line: str) -> str:
        ms = 10 * 3_600_000 + i  # 10:00:00.000 plus one millisecond per line
        return (f"2025-11-27T{ms // 3_600_000:02d}:{ms // 60_000 % 60:02d}:{ms // 1000 % 60:02d}."
                f"{ms % 1000:03d}456789Z {line}")
    return _each_line(text, stamp)


def crlf(text: str) -> str:
    """A log written on Windows or copied through a Windows console / browser paste: CR LF line endings."""
    return text.replace("\n", "\r\n")


def ansi_lines(text: str) -> str:
    """A colouring logger (rich, colorlog, loguru) writing to a terminal that a `script`/tmux capture kept: every
    line wrapped in a colour code and a reset."""
    return _each_line(text, lambda _, line: f"\x1b[32m{line}\x1b[0m" if line else line)


def ansi_levels(text: str) -> str:
    """colorlog / loguru: only the level name coloured (`\\x1b[1;31mERROR\\x1b[0m`)."""
    for level, code in (("ERROR", "1;31"), ("WARNING", "33"), ("INFO", "32"), ("CRITICAL", "1;41")):
        text = text.replace(level, f"\x1b[{code}m{level}\x1b[0m")
    return text


def two_ranks(text: str) -> str:
    """Two ranks printing the same lines (no rank-0-only logging), their outputs interleaved line by line, as a
    job's stdout collects them without a rank prefix."""
    return _each_line(text, lambda _, line: f"{line}\n{line}")


def two_ranks_tagged(text: str) -> str:
    """The same two ranks through torchrun --tee: `[default0]:` and `[default1]:` versions of every line."""
    return _each_line(text, lambda _, line: f"[default0]:{line}\n[default1]:{line}")


_ENV_DUMP = "".join(
    [f"{k}={v}\n" for k, v in (("SLURM_JOB_ID", "123456"), ("SLURM_NNODES", "2"), ("CUDA_VISIBLE_DEVICES",
                                                                                    "0,1,2,3,4,5,6,7"),
                               ("NCCL_DEBUG", "WARN"), ("MASTER_ADDR", "node012"), ("MASTER_PORT", "29500"))]
    + ["Package                  Version\n", "------------------------ -----------\n"]
    + [f"{name:<24s} {ver}\n" for name, ver in (("accelerate", "0.30.1"), ("deepspeed", "0.14.2"),
                                                ("numpy", "1.26.4"), ("nvidia-nccl-cu12", "2.20.5"),
                                                ("safetensors", "0.4.3"), ("tokenizers", "0.19.1"),
                                                ("torch", "2.3.0"), ("transformers", "4.41.2"),
                                                ("triton", "2.3.0"))] * 40
    + ["Collecting environment information...\n", "PyTorch version: 2.3.0+cu121\n", "Is debug build: False\n",
       "CUDA used to build PyTorch: 12.1\n", "OS: Ubuntu 22.04.4 LTS (x86_64)\n",
       "GPU models and configuration: GPU 0: NVIDIA H100 80GB HBM3\n", "Nvidia driver version: 535.161.08\n"])


def env_dump(text: str) -> str:
    """A job script that prints `env`, `pip freeze` / `pip list` and `python -m torch.utils.collect_env` first."""
    return _ENV_DUMP + text


def progress_redraws(text: str) -> str:
    """A shard-loading tqdm bar (transformers' `Loading checkpoint shards`) redrawn with carriage returns before the
    log: one physical line, many drawings."""
    bar = "".join(f"\rLoading checkpoint shards: {25 * i:3d}%|{'#' * (2 * i):<8s}| {i}/4 [00:{3 * i:02d}<00:{3 * (4 - i):02d},"
                  f"  3.00s/it]" for i in range(5))
    return bar + "\n" + text


TRANSFORMS: dict[str, Callable[[str], str]] = {
    f.__name__: f for f in (torchrun_tee, torch_rank, srun_label, mpirun_tag, ray_worker, pdsh_host,
                            kubectl_timestamps, crlf, ansi_lines, ansi_levels, two_ranks, two_ranks_tagged, env_dump,
                            progress_redraws)}


@dataclass(frozen=True)
class Case:
    path: Path
    label: str  # "corpus" or "oos-batchN"
    kind: str


@dataclass(frozen=True)
class Verdict:
    kind: str
    reason: str
    step_time_s: float | None


def cases(batches: list[str] | None) -> list[Case]:
    """Every labelled fixture: the corpus index and each held-out batch's (`batches`: their numbers; None: all)."""
    out = []
    indexes = [(ROOT / "INDEX.tsv", "corpus")]
    folders = sorted(ROOT.glob("oos-batch*"), key=lambda p: int(p.name.removeprefix("oos-batch") or 0))
    indexes += [(f / "INDEX.tsv", f.name) for f in folders
                if batches is None or f.name.removeprefix("oos-batch") in batches]
    for index, label in indexes:
        with open(index, newline="") as f:
            for row in csv.DictReader(f, delimiter="\t"):
                out.append(Case(index.parent / row["path"], label, row["kind"]))
    return out


def raw_text(path: Path) -> str:
    """The file as the classifier reads it, without the fixture's leading `# SOURCE` note lines."""
    data = path.read_bytes().decode("utf-8", errors="replace")
    while data.startswith("#"):
        data = data.split("\n", 1)[1] if "\n" in data else ""
    return data


def judge(name: str, text: str) -> Verdict:
    """What `python -m analysis.classify --json` prints for a file holding `text` (no job facts)."""
    from analysis.logs.joblog import JobLog
    from analysis.logs.outcome import measurements, trial_outcome

    log = JobLog.join([(name, text.encode("utf-8", errors="surrogateescape"))])
    try:
        measured = measurements(log.text)
    except Exception:  # noqa: BLE001 - as the command: trial_outcome reports the failure in its reason
        measured = None
    outcome = trial_outcome(log, measured=measured)
    step = measured[0].get("step_time_s") if measured is not None else None
    return Verdict(outcome.failure_kind, outcome.reason, step)


def _audit(args: tuple[Case, tuple[str, ...]]) -> tuple[Case, Verdict, dict[str, Verdict]]:
    case, names = args
    text = raw_text(case.path)
    return case, judge(case.path.name, text), {n: judge(case.path.name, TRANSFORMS[n](text)) for n in names}


def changed(before: Verdict, after: Verdict) -> str:
    """'' when the verdict is the same; else what changed."""
    if before.kind != after.kind:
        return "kind"
    a, b = before.step_time_s, after.step_time_s
    if (a is None) != (b is None) or (a is not None and b is not None and abs(b - a) > STEP_TOLERANCE * abs(a)):
        return "step"
    return ""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sample", type=int, default=0, help="judge a random N of the fixtures (seeded; 0: all)")
    p.add_argument("--seed", type=int, default=17)
    p.add_argument("--jobs", type=int, default=1, help="worker processes")
    p.add_argument("--only", default="", help="comma-separated transformation names (default: all)")
    p.add_argument("--batches", default="", help="comma-separated oos batch numbers (default: every batch)")
    args = p.parse_args(argv)
    names = tuple(args.only.split(",")) if args.only else tuple(TRANSFORMS)
    unknown = [n for n in names if n not in TRANSFORMS]
    if unknown:
        p.error(f"unknown transformation(s) {unknown}; known: {', '.join(TRANSFORMS)}")
    todo = cases(args.batches.split(",") if args.batches else None)
    if args.sample:
        todo = sorted(random.Random(args.seed).sample(todo, min(args.sample, len(todo))), key=lambda c: str(c.path))
    start = time.monotonic()
    work = [(c, names) for c in todo]
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            results = list(pool.map(_audit, work, chunksize=4))
    else:
        results = [_audit(w) for w in work]
    print(f"{len(results)} fixtures, {len(names)} transformations, {time.monotonic() - start:.0f} s")
    print(f"{'transformation':20s} {'changed':>8s} {'kind':>5s} {'step':>5s} {'right->wrong':>13s}")
    details = []
    total = 0
    for n in names:
        rows = [(c, b, t[n], changed(b, t[n])) for c, b, t in results]
        rows = [r for r in rows if r[3]]
        total += len(rows)
        kinds = sum(r[3] == "kind" for r in rows)
        broke = sum(b.kind == c.kind and a.kind != c.kind for c, b, a, _ in rows)
        print(f"{n:20s} {len(rows):8d} {kinds:5d} {len(rows) - kinds:5d} {broke:13d}")
        for c, b, a, what in rows:
            where = f"{c.label}/{c.path.relative_to(c.path.parents[1]) if c.label != 'corpus' else c.path.name}"
            was = "right" if b.kind == c.kind else "wrong"
            step = f" step {b.step_time_s} -> {a.step_time_s}" if what == "step" else ""
            details.append(f"  {n}: {where} [{was}] {b.kind} -> {a.kind}{step}  [{a.reason[:100]}]")
    print(f"total changed: {total}")
    if details:
        print("\nchanged verdicts:")
        print("\n".join(details))
    return 0


if __name__ == "__main__":
    sys.exit(main())
