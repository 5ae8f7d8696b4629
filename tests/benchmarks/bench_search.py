"""Search benchmark (issue 16): how many GPU-hours the adaptive search needs to find a configuration within 2 % of
the best, against its baselines in the same run, on every measured replay table and on perturbed truths.

    python tests/benchmarks/bench_search.py             # everything, 3 perturbed draws per grid (95 % CIs printed)
    python tests/benchmarks/bench_search.py --quick     # 2 draws per grid
    python tests/benchmarks/bench_search.py --list      # and every sweep's shares
    python tests/benchmarks/bench_search.py --prior-sds logo   # search12's per-dimension prior sds (not adopted)
    python tests/benchmarks/bench_search.py --history       # and the history section (+~4 min; not adopted)
    python tests/benchmarks/bench_search.py --history-only --list   # the history section alone (for iterating)
    python tests/benchmarks/bench_search.py --policy fit_probe=true min_fit_trials=2 trust_trials=3   # search16

Per source group and in total, for each strategy: the share of exhaustive search's GPU-hours until a
configuration within 2 % of the best was measured (median and mean over sweeps, GPU-hour-weighted total), the
GPU-hours spent, the worst final regret, and the adaptive search's gap to the oracle. Strategies (launcher.replay):
adaptive (the search), oracle (the table's best first: the floor), exhaustive (plan order), predicted (plan order +
early stop + stop rule), calibrated (calibrated order, no early stop or stop rule), random (exact expectation).

HEADLINE: the group-balanced mean share: each source group weighs the same, sweeps within a group the same, and
sweeps where every strategy ties (launcher.replay_bench.UNINFORMATIVE) are left out. Why: the GPU-hour-weighted
total is decided by a handful of 512-GPU sweeps, and the per-sweep median by the 40 correlated single-node vTrain
sweeps; both are printed too.

History (plan.prior_from=sweeps/, launcher.replay_bench.history_work): every measured sweep of a source group with
at least 3 sweeps of one setup, replayed warm from the final calibrations of the other sweeps of its group and setup
(never itself, never a repeat of its grid: launcher.replay_bench.repeats), pooled ("all") and one at a time ("one":
--history-one of them, their mean); --history-mode adds the residual effects those sweeps learned, as prior means (search13) and with their scatter as
prior sds (search14; several modes run back to back on the same cold replays; not adopted). Then the fixed a-priori
orders (launcher.replay_bench.FIXED_ORDERS) on the same sweeps: the floor a cold search is up against.
Out of sample by construction: the held-out sweep's own measurements never reach its prior.

Hindsight bounds (launcher.replay_bench.HINDSIGHT, search15; --no-hindsight leaves them out): not methods. The
search's own calibration and residual model fitted on every trial of the sweep (in sample), its order (and the
adaptive pick on its fixed predictions, the constants alone, the fit without the winners) under the search's costs:
how close a search that orders by this model family could get with perfect calibration; where the winner sits in
plan order, in that order and in the adaptive search's sequence (a text histogram); the sweeps the policy loses most.

Perturbed truths (launcher.replay_bench.perturbed): the estimator with constants drawn from a spread, a bias per
value of every layout dimension and noise between repeats, on the grids of the measured sweeps, DRAWS per grid from
one seed; reported apart, with bootstrap 95 % confidence intervals over the draws.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from launcher import replay_bench as rb  # noqa: E402

DATA = REPO / "tests" / "data" / "replay"
PERTURBED_GRIDS = {
    "published/ultrascale": ["usp-1b-16gpu", "usp-3b-64gpu", "usp-8b-32gpu", "usp-8b-256gpu", "usp-80b-128gpu",
                             "usp-80b-512gpu"],
    "published/vtrain-multi": None,     # None: every sweep of the group
    "published/vtrain-single": ["vtrain-single-12x1024-8gpu-gbs16", "vtrain-single-24x2048-8gpu-gbs32",
                                "vtrain-single-16x2048-4gpu-gbs16"],
    "published/bloom": None,
    "own-gpu": None,
    "cpu-local": 4,                     # a number: the first n sweeps of the group
    "cpu-slurm": 2,
}


POLICY = rb.POLICY
"""The search's policy in this run (--policy FIELD=VALUE ...: launcher.run.scheduler.Policy's fields)."""


def _evaluate(args):
    case, steady, strategies, policy = args
    return rb.evaluate(case, strategies, steady_stop=steady, policy=policy)


def run(cases, workers: rb.Workers, steady: bool, strategies=rb.STRATEGIES):
    return workers.map(_evaluate, [(c, steady, strategies, POLICY) for c in cases],
                       cost=lambda item: rb.replay_cost(item[0]))


def policy_of(fields) -> rb.Policy:
    """rb.POLICY with FIELD=VALUE overrides (the field's own type: int, float, bool from true/false, str)."""
    out = rb.POLICY
    for item in fields:
        name, value = item.split("=", 1)
        old = getattr(rb.POLICY, name)
        new = (value.lower() in ("1", "true", "yes") if isinstance(old, bool) else type(old)(value))
        out = replace(out, **{name: new})
    return out


def hindsight_report(results, title, listing: bool = False) -> None:
    """The hindsight bounds (launcher.replay_bench.HINDSIGHT) next to the strategies, where the winner sits, and the
    sweeps where the adaptive search loses most against the bound."""
    print(f"\n=== {title}: HINDSIGHT BOUNDS, not methods (the search's calibration + residual model fitted on every "
          "trial of the sweep, in sample; 'hindsight': that model's order, predicted to fit first; 'hind-gain': the "
          "adaptive pick on its fixed predictions); mean share of exhaustive GPU-hours to within 2 %, informative "
          "sweeps")
    print(rb.hindsight_table(results))
    print("\nwhere the winner sits: rank of the first within-2 % configuration in the a-priori plan order and in the "
          "hindsight order; trials the adaptive search and hind-gain ran until (and with) their first within-2 % one")
    print(rb.position_histogram(results))
    print("\nsweeps where the adaptive search loses most against the better bound (share: adaptive / bound / oracle; "
          "adaptive's trials to the winner; the winner's hindsight rank)")
    for group, name, a, b, o, n, rank in rb.policy_losses(results, 40 if listing else 12):
        print(f"  {group:<24} {name:<36} {a:>6.1%} / {b:>6.1%} / {o:>6.1%}   trials {n:>3}   rank {rank:>3}")


def grids_for_perturbation(cases):
    out = []
    for group, pick in PERTURBED_GRIDS.items():
        members = [c for c in cases if c.group == group and len(c.sweep.rows) >= 4]
        if isinstance(pick, list):
            members = [c for c in members if c.sweep.name in pick]
        elif isinstance(pick, int):
            members = members[:pick]
        out += members
    return out


def _transfer(args):
    (small, large), steady, known, policy = args
    return rb.evaluate_transfer(small, large, steady_stop=steady, policy=policy, known=known)


def transfer_report(pairs, workers: rb.Workers, steady, title, known=None):
    """known: sweep name -> its evaluate() result (the cold start and the small sweep's calibration come from it)."""
    known = known or {}
    work = [(p, steady, (known[p[0].sweep.name], known[p[1].sweep.name])
             if p[0].sweep.name in known and p[1].sweep.name in known else None, POLICY) for p in pairs]
    results = workers.map(_transfer, work, cost=lambda item: rb.replay_cost(item[0][1]))
    print(f"\n{title}")
    print(f"{'group':<26} {'pairs':>5}  {'cold':>7} {'warm':>7}  {'saving':>7}  {'warm better/worse':>17}  "
          f"{'regret>1% cold/warm':>19}")
    for group in sorted({t.group for t in results}) + ["all"]:
        ts = [t for t in results if group in ("all", t.group)]
        cold, warm = sum(t.cold for t in ts) / len(ts), sum(t.warm for t in ts) / len(ts)
        better = sum(1 for t in ts if t.warm < t.cold - 1e-9)
        worse = sum(1 for t in ts if t.warm > t.cold + 1e-9)
        regrets = (sum(1 for t in ts if t.cold_regret > 0.01), sum(1 for t in ts if t.warm_regret > 0.01))
        print(f"{group:<26} {len(ts):>5}  {cold:>7.1%} {warm:>7.1%}  {cold - warm:>+7.1%}  {better:>8} / {worse:<6}  "
              f"{regrets[0]:>9} / {regrets[1]:<7}")
    return results


def _history(args):
    cold, priors, n, steady = args
    return rb.history_result(cold, rb.warm_replays(cold.case, priors, steady), n)


def history_report(cold, workers: rb.Workers, steady: bool, one: int, listing: bool, mode: str = "constants"):
    """Every measured sweep whose source group holds >= 3 sweeps of one setup, replayed cold and warm from the
    other sweeps of its group (never itself, never a repeat of its grid: launcher.replay_bench.history_of)."""
    work = [(r, starts, n, steady) for r, starts, n in rb.history_work(cold, one, mode)]
    results = workers.map(_history, work, cost=lambda item: len(item[1]) * rb.replay_cost(item[0].case))
    print(f"\n=== history (plan.prior_from=sweeps/; takes: {mode}): each sweep of a source group with >= {rb.HISTORY_MIN_SWEEPS} "
          f"sweeps of one setup, warm from its group's other sweeps' final calibrations, pooled ('all') or one "
          f"at a time ('one': {one} of them, mean share); share of exhaustive GPU-hours to within 2 %, informative "
          "sweeps; out of sample (the held-out sweep's own measurements and its repeats never reach its prior)")
    if listing:
        for h in results:
            print(f"  {h.group:<24} {h.cold.name:<36} hist={h.n_history:<3} cold={h.share('adaptive'):.0%} "
                  f"all={h.warm_all:.0%} one={h.warm_one:.0%} plan={h.share('exhaustive'):.0%} "
                  f"oracle={h.share('oracle'):.0%} regret all/one={h.warm_all_regret:.1%}/{h.warm_one_regret:.1%}"
                  + ("" if h.cold.informative else " UNI"))
    print(rb.history_table(results))
    return results


def fixed_order_report(cold) -> None:
    print("\n=== fixed a-priori orders on the history sweeps (launcher.replay_bench.FIXED_ORDERS; every trial measured "
          "in full): share of exhaustive GPU-hours to within 2 %, the best one order per group, the best per sweep "
          "(knowing the table), and the cold adaptive search")
    print(rb.fixed_order_table(cold))


def report(results, title, bootstrap=0):
    groups = sorted({r.case.group for r in results})
    strategies = list(rb.STRATEGIES)
    summaries = [rb.summarise([r for r in results if r.case.group == g], g, bootstrap) for g in groups]
    headline = rb.balanced(summaries, strategies)
    total = rb.summarise(results, "all sweeps (per sweep)", bootstrap)
    print(rb.format_table(summaries + [total], strategies, headline, title))
    if bootstrap:
        ci = rb.balanced_ci(results, strategies, bootstrap)
        print(f"{'':<26} {'':<11}  {'95% CI':<10} " + "  ".join(f"{ci[k][0]:>4.0%}-{ci[k][1]:<4.0%}"
                                                             for k in strategies))
    return summaries, total, headline


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="2 perturbed draws per grid instead of 3")
    parser.add_argument("--draws", type=int, default=None)
    parser.add_argument("--jobs", type=int, default=rb.default_jobs(),
                        help="worker processes (default: one per core); the figures do not depend on it")
    parser.add_argument("--seed", type=int, default=16)
    parser.add_argument("--no-steady-stop", action="store_true", help="measure every ok trial in full")
    parser.add_argument("--tables", type=Path, nargs="*", default=None,
                        help="replay tables (default: every tests/data/replay/*.csv)")
    parser.add_argument("--measured-only", action="store_true")
    parser.add_argument("--policy", nargs="*", default=[], metavar="FIELD=VALUE",
                        help="the search's Policy fields for this run, e.g. min_fit_trials=1 (search16)")
    parser.add_argument("--list", action="store_true", help="print every sweep's shares")
    parser.add_argument("--no-transfer", action="store_true", help="leave out the two-scale transfer pairs")
    parser.add_argument("--no-hindsight", action="store_true",
                        help="leave out the hindsight bounds (launcher.replay_bench.HINDSIGHT, search15)")
    # Opt-in: a negative result (docs/search.md) that would take the default run past issue 16's 10 minutes under load.
    parser.add_argument("--history", action="store_true", help="add the history section (plan.prior_from=sweeps/)")
    parser.add_argument("--history-only", action="store_true",
                        help="the history groups' sweeps cold, then the history section alone (for iterating)")
    parser.add_argument("--history-mode", choices=rb.HISTORY_MODES, default=["constants"], nargs="+",
                        help="what a sweep takes from its history (launcher.replay_bench.HISTORY_MODES); several: "
                             "each in turn, on the same cold replays (back to back in one run)")
    parser.add_argument("--history-one", type=int, default=rb.ONE_OTHER,
                        help="'from one other': how many of the others per held-out sweep (their mean is printed)")
    parser.add_argument("--prior-sds", choices=rb.PRIOR_SDS_MODES, default="flat",
                        help="the residual model's prior sds: flat (residuals.MODEL), per dimension fitted without "
                             "the sweep's own source group (logo, launcher/plan/prior_sds.json), or on every group "
                             "(all: in sample); perturbed truths get the fit on every group")
    parser.add_argument("--prior-sds-file", type=Path, default=None,
                        help="another table than launcher/plan/prior_sds.json (launcher.fit_prior_sds --write --out)")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    with rb.Workers(args.jobs) as workers:
        _main(args, workers)
    t = os.times()      # after the workers were joined: their CPU time is counted as the children's
    cpu_s = t.user + t.system + t.children_user + t.children_system
    print(f"\nwall time {time.perf_counter() - started:.0f} s, CPU time {cpu_s:.0f} s (this process and its "
          f"{args.jobs if args.jobs > 1 else 'no'} workers; load average now {os.getloadavg()[0]:.1f} on "
          f"{os.cpu_count()} cores)")
    return 0


