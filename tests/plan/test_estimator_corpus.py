"""The published-corpus reader, the corpus fit and leave-one-source-out judging, the spread data (issue 15 item 2)."""

from __future__ import annotations

import csv
import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from launcher.plan import fit as F
from launcher.plan import spread
from launcher.plan.corpus import ASSUMED_VOCAB, RowError, inter_node_gbytes_per_s, parse_row, read_corpus

COLUMNS = ["source_id", "row_ref", "model", "params_b", "layers", "hidden", "ffn_hidden", "heads", "kv_heads", "vocab", "seq_len", "gated_ffn", "tied_embeddings", "num_experts", "gpu", "n_gpus", "gpus_per_node", "network", "stack", "stack_version", "precision", "tp", "pp", "dp", "cp", "vpp", "ep", "mbs", "gbs", "recompute", "sequence_parallel", "zero_stage", "fsdp", "reshard_after_forward", "distributed_optimizer", "flash_attention", "torch_compile", "state", "step_time_s", "step_time_how", "tokens_per_s_per_gpu", "tflops_per_gpu", "tflops_convention", "mfu", "peak_mem_gb", "mem_how", "notes"]
LLAMA = dict(model="llama-8b", params_b="8", layers="32", hidden="4096", ffn_hidden="14336", heads="32", kv_heads="8",
             vocab="128256", seq_len="4096", gated_ffn="true", tied_embeddings="false", gpu="h100-80g",
             stack="megatron_lm", precision="bf16", tp="1", pp="1", cp="1", mbs="1", recompute="selective",
             state="ok")


def row(**kw) -> dict:
    out = dict.fromkeys(COLUMNS, "")
    out.update(source_id="src", row_ref="r", **LLAMA)
    out.update({k: str(v) for k, v in kw.items()})
    return out


def test_a_row_becomes_a_request_with_its_measurements():
    r = parse_row(row(n_gpus=16, dp=16, gbs=64, step_time_s=2.0, peak_mem_gb=60, mem_how="allocated: max_memory_allocated GiB",
                      network="8x400Gb/s InfiniBand NDR per node", notes="SDPA FlashAttention v2"))
    assert (r.layout.gpus, r.layout.nodes, r.layout.dp, r.layout.microbatches) == (16, 2, 16, 4)
    assert r.model.swiglu and r.model.norm == "rmsnorm" and not r.model.tied_embeddings and r.model.kv_heads == 8
    assert r.cluster.name == "h100-80g" and r.cluster.inter_node_gbytes_per_s == 50.0
    assert r.peak_mem_gb == pytest.approx(60 * 1.073741824) and r.mem_quantity == "allocated"
    assert r.workload.attention_kernel == "fa2" and r.flash


def test_memory_quantity_vocabulary_and_open_inputs():
    """mem_how must name what the peak counts; an unstated flash attention or recompute is carried as the settings
    it leaves possible, not guessed (the nominal setting is what the step time uses)."""
    with pytest.raises(RowError, match="start it with one of"):
        parse_row(row(n_gpus=8, dp=8, gbs=64, step_time_s=1.0, peak_mem_gb=60, mem_how="peak memory, GB"))
    stated = parse_row(row(n_gpus=8, dp=8, gbs=64, step_time_s=1.0, recompute="full", flash_attention="true"))
    assert stated.memory_variants == () and stated.mem_quantity == ""
    open_ = parse_row(row(n_gpus=8, dp=8, gbs=64, step_time_s=1.0, peak_mem_gb=50, recompute="",
                          mem_how="allocated_or_reserved: framework report"))
    assert open_.flash and open_.layout.recompute == "none"
    settings = {(lay.recompute, flash) for lay, _, flash in open_.memory_variants}
    assert settings == {(rc, f) for rc in ("none", "selective", "full") for f in (True, False)} - {("none", True)}
    likeliest = parse_row(row(n_gpus=8, dp=8, gbs=64, step_time_s=1.0, recompute="unstated:full",
                              flash_attention="false"))
    assert likeliest.layout.recompute == "full"      # the step time's setting
    assert {lay.recompute for lay, _, _ in likeliest.memory_variants} == {"none", "selective"}


