"""`python -m launcher +sweep=NAME [key=value ...]`: plan, run, record and select.

User mistakes exit with code 2 and one message; nothing is submitted before the config and plan are valid.
"""

from __future__ import annotations

import contextlib
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
        from launcher.inputs import check_environment

        check_environment(cfg)  # a writable sweep folder; SLURM's commands for executor=slurm
        if cfg.dry_run:
            return _dry_run(cfg)
        from launcher.run.loop import run_sweep

        return run_sweep(cfg, overrides=reproducible_args(args))
    except ParasweepError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    except Exception as exc:  # a full disk or a read-only sweep folder mid-run: one line, not a traceback
        from launcher.inputs import storage_problem

        problem = storage_problem(exc)
        if problem is None:
            raise
        print(f"error: {problem}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted: the ledger is intact; run the same command again to resume", file=sys.stderr)
        return 130


def _dry_run(cfg) -> int:
    from pathlib import Path

    from launcher.plan.planner import make_plan
    from launcher.plan.planning_progress import PlanningProgress
    from launcher.plan.table import print_plan, write_plan_csv

    with PlanningProgress() as progress:  # on stderr, once planning has taken a second
        plan = make_plan(cfg, progress)
    with _plan_destination(Path(cfg.sweep.root_dir) / cfg.sweep.name) as csv_path:
        write_plan_csv(plan, csv_path)
    print_plan(cfg, plan, csv_path)
    return 0


@contextlib.contextmanager
def _plan_destination(folder):
    """Where a dry run writes its plan: plan.csv under the sweep folder's lock. While a launcher runs the sweep it
    holds that lock, and its plan.csv describes what it runs: the dry run writes plan.dry-run.csv beside it."""
    import fcntl

    folder.mkdir(parents=True, exist_ok=True)
    with (folder / ".lock").open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"a launcher is running this sweep: the dry run's plan goes to {folder / 'plan.dry-run.csv'}, "
                  "its plan.csv is left as it is", file=sys.stderr)
            yield folder / "plan.dry-run.csv"
            return
        yield folder / "plan.csv"


if __name__ == "__main__":
    sys.exit(main())
