"""The sweep loop: plan -> ledger -> submit/monitor -> judge -> ledger -> sink (MLflow) -> the end of the sweep.

Running the same command again resumes: ok trials are kept, live jobs re-attached, retryable failures resubmitted.
Judging logs, reading a running job's progress, mirroring trials to MLflow and concluding the sweep are later
phases' work: the command line hands them in as launcher.run.hooks.SweepHooks.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import itertools
import operator
import os
import time
import uuid
from collections.abc import Collection, Iterator, MutableMapping, Sequence
from dataclasses import asdict, fields, replace
from pathlib import Path
from typing import Optional

from launcher.backends import require_runnable
from launcher.config.load import to_yaml
from launcher.config.schema import RootConfig
from launcher.core import strict_json
from launcher.core.console import Reporter
from launcher.core.errors import ParseError
from launcher.core.layout import Layout
from launcher.core.logfile import CHUNK_BYTES, check_regular_file
from launcher.core.ranking import finalists, group_repeats, select_best
from launcher.core.record import TrialRecord
from launcher.core.states import MEASURED, JobState, PruneReason, TrialState
from launcher.plan import calibrate, residuals
from launcher.plan.calibrate import FeatureTable, load_fitter
from launcher.plan.constants import Constants, constants_for
from launcher.plan.estimator import Estimate
from launcher.plan.flops import one_flop_convention
from launcher.plan.planner import Plan, PlannedTrial, make_plan
from launcher.plan.planning_progress import PlanningProgress
from launcher.plan.table import write_plan_csv
from launcher.run import compute, feature_tables, network, plan_store, policy, trial_files
from launcher.run.bringback import BROUGHT_BACK, bring_back, candidates, may_come_back, predict_pruned
from launcher.run.budget import within_budget
from launcher.run.early_stop import comparable_best, stop_early, stop_steady
from launcher.run.executor import JobRequest, JobStatus, log_paths, make_runner, read_logs
from launcher.run.folder import SweepFolder
from launcher.run.hooks import LogProgress, SweepHooks, TrialSink
from launcher.run.identity import check_same_setup
from launcher.run.interruption import Terminated, interrupted_changes, stop_live_trials, unrecorded_submission_changes
from launcher.run.ledger import Ledger
from launcher.run.memory_prune import calibrated_ooms
from launcher.run.plan_store import StoredPlan, plan_key
from launcher.run.policy import OomIndex, ShapeIndex, repeat_records, should_retry
from launcher.run.prior import prior_from
from launcher.run.progress import Progress
from launcher.run.refusal import plan_refused_again, refused_changes, refused_note
from launcher.run.search import Search
from launcher.run.slurm_preflight import check_slurm
from launcher.run.view import LedgerView


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused while a plan's objects are made (plan, ledger records, view: none
    of them in a cycle): with tens of thousands of them alive, its passes traversed them all again and again, ~40 %
    of a 50k-trial plan's insert (issue 19). What became cyclic garbage meanwhile is collected after."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def open_folder(cfg: RootConfig, reporter: Reporter) -> SweepFolder:
    folder = SweepFolder.of(cfg.sweep.root_dir, cfg.sweep.name)
    if cfg.sweep.fresh and folder.root.exists():
        reporter.info(f"sweep.fresh=true: previous sweep kept in {folder.keep_aside()}")
    folder.create()
    return folder


def _records(plan: Plan | StoredPlan, known: Collection[str] = ()) -> list[TrialRecord]:
    """_each_record as a list."""
    return list(_each_record(plan, known))


def _each_record(plan: Plan | StoredPlan, known: Collection[str] = ()) -> Iterator[TrialRecord]:
    """The plan as ledger records: kept trials, then those pruned as predicted OOMs (budget-dropped layouts are not
    trials of this sweep). Predictions, breakdowns included, are recorded here once for everything downstream.
    `known`: config hashes the ledger holds (a resume): left out, as Ledger.add_trials would leave them, without
    converting 50k estimates first. One at a time (Ledger.add_trials converts them as sqlite takes them); a stored
    plan's are in the ledger already."""
    if isinstance(plan, StoredPlan):
        return
    for pos, t in enumerate(plan.trials):
        if t.config_hash not in known:
            yield TrialRecord(t.config_hash, pos, t.layout, _predicted(t), t.selection)
    for pos, t in enumerate(plan.pruned, len(plan.trials)):
        if t.pruned_by is PruneReason.PREDICTED_OOM and t.config_hash not in known:
            yield TrialRecord(t.config_hash, pos, t.layout, _predicted(t), "pruned", state=TrialState.PRUNED,
                              pruned_by=t.pruned_by, reason=t.pruned_reason)


def _kept_layouts(plan: Plan | StoredPlan) -> list[Layout]:
    return list(plan.layouts) if isinstance(plan, StoredPlan) else [t.layout for t in plan.trials]


