"""A resume with settings that change what is measured is refused, naming each change (issue 19, case 2)."""

from __future__ import annotations

import json

import pytest
from conftest import run_launcher

from launcher.core.errors import ConfigError
from launcher.plan.planner import trial_context
from launcher.run.folder import SweepFolder
from launcher.run.identity import check_same_setup, identity
from launcher.run.ledger import Ledger

CHANGED = ("model.swiglu=true", "model.norm=rmsnorm", "model.tied_embeddings=false", "backend.flash_attention=false",
           "cluster.gpu_mem_gb=0.3")


@pytest.fixture
def folder(tmp_path):
    return SweepFolder(tmp_path / "sweeps" / "tiny")


def test_the_reviewers_changed_model_is_refused_naming_every_change(load, folder):
    with Ledger(folder.ledger) as ledger:
        check_same_setup(load("+sweep=tiny"), ledger, folder)  # the first run
        with pytest.raises(ConfigError) as err:
            check_same_setup(load("+sweep=tiny", *CHANGED), ledger, folder)
    text = str(err.value)
    for change in ("model.swiglu: false -> true", 'model.norm: "layernorm" -> "rmsnorm"',
                   "model.tied_embeddings: true -> false", "backend.flash_attention: true -> false",
                   "cluster.gpu_mem_gb: 0.5 -> 0.3"):
        assert change in text
    assert "sweep.fresh=true" in text and "sweep.name" in text


@pytest.mark.parametrize("override", ["backend.extra_args=[--foo]", "backend.launcher=deepspeed",
                                      "backend.precision=bf16", "executor.env={NCCL_ALGO: Ring}",
                                      "cluster.peak_tflops=0.2", "model.layers=8"])
def test_each_measured_setting_counts(load, folder, override):
    with Ledger(folder.ledger) as ledger:
        check_same_setup(load("+sweep=tiny"), ledger, folder)
        with pytest.raises(ConfigError, match=override.split("=")[0].replace(".", r"\.")):
            check_same_setup(load("+sweep=tiny", override), ledger, folder)


def test_settings_that_measure_nothing_resume(load, folder):
    with Ledger(folder.ledger) as ledger:
        check_same_setup(load("+sweep=tiny"), ledger, folder)
        check_same_setup(load("+sweep=tiny", "cluster.nodes=4", "executor.timeout_min=20", "backend.startup_s=5",
                              "executor.setup=[true]", "monitor.poll_interval_s=1", "plan.max_trials=3"),
                         ledger, folder)


def test_a_folder_of_the_previous_release_is_checked_on_its_context_then_gains_the_identity(load, folder):
    cfg = load("+sweep=tiny")
    with Ledger(folder.ledger) as ledger:
        ledger.set_meta("context", trial_context(cfg))  # what the release before kept
        check_same_setup(cfg, ledger, folder)
        assert json.loads(ledger.get_meta("identity")) == identity(cfg)
        ledger.set_meta("context", "tiny/8x256x4x4x1024x128x1024|local-cpu|torch/fp32/2+4/1234")
        ledger.set_meta("identity", "")
        with pytest.raises(ConfigError, match="another setup"):
            check_same_setup(cfg, ledger, folder)


def test_a_setting_another_release_added_is_not_a_change(load, folder):
    cfg = load("+sweep=tiny")
    with Ledger(folder.ledger) as ledger:
        older = {k: v for k, v in identity(cfg).items() if k != "model.norm"}  # a release without model.norm
        ledger.set_meta("identity", json.dumps({**older, "model.from_the_future": "1"}))  # and a newer one's field
        check_same_setup(load("+sweep=tiny", "model.norm=rmsnorm"), ledger, folder)
        kept = json.loads(ledger.get_meta("identity"))
    assert kept["model.from_the_future"] == "1" and kept["model.norm"] == '"rmsnorm"'


def test_the_launcher_refuses_before_anything_runs(load, tmp_path):
    folder = SweepFolder(tmp_path / "sweeps" / "tiny")
    with Ledger(folder.ledger) as ledger:
        check_same_setup(load("+sweep=tiny"), ledger, folder)  # a finished +sweep=tiny's folder
    proc = run_launcher("+sweep=tiny", "tracking.enabled=false", *CHANGED, cwd=tmp_path, timeout_s=300)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "model.swiglu: false -> true" in proc.stderr
    assert not folder.jobs.exists() and not folder.config.exists()
