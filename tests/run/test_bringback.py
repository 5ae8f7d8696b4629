"""Bringing back planner-pruned trials (launcher.run.bringback.bring_back): a pure function of ledger records and
the calibrated model's predictions."""

from __future__ import annotations

from launcher.config.load import load_config
from launcher.core.record import TrialRecord
from launcher.core.states import PruneReason, TrialState
from launcher.run.bringback import bring_back, candidates, predict_pruned
from launcher.run.search import Search

LAYOUT = {"gpus": 1, "nodes": 1, "tp": 1, "pp": 1, "dp": 1, "vpp": 1, "mbs": 1, "gbs": 16, "recompute": "none",
          "sequence_parallel": False, "zero_stage": 0, "distributed_optimizer": False}
APRIORI = {"step_time_s": 1.0, "peak_mem_gb": 0.61, "peak_mem_gb_low": 0.55}


def pruned(key: str, mbs: int, by: PruneReason = PruneReason.PREDICTED_OOM) -> TrialRecord:
    return TrialRecord(key, mbs, LAYOUT | {"mbs": mbs}, APRIORI, "pruned", state=TrialState.PRUNED, pruned_by=by,
                       reason="predicted 0.61 GB ...")


def calibrated(peak_gb: float, mem_sd: float = 0.05) -> dict:
    return {"step_time_s": 1.0, "step_sd": 0.1, "tokens_per_s": 2048.0, "peak_mem_gb": peak_gb, "mem_sd": mem_sd,
            "n_fit": 3}


def test_a_pruned_oom_whose_calibrated_interval_fits_comes_back_with_the_numbers():
    records = [pruned("fits", 16), pruned("still_over", 32)]
    back = dict(bring_back(records, {"fits": calibrated(0.35), "still_over": calibrated(0.7)}, 0.5, 0.9))
    assert list(back) == ["fits"]
    assert back["fits"].startswith("brought back: the calibrated model says 0.35 GB (90 % interval 0.322–0.38 GB) "
                                   "of 0.5 GB, fitted on 3 measured trials (a-priori 0.61 GB")


def test_the_band_is_the_planners_a_point_over_capacity_whose_low_end_fits_comes_back():
    back = bring_back([pruned("band", 16)], {"band": calibrated(0.52, mem_sd=0.05)}, 0.5, 0.9)
    assert [key for key, _ in back] == ["band"]                       # 0.52 x exp(-1.645 x 0.05) = 0.48 GB
    assert not bring_back([pruned("band", 16)], {"band": calibrated(0.52, mem_sd=0.01)}, 0.5, 0.9)


def test_a_real_oom_of_a_trial_needing_no_more_memory_rules_it_out():
    oom = TrialRecord("oom", 0, LAYOUT | {"mbs": 8}, APRIORI, state=TrialState.OOM)
    assert not bring_back([oom, pruned("big", 16)], {"big": calibrated(0.35)}, 0.5, 0.9)
    smaller_oom = TrialRecord("oom", 0, LAYOUT | {"mbs": 32}, APRIORI, state=TrialState.OOM)   # needs more: no say
    assert bring_back([smaller_oom, pruned("big", 16)], {"big": calibrated(0.35)}, 0.5, 0.9)


def test_only_the_planners_prunes_come_back_and_only_once():
    records = [pruned("calibrated", 16, PruneReason.CALIBRATED_OOM), pruned("converged", 2, PruneReason.CONVERGED),
               TrialRecord("back", 3, LAYOUT, APRIORI, "brought_back")]       # already brought back: planned
    predictions = {r.config_hash: calibrated(0.2) for r in records}
    assert candidates(records) == [] and bring_back(records, predictions, 0.5, 0.9) == []
    assert bring_back([pruned("unpredicted", 16)], {}, 0.5, 0.9) == []


def test_only_what_may_fit_is_priced_in_full_and_its_prediction_is_unchanged():
    """predict_pruned(may_fit=...) is bring_back's memory rule applied first (a refit at 50k trials re-predicted
    thousands of pruned layouts with every constant's spread); what it keeps is predicted exactly as without it."""
    cfg = load_config(["+sweep=tiny", "tracking.enabled=false"])
    search = Search(cfg)
    records = [pruned("small", 2), pruned("large", 16)]
    everything = predict_pruned(search.calibration, records, search.features, cfg.model.seq_len)
    small, large = everything["small"]["peak_mem_gb"], everything["large"]["peak_mem_gb"]
    assert small < large
    kept = predict_pruned(search.calibration, records, search.features, cfg.model.seq_len,
                          may_fit=lambda peak, sd: peak < (small + large) / 2 and sd > 0)
    assert kept == {"small": everything["small"]}
    assert predict_pruned(search.calibration, records, search.features, cfg.model.seq_len,
                          may_fit=lambda peak, sd: False) == {}


def test_the_candidates_table_kept_between_refits_predicts_as_a_new_one():
    """predict_pruned(tables=...) keeps the candidates' features table while they stay; a refit's predictions are
    the same as with a table built again, and a different set of candidates gets its own table."""
    cfg = load_config(["+sweep=tiny", "tracking.enabled=false"])
    search = Search(cfg)
    records = [pruned("small", 2), pruned("large", 16)]
    tables: dict = {}
    first = predict_pruned(search.calibration, records, search.features, cfg.model.seq_len, tables=tables)
    assert first == predict_pruned(search.calibration, records, search.features, cfg.model.seq_len)
    kept = next(iter(tables.values()))
    assert predict_pruned(search.calibration, records, search.features, cfg.model.seq_len, tables=tables) == first
    assert next(iter(tables.values())) is kept      # not built again
    fewer = predict_pruned(search.calibration, records[:1], search.features, cfg.model.seq_len, tables=tables)
    assert fewer == {"small": first["small"]} and list(tables) == [("small",)]
