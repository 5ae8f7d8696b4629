"""Issue 17 (coordinator, stop 46, judge57: in sample, after batch 48's merged score). Four families batch 48 showed
in wordings no rule held: TensorFlow's histogram summary of a NaN/inf value (a divergence), NeMo's PreemptionCallback
(a preemption), a training loop that catches the Ctrl-C and says "interrupted by user" (a stop by hand), and the
Intel OpenMP runtime loaded twice (the environment). Records: real lines with their source."""

from __future__ import annotations

import pytest

from analysis.logs.classify import classify

_STEPS = "".join(f"INFO:tensorflow:global step {i}: loss = {3.0 - i / 1000:.4f} (0.412 sec/step)\n"
                 for i in range(1800, 1900, 10))


@pytest.mark.parametrize("line", [
    # tensorflow/models#2661 (oos-batch48): the summary op's refusal, between TensorFlow's own stamps
    "2017-11-10 10:12:11.091486: W tensorflow/core/framework/op_kernel.cc:1192] Invalid argument: Nan in summary "
    "histogram for: FeatureExtractor/MobilenetV1/Conv2d_13_pointwise/weights_1",
    "InvalidArgumentError (see above for traceback): Infinity in summary histogram for: layer2/weights",
])
def test_a_summary_histogram_of_a_non_finite_value_is_a_divergence(line):
    assert classify(_STEPS + line + "\n").kind == "diverged"


def test_prose_about_a_nan_summary_is_not_a_verdict_without_the_error_text():
    assert classify(_STEPS + "note: add 1e-6 to avoid NaN summaries in histograms\n").kind != "diverged"


# NVIDIA/NeMo examples/llm/resiliency notebook (oos-batch48): the callback's two lines after step 4's record
_NEMO = ("[NeMo I 2025-03-07 22:48:01 nemo_logging:393] Training epoch 0, iteration 3/19 | lr: 1.5e-05 | "
         "global_batch_size: 8 | global_step: 3 | reduced_train_loss: 11.03 | train_step_timing in s: 0.4012\n"
         "[NeMo I 2025-03-07 22:48:03 preemption:87] Received signal 15, initiating graceful stop\n"
         "[NeMo I 2025-03-07 22:48:03 preemption:67] Preemption detected, saving checkpoint and exiting\n")


def test_nemos_preemption_callback_is_a_preemption():
    assert classify(_NEMO).kind == "preempted"


# acebot712/rl-token-compression's step records (oos-batch48), shortened
_LOOP_STEPS = "".join(f"Step {i}, Epoch 0: {{'total_loss': {3.9 - i / 100:.3f}}}\n" for i in range(40, 56))


@pytest.mark.parametrize("line", [
    "2025-08-10 02:29:39,926 - src.training.trainer - INFO - Training interrupted by user - Step 55 (Epoch 0)",
    "Interrupted by user",
    "[WARN] fine-tuning interrupted by the user, saving the last adapter",
])
def test_a_loops_own_word_for_a_ctrl_c_is_a_stop_by_hand(line):
    assert classify(_LOOP_STEPS + line + "\n").kind == "cancelled"


@pytest.mark.parametrize("line", [
    "Resume training if it was interrupted by user? (y/n)",  # a prompt, not an event
    "the dataloader was interrupted by a signal",  # not by the user
])
def test_look_alikes_of_a_stop_by_hand(line):
    assert classify(_LOOP_STEPS + line + "\n").kind != "cancelled"


def test_intels_openmp_runtime_loaded_twice_is_the_environment():
    # WongKinYiu/yolov7#1443 (oos-batch48): the runtime's abort glued to the progress bar it cut
    text = ("  0%|          | 0/3 [00:00<?, ?it/s]OMP: Error #15: Initializing libiomp5md.dll, but found "
            "libiomp5md.dll already initialized.\n"
            "OMP: Hint This means that multiple copies of the OpenMP runtime have been linked into the program.\n")
    assert classify(text).kind == "config_error"
