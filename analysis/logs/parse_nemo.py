"""Parse NeMo 1 (PyTorch Lightning) training progress bars into iteration records.

NeMo 1's Megatron models train under Lightning, whose TQDM bar is the only per-step output; NeMo adds its own
metrics to the bar's postfix, among them `train_step_timing in s` (the step's wall time, from NeMo's timers):
    Epoch 0: : 100%|██████████| 50/50 [23:22<00:00, reduced_train_loss=0.186, global_step=49.00,
        consumed_samples=51200.0, train_step_timing in s=24.00]
    Epoch 0:  12%|█▏ | 120/1000 [01:23<10:12, 1.44it/s, loss=2.1, v_num=0, train_step_timing in s=0.69]
    Epoch 0:   1%|   | 795/77225 [9:07:58<878:01:48, 41.36s/it, loss=3.1, v_num=, reduced_train_loss=3.090, ...]
The bar redraws in place (carriage returns), so one step appears many times; the first drawing of each step wins.
Without `train_step_timing` (older NeMo, or the metric not logged) the bar's own rate (`41.36s/it`, `1.44it/s`,
an exponential moving average over recent steps) stands in for the step time. Validation bars
(`Validation DataLoader 0: ...`) are not training steps and are skipped: only bars that start with `Epoch N:`
count. Total: nothing here raises.
"""

from __future__ import annotations

import re

from analysis.logs.parse_megatron import IMPOSSIBLE_STEP, Iteration, note, number

_BAR_START = "Epoch "
_TIMING = "train_step_timing in s="
# One bar drawing: "Epoch 3: ...[ ... ]" (the postfix ends at the first ']'). Bounded so a hostile line cannot
# make it scan far.
_BAR = re.compile(r"Epoch (\d{1,9}):([^\[\]\n]{0,400})\[([^\[\]\n]{0,2000})\]")
_COUNTER = re.compile(r"(\d{1,12})(?:/\d{1,12}|it) *$")  # "120/1000 " or "1it " before the '['
_RATE = re.compile(r"(?:^|, *)([\d.]{1,20})(s/it|it/s)(?:,|$)")
_FIELD = re.compile(r"(?:^|, *)([A-Za-z_][\w /.]{0,60})=([^,\]]{0,40})")


def parse_progress_bars(text: str, *, source: str | None = None, notes: list[str] | None = None,
                        timing_only: bool = False) -> list[Iteration]:
    """The training steps NeMo 1's progress bars show, one per step, sorted by step. With `timing_only`, only
    drawings that carry NeMo's own `train_step_timing` count (analysis.logs.read_log reads rate-only bars with
    analysis.logs.parse_generic, which prefers the elapsed column to the lagging rate)."""
    if _BAR_START not in text or ("it]" not in text and "/it" not in text and "it/s" not in text
                                  and _TIMING not in text):
        return []
    by_step: dict[int, Iteration] = {}
    for match in _BAR.finditer(text):
        head, postfix = match.group(2), match.group(3)
        if timing_only and _TIMING not in postfix:
            continue
        it = _bar_iteration(head, postfix, source, notes)
        if it is not None and it.iteration not in by_step:
            by_step[it.iteration] = it
    return [by_step[k] for k in sorted(by_step)]


def _bar_iteration(head: str, postfix: str, source: str | None, notes: list[str] | None) -> Iteration | None:
    fields = {key.strip(): value.strip() for key, value in _FIELD.findall(postfix)}
    step_s = number(fields.get("train_step_timing in s", "")) if "train_step_timing in s" in fields else None
    if step_s is None and (rate := _RATE.search(postfix)) is not None:
        value = number(rate.group(1))
        if value is not None:
            step_s = value if rate.group(2) == "s/it" else (1.0 / value if value > 0 else 0.0)
    if step_s is None:
        return None
    step = _step_number(head, fields)
    if step is None:
        return None
    if not (step_s > 0 and step_s < float("inf")):
        note(notes, f"{source or '<log>'}: progress bar at step {step} has step time {step_s!r} s "
                    f"({IMPOSSIBLE_STEP}); dropped")
        return None
    loss = number(fields.get("reduced_train_loss", fields.get("loss", "")))
    return Iteration(iteration=step, step_time_s=step_s, loss=loss)


def _step_number(head: str, fields: dict[str, str]) -> int | None:
    """global_step (printed as a float, '49.00' or '2e+3') when present; else the bar's counter."""
    if "global_step" in fields:
        value = number(fields["global_step"])
        if value is not None and 0 <= value < 1e12:
            return int(value)
    counter = _COUNTER.search(head.split("|")[-1].strip() + " ")
    return int(counter.group(1)) if counter else None


# NeMo 1's MegatronProgressBar (NVIDIA/NeMo, a Lightning TQDMProgressBar subclass: "Override bar_format to not have
# 's/it'") draws the training bar as "{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}
# {postfix}]" with the description "Epoch N: " (tqdm's set_description adds the ': '): "Epoch 0: :   5%|▋  |
# 15900/301500 [1:22:...". The drawing has no rate, so neither reader above times it, and a drawing is often cut
# mid-column by another write to the terminal: Lightning's ModelCheckpoint (lightning/pytorch/callbacks/
# model_checkpoint.py, _update_best_and_save) prints "Epoch {epoch:d}, global step {step:d}: {monitor!r} reached
# {current:0.5f} (best ...), saving model to ..." on the bar's line (NVIDIA-NeMo issue 8505's H100 reference run).
# Such drawings are step records without a step time: they show that training ran, no more.
# The doubled colon is this format's mark: Lightning's own bar ("Epoch 0:   5%|...") states a rate, and a rate-less
# look-alike of another origin is not taken for NeMo's.
_RATELESS_DRAWING = re.compile(r"Epoch \d{1,9}: : {1,3}\d{1,3}%\|[^|\n]{0,400}\| ?(\d{1,12})/(?:\d{1,12}|\?) \[")


def rateless_bar_starts(text: str) -> list[int]:
    """The line starts of the training-bar drawings without a rate (NeMo 1's MegatronProgressBar, whole or cut) that
    count a step done, in log order."""
    if _BAR_START not in text or "%|" not in text:
        return []
    return [text.rfind("\n", 0, m.start()) + 1 for m in _RATELESS_DRAWING.finditer(text) if int(m.group(1)) > 0]
