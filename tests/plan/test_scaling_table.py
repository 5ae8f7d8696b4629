"""The estimator against Narayanan et al. 2021 Table 1 (1.7B-1T GPT on A100-80GB, fp16, full recomputation).

Each row is run as published (n_gpus, TP, PP, DP, VPP, MBS, GBS from Megatron-LM examples/sc21/run_table_1.sh) on
the a100-80g preset, without flash attention (2021 Megatron). Predicted teraFLOP/s per GPU use the paper's eq. (3)
convention (recompute counted). Source of the data: the first line of tests/data/narayanan2021_table1.csv.
"""

from __future__ import annotations

import csv
import statistics
from pathlib import Path

import pytest

from launcher.config.schema import ModelConfig
from launcher.core.layout import Layout
from launcher.estimate import estimate, load_cluster_preset
from launcher.plan.rules import check

TABLE = Path(__file__).parent.parent / "data" / "narayanan2021_table1.csv"


def load_rows() -> list[dict]:
    with TABLE.open() as f:
        return list(csv.DictReader(line for line in f if not line.startswith("#")))


def predict(row: dict, vpp: int | None = None):
    cluster = load_cluster_preset("a100-80g")
    model = ModelConfig(name=row["model"], layers=int(row["layers"]), hidden=int(row["hidden"]),
                        heads=int(row["heads"]), ffn_hidden=int(row["ffn_hidden"]), seq_len=int(row["seq_len"]),
                        vocab=int(row["vocab"]))
    n = int(row["n_gpus"])
    layout = Layout(gpus=n, nodes=-(-n // cluster.gpus_per_node), tp=int(row["TP"]), pp=int(row["PP"]),
                    dp=int(row["DP"]), vpp=vpp or int(row["VPP"]), mbs=int(row["MBS"]), gbs=int(row["GBS"]),
                    recompute="full")
    assert row["precision"] == "fp16" and row["recompute"].startswith("full")
    return model, cluster, layout, estimate(model, cluster, layout, "fp16", flash_attention=False)


def test_table_has_the_ten_published_rows():
    rows = load_rows()
    assert [r["model"] for r in rows][0] == "GPT-1.7B" and len(rows) == 10
    assert TABLE.read_text().startswith("# SOURCE:")


@pytest.mark.parametrize("vpp_mode", ["published", "vpp1"])
def test_tflops_per_gpu_error(vpp_mode):
    """median |error| <= 10 %, max <= 20 % -- with the published interleaving and with none (vpp = 1)."""
    errors = {}
    for row in load_rows():
        *_, est = predict(row, vpp=1 if vpp_mode == "vpp1" else None)
        errors[row["model"]] = est.tflops_per_gpu / float(row["tflops_per_gpu"]) - 1
    report = ", ".join(f"{k} {v:+.1%}" for k, v in errors.items())
    magnitudes = [abs(v) for v in errors.values()]
    assert statistics.median(magnitudes) <= 0.10, report
    assert max(magnitudes) <= 0.20, report


def test_published_runs_are_valid_and_predicted_to_fit():
    """They ran, so the constraints must accept them and the memory estimate must stay under 80 GB."""
    for row in load_rows():
        model, cluster, layout, est = predict(row)
        verdict = check(model, cluster, layout)
        assert verdict.ok, (row["model"], verdict.reasons)
        assert 0 < est.headroom < 0.6, (row["model"], est.peak_mem_gb)


def test_bigger_models_reach_higher_throughput_as_published():
    """Table 1's trend: the 529.6B/1T rows beat the 1.7B-18.4B rows (bigger GEMMs outweigh the bubble)."""
    tflops = {row["model"]: predict(row)[-1].tflops_per_gpu for row in load_rows()}
    assert min(tflops["GPT-529.6B"], tflops["GPT-1008.0B"]) > max(tflops[m] for m in ("GPT-1.7B", "GPT-3.6B",
                                                                                       "GPT-7.5B", "GPT-18.4B"))
