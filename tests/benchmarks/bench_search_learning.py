"""Learning curve of the adaptive search (issue 16, search16): after k = 1, 2, 3, ... trials measured in the
adaptive search's own order, where the within-2 % winner ranks among the trials not yet run, under
- `posterior`: the search's predictions as its pick reads them (calibration with Policy.min_fit_trials + the
  residual model's posterior),
- `refit-k`: the calibration refitted on those k trials alone (min_trials=1), its constants alone,
- `refit-k+res`: that refit with the residual model on top (what a pick would read with min_fit_trials=1),
- `resid`: the residual model alone on the a-priori constants;
and the constants of the final fit on every trial against the prior (which ones move the winner up).

    python tests/benchmarks/bench_search_learning.py --match 'vtrain-single-.*x1024-.*gbs8$'
    python tests/benchmarks/bench_search_learning.py --match cpu_tiny_r2 --policy min_fit_trials=1
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from launcher import replay_bench as rb  # noqa: E402
from launcher.plan import calibrate as cal  # noqa: E402
from launcher.plan.calibrate import Observation, uncalibrated  # noqa: E402
from launcher.replay import _Replay, prior_for, replay_sweep  # noqa: E402
from launcher.run.scheduler import POLICY, Policy  # noqa: E402

DATA = REPO / "tests" / "data" / "replay"
VIEWS = ("posterior", "refit-k", "refit-k+res", "resid")


def _rank(planned, done: set, good: frozenset) -> int:
    """Rank (1: first) of the best-ranked within-2 % trial among the unrun ones, by hindsight_order."""
    order = [k for k in rb.hindsight_order(planned) if k not in done]
    return next((i + 1 for i, k in enumerate(order) if k in good), 0)


def curve(case: rb.Case, policy: Policy) -> tuple[list[str], list[dict], object]:
    model, pick_model = rb._models(case)
    prior = case.prior or prior_for(case.sweep)
    result = replay_sweep(case.sweep, "adaptive", costs=case.costs, prior=prior, policy=policy,
                          residual_model=model, until_found=True)
    seq = [s.key for s in result.steps]
    good = frozenset(k for k, r in zip([rb._key(r) for r in case.sweep.rows], case.sweep.rows)
                     if (r.tokens_per_s or 0.0) >= rb._within_of(case.sweep))
    rp = _Replay(case.sweep, case.costs, prior, model, pick_model)
    rows = []
    previous = None
    for k, key in enumerate(seq[:-1] if seq[-1] in good else seq, start=1):
        rp.run(key, "learning", True, 0.02, steady=True)
        done = {o.key for o in rp.finished}
        fit_policy = cal.calibrate(rp.observations, rp.prior, min_trials=policy.min_fit_trials, start=previous,
                                     probe=policy.fit_probe)
        previous = fit_policy
        fit_k = cal.calibrate(rp.observations, rp.prior, min_trials=1, probe=policy.fit_probe)
        ranks = {
            "posterior": _rank(rp.predicted(fit_policy, residuals=True, model=pick_model)[0], done, good),
            "refit-k": _rank(rp.predicted(fit_k, residuals=False)[0], done, good),
            "refit-k+res": _rank(rp.predicted(fit_k, residuals=True, model=pick_model)[0], done, good),
            "resid": _rank(rp.predicted(uncalibrated(rp.prior), residuals=True, model=pick_model)[0], done, good),
        }
        rows.append({"k": k, "key": key, "unrun": len(rp.rows) - k, **ranks,
                     "fit": {n: (v, fit_k.parameter_sd.get(n, 0.0)) for n, v in fit_k.parameters.items()}})
    everything = [Observation(f, r.step_time_s if r.state.name == "OK" else None, r.peak_mem_gb)
                  for r, f in zip(rp.rows, rp.features)]
    full = cal.calibrate(everything, rp.prior, min_trials=1)
    return seq, rows, full


def constant_ranks(case: rb.Case, full) -> dict[str, tuple[int, int]]:
    """Which fitted constants move the winner up: its rank among all trials (fitted-constants order, no residual
    model) with the prior's constants and only that parameter at the full fit's value, and with the full fit but
    that parameter at the prior; '(prior)' and '(full fit)' for reference."""
    prior = case.prior or prior_for(case.sweep)
    rp = _Replay(case.sweep, case.costs, prior)
    good = frozenset(k for k, r in zip(rp.keys, rp.rows) if (r.tokens_per_s or 0.0) >= rb._within_of(case.sweep))
    params = cal.STEP_PARAMETERS
    theta = [math.log(full.parameters.get(p.name, 1.0)) for p in params]

    def rank(th) -> int:
        constants = cal.apply_parameters(prior.constants, params, th)
        fit = replace(uncalibrated(prior), constants=constants)
        return _rank(rp.planned(fit), set(), good)

    out = {"(prior)": (rank([0.0] * len(params)), 0), "(full fit)": (rank(theta), 0)}
    for i, p in enumerate(params):
        if abs(theta[i]) > 0.02:
            alone = [t if j == i else 0.0 for j, t in enumerate(theta)]
            but = [0.0 if j == i else t for j, t in enumerate(theta)]
            out[p.name] = (rank(alone), rank(but))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--match", default=r"vtrain-single-\d+x1024-\dgpu-gbs8$", help="regex on the sweep name")
    parser.add_argument("--policy", nargs="*", default=[], help="Policy fields, e.g. min_fit_trials=1")
    args = parser.parse_args(argv)
    policy = replace(POLICY, **{k: type(getattr(POLICY, k))(v) for k, v in (a.split("=") for a in args.policy)})
    cases = [c for c in rb.corpus(sorted(DATA.glob("*.csv"))) if re.search(args.match, c.sweep.name)]
    for case in cases:
        seq, rows, full = curve(case, policy)
        print(f"\n{case.sweep.name} ({case.group}, {len(case.sweep.rows)} trials): winner run {len(seq)}th: {seq[-1]}")
        ranks = constant_ranks(case, full)
        top = min((k for k in ranks if not k.startswith("(")), key=lambda k: ranks[k][0], default="compute")
        print(f"{'k':>3} {'unrun':>5} " + " ".join(f"{v:>11}" for v in VIEWS) + f"  {top + ' (k-refit, sd)':>22}"
              "  measured")
        for r in rows:
            value, sd = r["fit"].get(top, (1.0, 0.0))
            print(f"{r['k']:>3} {r['unrun']:>5} " + " ".join(f"{r[v]:>11}" for v in VIEWS) +
                  f"  {f'x{value:.2f} ({sd:.2f})':>22}  {r['key']}")
        data = full.to_json()
        print("fit on every trial, parameters (x prior), sd; supported:", data["supported"], " residual sd",
              round(data["residual_sd"], 3))
        print("  winner's rank, constants alone (no residual model): " + ", ".join(
            f"{k} {a}" for k, (a, _) in ranks.items() if k.startswith("(")) + "; only this parameter fitted / all "
              "but this one: " + ", ".join(f"{k} {a}/{b}" for k, (a, b) in ranks.items() if not k.startswith("(")))
        print("  " + ", ".join(f"{k} {v:.2f} ({data['parameter_sd'][k]:.2f})" for k, v in data["parameters"].items()
                               if abs(v - 1) > 0.02))
    return 0


if __name__ == "__main__":
    sys.exit(main())
