"""Issue 19's two MLflow-store cases, N times each, with the pass count.

    python tests/benchmarks/bench_concurrency.py [N] [--full] [--first=K]

1. three launchers started at once in a fresh folder (`for n in A B C; do python -m launcher +sweep=tiny
   sweep.name=s$n & done; wait`): a round passes when all three exit 0 with no traceback and no MLflow warning,
   every trial of the three ledgers finished, and the one store holds the three sweeps' parent runs, FINISHED;
2. a first launch SIGKILLed within a second of MLflow's "Updating database tables" (the store's creation), then
   the same command again: a round passes when the second launch exits 0 with MLflow working (no warning), its
   trials finished and the store holds its parent run, FINISHED.

Each launcher runs a one-trial version of the tiny sweep (the race is in the store's creation, before any trial;
--full runs the whole 10-trial tiny sweep instead). Prints the pass count of each case. --first=K numbers the
rounds K..K+N-1 with the kill delays rounds K.. have in one run from 1, so that two processes can share the rounds
(`20` alone, or `10` and `10 --first=11` at once, run the same rounds). A failed round's
folder (its launchers' output, ledgers, mlflow.db) is kept and its path printed, so the failure can be read
afterwards; a passed round's folder is removed.
"""

from __future__ import annotations

import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ONE_TRIAL = ["grid.gpus=[1]", "grid.zip=[]", "grid.tp=[1]", "grid.pp=[1]", "grid.mbs=[1]", "grid.gbs=[1]",
             "grid.include=[]", "backend.warmup_iters=1", "backend.measure_iters=2"]
CREATING = ("Creating initial MLflow database tables", "Updating database tables")


def launcher(work: Path, name: str, extra: list[str], out: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with out.open("w") as sink:
        return subprocess.Popen([sys.executable, "-m", "launcher", "+sweep=tiny", f"sweep.name={name}", *extra],
                                cwd=work, env=env, stdout=sink, stderr=subprocess.STDOUT)


def problems(work: Path, name: str, code: int, out: Path) -> list[str]:
    """What is wrong with one finished launcher (empty: it passed)."""
    text = out.read_text(errors="replace")
    found = []
    if code != 0:
        found.append(f"{name}: exit {code}")
    if "Traceback" in text:
        found.append(f"{name}: traceback")
    if "MLflow" in text and ("unreachable" in text or "write failed" in text):
        found.append(f"{name}: MLflow unavailable")
    ledger = work / "sweeps" / name / "ledger.sqlite"
    if not ledger.is_file():
        return [*found, f"{name}: no ledger"]
    with sqlite3.connect(ledger) as db:
        unfinished = db.execute("SELECT count(*) FROM trials WHERE state IN ('planned', 'submitted', 'running') "
                                "AND pruned_by = ''").fetchone()[0]
    if unfinished:
        found.append(f"{name}: {unfinished} trials not finished")
    return found


def store_problems(work: Path, names: list[str]) -> list[str]:
    db = work / "mlflow.db"
    if not db.is_file():
        return ["no mlflow.db"]
    with sqlite3.connect(db) as con:
        rows = dict(con.execute("SELECT t.value, r.status FROM runs r JOIN tags t ON t.run_uuid = r.run_uuid "
                                "WHERE t.key = 'parasweep.sweep' AND r.name LIKE 'sweep %'").fetchall())
    return [f"store: parent run of {n} is {rows.get(n, 'missing')}" for n in names if rows.get(n) != "FINISHED"]


def three_at_once(work: Path, extra: list[str]) -> list[str]:
    names = ["sA", "sB", "sC"]
    procs = {n: launcher(work, n, extra, work / f"{n}.out") for n in names}
    codes = {n: p.wait(timeout=1800) for n, p in procs.items()}
    found = [x for n in names for x in problems(work, n, codes[n], work / f"{n}.out")]
    return found + store_problems(work, names)


def kill_while_creating(work: Path, extra: list[str], rng: random.Random) -> list[str]:
    out = work / "first.out"
    first = launcher(work, "k", extra, out)
    deadline = time.monotonic() + 900
    while first.poll() is None and time.monotonic() < deadline:
        if any(line in out.read_text(errors="replace") for line in CREATING):
            break
        time.sleep(0.02)
    if first.poll() is not None:
        return [f"first launch ended before the store was created (exit {first.returncode})"]
    time.sleep(rng.uniform(0.0, 1.0))
    first.send_signal(signal.SIGKILL)
    first.wait()
    again = launcher(work, "k", extra, work / "again.out")
    code = again.wait(timeout=1800)
    return problems(work, "k", code, work / "again.out") + store_problems(work, ["k"])


def main() -> None:
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    n = int(args[0]) if args else 20
    extra = [] if "--full" in sys.argv else ONE_TRIAL
    first = next((int(a.split("=", 1)[1]) for a in sys.argv[1:] if a.startswith("--first=")), 1)
    rng = random.Random(19)
    for _ in range(first - 1):  # the delays of the rounds before the first: round k's delay is the same either way
        rng.uniform(0.0, 1.0)
    passed = {"three launchers at once": 0, "kill during store creation": 0}
    for i in range(first, first + n):
        for case, run in (("three launchers at once", lambda w: three_at_once(w, extra)),
                          ("kill during store creation", lambda w: kill_while_creating(w, extra, rng))):
            # a fresh folder per round, unique to this process: kept when the round fails
            work = Path(tempfile.mkdtemp(prefix=f"bench-concurrency-{i}-"))
            started = time.perf_counter()
            found = run(work)
            passed[case] += not found
            if found:
                kept = f" (kept: {work})"
            else:
                shutil.rmtree(work, ignore_errors=True)
                kept = ""
            print(f"round {i} {case}: {'pass' if not found else 'FAIL ' + '; '.join(found)} "
                  f"({time.perf_counter() - started:.0f} s){kept}", flush=True)
    for case, count in passed.items():
        print(f"{case}: {count} of {n} passed")


if __name__ == "__main__":
    main()
