"""The residual model's prior sds per layout dimension, learned across measured sweeps (issue 16, search12).

launcher.plan.residuals gives every layout dimension the same prior sd for the effect of one of its values (0.15,
log). How far the estimator is off per dimension is not the same for tp, pp, dp, mbs, vpp, zero, recompute, ...:
this module fits one prior sd per dimension, the offset sd (the sweep's level) and a noise sd (what is particular
to one configuration: interactions the additive model cannot express) by maximising the summed log marginal
likelihood of the a-priori log errors (log measured / a-priori step time) of many measured sweeps, each sweep its
own draw of the offset and of the effects (launcher.plan.residuals.log_likelihood, the same marginal the
within-sweep empirical Bayes maximises).

Out of sample: `leave_one_group_out` fits, for every source group, on the other groups only; the replay benchmark
replays a group's sweeps with those sds (launcher.replay_bench.with_prior_sds), so its figure stays out of sample.

`python -m launcher.fit_prior_sds --write` rewrites launcher/plan/prior_sds.json from tests/data/replay/*.csv:

    {"generated_by": ..., "definition": ..., "sweeps": {group: [sweep names]},
     "all": FIT, "leave_one_group_out": {group: FIT fitted without that group}}
    and "one_group": {group: FIT on that group alone}
    FIT = {"offset_sd": s, "noise_sd": s, "value_sds": {dimension: s}, "log_likelihood": ll, "n_sweeps": n,
           "n_trials": n}

A dimension that no fitted sweep varies is not in value_sds: it keeps residuals.VALUE_SD.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

from launcher.core import strict_json
from launcher.plan.residuals import DIMENSIONS, OFFSET_SD, VALUE_SD, ResidualModel, log_likelihood

if TYPE_CHECKING:
    import numpy as np

PRIOR_SDS_FILE = Path(__file__).resolve().parent / "prior_sds.json"
SD_BOUNDS = (0.01, 3.0)
"""Every fitted sd stays within these (log): below 1 % a dimension would be declared exact on a few sweeps' say."""
BALANCE = False
"""fit: every trial weighs the same (the summed marginal likelihood: each sweep an independent draw); True: every
source group weighs the same (group_weights), which search12 also tried (docs/search.md)."""
GENERATED_BY = "python -m launcher.fit_prior_sds --write"


@dataclass(frozen=True)
class ResidualSet:
    """One measured sweep's a-priori log errors: dims[i] (a layout's values, residuals.DIMENSIONS) measured
    log_errors[i] = log(measured / a-priori step time)."""

    group: str
    name: str
    dims: tuple[Mapping[str, Any], ...]
    log_errors: tuple[float, ...]


@dataclass(frozen=True)
class PriorSds:
    offset_sd: float
    noise_sd: float
    value_sds: dict[str, float] = field(default_factory=dict)
    """dimension -> prior sd of one of its values' effects; a dimension absent keeps residuals.VALUE_SD."""
    log_likelihood: float = 0.0
    n_sweeps: int = 0
    n_trials: int = 0

    def to_json(self) -> dict[str, Any]:
        return {"offset_sd": self.offset_sd, "noise_sd": self.noise_sd, "value_sds": dict(self.value_sds),
                "log_likelihood": self.log_likelihood, "n_sweeps": self.n_sweeps, "n_trials": self.n_trials}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PriorSds:
        return cls(float(data["offset_sd"]), float(data["noise_sd"]),
                   {str(k): float(v) for k, v in data["value_sds"].items()}, float(data.get("log_likelihood", 0.0)),
                   int(data.get("n_sweeps", 0)), int(data.get("n_trials", 0)))

    def model(self, base: Optional[ResidualModel] = None, shape_only: bool = False) -> ResidualModel:
        """`base` (default: the a-priori ResidualModel) with these offset and per-dimension sds. The noise sd stays
        the base's: the within-sweep model reads noise as repeat noise, and its empirical Bayes raises it where a
        sweep shows more (the fitted noise_sd here also holds the interactions across sweeps). shape_only: the
        per-dimension sds scaled so that their root mean square is the base's value sd, the offset sd the base's
        (only which dimensions miss more than others is taken from the fit, not how much the corpus misses)."""
        from dataclasses import replace

        base = base or ResidualModel()
        if not shape_only:
            return replace(base, offset_sd=self.offset_sd, dimension_sds=tuple(sorted(self.value_sds.items())))
        rms = math.sqrt(sum(s * s for s in self.value_sds.values()) / len(self.value_sds)) if self.value_sds else 1.0
        return replace(base, dimension_sds=tuple(sorted((d, s * VALUE_SD / rms) for d, s in self.value_sds.items())))


