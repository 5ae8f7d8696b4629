"""Read tf_cnn_benchmarks' step table: TensorFlow's reference CNN benchmark (tensorflow/benchmarks,
scripts/tf_cnn_benchmarks/benchmark_cnn.py), still the usual throughput check of a GPU node and of Horovod set-ups.

benchmark_one_step logs every --display_every steps
    log_fn('%i\\t%s\\t%.*f' % (step + 1, get_perf_timing_str(...), 3, lossval))
i.e. "10\\timages/sec: 139.6 +/- 0.1 (jitter = 0.3)\\t8.137" (tabs may reach a paste as spaces), under a header
"Step\\tImg/sec\\ttotal_loss". get_perf_timing's speed_mean is batch_size / mean(step_train_times) over the steps so
far (warm-up steps excluded), batch_size the global batch (per device x devices): so global batch / images per second
is the mean step time up to that record. The global batch is print_info's "Batch size:  256 global", else the command
line's --batch_size (per device) times --num_gpus (default 1). Without either, the records are progress only: no
step time is made up. Nothing here raises.
"""

from __future__ import annotations

import re

from analysis.logs.parse_megatron import Iteration, note

MARKER = "images/sec: "
_ROW = re.compile(r"(?m)^[ \t]{0,8}(?P<step>\d{1,9})[ \t]{1,12}images/sec: (?P<rate>\d{1,9}(?:\.\d{1,4})?) \+/- "
                  r"[\w.]{1,12} \(jitter = [\w.]{1,12}\)"
                  r"(?:[ \t]{1,12}(?P<loss>[-+]?(?:\d{1,12}(?:\.\d{1,12})?|nan|inf)))?")
_GLOBAL_BATCH = re.compile(r"(?m)^[ \t]{0,8}Batch size:[ \t]{1,8}(?P<n>\d{1,9})[ \t]{1,4}global")
_FLAG = r"--{name}[= ](?P<n>\d{{1,9}})\b"


def _flag(text: str, name: str) -> int | None:
    m = re.search(_FLAG.format(name=name), text)
    return int(m.group("n")) if m is not None and int(m.group("n")) > 0 else None


def _global_batch(text: str) -> int | None:
    """print_info's global batch, else --batch_size x --num_gpus of the logged command line; None without either."""
    if (m := _GLOBAL_BATCH.search(text)) is not None and int(m.group("n")) > 0:
        return int(m.group("n"))
    per_device = _flag(text, "batch_size")
    return per_device * (_flag(text, "num_gpus") or 1) if per_device else None


def parse_tf_cnn(text: str, *, notes: list[str] | None = None) -> list[Iteration]:
    """One Iteration per step-table row (module docstring), numbered by its step; [] without rows or a batch."""
    if MARKER not in text:
        return []
    rows = [m for m in _ROW.finditer(text) if float(m.group("rate")) > 0]
    if len(rows) < 2:
        return []
    batch = _global_batch(text)
    if batch is None:
        note(notes, f"tf_cnn_benchmarks: {len(rows)} step rows but no batch size in the log: images/sec only")
        return []
    by_step: dict[int, Iteration] = {}
    for m in rows:
        loss = float(m.group("loss")) if m.group("loss") else None
        step = int(m.group("step"))
        by_step.setdefault(step, Iteration(iteration=step, step_time_s=batch / float(m.group("rate")), loss=loss,
                                           samples_per_s=float(m.group("rate")), global_batch=batch))
    return [by_step[k] for k in sorted(by_step)]
