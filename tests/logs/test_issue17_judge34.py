"""Issue 17 (helper judge34): the in-sample step-time misses as families. A timer breakdown line (DeepSpeed's
wall_clock_breakdown global timers, Megatron-LM's Timers.log) states a step's phases, not its total: forward + backward
+ the update is the step's time, read only where nothing else in the log times a step. Each: a real line with its
source, look-alikes that must not match."""

from __future__ import annotations

import statistics

import pytest
from log_fixtures import body

from analysis.logs.outcome import trial_outcome
from analysis.logs.parse_generic import MAX_LINE_CHARS, read_records
from analysis.logs.read_log import read_log
from analysis.logs.timer_breakdown import breakdown_step_times, phases_ms, step_ms

# ---- 1. a timer breakdown line: forward + backward + update
# deepspeedai/DeepSpeed deepspeed/utils/timer.py SynchronizedWallClockTimer.log: string = "time (ms)", then
# " | {}: {:.2f}".format(name, elapsed_time); runtime/engine.py DeepSpeedEngine.step logs the global timers
# (fwd, bwd, bwd_inner, bwd_allreduce, step) at each gradient-accumulation boundary. Megatron-LM's 2019 Timers.log
# (DeepSpeedExamples Megatron-LM pretrain_gpt2.py: timers.log(['forward', 'backward', 'optimizer', 'batch generator',
# 'data loader'], normalizer=args.log_interval)).
_REAL = [
    # oos-batch26, DeepSpeed#650 (description): the Megatron-LM GPT-2 example's timers, 10B ZeRO-2 on 32 V100s
    ("oos-batch26/megatron_deepspeed/a_zero2_tutorial_gpt2_10b_32_v100_slow_optimizer_timer_line_1.log",
     207.71 + 3509.10 + 38738.77),
    # oos-batch26, DeepSpeed#650 (comment): DeepSpeed's global timers, older names
    ("oos-batch26/megatron_deepspeed/a_zero2_tutorial_gpt2_10b_nvlink_cluster_wall_clock_breakdown_line_1.log",
     1370.73 + 5053.64 + 11437.30),
]


@pytest.mark.parametrize("path, total_ms", _REAL)
def test_a_real_breakdown_line_is_a_step(path, total_ms):
    text = body(path)
    reading = read_records(text)
    assert reading.source.startswith("timer breakdown")
    assert [it.step_time_s for it in reading.iterations] == [pytest.approx(total_ms / 1000)]
    out = trial_outcome(text)
    assert out.failure_kind == "ok" and out.metrics["step_time_s"] == pytest.approx(total_ms / 1000)


def test_the_current_global_timer_names_and_a_rank_prefix():
    # DeepSpeed 0.19: FORWARD_GLOBAL_TIMER = 'fwd' ... STEP_GLOBAL_TIMER = 'step'; bwd_inner and bwd_allreduce run
    # inside bwd and are not added again
    line = ("[2024-05-01 10:00:01,000] [INFO] [logging.py:96:log_dist] [Rank 0] rank=0 time (ms) | fwd: 120.50 | "
            "bwd: 300.25 | bwd_inner: 250.00 | bwd_allreduce: 50.00 | step: 79.25")
    assert step_ms(phases_ms(line)) == pytest.approx(500.0)
    text = "\n".join(line.replace("10:00:01", f"10:00:{i:02d}") for i in range(1, 9)) + "\n"
    assert [round(s, 6) for _, s in breakdown_step_times(text)] == [0.5] * 8


