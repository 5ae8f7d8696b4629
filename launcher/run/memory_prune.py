"""What the calibrated memory model takes out of the queue (`calibrated_ooms`): the planned trials whose calibrated
peak memory rules them out (launcher.plan.band), never one that a measured trial shows to fit."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from typing import Optional

from launcher.core.record import TrialRecord
from launcher.core.states import MEASURED, TrialState
from launcher.plan.band import Z_90, calibrated_low_gb, memory_fit
from launcher.run.predictions import Predictions

_PLANNED = TrialState.PLANNED


def calibrated_ooms(records: Sequence[TrialRecord], predictions: Mapping[str, dict], capacity_gb: float,
                    margin: float, keep_borderline: float = 0.0) -> list[tuple[str, str]]:
    """Planned trials the calibrated memory model rules out (launcher.plan.band: the lower end of the calibrated
    peak's 90 % interval over the device's memory, and not within plan.keep_borderline), with the reason. Never one
    that a measured trial predicted to need at least as much memory shows to fit (the model errs, not the device)."""
    import numpy as np

    fitted = [predictions[r.config_hash]["peak_mem_gb"] for r in records
              if r.state in MEASURED and r.config_hash in predictions]
    largest_fitted = max(fitted, default=0.0)
    # The search's Predictions: a peak under the margin fits (band.memory_fit's first test, the same product) and
    # one a measured trial covers is kept, read from the column without making the trial's dict.
    rows = predictions.rows() if isinstance(predictions, Predictions) else {}
    # a few rows read from the arrays (.item: the floats the lists of columns() hold), not 50k made into lists
    peaks, mem_sds = predictions.arrays()[3:] if isinstance(predictions, Predictions) else (np.zeros(0), np.zeros(0))
    fits_gb = margin * capacity_gb
    out = []
    for r, i in _may_not_fit(records, rows, predictions, max(fits_gb, largest_fitted), capacity_gb,
                             (margin + keep_borderline) * capacity_gb):
        if i is not None:
            peak = peaks.item(i)
            low = calibrated_low_gb(peak, mem_sds.item(i))
        elif (p := predictions.get(r.config_hash)) is not None:
            peak = p["peak_mem_gb"]
            low = calibrated_low_gb(peak, p.get("mem_sd", 0.0))
        else:
            continue
        if memory_fit(peak, low, capacity_gb, margin, keep_borderline).kept or peak <= largest_fitted:
            continue
        p = predictions[r.config_hash]
        out.append((r.config_hash, f"calibrated prediction {peak:.3g} GB (90 % interval from {low:.3g} GB) > "
                                   f"{capacity_gb:g} GB (a-priori {r.predicted.get('peak_mem_gb', 0):.3g} GB; "
                                   f"fitted on {p['n_fit']} measured trials)"))
    return out


def _may_not_fit(records: Sequence[TrialRecord], rows: Mapping[str, int], predictions: Mapping[str, dict],
                 fits_gb: float, capacity_gb: float, borderline_gb: float) -> list[tuple[TrialRecord, Optional[int]]]:
    """The planned records, in order, with their row in the columns (None: not there), less the rows the memory
    rule keeps for sure: a column peak at most `fits_gb` or `borderline_gb` (the same products as band.memory_fit's,
    compared as it does), or an interval's lower end clearly under the capacity (numpy's exp may differ from math's
    in the last bit: a lower end within 1e-9 of the capacity is left to the rule itself). numpy on the planned rows:
    the rule is asked of every planned trial at every refit; what is left is judged trial by trial as before."""
    import numpy as np

    planned = [r for r in records if r.state is _PLANNED]
    at = np.fromiter(map(rows.get, [r.config_hash for r in planned], itertools.repeat(-1)), dtype=int,
                     count=len(planned))
    peak_all, sd_all = (predictions.arrays()[3], predictions.arrays()[4]) if isinstance(predictions, Predictions) \
        else (np.zeros(0), np.zeros(0))
    if not len(at) or not len(peak_all):
        return [(r, None if i < 0 else i) for r, i in zip(planned, at.tolist())]
    row = np.maximum(at, 0)
    peak, sd = peak_all[row], sd_all[row]
    with np.errstate(invalid="ignore", over="ignore"):
        low = peak * np.exp(-Z_90 * np.maximum(sd, 0.0))
        kept = (peak <= fits_gb) | (peak <= borderline_gb) | (low <= capacity_gb * (1.0 - 1e-9))
    left = np.flatnonzero((at < 0) | ~kept).tolist()
    where = at.tolist()
    return [(planned[j], None if where[j] < 0 else where[j]) for j in left]
