"""Names from a config that become path components (sweep.name, tracking.experiment) cannot lead out of the folder
they are meant for: refused at config load with one line naming the field, and refused again where the path is
built (launcher.core.inside), whatever called it."""

from __future__ import annotations

from pathlib import Path

import pytest

from launcher.__main__ import main
from launcher.core.errors import ConfigError
from launcher.core.inside import inside
from launcher.run.folder import SweepFolder

ESCAPES = ["../../../x", "/tmp/abs", "a/b", "..", ".hidden", "x\\y", ""]


@pytest.mark.parametrize("name", [n for n in ESCAPES if n])
def test_an_experiment_name_that_is_not_a_plain_name_is_refused_at_load(in_tmp, capsys, name):
    assert main(["+sweep=tiny", "dry_run=true", f"tracking.experiment='{name}'"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: tracking.experiment=") and len(err.splitlines()) == 1


def test_a_plain_experiment_name_is_accepted(load):
    assert load("+sweep=tiny", "tracking.experiment=my-runs_2.0").tracking.experiment == "my-runs_2.0"


@pytest.mark.parametrize("name", ["../../../x", "/tmp/abs", "a/b", "..", ".", ""])
def test_inside_refuses_what_leads_out(tmp_path, name):
    with pytest.raises(ConfigError, match="field.x="):
        inside(tmp_path, name, "field.x")


def test_inside_joins_a_plain_name(tmp_path):
    assert inside(tmp_path, "tiny.2", "sweep.name") == tmp_path / "tiny.2"


def test_a_sweep_folder_cannot_be_built_outside_its_root():
    with pytest.raises(ConfigError, match="sweep.name='../../etc'"):
        SweepFolder.of(Path("sweeps"), "../../etc")
