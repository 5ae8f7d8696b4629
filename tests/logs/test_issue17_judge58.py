"""Issue 17 (coordinator, stop 46, judge58: in sample, after batch 49's merged score). Three families batch 49 showed
in wordings no rule held: Horovod's stall inspector (a collective waiting on ranks that never joined it: a hang,
whatever was printed before), Lightning's EarlyStopping monitoring a metric the module never logs (configuration), and
a device allocation failure in the Rust GPU stack's words (out of memory). Records: real lines with their source."""

from __future__ import annotations

import pytest

from analysis.logs.classify import classify

# horovod/horovod#1442 (oos-batch49): BERT pre-training records, then rank 0's stall warning (cut where the issue's
# excerpt wraps it) and its "Stalled ranks:" header
_BERT = "".join(f"INFO:root:[step {s}]  mlm_loss=1.41{s % 10}  nsp_loss= 0.02   throughput=16.2K tks/s  lr=0.0008969 "
                f"time=13229.62, latency=13229.6 ms/batch\n" for s in range(20990, 21000))
_STALL = ("[1,0]<stderr>:[2019-10-09 05:33:38.249493: W horovod/common/stall_inspector.cc:105] One or more tensors were "
          "submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for remaind\n"
          "er of ranks for more than 60 seconds. This may indicate that different ranks are trying to submit different "
          "tensors or that only subset of ranks is submitting tensors, which will cause deadlock.\n"
          "[1,0]<stderr>:Stalled ranks:\n")


def test_horovods_stall_report_after_steps_is_a_hang():
    failure = classify(_BERT + _STALL)
    assert failure.kind == "hang" and "stall report" in failure.reason


def test_horovods_stall_report_below_a_keras_bar_is_a_hang():
    # horovod/horovod#215 (oos-batch49): the warning lands on a Keras progress bar's line
    text = ("Epoch 1/90\n228/625 [=========>....................] - ETA: 6:32 - loss: 7.6713 - acc: 0.0073"
            "---------------------\nWARNING: One or more tensors were submitted to be reduced, gathered or broadcasted "
            "by subset of ranks and are waiting for remainder of ranks for more than 60 seconds.\n")
    assert classify(text).kind == "hang"


def test_prose_about_ranks_waiting_is_not_a_stall_report():
    assert classify(_BERT + "note: ranks waiting at the barrier is normal during checkpointing\n").kind == "ok"


def test_early_stopping_on_a_metric_never_logged_is_a_configuration_error():
    # a NeMo ASR fine-tune (oos-batch49): Lightning's strict check raises at the first validation
    text = ("Epoch 0:  45%|████▌     | 83/184 [00:15<00:18,  5.47it/s, v_num=0, train_loss=0.513]\n"
            "Traceback (most recent call last):\n  File \"finetune.py\", line 88, in <module>\n    trainer.fit(model)\n"
            "RuntimeError: Early stopping conditioned on metric `val_loss` which is not available. Pass in or modify "
            "your `EarlyStopping` callback to use any of the following: `train_loss`, `epoch`\n")
    assert classify(text).kind == "config_error"


@pytest.mark.parametrize("line, kind", [
    # ArthurBrussee/brush#551 (oos-batch49): the allocation failure, then the trainer's own follow-on error
    ("failed to reserve 3595479680 bytes of device memory: can't allocate buffer of size: 3595479680\n"
     "Failed to read counts: An error happened during buffer mapping\n", "oom"),
    ("copied 3595479680 bytes of device memory to the host\n", None),  # no failure, a transfer
])
def test_a_device_allocation_failure_in_the_rust_gpu_stacks_words_is_oom(line, kind):
    steps = "".join(f"[train] step {i}/30000 loss={0.2 - i / 1e5:.5f} ({112.0 + i % 3:.1f} it/s)\n"
                    for i in range(100, 1100, 100))
    verdict = classify(steps + line).kind
    assert verdict == kind if kind else verdict != "oom"
