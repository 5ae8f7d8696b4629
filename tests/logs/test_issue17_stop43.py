"""Issue 17 (coordinator, stop 43, written while batch 41 was collected: blind to it, in sample for batch 40). (1) A
window's time said after its value ("Elapsed time: 198.8s(100 iters)") is the window's time over its steps, not a
clock since the start. (2) A 0.0 loss beside a tiny finite grad_norm or a positive eval_loss under the printed
precision is a loss rounded to zero (a converged fit), not a broken run. (3) LLaMA-Factory's trainer_log.jsonl: a
step's evaluation record does not restart the run, and a log of one record is timed from train begin. (4) A series
of evaluation records alone (fairseq's "| valid |" lines) is timed by its clock over the updates, not by its
validation batches' rates. (5) A traceback's source line under an exception line is no part of its message; DeepSpeed's
check_ckpt_list (checkpoint count vs saved mp_world_size) is a resume layout mismatch. (6) A saved checkpoint of a
trained step shows training ran. Records: real lines with their source."""

from __future__ import annotations

import pytest

from analysis.logs.outcome import trial_outcome

# https://github.com/MuggleWang/CosFace_pytorch/issues/14 (oos-batch40): the train loop's record every 100 iterations.
_COSFACE = "".join(
    f"2019-09-19 14:{39 + 3 * i:02d}:{s:02d} Train Epoch: 1 [{51200 * (i + 1)}/490871 ({10 * (i + 1)}%)]"
    f"{100 * (i + 1)}, Loss: {24.18 - 0.5 * i:.6f}, Elapsed time: {t}s(100 iters) Margin: 0.4000, Scale: 30.00\n"
    for i, (s, t) in enumerate([(57, 198.7967), (8, 190.1883), (20, 192.1438), (31, 191.0399), (46, 195.0574)]))


def test_a_window_time_said_after_its_value_is_over_the_windows_steps() -> None:
    outcome = trial_outcome(_COSFACE)
    assert outcome.failure_kind == "ok"
    assert outcome.metrics["step_time_s"] == pytest.approx(1.92, rel=0.02)


def test_an_elapsed_time_without_a_window_is_still_a_clock() -> None:
    text = _COSFACE.replace("s(100 iters)", "s")
    assert trial_outcome(text).metrics.get("step_time_s", 0.0) < 1.0  # read as a clock since the start, not per step


# https://huggingface.co/Wilber87vn/whisper-base-hass-vn-original trainer_state.json (oos-batch40): log_history
# entries of an over-fit Whisper fine-tune (the HF Trainer rounds the logged loss to 4 decimals).
def _history(grad_norm: str, eval_loss: str) -> str:
    entries = ['{"epoch": 1.0, "grad_norm": 0.41, "learning_rate": 1e-05, "loss": 0.5312, "step": 25}']
    for step in (1000, 2000, 3000):
        entries.append(f'{{"epoch": {step / 10}, "grad_norm": {grad_norm}, "learning_rate": 1e-05, "loss": 0.0, '
                       f'"step": {step}}}')
        entries.append(f'{{"epoch": {step / 10}, "eval_loss": {eval_loss}, "eval_runtime": 0.72, "step": {step}}}')
    return '{"log_history": [\n' + ",\n".join(entries) + "\n]}\n"


def test_a_zero_loss_with_a_tiny_finite_grad_norm_is_a_rounding() -> None:
    assert trial_outcome(_history("0.000135", "2.5")).failure_kind == "ok"
    assert trial_outcome(_history("0.0", "1.0998e-06")).failure_kind == "ok"


def test_a_zero_loss_with_no_gradient_and_no_better_evaluation_is_still_diverged() -> None:
    assert trial_outcome(_history("0.0", "2.5")).failure_kind == "diverged"
    assert trial_outcome(_history("0.85", "2.5")).failure_kind == "diverged"