def _kept_hashes(plan: Plan | StoredPlan) -> list[str]:
    return list(plan.config_hashes) if isinstance(plan, StoredPlan) else [t.config_hash for t in plan.trials]


def _plan(cfg: RootConfig, stored: Optional[StoredPlan], constants: Optional[Constants] = None,
          progress: Optional[PlanningProgress] = None) -> tuple[Plan | StoredPlan, str]:
    """(the plan, its key): the stored one when it is what planning would make (launcher.run.plan_store), else a
    new one."""
    key = plan_key(cfg, constants)
    if stored is not None and stored.key == key:
        return stored, key
    return make_plan(cfg, progress, constants=constants, features=True), key


_PLAIN = (int, float, str, bool, type(None))


def _predicted(t: PlannedTrial) -> dict:
    """What the ledger keeps of a plan's prediction: the estimate and its 90 % intervals (launcher.plan.band)."""
    out = _estimate_dict(t.estimate)
    if t.intervals is not None:
        out.update(t.intervals.as_dict(t.estimate.tokens_per_s, t.estimate.step_time_s))
    return out


def _estimate_dict(estimate: Estimate) -> dict:
    """asdict(estimate) without its deep copies (seconds for a 50k-trial plan): an Estimate holds numbers and
    dicts of numbers, kept as they are (its dicts are the record's: the plan's estimates are dropped once the
    ledger has the records, and a batch class's memory breakdown is one dict for all its layouts); anything else
    goes through asdict."""
    out: dict = {}
    for name in _ESTIMATE_FIELDS:
        value = getattr(estimate, name)
        if type(value) is dict and _PLAIN_TYPES.issuperset(map(type, value.values())):
            pass
        elif not isinstance(value, _PLAIN):
            return asdict(estimate)
        out[name] = value
    return out


_ESTIMATE_FIELDS = tuple(f.name for f in fields(Estimate))
_PLAIN_TYPES = frozenset(_PLAIN)


