"""A stand-in for `python -m torch.distributed.run ... -m launcher.workload ...` that sleeps instead of training.

Used as `backend.python=tests/fake_torchrun.py` by the fast process tests: the trial's launch.sh execs it exactly
as it would exec torchrun. Like torchrun it starts --nproc-per-node workers, each in its own session
(torch.distributed.elastic starts ranks with start_new_session=True), and each worker leaves a double-forked
grandchild behind (a process re-parented away from the tree); rank 0 prints iteration lines and, at the end,
the workload's PARASWEEP_RESULT line. Extra flags (backend.extra_args): --fake-seconds S (run time, default 2).
"""

import json
import os
import subprocess
import sys
import time


def _arg(argv: list, name: str, default: str) -> str:
    return argv[argv.index(name) + 1] if name in argv else default


def worker(rank: int, seconds: float) -> None:
    if os.fork() == 0:  # a double-forked, detached helper: it escapes any process tree but the subreaper's
        os.setsid()
        if os.fork() == 0:
            time.sleep(seconds + 600)
            os._exit(0)
        os._exit(0)
    steps = max(1, int(seconds / 0.2))
    for i in range(1, steps + 1):
        time.sleep(seconds / steps)
        if rank == 0:
            print(f"[parasweep] iteration {i}/{steps} | phase measure | step time (ms): 200.0 | lm loss: 1.0 | "
                  f"tokens/s: 100.0", flush=True)
    if rank == 0:
        print("PARASWEEP_RESULT " + json.dumps({"step_time_s": 0.2, "tokens_per_s": 100.0 + os.getpid() % 7,
                                                "peak_mem_gb": 0.01}), flush=True)


def main(argv: list) -> int:
    if argv[:1] == ["--fake-worker"]:
        worker(int(argv[1]), float(argv[2]))
        return 0
    nproc = int(_arg(argv, "--nproc-per-node", "1"))
    seconds = float(_arg(argv, "--fake-seconds", "2"))
    ranks = [subprocess.Popen([sys.executable, __file__, "--fake-worker", str(r), str(seconds)], start_new_session=True)
             for r in range(nproc)]
    return max(p.wait() for p in ranks)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
