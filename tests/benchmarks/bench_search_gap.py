"""Where the adaptive search's GPU-hours go (issue 16): its excess over the oracle on each measured sweep, by phase,
and its pick sequence against plan order's on the sweeps where it needed more than plan order.

    python tests/benchmarks/bench_search_gap.py --jobs 1                  # every measured table
    python tests/benchmarks/bench_search_gap.py --tables tests/data/replay/pub_vtrain.csv --top 10

Per sweep, the adaptive search's GPU-hours to within 2 % of the best minus the oracle's (the excess), as a share of
exhaustive GPU-hours, split by the trial that spent it (before the within-2 % one was measured):
- `a priori`: trials picked with nothing measured (the first pick; more after out-of-memory ones);
- `pre-fit`: picked after 1-2 measured trials (the residual model learned, the constants are not refitted yet:
  Policy.min_fit_trials);
- `fitted`: picked after the calibration was posed (>= min_fit_trials measured): exploration picks that lost;
- `found - oracle`: the within-2 % trial the search found minus the oracle's (a costlier within-2 % one);
and apart from the excess: `iters > min` (of the trials before the found one, the GPU-hours of measured iterations
beyond the minimum an early stop needs: what a shorter measurement would have saved at most; inside the phases
above), `after found` (GPU-hours spent after the within-2 % trial was measured, until the stop rule ended the sweep:
its confirmation cost, not in the headline), and `contrib` (the sweep's share of the group-balanced headline's gap
to the oracle: each group weighs the same, sweeps within a group the same). Sweeps sorted by contrib. A sweep is
informative as in launcher.replay_bench, over the strategies run here (adaptive, oracle, plan order, random): on the
measured tables the same 105 of 106. About 2.5 min at --jobs 1 on the 2-core machine at load ~4.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from launcher import replay_bench as rb  # noqa: E402
from launcher.core.states import MEASURED, TrialState  # noqa: E402
from launcher.replay import WITHIN, Step, replay_sweep  # noqa: E402
from launcher.run import scheduler  # noqa: E402
from launcher.run.scheduler import POLICY  # noqa: E402

DATA = REPO / "tests" / "data" / "replay"
PHASES = ("a priori", "pre-fit", "fitted", "found - oracle")
PICKS = ("first", "top mean", "explored")
"""What a losing trial before the found one was, as the search picked it: its first pick (nothing measured), the
unrun trial with the highest predicted throughput x chance to fit (the predictions' mean was wrong), or one ranked
lower by that but picked for its spread or cost (exploration that lost)."""


@contextlib.contextmanager
def recorded_picks() -> Iterator[list]:
    """Every scheduler.order decision of the replays inside, as (the pick, whether it had the highest predicted
    throughput x chance to fit among the unrun trials): the replay calls scheduler.order through the module."""
    log: list = []
    order = scheduler.order

    def spy(planned, finished, **kw):
        picks = order(planned, finished, **kw)
        rows = planned.rows() if isinstance(planned, scheduler.PlannedColumns) else list(planned)
        done = {o.key for o in finished}
        largest = scheduler.largest_fitted({p.key: p for p in rows}, finished)
        unrun = [p for p in rows if p.key not in done]
        top = max(unrun, key=lambda p: p.tokens_per_s * scheduler._fits(p, largest))
        log.append((picks[0].key, top.tokens_per_s * scheduler._fits(top, largest) <= next(
            p.tokens_per_s * scheduler._fits(p, largest) for p in unrun if p.key == picks[0].key) * (1 + 1e-12)))
        return picks

    scheduler.order = spy
    try:
        yield log
    finally:
        scheduler.order = order


@dataclass
class Gap:
    """One sweep's adaptive search against the oracle and plan order (GPU-hours as shares of exhaustive)."""

    case: rb.Case
    adaptive: float
    oracle: float
    plan: float
    phases: dict = field(default_factory=dict)
    beyond_min_iters: float = 0.0
    after_found: float = 0.0
    trials_to_found: int = 0
    steps: list = field(default_factory=list)            # the adaptive search's Steps
    plan_steps: list = field(default_factory=list)       # plan order's, until found
    informative: bool = True
    weight: float = 0.0                                  # in the group-balanced headline
    plan_rank: dict = field(default_factory=dict)        # key -> its place in plan order (1: the first)
    picks: dict = field(default_factory=dict)            # PICKS -> GPU-hours share of the losers before found

    @property
    def excess(self) -> float:
        return self.adaptive - self.oracle


def _found_index(steps: list[Step], found_tokens_per_s: float) -> int:
    return next((i for i, s in enumerate(steps) if s.tokens_per_s and s.tokens_per_s >= found_tokens_per_s),
                len(steps) - 1)


def decompose(case: rb.Case, steady_stop: bool = True) -> Gap:
    with recorded_picks() as log:
        runs = {"adaptive": replay_sweep(case.sweep, "adaptive", costs=case.costs, prior=case.prior,
                                         steady_stop=steady_stop, policy=POLICY)}
    runs |= {s: replay_sweep(case.sweep, s, costs=case.costs, prior=case.prior, until_found=s == "oracle",
                             steady_stop=steady_stop, policy=POLICY) for s in ("oracle", "exhaustive")}
    exhaustive = runs["exhaustive"].exhaustive_gpu_hours
    share = {s: (1.0 if r.gpu_hours_to_within_2pct is None else r.gpu_hours_to_within_2pct / exhaustive)
             for s, r in runs.items()}
    found = (1 - WITHIN) * max(r.tokens_per_s or 0.0 for r in case.sweep.rows)
    steps = runs["adaptive"].steps
    k = _found_index(steps, found)
    phases = dict.fromkeys(PHASES, 0.0)
    by_key = {f"line {r.line}: {r.request.layout.label()}": r for r in case.sweep.rows}
    measured, before, beyond = 0, 0.0, 0.0
    picks = dict.fromkeys(PICKS, 0.0)
    top_mean = dict(log)      # key -> whether it was the top mean when picked (a trial is picked once)
    for i, step in enumerate(steps[: k + 1]):
        cost = step.gpu_hours - before
        before = step.gpu_hours
        if i == k:
            phases["found - oracle"] = cost - runs["oracle"].gpu_hours_to_within_2pct if \
                runs["oracle"].gpu_hours_to_within_2pct is not None else cost
        else:
            phases["a priori" if measured == 0 else "pre-fit" if measured < POLICY.min_fit_trials else "fitted"] += cost
            picks["first" if i == 0 else "top mean" if top_mean.get(step.key, True) else "explored"] += cost
            row = by_key[step.key]
            if step.state is TrialState.OK and step.measured_iters > case.costs.min_measured_iters:
                beyond += ((step.measured_iters - case.costs.min_measured_iters) * (row.step_time_s or 0.0)
                           * row.gpus / 3600.0)
        measured += step.state in MEASURED
    gap = Gap(case, share["adaptive"], share["oracle"], share["exhaustive"],
              {p: v / exhaustive for p, v in phases.items()}, beyond / exhaustive,
              (runs["adaptive"].gpu_hours - steps[k].gpu_hours) / exhaustive, k + 1, steps,
              runs["exhaustive"].steps[: _found_index(runs["exhaustive"].steps, found) + 1])
    gap.plan_rank = {s.key: i + 1 for i, s in enumerate(runs["exhaustive"].steps)}
    gap.picks = {p: v / exhaustive for p, v in picks.items()}
    shares = [share[s] for s in share] + [rb.random_expected_gpu_hours(case.sweep, case.costs) / exhaustive]
    gap.informative = max(shares) - min(shares) > rb.UNINFORMATIVE and max(shares) > 1.1 * min(shares)
    return gap


def weigh(gaps: list[Gap]) -> None:
    """Each informative sweep's weight in the group-balanced headline (1 / groups / informative sweeps of its
    group): weight x excess summed over sweeps is the headline's gap to the oracle."""
    groups: dict[str, list[Gap]] = {}
    for g in gaps:
        if g.informative:
            groups.setdefault(g.case.group, []).append(g)
    for members in groups.values():
        for g in members:
            g.weight = 1.0 / len(groups) / len(members)


def _name(g: Gap) -> str:
    return g.case.sweep.name + (f"#{g.case.draw}" if g.case.draw >= 0 else "")


def sweep_table(gaps: list[Gap], top: int) -> str:
    used = sorted((g for g in gaps if g.informative), key=lambda g: -g.weight * g.excess)
    total = sum(g.weight * g.excess for g in used)
    lines = [f"{'group':<22} {'sweep':<36} {'n':>3} {'adapt':>6} {'oracle':>6} {'plan':>6} {'trials':>6} "
             + " ".join(f"{p[:10]:>10}" for p in PHASES) + f" {'iters>min':>9} {'after':>6} {'contrib':>7}"]
    for g in used[:top]:
        lines.append(f"{g.case.group[:22]:<22} {_name(g)[:36]:<36} {len(g.case.sweep.rows):>3} {g.adaptive:>6.1%} "
                     f"{g.oracle:>6.1%} {g.plan:>6.1%} {g.trials_to_found:>6} "
                     + " ".join(f"{g.phases[p]:>10.1%}" for p in PHASES)
                     + f" {g.beyond_min_iters:>9.1%} {g.after_found:>6.1%} "
                     f"{g.weight * g.excess / total if total else 0.0:>7.1%}")
    lines.append(f"headline gap to the oracle {total:.1%} points over {len(used)} informative sweeps; the "
                 f"{min(top, len(used))} above carry {sum(g.weight * g.excess for g in used[:top]) / total:.0%} "
                 "of it" if total else "no gap")
    return "\n".join(lines)


def phase_table(gaps: list[Gap]) -> str:
    """The headline's gap by phase, group-balanced like the headline, per group and in total."""
    used = [g for g in gaps if g.informative]
    cols = PHASES + ("iters > min", "after found") + tuple(f"lost: {p}" for p in PICKS)
    lines = [f"{'group':<26} {'gap':>6} " + " ".join(f"{c[:14]:>14}" for c in cols)]
    for group in sorted({g.case.group for g in used}) + ["balanced"]:
        members = used if group == "balanced" else [g for g in used if g.case.group == group]
        w = [g.weight for g in members]
        scale = 1.0 / sum(w)
        cells = [sum(x.weight * x.phases[p] for x in members) * scale for p in PHASES]
        cells += [sum(x.weight * x.beyond_min_iters for x in members) * scale,
                  sum(x.weight * x.after_found for x in members) * scale]
        cells += [sum(x.weight * x.picks[p] for x in members) * scale for p in PICKS]
        gap = sum(x.weight * x.excess for x in members) * scale
        lines.append(f"{group:<26} {gap:>6.1%} " + " ".join(f"{c:>14.1%}" for c in cells))
    return "\n".join(lines)


def sequence(g: Gap) -> str:
    """The adaptive search's picks until found, then plan order's, with each trial's measured throughput."""
    best = max(r.tokens_per_s or 0.0 for r in g.case.sweep.rows)
    out = [f"{_name(g)} ({g.case.group}, {len(g.case.sweep.rows)} configurations): adaptive {g.adaptive:.1%}, "
           f"plan order {g.plan:.1%}, oracle {g.oracle:.1%} of exhaustive GPU-hours"]
    exhaustive = g.plan_steps[-1].gpu_hours / g.plan if g.plan else 1.0
    for label, steps, stop in (("adaptive", g.steps, g.trials_to_found), ("plan", g.plan_steps, len(g.plan_steps))):
        for i, s in enumerate(steps[:stop]):
            speed = f"{s.tokens_per_s / best:6.1%}" if s.tokens_per_s else "   OOM"
            out.append(f"  {label:<8} {i + 1:>2} {s.key[:48]:<48} plan #{g.plan_rank.get(s.key, 0):<3} {speed} of "
                       f"best, {s.state.value:<13} "
                       f"cum {s.gpu_hours / exhaustive:6.1%}  {s.reason[:70]}")
    return "\n".join(out)


def _decompose(case: rb.Case) -> Gap:
    return decompose(case)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tables", type=Path, nargs="*", default=None)
    parser.add_argument("--jobs", type=int, default=1)
    parser.add_argument("--top", type=int, default=15, help="sweeps listed, largest contribution first")
    parser.add_argument("--show", nargs="*", default=[],
                        help="also print the pick sequences of these sweeps (names), or of the top N ('top:N')")
    args = parser.parse_args(argv)
    cases = rb.corpus(args.tables or sorted(DATA.glob("*.csv")))
    with rb.Workers(args.jobs) as workers:
        gaps = workers.map(_decompose, cases, cost=rb.replay_cost)
    weigh(gaps)
    print(f"=== the adaptive search's excess over the oracle, by sweep (share of exhaustive GPU-hours; {len(cases)} "
          "sweeps)")
    print(sweep_table(gaps, args.top))
    print("\n=== by phase (group-balanced as the headline; the first four add up to the gap; 'lost': the trials "
          "before the found one by how they were picked, PICKS)")
    print(phase_table(gaps))
    worse = [g for g in gaps if g.informative and g.adaptive > g.plan * 1.0001]
    print(f"\n=== sweeps where the adaptive search needed more than plan order: {len(worse)}")
    for g in worse:
        print(sequence(g))
    top = [int(x.split(":")[1]) for x in args.show if x.startswith("top:")]
    ranked = sorted((g for g in gaps if g.informative), key=lambda g: -g.weight * g.excess)
    shown = [g for g in ranked[: top[0] if top else 0] if g not in worse]
    shown += [g for g in gaps if _name(g) in args.show and g not in shown and g not in worse]
    if shown:
        print("\n=== pick sequences asked for (--show)")
    for g in shown:
        print(sequence(g))
    return 0


if __name__ == "__main__":
    sys.exit(main())
