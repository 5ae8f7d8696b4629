"""The estimator on published runs it was not fitted on: leave-one-source-out (LOSO) errors.

    python tests/benchmarks/bench_estimator.py [--data tests/data/published] [--sources a,b] [--json out.json]

For each source (one CSV of tests/data/published), the global constants are fitted on the other sources only
(launcher.plan.fit: the same robust MAP procedure that produced the shipped a-priori constants) and that source is
predicted. Printed per source and overall, out of sample (LOSO) and in sample (fitted on everything: the constants
shipped in launcher/plan/fitted.py), plus the physical priors without any fit (launcher.plan.constants.prior_for):
- step time: median and 90th percentile of |predicted / measured - 1| over the rows that ran and report a time;
- same-model Spearman: rank correlation of predicted and measured tokens/s per GPU within each campaign of one model
  on one GPU (launcher.plan.corpus.CorpusRow.group), averaged with the groups' sizes as weights (groups of >= 3);
- memory: median |predicted / measured - 1| of the peak, the prediction counted as the source measured it
  (allocated, reserved or the whole device);
- OOM, two ways (launcher.plan.fit.Scores):
  (a) point prediction ('mis', 'false/ok'): missed = a real OOM predicted to fit under plan.mem_safety_margin (0.9
  of the GPU's memory) at every setting its source leaves open (launcher.plan.corpus: unstated flash attention /
  recompute); false = a run that ran but would have been pruned at every such setting (count / the runs that ran);
  (b) THE HEADLINE, the planner's rule ('band mis', 'band false'): the planner prunes a layout only when the lower
  end of its 90 % memory interval (launcher.plan.spread) is over the device's memory, so false = a run that ran whose
  interval's lower end is over the device, missed = a real OOM whose interval's upper end is under it (predicted to
  fit with confidence: nothing would flag it). The intervals are leave-one-source-out too: each source's from the
  other sources' out-of-sample residuals (fit.loso_bands); the in-sample and a-priori tables use the shipped spread
  (every source's LOSO residuals, launcher/plan/spread.json as `fit --write` makes it).
  Rows whose source does not tell an OOM from another crash (the Ultra-Scale Playbook's 'crashed/oom') are counted
  apart: 'crash|oom fit/n' = predicted to fit (a) / all of them (each a missed OOM or a crash the estimator cannot
  know about).
- sources: the CSVs of tests/data/published plus the published replay tables (tests/data/replay/pub_*.csv:
  the Ultra-Scale Playbook grid joins nanotron_ultrascale_best, its own campaign; vTrain is a source of its own);
  --no-replay leaves them out. Every source weighs the same in the fit.
Targets (issue 15, LOSO over the whole corpus): step median <= 8 %, Spearman >= 0.8, memory median <= 5 %, no missed
OOM, false OOMs <= 5 % of the runs that ran (judged on (b), the rule the planner applies; (a) printed beside it).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from launcher.plan import fit as F  # noqa: E402
from launcher.plan.corpus import DEFAULT_DIR, REPLAY_DIR, read_corpus  # noqa: E402


def _pct(x: float) -> str:
    return "   n/a" if x != x else f"{x:6.1%}"


def _line(name: str, s: F.Scores) -> str:
    rho = "  n/a" if s.spearman != s.spearman else f"{s.spearman:5.2f}"
    crash = f"  {s.crash_or_oom_fit:4d}/{s.n_crash_or_oom:<4d}" if s.n_crash_or_oom else ""
    band = (f"   {s.band_missed_oom:3d}  {s.band_false_oom:4d}/{s.n_ok:<4d}"
            if s.band_missed_oom is not None and s.band_false_oom is not None else f"   {'n/a':>3s}  {'n/a':>9s}")
    return (f"{name:32s} {s.n_timed:4d} {_pct(s.step_median)} {_pct(s.step_p90)}  {rho} ({s.n_groups:2d})"
            f"  {s.n_mem:4d} {_pct(s.mem_median)}  {s.n_oom:3d}{band}   {s.missed_oom:3d}  {s.false_oom:4d}/{s.n_ok:<4d}"
            f"{crash}")


HEADER = (f"{'source':32s} {'n':>4s} {'step50':>6s} {'step90':>6s}  {'rho':>5s} (gr)  {'nmem':>4s} {'mem50':>6s}"
          f"  {'oom':>3s}   (b) band: mis false/ok   (a) point: mis false/ok  crash|oom fit/n")


def table(title: str, predicted: list[F.Predicted]) -> tuple[str, dict]:
    lines = [title, HEADER]
    out = {}
    for source in sorted({p.row.source for p in predicted}):
        s = F.scores([p for p in predicted if p.row.source == source])
        lines.append(_line(source, s))
        out[source] = s.__dict__
    total = F.scores(predicted)
    lines.append(_line("ALL", total))
    out["ALL"] = total.__dict__
    return "\n".join(lines), out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=Path, default=DEFAULT_DIR)
    ap.add_argument("--sources", default="", help="comma-separated source ids (default: all)")
    ap.add_argument("--json", type=Path, help="write the figures as JSON")
    ap.add_argument("--quiet", action="store_true", help="only the summary lines")
    ap.add_argument("--no-replay", action="store_true",
                    help="leave out the published replay tables (tests/data/replay/pub_*.csv: the Ultra-Scale "
                         "Playbook grid, part of nanotron_ultrascale_best, and vTrain)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    rows, skipped = read_corpus(args.data, [s for s in args.sources.split(",") if s] or None,
                                None if args.no_replay else REPLAY_DIR)
    if not rows:
        print(f"no published rows under {args.data}", file=sys.stderr)
        return 2
    prepared = F.prepare(rows)
    print(f"{len(rows)} rows from {len({r.source for r in rows})} sources ({args.data}); {len(skipped)} left out:")
    for (source, reason), n in sorted(Counter((s.source, s.reason) for s in skipped).items()):
        print(f"  {source}: {n} x {reason}")
    prior = F.predict(prepared, F.Fit(F.np.zeros(len(F.CORPUS_PARAMETERS)),
                                      F.np.zeros(len(F.cal.MEMORY_PARAMETERS))))
    full = F.fit(prepared)
    held_out = F.loso(prepared)
    shipped = F.spread(held_out)      # the intervals the planner would use (launcher/plan/spread.json)
    results = {}
    for title, predicted in (("A PRIORI (physical priors per stack, no fit)", F.with_band(prior, shipped)),
                             ("IN SAMPLE (fitted on every source)", F.with_band(F.predict(prepared, full), shipped)),
                             ("LEAVE ONE SOURCE OUT (fitted on the other sources)", held_out)):
        text, figures = table(title, predicted)
        results[title.split(" (")[0]] = figures
        print()
        print(text if not args.quiet else text.splitlines()[-1])
    print("\nfitted multipliers (all sources):", {k: round(v, 3) for k, v in full.multipliers().items()})
    print(f"({time.perf_counter() - t0:.1f} s)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