class SweepLoop:
    def __init__(self, cfg: RootConfig, folder: SweepFolder, ledger: Ledger, tracking: TrialSink,
                 allowed: set[str], constants: Optional[Constants] = None, *, hooks: SweepHooks,
                 reporter: Reporter, view: Optional[LedgerView] = None) -> None:
        self.cfg, self.folder, self.ledger, self.tracking = cfg, folder, ledger, tracking
        self.view = view or LedgerView(ledger)
        """The ledger's trials in memory, read again only where they changed (launcher.run.view)."""
        self.allowed = allowed
        """Trials this run may submit: the current plan's (a ledger may hold trials of an earlier, larger plan)."""
        self.hooks, self.reporter = hooks, reporter
        self.runner = make_runner(cfg.executor, cfg.cluster, folder.jobs, reporter)
        self.progress = Progress(f"sweep {cfg.sweep.name}", reporter, budget_gpu_hours=cfg.plan.max_gpu_hours)
        self._progress: dict[str, tuple[dict, float]] = {}  # hash -> (bytes read per log, last iteration seen at)
        self.overhead_s = 0.0
        """Launcher time spent on polling, judging, recording and submitting (not waiting for jobs)."""
        prior = prior_from(cfg, constants or constants_for(cfg.backend.name), folder.root, reporter.info)
        self.search = Search(cfg, prior)
        self._finished_best: Optional[tuple[Optional[TrialRecord]]] = None
        """The best finished trial for early stop, boxed (None: not read yet this poll)."""
        self.stop_decision: Optional[str] = None
        """Why plan.stop_when_converged ended the sweep (None: it did not)."""
        self._dicts: dict[str, tuple[TrialRecord, dict]] = {}
        self._pruned_tables: dict[tuple[str, ...], FeatureTable] = {}
        """The planner-pruned candidates' features table, by their keys (launcher.run.bringback.predict_pruned)."""
        self._warm = False
        """Whether _warm_up was done."""
        self._shapes = ShapeIndex()
        """The records' places by layout shape (OomIndex.dominated reads only the shapes that ran out of memory)."""
        self._calibrated: MutableMapping[str, dict] = {}
        """The current prediction of every estimated trial, as of the last re-prediction: recorded with a trial
        when it is submitted or pruned, and for the planned ones when the loop ends (writing 50k rows at every
        refit cost seconds a poll; a resume predicts them again before it submits anything)."""

    # -- one poll ---------------------------------------------------------------------------------------------
    def run(self) -> None:
        try:
            while True:
                busy_from = time.perf_counter()
                self._collect()
                self._learn()
                submitted = self._submit()
                self.progress.update(self.view.trials(), self._best(), counts=self.view.counts(),
                                     ran=self.view.ran())
                if not self._warm:
                    self._warm_up()
                self.overhead_s += time.perf_counter() - busy_from
                if not submitted and not self.view.count(_LIVE):
                    break
                time.sleep(self.cfg.monitor.poll_interval_s)
        finally:
            self._record_calibrated()
            self.progress.close()

    def _warm_up(self) -> None:
        """What the first polls with measured trials would otherwise pay once, done after the first progress line
        (the first jobs are running): the calibration's solver imported, the records indexed by layout shape for
        the first OOM, the features of the planner-pruned trials that bring-back prices at the first refit, and
        spare rows in the search's features table for those it brings back (at 50k trials ~0.05-0.3 s each, which
        made those polls the slowest of a sweep)."""
        self._warm = True
        load_fitter()
        self._shapes.build(self.view.trials())
        for r in candidates(self.view.trials((TrialState.PRUNED,))):
            self.search.features(r)
        self.search.reserve_rows()

    def _record_calibrated(self) -> None:
        """The planned trials' current predictions, into the ledger (one transaction)."""
        changes = {r.config_hash: {"calibrated": p} for r in self.view.trials((TrialState.PLANNED,))
                   if (p := self._calibrated.get(r.config_hash)) is not None and r.calibrated != p}
        self.ledger.update_many(changes)

    def _collect(self) -> None:
        live = self.view.trials((TrialState.SUBMITTED, TrialState.RUNNING))
        unknown = [r for r in live if not r.job_id]  # launcher died between marking and submitting
        for r in unknown:
            self._forget_unrecorded(r)
        live = [r for r in live if r.job_id]
        self._finished_best = None
        statuses = self.runner.poll({r.job_id: Path(r.job_dir) for r in live})
        for r in live:
            status = statuses[r.job_id]
            if status.live:
                self._watch(r, status)
            else:
                self._finish(r, status)

    def _watch(self, r: TrialRecord, status: JobStatus) -> None:
        if status.state is JobState.RUNNING and r.state is not TrialState.RUNNING:
            self.ledger.update(r.config_hash, "running", state=TrialState.RUNNING, started_at=time.time())
        if status.state is not JobState.RUNNING:
            return
        offsets, since = self._progress.get(r.config_hash, ({}, time.time()))  # the clock starts when it runs
        if _new_iterations(log_paths(Path(r.job_dir), r.job_id), offsets, self.hooks.progress):
            since = time.time()
            if self.cfg.plan.early_stop and self._stop_early(r, status):
                return
        self._progress[r.config_hash] = (offsets, since)
        if time.time() - since > self.cfg.monitor.hang_timeout_min * 60:
            self.runner.cancel(r.job_id)
            self._finish(r, status, hang_s=time.time() - since)

    def _finish(self, r: TrialRecord, status: JobStatus, hang_s: Optional[float] = None) -> None:
        paths = log_paths(Path(r.job_dir), r.job_id)
        changes = self.hooks.judge(self.cfg, r, paths, job_state=status.state, exit_code=status.exit_code,
                                   job_error=status.error, nodes=status.nodes, hang_s=hang_s)
        if status.interrupted:  # stopped from outside: not the trial's failure (launcher/run/interruption.py)
            changes = interrupted_changes(self.cfg, r, paths, changes, self.ledger.events(r.config_hash),
                                          self.hooks.judge)
        self.ledger.update(r.config_hash, f"{changes['failure_kind']}: {changes['reason']}"[:300],
                           finished_at=time.time(), synced=False, **changes)
        self._progress.pop(r.config_hash, None)
        self._finished_best = None
        self.tracking.sync(self.ledger.get(r.config_hash))

    def _stop_early(self, r: TrialRecord, status: JobStatus) -> bool:
        """Stop a running trial early, on either side: its measured iterations so far put it below the best
        finished trial by more than the noise tolerance (launcher.run.scheduler.early_stop: stopped_early, its
        partial measurement kept), or they already pin its figure to the noise tolerance (scheduler.steady: ok,
        with fewer measured iterations). Repeats measure the best trials' noise: they always run to the end."""
        if r.repeat_of:
            return False
        if self._finished_best is None:  # once per poll, and again after a finish (not once per running trial)
            self._finished_best = (self._best(),)
        best = self._finished_best[0]
        paths = log_paths(Path(r.job_dir), r.job_id)
        plan, tolerance = self.cfg.plan, self.cfg.analysis.noise_tolerance
        times = self.hooks.progress.step_times(read_logs(paths), self.cfg.backend.warmup_iters)
        tokens_per_step = r.layout.gbs * self.cfg.model.seq_len
        stopped, state = None, TrialState.STOPPED_EARLY
        if best is not None and best.config_hash != r.config_hash:
            target = comparable_best(best.metrics["tokens_per_s"], best.layout.gpus, r.layout.gpus, plan.objective)
            stopped = stop_early(times, tokens_per_step, target, noise_tolerance=tolerance,
                                 min_measured_iters=plan.early_stop_min_iters,
                                 measure_iters=self.cfg.backend.measure_iters)
        if stopped is None:
            stopped, state = stop_steady(times, tokens_per_step, noise_tolerance=tolerance,
                                         min_measured_iters=plan.early_stop_min_iters,
                                         measure_iters=self.cfg.backend.measure_iters), TrialState.OK
        if stopped is None:
            return False
        metrics = stopped.metrics
        if state is TrialState.OK:   # the rates in the planner's FLOP convention, as judge gives a finished trial
            metrics = one_flop_convention(r.predicted, metrics, self.cfg.cluster.peak_tflops)
        self.runner.cancel(r.job_id)
        what = "stopped early" if state is TrialState.STOPPED_EARLY else "measured (steady)"
        self.ledger.update(r.config_hash, f"{what}: {stopped.reason}"[:300], state=state,
                           reason=stopped.reason, metrics=metrics, log_paths=[str(p) for p in paths],
                           node_list=status.nodes or r.node_list, finished_at=time.time(), synced=False)
        self._progress.pop(r.config_hash, None)
        self._finished_best = None
        self.progress.log(f"{r.config_hash[:8]} {r.layout.label()} {what}: {stopped.reason}")
        self.tracking.sync(self.ledger.get(r.config_hash))
        return True

    # -- the search: calibration, re-prediction, re-pruning, stop rule ---------------------------------------------
    def _learn(self) -> None:
        """After what finished: refit the calibration; once it applies, re-predict the planned trials and prune
        those the calibrated memory model rules out; with plan.stop_when_converged, end the search when the
        stop rule says so. Pure decisions (launcher.run.search) recorded here."""
        records = self.view.trials()
        was_applied = self.search.calibration.applied
        if not self.search.refit(records):
            return
        cal = self.search.calibration
        if cal.applied and not was_applied:
            self.progress.log(f"calibration applied: {cal.note}; the planned trials are re-predicted and re-ordered")
        self.folder.write_atomic(self.folder.calibration,
                                 strict_json.dumps(self.search.calibration_json(), indent=2, sort_keys=True))
        if self.search.learned(records):
            self._recalibrate(records, prune=cal.applied)
            records = self.view.trials()
        if self.cfg.plan.stop_when_converged and self.stop_decision is None:
            self._converge(records)

    def _recalibrate(self, records: Sequence[TrialRecord], prune: bool = True) -> None:
        """Record every planned trial's current prediction (frozen when it is submitted: what the search expected
        of it) and, once the fitted memory model applies (`prune`), prune what it puts over the margin."""
        predictions = self._calibrated = self.search.predictions(records)
        if not prune:
            return
        plan = self.cfg.plan  # the planner's rule (launcher.plan.band), judged by the fitted model
        asked = self.view.trials((TrialState.PLANNED, *MEASURED))   # all that calibrated_ooms reads
        self._prune_each([(key, PruneReason.CALIBRATED_OOM, why) for key, why in
                          calibrated_ooms(asked, predictions, self.cfg.cluster.gpu_mem_gb, plan.mem_safety_margin,
                                          plan.keep_borderline)
                          if key in self.allowed])
        self._bring_back(self.view.trials((TrialState.PRUNED, TrialState.OOM)))   # all that bring_back reads

    def _bring_back(self, records: Sequence[TrialRecord]) -> None:
        """Planner-pruned trials the calibrated memory model now keeps go back to planned (launcher.run.bringback),
        into this run's trials, with the prediction that brought them back."""
        cfg = self.cfg
        cap_gb, margin, borderline = cfg.cluster.gpu_mem_gb, cfg.plan.mem_safety_margin, cfg.plan.keep_borderline
        predictions = predict_pruned(  # bring_back's own memory rule first: only what may come back is priced
            self.search.calibration, records, self.search.features, cfg.model.seq_len,
            may_fit=lambda peak, sd: may_come_back(peak, sd, cap_gb, margin, borderline), tables=self._pruned_tables)
        back = bring_back(records, predictions, cfg.cluster.gpu_mem_gb, cfg.plan.mem_safety_margin,
                          cfg.plan.keep_borderline)
        if not back:
            return
        self.ledger.update_each([(key, why[:300], {
            "state": TrialState.PLANNED, "pruned_by": "", "reason": why[:500], "selection": BROUGHT_BACK,
            "calibrated": predictions[key]}) for key, why in back])
        self.allowed |= {key for key, _ in back}
        self._calibrated.update({key: predictions[key] for key, _ in back})
        for key, why in back:
            self.progress.log(f"{key[:8]} {self.ledger.get(key).layout.label()} {why}")

    def _converge(self, records: Sequence[TrialRecord]) -> None:
        # Planned trials of an earlier plan never run here: they must not keep the search going.
        records = [r for r in records if r.state is not TrialState.PLANNED or r.config_hash in self.allowed]
        decision = self.search.converged(records)
        planned = {r.config_hash for r in records if r.state is TrialState.PLANNED}
        skipped = [(key, why) for key, why in decision.skipped if key in planned]  # live trials run to their end
        if not decision.stop or not skipped:
            return
        self.stop_decision = decision.reason
        self.progress.log(f"stop rule: {decision.reason}; {len(skipped)} planned trials skipped")
        self._prune_each([(key, PruneReason.CONVERGED, f"{why} ({decision.reason})") for key, why in skipped])

    def _prune(self, key: str, reason: PruneReason, why: str) -> None:
        self._prune_each([(key, reason, why)])

    def _prune_each(self, prunes: Sequence[tuple[str, PruneReason, str]]) -> None:
        """Prune trials (key, reason, why) in one ledger transaction, then mirror each."""
        self.ledger.update_each([(key, f"pruned: {reason}", {
            "state": TrialState.PRUNED, "pruned_by": reason, "reason": why[:500],
            **({"calibrated": self._calibrated[key]} if key in self._calibrated else {})})
            for key, reason, why in prunes])
        for key, _, _ in prunes:
            self.tracking.sync(self.ledger.get(key))

    def _forget_unrecorded(self, r: TrialRecord) -> None:
        """A trial marked submitted without a job id: stop whatever the dead launcher may have started for it (a
        local job outlives its launcher), then let it be resubmitted without charging the attempt."""
        stop = getattr(self.runner, "stop_unrecorded", None)  # scripted test runners have nothing to stop
        if stop is not None:
            stop(r.config_hash, r.attempts)
        changes = unrecorded_submission_changes(r)
        self.ledger.update(r.config_hash, f"cancelled: {changes['reason']}"[:300], state=TrialState.CANCELLED,
                           **changes)

    # -- submission -------------------------------------------------------------------------------------------
    def _submit(self) -> int:
        records, view, allowed = self.view.trials(), self.view, self.allowed
        live = view.count(_LIVE)
        # once a poll: a scan of every record per planned trial is quadratic in the plan
        dominating = OomIndex(view.trials((TrialState.OOM,))).dominated(records, self._shapes)
        hits = sorted((view.get(key) for key in dominating), key=_POSITION)   # in ledger order, as planned's
        dominated = [(r.config_hash, PruneReason.OOM_DOMINATED, f"needs more memory than trial "
                      f"{oom.config_hash} ({oom.layout.label()}), which ran out of memory")
                     for r in hits if r.config_hash in allowed and (oom := dominating[r.config_hash])]
        # what should_retry may say yes to: neither planned, live, pruned nor a final outcome
        retries = [r for r in view.trials(_RETRYABLE) if r.config_hash in allowed
                   and should_retry(r, self.cfg.retry.max_attempts)]
        self._prune_each(dominated)
        planned = self._planned_allowed()   # the dominated ones pruned now
        if not planned and not retries:
            return 0
        ranks = max(max(map(_GPUS, planned), default=0), max(map(_GPUS, retries), default=0))
        room = max(0, self.runner.concurrency(ranks) - live)
        if not room:
            return 0
        batch = (retries + self._in_search_order(records, planned, room))[:room]  # a retry was picked before: first
        batch = [r if r.config_hash not in self._calibrated or r.state is not TrialState.PLANNED
                 else replace(r, calibrated=self._calibrated[r.config_hash]) for r in batch]
        batch, held = within_budget(self.cfg, records, batch, time.time())
        if held and not batch:
            if not live:  # nothing running can end under its prediction and make room: the budget is spent
                self._stop_at_budget(held)
            return 0
        requests, marks = [], []
        for r in batch:
            script = trial_files.write(self.cfg, self.folder, r)
            requests.append(JobRequest(r.config_hash, script, r.layout.nodes, r.layout.gpus_per_node,
                                       tuple(r.excluded_nodes), r.attempts + 1))
            marks.append((r.config_hash, f"attempt {r.attempts + 1}", dict(
                state=TrialState.SUBMITTED, job_id="", job_dir="", attempts=r.attempts + 1, submitted_at=time.time(),
                started_at=0.0, metrics={}, failure_kind="", reason="", evidence=[], calibrated=r.calibrated)))
        # Marked before submitting (one transaction): a launcher killed in between finds 'submitted' without a
        # job id.
        self.ledger.update_each(marks)
        done = self.runner.submit(requests)
        self.ledger.update_each([(key, f"job {job_id}", {"job_id": job_id, "job_dir": str(job_dir)})
                                 for key, (job_id, job_dir) in done.jobs.items()])
        marked = {r.config_hash: self.ledger.get(r.config_hash) for r in batch if r.config_hash in done.refused}
        for key, why in done.refused.items():
            self.progress.log(f"warning: {why}")
            self.ledger.update(key, why[:300], **refused_changes(marked[key], why, time.time()))
            self.tracking.sync(self.ledger.get(key))
        return len(batch)

    def _planned_allowed(self) -> list[TrialRecord]:
        """The planned trials this run may submit, in ledger order (all of them but an earlier plan's: the
        filter is a pass over 50k trials, asked only when one is not allowed)."""
        planned, allowed = self.view.trials((TrialState.PLANNED,)), self.allowed
        if allowed.issuperset(map(_KEY, planned)):
            return planned
        return [r for r in planned if r.config_hash in allowed]

    def _stop_at_budget(self, why: str) -> None:
        """plan.max_gpu_hours: prune the planned trials that did not fit (planned again on a resume)."""
        left = [r for r in self.view.trials((TrialState.PLANNED,)) if r.config_hash in self.allowed]
        self._prune_each([(r.config_hash, PruneReason.GPU_BUDGET, f"over the GPU-hour budget: {why}") for r in left])
        self.progress.log(f"GPU-hour budget reached: {why}. {len(left)} planned trial(s) left unrun (pruned: "
                          "gpu_budget); raise plan.max_gpu_hours and run the same command to run them")

    def _in_search_order(self, records: Sequence[TrialRecord], planned: list[TrialRecord],
                         head: int) -> list[TrialRecord]:
        """The first `head` planned trials in the scheduler's order (launcher.run.scheduler.order: before the
        calibration applies the best predicted, then one that spans the grid, then by predicted throughput; after
        it, by the chance to beat the best). Trials the plan did not estimate follow in ledger order."""
        if not planned:
            return []
        keys = list(map(_KEY, planned))
        picks = self.search.order(records, candidates=frozenset(keys), head=head)
        predicted = self.search.predictions(records).keyset()   # once: `in` on it costs no Python call
        unpredicted = list(itertools.compress(planned, [k not in predicted for k in keys])) \
            if not all(map(predicted.__contains__, keys)) else []
        return [self.view.get(p.key) for p in picks] + unpredicted

    def _best(self, records: Optional[Sequence[TrialRecord]] = None) -> Optional[TrialRecord]:
        """The best trial of `records` (None: of the view, read through its state index, not a pass over every
        trial)."""
        # Only groups of repeats with an ok member can be ranked: converting the whole plan to dicts on every
        # poll cost seconds at 50k planned trials.
        if records is None:
            rankable = {r.repeat_of or r.config_hash for r in self.view.trials((TrialState.OK,))}
            members = self.view.family(rankable)
        else:
            rankable = {r.repeat_of or r.config_hash for r in records if r.state is TrialState.OK}
            members = [r for r in records if (r.repeat_of or r.config_hash) in rankable]
        best = select_best(group_repeats([self._as_dict(r) for r in members]),
                           self.cfg.analysis.noise_tolerance, self.cfg.plan.objective)
        return next(r for r in members if r.config_hash == best["config_hash"]) if best else None

    def _as_dict(self, r: TrialRecord) -> dict:
        """asdict(r), once per record object (the view replaces a record when its row changes; the ranking only
        reads the dicts): every ok trial was converted again on every poll."""
        hit = self._dicts.get(r.config_hash)
        if hit is None or hit[0] is not r:
            hit = self._dicts[r.config_hash] = (r, asdict(r))
        return hit[1]


