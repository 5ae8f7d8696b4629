"""launcher.plan.calibrate: features that reproduce the estimator exactly, the fit, its uncertainty, its target."""

from __future__ import annotations

import math
import random
import statistics
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from launcher.config.schema import ModelConfig
from launcher.core.layout import Layout
from launcher.estimate import estimate, load_cluster_preset
from launcher.measured import read_table
from launcher.plan import calibrate as cal
from launcher.plan.constants import DEFAULT, TORCH_AUTOCAST
from launcher.plan.rules import check

A100 = load_cluster_preset("a100-80g")
MODEL = ModelConfig(name="8b", layers=32, hidden=4096, heads=32, seq_len=2048, vocab=51200)
DATA = Path(__file__).parent.parent / "data" / "replay"


def layouts(n: int = 40, seed: int = 0) -> list[Layout]:
    rng, out = random.Random(seed), []
    while len(out) < n:
        nodes = rng.choice([1, 2, 4])
        tp, pp = rng.choice([1, 2, 4, 8]), rng.choice([1, 2, 4])
        if (nodes * 8) % (tp * pp):
            continue
        lay = Layout(gpus=nodes * 8, nodes=nodes, tp=tp, pp=pp, dp=nodes * 8 // (tp * pp), mbs=rng.choice([1, 2, 4]),
                     gbs=rng.choice([128, 256]), recompute=rng.choice(["none", "selective", "full"]),
                     sequence_parallel=tp > 1 and rng.random() < 0.5, zero_stage=rng.choice([0, 1]))
        if check(MODEL, A100, lay).ok:
            out.append(lay)
    return out


LAYOUTS = layouts()
FEATURES = [cal.trial_features(MODEL, A100, lay, "bf16", True) for lay in LAYOUTS]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.floats(-1.0, 1.0), min_size=len(cal.PARAMETERS), max_size=len(cal.PARAMETERS)),
       st.sampled_from([DEFAULT, TORCH_AUTOCAST]))
def test_features_reproduce_the_estimator_for_any_constants(theta, prior):
    constants = cal.apply_parameters(prior, cal.PARAMETERS, theta)
    table = cal.FeatureTable(FEATURES)
    steps, peaks = table.step_time_s(constants), table.peak_mem_gb(constants)
    for lay, step, peak in zip(LAYOUTS, steps, peaks):
        e = estimate(MODEL, A100, lay, "bf16", flash_attention=True, constants=constants)
        assert step == pytest.approx(e.step_time_s, rel=1e-9)
        assert peak == pytest.approx(e.peak_mem_gb, rel=1e-9)


def truth():
    """A cluster slower than the a-priori constants say: GEMMs at 80 %, memory-bound kernels at 70 %, a fixed
    per-micro-batch traffic Megatron-LM does not have, and more context memory."""
    return DEFAULT.with_values(gemm_eff_max=0.6, hbm_eff=0.5, microbatch_param_bytes=12.0, gpu_context_gb=3.0)


def observations(constants, idx, distort=None):
    table = cal.FeatureTable([FEATURES[i] for i in idx])
    steps, peaks = table.step_time_s(constants), table.peak_mem_gb(constants)
    factor = distort or {}
    return [cal.Observation(FEATURES[i], float(s) * factor.get(i, 1.0), float(p)) for i, s, p in zip(idx, steps, peaks)]


def test_nothing_changes_below_the_minimum_of_trials():
    fit = cal.calibrate(observations(truth(), [0, 1]), DEFAULT)
    assert not fit.applied and fit.constants == DEFAULT and "2 of 3" in fit.note
    oom_only = [cal.Observation(FEATURES[i], None) for i in range(5)]
    assert not cal.calibrate(oom_only, DEFAULT).applied


def test_fit_recovers_what_the_measurements_show():
    train, test = list(range(0, 30)), list(range(30, 40))
    fit = cal.calibrate(observations(truth(), train), DEFAULT)
    assert fit.applied and "compute" in fit.supported
    table = cal.FeatureTable([FEATURES[i] for i in test])
    a_priori = table.step_time_s(DEFAULT) / table.step_time_s(truth()) - 1
    calibrated = table.step_time_s(fit.constants) / table.step_time_s(truth()) - 1
    assert max(abs(a_priori)) > 0.2 and max(abs(calibrated)) < 0.02
    peaks = table.peak_mem_gb(fit.constants) / table.peak_mem_gb(truth()) - 1
    assert max(abs(peaks)) < 0.02
    # the calibrated constants re-predict any layout through the estimator itself
    lay = LAYOUTS[35]
    assert estimate(MODEL, A100, lay, "bf16", flash_attention=True, constants=fit.constants).step_time_s == \
        pytest.approx(float(table.step_time_s(fit.constants)[5]), rel=1e-9)