def test_open_inputs_widen_the_memory_interval_and_the_oom_judgement():
    """An OOM row is missed only when even its heaviest plausible setting fits; a run that ran is a false OOM only
    when even its lightest one does not."""
    big = dict(n_gpus=8, dp=8, gbs=64, seq_len=32768, mbs=4)
    nominal = F.predict(F.prepare([parse_row(row(state="oom", recompute="none", flash_attention="true", **big))]),
                        F.Fit(np.zeros(len(F.CORPUS_PARAMETERS)), np.zeros(len(F.cal.MEMORY_PARAMETERS))))[0]
    open_ = F.predict(F.prepare([parse_row(row(state="oom", recompute="", **big))]),
                      F.Fit(np.zeros(len(F.CORPUS_PARAMETERS)), np.zeros(len(F.cal.MEMORY_PARAMETERS))))[0]
    assert open_.peak_mem_gb == pytest.approx(nominal.peak_mem_gb)
    assert open_.peak_low_gb < open_.peak_mem_gb < open_.peak_high_gb      # full recompute / no flash
    assert nominal.peak_low_gb == nominal.peak_high_gb == pytest.approx(nominal.peak_mem_gb)


def _predicted(source: str, state: str, peak_gb: float, measured_gb: float = 0.0) -> F.Predicted:
    r = parse_row(row(source_id=source, n_gpus=8, dp=8, gbs=64, state=state,
                      **({"step_time_s": 1.0} if state == "ok" else {}),
                      **({"peak_mem_gb": measured_gb, "mem_how": "allocated: GB"} if measured_gb else {})))
    return F.Predicted(r, 1.0, peak_gb, peak_gb, peak_gb, peak_gb)


def test_oom_judged_by_the_planners_interval_rule():
    """(b): a run that ran is a false OOM only when its interval's LOWER end is over the device (80 GB of an H100
    here), a real OOM is missed only when the interval's UPPER end is under it; (a), the point prediction against
    0.9 x the memory, is kept beside it."""
    data = {"peak_mem": {"all": {"n": 100, "quantiles": {"0.05": math.log(0.8), "0.95": math.log(1.25)}},
                         "per_stack": {}}}
    cap = parse_row(row(n_gpus=8, dp=8, gbs=64, step_time_s=1.0)).cluster.gpu_mem_gb
    rows = [_predicted("a", "ok", 0.95 * cap),     # over 0.9 x: a point false OOM; its lower end 0.76 x fits
            _predicted("a", "ok", 1.3 * cap),      # lower end 1.04 x over the device: pruned by the planner too
            _predicted("a", "oom", 0.7 * cap),     # upper end 0.875 x under the device: missed both ways
            _predicted("a", "oom", 0.85 * cap)]    # point under 0.9 x (missed by (a)); upper end 1.06 x: flagged
    banded = F.with_band(rows, data)
    assert banded[0].band_low_gb == pytest.approx(0.95 * cap * 0.8)
    assert banded[0].band_high_gb == pytest.approx(0.95 * cap * 1.25)
    s = F.scores(banded)
    assert (s.false_oom, s.missed_oom) == (2, 2)
    assert (s.band_false_oom, s.band_missed_oom) == (1, 1)
    assert F.scores(rows).band_false_oom is None                   # no intervals: no (b) figure