_KEY = operator.attrgetter("config_hash")
_GPUS = operator.attrgetter("layout.gpus")
_POSITION = operator.attrgetter("position")
_LIVE = (TrialState.SUBMITTED, TrialState.RUNNING)
_RETRYABLE = tuple(s for s in TrialState if not s.live and s not in
                   (TrialState.OK, TrialState.OOM, TrialState.PRUNED, TrialState.PLANNED, TrialState.STOPPED_EARLY))
"""The states should_retry may say yes to (the others it always refuses)."""
_PARTIAL_LINE_BYTES = 64 * 1024  # what is kept of a line cut between two chunks


def _new_iterations(paths: Sequence[Path], offsets: dict, progress: LogProgress) -> bool:
    """Read what the logs gained since the last poll (tailing, not re-reading); True if it holds an iteration.
    Read chunk by chunk, and no further than the first iteration: a log that gained 600 MB since the last poll
    costs one chunk of memory, not 600 MB. A path that is not a regular file (a FIFO) is not read."""
    found = False
    for path in paths:
        try:
            check_regular_file(path)
        except (ParseError, OSError):
            continue
        with path.open("rb") as fh:
            fh.seek(offsets.get(path, 0))
            carry = b""
            while not found and (chunk := fh.read(CHUNK_BYTES)):
                text = carry + chunk
                found = progress.has_iteration(text.decode(errors="replace"))
                carry = text[text.rfind(b"\n") + 1:][-_PARTIAL_LINE_BYTES:]
            offsets[path] = fh.seek(0, os.SEEK_END) if found else fh.tell()
    return found



