"""Issue 17, the in-sample misses left after judge16 (helper judge17): a job that said training finished and was then
ended by a slurmstepd step-end line with no reason, or one cut before its reason, did not exit (a hang). Each family:
real lines from a fixture (cited), made-up look-alikes that must not match."""

from __future__ import annotations

import pytest

from analysis.logs.classify import classify
from analysis.logs.outcome import trial_outcome
from launcher.core.kinds import FailureKind

# tests/fixtures/oos-batch12/megatron_lm/bridge_nemotron3_super_no_exit_after_50_iterations_1.log
# (Megatron-Bridge#3427: the 50 iterations finish, the processes never exit, SLURM ends the step; the excerpt cuts
# the step-end line after "ON")
_DONE = ("[2026-04-20 03:17:07] iteration       50/      50 | consumed samples:        25600 | elapsed time per "
         "iteration (ms): 9969.4 | learning rate: 4.500000E-06 | global batch size:   512 | lm loss: 4.791878E-03 |\n"
         "[after training is done] datetime: 2026-04-20 03:17:08\n")
_CUT_END = "[2026-04-20T03:25:23.011] error: *** STEP 1942963.1 ON\n"


def test_a_step_end_without_reason_after_training_finished_is_a_hang():
    assert classify(_DONE + _CUT_END).kind == FailureKind.HANG
    # Slurm's full line for a scancel of the step (no " DUE TO ..." suffix), and the job-level form
    for end in ("slurmstepd: error: *** STEP 1942963.1 ON nid001 CANCELLED AT 2026-04-20T03:25:23 ***\n",
                "slurmstepd: error: *** JOB 1942963 ON nid001 CANCELLED AT 2026-04-20T03:25:23 ***\n"):
        assert classify(_DONE + end).kind == FailureKind.HANG, end


def test_step_ends_that_are_not_a_job_failing_to_exit():
    # made up: a stated reason other than the time limit is that reason; a step end with no line saying training
    # finished is a cancellation; work between the two lines (a checkpoint save) is work the cancel cut
    preempt = "slurmstepd: error: *** STEP 1942963.1 ON nid001 CANCELLED AT 2026-04-20T03:25:23 DUE TO PREEMPTION ***\n"
    assert classify(_DONE + preempt).kind == FailureKind.PREEMPTED
    iteration = " iteration       20/      50 | elapsed time per iteration (ms): 9969.4 | lm loss: 4.79E-03 |\n"
    cancel = "slurmstepd: error: *** STEP 1942963.1 ON nid001 CANCELLED AT 2026-04-20T03:25:23 ***\n"
    assert classify(iteration + cancel).kind == FailureKind.CANCELLED
    save = "saving checkpoint at iteration      50 to /ckpt in torch_dist format\n"
    assert classify(_DONE + save + cancel).kind != FailureKind.HANG


# CUDA runtime's cudaErrorNoKernelImageForDevice in cudaGetErrorString's words; tests/fixtures/oos-batch8/other/
# vision_mamba_train_no_kernel_image_old_gpu_1.log (hustvl/Vim#42) and oos-batch16/deepspeed/
# deepspeed_extensions_not_built_for_card_no_kernel_image_1.log
_NO_KERNEL = ("CUDA error: no kernel image is available for execution on the device\n",
              "RuntimeError: CUDA error: no kernel image is available for execution on the device\n")


def test_no_kernel_image_before_training_is_a_config_error():
    for line in _NO_KERNEL:
        assert classify(line).kind == FailureKind.CONFIG_ERROR, line
        assert classify("Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n" + line).kind \
            == FailureKind.CONFIG_ERROR, line


def test_no_kernel_image_after_training_ran_is_not_a_set_up_error():
    # made up: step records before the error (a kernel only a later phase needs: evaluation, a custom op)
    steps = "".join(f" iteration {i:8d}/     100 | elapsed time per iteration (ms): 812.5 | lm loss: 7.1E+00 |\n"
                    for i in range(1, 4))
    for line in _NO_KERNEL:
        assert classify(steps + line).kind != FailureKind.CONFIG_ERROR, line
    # a look-alike that is no refusal: the words in a note about a fixed build
    assert classify(steps + "note: fixed 'no kernel image is avail' by rebuilding\n").kind != FailureKind.CONFIG_ERROR


def test_a_json_record_over_crlf_lines_is_read_where_logs_are_read():
    # judge16's loose end: a DLLogger record written with CR LF line ends (tests/logs/test_issue17_judge16.py's
    # lines from oos-batch16's gpu_recipes_gpt3_175b_a3mega_dllogger_entry_1.log). logtext.decode turns CR LF into
    # LF before any reader runs, so the record is one step record on the CLI's and the outcome's path.
    from tests.logs.test_issue17_judge16 import _DLLL
    crlf = _DLLL.replace("\n", "\r\n")
    outcome = trial_outcome(crlf)
    assert outcome.failure_kind == "ok" and outcome.metrics["step_time_s"] == pytest.approx(25.11555, rel=1e-6)
    # a CR LF object that is no step record stays unread
    assert "step_time_s" not in trial_outcome('DLLL {\r\n  "train_batch_size": 16\r\n}\r\n').metrics
