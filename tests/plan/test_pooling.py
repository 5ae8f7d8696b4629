"""launcher.plan.pooling: several finished sweeps' calibrations pooled into one prior (plan.prior_from=sweeps/)."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from launcher.config.schema import ModelConfig
from launcher.core.layout import Layout
from launcher.estimate import load_cluster_preset
from launcher.plan import calibrate as cal
from launcher.plan.constants import DEFAULT
from launcher.plan.pooling import EFFECT_SD_FLOOR, pool_estimates, pooled, pooled_effect_priors
from launcher.plan.rules import check

A100 = load_cluster_preset("a100-80g")
MODELS = [ModelConfig(name="8b", layers=32, hidden=4096, heads=32, seq_len=2048, vocab=51200),
          ModelConfig(name="3b", layers=28, hidden=3072, heads=24, seq_len=4096, vocab=51200),
          ModelConfig(name="13b", layers=40, hidden=5120, heads=40, seq_len=2048, vocab=51200)]


def layouts(model: ModelConfig, n: int, seed: int) -> list[Layout]:
    rng, out = random.Random(seed), []
    while len(out) < n:
        nodes = rng.choice([1, 2, 4])
        tp, pp = rng.choice([1, 2, 4, 8]), rng.choice([1, 2, 4])
        if (nodes * 8) % (tp * pp):
            continue
        lay = Layout(gpus=nodes * 8, nodes=nodes, tp=tp, pp=pp, dp=nodes * 8 // (tp * pp), mbs=rng.choice([1, 2]),
                     gbs=256, recompute=rng.choice(["none", "full"]), zero_stage=rng.choice([0, 1]))
        if check(model, A100, lay).ok:
            out.append(lay)
    return out


SHARED = DEFAULT.with_values(gemm_eff_max=0.6, hbm_eff=0.5)
"""The setup's truth: GEMMs and memory-bound kernels slower than the a-priori constants say."""


def sweep_calibration(model: ModelConfig, seed: int, compute_scatter: float) -> dict:
    """A finished sweep of `model` on the shared setup, its own GEMM efficiency off by `compute_scatter` (log):
    what its calibration.json holds."""
    truth = SHARED.with_values(gemm_eff_max=SHARED.gemm_eff_max * math.exp(compute_scatter))
    feats = [cal.trial_features(model, A100, lay, "bf16", True) for lay in layouts(model, 14, seed)]
    steps = cal.FeatureTable(feats).step_time_s(truth)
    return cal.calibrate([cal.Observation(f, float(s)) for f, s in zip(feats, steps)], DEFAULT).to_json()


@pytest.fixture(scope="module")
def history() -> list[dict]:
    return [sweep_calibration(m, seed, scatter) for seed, (m, scatter) in enumerate(zip(MODELS, (-0.08, 0.0, 0.08)))]


def test_pooling_recovers_the_constants_the_sweeps_share(history):
    prior, pools = pooled(history, DEFAULT, source="pool of 3")
    assert prior.source == "pool of 3"
    # the pool of three sweeps whose GEMM efficiency scatters by +-8 % around the setup's: the setup's, closer than
    # the a-priori constants and than the worst single sweep
    singles = [cal.Prior.from_json(h, DEFAULT).constants.gemm_eff_max for h in history]
    error = abs(math.log(prior.constants.gemm_eff_max / SHARED.gemm_eff_max))
    assert error < 0.04 < abs(math.log(DEFAULT.gemm_eff_max / SHARED.gemm_eff_max))
    assert error < max(abs(math.log(s / SHARED.gemm_eff_max)) for s in singles)
    assert prior.constants.hbm_eff == pytest.approx(SHARED.hbm_eff, rel=0.1)
    assert pools["compute"].constraining == 3
    # a new sweep's predictions start near the shared truth (an unseen model and layouts)
    feats = [cal.trial_features(MODELS[0], A100, lay, "bf16", True) for lay in layouts(MODELS[0], 10, seed=99)]
    table = cal.FeatureTable(feats)
    warm = np.log(cal.uncalibrated(prior).predict(table).step_time_s / table.step_time_s(SHARED))
    cold = np.log(table.step_time_s(DEFAULT) / table.step_time_s(SHARED))
    assert np.median(np.abs(warm)) < 0.5 * np.median(np.abs(cold))


def test_the_spread_is_widened_by_the_scatter_between_sweeps(history):
    far = [sweep_calibration(m, seed, scatter) for seed, (m, scatter) in enumerate(zip(MODELS, (-0.4, 0.0, 0.4)))]
    _, agreeing = pooled([history[1]] * 3, DEFAULT)
    _, scattered = pooled(far, DEFAULT)
    assert agreeing["compute"].between_sd == 0.0
    # sweeps apart by +-40 % where each is sure to ~9 %: the scatter is the setup's, a new sweep may be anywhere in it
    assert scattered["compute"].between_sd > 0.2 and scattered["compute"].sd > 2 * agreeing["compute"].sd
    prior, _ = pooled(history, DEFAULT)
    by_name = {p.name: p for p in cal.PARAMETERS}
    for name, sd in prior.parameter_sd.items():         # as one sweep's transfer: floored, never looser than a priori
        assert cal.TRANSFER_SD <= sd <= by_name[name].prior_sd


def test_a_parameter_no_sweep_constrained_keeps_its_prior(history):
    prior, pools = pooled(history, DEFAULT)
    assert pools["fp8"].constraining == 0 and prior.sd(cal.PARAMETERS[2]) == cal.PARAMETERS[2].prior_sd
    assert prior.constants.fp8_gemm_eff == pytest.approx(DEFAULT.fp8_gemm_eff)


def test_random_effects_pool_of_plain_estimates():
    mean, sd, tau = pool_estimates([0.1, 0.1, 0.1], [0.05, 0.05, 0.05])
    assert mean == pytest.approx(0.1) and tau == 0.0 and sd == pytest.approx(0.05 / math.sqrt(3))
    mean, sd, tau = pool_estimates([-0.5, 0.0, 0.5], [0.01, 0.01, 0.01])   # the sweeps disagree far beyond their sds
    assert mean == pytest.approx(0.0, abs=1e-9) and tau == pytest.approx(0.5, rel=0.01) and sd > tau
    mean, _, _ = pool_estimates([0.0, 1.0], [0.1, 1.0])          # the surer sweep weighs more
    assert 0.0 < mean < 0.2
    with pytest.raises(ValueError, match="no calibration"):
        pooled([], DEFAULT)


def test_effect_priors_take_their_sd_from_the_scatter_between_sweeps():
    """pooled_effect_priors (search14): sweeps that agree on tp=2 give a tight prior (not below the floor), sweeps
    that disagree a wide one; a value one sweep moved keeps the prior sd; one no sweep moved is left out."""
    agree = [{"tp=2": (0.30, 0.02, 0.15), "pp=2": (0.1, 0.15, 0.15)} for _ in range(5)]
    scatter = [{"tp=2": (m, 0.02, 0.15)} for m in (-0.3, 0.0, 0.3, 0.6, 0.9)]
    (mean, sd), = pooled_effect_priors(agree).values()
    assert mean == pytest.approx(0.30) and sd == EFFECT_SD_FLOOR            # 0.02 / sqrt(5) is below the floor
    mean, sd = pooled_effect_priors(scatter)["tp=2"]
    assert mean == pytest.approx(0.3, abs=0.01) and sd > 0.4
    assert pooled_effect_priors([{"tp=4": (0.2, 0.05, 0.15)}]) == {"tp=4": (0.2, 0.15)}
