"""The workload ends without interpreter finalisation once its result is out (launcher.workload.__main__.exit_now):
finalisation tore down gloo's C++ threads in a race and now and then aborted a rank after a successful run."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_exit_now_flushes_then_ends_the_process_without_finalisation():
    script = textwrap.dedent("""
        import atexit, sys
        from launcher.workload.__main__ import exit_now
        atexit.register(lambda: print("finalised", flush=True))  # must not run: no finalisation
        sys.stdout.write("PARASWEEP_RESULT {}")                   # unflushed: exit_now must flush it
        exit_now(0)
    """)
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == "PARASWEEP_RESULT {}"

