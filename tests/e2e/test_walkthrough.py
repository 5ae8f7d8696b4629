"""The README's walk-through, run as written: its two blocks are read from README.md (so the test follows the README
and the README cannot drift from what works), in an empty project folder with no network: the model and cluster
files start from shipped ones. The optional step of docs/configuration.md (the shape from the model's own
config.json, here the one kept in tests/fixtures) is run the same way. The file blocks run in bash; every command of
the command block runs as a subprocess (the launcher through conftest.run_launcher)."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from conftest import REPO, run_launcher

FIXTURE = REPO / "tests" / "fixtures" / "hf" / "Llama-3.1-8B" / "config.json"


def doc_block(marker: str, doc: str = "README.md") -> str:
    text = (REPO / doc).read_text()
    found = re.search(rf"<!-- walkthrough:{marker} -->\n```bash\n(.*?)\n```", text, re.DOTALL)
    assert found, f"{doc} has no walkthrough:{marker} block"
    return found.group(1)


def run_files(block: str, project: Path) -> None:
    files = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=project, capture_output=True, text=True,
                           timeout=60)
    assert files.returncode == 0, files.stderr


def run_commands(block: str, project: Path) -> list[tuple[str, subprocess.CompletedProcess]]:
    """Each line of the command block: `export K=V` sets the environment of the following commands; `python -m
    launcher ...` and `python -m analysis ...` run as subprocesses. Any other line fails the test."""
    env: dict[str, str] = {}
    results = []
    for line in block.splitlines():
        words = shlex.split(line.replace("$PWD", str(project)))
        if words[0] == "export":
            key, _, value = words[1].partition("=")
            env[key] = value
        elif words[:3] == ["python", "-m", "launcher"]:
            results.append((line, run_launcher(*words[3:], cwd=project, env=env, timeout_s=300)))
        elif words[:3] == ["python", "-m", "analysis"]:
            results.append((line, subprocess.run([sys.executable, *words[1:]], cwd=project, capture_output=True,
                                                 text=True, timeout=300,
                                                 env={**os.environ, "PYTHONPATH": str(REPO), **env})))
        else:
            raise AssertionError(f"the walk-through's command block has a line this test cannot run: {line!r}")
    return results


def run_walkthrough(project: Path) -> dict[str, str]:
    """The README's command block in `project`: every command succeeds; its outputs by command."""
    results = run_commands(doc_block("commands"), project)
    for line, proc in results:
        assert proc.returncode == 0, (line, proc.stdout[-2000:], proc.stderr[-2000:])
        assert "Traceback" not in proc.stderr, line
    return {line.split()[3] if line.split()[2] == "launcher" else "analysis": proc.stdout for line, proc in results}


def assert_llama31_8b_planned(outputs: dict[str, str], project: Path) -> None:
    listing = outputs["--list"].splitlines()
    conf = str(project / "conf")
    for name in ("my-llama", "our-h100"):
        assert any(line.split()[:2] == [name, f"{conf}:"] for line in listing), (name, listing)
    assert sum(line.split()[:1] == ["my-llama"] for line in listing) == 2  # the model and the sweep

    shown = outputs["model=my-llama"]
    for key, value in (("name", "my-llama"), ("layers", "32"), ("hidden", "4096"), ("kv_heads", "8"),
                       ("ffn_hidden", "14336"), ("vocab", "128256"), ("seq_len", "8192"), ("norm", "rmsnorm")):
        assert re.search(rf"^  {key}: {value}$", shown, re.MULTILINE), key
    assert "source: our fine-tune of meta-llama/Llama-3.1-8B" in shown

    plan = outputs["+sweep=my-llama"]
    assert "plan: my-llama — my-llama on our-h100" in plan and "GPU-hours" in plan
    assert (project / "sweeps" / "my-llama" / "plan.csv").is_file()
    assert not (project / "sweeps" / "my-llama" / "ledger.sqlite").exists()
    assert outputs["analysis"].startswith("sweeps/my-llama holds a plan only")


def test_the_readme_walkthrough_runs_as_written_from_shipped_configs(tmp_path):
    project = tmp_path / "myproject"
    project.mkdir()  # empty: no config.json, nothing downloaded
    run_files(doc_block("files"), project)
    assert_llama31_8b_planned(run_walkthrough(project), project)


def test_the_optional_config_json_step_reads_the_shape_from_the_file(tmp_path):
    project = tmp_path / "myproject"
    (project / "models" / "my-llama").mkdir(parents=True)
    shutil.copy(FIXTURE, project / "models" / "my-llama" / "config.json")  # "from your checkpoint, or downloaded"
    run_files(doc_block("files"), project)
    run_files(doc_block("hf-model", "docs/configuration.md"), project)
    assert "llama3.1-8b" not in (project / "conf" / "model" / "my-llama.yaml").read_text()  # the file, not a preset
    assert_llama31_8b_planned(run_walkthrough(project), project)
    (project / "models" / "my-llama" / "config.json").unlink()
    gone = run_launcher("model=my-llama", "--cfg", cwd=project, env={"PARASWEEP_CONFIG_DIR": str(project / "conf")})
    assert gone.returncode == 2 and "config.json" in gone.stderr + gone.stdout  # it was read from there