def confirm_finalists(cfg: RootConfig, ledger: Ledger, loop: SweepLoop, reporter: Reporter) -> None:
    """analysis.confirm_top: measure the finalists again (launcher.core.ranking.finalists) until each has
    analysis.repeats measurements. The finalists' band widens with the spread the repeats show and the winner can
    change with the medians, so this goes round until the finalists (the winner first) are all measured: each
    round measures at least one configuration that had a single measurement, so it ends."""
    a = cfg.analysis
    while True:
        records = loop.view.trials()
        top = finalists([asdict(r) for r in records], a.confirm_top, a.noise_tolerance, cfg.plan.objective)
        extra = repeat_records(records, top, a.repeats, cfg.cluster.nodes)
        if not ledger.add_trials(extra):
            return
        names = ", ".join(f"{key[:8]} {ledger.get(key).layout.label()}" for key in top)
        reporter.info(f"confirming the winner: measuring {len(top)} finalist(s) {a.repeats} times each ({names})")
        loop.allowed |= {r.config_hash for r in extra}
        loop.run()


def _measure_network(cfg: RootConfig, folder: SweepFolder, plan: Plan | StoredPlan, reporter: Reporter, *,
                     key: str = "", stored: Optional[StoredPlan] = None,
                     ) -> tuple[RootConfig, Constants, Plan | StoredPlan, str]:
    """plan.network_probe: the saved probe or a new one (one job, launcher.run.network), then the plan again with
    the measured bandwidths (or the stored one that is it: launcher.run.plan_store); without a probe, everything
    as it was. The plan comes back with its key (`key`: that of `plan`)."""
    if not network.probe_enabled(cfg):
        return cfg, network.with_network(cfg, None)[1], plan, key
    nodes = network.probe_nodes(cfg, max(layout.nodes for layout in _kept_layouts(plan)))
    probe = network.saved_probe(cfg, folder, nodes)
    if probe is None:
        reporter.info(f"network probe: {nodes} node(s) of {cfg.cluster.name} (python -m launcher.netbench) ...")
        runner = make_runner(cfg.executor, cfg.cluster, folder.jobs, reporter)
        probe = network.run_probe(cfg, folder, runner, nodes, cfg.monitor.poll_interval_s,
                                  cfg.executor.timeout_min * 60, reporter)
    if probe is None:
        return cfg, network.with_network(cfg, None)[1], plan, key
    p = probe.profile()
    reporter.info(f"network measured ({p.source}): intra-node {_gb(p.intra_node_gbytes_per_s)}, inter-node "
          f"{_gb(p.inter_node_gbytes_per_s)} (datasheet {cfg.cluster.intra_node_gbytes_per_s:g}, "
          f"{cfg.cluster.inter_node_gbytes_per_s:g} GB/s)")
    measured, constants = network.with_network(cfg, probe)
    return (measured, constants, *_plan(measured, stored, constants))


