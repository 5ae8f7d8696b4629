"""launcher.run.plan_store: a resume reads the plan its ledger keeps instead of planning again, plans again when
anything the plan depends on changed, and the ledger stays the one source of truth when a launcher is killed
(SIGKILL) while planning, while inserting the plan, or right after."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from conftest import REPO
from test_sweep_loop import lay

from launcher.__main__ import sweep_hooks
from launcher.core.console import Reporter
from launcher.core.layout import Layout
from launcher.core.record import TrialRecord
from launcher.plan.constants import DEFAULT
from launcher.plan.planner import make_plan
from launcher.run import loop as loop_module
from launcher.run.ledger import Ledger
from launcher.run.plan_store import StoredPlan, plan_key

ARGS = ["+sweep=tiny", "tracking.enabled=false", "analysis.confirm_top=0", "monitor.poll_interval_s=0.01",
        "grid.gpus=[2]", "grid.zip=[]", "grid.tp=[1]", "grid.pp=[1]", "grid.mbs=[1,2]", "grid.gbs=[8]",
        "grid.include=[]"]


def test_the_key_changes_with_the_config_and_the_constants(load):
    cfg = load(*ARGS)
    assert plan_key(cfg) == plan_key(load(*ARGS))
    assert plan_key(cfg) != plan_key(load(*ARGS, "grid.mbs=[1,2,4]"))
    assert plan_key(cfg) != plan_key(cfg, DEFAULT.with_values(gemm_eff_max=0.5))


def test_the_plan_is_kept_with_its_trials_or_not_at_all(tmp_path):
    with Ledger(tmp_path / "ledger.sqlite") as ledger:
        assert ledger.stored_plan() is None
        with pytest.raises(RuntimeError):
            ledger.add_trials((TrialRecord(k, i, lay(1)) if k != "boom" else _boom() for i, k in
                               enumerate(["a", "b", "boom"])), plan=("k1", ["a", "b"]))
        assert ledger.stored_plan() is None and not ledger.config_hashes()  # rolled back together
        assert ledger.add_trials(iter([TrialRecord("a", 0, lay(1)), TrialRecord("b", 1, lay(2))]),
                                 plan=("k1", ["b", "a"])) == 2
        assert ledger.stored_plan() == ("k1", ["b", "a"])
        assert ledger.add_trials([TrialRecord("a", 0, lay(1))], plan=("k2", ["a"])) == 0  # known: the key moves on
        assert ledger.stored_plan() == ("k2", ["a"])
        assert ledger.layouts() == {"a": Layout.from_dict(lay(1)), "b": Layout.from_dict(lay(2))}
    stored = StoredPlan("k1", ("b", "a"), tmp_path / "ledger.sqlite")  # read when asked, in plan order
    assert stored.layouts == (Layout.from_dict(lay(2)), Layout.from_dict(lay(1)))


def _boom() -> TrialRecord:
    raise RuntimeError("killed in the middle of the plan")


class Planning:
    """Counts make_plan calls (`fail`: a call is the test's failure)."""

    def __init__(self, monkeypatch, fail: bool = False) -> None:
        self.calls, self.fail = 0, fail

        def counted(*args, **kwargs):
            self.calls += 1
            assert not self.fail, "planned again although the ledger keeps this plan"
            return make_plan(*args, **kwargs)
        monkeypatch.setattr(loop_module, "make_plan", counted)


def _run(load, root: Path, monkeypatch, *extra: str) -> int:
    from test_refusal import RefusingRunner

    args = [*ARGS, f"sweep.root_dir={root}", *extra]
    runner = RefusingRunner(False)
    monkeypatch.setattr(loop_module, "make_runner", lambda *_: runner)
    return loop_module.run_sweep(load(*args), args, hooks=sweep_hooks(Reporter.quiet()), reporter=Reporter.quiet())


def _states(root: Path) -> Counter:
    with Ledger(root / "tiny" / "ledger.sqlite") as ledger:
        return Counter(str(r.state) for r in ledger.trials())


@pytest.mark.slow  # four short sweeps: ~10 s on the shared 2-core machine
def test_a_resume_reads_the_stored_plan_and_plans_again_only_when_it_changed(load, tmp_path, monkeypatch):
    root = tmp_path / "sweeps"
    first = Planning(monkeypatch)
    assert _run(load, root, monkeypatch) == 0 and first.calls == 1
    assert _states(root) == {"ok": 2}
    Planning(monkeypatch, fail=True)
    assert _run(load, root, monkeypatch) == 0 and _states(root) == {"ok": 2}
    wider = Planning(monkeypatch)
    assert _run(load, root, monkeypatch, "grid.mbs=[1,2,4]") == 0 and wider.calls == 1
    assert _states(root) == {"ok": 3}  # the new trial ran, the others were kept
    csv = root / "tiny" / "plan.csv"
    os.utime(csv, ns=(0, 0))  # what a copy that drops the time does: the same plan.csv, so no planning
    Planning(monkeypatch, fail=True)
    assert _run(load, root, monkeypatch, "grid.mbs=[1,2,4]") == 0 and _states(root) == {"ok": 3}
    for change in (lambda: csv.write_text(csv.read_text() + "\n"), csv.unlink):  # not the plan.csv of the plan
        change()
        again = Planning(monkeypatch)
        assert _run(load, root, monkeypatch, "grid.mbs=[1,2,4]") == 0 and again.calls == 1
        assert csv.is_file() and csv.read_text().count("\n") == 4  # written again: header and 3 trials


CHILD = r"""
import os, signal, sys
sys.path[:0] = [sys.argv[1], os.path.join(sys.argv[1], "tests"), os.path.join(sys.argv[1], "tests", "run")]
from test_refusal import RefusingRunner
from launcher.__main__ import sweep_hooks
from launcher.config.load import load_config
from launcher.core.console import Reporter
from launcher.core.layout import Layout
from launcher.run import loop, ledger as ledger_module

point, args = sys.argv[2], sys.argv[3:]

def die(*_a, **_k):
    os.kill(os.getpid(), signal.SIGKILL)

Ledger = ledger_module.Ledger
set_meta, add_trials = Ledger.set_meta, Ledger.add_trials
if point == "planning":
    loop.make_plan = die
elif point in ("rows", "key"):  # inside the insert's transaction: the trials' rows, then the plan's key, written
    def meta(self, key, value):
        if key == {"rows": ledger_module.PLAN_KEY, "key": ledger_module.PLAN_TRIALS}[point]:
            die()
        set_meta(self, key, value)
    Ledger.set_meta = meta
else:  # committed
    def added(self, *a, **k):
        add_trials(self, *a, **k)
        die()
    Ledger.add_trials = added
loop.make_runner = lambda *_: RefusingRunner(False)
loop.run_sweep(load_config(args), args, hooks=sweep_hooks(Reporter.quiet()), reporter=Reporter.quiet())
"""


@pytest.mark.slow  # four launchers killed and four resumed: ~30 s on the shared 2-core machine
@pytest.mark.parametrize("point", ["planning", "rows", "key", "committed"])
def test_a_launcher_killed_around_the_plan_leaves_the_ledger_whole_and_the_next_one_runs_it(load, tmp_path,
                                                                                        monkeypatch, point):
    root = tmp_path / "sweeps"
    child = subprocess.run([sys.executable, "-c", CHILD, str(REPO), point, *ARGS, f"sweep.root_dir={root}"],
                           cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True,
                           timeout=300)
    assert child.returncode == -9, child.stderr[-2000:]
    path = root / "tiny" / "ledger.sqlite"
    if point == "planning":
        assert not path.exists()
    else:
        db = sqlite3.connect(path)
        trials = db.execute("SELECT count(*) FROM trials").fetchone()[0]
        keys = db.execute("SELECT count(*) FROM meta WHERE key IN ('plan_key', 'plan_trials')").fetchone()[0]
        db.close()
        assert (trials, keys) == ((2, 2) if point == "committed" else (0, 0))
    resumed = Planning(monkeypatch, fail=point == "committed")  # committed: the stored plan is read back
    assert _run(load, root, monkeypatch) == 0
    assert resumed.calls == (0 if point == "committed" else 1)
    assert _states(root) == {"ok": 2}
