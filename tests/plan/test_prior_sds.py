"""launcher.plan.prior_sds: the residual model's per-dimension prior sds, learned across sweeps, left out per group."""

from __future__ import annotations

import math

import numpy as np
import pytest

from launcher.plan import prior_sds
from launcher.plan.prior_sds import PriorSds, ResidualSet, fit, leave_one_group_out
from launcher.plan.residuals import VALUE_SD, ResidualModel

TRUE = {"tp": 0.5, "pp": 0.08, "mbs": 0.25}
OFFSET, NOISE = 0.4, 0.05


def synthetic(n_sweeps: int, seed: int, group: str = "g", sds=TRUE, offset=OFFSET, noise=NOISE) -> list[ResidualSet]:
    """Sweeps of a tp x pp x mbs grid whose log errors are drawn from the additive model with known sds."""
    rng = np.random.default_rng(seed)
    grid = [{"tp": tp, "pp": pp, "mbs": mbs} for tp in (1, 2, 4, 8) for pp in (1, 2, 4) for mbs in (1, 2)]
    out = []
    for k in range(n_sweeps):
        level = rng.normal(0.0, offset)
        effects = {(d, v): rng.normal(0.0, sd) for d, sd in sds.items() for v in (1, 2, 4, 8)}
        errors = [level + sum(effects[(d, x[d])] for d in sds) + rng.normal(0.0, noise) for x in grid]
        out.append(ResidualSet(group, f"{group}-{k}", tuple(grid), tuple(errors)))
    return out


def test_the_fit_recovers_known_per_dimension_sds():
    got = fit(synthetic(120, seed=1), balance=False)
    for d, sd in TRUE.items():
        assert got.value_sds[d] == pytest.approx(sd, rel=0.25), d
    assert got.offset_sd == pytest.approx(OFFSET, rel=0.25)
    assert got.noise_sd == pytest.approx(NOISE, rel=0.15)
    assert got.value_sds["tp"] > got.value_sds["mbs"] > got.value_sds["pp"]
    assert got.n_sweeps == 120 and got.n_trials == 120 * 24


def test_a_dimension_no_sweep_varies_is_not_fitted_and_keeps_the_flat_sd():
    sets = [ResidualSet("g", s.name, tuple(dict(x, zero_stage=1) for x in s.dims), s.log_errors)
            for s in synthetic(10, seed=2)]
    got = fit(sets)
    assert "zero_stage" not in got.value_sds
    model = got.model()
    prior = model._prior(("offset", "tp=1", "zero_stage=0"), model.value_sd)
    assert prior.tolist() == pytest.approx([got.offset_sd ** 2, got.value_sds["tp"] ** 2, VALUE_SD ** 2])


def test_leave_one_group_out_never_uses_the_held_out_group(monkeypatch):
    sets = synthetic(20, seed=3, group="a") + synthetic(20, seed=4, group="b", sds={"tp": 0.05, "pp": 0.6,
                                                                                   "mbs": 0.05}) \
        + synthetic(20, seed=5, group="c")
    seen = []
    real_fit = prior_sds.fit

    def spy(fitted, *args, **kwargs):
        seen.append({s.group for s in fitted})
        return real_fit(fitted, *args, **kwargs)

    monkeypatch.setattr(prior_sds, "fit", spy)
    logo = prior_sds.leave_one_group_out(sets)
    assert sorted(logo) == ["a", "b", "c"]
    assert seen == [{"b", "c"}, {"a", "c"}, {"a", "b"}]
    monkeypatch.undo()
    assert logo["b"] == fit([s for s in sets if s.group != "b"])
    # without group b (large pp effects) the fit sees small pp effects; with it, larger ones
    assert logo["b"].value_sds["pp"] < 0.2 < min(logo["a"].value_sds["pp"], logo["c"].value_sds["pp"])
    assert leave_one_group_out(sets)["a"].n_sweeps == 40


def test_balanced_weights_make_every_group_weigh_the_same():
    sets = synthetic(2, seed=6, group="small") + synthetic(30, seed=7, group="large")
    weights = prior_sds.group_weights(sets)
    trials = {"small": 2 * 24, "large": 30 * 24}
    assert weights["small"] * trials["small"] == pytest.approx(weights["large"] * trials["large"])
    assert sum(weights[g] * n for g, n in trials.items()) == pytest.approx(sum(trials.values()))


def test_per_dimension_sds_set_the_prior_and_empirical_bayes_scales_them_together():
    model = ResidualModel(dimension_sds=(("tp", 0.5), ("pp", 0.05)))
    names = ("offset", "tp=1", "tp=2", "pp=1", "mbs=1")
    assert np.sqrt(model._prior(names, model.value_sd)).tolist() == pytest.approx([0.5, 0.5, 0.5, 0.05, 0.15])
    assert np.sqrt(model._prior(names, 0.3)).tolist() == pytest.approx([0.5, 1.0, 1.0, 0.1, 0.3])
    # a first trial's miss goes to the level and the dimension with the wide prior, next to nothing to pp's value
    dims = [{"tp": tp, "pp": pp} for tp in (1, 2) for pp in (1, 2)]     # tp1 pp1, tp1 pp2, tp2 pp1, tp2 pp2
    post = model.posterior(dims, {0: math.log(2.0)})
    assert post.mean[1] > 0.95 * post.mean[0]              # tp1 pp2 shares tp1: nearly all of the miss
    assert post.mean[2] < 0.55 * post.mean[0]              # tp2 pp1 shares pp1: the level's half only
    flat = ResidualModel().posterior(dims, {0: math.log(2.0)})
    assert flat.mean[2] > 0.9 * flat.mean[0]               # the flat prior: ~92 % to any near-copy


def test_shipped_table_has_a_leave_out_fit_per_group_and_a_fit_on_all():
    data = prior_sds.load()
    assert data["generated_by"] == prior_sds.GENERATED_BY
    assert set(data["leave_one_group_out"]) == set(data["sweeps"]) == set(data["one_group"])
    every = prior_sds.shipped()
    assert every is not None and every.n_sweeps == sum(len(v) for v in data["sweeps"].values())
    for group, names in data["sweeps"].items():
        left = prior_sds.shipped(group)
        assert left is not None and left.n_sweeps == every.n_sweeps - len(names)
        assert data["one_group"][group]["n_sweeps"] == len(names)
    assert isinstance(PriorSds.from_json(data["all"]).model(), ResidualModel)
