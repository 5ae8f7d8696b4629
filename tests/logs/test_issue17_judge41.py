"""Issue 17 (helper judge41): batch 36's misses as families. A loss jump (a finite series that jumped and stayed
up) is a reading of the records, not what stops a job: when the lines after the last progress say what ended it
(the scheduler's time limit, the job's own traceback ending in an exception line), that wins. Each: real lines
with their source, and the same records without the ending, which must still read as diverged."""

from __future__ import annotations

from analysis.logs.outcome import trial_outcome
from analysis.logs.parse_generic import read_records

# ---- 1. precedence: what ended the job outranks a loss jump that did not stop it
# github bigscience-workshop/bigscience experiments/gpt2-meg-ds-zero/meg_ds_zero_gpt2_perf_n16-1999616.out
# (oos-batch36), shortened: Megatron-DeepSpeed's training_log records (megatron/training.py), the lm loss jumping
# from 12.5 to 40.8 at iteration 3, then slurmstepd's time-limit lines (SLURM src/slurmd/slurmstepd/req.c).
_MEG = "".join(
    f" iteration        {i}/    1000 | elapsed time per iteration (ms): {ms} | learning rate: 1.875E-05 | "
    f"lm loss: {loss} | loss scale: 1024.0 | number of skipped iterations:   0 | number of nan iterations:   0 |\n"
    for i, ms, loss in ((1, "123742.4", "1.252221E+01"), (2, "128917.0", "1.251770E+01"),
                        (3, "128642.7", "4.075232E+01"), (4, "127766.0", "3.899556E+01")))
_TIME_LIMIT = ("slurmstepd: error: *** STEP 1999616.0 ON r6i4n5 CANCELLED AT 2021-05-27T21:42:11 DUE TO TIME LIMIT ***\n"
               "slurmstepd: error: *** JOB 1999616 ON r6i4n5 CANCELLED AT 2021-05-27T21:42:11 DUE TO TIME LIMIT ***\n"
               "Killing subprocess 34474\nMain process received SIGTERM, exiting\n")


def test_time_limit_after_a_loss_jump_is_time_limit() -> None:
    assert trial_outcome(_MEG + _TIME_LIMIT).failure_kind == "time_limit"


def test_the_same_jump_with_no_ending_still_diverges() -> None:
    assert trial_outcome(_MEG).failure_kind == "diverged"


# github bigyanghimire/deepspeed-experiments final_experiments/a100/default_exp/ulysses_run_5000_batch_2.log
# (oos-batch36), shortened: the author's train_gpt_ulysses.py prints `Iteration i: loss=...`, then its summary's
# min() over an empty list raises (CPython's traceback, torchrun's [rank0]: prefix).
_ULYSSES = "".join(f"0: peak_mem=7.83 GB\n0: Iteration {i}: loss={v}\n" for i, v in enumerate(
    ("2.4794", "12.9610", "14.8873", "19.9182", "8.7836", "8.2628", "8.2179", "7.9917", "7.9324", "8.3423")))
_VALUE_ERROR = """0: [rank0]: Traceback (most recent call last):
0: [rank0]:   File "/home/u/llm-training/experiments/train_gpt_ulysses.py", line 332, in <module>
0: [rank0]:     main()
0: [rank0]:   File "/home/u/llm-training/experiments/train_gpt_ulysses.py", line 329, in main
0: [rank0]:     print(f"Step time: {np.mean(step_times):.2f}s (min={min(step_times):.2f}s)")
0: [rank0]: ValueError: min() arg is an empty sequence
srun: error: hades: task 0: Exited with exit code 1
"""


def test_an_exception_after_a_loss_jump_is_a_crash() -> None:
    assert trial_outcome(_ULYSSES + _VALUE_ERROR).failure_kind == "crashed"


def test_the_ulysses_jump_alone_still_diverges() -> None:
    assert trial_outcome(_ULYSSES).failure_kind == "diverged"


def test_nan_loss_then_a_traceback_stays_diverged() -> None:
    # only a finite jump is outranked: a NaN loss is the run's own failure, whatever the traceback after it
    nan = _ULYSSES + "0: peak_mem=7.83 GB\n0: Iteration 10: loss=nan\n0: peak_mem=7.83 GB\n0: Iteration 11: loss=nan\n"
    assert trial_outcome(nan + _VALUE_ERROR).failure_kind == "diverged"


