"""Issue 17 (helper judge23): batch 21's misses as families. NCCL's communicator teardown lines (`comm 0x... - Abort
COMPLETE` / `- Destroy COMPLETE`, src/init.cc ncclCommAbort / ncclCommDestroy) are not a wait: a log that ends on
them after its steps is judged by what precedes them. The data the run was configured with yielding nothing (torch's
RandomSampler `num_samples=0`, a trainer's `No training batches` / `Training dataset is empty`) on an error line
before any step is config_error (families.config.EMPTY_DATA)."""

from __future__ import annotations

from pathlib import Path

import pytest
from log_fixtures import body, kind_of

from analysis.logs.outcome import trial_outcome

FIXTURES = Path(__file__).parents[1] / "fixtures"
# tests/fixtures/oos-batch21/nemo/...: healthy NeMo steps, the -last.ckpt saved, then rank 1's NCCL teardown
_BIONEMO = FIXTURES / "oos-batch21/nemo/bionemo_esm2_650m_hyperpod_slurm_2_nodes_100_steps_checkpoint_saved_1.log"
# tests/fixtures/oos-batch21/pytorch/...: ETU etu/unlearn.py line 108 raises before any step
_ETU = FIXTURES / "oos-batch21/pytorch/etu_unlearning_no_training_batches_check_forget_corpora_1.log"
# a stuck all-gather that ProcessGroupNCCL's watchdog aborted: its tail holds `- Abort COMPLETE` too
_WATCHDOG = FIXTURES / "oos-batch1/hf_trainer/trainer_stuck_allgather_watchdog_1.log"

# the fixture's own teardown lines (bionemo log, rank 1)
_ABORT = "1: ip-10-1-39-225:19976:21178 [0] NCCL INFO comm 0x5a16dc30 rank 1 nranks 2 cudaDev 0 busId 1e0 - Abort COMPLETE\n"
_DESTROY = _ABORT.replace("Abort COMPLETE", "Destroy COMPLETE")
_INIT = _ABORT.replace("Abort COMPLETE", "Init COMPLETE")
_CHANNEL = "1: ip-10-1-39-225:19976:21178 [0] NCCL INFO Channel 00/32 :    0   1\n"
_STEPS = "".join(f"0: Training epoch 0, iteration {n}/99 | global_step: {n} | reduced_train_loss: 2.{n:02d} | "
                 f"train_step_timing in s: 0.19\n" for n in range(1, 40))


def test_the_batch21_bionemo_run_ending_in_nccl_teardown_is_ok():
    assert kind_of(body(_BIONEMO)) == "ok"


@pytest.mark.parametrize("tail", [_ABORT, _DESTROY, _ABORT + _DESTROY])
def test_nccl_teardown_after_steps_is_not_a_wait(tail):
    assert kind_of(_STEPS + tail) == "ok"


@pytest.mark.parametrize("tail", [_INIT, _CHANNEL, _ABORT + _CHANNEL])  # a communicator set up (again): a wait
def test_nccl_set_up_after_steps_still_reads_as_a_wait(tail):
    assert kind_of(_STEPS + tail) == "hang"


def test_a_watchdog_abort_ending_in_abort_complete_stays_comm_error():
    assert kind_of(body(_WATCHDOG)) == "comm_error"


def test_the_batch21_no_training_batches_is_config_error():
    outcome = trial_outcome(body(_ETU))
    assert outcome.failure_kind == "config_error", outcome.reason


_TRACE = 'loading model\nTraceback (most recent call last):\n  File "train.py", line 88, in <module>\n    main()\n{line}\n'


@pytest.mark.parametrize("line", [
    "RuntimeError: No training batches. Check forget_corpora / filters / batch_size.",  # the fixture's line 88
    "ValueError: num_samples should be a positive integer value, but got num_samples=0",  # torch sampler.py
    "[rank0]: ValueError: num_samples should be a positive integer value, but got num_samples=0",
    "ValueError: Training dataset is empty after filtering. Please adjust the filtering conditions.",
    "ValueError: Dataset is empty.",
    "ValueError: training dataset has 0 samples",
])
def test_data_that_yields_nothing_before_any_step_is_config_error(line):
    assert kind_of(_TRACE.format(line=line)) == "config_error"


@pytest.mark.parametrize("line", [
    "ValueError: num_samples should be a positive integer value, but got num_samples=-3",  # a bad argument
    "ValueError: Validation dataset is empty.",  # not the training data
    "ValueError: Test dataset is empty.",
    "RuntimeError: No training batches left in the queue after the worker died",
    "ValueError: the cache is empty",
])
def test_look_alikes_stay_crashed(line):
    assert kind_of(_TRACE.format(line=line)) == "crashed"


def test_an_empty_loader_after_steps_stays_crashed():
    line = "ValueError: num_samples should be a positive integer value, but got num_samples=0"
    assert kind_of(_STEPS + _TRACE.format(line=line)) == "crashed"


def test_a_warning_about_an_empty_shard_is_not_the_end():
    assert kind_of("WARNING: dataset is empty, skipping shard 3\n" + _STEPS + "Training completed successfully\n") == "ok"