@pytest.mark.parametrize("line", [
    # the micro-step line (one micro-batch, not a step: oos-batch1 DeepSpeed#255, oos-batch12 min_max_gpt)
    "time (ms) | fwd_microstep: 230.74 | bwd_microstep: 331.51 | bwd_inner_microstep: 149.39 | "
    "bwd_allreduce_microstep: 182.01 | step_microstep: 0.05",
    "time (ms) | forward_microstep: 194.98 | backward_microstep: 337.91 | backward_inner_microstep: 337.86 | "
    "backward_allreduce_microstep: 0.02 | step_microstep: 0.03",
    # one phase alone: ZeRO's optimizer timers (oos-batch8)
    "time (ms) | update_optims: 21766.25 | unscale_grads: 506.45 | optimizer_step: 22850.66",
    # Megatron-LM's per-micro-batch pipeline timers (megatron-logs/megatronlm_bert_iter_mem_1.log)
    "time (ms) | forward-compute: 58.16 | backward-compute: 42.66 | backward-params-all-reduce: 21.43 | "
    "optimizer: 12.00",
    # the global timers before the first step ran (oos-batch8 flops profiler): all zero
    "time (ms) | forward: 0.00 | backward: 0.00 | backward_inner: 0.00 | backward_allreduce: 0.00 | step: 0.0",
    # a phase missing, or two names for one phase
    "time (ms) | forward: 100.00 | backward: 200.00",
    "time (ms) | forward: 100.00 | fwd: 90.00 | backward: 200.00 | step: 5.00",
    # the same words without the timer's heading
    "forward: 100.00 | backward: 200.00 | step: 5.00",
])
def test_look_alikes_are_no_step(line):
    assert breakdown_step_times(line + "\n") == []


def test_any_other_step_time_wins_over_the_breakdown():
    # a log that states its iteration time: the breakdown (which leaves out the data loader) is not read
    megatron = ("time (ms) | forward: 100.00 | backward: 200.00 | optimizer: 50.00 | batch generator: 1.00\n"
                " iteration       10/     100 | elapsed time per iteration (ms): 400.0 | learning rate: 1.0E-04 | "
                "lm loss: 5.0E+00 |\n") * 3
    assert read_log(megatron).iterations[-1].step_time_s == pytest.approx(0.4)
    # a summary's stated step time
    summary = "time (ms) | forward: 100.00 | backward: 200.00 | step: 50.00\naverage step time: 0.42 s\n"
    assert read_records(summary).iterations[-1].step_time_s == pytest.approx(0.42)


# ---- 2. DeepSpeed's ThroughputTimer lines steps apart: the running average's advance times every step
# deepspeedai/DeepSpeed deepspeed/utils/timer.py ThroughputTimer.stop: CurrSamplesPerSec = batch_size /
# step_elapsed_time (reset after every global step: the last step only); avg_samples_per_sec = batch_size /
# (total_elapsed_time / (global_step_count - start_step)), start_step 2.
_ABCI = "oos-batch23/deepspeed/abci_resnet50_imagenet_zero2_36_v100_mpirun_one_epoch_finished_1.log"
_TIMER = ("[2024-07-15 09:37:{s},520] [INFO] [timer.py:258:stop] epoch=0/micro_step={k}/global_step={k}, "
          "RunningAvgSamplesPerSec={r}, CurrSamplesPerSec={c}, MemAllocated=0.15GB, MaxMemAllocated=12.35GB\n")


def test_the_running_average_times_every_step_of_an_interval():
    # real: 10,080 samples a step, a line every 10 steps; the timestamps say ~2.6 s a step, CurrSamplesPerSec 0.4 s
    reading = read_log(body(_ABCI))
    assert reading.format == "deepspeed"
    first = reading.iterations[0]
    # lines 919 and 930: 10080 x (20 - 2) / 3759.408946824442 - 10080 x (10 - 2) / 3763.3210444206475, over 10 steps
    assert (first.iteration, first.step_time_s) == (20, pytest.approx((10080 * 18 / 3759.408946824442
                                                                        - 10080 * 8 / 3763.3210444206475) / 10))
    assert trial_outcome(body(_ABCI)).metrics["step_time_s"] == pytest.approx(2.614, rel=0.01)


def _timer_log(lines: list[tuple[int, float, float]], batch: int = 100) -> str:
    head = f"[2024-07-15 09:36:38,244] [INFO] [config.py:1001:print]   train_batch_size ............. {batch}\n"
    return head + "".join(_TIMER.format(s=f"{i:02d}", k=k, r=r, c=c) for i, (k, r, c) in enumerate(lines))


def test_lines_one_step_apart_keep_the_current_rate():
    # every step printed: the current rate is that step's (here 2.0 s, 1.0 s, ...), read as before
    text = _timer_log([(10, 50.0, 50.0), (11, 60.0, 100.0), (12, 55.0, 40.0)])
    assert [round(it.step_time_s, 6) for it in read_log(text).iterations] == [2.0, 1.0, 2.5]


