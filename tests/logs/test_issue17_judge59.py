"""Issue 17 (coordinator, stop 47, judge59: written while batch 50 was collected, without reading it; in sample on
batches 48-49). Keras' closing record of each epoch repeats one "n/N" count: every such record is an epoch's, not a
copy of the first. Records: real lines with their source."""

from __future__ import annotations

import pytest

from analysis.logs.parse_generic import read_records
from analysis.logs.steady_state import steady_state

# github ttukei/Twitter-language-models-about-Ukraine TCSS456_NLP_FinalProject/ReadMe.txt (oos-batch49): tf.keras
# verbose=2, the first epoch's 43 ms/step is the graph's build
_VERBOSE2 = "".join(
    f"Epoch {e}/100\n128/128 - {5 if e == 1 else 0}s - loss: {3.1494 - 0.03 * e:.4f} - accuracy: 0.{1463 + e} - "
    f"{'5s' if e == 1 else f'{350 + e % 9}ms'}/epoch - {43 if e == 1 else 3}ms/step\n" for e in range(1, 21))
# github Allegra42/ki-keras-belgian-traffic-sign training_log.txt (oos-batch49): Keras 2, its bar lines cut
_KERAS2 = "".join(
    f"Epoch {e}/50\n285/285 [==============================] - {7 if e == 1 else 6}s {24 if e == 1 else 21 + e % 2}ms/step"
    f" - loss: {3.3 - 0.05 * e:.4f} - acc: 0.{19 + e} - val_loss: 2.4161 - val_acc: 0.4218\n" for e in range(1, 21))


def _median(text: str) -> float:
    return steady_state(list(read_records(text).iterations)).median_step_time_s


@pytest.mark.parametrize(("text", "expected_s"), [(_VERBOSE2, 0.003), (_KERAS2, 0.022)])
def test_each_epochs_closing_record_counts(text, expected_s):
    assert _median(text) == pytest.approx(expected_s, abs=6e-4)
    assert read_records(text).n_records == 20


def test_a_record_printed_twice_is_one_epoch():
    doubled = "".join(line + "\n" + line + "\n" for line in _KERAS2.splitlines() if "/step" in line)
    assert read_records(doubled).n_records == 20


def test_two_closing_records_stay_one():
    # below CLOSING_RECORDS_MIN the count may be one step printed by two ranks
    two = "".join([line + "\n" for line in _VERBOSE2.splitlines() if "/step" in line][:2])
    assert read_records(two).n_records == 1