def test_an_outlier_does_not_drag_the_fit():
    train = list(range(0, 20))
    clean = cal.calibrate(observations(truth(), train), DEFAULT)
    noisy = cal.calibrate(observations(truth(), train, {3: 2.5}), DEFAULT)
    table = cal.FeatureTable([FEATURES[i] for i in range(20, 40)])
    drift = table.step_time_s(noisy.constants) / table.step_time_s(clean.constants) - 1
    assert max(abs(drift)) < 0.05        # a 2.5x error on one of 20 trials moves the others by a few %


def test_parameters_the_data_cannot_see_stay_put():
    """Single-GPU trials carry no network traffic: the network efficiency and latency keep their prior."""
    h100 = load_cluster_preset("h100-80g")
    small = ModelConfig(name="1.7b", layers=24, hidden=2304, heads=24, seq_len=2048, vocab=51200)
    feats = [cal.trial_features(small, h100, Layout(gpus=1, nodes=1, tp=1, pp=1, dp=1, mbs=m, gbs=8, recompute=r),
                                "bf16", True) for m in (1, 2, 4, 8) for r in ("none", "full")]
    steps = cal.FeatureTable(feats).step_time_s(TORCH_AUTOCAST.with_values(gemm_eff_max=0.6))
    fit = cal.calibrate([cal.Observation(f, float(s)) for f, s in zip(feats, steps)], TORCH_AUTOCAST)
    assert fit.parameters["network"] == pytest.approx(1.0, abs=1e-6)
    assert fit.parameters["latency"] == pytest.approx(1.0, abs=1e-6)
    # compute moves towards the truth (0.6 / the prior's efficiency) with a posterior sd about half its prior's
    # (borderline for `supported` since the prior is the corpus fit, which makes compute and memory_bw trade off)
    assert "network" not in fit.supported and fit.parameters["compute"] < 0.9
    assert fit.parameter_sd["compute"] < 0.6 * dict((p.name, p.prior_sd) for p in cal.PARAMETERS)["compute"]
    assert fit.parameter_sd["network"] == pytest.approx(dict((p.name, p.prior_sd) for p in cal.PARAMETERS)["network"],
                                                        rel=1e-3)


def test_uncertainty_reflects_how_well_the_model_predicted_unseen_trials():
    obs = observations(truth(), list(range(10)))
    confident = cal.calibrate(obs, DEFAULT)
    surprised = cal.calibrate([cal.Observation(o.features, o.step_time_s, o.peak_mem_gb,
                                               predicted_step_time_s=o.step_time_s * 0.7) for o in obs], DEFAULT)
    assert surprised.n_holdout == 10 and surprised.holdout_error == pytest.approx(-math.log(0.7), rel=1e-6)
    assert surprised.residual_sd > 0.3 > confident.residual_sd
    table = cal.FeatureTable(FEATURES[10:])
    assert all(surprised.predict(table).step_sd > confident.predict(table).step_sd)
    assert all(confident.predict(table).step_sd > 0)


def test_h100_sweeps_after_three_trials():
    """The issue's target: after 3 measured trials (the scheduler's first picks), the calibrated step time of the
    remaining trials of the H100 sweeps has a median error <= 10 %."""
    from launcher.replay import replay_sweep

    errors = []
    for sweep in read_table(DATA / "h100_single_gpu.csv"):
        ok = [r for r in sweep.rows if r.state == "ok"]
        if len(ok) <= 3:
            continue
        first = [s.key for s in replay_sweep(sweep, "exhaustive").steps]       # the a-priori plan order
        run = [r for k in first for r in sweep.rows if f"line {r.line}:" in k and r.state == "ok"][:3]
        feats = {r.line: cal.trial_features(r.request.model, r.request.cluster, r.request.layout,
                                            r.request.precision, bool(r.request.flash_attention)) for r in ok}
        fit = cal.calibrate([cal.Observation(feats[r.line], r.step_time_s, r.peak_mem_gb) for r in run],
                            TORCH_AUTOCAST if sweep.rows[0].request.backend == "torch" else DEFAULT)
        rest = [r for r in ok if r not in run]
        predicted = fit.predict(cal.FeatureTable([feats[r.line] for r in rest])).step_time_s
        errors += [abs(p / r.step_time_s - 1) for p, r in zip(predicted, rest)]
    assert len(errors) >= 15 and statistics.median(errors) <= 0.10, errors


