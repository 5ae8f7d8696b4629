"""tests/benchmarks/bench_search_gap.py: the adaptive search's excess over the oracle split by phase (and its losers
by how they were picked) adds up, and the sweeps' weights are the group-balanced headline's."""

from __future__ import annotations

from pathlib import Path

import pytest
from benchmarks.bench_search_gap import PHASES, decompose, sequence, weigh

from launcher import replay_bench as rb

DATA = Path(__file__).resolve().parents[1] / "data" / "replay"


def test_the_phases_add_up_to_the_excess_over_the_oracle_and_the_weights_to_one():
    cases = rb.corpus([DATA / "h100_single_gpu.csv", DATA / "tiny_cpu.csv", DATA / "cpu_tiny_r8_slurm.csv"])
    gaps = [decompose(c) for c in cases]
    weigh(gaps)
    for g in gaps:
        result = rb.evaluate(g.case, ("adaptive", "oracle", "exhaustive"))
        assert (g.adaptive, g.oracle, g.plan) == pytest.approx(
            (result.share("adaptive"), result.share("oracle"), result.share("exhaustive")), rel=1e-12)
        assert sum(g.phases[p] for p in PHASES) == pytest.approx(g.excess, abs=1e-12)
        assert sum(g.picks.values()) == pytest.approx(sum(g.phases[p] for p in PHASES[:3]), abs=1e-12)
        assert 0.0 <= g.beyond_min_iters <= sum(g.phases[p] for p in PHASES[:3]) + 1e-12
        assert g.trials_to_found == len(sequence(g).splitlines()[1:]) - len(g.plan_steps)
    used = [g for g in gaps if g.informative]
    assert sum(g.weight for g in used) == pytest.approx(1.0)
    assert len({g.case.group for g in used}) > 1 and len({round(g.weight, 12) for g in used}) > 1
    slurm = next(g for g in gaps if g.case.sweep.name == "tiny-r8-slurm")
    assert slurm.phases["fitted"] > 0 and slurm.after_found > 0     # losers after the fit; the stop rule confirms
    assert slurm.picks["first"] > 0 and slurm.picks["top mean"] > 0
