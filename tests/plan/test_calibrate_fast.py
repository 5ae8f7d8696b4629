"""launcher.plan.calibrate's fast fit: the batched step-time and memory models give the same bits as the one-theta
path, the one-call Jacobian the same numbers as scipy's '2-point' finite differences, so the fit (and every figure
of the search benchmark) is unchanged; and a repeated fit is looked up, not redone."""

from __future__ import annotations

import random

import numpy as np
import pytest
from scipy.optimize._numdiff import approx_derivative

from launcher.config.schema import ModelConfig
from launcher.core.layout import Layout
from launcher.estimate import load_cluster_preset
from launcher.plan import calibrate as cal
from launcher.plan.constants import DEFAULT, TORCH_AUTOCAST
from launcher.plan.rules import check

MODEL = ModelConfig(name="1b", layers=16, hidden=2048, heads=16, seq_len=2048, vocab=51200)
CLUSTERS = [load_cluster_preset(name) for name in ("a100-80g", "h100-80g", "local-cpu")]


def generated_features(n: int, seed: int) -> list[cal.TrialFeatures]:
    """Random valid layouts on A100, H100 and the CPU stand-in mixed in one table: several rate kinds at once."""
    rng, out = random.Random(seed), []
    while len(out) < n:
        cluster = rng.choice(CLUSTERS)
        gpus = rng.choice([1, 2, 4, 8])
        tp, pp = rng.choice([1, 2, 4]), rng.choice([1, 2, 4])
        if gpus % (tp * pp) or gpus > cluster.gpus_per_node:
            continue
        lay = Layout(gpus=gpus, nodes=1, tp=tp, pp=pp, dp=gpus // (tp * pp), mbs=rng.choice([1, 2]),
                     gbs=rng.choice([16, 32]), recompute=rng.choice(["none", "selective", "full"]),
                     sequence_parallel=tp > 1 and rng.random() < 0.5, zero_stage=rng.choice([0, 1]))
        if check(MODEL, cluster, lay).ok:
            out.append(cal.trial_features(MODEL, cluster, lay, "bf16", True))
    return out


FEATURES = generated_features(30, 0)
TABLE = cal.FeatureTable(FEATURES)


def test_generated_table_mixes_rate_kinds():
    """Otherwise the per-kind rows of StepModel.rates are not exercised."""
    kinds = {(str(g), bool(c)) for g, c in zip(TABLE.generation, TABLE.cpu)}
    assert len(kinds) >= 3


@pytest.mark.parametrize("prior", [DEFAULT, TORCH_AUTOCAST])
@pytest.mark.parametrize("table", [TABLE, TABLE.subset([0, 1, 2])])
def test_batched_step_times_are_the_one_theta_step_times_bit_for_bit(prior, table):
    thetas = np.random.default_rng(1).normal(0.0, 0.7, (6, len(cal.STEP_PARAMETERS)))
    got = cal.StepModel(table, prior, cal.STEP_PARAMETERS).step_time_s(thetas)
    for theta, row in zip(thetas, got):
        assert np.array_equal(row, table.step_time_s(cal.apply_parameters(prior, cal.STEP_PARAMETERS, theta)))


def test_batched_peak_memory_is_the_one_theta_peak_memory_bit_for_bit():
    thetas = np.random.default_rng(2).normal(0.0, 0.7, (6, len(cal.MEMORY_PARAMETERS)))
    got = cal.MemoryModel(TABLE, DEFAULT).peak_mem_gb(thetas)
    for theta, row in zip(thetas, got):
        assert np.array_equal(row, TABLE.peak_mem_gb(cal.apply_parameters(DEFAULT, cal.MEMORY_PARAMETERS, theta)))


def test_one_call_jacobian_is_scipys_two_point_jacobian():
    model = cal.StepModel(TABLE, DEFAULT, cal.STEP_PARAMETERS)

    def batch(thetas):
        return np.log(model.step_time_s(thetas))

    for theta in (np.zeros(len(cal.STEP_PARAMETERS)), np.random.default_rng(3).normal(0.0, 2.0,
                                                                                      len(cal.STEP_PARAMETERS))):
        want = approx_derivative(lambda t: batch(t[None, :])[0], theta, method="2-point")
        assert np.array_equal(cal.forward_jacobian(batch)(theta), want)


def test_log_gradient_is_the_per_parameter_central_difference():
    theta = np.random.default_rng(4).normal(0.0, 0.3, len(cal.STEP_PARAMETERS))
    eps = 1e-4
    for i in range(len(cal.STEP_PARAMETERS)):
        up, down = theta.copy(), theta.copy()
        up[i] += eps
        down[i] -= eps
        hi = TABLE.step_time_s(cal.apply_parameters(DEFAULT, cal.STEP_PARAMETERS, up))
        lo = TABLE.step_time_s(cal.apply_parameters(DEFAULT, cal.STEP_PARAMETERS, down))
        grad = cal.log_step_gradient_of(TABLE, DEFAULT, theta)
        assert np.array_equal(grad[:, i], (np.log(hi) - np.log(lo)) / (2 * eps))