@pytest.mark.parametrize("lines", [
    [(10, 50.0, 500.0)],  # one line: no interval
    [(20, 50.0, 500.0), (10, 50.0, 500.0)],  # a restart: the step count goes back
    [(10, 50.0, 500.0), (20, 5000.0, 500.0)],  # a running average whose total goes back: not one run's timer
])
def test_no_interval_falls_back_to_the_current_rate(lines):
    reading = read_log(_timer_log(lines))
    assert [it.step_time_s for it in reading.iterations] == [pytest.approx(100 / c) for _, _, c in
                                                            sorted(lines)]


def test_the_old_single_rate_line_is_not_an_interval():
    # before DeepSpeed 0.7: "0/2000, SamplesPerSec=9.52" (one rate); read as before, one step time per line
    text = ("  train_batch_size ............. 16\n" + "".join(
        f"[2021-11-26 03:07:{10 + i},494] [INFO] [timer.py:181:stop] 0/{k}, SamplesPerSec=8.0\n"
        for i, k in enumerate((1000, 2000, 3000))))
    assert [it.step_time_s for it in read_log(text).iterations] == [2.0, 2.0, 2.0]


# ---- 3. a step time printed with its running average ("Time 0.122 (0.158)"), records steps apart
# pytorch/examples imagenet/main.py AverageMeter: fmtstr = '{name} {val' + self.fmt + '} ({avg' + self.fmt + '})',
# the meters made once per epoch in train(); ProgressMeter prints "Epoch: [e][ i/N]" every print_freq batches.
_GNMT = "oos-batch29/pytorch/b_mlperf_v06_nvidia_dgx1_gnmt_reaches_bleu_1.log"


def test_the_running_average_advance_is_every_steps_mean():
    # real: a line every 10 steps; single steps 0.09-0.25 s by sequence-length bucket; the label is the 0.158 s average
    reading = read_records(body(_GNMT))
    assert "running average's advance" in reading.source
    assert trial_outcome(body(_GNMT)).metrics["step_time_s"] == pytest.approx(0.158, rel=0.03)


def _imagenet(steps_s: list[float], *, print_freq: int = 10, first: int = 0, decimals: int = 3) -> str:
    lines, total = [], 0.0
    for i, t in enumerate(steps_s):
        total += t
        if i >= first and i % print_freq == 0:
            lines.append(f"Epoch: [0][{i:4d}/5005]\tTime {t:6.{decimals}f} ({total / (i + 1):6.{decimals}f})\t"
                         f"Data  0.001 ( 0.002)\tLoss 6.9 ( 6.9)\tAcc@1   0.00 (  0.10)\n")
    return "".join(lines)


def _alternating(n: int) -> list[float]:
    # the printed steps (every 10th) are the fast kind: 0.1 s; the others 0.3 s (a mean of 0.28 s)
    return [0.1 if i % 10 == 0 else 0.3 for i in range(n)]


def test_an_average_meter_log_from_its_start_reads_the_mean_of_every_step():
    reading = read_records(_imagenet(_alternating(3000)))
    assert "running average's advance" in reading.source
    times = [it.step_time_s for it in reading.iterations]
    assert statistics.median(times) == pytest.approx(0.28, rel=0.02)


@pytest.mark.parametrize("text", [
    _imagenet(_alternating(3000), first=1200),  # an excerpt from step 1200: the meter's count is unknown
    _imagenet(_alternating(3000), print_freq=1),  # every step printed: the current values are every step
    _imagenet(_alternating(300), decimals=1),  # an average printed too coarsely for the log's length
])
def test_otherwise_the_current_values_stand(text):
    reading = read_records(text)
    assert "running average's advance" not in reading.source
    assert reading.source.startswith("stated step time")


# ---- 4. (batch 30) veRL's one-line step record, longer than MAX_LINE_CHARS
# volcengine/verl verl/utils/logger/aggregate_logger.py concat_dict_to_str: output = [f"step:{step}"], then
# f"{k}:{pprint.pformat(v)}" for every metric, " - ".join(output): timing_s/step comes after ~130 fields.
_VERL = "oos-batch30/other/c_finqa_verl_grpo_qwen3b_240_of_240_final_validation_1.log"