def test_loso_intervals_never_see_their_own_source():
    """Each source's interval comes from the other sources' residuals: changing a source's own measurements leaves
    its interval unchanged and moves the others'."""
    def corpus(c_measured: float) -> list[F.Predicted]:
        return ([_predicted("a", "ok", 50.0, 50.0 * k) for k in (0.9, 1.0, 1.1)]
                + [_predicted("b", "ok", 50.0, 50.0 * k) for k in (0.8, 1.0, 1.2)]
                + [_predicted("c", "ok", 50.0, c_measured * k) for k in (0.95, 1.0, 1.05)])
    before, after = F.loso_bands(corpus(50.0)), F.loso_bands(corpus(100.0))

    def bounds(predicted: list[F.Predicted], source: str) -> list[float]:
        return [b or 0.0 for p in predicted if p.row.source == source for b in (p.band_low_gb, p.band_high_gb)]
    assert bounds(after, "c") == pytest.approx(bounds(before, "c"))
    a_after = next(p for p in after if p.row.source == "a")
    a_before = next(p for p in before if p.row.source == "a")
    assert a_after.band_high_gb is not None and a_before.band_high_gb is not None
    assert a_after.band_high_gb > a_before.band_high_gb          # c's larger peaks widen a's upper end


def test_step_time_from_tokens_or_mfu():
    by_tokens = parse_row(row(n_gpus=8, dp=8, gbs=64, tokens_per_s_per_gpu=4096))
    assert by_tokens.step_time_s == pytest.approx(64 * 4096 / (4096 * 8))
    by_mfu = parse_row(row(n_gpus=8, dp=8, gbs=64, mfu=0.5, tflops_convention="model flops / 989 TFLOP/s"))
    from launcher.plan.flops import model_flops
    assert by_mfu.step_time_s == pytest.approx(model_flops(by_mfu.model, 64, 128256) / (0.5 * 989e12 * 8))


@pytest.mark.parametrize("kw, reason", [(dict(num_experts=8), "mixture of experts"),
                                        (dict(precision="nvfp4"), "precision"),
                                        (dict(recompute="other:selective modules mlp"), "recompute"),
                                        (dict(mbs=""), "micro-batch"),
                                        (dict(dp=3), "n_gpus"),
                                        (dict(gpu="tpu-v5"), "datasheet")])
def test_rows_the_estimator_cannot_represent_say_why(kw, reason):
    with pytest.raises(RowError, match=reason):
        parse_row(row(**{**dict(n_gpus=8, dp=8, gbs=64), **kw}))


def test_stack_specific_defaults():
    fsdp = parse_row(row(n_gpus=8, dp=8, gbs=64, stack="pytorch_fsdp"))
    assert fsdp.workload.fsdp == "full_shard" and fsdp.layout.zero_stage == 3      # FSDP's default sharding
    kf = parse_row(row(n_gpus=8, tp=4, dp=2, gbs=8, stack="torchtitan_like", stack_version="KempnerForge git x"))
    assert kf.workload.stack == "kempnerforge" and kf.layout.sequence_parallel
    gpt = parse_row(row(n_gpus=8, dp=8, gbs=64, gated_ffn="false", vocab="", seq_len=65536))
    assert gpt.model.vocab == ASSUMED_VOCAB and gpt.model.max_position == 8192 and gpt.model.norm == "layernorm"


def test_network_text():
    assert inter_node_gbytes_per_s("8x HDR InfiniBand 200Gb/s per node", 8) == 25.0
    assert inter_node_gbytes_per_s("RoCE, 400 Gbps per GPU", 8) == 50.0
    assert inter_node_gbytes_per_s("400Gbps inter-node", 8) == 50.0
    assert inter_node_gbytes_per_s("3200 Gbps per node", 8) == 50.0
    assert inter_node_gbytes_per_s("", 8) is None