@dataclass(frozen=True)
class _Prepared:
    """One sweep's sufficient statistics for the marginal likelihood: X'X, X'r, r'r, n, and each column's
    parameter index (0: offset, then 1 + the dimension's place among the fitted ones)."""

    gram: np.ndarray
    xr: np.ndarray
    rr: float
    n: int
    parameter: np.ndarray
    weight: float = 1.0


def _column_dimension(name: str) -> str:
    return "offset" if name == "offset" else name.split("=", 1)[0]


def varied_dimensions(sets: Sequence[ResidualSet]) -> tuple[str, ...]:
    """The dimensions (residuals.DIMENSIONS order) that at least one sweep of `sets` varies among its measured
    trials: the only ones the likelihood says anything about."""
    seen = set()
    for s in sets:
        for d in DIMENSIONS:
            if len({str(x.get(d)) for x in s.dims}) > 1:
                seen.add(d)
    return tuple(d for d in DIMENSIONS if d in seen)


def group_weights(sets: Sequence[ResidualSet]) -> dict[str, float]:
    """group -> the weight of each of its sweeps' log likelihood so that every group weighs the same in total, as
    many measured trials as it has on average (the benchmark's headline weighs groups alike: 26 Ultra-Scale sweeps
    of 1739 trials, 7x off at the root mean square, would otherwise decide every sd)."""
    trials: dict[str, int] = {}
    for s in sets:
        trials[s.group] = trials.get(s.group, 0) + len(s.log_errors)
    mean = sum(trials.values()) / len(trials) if trials else 0.0
    return {g: mean / n for g, n in trials.items() if n}


def _prepare(sets: Sequence[ResidualSet], dimensions: Sequence[str], balance: bool) -> list[_Prepared]:
    import numpy as np

    place = {d: 1 + i for i, d in enumerate(dimensions)}
    weights = group_weights(sets) if balance else {}
    out = []
    for s in sets:
        if not s.log_errors:
            continue
        x, names = ResidualModel().design(list(s.dims))
        r = np.asarray(s.log_errors, dtype=float)
        parameter = np.array([0 if n == "offset" else place[_column_dimension(n)] for n in names])
        out.append(_Prepared(x.T @ x, x.T @ r, float(r @ r), len(r), parameter, weights.get(s.group, 1.0)))
    return out


def total_log_likelihood(prepared: Sequence[_Prepared], column_sds: np.ndarray, noise_sd: float) -> float:
    """Summed (weighted) log marginal likelihood of the sweeps: column_sds[0] the offset sd, column_sds[1 + i] the
    i-th fitted dimension's value sd."""
    return sum(p.weight * log_likelihood(p.gram, p.xr, p.rr, p.n, column_sds[p.parameter] ** 2, noise_sd ** 2)
               for p in prepared)


def fit(sets: Sequence[ResidualSet], dimensions: Optional[Sequence[str]] = None, balance: bool = BALANCE) -> PriorSds:
    """The offset sd, one value sd per dimension and the noise sd that make the sweeps' log errors likeliest
    (maximum of the summed log marginal likelihood, L-BFGS-B on the log sds within SD_BOUNDS; started from the
    a-priori OFFSET_SD, VALUE_SD and a noise of 0.1). `dimensions`: those to fit (default: every dimension some
    sweep varies); balance: every source group weighs the same (group_weights), else every trial."""
    import numpy as np
    from scipy.optimize import minimize

    dims = tuple(dimensions) if dimensions is not None else varied_dimensions(sets)
    prepared = _prepare(sets, dims, balance)
    if not prepared:
        raise ValueError("no measured trial to fit the prior sds on")

    def negative(theta: np.ndarray) -> float:
        sds = np.exp(theta)
        return -total_log_likelihood(prepared, sds[:-1], float(sds[-1]))

    start = np.log([OFFSET_SD, *([VALUE_SD] * len(dims)), 0.1])
    bounds = [tuple(math.log(b) for b in SD_BOUNDS)] * len(start)
    best = minimize(negative, start, method="L-BFGS-B", bounds=bounds)
    sds = np.exp(best.x)
    return PriorSds(float(sds[0]), float(sds[-1]), {d: float(s) for d, s in zip(dims, sds[1:-1])},
                    -float(best.fun), len(prepared), sum(p.n for p in prepared))


