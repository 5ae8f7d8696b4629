"""`python -m launcher +sweep=NAME [key=value ...]`: plan, run, record and select.

User mistakes exit with code 2 and one message; nothing is submitted before the config and plan are valid.
"""

from __future__ import annotations

import sys
from typing import Sequence

USAGE = """usage: python -m launcher [--config-dir DIR] +sweep=NAME [override ...]
       python -m launcher [--config-dir DIR] --list

  +sweep=tiny                 the embedded CPU sweep (default model/cluster/backend/executor)
  +sweep=70b dry_run=true     plan Llama-2-70B on 8-32 A100 nodes: ranked table, pruning summary, plan.csv
  model=NAME cluster=NAME backend=NAME executor=NAME    pick config groups (conf/<group>/NAME.yaml)
  model=hf model.hf_config=PATH/config.json            a model's shape from its Hugging Face config.json
  grid.tp=[1,2,4] plan.max_trials=20 sweep.fresh=true  any key of the schema (launcher/schema.py)
  --config-dir DIR            your own config folder (DIR/model/, DIR/cluster/, DIR/backend/, DIR/sweep/ ...),
                              searched before the shipped one; repeatable; also PARASWEEP_CONFIG_DIR=DIR1:DIR2
                              or hydra.searchpath=[file:///DIR]; +sweep=DIR/sweep/NAME.yaml adds DIR too
  --list                      what each config group offers (shipped and yours) and where each file lies
  --cfg                       print the composed config and exit
  -h, --help                  this text
"""


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if any(a in ("-h", "--help") for a in args):
        print(USAGE)
        return 0
    from launcher.errors import ParasweepError

    try:
        from launcher.config import describe_groups, load_config, reproducible_args, split_config_dirs, to_yaml

        if not split_config_dirs(args)[1] and "--list" not in args:
            # No sweep and no override: running the default trial into sweeps/tiny would surprise (and overwrite
            # that sweep's config.yaml); say what to type instead.
            print(USAGE, file=sys.stderr)
            return 2
        unknown = [a for a in split_config_dirs(args)[1] if a.startswith("-") and a not in ("--list", "--cfg")]
        if unknown:
            raise ParasweepError(f"unknown option {unknown[0]!r}: see python -m launcher --help")
        if "--list" in args:
            print(describe_groups([a for a in args if a != "--list"]))
            return 0
        show_cfg = "--cfg" in args
        args = [a for a in args if a != "--cfg"]
        cfg = load_config(args)
        if show_cfg:
            print(to_yaml(cfg))
            return 0
        if cfg.dry_run:
            return _dry_run(cfg)
        from launcher.run.loop import run_sweep

        return run_sweep(cfg, overrides=reproducible_args(args))
    except ParasweepError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("interrupted: the ledger is intact; run the same command again to resume", file=sys.stderr)
        return 130


def _dry_run(cfg) -> int:
    from pathlib import Path

    from launcher.plan.planner import make_plan
    from launcher.plan.table import print_plan, write_plan_csv

    plan = make_plan(cfg)
    csv_path = Path(cfg.sweep.root_dir) / cfg.sweep.name / "plan.csv"
    write_plan_csv(plan, csv_path)
    print_plan(cfg, plan, csv_path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
