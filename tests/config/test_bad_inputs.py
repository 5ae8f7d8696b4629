"""Every bad input is one clean message and exit 2, before anything is submitted.

A table of bad inputs, each run through `python -m launcher`'s entry point in-process: exit code 2, exactly one
line on stderr that names the field (or the file and line), no traceback, and nothing submitted (no ledger row
in a submitted or running state, no job folder). The non-finite cases are generated from the schema: every float
field gets nan, inf and -inf.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import shutil
import sqlite3
import typing
from pathlib import Path

import pytest

from launcher.__main__ import main
from launcher.config.paths import conf_dir
from launcher.config.schema import RootConfig

DRY = ["+sweep=tiny", "dry_run=true"]
RUN = ["+sweep=tiny", "tracking.enabled=false"]  # a real run: the checks that only matter then


def float_fields(schema: type = RootConfig, prefix: str = "") -> list[str]:
    found = []
    hints = typing.get_type_hints(schema)
    for f in dataclasses.fields(schema):
        tp = hints[f.name]
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        tp = args[0] if typing.get_origin(tp) is typing.Union and len(args) == 1 else tp
        if dataclasses.is_dataclass(tp):
            found += float_fields(tp, f"{prefix}{f.name}.")
        elif tp is float:
            found.append(f"{prefix}{f.name}")
    return found


NON_FINITE = [(f"{field}={value}", [*DRY, f"{field}={value}"], field)
              for field in float_fields() for value in ("nan", "inf", "-inf")]

SWEEP_FILES = {  # conf/sweep/NAME.yaml written into a copy of conf/ -> the needle its message must hold
    "syntax": ("# @package _global_\nsweep: [\n  name: x\n", "syntax.yaml:"),
    "tab": ("# @package _global_\nsweep:\n\tname: x\n", "tab.yaml:3"),
    "dupkey": ("# @package _global_\nsweep:\n  name: a\n  name: b\n", "dupkey.yaml:4"),
    "latin1": (b"# @package _global_\nsweep:\n  name: caf\xe9\n", "latin1.yaml:3"),
    "noheader": ("sweep:\n  name: x\n", "@package _global_"),
    "newline": ('# @package _global_\nexecutor:\n  account: "a\\ntouch /tmp/x"\n', "executor.account"),
    "envkey": ('# @package _global_\nexecutor:\n  env: {"A;touch x;B": "1"}\n', "executor.env"),
    "sbatchkey": ('# @package _global_\nexecutor:\n  sbatch_args: {"mail-type\\ntouch x": "FAIL"}\n',
                  "executor.sbatch_args"),
    "nul": ('# @package _global_\nbackend:\n  extra_args: ["--x\\0y"]\n', "backend.extra_args"),
    "unknown": ("# @package _global_\ngrid:\n  tpp: [1, 2]\n", "grid.tpp"),
}
MODEL_FILES = {"tabbed": ("name: tabbed\nlayers: 2\n\thidden: 64\n", "tabbed.yaml:3")}

OTHER = [
    # Hydra's append syntax must not bypass the schema
    ("+grid.tpp", [*DRY, "+grid.tpp=[1,2]"], "grid.tpp"),
    ("+monitor.hang_timout_min", [*DRY, "+monitor.hang_timout_min=0.1"], "monitor.hang_timout_min"),
    ("+foo", [*DRY, "+foo=bar"], "foo"),
    ("++foo", [*DRY, "++foo=bar"], "foo"),
    ("+executor.acount", [*DRY, "+executor.acount=x"], "executor.acount"),
    ("+model.layerz", [*DRY, "+model.layerz=3"], "model.layerz"),
    ("+plan.max_trail", [*DRY, "+plan.max_trail=3"], "plan.max_trail"),
    ("+backend.extra", [*DRY, "+backend.extra=[a]"], "backend.extra"),
    # names and folders
    ("long sweep.name", [*DRY, "sweep.name=" + "a" * 300], "sweep.name"),
    ("sweep.name with slash", [*DRY, "sweep.name=a/b"], "sweep.name"),
    ("root_dir under a file", [*DRY, "sweep.root_dir=AFILE/sweeps"], "sweep.root_dir"),
    ("root_dir in /proc", [*DRY, "sweep.root_dir=/proc/parasweep"], "sweep.root_dir"),
    ("root_dir too long", [*DRY, "sweep.root_dir=" + "/".join(["d" * 250] * 20)], "sweep.root_dir"),
    # the MLflow UI link lands in report.html
    ("ui_url javascript", [*DRY, "tracking.ui_url='javascript:alert(1)'"], "tracking.ui_url"),
    ("ui_url data", [*DRY, "tracking.ui_url='data:text/html,<script>x</script>'"], "tracking.ui_url"),
    ("ui_url file", [*DRY, "tracking.ui_url='file:///etc/passwd'"], "tracking.ui_url"),
    ("ui_url no scheme", [*DRY, "tracking.ui_url=localhost:5000"], "tracking.ui_url"),
    ("ui_url empty", [*DRY, "tracking.ui_url=''"], "tracking.ui_url"),
    ("ui_url unquoted", [*DRY, "tracking.ui_url=javascript:alert(1)"], "tracking.ui_url"),
    # keys that end up in scripts
    ("env key", [*DRY, "executor.env={'A;B': '1'}"], "executor.env"),
    ("env key digit", [*DRY, "executor.env={'1A': '1'}"], "executor.env"),
    ("sbatch key", [*DRY, "executor.sbatch_args={'mail type': 'x'}"], "executor.sbatch_args"),
    # numbers
    ("timeout 0", [*DRY, "executor.timeout_min=0"], "executor.timeout_min"),
    ("signal delay", [*DRY, "executor.signal_delay_s=-1"], "executor.signal_delay_s"),
    ("attempts 0", [*DRY, "retry.max_attempts=0"], "retry.max_attempts"),
    ("grid cap 0", [*DRY, "plan.max_grid_points=0"], "plan.max_grid_points"),
    ("grid over the cap", [*DRY, "plan.max_grid_points=5"], "plan.max_grid_points"),
    ("early stop after 1 iteration", [*DRY, "plan.early_stop_min_iters=1"], "plan.early_stop_min_iters"),
    ("early stop text", [*DRY, "plan.early_stop=sometimes"], "plan.early_stop"),
    ("stop rule text", [*DRY, "plan.stop_when_converged=maybe"], "plan.stop_when_converged"),
    ("network probe text", [*DRY, "plan.network_probe=sometimes"], "plan.network_probe"),
    ("recompute", [*DRY, "grid.recompute=[sometimes]"], "grid.recompute"),
    ("poll interval text", [*DRY, "monitor.poll_interval_s=fast"], "monitor.poll_interval_s"),
    ("unknown model", [*DRY, "model=gpt-5"], "model"),
    ("detach local trials", [*DRY, "executor.detach_on_term=true"], "executor.detach_on_term"),
    ("detach text", [*DRY, "executor=slurm", "executor.detach_on_term=sometimes"], "executor.detach_on_term"),
    # the run environment and the sweep folder's state (real runs)
    ("slurm without its commands", [*RUN, "executor=slurm"], "sbatch"),
    ("missing Megatron checkout", ["+sweep=70b", "executor=local", "tracking.enabled=false",
                                   "backend.megatron_path=/proc/no-megatron-here", "backend.data_path=/c/d",
                                   "backend.vocab_file=/c/v", "backend.merge_file=/c/m"], "backend.megatron_path"),
    ("corrupt ledger", [*RUN, "sweep.name=corrupt"], "ledger.sqlite"),
    ("foreign ledger", [*RUN, "sweep.name=foreign"], "ledger.sqlite"),
]


def _cases():
    cases = [pytest.param(args, needle, id=name) for name, args, needle in NON_FINITE + OTHER]
    cases += [pytest.param(["+sweep=" + name, "dry_run=true"], needle, id=f"sweep file {name}")
              for name, (_, needle) in SWEEP_FILES.items()]
    cases += [pytest.param(["+sweep=tiny", "dry_run=true", "model=" + name], needle, id=f"model file {name}")
              for name, (_, needle) in MODEL_FILES.items()]
    return cases


@pytest.fixture(scope="module")
def bad_conf(tmp_path_factory) -> Path:
    """A copy of conf/ with the broken files added (the shipped tree stays untouched)."""
    conf = tmp_path_factory.mktemp("conf") / "conf"
    shutil.copytree(conf_dir(), conf)
    for folder, files in (("sweep", SWEEP_FILES), ("model", MODEL_FILES)):
        for name, (text, _) in files.items():
            path = conf / folder / f"{name}.yaml"
            path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return conf


@pytest.fixture
def world(in_tmp, bad_conf, monkeypatch):
    """The working directory holds a file (for root_dir under a file) and broken ledgers; no SLURM on PATH."""
    monkeypatch.setattr("launcher.config.load.conf_dir", lambda: bad_conf)
    (in_tmp / "AFILE").write_text("not a folder")
    corrupt = in_tmp / "sweeps" / "corrupt" / "ledger.sqlite"
    corrupt.parent.mkdir(parents=True)
    corrupt.write_bytes(b"SQLite format 3\x00" + bytes(range(256)) * 20)
    foreign = in_tmp / "sweeps" / "foreign" / "ledger.sqlite"
    foreign.parent.mkdir(parents=True)
    db = sqlite3.connect(foreign)
    db.execute("CREATE TABLE accounts (id INTEGER, owner TEXT)")
    db.commit()
    db.close()
    empty = in_tmp / "empty-bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))  # no sbatch/sacct/scancel (nothing here runs a program)
    return in_tmp


def nothing_submitted(work: Path) -> list[str]:
    problems = []
    for ledger in (work / "sweeps").glob("*/ledger.sqlite"):
        try:
            db = sqlite3.connect(ledger)
            live = db.execute("SELECT count(*) FROM trials WHERE state IN ('submitted', 'running')").fetchone()[0]
            db.close()
        except sqlite3.DatabaseError:
            continue  # the broken ledgers of the table itself
        if live:
            problems.append(f"{ledger}: {live} live trials")
    problems += [str(p) for p in (work / "sweeps").glob("*/jobs/*")]
    return problems


def test_the_table_has_enough_cases():
    assert len(_cases()) >= 60


@pytest.mark.parametrize("args, needle", _cases())
def test_bad_input_is_one_clean_message_and_exit_2(world, capsys, args, needle):
    code = main(args)
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert code == 2, (code, err[-2000:], out[-2000:])
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert needle in lines[0], lines[0]
    assert "Traceback" not in err + out
    assert nothing_submitted(world) == []


def test_a_dry_run_leaves_a_running_sweeps_plan_alone(in_tmp, capsys):
    import fcntl

    folder = in_tmp / "sweeps" / "tiny"
    folder.mkdir(parents=True)
    (folder / "plan.csv").write_text("the running sweep's plan\n")
    with (folder / ".lock").open("a+") as lock:  # what a running launcher holds
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert main(["+sweep=tiny", "dry_run=true"]) == 0
    assert (folder / "plan.csv").read_text() == "the running sweep's plan\n"
    assert (folder / "plan.dry-run.csv").read_text().startswith("rank,")
    assert "plan.dry-run.csv" in capsys.readouterr().err
    assert main(["+sweep=tiny", "dry_run=true"]) == 0  # nobody running: the lock is taken, plan.csv written
    assert (folder / "plan.csv").read_text().startswith("rank,")


def test_analysis_of_a_folder_without_a_ledger_exits_2_and_creates_nothing(in_tmp, capsys):
    from analysis.__main__ import main as analysis_main

    assert main(["+sweep=tiny", "dry_run=true"]) == 0  # a folder with a plan, never run
    folder = in_tmp / "sweeps" / "tiny"
    from launcher.config.load import load_config, to_yaml

    (folder / "config.yaml").write_text(to_yaml(load_config(["+sweep=tiny"])))
    capsys.readouterr()
    assert analysis_main([str(folder), "--no-mlflow"]) == 0  # a dry run's folder: the plan is summarised
    (folder / "plan.csv").unlink()                             # neither a plan nor a ledger: nothing to analyse
    capsys.readouterr()
    assert analysis_main([str(folder), "--no-mlflow"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "ledger" in err, err
    assert not (folder / "ledger.sqlite").exists()


def test_an_unwritable_root_dir_is_refused(in_tmp, capsys):
    import os

    if os.geteuid() == 0:
        pytest.skip("root writes through permission bits; a read-only mount is tested in test_storage_failures")
    locked = in_tmp / "locked"
    locked.mkdir(mode=0o555)
    assert main(["+sweep=tiny", "dry_run=true", f"sweep.root_dir={locked}"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "sweep.root_dir" in err


def test_a_dry_run_never_overwrites_a_recorded_sweeps_plan_and_says_how_it_differs(in_tmp, capsys):
    """Issue 20: a dry run with other grid values after a sweep ran replaced its plan.csv silently (and the next
    `python -m analysis` put that plan in the MLflow parent run)."""
    from launcher.run.ledger import Ledger

    folder = in_tmp / "sweeps" / "tiny"
    assert main(["+sweep=tiny", "dry_run=true"]) == 0  # no ledger yet: plan.csv is the dry run's to write
    recorded = (folder / "plan.csv").read_text()
    Ledger(folder / "ledger.sqlite").close()  # what a sweep that ran leaves
    capsys.readouterr()
    assert main(["+sweep=tiny", "grid.gpus=[16]", "dry_run=true"]) == 0
    out, err = capsys.readouterr()
    assert (folder / "plan.csv").read_text() == recorded
    assert (folder / "plan.dry-run.csv").read_text().startswith("rank,")
    assert "recorded sweep" in err and "plan.dry-run.csv" in err
    def kept(text: str) -> set[str]:
        return {r["config_hash"] for r in csv.DictReader(io.StringIO(text)) if r["selection"] != "pruned"}

    old, new = kept(recorded), kept((folder / "plan.dry-run.csv").read_text())
    assert old - new and new != old
    assert (f"compared with the recorded sweeps/tiny/plan.csv ({len(old)} kept trials): {len(old & new)} in both"
            in out), out
    assert f"{len(old - new)} only in the recorded plan: " in out, out
    assert (f"{len(new - old)} only in this dry run: " in out) == bool(new - old), out
    assert main(["+sweep=tiny", "dry_run=true"]) == 0  # the recorded grid again: nothing differs
    assert f"the same {len(old)} kept trials as the recorded" in capsys.readouterr().out


@pytest.mark.parametrize("args", [DRY, RUN], ids=["dry-run", "run"])
def test_a_dangling_link_as_the_sweep_folder_is_one_message(in_tmp, capsys, args):
    """Issue 19 point 7: `sweeps/x` a symbolic link to nothing gave a FileExistsError traceback."""
    (in_tmp / "sweeps").mkdir()
    (in_tmp / "sweeps" / "tiny").symlink_to(in_tmp / "gone")
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "sweep.name" in err and "symbolic link" in err and "gone" in err, err
    assert not (in_tmp / "gone").exists()
