"""Issue 17 (helper judge39b): batch 34's remaining misses as families, in sample. A tqdm bar split over a line break
before its `[elapsed<remaining, rate]`; each with a real line and its source, and look-alikes that must not match."""

from __future__ import annotations

from analysis.logs.outcome import trial_outcome
from analysis.logs.parse_generic import training_bars

# ---- 1. a tqdm bar split over a line break (huggingface/optimum-habana PR 1963, the FLUX DreamBooth LoRA run's tail
# as the description quotes it: the bar's counter ends one line, its bracket starts the next)
_SPLIT_BAR = ("05/01/2025 17:29:03 - INFO - main - Saved state to dog_lora_flux/checkpoint-500\n"
              "Steps: 100%|" + "\u2588" * 40 + "| 500/500 \n"
              "[54:01<00:00,  5.19s/it, loss=0.393, lr=0.0001]\n")


def test_a_bar_split_before_its_bracket_is_one_drawing():
    bars = training_bars(_SPLIT_BAR)
    assert [(d.n, d.rate_s_per_it) for d in bars] == [(500, 5.19)]
    out = trial_outcome(_SPLIT_BAR)
    assert out.failure_kind == "ok" and out.metrics["step_time_s"] == 5.19


def test_two_unrelated_lines_are_not_joined_into_a_bar():
    # the first line ends with a count but not the bar's right edge '|': not the same drawing
    assert training_bars("epoch 3/4 \n[00:10<00:20,  2.00s/it, loss=1.2]\n") == []
    assert training_bars("loss 0.5 | step 7\n[00:10<00:20,  2.00s/it]\n") == []
