"""Where the shipped config tree is found: the wheel's `launcher.conf`, else `conf/` at the checkout's root."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib import resources
from pathlib import Path

from launcher.config import paths

REPO = Path(__file__).resolve().parents[2]


def test_a_checkout_without_the_packaged_tree_finds_conf_beside_launcher(monkeypatch):
    def no_package(name):
        raise ModuleNotFoundError(name)

    monkeypatch.setattr(resources, "files", no_package)
    found = paths.conf_dir()
    assert found == REPO / "conf"
    assert (found / "cluster").is_dir() and (found / "sweep" / "tiny.yaml").is_file()


def test_a_plain_checkout_on_pythonpath_finds_the_config_tree(tmp_path):
    # A machine where the project is not installed (a GPU node with its own torch): the checkout on PYTHONPATH.
    # -S leaves out site-packages, and with them the editable install's mapping of launcher.conf.
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    code = "from launcher.config.paths import conf_dir; print(conf_dir())"
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert out.returncode == 0, out.stderr
    assert (Path(out.stdout.strip()) / "model" / "tiny.yaml").is_file()
