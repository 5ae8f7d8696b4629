"""Issue 17 (helper judge41): batch 36's misses as families. A loss jump (a finite series that jumped and stayed
up) is a reading of the records, not what stops a job: when the lines after the last progress say what ended it
(the scheduler's time limit, the job's own traceback ending in an exception line), that wins. Each: real lines
with their source, and the same records without the ending, which must still read as diverged."""

from __future__ import annotations

from analysis.logs.outcome import trial_outcome

# ---- 1. precedence: what ended the job outranks a loss jump that did not stop it
# github bigscience-workshop/bigscience experiments/gpt2-meg-ds-zero/meg_ds_zero_gpt2_perf_n16-1999616.out
# (oos-batch36), shortened: Megatron-DeepSpeed's training_log records (megatron/training.py), the lm loss jumping
# from 12.5 to 40.8 at iteration 3, then slurmstepd's time-limit lines (SLURM src/slurmd/slurmstepd/req.c).
_MEG = "".join(
    f" iteration        {i}/    1000 | elapsed time per iteration (ms): {ms} | learning rate: 1.875E-05 | "
    f"lm loss: {loss} | loss scale: 1024.0 | number of skipped iterations:   0 | number of nan iterations:   0 |\n"
    for i, ms, loss in ((1, "123742.4", "1.252221E+01"), (2, "128917.0", "1.251770E+01"),
                        (3, "128642.7", "4.075232E+01"), (4, "127766.0", "3.899556E+01")))
_TIME_LIMIT = ("slurmstepd: error: *** STEP 1999616.0 ON r6i4n5 CANCELLED AT 2021-05-27T21:42:11 DUE TO TIME LIMIT ***\n"
               "slurmstepd: error: *** JOB 1999616 ON r6i4n5 CANCELLED AT 2021-05-27T21:42:11 DUE TO TIME LIMIT ***\n"
               "Killing subprocess 34474\nMain process received SIGTERM, exiting\n")


def test_time_limit_after_a_loss_jump_is_time_limit() -> None:
    assert trial_outcome(_MEG + _TIME_LIMIT).failure_kind == "time_limit"


def test_the_same_jump_with_no_ending_still_diverges() -> None:
    assert trial_outcome(_MEG).failure_kind == "diverged"


# github bigyanghimire/deepspeed-experiments final_experiments/a100/default_exp/ulysses_run_5000_batch_2.log
# (oos-batch36), shortened: the author's train_gpt_ulysses.py prints `Iteration i: loss=...`, then its summary's
# min() over an empty list raises (CPython's traceback, torchrun's [rank0]: prefix).
_ULYSSES = "".join(f"0: peak_mem=7.83 GB\n0: Iteration {i}: loss={v}\n" for i, v in enumerate(
    ("2.4794", "12.9610", "14.8873", "19.9182", "8.7836", "8.2628", "8.2179", "7.9917", "7.9324", "8.3423")))
_VALUE_ERROR = """0: [rank0]: Traceback (most recent call last):
0: [rank0]:   File "/home/u/llm-training/experiments/train_gpt_ulysses.py", line 332, in <module>
0: [rank0]:     main()
0: [rank0]:   File "/home/u/llm-training/experiments/train_gpt_ulysses.py", line 329, in main
0: [rank0]:     print(f"Step time: {np.mean(step_times):.2f}s (min={min(step_times):.2f}s)")
0: [rank0]: ValueError: min() arg is an empty sequence
srun: error: hades: task 0: Exited with exit code 1
"""


def test_an_exception_after_a_loss_jump_is_a_crash() -> None:
    assert trial_outcome(_ULYSSES + _VALUE_ERROR).failure_kind == "crashed"


def test_the_ulysses_jump_alone_still_diverges() -> None:
    assert trial_outcome(_ULYSSES).failure_kind == "diverged"


def test_nan_loss_then_a_traceback_stays_diverged() -> None:
    # only a finite jump is outranked: a NaN loss is the run's own failure, whatever the traceback after it
    nan = _ULYSSES + "0: peak_mem=7.83 GB\n0: Iteration 10: loss=nan\n0: peak_mem=7.83 GB\n0: Iteration 11: loss=nan\n"
    assert trial_outcome(nan + _VALUE_ERROR).failure_kind == "diverged"
