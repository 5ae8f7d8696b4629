"""Issue 17, batch 8 (helper judge9b): Keras per-step units after a per-epoch time, and step records whose MFU or
TFLOP/s no device can reach. Each rule: a real excerpt (its source), a made-up look-alike, and lines that must not
match."""

from __future__ import annotations

import pytest

from analysis.logs.outcome import trial_outcome
from analysis.logs.parse_generic import read_records

# talmolab/sleap#2230 (tests/fixtures/oos-batch8/other/sleap_train_keras_epochs_ms_per_step_1.log)
_SLEAP = "\n".join(["Epoch 12/200",
                    "1490/1490 - 105s - loss: 1.8771e-05 - val_loss: 1.9864e-05 - lr: 1.0000e-04 - 105s/epoch - "
                    "71ms/step",
                    "Epoch 13/200",
                    "1490/1490 - 107s - loss: 1.7938e-05 - val_loss: 1.9430e-05 - lr: 1.0000e-04 - 107s/epoch - "
                    "72ms/step"])


def _keras(unit: str, value: str) -> str:  # made up: Keras's verbose=2 epoch line with another per-step unit
    return "\n".join(f"Epoch {e}/5\n200/200 - 30s - loss: 0.{e}1 - 30s/epoch - {value}{unit}/step"
                     for e in range(1, 5))


