"""Family entries taken from the frameworks' own source (Megatron-LM megatron/training/arguments.py and
megatron/core/transformer/transformer_config.py, DeepSpeed deepspeed/runtime/engine.py, runtime/config_utils.py and
utils/timer.py): each message, as the source raises or logs it, maps to its kind; look-alikes do not."""

from __future__ import annotations

import pytest

from analysis.logs.classify import classify
from analysis.logs.families import config
from analysis.logs.outcome import trial_outcome


def _in_traceback(line: str) -> str:
    # a frame outside the argument-check files: only the message decides
    return f'Traceback (most recent call last):\n  File "train.py", line 3, in <module>\n    main()\n{line}\n'


@pytest.mark.parametrize("line", [
    # Megatron-LM arguments.py validate_args (flags named in the message)
    "AssertionError: --use-torch-fsdp2 requires --untie-embeddings-and-output-weights",
    "AssertionError: --model-parallel-size is no longer valid, use --tensor-model-parallel-size instead",
    "ValueError: --fp4-format and --fp8-format cannot be used simultaneously. Please choose one.",
    "AssertionError: Must use --overlap-param-gather with --overlap-grad-reduce",
    # Megatron-LM arguments.py / transformer_config.py (features checked against each other)
    "AssertionError: Group query attention is mutually exclusive with multi latent attention.",
    "AssertionError: Tensor parallel communication/GEMM overlap can happen only when sequence parallelism is enabled",
    "AssertionError: Delaying wgrad compute is only supported with transformer_engine implementation",
    # DeepSpeed runtime/engine.py, runtime/config_utils.py
    "AssertionError: AutoEP with ZeRO Stage 3 does not support sequence parallelism yet (sequence_parallel_size=2).",
    "AssertionError: 'train_batch_size' is a required field and does not have a default value",
    # Lightning's own configuration exception (lightning_fabric/utilities/exceptions.py): the type says it
    "lightning_fabric.utilities.exceptions.MisconfigurationException: You requested gpu: [0, 1] But your machine "
    "only has: [0]",
])
def test_framework_argument_checks_are_config_errors(line):
    assert classify(_in_traceback(line)).kind == "config_error"
    assert classify(f"{line}\n").kind == "config_error"  # relayed alone, without its traceback


@pytest.mark.parametrize("line", [
    "RuntimeError: --foo-bar failed to launch",  # RuntimeError: only divisibility/equality rules count
    "ValueError: invalid literal for int() with base 10: 'abc'",  # parsing data, not a configuration rule
    "AssertionError: loss -- nan at step 10",  # '--' as a dash, not a flag
    "AssertionError: optimizer state is empty",  # a quantity without a rule
    "AssertionError: only when ready",  # a rule without a quantity
    "ValueError: could not convert string to float: 'Misconfiguration'",  # the word, not the type
])
def test_look_alikes_are_not_config_errors(line):
    assert classify(_in_traceback(line)).kind == "crashed"


def test_flag_shape():
    assert config.FLAG.search("requires --untie-embeddings-and-output-weights")
    assert config.FLAG.search("(--no-load-optim)")
    assert not config.FLAG.search("rank 0 -- waiting")
    assert not config.FLAG.search("x--y")


DS_STEP = ("[2024-01-01 10:00:{s:02d},000] [INFO] [logging.py:96:log_dist] [Rank 0] step={n}, skipped=0, "
           "lr=[0.0001], mom=[(0.9, 0.95)]")
DS_TIMERS = ("[2024-01-01 10:00:01,000] [INFO] [logging.py:96:log_dist] [Rank 0] time (ms) | fwd_microstep: 120.51 | "
             "bwd_microstep: 300.20 | bwd_inner_microstep: 290.10 | bwd_allreduce_microstep: 10.02 | "
             "step_microstep: 50.31")


@pytest.mark.parametrize("text", [
    "\n".join(DS_STEP.format(s=k, n=10 * k) for k in range(1, 5)) + "\n",  # engine.py _report_progress
    DS_TIMERS + "\n",  # utils/timer.py names since the rename
])
def test_deepspeed_progress_lines_make_a_log_alone_ok(text):
    outcome = trial_outcome(text)
    assert outcome.failure_kind == "ok", outcome.reason
    crashed = trial_outcome(text + "RuntimeError: CUDA error: an illegal memory access was encountered\n")
    assert crashed.failure_kind == "crashed"


@pytest.mark.parametrize("text", [
    "global_step=10, skipped steps are counted separately\n",  # no 'step=N, skipped=M, lr=['
    "the timers fwd_microstep and bwd_microstep are disabled\n",  # names without the timer line
])
def test_deepspeed_progress_look_alikes(text):
    assert trial_outcome(text).failure_kind == "unknown"


@pytest.mark.parametrize("line", [
    # Megatron-LM core/rerun_state_machine.py validate_result (fatal) and core/distributed/param_and_grad_buffer.py
    "RuntimeError: Rank 0, node n1, device 0, iteration 57: Unexpected result inf (message='found Inf in local grad "
    "norm for bucket #0 in backward pass before data-parallel communication collective')",
    "RuntimeError: Rank 0, node n1, device 0, iteration 900: Unexpected result 9.4e+05 (message='Spiky loss')",
    "AssertionError: found Inf in local grad norm for bucket #1 in backward pass before data-parallel communication "
    "collective",
])
def test_megatron_rerun_state_machine_results_are_divergence(line):
    assert classify(_in_traceback(line)).kind == "diverged"


def test_rerun_look_alike_is_not_divergence():
    line = "RuntimeError: Rank 0, node n1, device 0, iteration 9: Unexpected result 3 (message='bad checksum')"
    assert classify(_in_traceback(line)).kind == "crashed"
