"""launcher.run.network and the sweep's network preflight (launcher.run.loop._measure_network): one probe job
through the runner, its JSON saved and reused, the measured bandwidths in the plan, a failed probe left out."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from launcher.core.console import Reporter
from launcher.netbench import Measurement, ProbeResult, cache_name, save
from launcher.plan.planner import make_plan
from launcher.run import loop as loop_module
from launcher.run import network
from launcher.run.executor import JobStatus, Submitted
from launcher.run.folder import SweepFolder


def probe(cluster: str = "local-cpu", busbw_gbytes_per_s: float = 2.0) -> ProbeResult:
    """A 1-node gloo probe whose all-reduce plateau is `busbw_gbytes_per_s` (4 ranks: busbw = algbw x 1.5)."""
    sizes = (1 << 20, 4 << 20, 16 << 20)
    ms = tuple(Measurement("all_reduce", "intra_node", 4, s, s * 1.5 / (busbw_gbytes_per_s * 1e9))
               for s in sizes)
    return ProbeResult(cluster, 1, 4, "gloo", "cpu", ("h1",), ms, created_at=1.0)


class ProbeRunner:
    """Runs the probe job by writing `result` to the --out path its script names (None: writes nothing)."""

    def __init__(self, result) -> None:
        self.result, self.requests = result, []

    def submit(self, requests) -> Submitted:
        done = Submitted()
        for req in requests:
            self.requests.append(req)
            out = re.search(r"--out ([^ \n]+)", Path(req.script).read_text()).group(1).strip("'\"")
            if self.result is not None:
                save(self.result, Path(out))
            done.jobs[req.key] = ("7", Path(req.script).parent)
        return done

    def poll(self, jobs: dict) -> dict:
        return {job_id: JobStatus("COMPLETED", 0) for job_id in jobs}

    def cancel(self, job_id: str) -> None:
        pass


@pytest.fixture
def preflight(load, in_tmp, monkeypatch):
    def run(result, *overrides, name="tiny"):
        runner = ProbeRunner(result)
        monkeypatch.setattr(loop_module, "make_runner", lambda *a: runner)
        cfg = load("+sweep=tiny", "plan.network_probe=true", f"sweep.name={name}", *overrides)
        folder = SweepFolder.of(cfg.sweep.root_dir, cfg.sweep.name)
        folder.create()
        measured, constants, plan, _ = loop_module._measure_network(cfg, folder, make_plan(cfg), Reporter.for_streams())
        return runner, cfg, folder, measured, constants, plan
    return run


def test_the_probe_runs_once_and_the_plan_uses_its_bandwidth(preflight):
    runner, cfg, folder, measured, constants, plan = preflight(probe(busbw_gbytes_per_s=2.0))
    assert len(runner.requests) == 1 and runner.requests[0].nodes == 1        # the largest tiny trial: 1 node
    assert (folder.root / cache_name("local-cpu", 1)).is_file()
    assert measured.cluster.intra_node_gbytes_per_s == pytest.approx(2.0) and constants.net_eff == 1.0
    assert cfg.cluster.intra_node_gbytes_per_s != pytest.approx(2.0)          # the preset itself is untouched
    before = {t.config_hash: t.estimate.step_time_s for t in make_plan(cfg).trials}
    after = {t.config_hash: t.estimate.step_time_s for t in plan.trials}
    assert before.keys() == after.keys() and before != after                  # same trials, re-estimated
    runner, *_ = preflight(probe(busbw_gbytes_per_s=9.0))                     # resume: the saved probe
    assert runner.requests == []


def test_another_sweep_of_the_cluster_reuses_the_probe_unless_fresh(preflight):
    preflight(probe(busbw_gbytes_per_s=2.0), name="first")
    runner, _, folder, measured, *_ = preflight(probe(busbw_gbytes_per_s=9.0), name="second")
    assert runner.requests == [] and measured.cluster.intra_node_gbytes_per_s == pytest.approx(2.0)
    assert (folder.root / cache_name("local-cpu", 1)).is_file()               # copied: a resume finds it here
    runner, _, _, measured, *_ = preflight(probe(busbw_gbytes_per_s=9.0), "sweep.fresh=true", name="third")
    assert len(runner.requests) == 1 and measured.cluster.intra_node_gbytes_per_s == pytest.approx(9.0)


def test_a_probe_that_writes_nothing_leaves_the_datasheet_numbers(preflight, capsys):
    runner, cfg, folder, measured, constants, plan = preflight(None)
    assert len(runner.requests) == 1 and measured is cfg and constants.net_eff < 1.0
    assert "network probe" in capsys.readouterr().err
    assert not list(folder.root.glob("netbench-*.json"))


def test_probe_off_by_default_locally_on_by_default_on_slurm(load):
    assert not network.probe_enabled(load("+sweep=tiny"))
    assert network.probe_enabled(load("+sweep=tiny", "executor=slurm"))
    assert not network.probe_enabled(load("+sweep=tiny", "executor=slurm", "plan.network_probe=false"))
    cfg = load("+sweep=tiny", "cluster.nodes=4")
    assert network.probe_nodes(cfg, 1) == 2 and network.probe_nodes(cfg, 3) == 3


def test_the_end_of_the_sweep_applies_the_saved_probe_to_the_preset_again(load, tmp_path):
    from analysis.report.conclusion import _network_line, estimator_inputs

    cfg = load("+sweep=tiny", "plan.network_probe=true", f"sweep.root_dir={tmp_path}")
    folder = SweepFolder.of(cfg.sweep.root_dir, cfg.sweep.name)
    folder.create()
    assert estimator_inputs(cfg, folder)[2] is None                           # nothing saved: the preset
    save(probe(busbw_gbytes_per_s=2.0), folder.root / cache_name("local-cpu", 1))
    measured, constants, found = estimator_inputs(cfg, folder)
    assert measured.cluster.intra_node_gbytes_per_s == pytest.approx(2.0) and constants.net_eff == 1.0
    line = _network_line(cfg, found.to_json())
    assert "intra-node 2 (datasheet" in line and "inter-node not measured" in line
    off = load("+sweep=tiny", "plan.network_probe=false", f"sweep.root_dir={tmp_path}")
    assert estimator_inputs(off, folder)[2] is None                           # probe off: the file is not used
