"""Issue 17 (coordinator, stop 43, after batch 41's score: in sample). (1) srun terminating a step after a task failed
sends torchrun's agents SIGTERM: their "death signal" is the teardown, not a stop from outside. (2) Megatron's
learning-rate schedule checks its settings in bare asserts (optimizer_param_scheduler.py): argument checks. (3)
build-nanogpt's log file ("38145 train 2.997005") shows training ran. (4) glibc's heap checks and Abseil's failure
signal handler are native faults. (5) DDP's "Expected to have finished reduction in the prior iteration" is fixed by a
setting (find_unused_parameters). (6) MLLOG throughput records keyed by step_num give a step time where the records'
clock agrees with it. Records: real lines with their source."""

from __future__ import annotations

import json

import pytest

from analysis.logs.outcome import trial_outcome

# github elena-lyulina/Megatron-LM-Attention-Benchmark attn_bench/logs/1856639.err (oos-batch41), shortened: a rank's
# traceback, then srun's teardown of the step and torchrun's agent receiving it.
_ASSERT = (
    "0: [default0]:[rank0]: Traceback (most recent call last):\n"
    "0: [default0]:[rank0]:   File \"/scratch/Megatron-LM/megatron/core/optimizer_param_scheduler.py\", line 157, "
    "in __init__\n"
    "0: [default0]:[rank0]:     assert self.lr_warmup_steps < self.lr_decay_steps\n"
    "0: [default0]:[rank0]:            ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
    "0: [default0]:[rank0]: AssertionError\n")
_TEARDOWN = (
    "srun: Terminating StepId=1856639.1\n"
    "0: slurmstepd: error: *** STEP 1856639.1 ON nid006664 CANCELLED AT 2026-04-14T20:13:19 ***\n"
    "1: W0414 20:13:19.536000 126185 torch/distributed/elastic/agent/server/api.py:732] Received 15 death signal, "
    "shutting down workers\n"
    "srun: error: nid006664: task 0: Exited with exit code 1\n")
_SIGNAL = ("1: W0414 20:13:19.536000 126185 torch/distributed/elastic/agent/server/api.py:732] Received 15 death "
           "signal, shutting down workers\n")


def test_srun_tearing_down_a_failed_step_is_no_stop_from_outside() -> None:
    outcome = trial_outcome(_ASSERT + _TEARDOWN)
    assert outcome.failure_kind == "config_error"
    assert "AssertionError" in outcome.evidence[0].text


def test_a_death_signal_without_srun_terminating_is_still_a_stop_from_outside() -> None:
    assert trial_outcome("step 10 loss 2.1\n" + _SIGNAL).failure_kind == "cancelled"


def test_a_bare_assert_outside_the_schedule_stays_a_crash() -> None:
    other = _ASSERT.replace("megatron/core/optimizer_param_scheduler.py", "model/attention.py").replace(
        "self.lr_warmup_steps < self.lr_decay_steps", "q.shape[-1] == k.shape[-1]")
    assert trial_outcome(other).failure_kind == "crashed"


# github badlogicmanpreet/gpt log124M_20B/log.txt (oos-batch41): build-nanogpt's log file, its last lines.
def test_build_nanogpts_log_lines_show_training_ran() -> None:
    text = "".join(f"{38140 + i} train {2.99 + i / 1000:.6f}\n" for i in range(5)) + "38145 hella 0.3200\n"
    outcome = trial_outcome(text)
    assert outcome.failure_kind == "ok"


def test_a_line_of_the_same_words_with_other_numbers_is_no_step() -> None:
    assert trial_outcome("using 8 train 2.5 GB shards\n").failure_kind != "ok"


@pytest.mark.parametrize("line", [
    # https://github.com/uccl-project/uccl/issues/937 (oos-batch41): Ray's prefix and dedup suffix around glibc's and
    # Abseil's lines
    "(MegatronTrainRayActor pid=786375, ip=100.64.25.255) free(): corrupted unsorted chunks [repeated 4x across "
    "cluster]",
    "(MegatronTrainRayActor pid=786373, ip=100.64.25.255) *** SIGABRT received at time=1778656285 on cpu 117 *** "
    "[repeated 6x across cluster]",
    "corrupted double-linked list",
    "munmap_chunk(): invalid pointer",
])
def test_heap_checks_and_abseils_signal_handler_are_native_faults(line: str) -> None:
    assert trial_outcome("step 10 loss 2.1\n" + line + "\n").failure_kind == "crashed"


def test_ddps_unused_parameter_reduction_error_is_a_setting() -> None:
    # https://github.com/hiyouga/LlamaFactory/issues/9240 (oos-batch41), as the excerpt renders it
    text = ("Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n"
            "RuntimeError: Expected to have finished reduction in the prior iteration before starting a new one. "
            "This error indicates that your module has parameters that were not used in producing loss.\n")
    assert trial_outcome(text).failure_kind == "config_error"


# mlcommons/training_results_v4.1 ASUSTeK stable_diffusion result_1.txt (oos-batch41): throughput records every 100
# steps, keyed by step_num; global batch 256.
def _mllog(key: str, value: object, time_ms: int, **meta: object) -> str:
    return ":::MLLOG " + json.dumps({"namespace": "", "time_ms": time_ms, "event_type": "POINT_IN_TIME", "key": key,
                                     "value": value, "metadata": {"file": "callbacks.py", **meta}}) + "\n"


def _sd_run(seconds_per_100_steps: float) -> str:
    text = _mllog("global_batch_size", 256, 1728964149425)
    for i, rate in enumerate([1272.4, 1178.5, 1173.5, 1169.5, 1167.0]):
        text += _mllog("tracked_stats", {"throughput": rate}, 1728964342860 + int(i * seconds_per_100_steps * 1000),
                       step_num=100 * (i + 1))
    return text


def test_throughput_keyed_by_step_num_gives_a_step_time_where_the_clock_agrees() -> None:
    outcome = trial_outcome(_sd_run(21.8))
    assert outcome.metrics["step_time_s"] == pytest.approx(256 / 1173.5, rel=0.01)


def test_a_throughput_the_clock_disagrees_with_gives_none() -> None:
    assert "step_time_s" not in trial_outcome(_sd_run(60.0)).metrics  # a rate of something else than these steps


def test_an_infinite_throughput_or_stamp_is_no_step_time_and_no_error() -> None:
    text = _sd_run(21.8).replace('"throughput": 1178.5', '"throughput": Infinity').replace(
        '"time_ms": 1728964364660', '"time_ms": Infinity')
    outcome = trial_outcome(text)
    assert outcome.failure_kind == "ok" and "unexpected" not in outcome.reason
