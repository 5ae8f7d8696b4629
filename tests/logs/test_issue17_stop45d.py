"""Issue 17 (coordinator, stop 45, judge55: in sample after batch 47's score). A run whose last line says it is
finishing training finished; a per-epoch train summary printed on the line below the epoch header is progress, and
a NaN in it is still a divergence. Records: real lines with their source."""

from __future__ import annotations

import pytest

from analysis.logs.families import completion as F_DONE
from analysis.logs.outcome import trial_outcome


def test_a_closing_finishing_line_says_training_finished() -> None:
    # ShuffleFaceNet CASIA run (oos-batch47), after its 70/70 epoch
    assert F_DONE.says_finished("Train Epoch: 70/70 ...\n    total_loss: 8.9992 time: 10m 8s\nfinishing training\n")


@pytest.mark.parametrize("line", [
    "Early stopping patience: 7, monitor: val_loss",
    "finishing training setup, building the optimizer",
    "INFO - EarlyStopping callback configured (min_delta=0.001)",
])
def test_set_up_lines_that_name_early_stopping_or_finishing_are_not_an_end(line: str) -> None:
    assert not F_DONE.says_finished(line + "\n")


# github A-SpeedTransformer (oos-batch47) and an Indian-currency TensorFlow CNN (oos-batch47): the epoch on one line, its
# train summary on the next
@pytest.mark.parametrize("epochs", [
    "".join(f"2025-10-07 07:16:{n:02d},335 - INFO - [Epoch {n}/60]\n"
            f"2025-10-07 07:16:{n:02d},994 - INFO - Train Loss: 0.0{274 + n}, Train Acc: 0.9893\n"
            f"2025-10-07 07:16:{n:02d},994 - INFO - Val   Loss: 0.6085, Val   Acc: 0.8640\n" for n in range(40, 49)),
    "".join(f"2018-07-30 14:2{n}:32,523:INFO: Epoch {n}/10\n"
            f"2018-07-30 14:2{n}:59,166:INFO: - Train metrics: accuracy: 0.754 ; loss: 0.{658 - n}\n"
            f"2018-07-30 14:2{n}:59,288:INFO: - Eval metrics: accuracy: 0.402 ; loss: 1.627\n" for n in range(1, 9)),
])
def test_a_train_summary_below_its_epoch_header_is_progress(epochs: str) -> None:
    assert trial_outcome(epochs).failure_kind == "ok"
    assert trial_outcome(epochs.replace("Train", "Eval")).failure_kind != "ok"  # evaluation alone is no training


# github othmaneechc/SpeedTransformer finetune.log (oos-batch47): the train loss goes NaN and the script's own
# early-stopping rule ends the run; the NaN decides, not the stop
def test_a_nan_train_summary_before_an_early_stop_is_a_divergence() -> None:
    epochs = "".join(f"2025-12-24 04:28:2{n},434 - INFO - [Epoch {n}/60]\n"
                     f"2025-12-24 04:28:2{n},434 - INFO - Train Loss: {'0.9' if n < 3 else 'nan'}, Train Acc: 0.1576\n"
                     f"2025-12-24 04:28:2{n},434 - INFO - Val   Loss: nan, Val   Acc: 0.0379\n" for n in range(1, 9))
    assert trial_outcome(epochs + "2025-12-24 04:28:29,701 - INFO - Early stopping triggered.\n").failure_kind == \
        "diverged"
