"""launcher.replay_bench: the per-dimension prior sds a replayed sweep's search gets (left out per source group)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from launcher import replay_bench as rb
from launcher.plan.prior_sds import PriorSds
from launcher.plan.residuals import ResidualModel
from launcher.replay import replay_sweep

DATA = Path(__file__).resolve().parents[1] / "data" / "replay"
TABLES = ("cpu_tiny_r1.csv", "h100_gpu2_g17.csv")


def fits():
    return {"cpu-local": PriorSds(0.3, 0.1, {"tp": 0.9}), "own-gpu": PriorSds(0.2, 0.1, {"mbs": 0.05}),
            "all": PriorSds(0.4, 0.1, {"tp": 0.5, "mbs": 0.3})}


def test_each_group_gets_the_fit_that_left_it_out_and_an_unknown_group_the_fit_on_all():
    cases = rb.corpus([DATA / t for t in TABLES])
    cases.append(rb.Case(cases[0].sweep, "other", cases[0].costs))
    got = {c.group: c.residual_model for c in rb.with_prior_sds(cases, "logo", fits())}
    assert got["cpu-local"] == ResidualModel(offset_sd=0.3, dimension_sds=(("tp", 0.9),))
    assert got["own-gpu"] == ResidualModel(offset_sd=0.2, dimension_sds=(("mbs", 0.05),))
    assert got["other"] == fits()["all"].model()
    assert {c.residual_model for c in rb.with_prior_sds(cases, "all", fits())} == {fits()["all"].model()}
    assert all(c.residual_model is None for c in rb.with_prior_sds(cases, "flat"))
    shape = rb.with_prior_sds(cases[:1], "logo-shape", fits())[0].residual_model
    assert shape is not None and shape.offset_sd == ResidualModel().offset_sd
    assert dict(shape.dimension_sds)["tp"] == pytest.approx(ResidualModel().value_sd)
    with pytest.raises(ValueError, match="prior sds mode"):
        rb.with_prior_sds(cases, "loo")


def test_the_residual_sets_are_the_ok_rows_log_errors_against_the_a_priori_estimate():
    case = rb.corpus([DATA / TABLES[1]])[0]
    sets = rb.residual_sets([case])
    ok = [r for r in case.sweep.rows if r.step_time_s]
    assert len(sets) == 1 and len(sets[0].log_errors) == len(ok) and sets[0].group == "own-gpu"
    first = ok[0]
    assert sets[0].log_errors[0] == pytest.approx(math.log(first.step_time_s / first.request.estimate().step_time_s),
                                                  abs=0.02)


def test_the_replay_uses_the_cases_residual_model():
    case = rb.corpus([DATA / TABLES[0]])[0]
    flat = rb.evaluate(case, ("adaptive",))
    wide = rb.evaluate(rb.with_prior_sds([case], "all", {"all": PriorSds(3.0, 0.1, {d: 3.0 for d in
                                                                                      ("tp", "pp", "mbs", "dp")})})[0],
                       ("adaptive",))
    assert flat.trials["adaptive"] != wide.trials["adaptive"] or flat.to_within != wide.to_within


def test_pick_only_leaves_the_stop_rule_on_the_flat_model():
    case = rb.corpus([DATA / TABLES[0]])[0]
    picked = rb.with_prior_sds([case], "logo-pick", fits())[0]
    assert picked.pick_only and rb._models(picked) == (None, picked.residual_model)
    both = rb.with_prior_sds([case], "logo", fits())[0]
    assert rb._models(both) == (both.residual_model, None)
    plain = replay_sweep(case.sweep, costs=case.costs)
    same = replay_sweep(case.sweep, costs=case.costs, pick_model=ResidualModel())   # the flat model for the pick
    assert [s.key for s in same.steps] == [s.key for s in plain.steps]
    wide = ResidualModel(offset_sd=3.0, dimension_sds=tuple((d, 3.0) for d in ("tp", "pp", "dp", "mbs")))
    assert [s.key for s in replay_sweep(case.sweep, costs=case.costs, pick_model=wide).steps] != \
        [s.key for s in plain.steps]
