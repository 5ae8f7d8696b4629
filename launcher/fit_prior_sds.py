"""`python -m launcher.fit_prior_sds [TABLES ...] [--write] [--balance-groups] [--out PATH]`

Fits the residual model's per-dimension prior sds across the measured replay tables (launcher.plan.prior_sds: on
every source group, and leaving each group out) and prints them side by side; --write rewrites
launcher/plan/prior_sds.json, which the search benchmark's `--prior-sds logo` reads.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional

from launcher import replay_bench as rb
from launcher.core import strict_json
from launcher.plan.corpus import REPLAY_DIR
from launcher.plan.prior_sds import PRIOR_SDS_FILE, build, load, summary


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m launcher.fit_prior_sds", description=__doc__.split("\n\n")[1])
    ap.add_argument("tables", type=Path, nargs="*", help="replay tables (default: tests/data/replay/*.csv)")
    ap.add_argument("--write", action="store_true", help=f"rewrite {PRIOR_SDS_FILE.name}")
    ap.add_argument("--balance-groups", action="store_true",
                    help="every source group weighs the same in the likelihood (default: every trial)")
    ap.add_argument("--out", type=Path, default=PRIOR_SDS_FILE, help="where --write writes")
    args = ap.parse_args(argv)
    tables = args.tables or sorted(REPLAY_DIR.glob("*.csv"))
    data = build(rb.residual_sets(rb.corpus(tables)), balance=args.balance_groups)
    print(summary(data))
    if args.write:
        args.out.write_text(strict_json.dumps(data, indent=1) + "\n")
        load.cache_clear()
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