# https://huggingface.co/scilo/qwen_finetuned_11_5 trainer_log.jsonl (oos-batch40): evaluation every 5 steps.
_TRAINER_LOG = "".join(
    f'{{"current_steps": {n}, "total_steps": 50, {kind}, "epoch": {n}.0, "percentage": {2 * n}.0, '
    f'"elapsed_time": "{t}", "remaining_time": "0:04:38"}}\n'
    for n, kind, t in [(5, '"eval_loss": 3.99', "0:00:36"), (10, '"loss": 3.3273', "0:01:09"),
                       (10, '"eval_loss": 2.18', "0:01:10"), (15, '"eval_loss": 2.1', "0:01:46"),
                       (20, '"loss": 1.9', "0:02:21"), (20, '"eval_loss": 1.8', "0:02:22"),
                       (25, '"loss": 1.7156', "0:02:58")])


def test_a_steps_evaluation_record_does_not_restart_the_trainer_log() -> None:
    assert trial_outcome(_TRAINER_LOG).metrics["step_time_s"] == pytest.approx(7.1)


def test_a_trainer_log_restart_still_starts_a_new_run() -> None:
    restarted = _TRAINER_LOG + '{"current_steps": 2, "total_steps": 50, "loss": 2.0, "elapsed_time": "0:00:10"}\n'
    assert "step_time_s" not in trial_outcome(restarted).metrics


def test_one_trainer_log_record_of_a_finished_run_is_timed_from_train_begin() -> None:
    # https://huggingface.co/yueqis/web-long-sample trainer_log.jsonl (oos-batch40): the file's only record
    one = ('{"current_steps": 174, "total_steps": 174, "epoch": 0.9957081545064378, "percentage": 100.0, '
           '"elapsed_time": "2:46:57", "remaining_time": "0:00:00"}\n')
    outcome = trial_outcome(one)
    assert outcome.failure_kind == "ok"
    assert outcome.metrics["step_time_s"] == pytest.approx(10017 / 174)
    # in mid-run (it may follow a resume: the steps go on, the clock restarts) it gives no baseline
    assert "step_time_s" not in trial_outcome(one.replace('"total_steps": 174', '"total_steps": 900')).metrics


# https://gist.github.com/sacmehta/01aa80bca2b6e6bd1eaa86f9fede78ae (oos-batch40): fairseq's per-epoch validation.
_FAIRSEQ_VALID = "".join(
    f"2020-07-{d} {t} | INFO | valid | epoch 00{e} | valid on 'valid' subset | loss {loss} | nll_loss 3.525 | "
    f"ppl 11.515 | wps {wps} | wpb 52242.7 | bsz 1413.4 | num_updates {2718 * e} | |\n"
    for e, d, t, loss, wps in [(1, "17", "22:23:56", 5.182, 205045), (2, "18", "01:49:18", 4.464, 203512),
                               (3, "18", "05:15:06", 4.272, 177956), (4, "18", "08:40:26", 4.218, 185219),
                               (5, "18", "12:05:34", 4.156, 183398)])


def test_validation_records_alone_are_timed_by_their_clock() -> None:
    assert trial_outcome(_FAIRSEQ_VALID).metrics["step_time_s"] == pytest.approx(4.533, rel=0.01)


def test_training_records_keep_their_rates() -> None:
    train = _FAIRSEQ_VALID.replace("| valid | ", "| train | ").replace(" | valid on 'valid' subset", "")
    assert trial_outcome(train).metrics["step_time_s"] < 1.0  # wpb / wps of the training updates


# https://github.com/databricks/megablocks (oos-batch40): two ranks' tracebacks interleaved, the exception line of one
# above the other's source line.
_UNPACK = ("Traceback (most recent call last):\n"
           "  File \"/opt/conda/lib/python3.9/site-packages/megablocks/layers/moe.py\", line 37, in "
           "batched_load_balancing_loss\n"
           "ValueError: not enough values to unpack (expected 2, got 0)\n"
           "    tokens_per_expert, expert_scores = zip(*get_load_balancing_loss())\n"
           "ValueError: not enough values to unpack (expected 2, got 0)\n")


