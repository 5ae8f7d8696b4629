"""Issue 17, batch 11 (helper judge11b): the healthy and hang side. Each rule: a real excerpt (its source), a
made-up look-alike, and lines that must not match."""

from __future__ import annotations

import pytest

from analysis.logs.classify import classify
from analysis.logs.families import dumps
from analysis.logs.outcome import trial_outcome
from analysis.logs.parse_generic import _keras_epoch_step, read_records
from analysis.logs.steady_state import steady_state

# ---- stack dumps of a live job are a hang's evidence, and their text is not the job's output

# DeepSpeed#5030 (tests/fixtures/oos-batch11/deepspeed/zeropp_hpz_llama2_7b_two_nodes_hangs_py_spy_cut_1.log),
# cut after the process line as the thread's excerpt is
_PY_SPY_CUT = ("$ py-spy dump  --pid  7114\n"
               "Process 7114: /export/apps/python/3.10/bin/python3 -u src/train.py --model_path /shared/llama-2-7b-hf "
               "--bf16 True --max_steps 50 --per_device_train_batch_size 16 --gradient_checkpointing "
               "--max_seq_length 2048 --save_strategy no --learning_rate 2e-5 --deepspeed src/base\n")
# made up in py-spy's full format (src/dump.rs): frames whose text names a validation function and a local whose
# value states a rule
_PY_SPY_FULL = ("py-spy dump --locals --pid 147\n"
                "Process 147: /usr/bin/python -u train.py --tensor_model_parallel_size 8 --num_attention_heads 12\n"
                "Python v3.10.12 (/usr/bin/python3.10)\n\n"
                'Thread 147 (active+gil): "MainThread"\n'
                "    _all_gather_into_tensor (torch/distributed/distributed_c10d.py:2709)\n"
                "    _configure_train_batch_size (deepspeed/runtime/config.py:935)\n"
                "        Arguments:\n"
                "            self: <DeepSpeedConfig at 0x7f3a>\n"
                "        Locals:\n"
                "            msg: \"train_batch_size must be divisible by micro_batch * grad_acc * world_size\"\n"
                "    ncclGroupEnd (libnccl.so.2)\n"
                'Thread 201 (idle): "Thread-1"\n'
                "    wait (threading.py:324)\n")
# CPython faulthandler.dump_traceback_later's format (Modules/faulthandler.c), made up
_FAULTHANDLER = ("iteration 10/100 | loss 2.31 | elapsed time per iteration (ms): 512.0\n"
                 "Timeout (0:30:00)!\n"
                 "Thread 0x00007f4a25687c40 (most recent call first):\n"
                 '  File "/opt/deepspeed/runtime/engine.py", line 1456 in _checkpoint_tag_validation\n'
                 '  File "/opt/torch/distributed/distributed_c10d.py", line 3328 in barrier\n')


@pytest.mark.parametrize("text", [_PY_SPY_CUT, _PY_SPY_FULL, _FAULTHANDLER,
                                  # a dump by signal (faulthandler.register), Python 3.13's thread name
                                  "Current thread 0x00007f4a25687c40 [python3] (most recent call first):\n"
                                  '  File "/x/train.py", line 12 in step\n'])
def test_a_live_stack_dump_is_a_hang_whatever_its_frames_say(text):
    verdict = classify(text)
    assert verdict.kind == "hang" and "stack dump" in verdict.reason
    assert "train_batch_size" not in verdict.reason and "--max_steps" not in verdict.reason


def test_a_dump_is_blanked_but_for_its_marker_line():
    spans = dumps.live_dumps(_PY_SPY_FULL)
    assert len(spans) == 1 and spans[0][0] == 0
    shown = dumps.masked(_PY_SPY_FULL, spans)
    assert len(shown) == len(_PY_SPY_FULL) and shown.count("\n") == _PY_SPY_FULL.count("\n")
    assert shown.startswith("py-spy dump --locals --pid 147\n")
    assert "divisible" not in shown and "_configure_train_batch_size" not in shown and "Process" not in shown