def test_a_calibration_is_recorded_as_plain_json():
    import json

    fit = cal.calibrate(observations(truth(), list(range(10))), DEFAULT)
    data = json.loads(json.dumps(fit.to_json()))
    assert data["applied"] and data["constants"]["gemm_eff_max"] == fit.constants.gemm_eff_max
    assert set(data["parameters"]) == {p.name for p in cal.PARAMETERS}


def test_a_prior_sets_where_the_fit_starts_and_how_far_each_constant_may_move():
    obs = observations(truth(), list(range(6)))
    free = cal.calibrate(obs, DEFAULT)
    pinned = cal.calibrate(obs, cal.Prior(DEFAULT, {p.name: 1e-4 for p in cal.STEP_PARAMETERS}))
    assert pinned.applied and all(abs(math.log(v)) < 1e-3 for k, v in pinned.parameters.items()
                                  if k in {p.name for p in cal.STEP_PARAMETERS})
    assert abs(math.log(free.parameters["compute"])) > 0.05
    assert cal.calibrate(obs, cal.Prior.of(DEFAULT)).to_json() == free.to_json()      # Constants == Prior.of(them)
    # before the minimum of trials, the prior's own model error is what the predictions carry
    early = cal.calibrate(obs[:2], cal.Prior(truth(), residual_sd=0.03))
    assert not early.applied and early.constants == truth() and early.residual_sd == 0.03


def test_a_finished_calibration_transfers_with_floors_on_its_certainty():
    fit = cal.calibrate(observations(truth(), list(range(30))), DEFAULT)
    prior = cal.Prior.from_json(fit.to_json(), DEFAULT, source="sweeps/small")
    assert prior.constants == fit.constants and prior.source == "sweeps/small"
    by_name = {p.name: p for p in cal.PARAMETERS}
    for name, sd in prior.parameter_sd.items():        # never surer than TRANSFER_SD, never looser than a priori
        assert cal.TRANSFER_SD <= sd <= by_name[name].prior_sd
    assert prior.sd(by_name["compute"]) == cal.TRANSFER_SD       # pinned by 30 trials: floored
    assert prior.residual_sd >= cal.MODEL_ERROR_SD
    # a sweep started from it needs no trials to predict like the finished one
    table = cal.FeatureTable(FEATURES[30:])
    early = cal.calibrate([], prior)
    assert np.allclose(early.predict(table).step_time_s, fit.predict(table).step_time_s)


def test_starting_from_an_earlier_fit_finds_the_same_constants():
    obs = observations(truth(), list(range(12)))
    cold = cal.calibrate(obs, DEFAULT)
    warm = cal.calibrate(obs, DEFAULT, start=cal.calibrate(obs[:8], DEFAULT))
    table = cal.FeatureTable(FEATURES[12:])
    assert np.allclose(warm.predict(table).step_time_s, cold.predict(table).step_time_s, rtol=1e-3)


def test_a_probe_finds_a_constant_hidden_behind_a_max():
    """vTrain's 16x1024 4-GPU gbs-8 grid (tests/data/replay/pub_vtrain.csv) is CPU-dispatch-bound: its step times go
    with the micro-batches x layers each stage issues, not with the GEMMs. Two trials that are both GPU-bound at the
    a-priori dispatch cost give that constant no gradient: the plain fit keeps it at the prior whatever they
    measured; the probe (calibrate(probe=True), PROBE_STEPS) starts it higher, finds it ~3x, and predicts the
    trials it has not seen better."""
    from launcher import replay_bench as rb
    from launcher.replay import _features, _key

    case = next(c for c in rb.corpus([DATA / "pub_vtrain.csv"]) if c.sweep.name == "vtrain-single-16x1024-4gpu-gbs8")
    rows = {_key(r).split(": ", 1)[1]: r for r in case.sweep.rows}
    seen = [rows["tp2 pp1 dp2 mbs2 gbs8 rc=full"], rows["tp1 pp1 dp4 mbs1 gbs8 rc=full"]]
    unseen = [r for r in case.sweep.rows if all(r is not s for s in seen)]
    obs = [cal.Observation(_features(r), r.step_time_s) for r in seen]
    plain = cal.calibrate(obs, rb.prior_for(case.sweep), min_trials=1)
    probed = cal.calibrate(obs, rb.prior_for(case.sweep), min_trials=1, probe=True)
    assert plain.parameters["dispatch"] == pytest.approx(1.0, abs=1e-6) and probed.parameters["dispatch"] > 2.0
    table = cal.FeatureTable([_features(r) for r in unseen])
    measured = np.log([r.step_time_s for r in unseen])

    def miss(fit):
        return float(np.median(np.abs(np.log(table.step_time_s(fit.constants)) - measured)))

    assert miss(probed) < 0.5 * miss(plain)