def _measure_compute(cfg: RootConfig, constants: Constants, folder: SweepFolder, plan: Plan | StoredPlan,
                     reporter: Reporter, *, key: str = "", stored: Optional[StoredPlan] = None,
                     ) -> tuple[Constants, Plan | StoredPlan, str]:
    """plan.compute_probe: the saved probe or a new one (one job on one GPU, launcher.run.compute), then the plan
    again with the measured GEMM efficiency (or the stored one that is it); without a probe, everything as it
    was. The plan comes back with its key, as _measure_network's."""
    if not compute.probe_enabled(cfg) or not (layouts := _kept_layouts(plan)):  # no trial: no shape to measure
        return constants, plan, key
    probe = compute.saved_probe(cfg, folder)
    if probe is None:
        reporter.info(f"compute probe: 1 GPU of {cfg.cluster.name} (python -m launcher.computebench) ...")
        runner = make_runner(cfg.executor, cfg.cluster, folder.jobs, reporter)
        probe = compute.run_probe(cfg, folder, runner, layouts, cfg.monitor.poll_interval_s,
                                  cfg.executor.timeout_min * 60, reporter)
    new, profile = compute.with_compute(cfg, constants, probe)
    if profile is None:
        return constants, plan, key
    reporter.info(f"compute measured ({compute.describe(cfg, profile)})")
    return (new, *_plan(cfg, stored, new))


