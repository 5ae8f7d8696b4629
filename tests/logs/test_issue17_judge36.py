"""Issue 17 (helper judge36): batch 32's misses as families. A launch command echoed into a log is not a step
record; SLURM's refusals of a request it can never satisfy are configuration errors, and pip's resolver report is no
error record; an epoch and batch counter in their one-letter form ("E3 B131/233") is a step record. Each: a real line
with its source, look-alikes that must not match."""

from __future__ import annotations

import pytest
from log_fixtures import body

from analysis.logs.families.error_end import error_record
from analysis.logs.outcome import trial_outcome
from analysis.logs.parse_generic import is_command_line, is_step_record, read_records
from launcher.core.kinds import FailureKind

# ---- 1. a command line echoed into the log
# zai-org/VisualGLM-6B finetune/finetune_visualglm.sh (issue #54): the script echoes its launch command, then bash
# reports "deepspeed: command not found" (the fixture below, lines 2-3)
_ECHOED = "oos-batch32/deepspeed/c_visualglm_finetune_launch_deepspeed_command_not_found_1.log"
_COMMANDS = [
    "NCCL_DEBUG=info deepspeed --master_port 16666 --hostfile hostfile_single finetune_visualglm.py --experiment-name "
    "finetune-visualglm-6b --mode finetune --train-iters 300 --lr 0.0001 --batch-size 20",
    "torchrun --nproc_per_node 8 pretrain_gpt.py --train-iters 500 --log-interval 10 --lr 3e-4",
    "python -m torch.distributed.run --nproc_per_node=2 train.py --max_steps=1000 --loss_scale=0",
    "    --train-iters 300 \\",
]
_RECORDS = [  # step records that hold `--` or one flag-like word: still records
    " iteration       10/     500 | consumed samples:          320 | elapsed time per iteration (ms): 812.3 | "
    "lm loss: 7.1E+00 |",
    "--- step 10 --- loss 2.1 time 0.8s",
    "step 10: loss 2.31, lr 1e-4 -- 0.52 s/it",
    "Epoch 1 | step 20 | loss 1.9 | --lr 3e-4 applied | time 0.4s",
]


def test_an_echoed_launch_command_is_no_progress():
    out = trial_outcome(body(_ECHOED))
    assert out.failure_kind == FailureKind.CONFIG_ERROR.value
    assert "command not found" in out.reason


@pytest.mark.parametrize("line", _COMMANDS)
def test_command_lines_are_not_step_records(line):
    assert is_command_line(line)
    assert not is_step_record(line)
    assert read_records(line + "\n" + line + "\n").n_records == 0


@pytest.mark.parametrize("line", _RECORDS)
def test_records_with_dashes_stay_records(line):
    assert not is_command_line(line)
    assert is_step_record(line)


# ---- 2. SLURM's refusals of a request it can never satisfy
# SchedMD/slurm src/common/slurm_errno.c@0001e1b447b8 (slurm_errtab: ESLURM_INVALID_GRES "Invalid generic resource
# (gres) specification", ...) through srun's "Unable to create step for job %u: %m"
_GRES = "oos-batch32/slurm/b_maxent_grpo_openr1_srun_invalid_gres_1.log"
_REFUSALS = [
    "srun: error: Unable to create step for job 25649503: Invalid generic resource (gres) specification",
    "sbatch: error: Batch job submission failed: Invalid partition name specified",
    "srun: error: Unable to allocate resources: Requested node configuration is not available",
    "salloc: error: Job submit/allocate failed: Invalid account or account/partition combination specified",
    "sbatch: error: Batch job submission failed: Invalid qos specification",
]
_TRANSIENT = [  # refusals that clear by themselves, and look-alikes: never a configuration error
    ("sbatch: error: Batch job submission failed: Requested time limit is invalid (missing or exceeds some limit)",
     FailureKind.SUBMIT_REFUSED),
    ("srun: error: Unable to allocate resources: Requested time limit is invalid", FailureKind.SUBMIT_REFUSED),
    ("sbatch: error: Batch job submission failed: Job violates accounting/QOS policy (job submit limit, user's size "
     "and/or time limits)", FailureKind.SUBMIT_REFUSED),
]
_LOOKALIKES = [
    "WARNING: the partition check said: Invalid partition name specified (ignored, using default)",
    "INFO retrying: Invalid generic resource (gres) specification was fixed by the prolog",
]


def test_an_invalid_gres_step_after_a_pip_report_is_a_config_error():
    out = trial_outcome(body(_GRES))
    assert out.failure_kind == FailureKind.CONFIG_ERROR.value
    assert "Invalid generic resource" in out.reason


@pytest.mark.parametrize("line", _REFUSALS)
def test_never_satisfiable_refusals_are_config_errors(line):
    out = trial_outcome(f"Setup complete.\n{line}\n")
    assert out.failure_kind == FailureKind.CONFIG_ERROR.value, out.reason


@pytest.mark.parametrize(("line", "kind"), _TRANSIENT)
def test_transient_refusals_stay_submit_refused(line, kind):
    assert trial_outcome(f"{line}\n").failure_kind == kind.value


@pytest.mark.parametrize("line", _LOOKALIKES)
def test_refusal_words_outside_slurm_are_not_refusals(line):
    assert trial_outcome(f"step 1 loss 2.0 time 1.0s\n{line}\n").failure_kind != FailureKind.CONFIG_ERROR.value


# pypa/pip src/pip/_internal/commands/install.py (_warn_about_conflicts, logger.critical -> "ERROR: ")
_PIP = ("ERROR: pip's dependency resolver does not currently take into account all the packages that are installed. "
        "This behaviour is the source of the following dependency conflicts.")


def test_pip_conflict_report_is_no_error_record():
    assert error_record(_PIP) is None
    assert error_record("ERROR: Could not find a version that satisfies the requirement torch==9.9") is not None
    text = f"{_PIP}\ntransformers 4.52.3 requires huggingface-hub<1.0\nSuccessfully installed yq-3.4.3\nReady.\n"
    assert trial_outcome(text).failure_kind != FailureKind.CRASHED.value


# ---- 4. "E<epoch> B<batch>/<batches>"
# Johnny221B/latent-MAS scripts/train.log@d4b2a5b5ab18 (the fixture below, its last line)
_SHORT = "oos-batch32/pytorch/b_latent_mas_qwen3_4b_ddp_gsm8k_run_1.log"
_SHORT_REAL = ("  E3 B131/233 | Loss:0.2103 Task:0.2103 Graph:0.0000 | C\u2207:0.004316 A\u2207:0.000007 | tok:0.0s "
               "fwd:5.8s bwd:1.6s | mem:98.5GB | elapsed:1h08m09s eta:2h24m39s")
_SHORT_LOOKALIKES = [
    "loaded 0xE3 B131/233 bytes",  # hex, glued
    "Llama E3 7B/13B loss 2.1",  # a model size
    "E3B131/233 | Loss:0.21",  # no separator
    "B131/233 | Loss:0.21",  # a batch letter alone
]


def test_short_epoch_batch_record_is_read():
    assert is_step_record(_SHORT_REAL)
    out = trial_outcome(body(_SHORT))
    assert out.failure_kind == FailureKind.OK.value


@pytest.mark.parametrize("line", _SHORT_LOOKALIKES)
def test_short_counter_lookalikes_are_not_records(line):
    assert not is_step_record(line)