def write_corpus(folder: Path, truth_scale: dict[str, float]) -> None:
    """Three sources of the same shapes, step times made by the estimator itself with GEMM efficiency scaled per
    source (a source-specific 'truth')."""
    import random

    from launcher.plan.estimator import estimate
    rng = random.Random(0)
    for source, scale in truth_scale.items():
        rows = []
        for i in range(8):
            n = rng.choice([8, 16])
            tp = rng.choice([1, 2, 4])
            mbs = rng.choice([1, 2])
            r = row(source_id=source, row_ref=str(i), n_gpus=n, tp=tp, dp=n // tp, mbs=mbs, gbs=32 * mbs * n // tp,
                    sequence_parallel="true" if tp > 1 else "false")
            parsed = parse_row(r)
            c = F.prior_of(parsed).with_values(gemm_eff_max=F.prior_of(parsed).gemm_eff_max * scale)
            e = estimate(parsed.model, parsed.cluster, parsed.layout, "bf16", constants=c)
            r["step_time_s"] = f"{e.step_time_s:.6g}"
            rows.append(r)
        with (folder / f"{source}.csv").open("w", newline="") as f:
            f.write("# SOURCE: synthetic\n")
            w = csv.DictWriter(f, COLUMNS)
            w.writeheader()
            w.writerows(rows)


def test_fit_recovers_a_shared_efficiency_and_loso_never_sees_the_held_out_source(tmp_path):
    write_corpus(tmp_path, {"a": 0.8, "b": 0.8, "c": 0.8})
    rows, skipped = read_corpus(tmp_path)
    assert len(rows) == 24 and not skipped
    prepared = F.prepare(rows)
    result = F.fit(prepared)
    assert F.scores(F.predict(prepared, result)).step_median < 0.01
    # the fitted GEMM efficiency (x its H100 multiplier) is the truth's: 0.8 of the prior
    names = [p.name for p in result.params]
    eff = math.exp(result.theta[names.index("compute")] + result.theta[names.index("hopper")])
    assert eff == pytest.approx(0.8, rel=0.02)
    # leave-one-source-out: a held-out source's predictions do not depend on its own measurements
    write_corpus(tmp_path, {"a": 0.8, "b": 0.8, "c": 0.5})
    changed = F.loso(F.prepare(read_corpus(tmp_path)[0]))
    before = {(p.row.source, p.row.ref): p.step_time_s for p in F.loso(prepared)}
    assert all(p.step_time_s == pytest.approx(before[(p.row.source, p.row.ref)], rel=1e-6)
               for p in changed if p.row.source == "c")
    held = F.scores([p for p in changed if p.row.source == "c"])
    assert held.step_median > 0.3                      # c's slower GEMMs cannot be learnt from a and b


def test_scores_count_ooms_at_the_margin_and_spearman_within_groups():
    rows = read_corpus(Path(__file__).parents[1] / "data" / "missing")[0]
    assert rows == []
    assert F.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert F.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1.0)
    assert math.isnan(F.spearman([1, 1, 1], [1, 2, 3]))


def test_spread_intervals(tmp_path):
    data = {"step_time": {"all": {"n": 100, "quantiles": {"0.05": -0.2, "0.95": 0.3}},
                          "per_stack": {"nemo": {"n": 20, "quantiles": {"0.05": -0.1, "0.95": 0.1}},
                                        "nanotron": {"n": 3, "quantiles": {"0.05": -1.0, "0.95": 1.0}}}}}
    lo, hi = spread.interval("step_time", 2.0, "nemo", data=data)
    assert (lo, hi) == pytest.approx((2 * math.exp(-0.1), 2 * math.exp(0.1)))
    assert spread.interval("step_time", 2.0, "nanotron", data=data) == pytest.approx(
        (2 * math.exp(-0.2), 2 * math.exp(0.3)))                     # too few rows: the overall spread
    assert spread.interval("peak_mem", 2.0, data=data) is None
    with pytest.raises(ValueError):
        spread.interval("tokens", 1.0, data=data)


def test_spread_intervals_are_centred_on_the_prediction():
    # A stack whose leave-one-source-out residuals are all negative (a model without it is too slow on it): the
    # shipped fit includes the stack, so the interval keeps the width and is centred on the prediction.
    data = {"step_time": {"all": {"n": 100, "quantiles": {"0.05": -0.24, "0.5": -0.10, "0.95": -0.04}},
                          "per_stack": {}}}
    lo, hi = spread.interval("step_time", 1.0, "x", data=data)
    assert lo < 1.0 < hi
    assert (lo, hi) == pytest.approx((math.exp(-0.14), math.exp(0.06)))


