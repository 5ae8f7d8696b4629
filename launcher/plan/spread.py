"""How far a prediction may be off: the out-of-sample error spread of the estimator, for prediction intervals.

launcher/plan/spread.json is written by `python -m launcher.plan.fit --write` from the leave-one-source-out residuals
on the published corpus (tests/data/published): every row is predicted by constants fitted without its source, so
the spread is what a new kind of run should expect, not what the fit achieves on its own data. Format:

    {"generated_by": ..., "definition": "log(measured / predicted), ...", "sources": [...],
     "step_time": {"all": S, "per_stack": {"<stack>": S, ...}},
     "peak_mem":  {"all": S, "per_stack": {...}}}
    S = {"n": rows, "quantiles": {"0.05": q, "0.1": q, "0.25": q, "0.5": q, "0.75": q, "0.9": q, "0.95": q},
         "sd_robust": 1.4826 x median absolute deviation}

A quantile q of log(measured / predicted) turns a prediction x into the bound x·exp(q - q50): the 0.05 and 0.95
quantiles give a 90 % interval around the prediction. The median is taken out because the shipped constants are
fitted on the whole corpus, the stack's own rows included: a stack's leave-one-source-out median says how a model
that never saw it is off, an offset the shipped fit has already absorbed (the embedded workload's LOSO step-time
median is -10 %, yet on three H100 model shapes measured after the fit the shipped step time was off by 1-8 % either
way, and the uncentred interval missed most of them). The width is the part that carries over.
Stacks are launcher.plan.stack names; a stack with fewer than MIN_ROWS rows falls back to
"all".
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Any, Optional, TypedDict

from launcher.core import strict_json

SPREAD_FILE = Path(__file__).resolve().parent / "spread.json"
MIN_ROWS = 8
QUANTITIES = ("step_time", "peak_mem")


class SpreadSummary(TypedDict):
    """S in the format above: the spread of one quantity over some rows."""
    n: int
    quantiles: dict[str, float]
    sd_robust: float


@functools.lru_cache(maxsize=4)
def load_spread(path: Path = SPREAD_FILE) -> dict[str, Any]:
    """The spread data ({} when the file is missing: no interval can be given)."""
    return strict_json.read_table(path)


def _summary(quantity: str, stack: str = "", data: Optional[dict[str, Any]] = None) -> Optional[SpreadSummary]:
    if quantity not in QUANTITIES:
        raise ValueError(f"quantity={quantity!r}: use one of {', '.join(QUANTITIES)}")
    data = load_spread() if data is None else data
    block = data.get(quantity)
    if not block:
        return None
    own = block["per_stack"].get(stack)
    summary: SpreadSummary = own if own and own["n"] >= MIN_ROWS else block["all"]
    return summary


def basis(quantity: str, stack: str = "", data: Optional[dict[str, Any]] = None) -> Optional[tuple[str, int]]:
    """Whose residuals an interval of `stack` comes from: (the stack, or "all" when it has fewer than MIN_ROWS rows,
    the number of rows); None without data."""
    s = _summary(quantity, stack, data)
    if s is None:
        return None
    block = (load_spread() if data is None else data)[quantity]
    own = block["per_stack"].get(stack)
    return (stack if own is s else "all"), s["n"]


def interval(quantity: str, predicted: float, stack: str = "", low: float = 0.05, high: float = 0.95,
             data: Optional[dict[str, Any]] = None) -> Optional[tuple[float, float]]:
    """(lower, upper) bounds of a predicted step time or peak memory from the stored quantiles (None without data).
    `low`/`high` must be stored quantiles (0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95)."""
    s = _summary(quantity, stack, data)
    if s is None:
        return None
    q = s["quantiles"]
    centre = q.get("0.5", 0.0)
    return predicted * math.exp(q[str(low)] - centre), predicted * math.exp(q[str(high)] - centre)
