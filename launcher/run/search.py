"""The search inside the sweep loop: ledger records -> calibration and scheduler inputs -> decisions.

The building blocks are launcher.plan.calibrate (fit the estimator's constants to the measured trials) and
launcher.run.scheduler (order, early stop, stop rule); launcher.replay drives the same functions against measured
tables. This module turns the ledger's records into their inputs and their answers into what the loop records:

- `Search.refit`: the calibration is a pure function of the measured trials (ok and stopped_early) and of what an
  applied calibration predicted for them before they ran (TrialRecord.calibrated), so a resumed sweep recomputes
  it from the ledger; a refit happens only when that set changes.
- `Search.predictions`: every planned trial under the current calibration (a-priori constants until it applies).
- `Search.order`: the planned trials, the one to run next first (launcher.run.scheduler.order).
- `calibrated_ooms` and `converged`: what the calibrated memory model and the stop rule take out of the queue.
- `stop_early` (fed with analysis.logs.progress's step times through the loop's hooks): whether a running
  trial's partial measurement is known worse than the best.

Trials the plan did not estimate (a hand-made or first-release ledger: no predicted step time) keep the ledger
order and are never re-predicted: there is nothing to compare their prediction with.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Optional

from launcher.config.schema import RootConfig
from launcher.core.objective import Objective
from launcher.core.record import TrialRecord
from launcher.core.states import MEASURED, TrialState
from launcher.plan.calibrate import (
    Calibration,
    FeatureTable,
    Observation,
    TrialFeatures,
    calibrate,
    trial_features,
    uncalibrated,
)
from launcher.plan.constants import Constants
from launcher.plan.inputs import constants_of, workload_for
from launcher.run import scheduler
from launcher.run.scheduler import Outcome, Planned

PREDICTION_KEYS = ("step_time_s", "step_sd", "tokens_per_s", "peak_mem_gb", "mem_sd")


def estimated(r: TrialRecord) -> bool:
    """A trial of the search: the plan estimated it, it is not a repeat and it was not pruned."""
    return bool(r.predicted.get("step_time_s")) and not r.repeat_of and r.state is not TrialState.PRUNED


def objective_share(r: TrialRecord, objective: Objective | str) -> float:
    """What one token/s of this trial is worth under plan.objective: the scheduler compares tokens/s, so for the
    per-GPU objective every throughput it sees is divided by the trial's GPUs (Objective.share)."""
    return Objective(objective).share(r.layout.gpus)


def outcomes(records: Sequence[TrialRecord], objective: str = "tokens_per_s") -> list[Outcome]:
    """The finished trials of the search, as the scheduler reads them (throughput only when measured, in the
    objective's units)."""
    out = []
    for r in records:
        if not estimated(r) or not r.state.finished:
            continue
        speed = r.metrics.get("tokens_per_s") if r.state in MEASURED else None
        out.append(Outcome(r.config_hash, r.state, speed * objective_share(r, objective) if speed else None))
    return out


@dataclass(frozen=True)
class StopEarly:
    reason: str
    metrics: dict


