"""What a running job's log says so far, for the sweep loop (handed to it as a launcher.run.hooks.LogProgress):
whether a new piece of log holds an iteration (hang detection) and the measured step times so far (early stop)."""

from __future__ import annotations

from analysis.logs.parse_megatron import has_iteration
from analysis.logs.read_log import read_log
from analysis.logs.steady_state import MEASURE_PHASE, detect_warmup, usable


def running_step_times(log_text: str, warmup_iters: int) -> list[float]:
    """The measured step times a running trial has logged so far: the workload's 'measure' steps, or for other
    logs the steps after the configured warm-up and any detected one (analysis.logs.steady_state's rules)."""
    steps = sorted((it for it in read_log(log_text).iterations if usable(it.step_time_s)), key=lambda it: it.iteration)
    if any(it.phase for it in steps):
        return [it.step_time_s for it in steps if it.phase == MEASURE_PHASE]
    times = [it.step_time_s for it in steps[warmup_iters:]]
    return times[detect_warmup(times):]


class LogProgressReader:
    """launcher.run.hooks.LogProgress, from this package's readers."""

    def has_iteration(self, text: str) -> bool:
        return has_iteration(text)

    def step_times(self, log_text: str, warmup_iters: int) -> list[float]:
        return running_step_times(log_text, warmup_iters)


LOG_PROGRESS = LogProgressReader()
