"""A step's time from a timer breakdown line: `time (ms) | forward: 1370.73 | backward: 5053.64 | ... | step: 11437.30`.

Two printers share the line. DeepSpeed's SynchronizedWallClockTimer.log (deepspeedai/DeepSpeed
deepspeed/utils/timer.py: `string = "time (ms)"`, then `" | {}: {:.2f}".format(name, elapsed_time)` per timer) prints
the engine's global timers at each gradient-accumulation boundary when wall_clock_breakdown is on (runtime/engine.py
DeepSpeedEngine.step: `self.timers.log(self.engine_timers.global_timers)` under `is_gradient_accumulation_boundary()`),
named `fwd | bwd | bwd_inner | bwd_allreduce | step` (utils/timer.py FORWARD_GLOBAL_TIMER ... STEP_GLOBAL_TIMER) and
in older releases `forward | backward | backward_inner | backward_allreduce | step`. The global timers are reset only
when logged, so each sums one optimizer step's micro-batches; bwd_inner and bwd_allreduce run inside bwd
(engine.backward starts the bwd timers before and stops them after both). Megatron-LM's Timers.log (the 2019-2020
megatron/utils.py that DeepSpeedExamples' Megatron-LM GPT-2 copies: `string = 'time (ms)'`, `' | {}: {:.2f}'`,
divided by `normalizer=args.log_interval`) prints `forward | backward | optimizer | batch generator | data loader`
(`forward | backward | allreduce | optimizer | ...` without DeepSpeed), the batch generator and data loader timed
inside forward_step and the allreduce inside backward_step. In both, forward + backward + the update (`step` /
`optimizer`) is the step's time, a little short of the wall clock between steps (the data loader and the caller's own
code between engine calls are outside them).

Not the micro-step line (`fwd_microstep | bwd_microstep | ... | step_microstep`, logged at every micro-batch): with
gradient accumulation it is a fraction of a step, and the log does not say which. Not a line without all three phases
(`time (ms) | optimizer_step: 22850.66` is one phase; Megatron-LM's later `forward-compute | backward-compute` timers
are per pipeline micro-batch, and those logs state `elapsed time per iteration`). Used only where nothing else in the
log times a step (parse_generic._with_summary).
"""

from __future__ import annotations

import math
import re

from analysis.logs.logtext import last_line_starts

MARKER = "time (ms)"
SOURCE = "timer breakdown (forward + backward + step)"
MAX_LINES = 2000  # the last lines holding the marker: the steady state is at the end, and a hostile log is bounded
MAX_LINE_CHARS = 2000

# the phases that partition a step, by the names each printer gives them
_FORWARD = frozenset({"forward", "fwd"})
_BACKWARD = frozenset({"backward", "bwd"})
_UPDATE = frozenset({"step", "optimizer"})
_FIELD = re.compile(r"\|\s{0,2}(?P<name>[A-Za-z][\w -]{0,40}?):\s{0,2}(?P<ms>\d{1,12}(?:\.\d{1,12})?)(?=\s|\||$)")


def phases_ms(line: str) -> dict[str, float]:
    """The `| name: value` fields after `time (ms)` on one line, by name (the first of a name counts)."""
    at = line.find(MARKER)
    if at < 0:
        return {}
    out: dict[str, float] = {}
    for m in _FIELD.finditer(line, at + len(MARKER)):
        out.setdefault(m.group("name").strip(), float(m.group("ms")))
    return out


def step_ms(phases: dict[str, float]) -> float | None:
    """forward + backward + update, when the line names exactly one of each and their sum is positive."""
    total = 0.0
    for names in (_FORWARD, _BACKWARD, _UPDATE):
        found = [phases[n] for n in names if n in phases]
        if len(found) != 1:
            return None
        total += found[0]
    return total if total > 0 and math.isfinite(total) else None


def breakdown_step_times(text: str) -> list[tuple[int, float]]:
    """[(position, seconds)] of each timer breakdown line that holds a whole step's phases, in log order."""
    if MARKER not in text:
        return []
    out: list[tuple[int, float]] = []
    for start in sorted(last_line_starts(text, (MARKER,), MAX_LINES)):
        end = text.find("\n", start, start + MAX_LINE_CHARS)
        total_ms = step_ms(phases_ms(text[start: start + MAX_LINE_CHARS if end < 0 else end]))
        if total_ms is not None:
            out.append((start, total_ms / 1000.0))
    return out