@pytest.mark.parametrize(("text", "expected_s"), [
    (_SLEAP, 0.0715),
    (_keras("s", "2"), 2.0),
    (_keras("ms", "150"), 0.150),
    (_keras("us", "900"), 0.0009),
])
def test_keras_per_step_time_after_a_per_epoch_time_is_the_step_time(text, expected_s):
    reading = read_records(text)
    assert reading.iterations, reading.notes
    times = sorted(i.step_time_s for i in reading.iterations)
    assert times[len(times) // 2] == pytest.approx(expected_s, rel=0.02)


def test_an_epoch_counter_without_a_unit_is_still_the_epoch():
    # "epoch 3" with no unit keeps its meaning (the counter of mmengine/fairseq-style records), not a step time
    text = "\n".join(f"epoch {e} | step {s} | loss 2.{s} | time 1.5s" for e in (1, 2) for s in range(1, 6))
    reading = read_records(text)
    assert {i.step_time_s for i in reading.iterations} == {1.5}
    assert len(reading.iterations) == 10  # epoch 2's steps 1-5 are other steps, not repeats of epoch 1's


# PrimeIntellect-ai/prime-rl#20 (tests/fixtures/oos-batch8/other/prime_rl_mfu_not_divided_by_gpus_337_percent_1.log)
_PRIME_RL = "03:22:14 [INFO] [TRAIN] [Rank 0] step: 289, loss: 0.4310, tokens_per_second: 76477.73, mfu: 337.59"


@pytest.mark.parametrize("text", [
    _PRIME_RL,
    # made up: the same counter gone wrong with a step time, and a TFLOP/s no accelerator reaches
    "\n".join(f"step {s} | loss 2.1 | step_time 1.2s | mfu 145.2%" for s in range(1, 6)),
    "\n".join(f"iteration {s} | elapsed time per iteration (ms): 900.0 | TFLOPs: 48210.5 | loss 3.2"
              for s in range(10, 60, 10)),
])
def test_an_mfu_above_100_or_tflops_no_device_reaches_is_an_invalid_measurement(text):
    outcome = trial_outcome(text)
    assert outcome.failure_kind == "invalid_measurement", outcome.reason
    assert "no device can reach it" in outcome.reason


@pytest.mark.parametrize("text", [
    # nanoGPT prints mfu -100.00% before it has measured (karpathy/nanoGPT's train.py sentinel)
    "\n".join(f"iter {i}: loss 4.2, time 120.5ms, mfu {-100.0 if i < 5 else 38.2:.2f}%" for i in range(10)),
    "\n".join(f"step {s} | loss 2.1 | step_time 1.2s | mfu 0.45" for s in range(1, 6)),  # a fraction
    "\n".join(f"step {s} | loss 2.1 | step_time 1.2s | mfu 99.5%" for s in range(1, 6)),  # a percentage
    "\n".join(f"iteration {s} | elapsed time per iteration (ms): 900.0 | TFLOPs: 1850.5 | loss 3.2"
              for s in range(10, 60, 10)),  # high (FP8 on a B200) but possible
])
def test_possible_mfu_and_tflops_are_not_refused(text):
    assert trial_outcome(text).failure_kind == "ok"


# hiyouga/LlamaFactory#8261 (tests/fixtures/oos-batch8/hf_trainer/llamafactory_loss_zero_then_watchdog_timeout_1.log)
_WATCHDOG_CUT = ("[rank5]:[E602 11:17:52.185053341 ProcessGroupNCCL.cpp:632] [Rank 5] Watchdog caught collective "
                 "operati")
_RECORD = "{{'loss': {loss}, 'grad_norm': 1.41, 'learning_rate': 2.0e-06, 'epoch': 0.01}}"
_BAR = "  1%|          | {n}/1752 [00:{n}<1:22:01,  2.83s/it]"


def _hf(losses: list[str], tail: str) -> str:
    lines = []
    for i, loss in enumerate(losses):
        lines += [_BAR.format(n=10 + i), _RECORD.format(loss=loss)]
    return "\n".join(lines + [tail])


@pytest.mark.parametrize("tail", [
    _WATCHDOG_CUT,  # the real line, cut at the excerpt boundary
    "[rank0]:[E1101 08:00:00.1 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: "
    "WorkNCCL(SeqNum=88, OpType=ALLREDUCE) ran for 1800093 milliseconds before timing out.",  # made up, whole
])
def test_a_lone_zero_loss_beside_a_watchdog_timeout_is_a_comm_error(tail):
    outcome = trial_outcome(_hf(["3.5534", "0.0"], tail))
    assert outcome.failure_kind == "comm_error", outcome.reason


@pytest.mark.parametrize(("losses", "tail"), [
    (["3.5534", "0.0", "0.0"], _WATCHDOG_CUT),  # two zero records: the run's loss broke before the collective
    (["3.5534", "nan"], _WATCHDOG_CUT),  # a NaN loss is divergence whatever follows
    (["3.5534", "0.0"], "Saving model checkpoint to out/checkpoint-40"),  # no communication failure
])
def test_zero_or_nan_losses_still_decide_divergence(losses, tail):
    outcome = trial_outcome(_hf(losses, tail))
    assert outcome.failure_kind == "diverged", outcome.reason


def test_a_watchdog_word_without_a_caught_collective_is_not_a_comm_error():
    text = _hf(["3.5", "3.4", "3.3"], "[I ProcessGroupNCCL.cpp:900] [Rank 0] ProcessGroupNCCL watchdog thread started")
    assert trial_outcome(text).failure_kind != "comm_error"


# an unnamed counter opening the line or the message after a logger prefix
_TINYGRAD = ("    {n} {ms:.2f} ms run,   77.01 ms python,   0.43 ms fetch data, 4081.33 ms AMD * 8,  0.69 loss, "
             "0.000571 LR, 1038.57 GB used, 328033.10 GFLOPS")  # tinygrad/tinygrad#9648
_DPPO = ("[2024-11-12 17:{m:02d}:26,296][agent.pretrain.train_diffusion_agent][INFO] - {n}: train loss   0.1508 | "
         "t: 56.9872")  # irom-princeton/dppo#23


@pytest.mark.parametrize(("text", "expected_s"), [
    ("\n".join(_TINYGRAD.format(n=n, ms=4168.0) for n in range(3, 9)), 4.168),
    ("\n".join(_DPPO.format(m=m, n=87 + m) for m in range(0, 8)), 60.0),  # the records' clock: one per minute
    # made up: a script's "<n> | loss ... | <ms>" per step
    ("\n".join(f"{n} | loss 2.{n} | 250.0ms" for n in range(1, 9)), 0.25),
])
def test_an_unnamed_leading_counter_makes_a_step_record(text, expected_s):
    reading = read_records(text)
    assert reading.iterations, reading.notes
    times = sorted(i.step_time_s for i in reading.iterations)
    assert times[len(times) // 2] == pytest.approx(expected_s, rel=0.02)


@pytest.mark.parametrize("text", [
    "\n".join(f"{n} GPUs found" for n in range(1, 9)),  # a number, no metric
    "\n".join(f"{n} | config entry | value" for n in range(1, 9)),  # a numbered table
    "\n".join(f"[INFO] - {n}: loading shard" for n in range(1, 9)),
])
def test_a_leading_number_without_a_metric_is_no_step_record(text):
    assert read_records(text).n_records == 0


# a record per epoch with no step counter
_ENDO = '{{"train_loss": {loss}, "train_lr": 2.25e-05, "train_wd": 0.0618, "epoch": {e}}}'  # med-air/Endo-FM#16
_DSCHAT = "Epoch {e}/3 with loss {loss}"  # deepspeedai/DeepSpeedExamples#322


@pytest.mark.parametrize("template", [_ENDO, _DSCHAT, "epoch={e} train_loss={loss} epoch_time=61.5s"])  # last: made up
def test_an_epoch_counter_alone_makes_a_record(template):
    text = "\n".join(template.format(e=e, loss=4.0 - e / 10) for e in range(1, 4))
    reading = read_records(text)
    assert reading.n_records == 3, reading.notes
    assert trial_outcome(text).failure_kind == "ok"


@pytest.mark.parametrize("text", [
    "\n".join(f"Epoch {e}/200" for e in range(1, 5)),  # Keras's epoch header: no metric
    # thu-coai/CDial-GPT#101: ignite's bar after the OOM is not a healthy record that outlives the failure
    "RuntimeError: CUDA out of memory. Tried to allocate 20.00 MiB (GPU 0; 10.73 GiB total capacity)\n"
    "Epoch: [63/4391266]   0%|          , loss=0.0535, lr=5e-5 [00:09<174:20:29",
])
def test_an_epoch_header_or_bar_is_not_an_epoch_record(text):
    assert read_records(text).n_records == 0


def test_an_epoch_records_time_is_not_a_step_time():
    # meta-llama/llama-cookbook#428: the epoch's time includes evaluation and many steps
    text = "\n".join(f"Epoch {e}: train_perplexity=1.2784, train_epoch_loss=0.2456, epoch time 27.70759688s"
                     for e in (1, 2, 3))
    reading = read_records(text)
    assert reading.n_records == 3 and not reading.iterations