def _gb(value: Optional[float]) -> str:
    return "not measured" if value is None else f"{value:.3g} GB/s"


def _write_inputs(cfg: RootConfig, folder: SweepFolder, plan: Plan | StoredPlan, overrides: Sequence[str]) -> None:
    """config.yaml, the command and plan.csv (a stored plan's is there already: plan_store checked it)."""
    folder.config.write_text(to_yaml(cfg))
    folder.write_command(["python", "-m", "launcher", *overrides])
    if isinstance(plan, Plan):
        write_plan_csv(plan, folder.plan_csv)


def _check_same_setup(cfg: RootConfig, ledger: Ledger, folder: SweepFolder) -> None:
    """A folder holds one setup's measurements (launcher.run.identity); a new folder gets its sweep uid."""
    check_same_setup(cfg, ledger, folder)
    if not ledger.get_meta("sweep_uid"):  # tells this folder's MLflow runs from those of a fresh sweep of one name
        ledger.set_meta("sweep_uid", uuid.uuid4().hex)


def run_sweep(cfg: RootConfig, overrides: Sequence[str] = (), *, hooks: SweepHooks, reporter: Reporter) -> int:
    """Plan, run every trial (resuming what a folder holds), then hand the sweep to hooks.finish; its exit status."""
    try:
        return _run_sweep(cfg, overrides, hooks=hooks, reporter=reporter)
    finally:
        forget_sweep()


