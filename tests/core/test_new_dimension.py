"""A new dimension is one field in launcher/core/layout.py (issue 18): a copy of the project whose Layout has one
more field, `fake`, must carry it into the grid schema and its checks, grid expansion, the label, plan.csv, the
ledger, the MLflow params, the scheduler's distance, the measured tables and the failure classifier's parallel
degrees without an edit anywhere else, and keep the config hash of every layout at its default (older sweeps keep
their trials)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from launcher.core.layout import Layout

ROOT = Path(__file__).resolve().parents[2]
ANCHOR = "    mbs: int = _dim("
FAKE = ('    fake: int = _dim(1, doc="A dimension only tests/core/test_new_dimension.py adds.", kind="split", '
        'grid=(1,), hidden_at=1, hashed_at_default=False)\n')
BASE = dict(gpus=4, nodes=1, tp=1, pp=1, dp=4)

PROBE = """
import json, sys
from dataclasses import asdict
from pathlib import Path

from analysis.logs.families.config import QUANTITY
from analysis.report.tracking import Tracker
from launcher.config.checks import check_grid
from launcher.config.schema import ClusterConfig, GridConfig
from launcher.core.errors import ConfigError
from launcher.core.layout import CATEGORICAL, NUMERIC, Layout
from launcher.core.record import TrialRecord
from launcher.measured import TABLE_LAYOUT
from launcher.plan.grid import expand
from launcher.plan.planner import PLAN_COLUMNS
from launcher.run.ledger import COLUMNS, Ledger

work = Path(sys.argv[1])
base = dict(gpus=4, nodes=1, tp=1, pp=1, dp=4)
lay = Layout(**base, fake=2)
try:
    check_grid(GridConfig(fake=[0]))
    refused = ""
except ConfigError as exc:
    refused = str(exc)
cluster = ClusterConfig(name="c", gpu="g", gpus_per_node=4, nodes=1)
expanded = sorted(x.fake for x in expand(GridConfig(gpus=[4], fake=[1, 2]), cluster))
ledger = Ledger(work / "ledger.db")
ledger.add_trials([TrialRecord(lay.config_hash(), 0, lay)])
stored = ledger.get(lay.config_hash()).layout.fake
ledger.close()
tracker = Tracker(f"sqlite:///{work / 'mlflow.db'}", "exp")
parent = tracker.parent_run("s", "u", "", params={}, tags={})
trial = {**asdict(TrialRecord("h", 0, lay)), "submitted_at": 1.0e9}
params = tracker.client.get_run(tracker.sync_trial("s", "u", parent, trial, {})).data.params
print(json.dumps({
    "label": lay.label(), "default_label": Layout(**base).label(),
    "default_hash": Layout(**base).config_hash("ctx"),
    "hash_differs": lay.config_hash("ctx") != Layout(**base).config_hash("ctx"),
    "grid_default": GridConfig().fake, "refused": refused, "expanded": expanded,
    "plan_columns": "fake" in PLAN_COLUMNS, "ledger_columns": "fake" in COLUMNS, "stored": stored,
    "param": params.get("fake"), "numeric": "fake" in NUMERIC and "fake" not in CATEGORICAL,
    "measured_table": "fake" in TABLE_LAYOUT, "classifier": QUANTITY.search("fake size must divide") is not None,
}))
"""


@pytest.fixture(scope="module")
def with_fake(tmp_path_factory) -> dict:
    copy = tmp_path_factory.mktemp("project")
    for package in ("launcher", "analysis"):
        shutil.copytree(ROOT / package, copy / package, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    layout_py = copy / "launcher" / "core" / "layout.py"
    text = layout_py.read_text()
    assert text.count(ANCHOR) == 1, "the probe adds its field before mbs: update ANCHOR"
    layout_py.write_text(text.replace(ANCHOR, FAKE + ANCHOR))
    work = copy / "work"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(copy), "MLFLOW_TRACKING_URI": ""}
    done = subprocess.run([sys.executable, "-c", PROBE, str(work)], cwd=copy, env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result: dict = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_the_copy_imports_its_own_layout(with_fake):
    # the probe ran on the patched copy, not on this checkout: only there does Layout take `fake`
    assert with_fake["label"] != with_fake["default_label"]


def test_the_label_shows_it_away_from_its_default(with_fake):
    assert with_fake["label"] == "tp1 pp1 dp4 fake2 mbs1 gbs1"
    assert with_fake["default_label"] == Layout(**BASE).label()


def test_the_config_hash_is_unchanged_at_its_default(with_fake):
    assert with_fake["default_hash"] == Layout(**BASE).config_hash("ctx")
    assert with_fake["hash_differs"]


def test_the_grid_has_its_list_checks_it_and_expands_it(with_fake):
    assert with_fake["grid_default"] == [1]
    assert "grid.fake=0" in with_fake["refused"]
    assert with_fake["expanded"] == [1, 2]


def test_plan_csv_ledger_and_mlflow_carry_it(with_fake):
    assert with_fake["plan_columns"] and with_fake["ledger_columns"]
    assert with_fake["stored"] == 2
    assert with_fake["param"] == "2"


def test_the_scheduler_measured_tables_and_classifier_know_it(with_fake):
    assert with_fake["numeric"] and with_fake["measured_table"] and with_fake["classifier"]
