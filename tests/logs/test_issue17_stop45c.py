"""Issue 17 (coordinator, stop 45, judge54: in sample after batch 46, written while batch 47 was collected and blind to
it). A counter that stays the same over several records whose clock advances is no step counter, whatever its key:
each run of one value is a sequence. Copies are not: another rank's within a second, or the same record written again
at each micro-step. Records: real lines with their source."""

from __future__ import annotations

import pytest

from analysis.logs.outcome import trial_outcome

# github jamesgabbard/ai-science-training-series 07_largeScaleTraining/homework.md (oos-batch46): ALCF's ai4sci trainer
# logs every ten steps with the epoch's "k/10" in front; its dt field times the train step.
_AI4SCI = ("[2022-11-11 14:{m:02d}:{s:02d},000][ai4sci.trainer][INFO] - [0] [{e}/10: {n} / 40036 ({p}%)] "
           "epoch={e}.0000 dt={dt} running_loss=0.0121 batch_loss=0.0132 acc=0.0024 batch_acc=0.0020\n")


def _ai4sci(first_dt: float) -> str:
    out = []
    for e in range(3):
        for k in range(8):
            t = 60 * e + 9 * k  # a record every ~9 s (ten steps), an epoch a minute
            dt = first_dt if k == 0 else 0.80 + 0.01 * (k % 3)
            out.append(_AI4SCI.format(m=t // 60, s=t % 60, e=e, n=5120 * k, p=13 * k, dt=dt))
    return "".join(out) + "Total training time: 825.9 seconds\n"


def _step_time(text: str) -> float:
    return float(trial_outcome(text).metrics["step_time_s"])


def test_records_that_repeat_one_counter_over_an_advancing_clock_are_a_sequence() -> None:
    # each epoch's first record (its warm-up, 1.5 s) is not the step time; the records within the epoch are
    assert _step_time(_ai4sci(first_dt=1.5)) == pytest.approx(0.81, rel=0.02)


# github ByteCrafterX/ByteAI train_lora.log (oos-batch28): each record written three times, seconds apart (once per
# micro-step of one optimizer step), the same values each time
def test_a_record_written_again_with_the_same_values_is_a_copy() -> None:
    line = "2025-03-18 {h:02d}:{m:02d}:{s:02d},158 - INFO - __main__ - Step {n}/1000, loss={loss}\n"
    log = "".join(line.format(h=20 + k // 2, m=30 * (k % 2), s=5 * c, n=50 * (k + 1), loss=f"0.{3048 + k}")
                  for k in range(6) for c in range(3))
    outcome = trial_outcome(log)
    step = outcome.metrics.get("step_time_s")
    assert step is None or float(step) > 20  # 50 steps every 30 min (36 s a step): not the 5 s between the copies
