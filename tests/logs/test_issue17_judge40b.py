"""Issue 17 (helper judge40b): batch 35's misses as families, in sample. The fp16 loss scale driven far under 1 by
overflow after overflow (apex amp's and PaddleNLP's wordings); BasicSR's records (a two-digit-year logger stamp,
`l_<term>` losses, a global iteration counter beside a shorter epoch); CNTK's per-epoch "TrainLossPerSample"; records
counted in data-loader batches under a stated gradient accumulation. Each with real lines and their sources, and
look-alikes that must not match."""

from __future__ import annotations

from analysis.logs.families.divergence import loss_scale_collapsed, overflows_under_one
from analysis.logs.outcome import trial_outcome
from analysis.logs.parse_generic import read_records

# ---- 1. the loss scale far under 1, overflow after overflow
# NVIDIA/apex issue 1135 (apex/amp/handle.py skip_step's maybe_print): the scale is raised silently after clean
# windows, so it alternates instead of falling on every line
_APEX = "".join(f"Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to {s}\n" for s in (
    "0.00390625", "0.0078125", "0.00390625", "0.001953125", "0.0009765625", "0.00048828125", "0.0009765625"))
# PaddlePaddle/PaddleNLP issue 7537 (paddlenlp/trainer/trainer.py: logger.warning(f"optimizer not run, scale_before:
# {...}, scale_after: {...}"))
_PADDLE = """[2023-11-28 14:31:29,583] [ WARNING] - optimizer not run, scale_before: 0.25, scale_after: 0.125
[2023-11-28 14:31:29,586] [    INFO] - loss: 2.09252715, learning_rate: 0.0, global_step: 18, interval_runtime: 4.3468, interval_samples_per_second: 3.680853064067234, interval_steps_per_second: 0.23005331650420213, ppl: 8.10537279652747, epoch: 0.0025
[2023-11-28 14:31:34,041] [ WARNING] - optimizer not run, scale_before: 0.125, scale_after: 0.0625
[2023-11-28 14:31:34,045] [    INFO] - loss: 2.04623556, learning_rate: 0.0, global_step: 19, interval_runtime: 4.4585, interval_samples_per_second: 3.588644056739075, interval_steps_per_second: 0.2242902535461922, ppl: 7.738714279163156, epoch: 0.0027
"""


def test_apex_overflows_with_the_scale_far_under_one_are_a_divergence():
    assert loss_scale_collapsed(_APEX) is not None
    assert trial_outcome(_APEX).failure_kind == "diverged"


def test_paddle_optimizer_not_run_under_one_is_a_divergence():
    assert overflows_under_one(_PADDLE) is not None
    assert trial_outcome(_PADDLE).failure_kind == "diverged"


def test_healthy_scale_searches_and_fairseq_half_scales_stay_ok():
    # apex's start-up search (apex#... logs: 32768.0 -> 16384.0 ...) stops far above 1
    search = "".join(f"Gradient overflow.  Skipping step, loss scaler 0 reducing loss scale to {s}\n"
                     for s in ("32768.0", "16384.0", "8192.0", "4096.0"))
    assert overflows_under_one(search) is None
    # fairseq trains at 0.5 (fairseq#506's healthy back-translation run): not this rule's
    fairseq = "| WARNING: overflow detected, setting loss scale to: 0.125\n" * 4
    assert overflows_under_one(fairseq) is None
    # one overflow under 1 is not a run of them; a record's scale ends the run of overflows
    assert overflows_under_one("optimizer not run, scale_before: 0.25, scale_after: 0.125\n") is None
    assert overflows_under_one(_APEX + "| loss_scale 0.125 | step 90 |\n") is None
    # a Paddle skip above the limit (the search from 2**15) is no collapse
    assert overflows_under_one("optimizer not run, scale_before: 32768.0, scale_after: 16384.0\n" * 3) is None


# ---- 2. BasicSR's records (XPixelGroup/BasicSR issues 204 and 192; codes/utils/util.py setup_logger's
# '%(asctime)s.%(msecs)03d - %(levelname)s: %(message)s', datefmt='%y-%m-%d %H:%M:%S'; codes/train.py's
# '<epoch:{:3d}, iter:{:8,d}, lr:{:.3e}> ' and the model's log_dict 'l_pix', 'l_g_pix', ...)
_PSNR = """19-08-11 17:38:53.279 - INFO: Start training from epoch: 0, iter: 0
19-08-11 17:44:05.314 - INFO: <epoch:  1, iter:     100, lr:2.000e-04> l_pix: 6.0063e-02
19-08-11 17:49:00.121 - INFO: <epoch:  3, iter:     200, lr:2.000e-04> l_pix: 5.9322e-02
19-08-11 17:54:00.926 - INFO: <epoch:  5, iter:     300, lr:2.000e-04> l_pix: 4.8096e-02
19-08-11 17:58:55.067 - INFO: <epoch:  7, iter:     400, lr:2.000e-04> l_pix: 4.7359e-02
19-08-11 18:03:34.735 - INFO: <epoch:  9, iter:     500, lr:2.000e-04> l_pix: 5.2223e-02
"""
_ESRGAN = """19-08-09 08:23:24.709 - INFO: <epoch: 86, iter: 107,000> psnr: 1.3831e+01
19-08-09 08:25:25.996 - INFO: <epoch: 86, iter: 107,200, lr:2.500e-05> l_g_pix: 1.4819e-03 l_g_fea: 1.0389e+00 l_g_gan: 7.2056e-02 l_d_real: 1.4378e-05 l_d_fake: 4.0903e-06 D_real: -2.5625e+01 D_fake: -4.0036e+01
19-08-09 08:27:27.746 - INFO: <epoch: 87, iter: 107,400, lr:2.500e-05> l_g_pix: 1.5971e-03 l_g_fea: 9.9606e-01 l_g_gan: 9.4154e-02 l_d_real: 1.4901e-08 l_d_fake: 7.4506e-09 D_real: -2.6405e+01 D_fake: -4.5235e+01
19-08-09 08:29:29.008 - INFO: <epoch: 87, iter: 107,600, lr:2.500e-05> l_g_pix: 1.9925e-03 l_g_fea: 1.0228e+00 l_g_gan: 7.8156e-02 l_d_real: 4.5449e-07 l_d_fake: 3.7998e-07 D_real: -2.1210e+01 D_fake: -3.6841e+01
"""


