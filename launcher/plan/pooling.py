"""Several finished sweeps' calibrations pooled into one prior (plan.prior_from with a list or a folder of sweeps).

A team that sweeps on a cluster has earlier sweeps on the same setup (other models, other sizes). Most of the
a-priori miss on a setup is the setup's, not the model's (docs/search.md, search12: the source groups differ more
than the layout dimensions do), so each earlier sweep's fitted constants are a noisy measurement of the setup's.

The pool, per calibration parameter (launcher.plan.calibrate.PARAMETERS), in log-multiplier space against this
sweep's a-priori constants (`base`):

- the sweeps whose data constrained it (posterior sd under SUPPORTED_SHARE of its prior sd, as
  Calibration.supported) are a random-effects meta-analysis: each sweep's estimate x_i with its posterior sd s_i,
  the between-sweep variance tau² by DerSimonian and Laird (1986; the method-of-moments estimate from Cochran's Q),
  the pooled mean weighted by 1 / (s_i² + tau²), and the sd of a new sweep's value sqrt(1 / sum w + tau²): the
  precision-weighted constants with their spread widened by the between-sweep scatter;
- one constraining sweep: its estimate and sd (what plan.prior_from with one sweep does);
- none (a parameter no sweep's data reached, or a memory parameter, whose fit records no posterior sd): the plain
  mean of the sweeps' values with the parameter's a-priori sd (each sweep's value is its prior or a fit the
  calibration does not trust more than that).

The result goes through Prior.transferred like a single sweep's calibration (sds at least TRANSFER_SD, at most
the parameter's own prior sd). The model error is the root mean square of the sweeps' (each a sweep's own misfit).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from launcher.plan.calibrate import MEMORY_ERROR_SD, MODEL_ERROR_SD, PARAMETERS, Parameter, Prior
from launcher.plan.constants import Constants

SUPPORTED_SHARE = 0.5
"""A sweep's calibration constrained a parameter when its posterior sd is under this share of the prior sd
(launcher.plan.calibrate: Calibration.supported)."""


@dataclass(frozen=True)
class Pooled:
    """One parameter's pool: its log multiplier against the base constants, the sd of a new sweep's value, the
    between-sweep sd (DerSimonian-Laird tau) and how many sweeps' data constrained it."""

    log_multiplier: float
    sd: float
    between_sd: float
    constraining: int


def pool_estimates(values: Sequence[float], sds: Sequence[float]) -> tuple[float, float, float]:
    """Random-effects pool of estimates `values` with standard errors `sds`: (mean, sd of a new draw, tau)."""
    w = [1.0 / (s * s) for s in sds]
    total = sum(w)
    mean_fixed = sum(wi * x for wi, x in zip(w, values)) / total
    q = sum(wi * (x - mean_fixed) ** 2 for wi, x in zip(w, values))
    c = total - sum(wi * wi for wi in w) / total
    tau2 = max(0.0, (q - (len(values) - 1)) / c) if c > 0 else 0.0
    w_re = [1.0 / (s * s + tau2) for s in sds]
    mean = sum(wi * x for wi, x in zip(w_re, values)) / sum(w_re)
    return mean, math.sqrt(1.0 / sum(w_re) + tau2), math.sqrt(tau2)


def log_multiplier(p: Parameter, constants: Mapping[str, Any], base: Constants) -> float:
    """A calibration's value of parameter `p` as a log multiplier of `base`'s (its first field; the fields of one
    parameter move together)."""
    name = p.fields[0]
    ours = float(getattr(base, name))
    theirs = float(constants.get(name, ours))
    return math.log((theirs + p.offset) / (ours + p.offset)) if ours + p.offset > 0 else 0.0


