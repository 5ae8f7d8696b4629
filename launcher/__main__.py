"""`python -m launcher +sweep=NAME [key=value ...]`: plan, run, record and select.

The command line sequences the phases (docs/architecture.md): config (load and check) -> plan -> run (the sweep
loop, handed the judge and the log reader of analysis.logs and the MLflow sink of analysis.report) -> report (the
end of the sweep, analysis.report.conclusion). User mistakes exit with code 2 and one message; nothing is
submitted before the config and plan are valid.
"""

from __future__ import annotations

import contextlib
import fcntl
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from analysis.logs.judge import judge
from analysis.logs.progress import LOG_PROGRESS
from analysis.report.conclusion import finish_sweep
from analysis.report.tracking_link import TrackingLink
from launcher.backends import problems_of
from launcher.config.checks import check_environment
from launcher.config.load import describe_groups, load_config, reproducible_args, split_config_dirs, to_yaml
from launcher.config.messages import storage_problem
from launcher.config.schema import RootConfig
from launcher.core.console import Reporter
from launcher.core.errors import ParasweepError
from launcher.plan.compare import plan_difference, read_plan_csv
from launcher.plan.planner import make_plan
from launcher.plan.planning_progress import PlanningProgress
from launcher.plan.table import print_plan, write_plan_csv
from launcher.run.folder import SweepFolder
from launcher.run.hooks import SweepHooks
from launcher.run.interruption import Terminated, terminate_on_signals
from launcher.run.loop import run_sweep

USAGE = """usage: python -m launcher [--config-dir DIR] +sweep=NAME [override ...]
       python -m launcher [--config-dir DIR] --list

  +sweep=tiny                 the embedded CPU sweep (default model/cluster/backend/executor)
  +sweep=70b dry_run=true     plan Llama-2-70B on 8-32 A100 nodes: ranked table, pruning summary, plan.csv
  model=NAME cluster=NAME backend=NAME executor=NAME    pick config groups (conf/<group>/NAME.yaml)
  model=hf model.hf_config=PATH/config.json            a model's shape from its Hugging Face config.json
  grid.tp=[1,2,4] plan.max_trials=20 sweep.fresh=true  any key of the schema (launcher/config/schema.py)
  --config-dir DIR            your own config folder (DIR/model/, DIR/cluster/, DIR/backend/, DIR/sweep/ ...),
                              searched before the shipped one; repeatable; also PARASWEEP_CONFIG_DIR=DIR1:DIR2
                              or hydra.searchpath=[file:///DIR]; +sweep=DIR/sweep/NAME.yaml adds DIR too
  --list                      what each config group offers (shipped and yours) and where each file lies
  --cfg                       print the composed config and exit
  -h, --help                  this text
"""


def sweep_hooks(reporter: Reporter) -> SweepHooks:
    """The later phases the sweep loop is handed: the judge and the log reader (analysis.logs), the MLflow sink and
    the end of the sweep (analysis.report)."""
    return SweepHooks(
        judge=judge, progress=LOG_PROGRESS,
        open_sink=lambda cfg, ledger, folder: TrackingLink.open(cfg, ledger, folder, reporter),
        finish=lambda cfg, folder, ledger, sink, elapsed_s: finish_sweep(cfg, folder, ledger, sink, elapsed_s,
                                                                         reporter))


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    reporter = Reporter.for_streams()
    if any(a in ("-h", "--help") for a in args):
        reporter.info(USAGE)
        return 0
    with terminate_on_signals():  # SIGTERM and SIGHUP end the launcher as a Ctrl-C does (launcher.run.interruption)
        return _main(args, reporter)


def _main(args: list[str], reporter: Reporter) -> int:
    try:
        if not split_config_dirs(args)[1] and "--list" not in args:
            # No sweep and no override: running the default trial into sweeps/tiny would surprise (and overwrite
            # that sweep's config.yaml); say what to type instead.
            reporter.note(USAGE)
            return 2
        unknown = [a for a in split_config_dirs(args)[1] if a.startswith("-") and a not in ("--list", "--cfg")]
        if unknown:
            raise ParasweepError(f"unknown option {unknown[0]!r}: see python -m launcher --help")
        if "--list" in args:
            reporter.info(describe_groups([a for a in args if a != "--list"]))
            return 0
        show_cfg = "--cfg" in args
        args = [a for a in args if a != "--cfg"]
        cfg = load_config(args)
        if show_cfg:
            reporter.info(to_yaml(cfg))
            return 0
        check_environment(cfg)  # a writable sweep folder; SLURM's commands for executor=slurm
        if cfg.dry_run:
            return _dry_run(cfg, reporter)
        return run_sweep(cfg, overrides=reproducible_args(args), hooks=sweep_hooks(reporter), reporter=reporter)
    except ParasweepError as exc:
        reporter.error(str(exc))
        return exc.exit_code
    except Exception as exc:  # a full disk or a read-only sweep folder mid-run: one line, not a traceback
        problem = storage_problem(exc)
        if problem is None:
            raise
        reporter.error(problem)
        return 1
    except KeyboardInterrupt:
        reporter.note("interrupted: the ledger is intact; run the same command again to resume")
        return 130
    except Terminated as term:
        reporter.note(term.message())
        return term.exit_code


def _dry_run(cfg: RootConfig, reporter: Reporter) -> int:
    notes = [str(p) for p in problems_of(cfg.backend, cfg.model)]  # what a real run still needs
    with PlanningProgress(reporter) as progress:  # on stderr, once planning has taken a second
        plan = make_plan(cfg, progress, notes=notes)
    folder = SweepFolder.of(cfg.sweep.root_dir, cfg.sweep.name)
    with _plan_destination(folder, reporter) as csv_path:
        write_plan_csv(plan, csv_path)
    print_plan(cfg, plan, reporter, csv_path)
    if csv_path != folder.plan_csv and folder.plan_csv.is_file():
        for line in plan_difference(plan, read_plan_csv(folder.plan_csv), str(folder.plan_csv)):
            reporter.say(line)
    return 0


@contextlib.contextmanager
def _plan_destination(folder: SweepFolder, reporter: Reporter) -> Iterator[Path]:
    """Where a dry run writes its plan: plan.csv under the sweep folder's lock, unless the folder holds a recorded
    sweep. While a launcher runs the sweep it holds that lock, and its plan.csv describes what it runs; after a sweep
    ran, its plan.csv is what it ran (`python -m analysis` puts it in the MLflow parent run). In both cases the dry
    run writes plan.dry-run.csv beside it and leaves plan.csv as it is."""
    folder.create()
    beside = folder.root / "plan.dry-run.csv"
    with (folder.root / ".lock").open("a+") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            reporter.note(f"a launcher is running this sweep: the dry run's plan goes to {beside}, its plan.csv "
                          f"is left as it is")
            yield beside
            return
        if folder.ledger.exists():
            reporter.note(f"{folder.root} holds a recorded sweep (ledger.sqlite): the dry run's plan goes to "
                          f"{beside}, its plan.csv is left as it is (to plan a new sweep instead: sweep.name=OTHER)")
            yield beside
            return
        yield folder.plan_csv


if __name__ == "__main__":
    sys.exit(main())
