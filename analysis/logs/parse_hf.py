"""Parse the Hugging Face Trainer's end-of-training metrics (also when it runs DeepSpeed or accelerate).

The Trainer prints no per-step time; at the end of `train()` it logs whole-run speed metrics, in one of these
shapes (transformers trainer.py `speed_metrics`, examples' `trainer.log_metrics`):
    {'train_runtime': 1891.9246, 'train_samples_per_second': 5.816, 'train_steps_per_second': 0.365, ...}
    {'train_runtime': '101.6', 'train_samples_per_second': '3.544', 'train_steps_per_second': '0.788', ...}
    TrainOutput(global_step=700, training_loss=0.18, metrics={'train_runtime': 20297.6998, ...})
    ***** train metrics *****
      train_runtime            = 0:31:31.92
      train_samples_per_second =      5.816
The step time is train_runtime / steps when the log says how many steps ran (TrainOutput's global_step, or the
header's `Total optimization steps = N`), else 1 / train_steps_per_second (rounded by the Trainer to 3 decimals).
Both include warm-up: this is a whole-run mean, not a steady state. Nothing here raises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from analysis.logs.parse_megatron import number

# key, then ': ' / "': '" / ' = ', then the value (a number, or h:mm:ss.ss for the log_metrics runtime)
_METRIC = re.compile(r"\b(train_runtime|train_samples_per_second|train_steps_per_second|train_loss)['\"]?"
                     r"\s{0,30}[:=]\s{0,30}['\"]?([\d:.eE+-]{1,30})")
_STEPS = re.compile(r"(?:TrainOutput\(global_step=|Total optimization steps = )([\d,]{1,15})")


@dataclass(frozen=True)
class FinalMetrics:
    """Whole-run figures from the Trainer's last report."""

    step_time_s: float | None
    samples_per_s: float | None
    runtime_s: float | None
    steps: int | None
    loss: float | None


def _seconds(value: str) -> float | None:
    """'1891.9246' or '0:31:31.92' (log_metrics formats the runtime as h:mm:ss.ss) -> seconds."""
    if ":" not in value:
        return number(value)
    parts = value.split(":")
    if len(parts) != 3:
        return None
    values = [number(p) for p in parts]
    if any(v is None for v in values):
        return None
    hours, minutes, seconds = (v for v in values if v is not None)
    return hours * 3600 + minutes * 60 + seconds


def parse_final_metrics(text: str) -> FinalMetrics | None:
    """The last train speed report in the log; None when the log has none."""
    if "train_runtime" not in text and "train_steps_per_second" not in text:
        return None
    found: dict[str, float] = {}
    for key, value in _METRIC.findall(text):  # later reports overwrite earlier ones (a resumed run)
        parsed = _seconds(value) if key == "train_runtime" else number(value)
        if parsed is not None:
            found[key] = parsed
    if "train_runtime" not in found and "train_steps_per_second" not in found:
        return None
    steps_found = _STEPS.findall(text)
    steps = int(steps_found[-1].replace(",", "")) if steps_found and steps_found[-1].replace(",", "") else None
    runtime, per_s = found.get("train_runtime"), found.get("train_steps_per_second")
    if runtime is not None and steps:
        step_time_s = runtime / steps
    elif per_s:
        step_time_s = 1.0 / per_s
    else:
        step_time_s = None
    return FinalMetrics(step_time_s=step_time_s, samples_per_s=found.get("train_samples_per_second"),
                        runtime_s=runtime, steps=steps, loss=found.get("train_loss"))