def test_shipped_spread_file_is_well_formed():
    data = spread.load_spread()
    assert data and data["definition"].startswith("log(measured / predicted)")
    for quantity in ("step_time", "peak_mem"):
        q = data[quantity]["all"]["quantiles"]
        values = [q[k] for k in sorted(q, key=float)]
        assert values == sorted(values) and data[quantity]["all"]["n"] > 50
    assert np.isfinite(data["step_time"]["all"]["sd_robust"])


def test_replay_tables_join_their_campaign_and_are_judged_not_fitted():
    """pub_ultrascale.csv is the same campaign as nanotron_ultrascale_best (one LOSO source), its 'oom' rows are
    'crashed/oom' in the source; vTrain is a source of its own; neither is fitted on (corpus.REPLAY_SOURCES)."""
    from launcher.plan.corpus import REPLAY_DIR, REPLAY_SOURCES

    assert REPLAY_SOURCES["pub_ultrascale.csv"].source == "nanotron_ultrascale_best"
    rows, skipped = read_corpus(sources=["nanotron_ultrascale_best", "vtrain"], replay=REPLAY_DIR)
    assert not skipped
    by = {}
    for r in rows:
        by.setdefault((r.source, r.state, r.fitted), 0)
        by[(r.source, r.state, r.fitted)] += 1
    assert by[("nanotron_ultrascale_best", "crash_or_oom", False)] == 1348
    assert by[("nanotron_ultrascale_best", "ok", False)] == 1739 and by[("nanotron_ultrascale_best", "ok", True)] == 26
    assert by[("vtrain", "ok", False)] == 884
    grid = next(r for r in rows if not r.fitted and r.source == "nanotron_ultrascale_best" and r.peak_mem_gb)
    assert grid.mem_quantity == "allocated_or_reserved" and grid.workload.stack == "nanotron"
    without = read_corpus()[0]                                   # replay tables only when asked for
    assert "vtrain" not in {r.source for r in without} and all(r.fitted for r in without)


def test_a_source_that_measured_its_network_prices_every_row_with_it():
    """The Ultra-Scale Playbook measured its EFA cluster (launcher.plan.corpus.SOURCE_NETWORK_STEP_S): its published
    best configurations and its replay grid carry the step latency; other sources do not. On 64 nodes it is what
    the step is made of for a small model, on one node it changes nothing."""
    from launcher.plan.corpus import REPLAY_DIR, SOURCE_NETWORK_STEP_S
    from launcher.plan.estimator import estimate

    rows, _ = read_corpus(sources=["nanotron_ultrascale_best", "kempnerforge_h200"], replay=REPLAY_DIR)
    steps = {(r.source, r.workload.network_step_s) for r in rows}
    assert steps == {("nanotron_ultrascale_best", SOURCE_NETWORK_STEP_S["nanotron_ultrascale_best"]),
                     ("kempnerforge_h200", 0.0)}

    def seconds(r, step_s):
        w = replace(r.workload, network_step_s=step_s)
        return estimate(r.model, r.cluster, r.layout, r.precision, flash_attention=r.flash, workload=w,
                        backend=r.backend).step_time_s
    grid = [r for r in rows if not r.fitted and r.state == "ok"]
    one_node = next(r for r in grid if r.layout.nodes == 1)
    wide = next(r for r in grid if r.layout.nodes == 64 and r.layout.zero_stage == 1 and r.layout.pp == 1)
    assert seconds(one_node, 43.5e-6) == pytest.approx(seconds(one_node, 0.0))
    assert seconds(wide, 43.5e-6) > 1.5 * seconds(wide, 0.0)