def truth_observations(seed: int) -> list[cal.Observation]:
    rng = np.random.default_rng(seed)
    theta = rng.normal(0.0, 0.3, len(cal.PARAMETERS))
    constants = cal.apply_parameters(DEFAULT, cal.PARAMETERS, theta)
    step = TABLE.step_time_s(constants) * np.exp(rng.normal(0.0, 0.03, TABLE.n))
    peak = TABLE.peak_mem_gb(constants)
    return [cal.Observation(f, float(s), float(p)) for f, s, p in zip(FEATURES, step, peak)]


def test_fit_with_the_one_call_jacobian_is_the_default_fit():
    """The same residuals fitted with scipy's own '2-point' Jacobian and with forward_jacobian: the same optimum
    and covariance, bit for bit (so the fit's path did not change, only its cost)."""
    obs = truth_observations(5)
    model = cal.StepModel(cal.FeatureTable([o.features for o in obs]), DEFAULT, cal.STEP_PARAMETERS)
    measured = np.log([o.step_time_s for o in obs])
    sd = np.array([p.prior_sd for p in cal.STEP_PARAMETERS])

    def batch(thetas):
        return np.concatenate([(np.log(model.step_time_s(thetas)) - measured) / 0.08, thetas / sd], axis=1)

    def one(theta):
        return batch(theta[None, :])[0]

    theta_fd, cov_fd = cal._fit(one, sd)
    theta, cov = cal._fit(one, sd, jac=cal.forward_jacobian(batch))
    assert np.array_equal(theta, theta_fd) and np.array_equal(cov, cov_fd)
    assert np.abs(theta).max() > 0.01      # it did move: a fit that stayed at the prior would prove nothing


def test_a_repeated_fit_is_looked_up_and_a_changed_one_refitted():
    cal._FITS.clear()
    obs = truth_observations(6)[:12]
    first = cal.calibrate(obs, DEFAULT)
    assert first.applied
    assert cal.calibrate(list(obs), DEFAULT) is first
    changed = obs[:-1] + [cal.Observation(obs[-1].features, obs[-1].step_time_s * 1.5, obs[-1].peak_mem_gb)]
    refit = cal.calibrate(changed, DEFAULT)
    assert refit is not first and refit.theta != first.theta
    assert cal.calibrate(obs, DEFAULT, start=first) is not first          # another start: another fit
    assert cal.calibrate(obs, cal.Prior(DEFAULT, {"compute": 0.1})) is not first


def trials_of_classes(seed: int, n: int = 90) -> tuple[np.ndarray, np.ndarray, cal.FeatureTable]:
    """Trials given as TABLE's rows (their batch classes) with micro-batch counts of their own, and the same trials
    as a table of one row each (what step_of_classes stands for)."""
    rng = np.random.default_rng(seed)
    at = rng.integers(0, TABLE.n, n)
    microbatches = rng.integers(1, 65, n).astype(float)
    expanded = TABLE.subset(at.tolist())
    expanded.microbatches = microbatches
    return at, microbatches, expanded


@pytest.mark.parametrize("prior", [DEFAULT, TORCH_AUTOCAST])
def test_step_times_priced_per_batch_class_are_the_per_trial_ones_bit_for_bit(prior):
    """combine once per class, then each trial's micro-batch count: the same bits as a row per trial, for one set
    of constants (step_of_classes) and for a batch of thetas (StepModel with trials, the gradient's path)."""
    at, microbatches, expanded = trials_of_classes(5)
    assert len(set(at.tolist())) < len(at) and len(set(microbatches.tolist())) > 1
    r = TABLE._rates(prior)
    got = cal.step_of_classes(np.einsum("nsfg,ng->nsf", TABLE.stages, r), np.einsum("nkg,ng->nk", TABLE.dp, r),
                              TABLE.weights, TABLE.pp, TABLE.vpp, TABLE.overlap_gather, TABLE.cpu,
                              prior.overlap_interference, prior.tp_overlap_interference, at, microbatches)
    assert np.array_equal(got, expanded.step_time_s(prior))
    thetas = np.random.default_rng(6).normal(0.0, 0.7, (5, len(cal.STEP_PARAMETERS)))
    batched = cal.StepModel(TABLE, prior, cal.STEP_PARAMETERS).step_time_s(thetas, trials=(at, microbatches))
    assert np.array_equal(batched, cal.StepModel(expanded, prior, cal.STEP_PARAMETERS).step_time_s(thetas))
    theta = thetas[0]
    assert np.array_equal(cal.log_step_gradient_of(TABLE, prior, theta, trials=(at, microbatches)),
                          cal.log_step_gradient_of(expanded, prior, theta))


def test_a_prediction_without_the_spread_has_the_same_step_times_and_memory():
    """predict(spread=False) leaves out only the fitted constants' share of the step sd (a caller that replaces
    the sd, the residual model, never pays for the gradient)."""
    calibration = cal.calibrate(truth_observations(11), DEFAULT)
    assert calibration.covariance
    full, bare = calibration.predict(TABLE), calibration.predict(TABLE, spread=False)
    assert np.array_equal(full.step_time_s, bare.step_time_s) and np.array_equal(full.peak_mem_gb, bare.peak_mem_gb)
    assert np.array_equal(full.mem_sd, bare.mem_sd) and bare.step_param_sd is None
    assert np.all(bare.step_sd == calibration.residual_sd) and np.all(full.step_sd > bare.step_sd)