@pytest.mark.parametrize("text, expected", [
    # a fatal signal's dump is a crash's report (CPython faulthandler fatal_error)
    ("Fatal Python error: Segmentation fault\n\nCurrent thread 0x00007f4a25687c40 (most recent call first):\n"
     '  File "/x/train.py", line 12 in step\n', "crashed"),
    # the error that ended the job after the dump decides
    (_PY_SPY_FULL + "Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n"
     "RuntimeError: CUDA error: an illegal memory access was encountered\n", "crashed"),
    (_PY_SPY_FULL + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n", "oom"),
    # a configuration error outside the dump is still read
    ("AssertionError: tensor parallel size 8 must divide the number of attention heads 12\n" + _PY_SPY_CUT,
     "config_error"),
    # the run went on after someone dumped it: its later records decide
    (_PY_SPY_FULL + "".join(f"iteration {i}/100 | loss 2.3 | elapsed time per iteration (ms): 512.0\n"
                            for i in range(10, 40, 10)), "ok"),
])
def test_dump_look_alikes(text, expected):
    assert trial_outcome(text).failure_kind == expected


@pytest.mark.parametrize("line", [
    "Process 7114: /usr/bin/python train.py --max_steps 50",  # no py-spy command or version line with it
    "Python v3.10.12",  # an environment banner without py-spy's interpreter path
    "I ran py-spy and it showed the threads waiting",
    "Thread 3 started",
    "Timeout (30s) waiting for the store",
])
def test_lines_that_are_not_a_dump_marker(line):
    assert dumps.live_dumps(line + "\n") == []


# ---- PaddlePaddle's batch_cost records; a year-less date is not a counter; warm-up only at a run's start

# PaddleOCR#2083 (oos-batch11 other/paddleocr_rec_2080ti_reader_bound_batch_cost_records_1.log)
def _paddle_ocr(first_iter: int) -> str:
    return "".join(
        f"[2021/02/23 22:5{i}:00] root INFO: epoch: [5/500], iter: {first_iter + 10 * i}, lr: 0.001000, loss: 4.88, "
        f"acc: 0.598958, reader_cost: {r - 0.6:.5f} s, batch_cost: {r:.5f} s, samples: 960, ips: 16.05686\n"
        for i, r in enumerate((5.97875, 3.77421, 2.78157, 4.39655)))


_PADDLE_OCR = _paddle_ocr(11550)
# PaddleX#2884 (oos-batch11 other/paddlex_ppdet_distributed_train_batch_cost_records_1.log), abridged
_PPDET = "".join(
    f"[02/04 22:46:24] ppdet.engine.callbacks INFO: Epoch: [0] [{n}/7312] learning_rate: 0.000029 loss: 4.504654 "
    f"eta: 67 days, 10:28:48 batch_cost: {b} data_cost: 0.0034 ips: 96.1758 images/s, max_mem_reserved: 42653 MB\n"
    for n, b in ((2087, 0.1664), (2088, 0.1876), (2089, 0.1930), (2090, 0.4535)))


def test_paddle_batch_cost_is_the_step_time_and_an_excerpt_far_into_a_run_has_no_warm_up():
    stats = steady_state(read_records(_PADDLE_OCR).iterations)
    assert stats.median_step_time_s == pytest.approx(4.08538, rel=1e-4)  # the label: the median of the four
    reading = read_records(_PPDET)
    assert [it.iteration for it in reading.iterations] == [2087, 2088, 2089, 2090]  # not "02/04" -> step 2
    assert steady_state(reading.iterations).median_step_time_s == pytest.approx(0.1903, rel=0.05)


def test_a_run_from_its_start_still_drops_its_warm_up():
    # PaddleOCR#1181 (oos-batch11 other/paddleocr_benchmark_log_format_batch_cost_records_1.log, abridged): records
    # from iter 10 of epoch 0; the first (6.3 s) is warm-up, labelled so
    text = "".join(f"[2020/11/16 11:11:{20 + i}] root INFO: epoch: [0/100], iter: {10 * (i + 1)}, lr: 0.001000, "
                   f"acc: 0.507812, loss: 0.698222, reader_cost: 2.3 s, batch_cost: {b} s, samples: 5120, ips: 198.9\n"
                   for i, b in enumerate((6.29982, 2.57432, 2.57905, 2.60749, 2.61313, 2.56124)))
    stats = steady_state(read_records(text).iterations)
    assert stats.n_warmup == 1 and stats.median_step_time_s == pytest.approx(2.58358, rel=0.01)


@pytest.mark.parametrize("line", [
    "[INFO] epoch: 1, iter: 20/500, loss: 2.0859, reader_cost: 0.07273, ips: 3.7425 samples/sec",  # a part only
    "epoch 3 step 10 cost: 2.31",  # a loss named cost (old TF tutorials)
])
def test_costs_that_are_not_a_step_time(line):
    assert all(it.step_time_s != pytest.approx(0.07273) and it.step_time_s != pytest.approx(2.31)
               for it in read_records(line * 3).iterations)


# ---- Keras' epoch line: the per-step field or the epoch's mean, whichever is more precise

@pytest.mark.parametrize("line, expected", [
    # ssd_keras#344 (oos-batch11 other/ssd_keras_pascal_1070_epoch_records_2s_per_step_1.log): "2s/step" is
    # 1.5-2.5 s; 1843 s / 1000 steps agrees with it and is precise to 0.5 ms
    ("1000/1000 [==============================] - 1843s 2s/step - loss: 3.8849 - val_loss: 3.2442", "1.843s/step"),
    # made up: Keras 3's bar
    ("1000/1000 ━━━━━━━━━━━━━━━━━━━━ 1843s 2s/step - loss: 3.88", "1.843s/step"),
    # sleap#2230 (oos-batch8): two digits are precise enough; they stay
    ("1490/1490 - 105s - loss: 1.8771e-05 - val_loss: 1.9864e-05 - lr: 1.0000e-04 - 105s/epoch - 71ms/step",
     "71ms/step"),
    # the total's rounding (1 s / 100) is coarser than the field's: the field stays
    ("100/100 [====] - 1s 6ms/step - loss: 0.3", "6ms/step"),
    # a slow first step makes the mean disagree with the field (tf.keras times steps after the first): it stays
    ("10/10 [====] - 60s 2s/step - loss: 1.0", "2s/step"),
    # mid-epoch: no total yet
    ("500/1000 [==>...] - ETA: 10s - loss: 3.1", "ETA: 10s"),
])
def test_keras_epoch_step(line, expected):
    assert expected in _keras_epoch_step(line)


def test_keras_epoch_records_give_the_epoch_mean():
    text = "".join(f"1000/1000 [==============================] - {t}s 2s/step - loss: 3.88 - val_loss: 3.24\n"
                   f"Epoch {i + 2}/120\n" for i, t in enumerate((1843, 1898, 1893, 1765, 1649)))
    assert trial_outcome(text).metrics["step_time_s"] == pytest.approx(1.843, rel=0.01)


# ---- end-of-run summaries without step records: a profile of a step, a trainer's final metrics

# DeepSpeed#4385 (oos-batch11 deepspeed/megatron_gpt_1_5b_flops_profiler_summary_step21_16_gpus_1.log), abridged
_PROFILE = ("-------------------------- DeepSpeed Flops Profiler --------------------------\n"
            "Profile Summary at step 21:\nNotations:\n"
            "step (weights update latency), iter latency (sum of fwd, bwd and step latency)\n\n"
            "world size:                                                   16      \n"
            "params per gpu:                                               1575.59 M\n"
            "fwd flops per GPU:                                            12906.92 G\n")


def test_a_flops_profile_is_a_step_that_ran_and_its_iter_latency_the_step_time():
    outcome = trial_outcome(_PROFILE)
    assert outcome.failure_kind == "ok" and "flops profile" in outcome.reason
    # Megatron-DeepSpeed#98's srun label prefix, and the summary's latency lines (profiler.py's format, values made up)
    full = ("0: " + _PROFILE.replace("\n", "\n0: ").rstrip("0: ")
            + "0: fwd latency:                                                  76.67 ms\n"
              "0: step latency:                                                 34.09 us\n"
              "0: iter latency:                                                 184.73 ms\n")
    outcome = trial_outcome(full)
    assert outcome.failure_kind == "ok" and outcome.metrics["step_time_s"] == pytest.approx(0.18473)


@pytest.mark.parametrize("text", [
    "Profile Summary at step 0:\n",  # nothing ran yet
    "step (weights update latency), iter latency (sum of fwd, bwd and step latency)\n",  # the notation line
])
def test_profile_look_alikes(text):
    outcome = trial_outcome(text)
    assert outcome.failure_kind != "ok" and "step_time_s" not in outcome.metrics


@pytest.mark.parametrize("text", [
    # transformers examples' log_metrics block (the shape of run_clm.py's output; values made up)
    "***** train metrics *****\n  epoch                    =        3.0\n  train_runtime            = 0:12:34.56\n"
    "  train_samples_per_second =     12.345\n",
    "{'train_runtime': 754.56, 'train_samples_per_second': 12.345, 'train_loss': 0.51, 'epoch': 3.0}\n",
])
def test_a_trainers_final_metrics_are_a_finished_run(text):
    assert trial_outcome(text).failure_kind == "ok"


def test_a_runtime_that_is_not_the_trainers_metrics_is_not_a_finish():
    assert trial_outcome("estimated train_runtime unknown until the first step\n").failure_kind != "ok"


# ---- a loss that jumps by a large factor and stays; NaN in bare records

# GPT-NeoX#947 (oos-batch11 megatron_deepspeed/gptneox_llama_weights_bf16_lm_loss_jumps_2_to_11_1.log), abridged
_NEOX = (" samples/sec: 1.702 | iteration        1/   55000 | elapsed time per iteration (ms): 18806.7 | learning rate:"
         " 1.212E-09 | approx flops per GPU: 5.7TFLOPS | lm_loss: 2.275809E+00 | number of skipped iterations:   0 |"
         " number of nan iterations:   0 |\n"
         " samples/sec: 2.721 | iteration        2/   55000 | elapsed time per iteration (ms): 11761.2 | learning rate:"
         " 2.424E-09 | approx flops per GPU: 9.1TFLOPS | lm_loss: 1.105449E+01 | number of skipped iterations:   0 |"
         " number of nan iterations:   0 |\n")


def test_a_loss_that_jumps_three_fold_and_stays_is_diverged():
    outcome = trial_outcome(_NEOX)
    assert outcome.failure_kind == "diverged" and "jumped" in outcome.reason


def _records(losses: list[float]) -> str:
    return "".join(f"iteration {10 * (i + 1)}/1000 | elapsed time per iteration (ms): 500.0 | lm loss: {v:.4E} |\n"
                   for i, v in enumerate(losses))


@pytest.mark.parametrize("losses", [
    [10.5, 8.0, 5.0, 3.0, 2.5, 2.2, 11.0, 10.8],  # made up: back to the untrained level from a trained one
    [2.1, 2.3, 2.0, 2.2, 7.9],  # made up: the last record 3.6x every one before it
])
def test_jump_look_alikes_that_diverge(losses):
    assert trial_outcome(_records(losses)).failure_kind == "diverged"


@pytest.mark.parametrize("losses", [
    [2.1, 2.6, 1.9, 3.4, 2.0, 2.7, 2.2, 4.1, 2.3],  # made up: a noisy loss, spikes under 2x, healthy
    [10.5, 8.0, 5.0, 3.0, 2.5, 2.2, 7.0, 2.1],  # a spike that recovered
    [0.001, 0.002, 0.0015, 0.01, 0.012],  # near zero: large factors, no meaning (JUMP_MIN_LOSS)
    [11.0, 9.0, 7.5, 6.0, 5.2],  # an untrained start falling
])
def test_noisy_or_recovering_losses_stay_ok(losses):
    assert trial_outcome(_records(losses)).failure_kind == "ok"


# yanmtt#7 (oos-batch11 other/yanmtt_bart_pretraining_fp16_nan_after_70k_steps_1.log)
_YANMTT = ("...\n76930 2.6496577\n76940 2.59109\n76950 2.596339\n76960 2.735384\n76970 2.6265104\n76980 nan\n"
           "76990 nan\nSaving the model\nLoading from checkpoint\nLoading from checkpoint\n77000 nan\n77010 nan\n...\n")


@pytest.mark.parametrize("text", [_YANMTT, "step,loss\n1,2.31\n2,2.20\n3,2.12\n4,inf\n5,inf\n"])
def test_bare_step_value_records_that_turn_nan_are_diverged(text):
    outcome = trial_outcome(text)
    assert outcome.failure_kind == "diverged", outcome.reason


@pytest.mark.parametrize("text", [
    "76930 2.64\n76940 2.59\n76950 nan\n76960 2.73\n76970 2.62\n",  # one NaN that the run got past
    "1 nan\n2 nan\n3 nan\n4 nan\n",  # never finite: a column of something else
    "2024 nan\n2023 2.1\n2022 nan\n2021 nan\n2020 nan\n",  # falling first column: not steps
])
def test_bare_records_that_do_not_diverge(text):
    assert trial_outcome(text).failure_kind != "diverged"


# ---- a log that ends in DeepSpeed's pipeline partition listing ends in that set-up phase

# Megatron-DeepSpeed#116 (oos-batch11 megatron_deepspeed/pipe_dp4_stuck_at_round_robin_gradient_partitioning_cut_1
# .log), abridged
_PIPE = ("Using topology: {ProcessCoord(pipe=0, data=0, model=0): 0, ProcessCoord(pipe=0, data=1, model=0): 1}\n"
         "[2023-03-06 11:49:28,451] [INFO] [module.py:372:_partition_layers] Partitioning pipeline stages with method "
         "type:transformer\nstage=0 layers=31\n     0: _to_float16\n     1: EmbeddingPipe\n     2: <lambda>\n"
         + "".join(f"    {i:2d}: ParallelTransformerLayerPipe\n" for i in range(3, 27))
         + "    27: <lambda>\n    28: MixedFusedLayerNorm\n    29: EmbeddingPipe\n")


def test_a_log_ending_in_the_pipeline_partition_listing_is_a_hang():
    verdict = classify(_PIPE)
    assert verdict.kind == "hang" and "partitioning the pipeline" in verdict.reason
    # made up: the listing with its loss line
    assert classify(_PIPE + "  loss: CrossEntropyLoss\n").kind == "hang"


@pytest.mark.parametrize("text", [
    _PIPE + "[INFO] [engine.py:99:train_batch] step=10, skipped=0, lr=[0.0001]\n"
            " iteration       10/   1000 | elapsed time per iteration (ms): 812.0 | lm loss: 7.1E+00 |\n",  # it trained
    "results\n  1: ok\n  2: ok\n",  # a numbered list after no set-up phase
])
def test_listing_look_alikes(text):
    assert classify(text).kind != "hang"


# ---- warnings with time passing and no record after the last activity

# NVIDIA-NeMo/Speech#7938 (oos-batch11 nemo/asr_conformer_ctc_multinode_hangs_after_epoch_checkpoint_warning_1.log):
# the one warning line; no time passes in the excerpt
_NEMO_WARN = ("[NeMo W 2023-11-25 21:45:41 nemo_logging:349] /usr/local/lib/python3.10/dist-packages/pytorch_lightning/"
              "trainer/connectors/logger_connector/result.py:433: PossibleUserWarning: It is recommended to use "
              "`self.log('global_step', ..., sync_dist=True)` when logging on epoch level in distributed setting\n")


def test_a_single_warning_line_is_not_a_hang():
    assert classify(_NEMO_WARN).kind == "unknown"


@pytest.mark.parametrize("text", [
    # made up: the epoch's checkpoint, then the same warning 44 minutes later and nothing else
    "[NeMo I 2023-11-25 21:00:41 exp_manager:100] Epoch 0, global step 1000: val_wer reached 0.25, saving model\n"
    + _NEMO_WARN,
    # made up: step records, then torch c10 warnings for 40 minutes (DDP's reducer.cpp wording)
    "".join(f"2024-01-01 10:0{i}:00 | step {i + 1} | loss 2.3 | step_time 0.5s\n" for i in range(3))
    + "2024-01-01 10:05:00 [W reducer.cpp:1300] Warning: find_unused_parameters=True was specified in DDP constructor,"
      " but did not find any unused parameters in the forward pass\n"
      "2024-01-01 10:45:00 [W reducer.cpp:1300] Warning: find_unused_parameters=True was specified in DDP constructor,"
      " but did not find any unused parameters in the forward pass\n",
])
def test_warnings_long_after_the_last_activity_are_a_hang(text):
    assert trial_outcome(text).failure_kind == "hang"


@pytest.mark.parametrize("text", [
    # warnings within minutes of the last record: a healthy excerpt
    "".join(f"2024-01-01 10:0{i}:00 | step {i + 1} | loss 2.3 | step_time 0.5s\n" for i in range(3))
    + "2024-01-01 10:03:00 WARNING: gradient overflow, skipping\n2024-01-01 10:04:00 WARNING: slow data loader\n",
    # a record after the warnings: progress
    "2024-01-01 10:00:00 WARNING: x\n2024-01-01 11:00:00 WARNING: y\n"
    "2024-01-01 11:00:01 | step 5 | loss 2.3 | step_time 0.5s\n",
])
def test_warnings_that_are_not_a_stall(text):
    assert trial_outcome(text).failure_kind != "hang"


# made up in gdb's format (gdb -p PID, "thread apply all bt") and pystack's (pystack remote PID)
_GDB = ("Attaching to process 4242\n"
        'Thread 2 (Thread 0x7f0f1b5ff640 (LWP 4250) "python"):\n'
        "#0  0x00007f0f2a891117 in __futex_abstimed_wait_common () from /lib/x86_64-linux-gnu/libc.so.6\n"
        "#1  0x00007f0e9c2b1a2d in ncclGroupEnd () from /usr/lib/libnccl.so.2\n"
        'Thread 1 (Thread 0x7f0f2a7a5740 (LWP 4242) "python"):\n'
        "#0  0x00007f0f2a8911e0 in pthread_cond_wait ()\n")
_PYSTACK = ("Traceback for thread 4242 (python) [] (most recent call last):\n"
            '    (Python) File "/app/train.py", line 120, in <module>\n        main()\n'
            '    (Python) File "/opt/torch/distributed/distributed_c10d.py", line 3328, in barrier\n'
            "        work.wait()\n")


@pytest.mark.parametrize("text", [_GDB, _PYSTACK])
def test_gdb_and_pystack_dumps_of_a_live_process_are_a_hang(text):
    assert classify(text).kind == "hang"


def test_a_core_files_backtrace_is_not_a_live_dump():
    core = ("Core was generated by `python train.py'.\nProgram terminated with signal SIGSEGV, Segmentation fault.\n"
            + _GDB.split("\n", 1)[1])
    assert dumps.live_dumps(core) == []
    # a fatal faulthandler report with many threads: none of its later thread headers is a live dump
    fatal = ("Fatal Python error: Segmentation fault\n\n"
             + "".join(f"Thread 0x00007f4a2568{i:04x} (most recent call first):\n"
                       + '  File "/x/loader.py", line 12 in wait\n' * 40 for i in range(5)))
    assert dumps.live_dumps(fatal) == [] and dumps.live_marker(fatal, 0) is None
    assert classify(fatal).kind == "crashed"


# ---- a record per epoch with its metrics (accelerate examples' nlp_example.py: accelerator.print(f"epoch {epoch}:",
# eval_metric)); the shape, values made up

@pytest.mark.parametrize("text", [
    "epoch 0: {'accuracy': 0.7745, 'f1': 0.8413}\nepoch 1: {'accuracy': 0.8284, 'f1': 0.8801}\n"
    "epoch 2: {'accuracy': 0.8505, 'f1': 0.8938}\n",
    "2024-01-01 10:00:00 Epoch 3 | val_acc=0.91\n2024-01-01 10:30:00 Epoch 4 | val_acc=0.92\n",
])
def test_per_epoch_metric_records_are_progress(text):
    outcome = trial_outcome(text)
    assert outcome.failure_kind == "ok" and "per epoch" in outcome.reason and "step_time_s" not in outcome.metrics


@pytest.mark.parametrize("text", [
    "epoch 0: {'accuracy': 0.77}\nepoch 0: {'accuracy': 0.77}\n",  # ranks repeating one epoch's line
    "loading epoch 1: size=3\nloading epoch 2: size=3\n",  # set-up work
    "Epoch 1/10\nEpoch 2/10\n",  # headers without a metric
    "epoch 2: {'accuracy': 0.85}\nepoch 1: {'accuracy': 0.83}\n",  # a counter that does not rise
])
def test_epoch_lines_that_are_not_progress(text):
    assert trial_outcome(text).failure_kind != "ok"
