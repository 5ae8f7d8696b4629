"""Replay-only experiment (issue 16, search10): the adaptive search's pick on the residual model's spreads without
the miss floor (launcher.plan.residuals.miss_floor), the stop rule and the checks keeping the floored ones.

    python tests/benchmarks/bench_search_pick_floor.py [--draws 3]

Why: after one trial that missed its prediction badly, the floor sets every unrun trial's spread to that miss, so
the pick (expected gain per GPU-hour) reads the predicted mean alone (bench_search_gap.py: the losers before the
found trial were mostly the top predicted mean). Not in the search: the sweep loop's predictions
(launcher/run/search.py) carry one spread, so this patches the replay (launcher.replay's `corrected` and
`scheduler.order`) for the run and prints, for today's search and the variant, the measured and perturbed headlines
and the sweeps worse than plan order, as bench_search_ablation.py does.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_search import DATA, grids_for_perturbation  # noqa: E402
from bench_search_ablation import headline  # noqa: E402

from launcher import replay  # noqa: E402
from launcher import replay_bench as rb  # noqa: E402
from launcher.plan import residuals  # noqa: E402
from launcher.run import scheduler  # noqa: E402


@contextlib.contextmanager
def pick_without_floor() -> Iterator[None]:
    """The replay's planned trials keep their floored spreads (stop rule, checks); the pick gets the unfloored ones
    of the same prediction (the replay predicts, then asks the stop rule, then the pick)."""
    corrected, order = replay.corrected, scheduler.order
    last: dict = {}

    def corrected_both(step, dims, measured, model=None, checks=()):
        model = model or residuals.MODEL
        last["sd"] = corrected(step, dims, measured, replace(model, miss_floor=False), checks=checks)[1]
        return corrected(step, dims, measured, model, checks=checks)

    def order_unfloored(planned, finished, **kw):
        raw = last.get("sd")
        if kw.get("calibrated") and raw is not None and len(raw) == len(planned):
            planned = [replace(p, step_sd=float(sd)) for p, sd in zip(planned, raw)]
        return order(planned, finished, **kw)

    replay.corrected, scheduler.order = corrected_both, order_unfloored
    try:
        yield
    finally:
        replay.corrected, scheduler.order = corrected, order


def _run(cases):
    return [rb.evaluate(c, ("adaptive", "exhaustive", "oracle", "random")) for c in cases]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=3)
    args = parser.parse_args(argv)
    cases = rb.corpus(sorted(DATA.glob("*.csv")))
    truths = rb.perturbed(grids_for_perturbation(cases), args.draws, 16) if args.draws else []
    for name, patch in (("today's pick", contextlib.nullcontext()), ("pick without the floor", pick_without_floor())):
        started = time.perf_counter()
        with patch:
            m = headline(_run(cases))
            perturbed = _run(truths)
        p = headline(perturbed) if truths else None
        line = f"{name:<24} measured {m[0]:.1%} (worse than plan order {m[1]} of {m[2]}, regret > 1 % {m[3]})"
        if p:
            low, high = rb.balanced_ci(perturbed, ["adaptive"], 1000)["adaptive"]
            line += f"; perturbed {p[0]:.1%} (CI {low:.1%}-{high:.1%}; worse {p[1]} of {p[2]}, regret > 1 % {p[3]})"
        print(f"{line} ({time.perf_counter() - started:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
