"""Issue 17 (helper judge38): batch 34's misses as families. DeepSpeed ZeRO's refusal of a gradient reduced twice is
a configuration error (a raised message of its own, read from its source); per-line epoch metrics under a numbered
"-----N------" banner are step records. Each: a real line with its source, look-alikes that must not match."""

from __future__ import annotations

from analysis.logs.families.raised import first_raised
from analysis.logs.outcome import trial_outcome
from analysis.logs.parse_generic import read_records
from launcher.core.kinds import FailureKind

# ---- 1. DeepSpeed ZeRO: "Gradient computed twice for this partition"
# deepspeed/runtime/zero/stage_1_and_2.py (and stage3.py) assert params_already_reduced[param_id] == False with
# f"The parameter {param_id} has already been reduced. \ <12 spaces>Gradient computed twice ...": the backslash inside
# the string keeps the next line's indentation, so the printed message holds 13 spaces between its sentences. The line
# below is from deepspeedai/DeepSpeedExamples issue 86 (3D parallelism with ZeRO-2, a combination that cannot work).
_SP = " " * 13
_TWICE = (f"RuntimeError: The parameter 290 has already been reduced.{_SP}Gradient computed twice for this partition."
          f"{_SP}Multiple gradient reduction is currently not supported")
_LATER_KEYERROR = (
    '  File "/opt/conda/lib/python3.6/site-packages/deepspeed/runtime/zero/stage2.py", line 1528, in '
    "has_overflow_partitioned_grads_serial\n"
    "    for j, grad in enumerate(self.averaged_gradients[i]):\n"
    "KeyError: 0\n"
)


def test_gradient_reduced_twice_is_a_config_error_even_behind_a_later_keyerror():
    out = trial_outcome(_TWICE + "\n\nor\n\n" + _LATER_KEYERROR)
    assert out.failure_kind == FailureKind.CONFIG_ERROR.value
    assert "Multiple gradient reduction" in out.reason


def test_the_same_words_in_a_warning_are_no_raised_message():
    line = _TWICE.replace("RuntimeError:", "[WARNING]")
    assert first_raised(line) is None


# ---- 2. per-line epoch metrics under a "-----N------" banner
# github 494935318/pointclass2 log_train.txt (commit 873531e99445): train.py writes log_string("-----{}------"
# .format(epoch)) and then 'train_mean loss: %f', 'train_accuracy: %f', 'test_mean loss: %f', 'test_accuracy: %f'.
_EPOCHS = """-----0------
train_mean loss: 0.225224
train_accuracy: 0.923984
test_mean loss: 0.504793
test_accuracy: 0.861426
-----1------
train_mean loss: 0.281639
train_accuracy: 0.910627
test_mean loss: 0.515165
test_accuracy: 0.857374
"""


def test_epoch_banner_blocks_are_records_with_the_train_loss():
    reading = read_records(_EPOCHS)
    assert reading.n_records == 2
    assert reading.losses == (0.225224, 0.281639)
    assert reading.last_record_pos == _EPOCHS.rindex("test_accuracy")
    assert trial_outcome(_EPOCHS).failure_kind == FailureKind.OK.value


def test_one_banner_or_banners_without_a_loss_are_no_records():
    assert read_records(_EPOCHS.split("-----1------")[0]).n_records == 0
    no_loss = "-----0------\ntrain_accuracy: 0.92\n-----1------\ntrain_accuracy: 0.93\n"
    assert read_records(no_loss).n_records == 0
    separators = "------------\nloss: 0.5\n-----\n"  # rules without a counter
    assert read_records(separators).n_records == 0