def test_a_verl_record_past_two_thousand_characters_keeps_its_step_time():
    text = body(_VERL)
    record = next(line for line in text.splitlines() if " step:240 - " in line)
    assert len(record) > MAX_LINE_CHARS and record.find("timing_s/step:") > MAX_LINE_CHARS
    assert read_records(text).iterations[-1].step_time_s == pytest.approx(129.87089215032756)
    assert trial_outcome(text).metrics["step_time_s"] == pytest.approx(129.87, rel=1e-4)


def test_a_long_line_is_read_past_the_cut_only_for_a_time_key():
    fields = " - ".join(f"actor/metric_{i}:{i}.5" for i in range(200))
    # "dt" names a step time but not with "tim": past 2,000 characters the line is cut as before (bounded work)
    cut = "".join(f"step:{k} - {fields} - dt:1.5\n" for k in (1, 2, 3))
    assert cut.find("dt:1.5") > MAX_LINE_CHARS and read_records(cut).iterations == ()
    read = cut.replace("dt:1.5", "timing_s/step:1.5")
    assert [it.step_time_s for it in read_records(read).iterations] == [1.5, 1.5, 1.5]


# ---- 5. (batch 30) Cosmos' IterSpeed callback: "<iteration> : iter_speed 3.70 seconds per iteration | Loss: ..."
# nvidia-cosmos cosmos_predict1/diffusion/training/callbacks/iter_speed.py every_n_impl:
#     log.info(f"{iteration} : iter_speed {iter_speed:.2f} seconds per iteration | Loss: {loss.item():.4f}")
_COSMOS = "oos-batch30/pytorch/b_cosmos_predict1_3b_posttrain_single_gpu_fsdp_iter_speed_healthy_1.log"


def test_cosmos_iter_speed_records_are_step_records():
    text = body(_COSMOS)
    reading = read_records(text)
    assert [it.iteration for it in reading.iterations] == [2000, 3000, 4000, 5000, 6000]
    assert [it.step_time_s for it in reading.iterations] == pytest.approx([3.70, 3.78, 3.63, 3.69, 3.75])
    out = trial_outcome(text)
    assert out.failure_kind == "ok" and out.metrics["step_time_s"] == pytest.approx(3.70)


@pytest.mark.parametrize("line", [
    "[04-07 05:33:01|INFO|trainer.py:144:train] 8 GPUs found, 2 nodes",  # a count after a logger prefix, no metric
    "[2024-04-07 05:33:01] 2000: saved checkpoint in 3.70 seconds",  # no blank before the colon: not this print
    "evaluation 3.70 seconds per sample",  # per sample, not per step
])
def test_cosmos_look_alikes_are_no_step_records(line):
    assert read_records((line + "\n") * 3).iterations == ()


# ---- 6. (batch 30) dlib's dnn_trainer progress lines: "step#: 48076  learning rate: 0.1   train loss: 2.23e+13 ..."
# davisking/dlib dlib/dnn/trainer.h print_periodic_verbose_status: std::cout << "step#: " <<
# rpad(cast_to_string(train_one_step_calls), epoch_string_pad) << "  " << "learning rate: " ... "train loss: " ...
_DLIB = "oos-batch30/other/a_dlib_mmod_bbox_regression_train_loss_blows_up_to_2e13_1.log"


def test_dlib_step_lines_are_records_and_their_loss_series_diverges():
    text = body(_DLIB)
    assert read_records(text).n_records == 9
    out = trial_outcome(text)
    assert out.failure_kind == "diverged" and "2.23024e+13" in out.reason


def test_a_healthy_dlib_run_is_ok():
    text = "".join(f"step#: {n}  learning rate: 0.1   train loss: {0.9 - n / 1e6:.6f}     test loss: 1.03  "
                   "steps without apparent progress: train=280, test=181\n" for n in range(47000, 48000, 24))
    assert read_records(text).n_records > 40 and trial_outcome(text).failure_kind == "ok"


@pytest.mark.parametrize("line", [
    "Step#: 12, Reward: 3.5, Action: 2, currentShipDamage: 0",  # an RL environment's step: no training metric
    "current step#: 3",  # a workflow's step number alone
])
def test_dlib_look_alikes_are_no_records(line):
    assert read_records((line + "\n") * 3).n_records == 0
