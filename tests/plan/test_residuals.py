"""launcher.plan.residuals: what a measured trial says about the trials that share its layout values."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from launcher.plan.residuals import ResidualModel, corrected, corrected_for_pick, miss_floor, spread_factor


def grid():
    return [{"tp": tp, "pp": pp, "mbs": mbs, "recompute": "none"} for tp in (1, 2, 4) for pp in (1, 2)
            for mbs in (1, 2)]


def test_the_design_has_an_offset_and_one_column_per_value_of_each_varying_dimension():
    x, names = ResidualModel().design(grid())
    assert x.shape == (12, 1 + 3 + 2 + 2)        # recompute does not vary: no column
    assert np.all(x[:, 0] == 1) and np.all(x[:, 1:].sum(axis=1) == 3)
    assert names[:5] == ("offset", "tp=1", "tp=2", "tp=4", "pp=1")


def test_nothing_measured_keeps_the_prior_spread():
    model = ResidualModel(offset_sd=0.5, value_sd=0.15, noise_sd=0.03)
    post = model.posterior(grid(), {})
    assert np.allclose(post.mean, 0.0)
    assert np.allclose(post.sd, math.sqrt(0.5 ** 2 + 3 * 0.15 ** 2 + 0.03 ** 2))


def test_a_measured_error_moves_the_trials_that_share_its_values_most():
    dims = grid()
    model = ResidualModel()
    post = model.posterior(dims, {0: math.log(1.5)})     # tp1 pp1 mbs1 measured 50 % slower than predicted
    assert post.mean[0] == pytest.approx(math.log(1.5), rel=0.05)      # the measured trial itself
    shared = [sum(dims[i][d] == dims[0][d] for d in ("tp", "pp", "mbs")) for i in range(len(dims))]
    for k in (0, 1, 2):                                   # more values in common: closer to the measured error
        more = [post.mean[i] for i in range(len(dims)) if shared[i] == k + 1]
        fewer = [post.mean[i] for i in range(len(dims)) if shared[i] == k]
        assert min(more) > max(fewer) > 0                 # everything moves (the sweep's level), the similar most
    assert post.sd[0] < post.sd[-1] < model.posterior(dims, {}).sd[-1]


def test_corrected_predictions_follow_the_measurements():
    dims = grid()
    predicted = np.full(len(dims), 2.0)
    measured = {i: 3.0 for i in range(len(dims)) if dims[i]["tp"] == 4}     # every tp=4 trial is 1.5x slower
    measured[0] = 2.0                                                        # and one tp=1 as predicted
    step, sd = corrected(predicted, dims, measured)
    tp4 = [i for i in range(len(dims)) if dims[i]["tp"] == 4]
    tp2 = [i for i in range(len(dims)) if dims[i]["tp"] == 2]
    assert all(step[i] == pytest.approx(3.0, rel=0.03) for i in tp4)
    assert all(2.0 < step[i] < 3.0 for i in tp2)          # unmeasured: in between, nearer the offset's estimate
    wide = corrected(predicted, dims, measured, checks=[(1.0, 0.1)] * 4)[1]   # missed by 10 sds, 4 times
    assert np.all(wide > 2 * sd)


def test_spreads_widen_only_when_the_checks_miss_by_more_than_their_sds():
    assert spread_factor([]) == 1.0
    assert spread_factor([(0.01, 0.1)] * 10) == 1.0                     # closer than predicted: never narrower
    assert spread_factor([(0.2, 0.1)] * 10) == pytest.approx(math.sqrt((10 * 4 + 2) / 12))
    assert spread_factor([(10.0, 0.1)]) == pytest.approx(math.sqrt((25 + 2) / 3))   # one outlier: clipped


def test_no_spread_is_narrower_than_the_sweeps_own_out_of_sample_misses():
    dims = grid()
    predicted = np.full(len(dims), 2.0)
    measured = {0: 2.0, 1: 2.0, 2: 2.0, 3: 2.0}
    tight = corrected(predicted, dims, measured)[1]
    assert miss_floor([]) == 0.0
    assert miss_floor([(0.3, 1.0), (-0.4, 1.0)]) == pytest.approx(math.sqrt((0.09 + 0.16) / 2))
    # the checks had sds wide enough (spread_factor stays 1) but missed by 0.5 in log: an interaction the additive
    # model cannot see; every spread is at least that miss, and the model without the floor keeps the tight ones
    checks = [(0.5, 1.0), (-0.5, 1.0)]
    floored = corrected(predicted, dims, measured, checks=checks)[1]
    assert np.all(floored >= 0.5 - 1e-12) and np.all(tight < 0.5)
    unfloored = corrected(predicted, dims, measured, ResidualModel(miss_floor=False), checks=checks)[1]
    assert np.allclose(unfloored, tight)
    step, both, pick = corrected_for_pick(predicted, dims, measured, checks=checks)   # the pick's: unfloored
    assert np.array_equal(both, floored) and np.array_equal(pick, unfloored)
    assert np.array_equal(step, corrected(predicted, dims, measured, checks=checks)[0])


def test_an_outlier_counts_less_than_the_trials_that_agree():
    dims = grid()
    agree = {i: 0.0 for i in range(len(dims)) if dims[i]["tp"] == 1 and i != 0}
    post = ResidualModel().posterior(dims, {**agree, 0: math.log(3.0)})   # one tp1 trial 3x slow, 3 as predicted
    others = [i for i in range(len(dims)) if dims[i]["tp"] == 1 and i not in agree and i != 0]
    assert all(abs(post.mean[i]) < 0.1 for i in others)                  # the value tp=1 is not condemned


def test_empirical_bayes_widens_the_scales_for_a_sweep_the_estimator_misjudges():
    dims = grid()
    rng = np.random.default_rng(0)
    wild = {i: float(rng.normal(0, 0.8)) for i in range(0, len(dims), 2)}
    tame = {i: 0.01 * (i % 3) for i in range(0, len(dims), 2)}
    model = ResidualModel()
    assert model.fitted(dims, tame) == model
    fitted = model.fitted(dims, wild)
    assert fitted.value_sd > model.value_sd or fitted.noise_sd > model.noise_sd
    assert model.fitted(dims, dict(list(wild.items())[:3])) == model    # too few trials: the scales stay


@pytest.mark.parametrize("seed", range(4))
def test_the_likelihood_through_the_columns_equals_the_direct_one(seed):
    """log_likelihood (Woodbury, p x p) equals the n x n Gaussian log density it replaces, so the fitted scales
    are the same ones."""
    from launcher.plan.residuals import log_likelihood

    rng = np.random.default_rng(seed)
    n, p = int(rng.integers(5, 60)), int(rng.integers(2, 12))
    x = (rng.random((n, p)) < 0.4).astype(float)
    x[:, 0] = 1.0
    r = rng.normal(0, 0.3, n)
    prior_var = rng.uniform(0.01, 0.5, p)
    noise_var = float(rng.uniform(0.001, 0.1))
    cov = (x * prior_var) @ x.T + noise_var * np.eye(n)
    direct = -0.5 * (r @ np.linalg.solve(cov, r) + np.linalg.slogdet(cov)[1])
    assert log_likelihood(x.T @ x, x.T @ r, float(r @ r), n, prior_var, noise_var) == pytest.approx(direct,
                                                                                                    rel=1e-9)


def _design_trial_by_trial(dims):
    """The design as first written: a Python pass per trial and value (what the column-wise one must equal)."""
    from launcher.plan.residuals import DIMENSIONS

    key = [tuple(str(x.get(d)) for d in DIMENSIONS) for x in dims]
    columns, names = [np.ones(len(dims))], ["offset"]
    for j, d in enumerate(DIMENSIONS):
        values = sorted({row[j] for row in key})
        if len(values) < 2:
            continue
        for v in values:
            columns.append(np.array([1.0 if row[j] == v else 0.0 for row in key]))
            names.append(f"{d}={v}")
    return np.stack(columns, axis=1), tuple(names)


@pytest.mark.parametrize("as_tuple", [False, True])
def test_the_column_wise_design_equals_the_trial_by_trial_one_on_generated_layouts(as_tuple):
    rng = np.random.default_rng(7)
    dims = [{"tp": int(rng.choice([1, 2, 4, 8, 16])), "pp": int(rng.choice([1, 2, 10, 20])),
             "mbs": int(rng.choice([1, 2, 16])), "recompute": str(rng.choice(["none", "selective", "full"])),
             "sequence_parallel": bool(rng.integers(2)), "zero_stage": int(rng.integers(2)),
             **({"vpp": 2} if rng.integers(3) == 0 else {})} for _ in range(500)]
    dims = tuple(dims) if as_tuple else dims
    x, names = ResidualModel().design(dims)
    want_x, want_names = _design_trial_by_trial(dims)
    assert names == want_names and "tp=16" in names and "vpp=None" in names
    assert np.array_equal(x, want_x)
    if as_tuple:   # the same dicts in a new tuple, one of them a new dict with other values: read again
        again = (*dims[:-1], {**dims[-1], "tp": 3})
        x2, names2 = ResidualModel().design(again)
        assert "tp=3" in names2 and np.array_equal(x2, _design_trial_by_trial(again)[0])


def test_identified_only_learns_a_dimension_once_two_of_its_values_are_measured():
    """One measured trial: its error is the sweep's level for every trial (the ranking stays the prior's); once a
    second tp is measured, the tp values get effects of their own."""
    dims = grid()
    model = ResidualModel(identified_only=True)
    one = model.posterior(dims, {0: 0.3})                      # tp1 pp1 mbs1 measured 35 % slower
    assert np.allclose(one.mean, one.mean[0]) and one.mean[0] > 0.2
    assert np.allclose(one.sd, one.sd[0])                      # no dimension identified: one spread for all
    plain = ResidualModel().posterior(dims, {0: 0.3})
    assert not np.allclose(plain.mean, plain.mean[0])          # without it, the trials unlike it look better
    two = model.posterior(dims, {0: 0.3, 8: 0.0})              # tp4 pp1 mbs1 as predicted: tp=1 is slow
    tp1 = [i for i, d in enumerate(dims) if d["tp"] == 1]
    tp4 = [i for i, d in enumerate(dims) if d["tp"] == 4]
    assert min(two.mean[tp1]) > max(two.mean[tp4])


def test_unidentified_scale_shrinks_what_one_measured_value_says_between_the_whole_and_identified_only():
    """One trial measured 35 % slow: the spread of the other trials' means (sharing its values or not) narrows as
    the unidentified dimensions' prior sd shrinks, towards identified_only's single level; a dimension with two
    values measured keeps its whole sd (tp=1 against tp=4 as in the test above)."""
    dims = grid()
    width = [np.ptp(ResidualModel(unidentified_scale=k).posterior(dims, {0: 0.3}).mean) for k in (1.0, 0.5, 0.1)]
    assert width[0] > width[1] > width[2] > 0.0
    assert np.allclose(ResidualModel(unidentified_scale=1.0).posterior(dims, {0: 0.3}).mean,
                       ResidualModel().posterior(dims, {0: 0.3}).mean)
    two = {0: 0.3, 8: 0.0}                                       # tp identified, pp and mbs not
    whole, scaled = ResidualModel().posterior(dims, two), ResidualModel(unidentified_scale=0.1).posterior(dims, two)
    tp1 = [i for i, d in enumerate(dims) if d["tp"] == 1]
    tp4 = [i for i, d in enumerate(dims) if d["tp"] == 4]
    gap = [np.mean(p.mean[tp1]) - np.mean(p.mean[tp4]) for p in (whole, scaled)]
    assert gap[1] > 0.2 and gap[1] == pytest.approx(gap[0], rel=1e-3)      # tp keeps its whole sd
    with pytest.raises(ValueError):
        ResidualModel(unidentified_scale=0.0)


def test_the_posterior_per_distinct_row_is_the_per_trial_one():
    """Trials apart only in gbs/nodes/gpus share a design row: the posterior's mean and sd are computed once per
    distinct row and given to each trial, the same numbers as a computation per trial."""

    rng = np.random.default_rng(11)
    dims = tuple({"tp": int(rng.choice([1, 2, 4, 8])), "pp": int(rng.choice([1, 2, 4])), "mbs": int(rng.choice([1, 2])),
                  "recompute": str(rng.choice(["none", "full"])), "gbs": int(rng.choice([256, 512, 1024])),
                  "nodes": int(rng.choice([1, 2]))} for _ in range(2000))
    measured = {int(i): float(rng.normal(0.0, 0.3)) for i in rng.choice(len(dims), 40, replace=False)}
    model = ResidualModel().fitted(dims, measured)
    assert len(model.parts(dims).rows) < len(dims)     # rows shared: the per-row path is exercised
    fast = model.posterior(dims, measured)
    _, mean_w, cov = model._weights(dims, measured)
    design, _ = model.design(dims)                     # dense: one row per trial
    sd = np.sqrt(np.einsum("ij,jk,ik->i", design, cov, design) + model.noise_sd ** 2)
    assert np.array_equal(fast.mean, design @ mean_w) and np.array_equal(fast.sd, sd)
    assert not np.all(fast.mean == fast.mean[0])


def test_steps_carry_an_error_measured_at_one_size_to_the_larger_ones():
    """ResidualModel.steps (an ablation option, off by default): a column per step up of each size, so tp=2
    measured slower than predicted moves tp=4 (which has the step to 2 too) and not tp=1."""
    dims = grid()
    x, names = ResidualModel(steps=True).design(dims)
    assert "tp>=2" in names and "tp>=4" in names and "tp>=1" not in names and "pp>=2" in names
    assert "recompute>=none" not in names and ResidualModel().design(dims)[0].shape == (12, 8)
    assert [x[i, names.index("tp>=4")] for i in range(len(dims))] == [float(d["tp"] >= 4) for d in dims]
    measured = {i: math.log(2.0) for i in range(len(dims)) if dims[i]["tp"] == 2 and dims[i]["mbs"] == 1}
    measured[0] = 0.0                                                   # tp1 pp1 mbs1 as predicted
    tp4 = [i for i in range(len(dims)) if dims[i]["tp"] == 4]
    plain = ResidualModel().posterior(dims, measured).mean
    steps = ResidualModel(steps=True).posterior(dims, measured).mean
    assert min(steps[i] for i in tp4) > max(plain[i] for i in tp4) + 0.05


def test_the_design_cache_is_bounded_and_forgotten_with_its_sweep():
    """A process that plans sweeps in sequence keeps at most a few designs, and none once forget() is called (the
    loop does at the end of a sweep): a design per decision at 50k trials was ~15 MB each."""
    from launcher.plan import residuals

    for n in range(residuals._MAX_DESIGNS + 3):
        ResidualModel().posterior(grid()[: 4 + n], {0: 0.1})
    assert len(residuals._DESIGNS) == residuals._MAX_DESIGNS
    generation = residuals.id_generation()
    residuals.forget()
    assert not residuals._DESIGNS and not residuals._ROW_TEXT and residuals.id_generation() == generation + 1


def test_prior_means_shift_the_predictions_until_measurements_say_otherwise():
    """plan.prior_from's effects of earlier sweeps (ResidualModel.prior_mean): tp=4 was 40 % slow on them."""
    dims, slow = grid(), math.log(1.4)
    model = ResidualModel(prior_mean=(("tp=4", slow),))
    before = model.posterior(dims, {})
    assert all(before.mean[i] == pytest.approx(slow if d["tp"] == 4 else 0.0) for i, d in enumerate(dims))
    assert np.allclose(before.sd, ResidualModel().posterior(dims, {}).sd)        # the spreads stay
    # this sweep measures its tp=4 trials as predicted a priori: the prior mean gives way
    measured = {i: 0.0 for i, d in enumerate(dims) if d["tp"] == 4}
    after = model.posterior(dims, measured)
    assert all(abs(after.mean[i]) < 0.25 * slow for i in measured)
    # and what a finished sweep learned comes back as its effects, the prior sd with each
    effects = ResidualModel().effects(dims, {i: slow if d["tp"] == 4 else 0.0 for i, d in enumerate(dims)})
    assert effects["tp=4"][0] > 0.05 and effects["tp=4"][1] < effects["tp=4"][2] == pytest.approx(0.15)
    assert effects["tp=1"][0] < effects["tp=4"][0]