class Search:
    """The sweep's current calibration and the features it predicts from (computed once per trial)."""

    def __init__(self, cfg: RootConfig, prior: Optional[Constants] = None) -> None:
        self.cfg = cfg
        self.prior = prior or constants_of(cfg.backend)
        """The a-priori constants (the backend's, with a measured network when probed)."""
        self.calibration: Calibration = uncalibrated(self.prior)
        self._features: dict[str, TrialFeatures] = {}
        self._fitted_on: Optional[tuple] = None

    # -- calibration --------------------------------------------------------------------------------------------
    def features(self, r: TrialRecord) -> TrialFeatures:
        if r.config_hash not in self._features:
            b = self.cfg.backend
            self._features[r.config_hash] = trial_features(self.cfg.model, self.cfg.cluster, r.layout, b.precision,
                                                           b.flash_attention, backend=b.name,
                                                           workload=workload_for(b, r.layout))
        return self._features[r.config_hash]

    def observations(self, records: Sequence[TrialRecord]) -> list[Observation]:
        """Measured trials (repeats included: more measurements of one layout); a stopped_early trial's peak is
        not its run's peak (it stopped before the end), so only its step time counts."""
        out = []
        for r in records:
            if r.state not in MEASURED or not r.metrics.get("step_time_s") or not r.predicted.get("step_time_s"):
                continue
            peak = r.metrics.get("peak_mem_gb") if r.state is TrialState.OK else None
            out.append(Observation(self.features(r), float(r.metrics["step_time_s"]), peak,
                                   r.calibrated.get("step_time_s")))
        return out

    def refit(self, records: Sequence[TrialRecord]) -> bool:
        """Fit the calibration to the measured trials; False (and nothing done) when they did not change."""
        key = tuple(sorted((r.config_hash, str(r.state), r.metrics.get("step_time_s"), r.metrics.get("peak_mem_gb"),
                            r.calibrated.get("step_time_s")) for r in records
                           if r.state in MEASURED and r.predicted.get("step_time_s")))
        if key == self._fitted_on:
            return False
        self._fitted_on = key
        self.calibration = calibrate(self.observations(records), self.prior)
        return True

    # -- predictions --------------------------------------------------------------------------------------------
    def predictions(self, records: Sequence[TrialRecord]) -> dict[str, dict]:
        """config hash -> the current calibration's prediction (PREDICTION_KEYS + n_fit) of every estimated trial."""
        trials = [r for r in records if estimated(r)]
        if not trials:
            return {}
        p = self.calibration.predict(FeatureTable([self.features(r) for r in trials]))
        seq_len = self.cfg.model.seq_len
        out = {}
        for i, r in enumerate(trials):
            step_s = float(p.step_time_s[i])
            out[r.config_hash] = {"step_time_s": step_s, "step_sd": float(p.step_sd[i]),
                                  "tokens_per_s": r.layout.gbs * seq_len / step_s,
                                  "peak_mem_gb": float(p.peak_mem_gb[i]), "mem_sd": float(p.mem_sd[i]),
                                  "n_fit": self.calibration.n_trials}
        return out

    def planned(self, records: Sequence[TrialRecord], predictions: dict[str, dict]) -> list[Planned]:
        capacity_gb, seq_len, objective = self.cfg.cluster.gpu_mem_gb, self.cfg.model.seq_len, self.cfg.plan.objective
        return [Planned(r.config_hash, r.layout.to_dict(), r.layout.gbs * seq_len * objective_share(r, objective),
                        p["step_time_s"], p["step_sd"], p["peak_mem_gb"], p["mem_sd"], capacity_gb)
                for r in records if (p := predictions.get(r.config_hash)) is not None]

    # -- decisions ----------------------------------------------------------------------------------------------
    def order(self, records: Sequence[TrialRecord]) -> list[scheduler.Pick]:
        """Every unrun trial of the search, the one to run next first."""
        planned = self.planned(records, self.predictions(records))
        finished = outcomes(records, self.cfg.plan.objective)
        return scheduler.order(planned, finished, calibrated=self.calibration.applied,
                               noise_tolerance=self.cfg.analysis.noise_tolerance)

    def converged(self, records: Sequence[TrialRecord]) -> scheduler.StopDecision:
        """The stop rule. It trusts the calibration once a trial measured after a fit has checked it (as replay
        does): a fit that has never predicted anything out of sample may be confidently wrong."""
        cal = self.calibration
        planned = self.planned(records, self.predictions(records))
        finished = outcomes(records, self.cfg.plan.objective)
        return scheduler.stop_rule(planned, finished, calibrated=cal.applied and cal.n_holdout > 0,
                                   noise_tolerance=self.cfg.analysis.noise_tolerance)


def calibrated_ooms(records: Sequence[TrialRecord], predictions: dict[str, dict], capacity_gb: float,
                    limit_share: float) -> list[tuple[str, str]]:
    """Planned trials the calibrated memory model puts over `limit_share` of capacity, with the reason. Never one
    that a measured trial predicted to need at least as much memory shows to fit (the model errs, not the device)."""
    fitted = [predictions[r.config_hash]["peak_mem_gb"] for r in records
              if r.state in MEASURED and r.config_hash in predictions]
    largest_fitted = max(fitted, default=0.0)
    out = []
    for r in records:
        p = predictions.get(r.config_hash)
        if r.state is not TrialState.PLANNED or p is None:
            continue
        peak = p["peak_mem_gb"]
        if peak <= limit_share * capacity_gb or peak <= largest_fitted:
            continue
        out.append((r.config_hash, f"calibrated prediction {peak:.3g} GB > {limit_share:.0%} of {capacity_gb:g} GB "
                                   f"(a-priori {r.predicted.get('peak_mem_gb', 0):.3g} GB; fitted on "
                                   f"{p['n_fit']} measured trials)"))
    return out


# -- early stop -----------------------------------------------------------------------------------------------------
def stop_early(step_times_s: Sequence[float], tokens_per_step: int, best_tokens_per_s: Optional[float], *,
               noise_tolerance: float, min_measured_iters: int, measure_iters: int) -> Optional[StopEarly]:
    """scheduler.early_stop, with the partial measurement the ledger keeps for a stopped trial. A trial that has
    logged all its `measure_iters` is about to report its result (peak memory included): it runs to the end."""
    if len(step_times_s) >= measure_iters:
        return None
    why = scheduler.early_stop(step_times_s, tokens_per_step, best_tokens_per_s, noise_tolerance=noise_tolerance,
                               min_measured_iters=min_measured_iters)
    if why is None:
        return None
    times = sorted(step_times_s)
    n = len(times)
    median_s = times[n // 2] if n % 2 else 0.5 * (times[n // 2 - 1] + times[n // 2])
    mean_s = sum(times) / n
    std_s = math.sqrt(sum((t - mean_s) ** 2 for t in times) / (n - 1)) if n > 1 else 0.0
    return StopEarly(why, {"step_time_s": median_s, "tokens_per_s": tokens_per_step / median_s,
                           "step_time_std_s": std_s, "n_measured": n})


def comparable_best(best_tokens_per_s: float, best_gpus: int, trial_gpus: int, objective: Objective | str) -> float:
    """The best trial's throughput in the running trial's terms: per GPU objectives compare per GPU."""
    return Objective(objective).comparable(best_tokens_per_s, best_gpus, trial_gpus)
