"""families.completion: the end-of-training lines (judge37a, batch 33's misses)."""

from __future__ import annotations

import pytest

from analysis.logs.families.completion import says_finished
from analysis.logs.outcome import trial_outcome
from launcher.core.kinds import FailureKind

# Ariz-Mohammadi/finetuned-qwen3-medical-qlora training.log@4acf9229 (oos-batch33 hf_trainer/
# a_qwen3_8b_medical_qlora_training_complete_1.log): the banner in capitals
_CAPITALS = ("INFO:__main__:✅ Final eval loss: 1.3452\n"
             "INFO:__main__:🎉 TRAINING COMPLETE!\n"
             "INFO:__main__:📁 Model saved at: ./qwen3_medical_reasoning_qlora\n")
# DeepSpeed-Chat e2e_rlhf.py / train.py main's line after a step's script returned 0 (SeekPoint/DeepSpeedExamples
# yknote---chat---log@34c31cf1)
_DSCHAT = ("---=== Running Step 3 ===---\nRunning:\nbash training_scripts/single_node/run_125m.sh\n"
           "---=== Finished Step 3 in 0:22:33 ===---\n")


@pytest.mark.parametrize("text", [_CAPITALS, _DSCHAT])
def test_finished_lines_make_a_log_ok(text):
    assert says_finished(text)
    assert trial_outcome(text).failure_kind == FailureKind.OK.value


@pytest.mark.parametrize("line", [
    "TRAINING COMPLETED OR INTERRUPTED",  # either outcome
    "PRETRAINING CONFIG LOADED",
    "---=== Running Step 3 ===---",
    "====== Finished step 3/5 in round 2 in 12.5 sec ======",  # not the wrapper's format
])
def test_lookalikes_are_not_finished(line):
    assert not says_finished(line + "\n")
