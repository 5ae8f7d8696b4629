"""launcher.computebench: the result file, the shapes a plan asks for, the estimator's view of a probe (the fitted
GEMM efficiency curve moves the plan's step times the way the probe says), the cache, and a real run on this CPU."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from launcher.computebench.result import (
    SCHEMA,
    ComputeProbeError,
    ComputeResult,
    GemmMeasurement,
    LayerMeasurement,
)
from launcher.computebench.result import load as load_result
from launcher.computebench.view import (
    REFERENCE_PROBES,
    apply_compute,
    cache_name,
    find_cached,
    fit_profile,
    gemm_shapes,
    peak_flops,
    probe_args,
    save,
)
from launcher.plan.constants import DEFAULT, FP32_PEAK_SHARE
from launcher.plan.flops import qkv_width
from launcher.plan.hardware import generation
from launcher.plan.planner import make_plan
from launcher.run import compute

REPO = Path(__file__).resolve().parents[2]
SHAPES = ((128, 384, 128), (256, 512, 256), (512, 2048, 512), (64, 128, 64), (1024, 1024, 128))


def curve_result(eff: float, scale: float, peak: float, *, cluster: str = "local-cpu", precision: str = "fp32",
                 created_at: float = 1.0, shapes=SHAPES) -> ComputeResult:
    """A probe whose GEMMs follow eff / (1 + scale (1/m + 1/n + 1/k)) of `peak` FLOP/s exactly."""
    gemms = tuple(GemmMeasurement(f"g{i}", m, n, k, 2 * m * n * k / (peak * eff / (1 + scale * (1 / m + 1 / n + 1 / k))))
                  for i, (m, n, k) in enumerate(shapes))
    layer = LayerMeasurement({"hidden": 64}, 0.01, 3e9)
    return ComputeResult(cluster, "cpu", precision, "2.13.0", gemms, layer, created_at)


def test_the_result_file_round_trips_and_refuses_what_it_cannot_use(tmp_path):
    result = curve_result(0.5, 40.0, 1e11)
    data = json.loads(json.dumps(result.to_json()))
    assert data["schema"] == SCHEMA and data["gemms"][0]["tflops"] == pytest.approx(result.gemms[0].tflops)
    assert data["layer"]["tflops"] == pytest.approx(3e9 / 0.01 / 1e12)
    assert ComputeResult.from_json(data) == result
    with pytest.raises(ComputeProbeError, match="schema"):
        ComputeResult.from_json({**data, "schema": "parasweep.netbench/1"})
    with pytest.raises(ComputeProbeError, match="not positive"):
        ComputeResult.from_json({**data, "gemms": [{**data["gemms"][0], "time_s": 0.0}]})
    with pytest.raises(ComputeProbeError, match="malformed"):
        ComputeResult.from_json({**data, "gemms": [{"name": "x"}]})
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ComputeProbeError, match="not JSON"):
        load_result(tmp_path / "bad.json")


def test_the_plan_asks_for_its_own_gemms_at_each_tp_and_micro_batch(load):
    cfg = load("+sweep=tiny")
    layouts = [t.layout for t in make_plan(cfg).trials]
    shapes = gemm_shapes(cfg.model, layouts)
    tps = {lay.tp for lay in layouts}
    assert {int(name.split()[1][2:]) for name, *_ in shapes} == tps
    tokens = {lay.mbs * cfg.model.seq_len for lay in layouts}
    assert {m for _, m, _, _ in shapes} <= tokens and min(tokens) in {m for _, m, _, _ in shapes}
    for t in tps:   # the QKV GEMM as launcher.plan.step_time prices it: (tokens x h) @ (h x qkv/t)
        assert any(name.startswith(f"qkv tp{t}") and n == qkv_width(cfg.model) // t and k == cfg.model.hidden
                   for name, _, n, k in shapes)
    args = probe_args(cfg, layouts)
    assert args[args.index("--precision") + 1] == "fp32"                      # the CPU stand-in
    assert args.count("--gemm") == len(shapes) and f"hidden={cfg.model.hidden}" in args[args.index("--layer") + 1]


def test_the_fit_recovers_the_efficiency_curve_the_gemms_followed(load):
    cluster = load("+sweep=tiny").cluster
    peak = peak_flops(cluster, "fp32")
    profile = fit_profile(curve_result(0.3, 120.0, peak), cluster, DEFAULT)
    assert profile.gemm_eff == pytest.approx(0.3) and profile.gemm_dim_scale == pytest.approx(120.0)
    assert profile.measured_eff < profile.gemm_eff                             # finite GEMMs fall short of it
    one = fit_profile(curve_result(0.3, DEFAULT.gemm_dim_scale, peak, shapes=SHAPES[:1]), cluster, DEFAULT)
    assert one.gemm_eff == pytest.approx(0.3) and one.gemm_dim_scale == DEFAULT.gemm_dim_scale  # too few to fit
    with pytest.raises(ComputeProbeError):
        fit_profile(ComputeResult("local-cpu", "cpu", "fp32", "", ()), cluster, DEFAULT)


def test_fp32_on_a_gpu_is_measured_against_the_fp32_peak(load):
    cluster = load("+sweep=tiny", "cluster=h100-80g").cluster
    assert peak_flops(cluster, "fp32") == pytest.approx(peak_flops(cluster, "bf16") * FP32_PEAK_SHARE)


@pytest.mark.parametrize("factor", [0.5, 2.0])
def test_the_measured_efficiency_moves_the_step_times_the_way_it_says(load, factor):
    """A probe at `factor` x the a-priori GEMM efficiency: every trial's predicted step time moves the other way
    (slower GEMMs, longer steps), and by no more than the GEMM share can move it."""
    cfg = load("+sweep=tiny")
    gen_e = DEFAULT.gemm_eff_max * DEFAULT.gen_eff(generation(cfg.cluster))
    result = curve_result(gen_e * factor, DEFAULT.gemm_dim_scale, peak_flops(cfg.cluster, "fp32"))
    constants, profile = compute.with_compute(cfg, DEFAULT, result)
    assert profile is not None and profile.measured_eff == pytest.approx(profile.datasheet_eff * factor)
    assert constants.gemm_eff_max * constants.gen_eff(generation(cfg.cluster)) == pytest.approx(gen_e * factor)
    assert apply_compute(cfg.cluster, DEFAULT, profile) == constants
    before = {t.config_hash: t.estimate.step_time_s for t in make_plan(cfg, constants=DEFAULT).trials}
    after = {t.config_hash: t.estimate.step_time_s for t in make_plan(cfg, constants=constants).trials}
    assert before.keys() == after.keys()
    for key, step_s in before.items():
        ratio = after[key] / step_s
        assert (1.0 < ratio <= 1 / factor + 1e-9) if factor < 1 else (factor ** -1 - 1e-9 <= ratio < 1.0), key


def test_the_cache_keeps_the_newest_probe_of_the_cluster_gpu_and_precision(load, tmp_path):
    cluster = load("+sweep=tiny").cluster
    assert cache_name(cluster) == "computebench-local-cpu-cpu.json"
    assert cache_name(load("+sweep=tiny", "cluster=h100-80g").cluster).startswith("computebench-h100-80g-")
    a, b, c = (tmp_path / n for n in ("a", "b", "c"))
    save(curve_result(0.3, 48.0, 1e11, created_at=1.0), a / cache_name(cluster))
    save(curve_result(0.4, 48.0, 1e11, created_at=2.0), b / cache_name(cluster))
    save(curve_result(0.5, 48.0, 1e11, created_at=3.0, precision="bf16"), c / cache_name(cluster))
    found = find_cached([a, b, c], cluster, "fp32")
    assert found is not None and found.created_at == 2.0                       # newest of fp32; bf16 passed over
    (b / cache_name(cluster)).write_text("{broken")
    found = find_cached([a, b, c], cluster, "fp32")
    assert found is not None and found.created_at == 1.0                       # a broken file is passed over
    assert find_cached([a], load("+sweep=tiny", "cluster.name=other").cluster, "fp32") is None


def test_a_real_probe_on_this_cpu_measures_the_tiny_plan_in_its_time_box(load, tmp_path):
    cfg = load("+sweep=tiny")
    out = tmp_path / "cb.json"
    args = probe_args(cfg, [t.layout for t in make_plan(cfg).trials])
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "launcher.computebench", "--out", str(out), *args, "--budget-s",
                           f"{compute.CPU_BUDGET_S:g}"], cwd=REPO, capture_output=True, text=True, timeout=120)
    wall_s = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = load_result(out)
    assert result.device == "cpu" and result.precision == "fp32" and result.cluster == "local-cpu"
    # on loaded shared cores the probe may stop short of its list (skipped), never of its first shape
    assert result.gemms and all(g.tflops > 0 for g in result.gemms)
    assert len(result.gemms) + len([n for n in result.skipped if n != "layer"]) == args.count("--gemm")
    assert (result.layer is None) == ("layer" in result.skipped)
    assert result.layer is None or (result.layer.fwd_bwd_s > 0 and result.layer.shape["hidden"] == cfg.model.hidden)
    # the time box: the measuring itself under 20 s; the process (torch's import on loaded shared cores) under 60
    assert "TFLOP/s" in proc.stdout and result.wall_s < 20 and wall_s < 60, (result.wall_s, wall_s)
    profile = fit_profile(result, cfg.cluster, DEFAULT)
    assert profile.gemm_eff > 0 and profile.measured_eff > 0


def test_bad_arguments_name_the_flag(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "launcher.computebench", "--gemm", "qkv=12x3", "--out",
                           str(tmp_path / "x.json")], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "--gemm 'qkv=12x3'" in proc.stderr and not (tmp_path / "x.json").exists()


def test_a_probe_over_its_time_box_starts_no_more_shapes_and_says_which(tmp_path):
    """Past twice its budget the probe stops starting shapes: the first is measured, the rest listed as skipped."""
    gemms = [a for i in range(6) for a in ("--gemm", f"g{i}=1024x1024x{1024 + i}")]
    out = tmp_path / "cb.json"
    proc = subprocess.run([sys.executable, "-m", "launcher.computebench", "--out", str(out), "--budget-s", "0.01",
                           "--layer", "none", *gemms], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = load_result(out)
    assert 1 <= len(result.gemms) < 6 and len(result.gemms) + len(result.skipped) == 6
    assert "not measured" in proc.stdout and result.layer is None


H100_PROBE = REPO / "tests" / "fixtures" / "computebench" / "h100-sxm5-80gb-2026-11-26.json"


def on_h100(result: ComputeResult) -> ComputeResult:
    return dataclasses.replace(result, cluster="h100-80g", device="NVIDIA H100 80GB HBM3", precision="bf16")


def test_the_hopper_reference_is_the_real_h100_probe_it_cites(load):
    """REFERENCE_PROBES['hopper'] is the line through the probe in tests/fixtures: read against itself, that card
    is nominal (relative 1), and its raw efficiency is well under the fitted a-priori one (why it is read as a ratio)."""
    cluster = load("+sweep=tiny", "cluster=h100-80g").cluster
    profile = fit_profile(load_result(H100_PROBE), cluster, DEFAULT)
    ref = REFERENCE_PROBES["hopper"]
    assert profile.gemm_eff == pytest.approx(ref.gemm_eff, rel=1e-3)
    assert profile.gemm_dim_scale == pytest.approx(ref.gemm_dim_scale, rel=1e-3)
    assert profile.relative == pytest.approx(1.0, abs=0.01)
    assert profile.measured_eff < 0.9 * profile.datasheet_eff


@pytest.mark.parametrize("factor", [0.7, 1.0, 1.1])
def test_on_a_gpu_with_a_reference_the_probe_scales_the_a_priori_efficiency(load, factor):
    """An H100 whose GEMMs run at `factor` x the nominal card's: the a-priori ceiling is scaled by `factor` (its size
    dependence kept), so a nominal card leaves the plan as it was and a slow one makes every step slower."""
    cfg = load("+sweep=one-gpu")
    ref = REFERENCE_PROBES["hopper"]
    result = on_h100(curve_result(ref.gemm_eff * factor, ref.gemm_dim_scale, peak_flops(cfg.cluster, "bf16"),
                                  shapes=((4096, 4096, 4096), (16384, 2048, 1536), (8192, 151936, 2048))))
    constants, profile = compute.with_compute(cfg, DEFAULT, result)
    assert profile is not None and profile.relative == pytest.approx(factor)
    assert constants.gemm_eff_max == pytest.approx(DEFAULT.gemm_eff_max * factor)
    assert constants.gemm_dim_scale == DEFAULT.gemm_dim_scale
    assert "scaled its GEMM efficiency" in compute.describe(cfg, profile)
    before = {t.config_hash: t.estimate.step_time_s for t in make_plan(cfg, constants=DEFAULT).trials}
    after = {t.config_hash: t.estimate.step_time_s for t in make_plan(cfg, constants=constants).trials}
    ratios = {key: after[key] / step_s for key, step_s in before.items()}
    for key, ratio in ratios.items():   # a step bound by the CPU's kernel dispatch does not move with the GEMMs
        if factor == 1.0:
            assert ratio == pytest.approx(1.0), key
        else:
            assert (1.0 <= ratio <= 1 / factor + 1e-9) if factor < 1 else (1 / factor - 1e-9 <= ratio <= 1.0), key
    assert factor == 1.0 or sum(abs(r - 1.0) > 0.01 for r in ratios.values()) > len(ratios) / 2


def test_without_a_reference_the_measured_curve_replaces_the_a_priori_one(load):
    """fp32 on an H100 (no fp32 reference) and the CPU stand-in: the fitted curve itself is used."""
    cluster = load("+sweep=tiny", "cluster=h100-80g").cluster
    fp32 = dataclasses.replace(on_h100(curve_result(0.5, 90.0, peak_flops(cluster, "fp32"))), precision="fp32")
    profile = fit_profile(fp32, cluster, DEFAULT)
    assert profile.reference_eff is None and profile.relative is None
    constants = apply_compute(cluster, DEFAULT, profile)
    assert constants.gemm_eff_max * constants.gen_eff(generation(cluster)) == pytest.approx(0.5)
    assert constants.gemm_dim_scale == pytest.approx(90.0)
