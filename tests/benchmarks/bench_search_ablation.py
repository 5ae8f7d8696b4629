"""Ablation of the search's decisions (issue 16 item 3): the search benchmark's headline for each variant of the
scheduler policy (launcher.run.scheduler.Policy), so that every change is justified by the benchmark.

    python tests/benchmarks/bench_search_ablation.py [--draws 4] [--only NAME ...]

Prints, per variant, the group-balanced mean share of exhaustive GPU-hours to within 2 % of the best (measured
tables, and perturbed truths), the share where the adaptive search needed more than plan order, and the sweeps
with a final regret above 1 %. Baselines (oracle, plan order, random) do not depend on the policy: see
bench_search.py.
"""

from __future__ import annotations

import argparse
import multiprocessing
import sys
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_search import DATA, grids_for_perturbation  # noqa: E402

from launcher import replay_bench as rb  # noqa: E402
from launcher.plan import residuals  # noqa: E402
from launcher.plan.residuals import ResidualModel  # noqa: E402
from launcher.run.scheduler import POLICY, Policy  # noqa: E402

SEARCH5 = replace(POLICY, stop_dof=3.0, explore=1.0)
"""The policy as search5 left it (main 5e655f7)."""
OLD = Policy(rule="chance", span=1, stop_combine="max", residuals=False, min_fit_trials=3)
VARIANTS = {
    "main (before issue 16)": (OLD, False),
    "main, no spanning pick": (replace(OLD, span=0), False),
    "main, stop on any": (replace(OLD, stop_combine="any"), False),
    "main, gain per GPU-h": (replace(OLD, rule="gain", span=0), False),
    "main + residual model": (replace(OLD, residuals=True, span=0), False),
    "new, chance to beat": (replace(SEARCH5, rule="chance"), False),
    "new, no residual model": (replace(SEARCH5, residuals=False), False),
    "new, fit after 8": (replace(SEARCH5, min_fit_trials=8), False),
    "new, never refit": (replace(SEARCH5, min_fit_trials=10 ** 6), False),
    "new, stop max": (replace(SEARCH5, stop_combine="max"), False),
    "new, stop t3": (replace(SEARCH5, stop_dof=3.0), False),
    "new, residual noise 0.10": (SEARCH5, False, ResidualModel(noise_sd=0.10)),
    "new": (SEARCH5, False),
    "new + steady stop": (SEARCH5, True),
    "new + steady, stop t3": (replace(SEARCH5, stop_dof=3.0), True),
    "new + steady, no stop rule": (replace(SEARCH5, stop_combine="never"), True),
    # search5 (issue 16 round 3): every variant with steady stop, as the loop runs
    "search5 start": (SEARCH5, True, ResidualModel(miss_floor=False)),
    "+ miss floor": (SEARCH5, True),
    # search6 (issue 16 round 4): from "+ miss floor"
    "+ explore on half spreads": (replace(SEARCH5, explore=0.5), True),
    "+ stop rule t2": (replace(SEARCH5, stop_dof=2.0), True),
    "+ both (now)": (POLICY, True),
    "now, identified dims only": (POLICY, True, ResidualModel(identified_only=True)),
    # search10 (issue 16, 27 Nov): a column per step up of every size besides the per-value effects (not adopted)
    "now + size steps": (POLICY, True, ResidualModel(steps=True)),
    "now + size steps, half sd": (POLICY, True, ResidualModel(steps=True, step_scale=0.5)),
    # search11 (issue 16, 27 Nov): the pick reads the spreads without the miss floor (Policy.pick_floor=False, now)
    "now, pick on floored spreads": (replace(POLICY, pick_floor=True), True),
    # search11: the effects of a dimension with one value measured at a share of the value sd (not adopted)
    "now, unidentified sd x0.5": (POLICY, True, ResidualModel(unidentified_scale=0.5)),
    "now, unidentified sd x0.3": (POLICY, True, ResidualModel(unidentified_scale=0.3)),
    "now, unidentified sd x0.15": (POLICY, True, ResidualModel(unidentified_scale=0.15)),
    # search12 (issue 16, 27 Nov): per-dimension prior sds learned across sweeps (launcher.plan.prior_sds), each
    # measured table replayed with the sds fitted without its own source group; perturbed truths with the fit on all
    "now, prior sds per dimension (LOGO)": (POLICY, True, "logo"),
    "now, prior sds per dimension (all groups, in sample)": (POLICY, True, "all"),
    "now, prior sds per dimension (LOGO), pick only": (POLICY, True, "logo-pick"),
    "now, prior sds per dimension (LOGO), shape only": (POLICY, True, "logo-shape"),
    # search16 (issue 16, 28 Nov): the constants refitted earlier, probed past a max(), read by the pick (not adopted)
    "now, refit from 1 trial": (replace(POLICY, min_fit_trials=1, trust_trials=3), True),
    "now, refit from 2 trials": (replace(POLICY, min_fit_trials=2, trust_trials=3), True),
    "now, fit probe": (replace(POLICY, fit_probe=True), True),
    "now, fit probe, refit from 2": (replace(POLICY, fit_probe=True, min_fit_trials=2, trust_trials=3), True),
    "now, pick on constants' spread": (replace(POLICY, pick_param_sd=True), True),
    "now, pick prequential (2)": (replace(POLICY, pick_select=2), True),
}


