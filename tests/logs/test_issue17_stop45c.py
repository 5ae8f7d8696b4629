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


# judge54, the interrupt rule of judge52 under capture chatter (bench_invariance): an installed library's warning
# between a set-up phase and the Ctrl-C does not hide the phase; a shard-loading bar above the log is no training step.
_LIB_WARNING = ("/usr/local/lib/python3.10/dist-packages/torch/distributed/distributed_c10d.py:2965: UserWarning: "
                "torch.distributed._all_gather_base is a private function and will be deprecated.\n"
                "  warnings.warn(\n")
_CTRL_C = ("^CTraceback (most recent call last):\n"
           '  File "pretrain_gpt.py", line 149, in <module>\n'
           "    pretrain(train_valid_test_datasets_provider, model_provider, forward_step,\n"
           "KeyboardInterrupt\n")


def test_a_library_warning_does_not_hide_the_phase_an_interrupt_came_in() -> None:
    log = "using torch.float16 for parameters ...\n" + _LIB_WARNING + _CTRL_C
    assert trial_outcome(log).failure_kind == "hang"
    # the program's own warning says it got past the phase
    own = _LIB_WARNING.replace("/usr/local/lib/python3.10/dist-packages/torch/distributed/", "/home/u/megatron/data/")
    assert trial_outcome("using torch.float16 for parameters ...\n" + own + _CTRL_C).failure_kind == "cancelled"


def test_a_loading_bar_above_the_log_is_no_training_step() -> None:
    bar = "".join(f"Loading checkpoint shards: {25 * i:3d}%|{'#' * (2 * i):<8s}| {i}/4 [00:{3 * i:02d}<00:"
                  f"{3 * (4 - i):02d},  3.00s/it]\n" for i in range(5))
    chatter = "[NeMo W 2024-07-30 17:38:52 nemo_logging:349] It is recommended to use `self.log('val_loss', ...)`\n"
    assert trial_outcome(chatter + _CTRL_C).failure_kind == "cancelled"
    assert trial_outcome(bar + chatter + _CTRL_C).failure_kind == "cancelled"