def test_a_source_line_under_an_exception_is_no_part_of_its_message() -> None:
    assert trial_outcome(_UNPACK).failure_kind == "crashed"
    # torch's `[rank0]:` prefix goes with the one space after it: the source line keeps three of its four
    assert trial_outcome("".join(f"[rank0]:{line}\n" for line in _UNPACK.splitlines())).failure_kind == "crashed"


def test_a_wrapped_message_still_continues() -> None:
    text = ("Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n"
            "ValueError: global batch size (12) is not divisible by micro batch size (5) times\n"
            "    data parallel size (2)\n")
    assert trial_outcome(text).failure_kind == "config_error"


def test_a_checkpoint_count_other_than_the_saved_mp_world_size_is_a_resume_layout_error() -> None:
    # github sajal-vt/Megatron-DeepSpeed-Summit logs/gpt3-megatron.3362285.e (in the fixtures since batch 21)
    text = ("  File \"/sw/deepspeed/runtime/state_dict_factory.py\", line 174, in check_ckpt_list\n"
            "    assert len(self.ckpt_list) == sd[\n"
            "AssertionError: checkpoint count 1 is different from saved mp_world_size 2\n")
    assert trial_outcome(text).failure_kind == "config_error"


@pytest.mark.parametrize("line", [
    # https://huggingface.co/mikr/whisper-medium-sk-cv11 run.log (oos-batch40): DeepSpeed ZeRO under the HF Trainer
    "[2022-12-20 05:37:30,734] [INFO] [torch_checkpoint_engine.py:27:commit] [Torch] Checkpoint global_step4000 is "
    "ready now!",
    # Megatron-LM megatron/training/checkpointing.py save_checkpoint's line
    "  [2025-01-02 10:00:00.000000] successfully saved checkpoint from iteration    2000 to /ckpt [ t 1/2, gtp_remat "
    "1/1, p 1/1 ]",
    # transformers trainer.py _save_checkpoint, as LLaMA-Factory's logger prints it
    "[INFO|trainer.py:3984] 2024-06-01 10:00:00,000 >> Saving model checkpoint to saves/llama3/checkpoint-500",
])
def test_a_saved_checkpoint_of_a_trained_step_shows_training_ran(line: str) -> None:
    assert trial_outcome(line + "\n").failure_kind == "ok"


@pytest.mark.parametrize("line", [
    "[INFO] [torch_checkpoint_engine.py:27:commit] [Torch] Checkpoint global_step0 is ready now!",
    "[INFO|trainer.py:3984] >> Saving model checkpoint to saves/llama3/checkpoint-0",
])
def test_a_checkpoint_of_step_zero_shows_nothing(line: str) -> None:
    assert trial_outcome(line + "\n").failure_kind != "ok"


# https://github.com/kubeflow/katib/issues/1112 (oos-batch39): `kubectl get pods` of a PyTorchJob's trials.
_PODS = ("NAME                                         READY   STATUS             RESTARTS   AGE\n"
         "pytorchjob-example-82cjcqdz-master-0         0/2     {status}   8          2m32s\n"
         "pytorchjob-example-82cjcqdz-worker-0         0/1     Init:1/2           0          2m31s\n")


@pytest.mark.parametrize(("status", "kind"), [("CrashLoopBackOff", "crashed"), ("ImagePullBackOff", "config_error"),
                                              ("CreateContainerConfigError", "config_error")])
def test_a_pods_status_names_the_containers_fate(status: str, kind: str) -> None:
    assert trial_outcome(_PODS.format(status=status)).failure_kind == kind


def test_a_containers_own_failure_outranks_its_restarts() -> None:
    own = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    assert trial_outcome(_PODS.format(status="CrashLoopBackOff") + own).failure_kind == "oom"


def test_the_words_in_prose_are_no_status() -> None:
    text = "tip: if the pod shows CrashLoopBackOff or ImagePullBackOff, check the image tag\nstep 10 loss 2.1\n"
    assert trial_outcome(text).failure_kind not in ("crashed", "config_error")