# ---- 2. an epoch number repeated on every batch record is no step counter
# github 1025378573/T5-Finetune train.log (oos-batch36), shortened: logging's default format with
# logging.info(f"Epoch {epoch} - Batch loss: {loss.item():.4f}") per batch; the clock advances ~1.27 s a batch.
def _t5(epoch: int, start_s: int, n: int) -> str:
    out = []
    for i in range(n):
        ms = start_s * 1000 + i * 1270
        out.append(f"2025-03-02 05:{ms // 60000 % 60:02d}:{ms // 1000 % 60:02d},{ms % 1000:03d} - INFO - "
                   f"Epoch {epoch} - Batch loss: {9.0 - i / 10:.4f}\n")
    return "".join(out)


# the epoch's summary line follows its last batch within milliseconds (05:00:13,970 + 2 ms)
_T5 = (_t5(1, 0, 12) + "2025-03-02 05:00:13,972 - INFO - Epoch 1 - Average Train Loss: 8.1000\n"
       + _t5(2, 1800, 12) + "2025-03-02 05:30:13,972 - INFO - Epoch 2 - Average Train Loss: 7.9000\n")


def test_batch_records_numbered_by_their_epoch_give_the_batch_time() -> None:
    times = sorted(i.step_time_s for i in read_records(_T5).iterations if i.step_time_s is not None)
    assert times and abs(times[len(times) // 2] - 1.27) < 0.05, times
    assert abs(trial_outcome(_T5).metrics["step_time_s"] - 1.27) < 0.05


def test_epoch_records_one_per_epoch_are_not_renumbered() -> None:
    # one record per epoch (no run of one value): the epoch stays the counter, as before
    text = "".join(f"2025-03-02 0{e}:00:00,000 - INFO - Epoch {e} - Batch loss: {3.0 - e / 10:.4f}\n"
                   for e in range(1, 6))
    assert [i.iteration for i in read_records(text).iterations][-1:] in ([5], [])


# ---- 3. open_clip's "Batch (t)": the log window's seconds per batch
# https://github.com/mertyg/vision-language-models-are-bows/issues/27 (oos-batch36), shortened; mlfoundations/
# open_clip src/training/train.py prints f"Data (t): {data_time_m.avg:.3f} " f"Batch (t): {batch_time_m.avg:.3f}, ..."
# and resets the meters after each record; its logger's datefmt '%Y-%m-%d,%H:%M:%S'.
_OPEN_CLIP = "".join(
    f"2023-06-29,15:4{i}:00 | INFO | Train Epoch: 0 [ {64 + 6400 * i:>6}/109468 ({6 * i}%)] Loss: 0.8{i} (0.9) "
    f"Data (t): 0.0{5 + i} Batch (t): {t}, 78.5/s LR: 0.000001 Logit Scale: 99.981 - V4\n"
    for i, t in enumerate(("18.240", "0.559", "0.515", "0.454", "0.472", "0.463", "0.490")))


def test_open_clip_batch_time_is_the_step_time() -> None:
    outcome = trial_outcome(_OPEN_CLIP)
    assert outcome.failure_kind == "ok"
    assert abs(outcome.metrics["step_time_s"] - 0.481) < 0.02, outcome.metrics


def test_open_clip_data_time_alone_is_no_step_time() -> None:
    text = _OPEN_CLIP.replace("Batch (t)", "Other (x)")
    assert read_records(text).iterations == () or all(i.step_time_s is None for i in read_records(text).iterations)


# ---- 4. a JSON record per epoch with its numbers as strings (ALBEF / X-VLM / BLIP: "{:.5f}".format(...))
# https://github.com/zengyan-97/X-VLM/issues/12 (oos-batch36), two keys kept.
_XVLM = "".join(f'{{"train_loss_itc": "{1.40 - e / 100:.5f}", "train_lr": "0.00006", "epoch": {e}}}\n'
                for e in range(27, 33))


def test_json_epoch_records_with_quoted_numbers_are_progress() -> None:
    assert trial_outcome(_XVLM).failure_kind == "ok"


def test_json_epoch_records_that_do_not_rise_are_not_progress() -> None:
    same = "".join('{"train_loss_itc": "1.40000", "epoch": 3}\n' for _ in range(4))
    assert trial_outcome(same).failure_kind != "ok"


# ---- 5. set-up refusals: a backend missing for the device, Lightning Fabric refusing the strategy's use
# torchtune on Aurora (oos-batch36 other/b_torchtune_aurora_xpu_...): c10d's ProcessGroup::getBackend check.
_XPU = """[rank0]: Traceback (most recent call last):
[rank0]:   File "/home/u/torchtune/recipes/full_finetune_distributed.py", line 1042, in recipe_main
[rank0]:     recipe.setup(cfg=cfg)
[rank0]: RuntimeError: No backend type associated with device type xpu
"""
# lit-llama's pretrain/redpajama.py on FSDP (oos-batch36), Lightning fabric.py _validate_setup
_FABRIC_SETUP = """Traceback (most recent call last):
  File "/home/u/lit-llama/pretrain/redpajama.py", line 98, in main
    model, optimizer = fabric.setup(model, optimizer)
RuntimeError: The `Fabric` requires the model and optimizer(s) to be set up separately. Create and set up the model \
first through `model = self.setup_model(model)`. Then create the optimizer and set it up: `optimizer = \
self.setup_optimizer(optimizer)`.
"""
# https://github.com/rasbt/cvpr2023/issues/8 (oos-batch36), Lightning fabric/strategies xla_fsdp.py save_checkpoint
_FABRIC_SAVE = """  File "/home/u/lightning/fabric/strategies/fsdp.py", line 565, in save_checkpoint
    raise FileExistsError(f"The checkpoint directory already exists and is not empty: {path}")
FileExistsError: The checkpoint directory already exists and is not empty: /out/model_iter_best.ckpt
"""


def test_no_backend_for_the_device_is_a_config_error() -> None:
    assert trial_outcome(_XPU).failure_kind == "config_error"


def test_fabric_setup_order_refusal_is_a_config_error() -> None:
    assert trial_outcome(_FABRIC_SETUP).failure_kind == "config_error"


def test_fabric_checkpoint_directory_refusal_is_a_config_error() -> None:
    assert trial_outcome(_FABRIC_SAVE).failure_kind == "config_error"


def test_a_script_s_own_file_exists_error_stays_a_crash() -> None:
    # a makedirs race (Levanter's TensorBoard log dir, oos-batch36) is not Fabric's refusal
    text = ("Traceback (most recent call last):\n  File \"levanter/tracker/tensorboard.py\", line 40, in init\n"
            "    os.makedirs(dir)\nFileExistsError: [Errno 17] File exists: '../logs/avxbg33f'\n")
    assert trial_outcome(text).failure_kind == "crashed"


# ---- 6. every rank's interrupt traceback, interleaved, right after a step record: stopped by hand while running
# microsoft/Megatron-DeepSpeed examples/MoE/log/gpt3-0.125B-tokendropping-...-with-kernel.log (oos-batch36),
# shortened: Megatron's training_log record and timers, then the ranks' tracebacks mixed with deepspeed launch.py's
# sigkill_handler lines.
_MOE_STEPS = "".join(
    f" iteration     {i}/ 1716613 | consumed samples:       545280 | elapsed time per iteration (ms): 550.9 | "
    f"learning rate: 1.256E-04 | global batch size:   256 | lm loss: 3.40{i % 10}E+00 |\n"
    "time (ms) | forward-compute: 358.53 | backward-compute: 159.65 | optimizer: 14.06 | batch-generator: 20.24\n"
    for i in range(2120, 2131))
_MOE_INTERRUPT = """Traceback (most recent call last):
Traceback (most recent call last):
  File "/home/u/Megatron-DeepSpeed/pretrain_gpt.py", line 276, in <module>
  File "/home/u/Megatron-DeepSpeed/pretrain_gpt.py", line 276, in <module>
[2022-10-29 00:11:48,109] [INFO] [launch.py:286:sigkill_handler] Killing subprocess 58799
    pretrain(train_valid_test_datasets_provider, model_provider, forward_step,
  File "/home/u/Megatron-DeepSpeed/megatron/training.py", line 891, in train
    sampled_indices = torch.multinomial(prob_dist, reserved_length)
KeyboardInterrupt
[2022-10-29 00:11:52,534] [INFO] [launch.py:295:sigkill_handler] Main process received SIGTERM, exiting
"""


def test_interleaved_interrupt_tracebacks_after_a_step_are_a_stop_by_hand() -> None:
    assert trial_outcome(_MOE_STEPS + _MOE_INTERRUPT).failure_kind == "cancelled"


def test_an_interrupt_after_a_save_that_never_returned_stays_a_hang() -> None:
    # a line outside the step cycle (a checkpoint save) between the last record and the interrupt: stalled there
    stalled = _MOE_STEPS + "saving checkpoint at iteration    2130 to /ckpt\n" + _MOE_INTERRUPT
    assert trial_outcome(stalled).failure_kind == "hang"