def test_basicsr_records_are_timed_by_their_clock_over_a_global_iteration_counter():
    reading = read_records(_PSNR)
    assert reading.source == "timestamp difference"
    assert [it.iteration for it in reading.iterations] == [200, 300, 400, 500]
    assert reading.losses == (0.060063, 0.059322, 0.048096, 0.047359, 0.052223)
    out = trial_outcome(_PSNR)
    assert out.failure_kind == "ok" and abs(out.metrics["step_time_s"] - 2.945) < 2.945 * 0.05


def test_basicsr_gan_records_with_thousands_separators():
    out = trial_outcome(_ESRGAN)
    assert out.failure_kind == "ok" and abs(out.metrics["step_time_s"] - 0.607) < 0.607 * 0.05


def test_lookalikes_of_the_basicsr_rules():
    # a per-epoch counter that restarts is still split by its epoch (the clock's advance across an epoch is no step's)
    restart = "".join(f"2024-01-01 00:{m:02d}:00,000 - INFO - epoch {e} batch {b} loss 1.{m}\n"
                      for m, (e, b) in enumerate(((1, 100), (1, 200), (2, 100), (2, 200), (3, 100), (3, 200))))
    assert {it.step_time_s for it in read_records(restart).iterations} == {0.6}
    # "l2"/"l1" are norms, no loss; "l" with a setting word is no loss
    assert read_records("step 1 l2: 0.5\nstep 2 l2: 0.4\n").losses == ()
    assert read_records("step 1 l_weight: 0.5\nstep 2 l_weight: 0.4\n").losses == ()
    # a two-digit-year stamp not at the line's start, or without milliseconds, is not a clock
    assert read_records("x 19-08-11 17:44:05.314 iter: 100 l_pix: 0.06\nx 19-08-11 17:49:05.314 iter: 200 "
                        "l_pix: 0.05\n").source == ""


# ---- 3. CNTK's epoch record (microsoft/CNTK issue 295; Source/SGDLib/SGD.cpp "Finished Epoch[%2d of %d]: [Training
# Set] TrainLossPerSample = %.8g; TotalSamplesSeen = %d; ")
_CNTK = ("Finished Epoch[ 1 of 30]: [Training Set] TrainLossPerSample = 5.5509787; TotalSamplesSeen = 24402857; "
         "EvalErrPerSample = 0.78520584;\n")


def test_cntk_epoch_record_shows_training_ran():
    assert read_records(_CNTK).losses == (5.5509787,)
    out = trial_outcome(_CNTK)
    assert out.failure_kind == "ok" and "step_time_s" not in out.metrics
    # an evaluation's loss per sample is no training record
    assert read_records("Finished Epoch[ 1 of 30]: [Validate] EvalLossPerSample = 5.1;\n").losses == ()


# ---- 4. batch-counted records under a stated gradient accumulation (bruceZhang995/gpt2-chinese-from-Tangyudi
# log/train.log; yangjianxin1/GPT2-chitchat train.py's loop: optimizer.step() every gradient_accumulation_steps
# batches, "batch {} of epoch {}, loss {}, batch_acc {}, lr {}" every log_step batches)
_ARGS = ("2022-07-06 15:26:23,645 - INFO - args:Namespace(batch_size=4, cuda=True, epochs=5, "
         "gradient_accumulation_steps=6, log_step=10, lr=0.00015, max_grad_norm=1.0)\n")
_BATCHES = "".join(f"2022-07-06 15:26:{20 + 2 * i:02d},000 - INFO - batch {10 * i} of epoch 1, loss 4.{i}, "
                   f"batch_acc 0.3, lr [3.75e-08]\n" for i in range(1, 8))


def test_batches_under_gradient_accumulation_are_scaled_to_optimizer_steps():
    plain = read_records(_BATCHES)
    assert {round(it.step_time_s, 6) for it in plain.iterations} == {0.2}  # 2 s per 10 batches
    accumulated = read_records(_ARGS + _BATCHES)
    assert {round(it.step_time_s, 6) for it in accumulated.iterations} == {1.2}  # 6 batches a step
    # a step counter counts optimizer steps: left as it reads
    steps = _ARGS + _BATCHES.replace("- batch ", "- step ")
    assert {round(it.step_time_s, 6) for it in read_records(steps).iterations} == {0.2}
    # two different accumulations stated: which is this run's is unknown, left as it reads
    two = _ARGS + _ARGS.replace("=6", "=8") + _BATCHES
    assert {round(it.step_time_s, 6) for it in read_records(two).iterations} == {0.2}
