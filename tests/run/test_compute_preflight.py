"""launcher.run.compute and the sweep's compute preflight (launcher.run.loop._measure_compute): one probe job on
one GPU through the runner, its JSON saved and reused, the measured GEMM efficiency in the plan, a failed probe
left out, and the report's view of it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from launcher.computebench.result import ComputeResult, GemmMeasurement, LayerMeasurement
from launcher.computebench.view import cache_name, peak_flops, save
from launcher.core.console import Reporter
from launcher.plan.constants import DEFAULT
from launcher.plan.hardware import generation
from launcher.plan.planner import make_plan
from launcher.run import compute
from launcher.run import loop as loop_module
from launcher.run.executor import JobStatus, Submitted
from launcher.run.folder import SweepFolder


def probe(cfg, factor: float, created_at: float = 1.0) -> ComputeResult:
    """GEMMs at `factor` x the a-priori efficiency of the tiny sweep's cluster (one layer besides)."""
    gen_e = DEFAULT.gemm_eff_max * DEFAULT.gen_eff(generation(cfg.cluster)) * factor
    peak = peak_flops(cfg.cluster, "fp32")
    shapes = ((128, 192, 64), (256, 64, 64), (512, 256, 64))
    gemms = tuple(GemmMeasurement(f"g{m}", m, n, k,
                                  2 * m * n * k * (1 + DEFAULT.gemm_dim_scale * (1 / m + 1 / n + 1 / k)) / (peak * gen_e))
                  for m, n, k in shapes)
    return ComputeResult(cfg.cluster.name, "cpu", "fp32", "2.13.0", gemms,
                         LayerMeasurement({"hidden": 64}, 0.02, 1e9), created_at)


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
            done.jobs[req.key] = ("8", Path(req.script).parent)
        return done

    def poll(self, jobs: dict) -> dict:
        return {job_id: JobStatus("COMPLETED", 0) for job_id in jobs}

    def cancel(self, job_id: str) -> None:
        pass


@pytest.fixture
def preflight(load, in_tmp, monkeypatch):
    def run(factor, *overrides, name="tiny"):
        cfg = load("+sweep=tiny", "plan.compute_probe=true", f"sweep.name={name}", *overrides)
        runner = ProbeRunner(None if factor is None else probe(cfg, factor))
        monkeypatch.setattr(loop_module, "make_runner", lambda *a: runner)
        folder = SweepFolder.of(cfg.sweep.root_dir, cfg.sweep.name)
        folder.create()
        constants, plan, _ = loop_module._measure_compute(cfg, DEFAULT, folder, make_plan(cfg), Reporter.for_streams())
        return runner, cfg, folder, constants, plan
    return run


def test_the_probe_runs_once_on_one_gpu_and_the_plan_uses_its_efficiency(preflight, capsys):
    runner, cfg, folder, constants, plan = preflight(0.5)
    assert len(runner.requests) == 1 and (runner.requests[0].nodes, runner.requests[0].gpus_per_node) == (1, 1)
    script = Path(runner.requests[0].script).read_text()
    assert "-m launcher.computebench" in script and "--gemm" in script and "--precision fp32" in script
    assert (folder.root / cache_name(cfg.cluster)).is_file()
    assert constants.gemm_eff_max == pytest.approx(DEFAULT.gemm_eff_max * 0.5)
    before = {t.config_hash: t.estimate.step_time_s for t in make_plan(cfg).trials}
    after = {t.config_hash: t.estimate.step_time_s for t in plan.trials}
    assert before.keys() == after.keys() and all(after[k] > before[k] for k in before)   # slower GEMMs
    assert "GEMM efficiency" in "".join(capsys.readouterr())
    runner, *_ = preflight(2.0)                                                # resume: the saved probe
    assert runner.requests == []


def test_another_sweep_of_the_cluster_reuses_the_probe_unless_fresh(preflight):
    preflight(0.5, name="first")
    runner, _, folder, constants, _ = preflight(2.0, name="second")
    assert runner.requests == [] and constants.gemm_eff_max == pytest.approx(DEFAULT.gemm_eff_max * 0.5)
    assert (folder.root / "computebench-local-cpu-cpu.json").is_file()         # copied: a resume finds it here
    runner, _, _, constants, _ = preflight(2.0, "sweep.fresh=true", name="third")
    assert len(runner.requests) == 1 and constants.gemm_eff_max == pytest.approx(DEFAULT.gemm_eff_max * 2.0)


def test_a_probe_that_writes_nothing_leaves_the_a_priori_efficiency(preflight, capsys):
    runner, cfg, folder, constants, plan = preflight(None)
    assert len(runner.requests) == 1 and constants == DEFAULT
    err = "".join(capsys.readouterr())
    assert "compute probe" in err and "keeps the a-priori GEMM efficiency" in err
    assert not list(folder.root.glob("computebench-*.json"))


def test_probe_on_for_slurm_and_local_gpus_off_for_the_local_cpu_stand_in(load):
    assert not compute.probe_enabled(load("+sweep=tiny"))
    assert compute.probe_enabled(load("+sweep=tiny", "executor=slurm"))
    assert compute.probe_enabled(load("+sweep=tiny", "plan.compute_probe=true"))
    assert not compute.probe_enabled(load("+sweep=tiny", "executor=slurm", "plan.compute_probe=false"))


def test_the_end_of_the_sweep_applies_the_saved_probe_and_reports_it(load, tmp_path):
    from analysis.report.conclusion import _compute_line, compute_used, estimator_inputs

    cfg = load("+sweep=tiny", "plan.compute_probe=true", f"sweep.root_dir={tmp_path}")
    folder = SweepFolder.of(cfg.sweep.root_dir, cfg.sweep.name)
    folder.create()
    assert compute_used(cfg, folder) is None and estimator_inputs(cfg, folder)[1].gemm_eff_max == pytest.approx(
        compute.with_compute(cfg, estimator_inputs(cfg, folder)[1], None)[0].gemm_eff_max)
    a_priori = estimator_inputs(cfg, folder)[1].gemm_eff_max
    save(probe(cfg, 0.5), folder.root / cache_name(cfg.cluster))
    assert estimator_inputs(cfg, folder)[1].gemm_eff_max == pytest.approx(a_priori * 0.5)
    used = compute_used(cfg, folder)
    assert used is not None and used["profile"]["measured_eff"] == pytest.approx(
        used["profile"]["datasheet_eff"] * 0.5)
    line = _compute_line(used)
    assert "GEMM efficiency" in line and "a-priori" in line and "layer fwd+bwd" in line
    off = load("+sweep=tiny", "plan.compute_probe=false", f"sweep.root_dir={tmp_path}")
    assert compute_used(off, folder) is None and estimator_inputs(off, folder)[1].gemm_eff_max == a_priori


def test_a_probe_that_timed_the_cpu_is_not_a_gpu_clusters(load, monkeypatch):
    from launcher.computebench.result import ComputeProbeError
    from launcher.computebench.view import fit_profile

    gpu = load("+sweep=tiny", "cluster=h100-80g")
    cpu_probe = probe(gpu, 1.0)                                                # device "cpu"
    with pytest.raises(ComputeProbeError, match="not on a"):
        fit_profile(cpu_probe, gpu.cluster, DEFAULT)
    assert compute.with_compute(gpu, DEFAULT, cpu_probe) == (DEFAULT, None)
    monkeypatch.setattr(compute, "local_gpus", lambda: [])                    # no GPU here: not fast, not on
    assert not compute.probe_enabled(gpu)
    monkeypatch.setattr(compute, "local_gpus", lambda: [0])
    assert compute.probe_enabled(gpu)
