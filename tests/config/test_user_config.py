"""The user's own config folders: --config-dir, PARASWEEP_CONFIG_DIR, hydra.searchpath and +sweep=PATH, searched
before the shipped tree (a user file shadows a shipped one of the same name); --list; the messages that list the
valid options include the user's files."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import run_launcher

from launcher.config.load import load_config, reproducible_args, resolve_search_path
from launcher.config.paths import CONFIG_DIR_ENV
from launcher.core.errors import ConfigError

MODEL = """# my 2-layer test model
name: {name}
layers: {layers}
hidden: 128
heads: 2
source: "a test"
"""

SWEEP = """# @package _global_
# my sweep
defaults:
  - override /model: mine
sweep:
  name: mysweep
grid:
  gpus: [2]
  tp: [1, 2]
"""


def user_dir(root: Path, name: str = "conf", layers: int = 2) -> Path:
    folder = root / name
    (folder / "model").mkdir(parents=True)
    (folder / "sweep").mkdir()
    (folder / "model" / "mine.yaml").write_text(MODEL.format(name="mine", layers=layers))
    (folder / "sweep" / "mysweep.yaml").write_text(SWEEP)
    return folder


@pytest.fixture(autouse=True)
def no_env(monkeypatch):
    monkeypatch.delenv(CONFIG_DIR_ENV, raising=False)


def test_a_user_model_extends_the_shipped_ones(tmp_path):
    folder = user_dir(tmp_path)
    cfg = load_config(["--config-dir", str(folder), "model=mine"])
    assert (cfg.model.name, cfg.model.layers, cfg.model.source) == ("mine", 2, "a test")
    assert load_config(["--config-dir", str(folder), "model=llama2-70b"]).model.layers == 80  # shipped still there


def test_a_user_file_shadows_the_shipped_one_of_the_same_name(tmp_path):
    folder = user_dir(tmp_path)
    (folder / "model" / "tiny.yaml").write_text(MODEL.format(name="tiny", layers=3))
    assert load_config([f"--config-dir={folder}", "model=tiny"]).model.layers == 3
    assert load_config(["model=tiny"]).model.layers == 4  # without the folder: the shipped file


@pytest.mark.parametrize("how", ["flag", "env", "searchpath", "sweep_path"])
def test_every_way_of_naming_the_folder_finds_the_sweep_and_its_model(tmp_path, monkeypatch, how):
    folder = user_dir(tmp_path)
    args = {"flag": ["--config-dir", str(folder), "+sweep=mysweep"],
            "env": ["+sweep=mysweep"],
            "searchpath": [f"hydra.searchpath=[file://{folder}]", "+sweep=mysweep"],
            "sweep_path": [f"+sweep={folder / 'sweep' / 'mysweep.yaml'}"]}[how]
    if how == "env":
        monkeypatch.setenv(CONFIG_DIR_ENV, f":{folder}:")  # empty entries are ignored, as in PATH
    cfg = load_config(args)
    assert cfg.sweep.name == "mysweep" and cfg.model.name == "mine" and cfg.grid.tp == [1, 2]


def test_precedence_flag_then_searchpath_then_env(tmp_path, monkeypatch):
    first, second, third = (user_dir(tmp_path, f"c{i}", layers=i) for i in (1, 2, 3))
    monkeypatch.setenv(CONFIG_DIR_ENV, f"{third}:{second}")
    dirs, rest = resolve_search_path([f"hydra.searchpath=[file://{second}]", "model=mine"], [str(first)])
    assert dirs == [first, second, third] and rest == ["model=mine"]
    assert load_config(["--config-dir", str(first), "model=mine"]).model.layers == 1
    assert load_config(["model=mine"]).model.layers == 3  # the env list in its own order: third first


def test_the_recorded_command_names_every_folder_in_effect(tmp_path, monkeypatch):
    folder = user_dir(tmp_path)
    monkeypatch.setenv(CONFIG_DIR_ENV, str(folder))
    assert reproducible_args(["+sweep=mysweep", "dry_run=true"]) == ["--config-dir", str(folder), "+sweep=mysweep",
                                                                    "dry_run=true"]
    path_form = reproducible_args([f"+sweep={folder / 'sweep' / 'mysweep.yaml'}"])
    assert path_form == ["--config-dir", str(folder), "+sweep=mysweep"]


@pytest.mark.parametrize("setup, args, needle", [
    (None, ["--config-dir", "{tmp}/nowhere"], "no such folder"),
    ("empty", ["--config-dir", "{tmp}/empty"], "holds none of model/"),
    ("config", ["--config-dir", "{tmp}/conf"], "holds a config.yaml"),
    (None, ["+sweep={tmp}/conf/sweep/absent.yaml"], "no such file"),
    ("loose", ["+sweep={tmp}/loose.yaml"], "must lie in a folder named sweep/"),
    ("nopackage", ["--config-dir", "{tmp}/conf", "+sweep=nopkg"], "must start with the line '# @package _global_'"),
    (None, ["--config-dir", "{tmp}/conf", "model=mien"], "did you mean 'mine'?"),
    (None, ["hydra.searchpath=file:///x"], "give a list of folders"),
])
def test_mistakes_with_folders_are_one_clear_message(tmp_path, setup, args, needle):
    folder = user_dir(tmp_path)
    if setup == "empty":
        (tmp_path / "empty").mkdir()
    elif setup == "config":
        (folder / "config.yaml").write_text("defaults: []\n")
    elif setup == "loose":
        (tmp_path / "loose.yaml").write_text(SWEEP)
    elif setup == "nopackage":
        (folder / "sweep" / "nopkg.yaml").write_text(SWEEP.split("\n", 1)[1])
    with pytest.raises(ConfigError) as err:
        load_config([a.format(tmp=tmp_path) for a in args])
    assert needle in str(err.value) and "\n" not in str(err.value)
    if setup == "nopackage":
        assert str(folder / "sweep" / "nopkg.yaml") in str(err.value)
    if setup == "loose":
        assert "--config-dir DIR +sweep=loose" in str(err.value)


def test_unknown_names_list_the_users_files_with_their_folder(tmp_path):
    folder = user_dir(tmp_path)
    with pytest.raises(ConfigError) as err:
        load_config(["--config-dir", str(folder), "+sweep=nope"])
    assert f"mysweep (from {folder})" in str(err.value) and "70b" in str(err.value)
    with pytest.raises(ConfigError) as err:
        load_config(["model=nope"])  # no user folder: the message says how to add one
    assert "--config-dir DIR" in str(err.value) and "PARASWEEP_CONFIG_DIR" in str(err.value)


def test_list_shows_shipped_and_user_options_with_their_folder(tmp_path):
    folder = user_dir(tmp_path)
    (folder / "model" / "tiny.yaml").write_text(MODEL.format(name="tiny", layers=3))
    proc = run_launcher("--list", cwd=tmp_path, env={CONFIG_DIR_ENV: str(folder)})
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert f"your config folders: {folder}" in lines
    assert any(line.split()[:2] == ["llama2-70b", "shipped:"] for line in lines)
    assert any(line.split()[:2] == ["mine", str(folder) + ":"] and "my 2-layer test model" in line for line in lines)
    assert any(line.split()[:1] == ["tiny"] and "shadows the shipped one" in line for line in lines)
    assert any(line.split()[:2] == ["mysweep", str(folder) + ":"] for line in lines)
    for group in ("model", "cluster", "backend", "executor", "sweep"):
        assert any(line.startswith(f"{group} (") for line in lines), group


def test_a_bare_launcher_prints_usage_and_runs_nothing(tmp_path):
    proc = run_launcher(cwd=tmp_path, timeout_s=120)
    assert proc.returncode == 2 and proc.stderr.startswith("usage: python -m launcher")
    assert not (tmp_path / "sweeps").exists()
    unknown = run_launcher("--configdir", "x", cwd=tmp_path, timeout_s=120)
    assert unknown.returncode == 2 and unknown.stderr.strip() == ("error: unknown option '--configdir': see "
                                                                 "python -m launcher --help")