def forget_sweep() -> None:
    """Drops what the modules cache about a sweep's trials (designs, shapes, feature rooms, fits): a process that
    runs sweeps in sequence (tests, a notebook, the bench's resume) kept the last one's, ~100 MB at 50k trials."""
    residuals.forget()
    policy.forget()
    feature_tables.forget()
    calibrate.forget()


def _run_sweep(cfg: RootConfig, overrides: Sequence[str], *, hooks: SweepHooks, reporter: Reporter) -> int:
    require_runnable(cfg.backend, cfg.model)  # before anything is created or submitted
    t_plan = time.perf_counter()
    stored = plan_store.load(cfg, reporter)  # a resume of the same sweep: the plan its ledger keeps
    with PlanningProgress(reporter) as progress, gc_paused():  # progress on stderr, once planning takes a second
        plan, key = _plan(cfg, stored, progress=progress)  # raises before anything is created or submitted
    plan_s = time.perf_counter() - t_plan
    # SLURM reachable and taking the largest job, before anything is created or marked
    check_slurm(cfg, functools.partial(_kept_layouts, plan))
    folder = open_folder(cfg, reporter)
    with folder.exclusive(), Ledger(folder.ledger) as ledger:
        _check_same_setup(cfg, ledger, folder)
        # The loop plans with the measured network; config.yaml keeps the preset's numbers (python -m analysis
        # applies the saved probe to them again, analysis.report.conclusion.estimator_inputs).
        measured, constants, plan, key = _measure_network(cfg, folder, plan, reporter, key=key, stored=stored)
        constants, plan, key = _measure_compute(measured, constants, folder, plan, reporter, key=key, stored=stored)
        _write_inputs(cfg, folder, plan, overrides)
        kept = _kept_hashes(plan)
        features = plan.class_features if isinstance(plan, Plan) else {}  # priced with the plan, for the search
        known = ledger.config_hashes()
        inserted: Optional[list[TrialRecord]] = None if known else []  # a new sweep: the view starts from them
        with gc_paused():
            new = ledger.add_trials(_each_record(plan, known),
                                    plan=(plan_store.stored_key(key, folder.plan_csv), kept), inserted=inserted,
                                    adopt=True)  # each record made once (issue 19)
            allowed = set(kept)
            del plan  # every grid point's estimate (hundreds of MB at 50k trials): the ledger holds the trials'
            view = LedgerView(ledger, inserted)  # one read of the ledger (none when new), then the rows that change
            del inserted
        # the budget is checked again, maybe a larger one
        ledger.update_each([(r.config_hash, "planned again", {"state": TrialState.PLANNED, "pruned_by": "",
                                                              "reason": ""})
                            for r in view.trials((TrialState.PRUNED,)) if r.pruned_by == PruneReason.GPU_BUDGET])
        plan_refused_again(ledger)  # sbatch refused them last time: not attempts, submitted again now
        resumed = len(view.trials()) - new
        if resumed:
            reporter.info(f"resuming sweep {cfg.sweep.name}: {resumed} trials already in {folder.ledger}")
        # trials the calibration brought back before a resume run again (the plan still prunes them)
        allowed |= {r.config_hash for r in view.trials() if r.selection == BROUGHT_BACK}
        allowed |= {r.config_hash for r in view.trials() if r.repeat_of in allowed}
        stale = [r for r in view.trials((TrialState.PLANNED,)) if r.config_hash not in allowed]
        if stale:
            reporter.info(f"{len(stale)} planned trials of an earlier plan are not in this one: left unrun")
        tracking = hooks.open_sink(cfg, ledger, folder)
        loop = SweepLoop(measured, folder, ledger, tracking, allowed, constants, hooks=hooks, reporter=reporter,
                         view=view)
        loop.search.take_features(features)
        del features
        started = time.time()
        try:
            loop.run()
            confirm_finalists(cfg, ledger, loop, reporter)
        except Terminated as term:  # SIGTERM/SIGHUP: stop and record the live trials (or leave SLURM's running)
            term.stopped, term.detached = stop_live_trials(loop.runner, ledger, loop._finish, loop._forget_unrecorded,
                                                           cfg.executor.detach_on_term)
            raise
        t_finish = time.perf_counter()
        status = hooks.finish(cfg, folder, ledger, tracking, time.time() - started)
        refused = refused_note(ledger, folder.read_command(" ".join(["python", "-m", "launcher", *overrides])))
        if refused:
            reporter.warn(refused)
        ran = [r for r in view.trials() if r.attempts]
        overhead = plan_s + loop.overhead_s + time.perf_counter() - t_finish
        if ran:
            reporter.info(f"launcher overhead: {overhead / len(ran):.3f} s per trial ({len(ran)} trials run; plan, "
                          "submit, "
                  f"poll, parse, MLflow; the trials' own run time excluded)")
        return status