def _one(args):
    case, policy, steady = args
    return rb.evaluate(case, ("adaptive", "exhaustive", "oracle", "random"), steady_stop=steady, policy=policy)


def headline(results):
    groups = sorted({r.case.group for r in results})
    sums = [rb.summarise([r for r in results if r.case.group == g], g) for g in groups]
    used = [r for r in results if r.informative]
    worse = sum(1 for r in used if r.share("adaptive") > r.share("exhaustive") * 1.0001)
    regret = sum(1 for r in results if r.regret["adaptive"] > 0.01)
    h = rb.balanced(sums, ["adaptive", "exhaustive"])
    spent = sum(r.spent["adaptive"] / r.exhaustive_gpu_hours for r in results) / len(results)
    return h["adaptive"], worse, len(used), regret, len(results), spent


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--draws", type=int, default=4)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--only", nargs="*", default=None)
    parser.add_argument("--tables", type=Path, nargs="*", default=None)
    parser.add_argument("--prior-sds-file", type=Path, default=None,
                        help="the prior sds variants' table (default launcher/plan/prior_sds.json)")
    args = parser.parse_args(argv)
    cases = rb.corpus(args.tables or sorted(DATA.glob("*.csv")))
    truths = rb.perturbed(grids_for_perturbation(cases), args.draws, 16) if args.draws else []
    print(f"{'variant':<26} {'measured':>9} {'>plan':>8} {'regret>1%':>9} {'spent':>6}   {'perturbed':>9} "
          f"{'>plan':>8} {'regret>1%':>9} {'spent':>6}")
    for name, (policy, steady, *model) in VARIANTS.items():
        if args.only and name not in args.only:
            continue
        mode = model[0] if model and isinstance(model[0], str) else "flat"    # prior sds (rb.with_prior_sds)
        residuals.MODEL = model[0] if model and mode == "flat" else ResidualModel()    # the workers fork with it
        ms = rb.with_prior_sds(cases, mode, path=args.prior_sds_file)
        ts = rb.with_prior_sds(truths, mode.replace("logo", "all"), path=args.prior_sds_file)   # no measured error
        with multiprocessing.Pool(args.jobs) as pool:
            started = time.perf_counter()
            m = headline(pool.map(_one, [(c, policy, steady) for c in ms], chunksize=1))
            p = headline(pool.map(_one, [(c, policy, steady) for c in ts], chunksize=1)) if ts else None
            cells = f"{m[0]:>9.1%} {m[1]:>3} / {m[2]:<3} {m[3]:>4} / {m[4]:<3} {m[5]:>6.0%}"
            if p:
                cells += f"   {p[0]:>9.1%} {p[1]:>3} / {p[2]:<3} {p[3]:>4} / {p[4]:<3} {p[5]:>6.0%}"
            print(f"{name:<26} {cells}   ({time.perf_counter() - started:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
