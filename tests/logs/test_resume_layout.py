"""A resume whose data-parallel size differs from the one its ZeRO checkpoint was saved with is a configuration error
(families.config.RESUME_LAYOUT), chosen on held-out batch 11's misses after it was scored (in sample from then on)."""

from __future__ import annotations

import pytest

from analysis.logs.classify import classify
from launcher.core.kinds import FailureKind

# deepspeedai/DeepSpeed#2898 (tests/fixtures/oos-batch11/deepspeed/gpt_resume_4_to_6_nodes_zero_dp_world_size_changed_1.log)
_REAL = ("  File \"/usr/local/lib/python3.8/dist-packages/deepspeed/runtime/zero/stage_1_and_2.py\", line 2097, in "
         "_restore_base_optimizer_state\n"
         "deepspeed.runtime.zero.utils.ZeRORuntimeException: The checkpoint being loaded used a DP world size of 4 but "
         "the current world size is 6. Automatic adjustment of ZeRO's optimizer state partitioning with a new world "
         "size is not currently supported.\n")
# made up: the same refusal from a fork, after a launcher prefix
_LOOK_ALIKE = ("[rank3]: ZeRORuntimeException: The checkpoint being loaded used a DP world size of 64 but the current "
               "world size is 32.\n")


@pytest.mark.parametrize("text", [_REAL, _LOOK_ALIKE])
def test_a_zero_checkpoint_of_another_dp_size_is_a_configuration_error(text):
    failure = classify("[INFO] loading checkpoint global_step1000\n" + text)
    assert failure.kind is FailureKind.CONFIG_ERROR
    assert "data-parallel size" in failure.reason


@pytest.mark.parametrize("text", [
    # a universal checkpoint loaded on a new world size works: not a refusal
    "[INFO] Loading universal checkpoint saved with a DP world size of 4; the current world size is 6\n"
    "iteration 1001/2000 | lm loss: 2.31 | elapsed time per iteration (ms): 812.5\n"
    "iteration 1002/2000 | lm loss: 2.30 | elapsed time per iteration (ms): 810.1\n"
    "iteration 1003/2000 | lm loss: 2.30 | elapsed time per iteration (ms): 811.0\n",
])
def test_a_run_that_reports_its_world_size_is_not_refused(text):
    assert classify(text).kind is not FailureKind.CONFIG_ERROR