def _main(args, workers: rb.Workers) -> None:
    global POLICY
    POLICY = policy_of(args.policy)
    if args.policy:
        print(f"policy: {POLICY}")
    draws = args.draws if args.draws is not None else (2 if args.quick else 3)
    tables = args.tables or sorted(DATA.glob("*.csv"))
    cases = rb.with_prior_sds(rb.corpus(tables), args.prior_sds, path=args.prior_sds_file)
    every = args.prior_sds.replace("logo", "all")   # perturbed truths hold no measured error: the fit on every group
    steady = not args.no_steady_stop
    if args.history_only:
        members = {c.sweep.name for cs in rb.history_groups(cases).values() for c in cs}
        cold = run([c for c in cases if c.sweep.name in members], workers, steady)
        for mode in args.history_mode:
            history_report(cold, workers, steady, args.history_one, args.list, mode)
        fixed_order_report(cold)
        print("\nhow alike the a-priori misses per layout value are between two sweeps of a group (whole tables; "
              "launcher.replay_bench.effect_consistency): correlation of the per-dimension-centred effects")
        for group, (pairs, med, q1, q3) in rb.effect_consistency(cases).items():
            print(f"{group:<26} {pairs:>4} pairs  median {med:+.2f}  quartiles {q1:+.2f} .. {q3:+.2f}")
        return
    strategies = rb.STRATEGIES + (() if args.no_hindsight else rb.HINDSIGHT)
    measured = run(cases, workers, steady, strategies)
    print(f"measured tables: {len(tables)} files, {len(cases)} sweeps, "
          f"{sum(len(c.sweep.rows) for c in cases)} configurations")
    if args.list:
        for r in measured:
            cells = " ".join(f"{s}={r.share(s):.0%}" for s in strategies)
            ranks = "" if args.no_hindsight else " winner at plan/hindsight/loo/adaptive=" + "/".join(
                str(r.positions.get(k)) for k in ("plan order", "hindsight order", "loo order", "adaptive"))
            print(f"  {r.case.group:<24} {r.name:<36} n={len(r.case.sweep.rows):<4} "
                  f"{'   ' if r.informative else 'UNI'} {cells} regret={r.regret['adaptive']:.1%}{ranks}")
    report(measured, "=== measured tables: share of exhaustive GPU-hours to within 2 % of the best")
    print("\n=== where the adaptive search's GPU-hours to within 2 % went (mean share of exhaustive, measured)")
    print(rb.gap_table(measured))
    if not args.no_hindsight:
        hindsight_report(measured, "measured tables", args.list)
    if not args.measured_only and draws:
        grids = rb.with_prior_sds(grids_for_perturbation(cases), every,
                                  path=args.prior_sds_file)
        truths = rb.perturbed(grids, draws, args.seed)
        err, rho = rb.prior_error(truths)
        print(f"\nperturbed truths: {len(grids)} grids x {draws} draws (seed {args.seed}); a-priori step time error "
              f"median {err:.1%}, within-sweep Spearman median {rho:.2f}")
        results = run(truths, workers, steady, strategies)
        report(results, "=== perturbed truths: share of exhaustive GPU-hours to within 2 % of the best",
               bootstrap=1000)
        if not args.no_hindsight:
            hindsight_report(results, "perturbed truths")
    if args.history:
        for mode in args.history_mode:
            history_report(measured, workers, steady, args.history_one, args.list, mode)
        fixed_order_report([r for r in measured if r.case.sweep.name in
                            {c.sweep.name for cs in rb.history_groups(cases).values() for c in cs}])
    if not args.no_transfer:
        pairs = rb.scale_pairs(cases)
        transfer_report(pairs, workers, steady, "=== transfer (plan.prior_from): a finished small sweep's calibration "
                        "starting the large one; share of the large sweep's exhaustive GPU-hours to within 2 %",
                        known={r.case.sweep.name: r for r in measured})
        if not args.measured_only and draws:
            ppairs = rb.perturbed_pairs([(rb.with_prior_sds([s], every, path=args.prior_sds_file)[0],
                                          rb.with_prior_sds([g], every, path=args.prior_sds_file)[0])
                                         for s, g in pairs if s.group == "published/ultrascale"], max(2, draws // 4))
            transfer_report(ppairs, workers, steady, "=== transfer on perturbed truths (both scales share the "
                            "drawn constants and per-value biases)")


if __name__ == "__main__":
    sys.exit(main())