def leave_one_group_out(sets: Sequence[ResidualSet], balance: bool = BALANCE) -> dict[str, PriorSds]:
    """group -> the fit on every other group's sweeps (what a replay of that group may use: out of sample)."""
    groups = sorted({s.group for s in sets})
    return {g: fit([s for s in sets if s.group != g], balance=balance) for g in groups}


# ------------------------------------------------------------------------------------------------ the shipped table

@functools.lru_cache(maxsize=4)
def load(path: Path = PRIOR_SDS_FILE) -> dict[str, Any]:
    """The shipped fits ({} when the file is missing: the flat a-priori sds stay)."""
    return strict_json.read_table(path)


def shipped(group: Optional[str] = None, path: Path = PRIOR_SDS_FILE) -> Optional[PriorSds]:
    """The fit on every group (group None), or the one that left `group` out (None: the file has none)."""
    data = load(path)
    block = data.get("all") if group is None else data.get("leave_one_group_out", {}).get(group)
    return PriorSds.from_json(block) if block else None


def summary(data: Mapping[str, Any]) -> str:
    """The fits side by side: on all groups and each group left out, then each group alone (which dimensions the
    estimator misses most, source by source); one row per sd."""
    left = {"all": PriorSds.from_json(data["all"])}
    left.update({f"w/o {g}": PriorSds.from_json(f) for g, f in data["leave_one_group_out"].items()})
    alone = {f"only {g}": PriorSds.from_json(f) for g, f in data.get("one_group", {}).items()}
    return "\n\n".join(_table(fits) for fits in (left, alone) if fits)


def _table(fits: Mapping[str, PriorSds]) -> str:
    dims = [d for d in DIMENSIONS if any(d in f.value_sds for f in fits.values())]
    heads = [k.replace("published/", "") for k in fits]
    lines = [f"{'sd (log)':<18}" + "".join(f"{h[:15]:>16}" for h in heads)]
    rows: list[tuple[str, list[Optional[float]]]] = [("offset", [f.offset_sd for f in fits.values()]),
                                                     ("noise", [f.noise_sd for f in fits.values()])]
    rows += [(d, [f.value_sds.get(d) for f in fits.values()]) for d in dims]
    for label, cells in rows:
        lines.append(f"{label:<18}" + "".join(f"{'-':>16}" if c is None else f"{c:>16.3f}" for c in cells))
    lines.append(f"{'sweeps / trials':<18}" + "".join(f"{f'{f.n_sweeps} / {f.n_trials}':>16}" for f in fits.values()))
    return "\n".join(lines)


def build(sets: Sequence[ResidualSet], balance: bool = BALANCE) -> dict[str, Any]:
    sweeps: dict[str, list[str]] = {}
    for s in sets:
        sweeps.setdefault(s.group, []).append(s.name)
    return {"generated_by": GENERATED_BY,
            "definition": "maximum summed log marginal likelihood of log(measured / a-priori step time) under "
                          "launcher.plan.residuals' additive model, one draw of the offset and effects per sweep; "
                          "leave_one_group_out[g] is fitted without group g's sweeps",
            "balance": balance, "sweeps": sweeps, "all": fit(sets, balance=balance).to_json(),
            "leave_one_group_out": {g: f.to_json() for g, f in leave_one_group_out(sets, balance).items()},
            "one_group": {g: fit([s for s in sets if s.group == g]).to_json() for g in sorted(sweeps)}}