def test_a_prior_sd_from_the_history_holds_the_prior_mean_as_the_scatter_says():
    """ResidualModel.column_sds (search14): an effect its history agrees on (small scatter) gives way to this sweep's
    measurements less than one its history scattered on, and the within-sweep refit scales the listed sds."""
    dims, slow = grid(), math.log(1.4)
    measured = {i: 0.0 for i, d in enumerate(dims) if d["tp"] == 4}      # this sweep: tp=4 as predicted
    tight = ResidualModel(prior_mean=(("tp=4", slow),), column_sds=(("tp=4", 0.03),))
    wide = ResidualModel(prior_mean=(("tp=4", slow),), column_sds=(("tp=4", 0.5),))
    flat = ResidualModel(prior_mean=(("tp=4", slow),))
    kept = [m.posterior(dims, measured).mean[next(iter(measured))] for m in (tight, flat, wide)]
    assert kept[0] > kept[1] > kept[2] >= 0.0
    assert tight.posterior(dims, {}).sd[next(iter(measured))] < flat.posterior(dims, {}).sd[next(iter(measured))]
    names = ResidualModel().design(dims)[1]
    var = dict(zip(names, replace(tight, value_sd=0.3)._prior(names, 0.3)))
    assert var["tp=4"] == pytest.approx((0.03 * 0.3 / 0.15) ** 2) and var["tp=1"] == pytest.approx(0.3 ** 2)