def pool_parameter(p: Parameter, calibrations: Sequence[Mapping[str, Any]], base: Constants) -> Pooled:
    xs = [log_multiplier(p, c.get("constants") or {}, base) for c in calibrations]
    sds = [float((c.get("parameter_sd") or {}).get(p.name, p.prior_sd)) for c in calibrations]
    used = [(x, s) for x, s in zip(xs, sds) if 0 < s < SUPPORTED_SHARE * p.prior_sd]
    if len(used) >= 2:
        mean, sd, tau = pool_estimates([x for x, _ in used], [s for _, s in used])
        return Pooled(mean, sd, tau, len(used))
    if len(used) == 1:
        return Pooled(used[0][0], used[0][1], 0.0, 1)
    return Pooled(sum(xs) / len(xs), p.prior_sd, 0.0, 0)


def pooled(calibrations: Sequence[Mapping[str, Any]], base: Constants, source: str = "") -> tuple[Prior,
                                                                                                   dict[str, Pooled]]:
    """The prior of a sweep started from several finished sweeps' calibrations (each as calibration.json holds
    it, Calibration.to_json), and every parameter's pool (what the console and the tests show)."""
    if not calibrations:
        raise ValueError("pooled: no calibration to pool")
    pools = {p.name: pool_parameter(p, calibrations, base) for p in PARAMETERS}
    known = {f.name for f in fields(Constants)}
    values: dict[str, float] = {}
    for p in PARAMETERS:
        for name in p.fields:
            if name in known:
                values[name] = max(0.0, (float(getattr(base, name)) + p.offset) *
                                   math.exp(pools[p.name].log_multiplier) - p.offset)
    residual = _rms([float(c.get("residual_sd", MODEL_ERROR_SD)) for c in calibrations])
    memory = _rms([float(c.get("memory_residual_sd", MEMORY_ERROR_SD)) for c in calibrations])
    prior = Prior.transferred(base.with_values(**values), {n: q.sd for n, q in pools.items()}, residual, memory,
                              source)
    return prior, pools


def _rms(xs: Sequence[float]) -> float:
    return math.sqrt(sum(x * x for x in xs) / len(xs))


def pooled_effects(effects: Sequence[Mapping[str, Sequence[float]]]) -> dict[str, float]:
    """The residual model's prior means from finished sweeps' effects (each 'tp=2' -> (posterior mean, sd, prior
    sd), as ResidualModel.effects gives them): per column, the random-effects mean (pool_estimates) of the sweeps
    whose data moved it (posterior sd under 0.9 x its prior sd: a column none of a sweep's measured trials had
    keeps its prior there and says nothing)."""
    names = sorted({n for e in effects for n in e})
    out = {}
    for name in names:
        used = [(float(e[name][0]), float(e[name][1])) for e in effects if name in e and
                0 < float(e[name][1]) < 0.9 * float(e[name][2])]
        if used:
            out[name] = pool_estimates([m for m, _ in used], [s for _, s in used])[0]
    return out


EFFECT_SD_FLOOR = 0.02
"""pooled_effect_priors: no effect's prior sd below this (log units, about the 1-2 % repeat noise of a GPU
measurement): dozens of alike sweeps would otherwise pin an effect the new sweep could not move."""


def pooled_effect_priors(effects: Sequence[Mapping[str, Sequence[float]]]) -> dict[str, tuple[float, float]]:
    """pooled_effects with a prior sd from the scatter: per column moved by at least two sweeps, (random-effects
    mean, the sd of a new sweep's effect, sqrt(1 / sum w + tau^2), at least EFFECT_SD_FLOOR); moved by one, (its
    estimate, the larger of its posterior and prior sds: one sweep says nothing of the scatter)."""
    names = sorted({n for e in effects for n in e})
    out = {}
    for name in names:
        used = [(float(e[name][0]), float(e[name][1]), float(e[name][2])) for e in effects if name in e and
                0 < float(e[name][1]) < 0.9 * float(e[name][2])]
        if len(used) >= 2:
            mean, sd, _ = pool_estimates([m for m, _, _ in used], [s for _, s, _ in used])
            out[name] = (mean, max(sd, EFFECT_SD_FLOOR))
        elif used:
            out[name] = (used[0][0], max(used[0][1], used[0][2]))
    return out
