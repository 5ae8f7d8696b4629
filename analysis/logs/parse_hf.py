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
Both include warm-up: this is a whole-run mean, not a steady state.
Where no other reader finds a step record, the Trainer's logged dicts are the records (trainer_records): the
log_history of a printed trainer_state.json (one key a line), and a loop's own dicts with a step counter and a
learning rate; they show progress and the loss, never a step time. Nothing here raises.
"""

from __future__ import annotations

import math
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


# ---- the Trainer's logged dicts as step records, where the generic reader finds none (judge39a, issue 17)

@dataclass(frozen=True)
class TrainerRecords:
    """Logged dicts read as step records: how many, where the last starts, their training losses (NaN kept)."""

    n_records: int
    last_pos: int
    losses: tuple[float, ...]


# 1. The pretty-printed log_history. transformers' TrainerState.save_to_json (huggingface/transformers
# src/transformers/trainer_callback.py) writes trainer_state.json as json.dumps(dataclasses.asdict(self), indent=2,
# sort_keys=True): its "log_history": [ holds one dict per Trainer.log call, "{" on a line of its own at 4 blanks,
# then one `"key": value` a line at 6 blanks ("epoch", "eval_loss" / "learning_rate", "loss", ..., "step": 500),
# then "}" / "},". A log that prints or quotes it (oos-batch34's TRL DPO run: two evaluation entries at steps 500 and
# 1000) holds one step record per entry that has an integer "step" and another number. An entry's training loss is
# its "loss" (an evaluation's is "eval_loss", the run summary's "train_loss": neither is a step's loss).
_LOG_HISTORY = '"log_history": ['
_HISTORY_OPEN = re.compile(r"[ \t]{0,16}\{[ \t]*")
_HISTORY_CLOSE = re.compile(r"[ \t]{0,16}\},?[ \t]*")
_HISTORY_ITEM = re.compile(r'[ \t]{0,24}"(?P<key>[^"\n]{1,120})":[ \t]{0,4}(?P<value>[^\n]{1,120}?),?[ \t]*')
_HISTORY_MAX_LINES = 200_000  # a log_history of 20,000 entries; a hostile log's tail past that is not read


def _history_value(raw: str) -> float | None:
    if raw in ("NaN", "Infinity", "-Infinity"):  # json.dumps writes non-finite floats so
        return float(raw.replace("Infinity", "inf"))
    return number(raw) if raw[:1] in "-0123456789" else None


def _log_history_records(text: str) -> TrainerRecords | None:
    start = text.find(_LOG_HISTORY)
    if start < 0:
        return None
    n, last, losses = 0, -1, []
    entry: dict[str, float] | None = None
    entry_pos = pos = text.find("\n", start) + 1
    for _, line in zip(range(_HISTORY_MAX_LINES), text[pos:].split("\n")):
        if not line.strip():
            pass  # json.dumps writes no blank line: one inside an entry is the capture's (a table row between rows)
        elif _HISTORY_OPEN.fullmatch(line):
            entry, entry_pos = {}, pos
        elif entry is not None and _HISTORY_CLOSE.fullmatch(line):
            step = entry.pop("step", None)
            if step is not None and math.isfinite(step) and step == int(step) >= 0 and len(entry) > ("epoch" in entry):
                n, last = n + 1, entry_pos
                if "loss" in entry:
                    losses.append(entry["loss"])
            entry = None
        elif entry is not None:
            item = _HISTORY_ITEM.fullmatch(line)
            if item is None or item["value"][:1] in "{[":
                entry = None  # not a flat entry of numbers and strings: no record
            elif (value := _history_value(item["value"])) is not None:
                entry[item["key"]] = value
        pos += len(line) + 1
    return TrainerRecords(n, last, tuple(losses)) if n else None


# 2. A trainer's own loop printing the Trainer's logs dict with its losses renamed. The Trainer logs a training step
# as {'loss': ..., 'learning_rate': ..., 'epoch': ...} (trainer.py _maybe_log_save_evaluate: logs["learning_rate"] is
# set for training logs only, never in evaluate()'s metrics); a subclass that rewrites train() prints its own dict
# the same way: OntoProtein's OntoProteinTrainer (zjunlp/OntoProtein src/trainer.py, train(): all_loss['global_step'] =
# step; all_loss['learning_rate'] = self.get_learning_rate(); print(all_loss)) prints {'mlm': 1.32, 'protein_go_ke':
# 0.67, 'go_go_ke': 1.96, 'global_step': 180, 'learning_rate': [...]} (one loss per objective, a learning rate per
# parameter group). A whole-line dict with a step counter (`global_step` / `step`), a `learning_rate` and another
# number is such a record, read only from two or more whose step advances (a checkpoint's or config's single dict is
# not a run). Its loss is a key that says "loss" (the objectives' own names, "mlm", are not read as losses).
_DICT_MARKERS = ("'learning_rate':", '"learning_rate":')
_DICT_STEP = re.compile(r"""['"](?:global_step|step)['"]:\s{0,3}(\d{1,12})\s{0,3}[,}]""")
_DICT_ITEM = re.compile(r"""['"](?P<key>[\w/.-]{1,80})['"]:\s{0,3}(?P<value>[-+]?(?:[\d.]{1,40}(?:[eE][-+]?\d{1,3})?"""
                        r"""|nan|inf)|\[)""")
_DICT_MAX_LINES = 6000  # lines read per marker, from the end (as parse_generic's MAX_TAIL_LINES)
_DICT_MAX_CHARS = 4000


def _lr_dict_records(text: str) -> TrainerRecords | None:
    if "learning_rate" not in text:
        return None
    found: list[tuple[int, int, float | None]] = []  # (position, step, loss)
    for marker in _DICT_MARKERS:
        pos, visited = text.rfind(marker), 0
        while pos >= 0 and visited < _DICT_MAX_LINES:  # the log's last lines that hold the marker
            visited += 1
            start = text.rfind("\n", 0, pos) + 1
            end = text.find("\n", pos)
            line = text[start: len(text) if end < 0 else end].strip()
            pos = text.rfind(marker, 0, start) if start > 0 else -1
            if not (line.startswith("{") and line.endswith("}")) or len(line) > _DICT_MAX_CHARS:
                continue
            step = _DICT_STEP.search(line)
            items = {m["key"]: m["value"] for m in _DICT_ITEM.finditer(line)}
            others = [k for k, v in items.items() if v != "[" and k not in ("global_step", "step", "learning_rate",
                                                                             "epoch")]
            if step is None or not others:
                continue
            loss_key = next((k for k in others if "loss" in k.lower() and not k.lower().startswith(
                ("eval", "val", "test")) and "scale" not in k.lower()), None)
            found.append((start, int(step.group(1)), number(items[loss_key]) if loss_key else None))
    found.sort()
    if len(found) < 2 or found[-1][1] <= found[0][1]:
        return None
    return TrainerRecords(len(found), found[-1][0], tuple(loss for _, _, loss in found if loss is not None))


def trainer_records(text: str) -> TrainerRecords | None:
    """The Trainer's logged dicts as step records (the pretty-printed log_history, or dicts with a step counter and
    a learning rate); None when the log has neither."""
    return _log_history_records(text) or _lr_dict_records(text)
