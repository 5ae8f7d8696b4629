"""`python -m launcher` as a user runs it: exit codes, one clear message, no traceback, nothing submitted."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def run(*args, cwd):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run([sys.executable, "-m", "launcher", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


def test_dry_run_prints_ranked_table_and_writes_plan(tmp_path):
    proc = run("+sweep=70b", "dry_run=true", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "plan: 70b" in out and "TFLOPs/GPU" in out and "tokens/s" in out
    assert "rejected" in out and "predicted_oom" in out and "GPU-hours" in out
    assert (tmp_path / "sweeps" / "70b" / "plan.csv").is_file()
    assert not (tmp_path / "sweeps" / "70b" / "ledger.sqlite").exists()  # a dry run submits and records nothing


@pytest.mark.parametrize("args, needle", [
    (["model=llama-70b", "dry_run=true"], "valid: bloom-176b"),
    (["cluster=a100", "dry_run=true"], "a100-80g"),
    (["+sweep=70b", "model.hidden=-1", "dry_run=true"], "model.hidden"),
    (["+sweep=70b", "grid.mbs=[0]", "dry_run=true"], "grid.mbs"),
    (["+sweep=70b", "grid.tp=[3]", "grid.nodes=[3]", "grid.pp=[1]", "dry_run=true"], "heads_tp"),
    (["+sweep=70b", "grid.tpp=[2]", "dry_run=true"], "grid.tpp"),
    (["+sweep=70b", "executor.partiton=x", "dry_run=true"], "valid keys"),
    (["sweep=70b"], "+sweep=NAME"),
    (["+sweep=70b"], "backend.megatron.path"),  # a real run needs the checkout: refused before any submission
])
def test_bad_input_exits_2_with_one_message(tmp_path, args, needle):
    proc = run(*args, cwd=tmp_path)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert needle in proc.stderr
    assert "Traceback" not in proc.stderr and "Traceback" not in proc.stdout
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "sweeps" / "70b" / "ledger.sqlite").exists()


def test_help_is_fast_and_imports_no_heavy_modules(tmp_path):
    code = ("import sys, launcher.plan.planner, launcher.estimate, launcher.config;"
            "heavy = [m for m in ('torch', 'submitit', 'mlflow') if m in sys.modules]; print(heavy)")
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True)
    assert proc.stdout.strip() == "[]"
    assert run("--help", cwd=tmp_path).returncode == 0


@pytest.mark.slow
def test_plain_wheel_install_finds_its_configs(tmp_path):
    """`pip install .` (not editable) must ship conf/ inside the package: install into a folder, run elsewhere."""
    wheel_dir, target = tmp_path / "wheel", tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                    str(wheel_dir), str(REPO)], check=True, timeout=300)
    (wheel,) = wheel_dir.glob("parasweep-*.whl")
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target), str(wheel)],
                   check=True, timeout=300)
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(target)
    proc = subprocess.run([sys.executable, "-m", "launcher", "+sweep=70b", "dry_run=true"], cwd=work, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "plan: 70b" in proc.stdout
    import_path = subprocess.run([sys.executable, "-c", "import launcher; print(launcher.__file__)"], cwd=work,
                                 env=env, capture_output=True, text=True).stdout
    assert str(target) in import_path  # really the installed copy, not the checkout


def test_a_folder_of_another_setup_is_refused_before_anything_runs(tmp_path):
    from launcher.run.ledger import Ledger

    folder = tmp_path / "sweeps" / "tiny"
    with Ledger(folder / "ledger.sqlite") as ledger:
        ledger.set_meta("context", "tiny/4x128x4x4x512x128x1024|local-cpu|torch/fp32/2+4/1234")
    proc = run("+sweep=tiny", "tracking.enabled=false", cwd=tmp_path)
    assert proc.returncode == 2 and "another setup" in proc.stderr and "sweep.fresh=true" in proc.stderr
    assert not (folder / "config.yaml").exists() and not (folder / "jobs").exists()


def test_a_second_launcher_on_the_same_folder_is_refused(tmp_path):
    import fcntl

    folder = tmp_path / "sweeps" / "tiny"
    folder.mkdir(parents=True)
    with (folder / ".lock").open("a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        proc = run("+sweep=tiny", "tracking.enabled=false", cwd=tmp_path)
        fresh = run("+sweep=tiny", "tracking.enabled=false", "sweep.fresh=true", cwd=tmp_path)
    assert proc.returncode == 2 and "another launcher is running this sweep" in proc.stderr
    assert fresh.returncode == 2 and folder.exists()  # not renamed under the running launcher


@pytest.mark.slow
def test_ctrl_c_ends_with_one_line(tmp_path):
    """Ctrl-C on a terminal signals the launcher and every process of its group (the local jobs' controllers too):
    the user sees the launcher's one line, no traceback from anything."""
    import signal
    import time

    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen([sys.executable, "-m", "launcher", "+sweep=tiny", "tracking.enabled=false"], cwd=tmp_path,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # its own group, as a terminal's foreground job
    jobs = tmp_path / "sweeps" / "tiny" / "jobs"
    deadline = time.time() + 120
    while not any(jobs.glob("*/*_submitted.pkl")) and time.time() < deadline and proc.poll() is None:
        time.sleep(0.5)
    time.sleep(3)  # trials running under their controllers
    os.killpg(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    time.sleep(2)  # anything a dying child still prints would have arrived
    assert proc.returncode == 130
    assert err.strip() == "interrupted: the ledger is intact; run the same command again to resume"


def test_every_package_of_the_checkout_ships_in_the_wheel():
    """pyproject lists the packages by hand (conf/ is mapped in as launcher.conf): a new sub-package must be listed,
    or a plain `pip install .` lacks it."""
    tomllib = pytest.importorskip("tomllib")  # Python >= 3.11

    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(REPO).parts) for top in ("launcher", "analysis")
             for p in (REPO / top).rglob("__init__.py") if "__pycache__" not in p.parts}
    assert found <= listed, sorted(found - listed)


def test_every_data_file_of_a_package_ships_in_the_wheel():
    """A package's non-Python files (the estimator's spread.json, Megatron's flag list) need a package-data pattern,
    or a plain `pip install .` silently loses them (the spread file's absence only drops the intervals)."""
    tomllib = pytest.importorskip("tomllib")
    import fnmatch

    patterns = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    missing = []
    for top in ("launcher", "analysis"):
        for path in (REPO / top).rglob("*"):
            if not path.is_file() or path.suffix in (".py", ".pyc", ".md") or "__pycache__" in path.parts:
                continue
            package = ".".join(path.parent.relative_to(REPO).parts)
            if not any(fnmatch.fnmatch(path.name, p) for p in patterns.get(package, [])):
                missing.append(str(path.relative_to(REPO)))
    assert not missing, missing
