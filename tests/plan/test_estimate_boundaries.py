"""Boundary tests of the estimator: each dimension value where the estimate changes, on both sides (cp 1 vs 2,
vpp 1 vs 2, sequence parallel, ZeRO stage 0 vs 1, distributed optimizer)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from backend_helpers import a100_80g, llama2_70b

from launcher.core.layout import Layout
from launcher.plan.estimator import estimate

MODEL = replace(llama2_70b(), seq_len=8192, max_position=8192)


def est(**changes):
    base = dict(gpus=64, nodes=8, tp=8, pp=4, dp=2, cp=1, vpp=1, mbs=1, gbs=64, recompute="selective",
                sequence_parallel=True, zero_stage=0, distributed_optimizer=False)
    return estimate(MODEL, a100_80g(), Layout(**{**base, **changes}), "bf16", backend="megatron_lm")


def test_cp_2_halves_the_activations_and_adds_ring_exchange():
    one, two = est(cp=1, dp=2), est(cp=2, dp=1)
    assert two.mem_breakdown_gb["activations"] == pytest.approx(one.mem_breakdown_gb["activations"] / 2, rel=1e-6)
    assert one.time_breakdown_s["cp_comm"] == 0 < two.time_breakdown_s["cp_comm"]


def test_vpp_2_shrinks_the_bubble():
    assert est(vpp=2).time_breakdown_s["bubble"] < est(vpp=1).time_breakdown_s["bubble"]


def test_sequence_parallel_shrinks_the_activations():
    assert est(sequence_parallel=True).mem_breakdown_gb["activations"] < \
        est(sequence_parallel=False).mem_breakdown_gb["activations"]


@pytest.mark.parametrize("changes", [dict(zero_stage=1), dict(distributed_optimizer=True)])
def test_sharding_the_optimizer_from_zero_1_or_the_distributed_optimizer(changes):
    assert est(**changes).mem_breakdown_gb["optimizer"] < est().mem_breakdown_gb["optimizer"]
