"""Issue 17 (helper judge42b): batch 37's healthy-log and step-time misses as families. Each: short real lines with
their source, the case that failed before, and a near miss that must not change."""

from __future__ import annotations

from analysis.logs.outcome import trial_outcome
from analysis.logs.parse_generic import read_records

# ---- 1. completion wording: the phase named in the word ("Pretraining", "Fine-tuning")
# github AsanoHaruka157/scGPT pretrain.log (oos-batch37), shortened: the author's script's closing logger.info lines.
_SCGPT = """2026-02-14 10:39:21,878 - INFO - Visualization completed
2026-02-14 10:39:21,881 - INFO - [After visualization] Memory usage: 8.07 GB (RSS)
2026-02-14 10:39:21,881 - INFO - ======================================================================
2026-02-14 10:39:21,881 - INFO - Pretraining completed successfully!
2026-02-14 10:39:21,881 - INFO - ======================================================================
"""


def test_pretraining_completed_is_a_finished_run() -> None:
    assert trial_outcome(_SCGPT).failure_kind == "ok"


def test_fine_tuning_completed_is_a_finished_run() -> None:
    # the closing print of public fine-tuning scripts ("Fine-tuning completed in {training_time:.2f} seconds")
    assert trial_outcome("loading model\nFine-tuning completed in 812.33 seconds\n").failure_kind == "ok"
    assert trial_outcome("loading model\nFINE-TUNING COMPLETE\n").failure_kind == "ok"


def test_pretraining_failed_or_either_outcome_is_not_a_finish() -> None:
    # a shell wrapper's failure branch ("Error: Pretraining failed!") and a line naming two outcomes prove nothing
    assert trial_outcome("loading model\nError: Pretraining failed!\n").failure_kind != "ok"
    assert trial_outcome("loading model\nPretraining completed or interrupted\n").failure_kind != "ok"


# ---- 2. ColBERT: its end of data, its keyless step records and their step time
# github bclavie/ColBERT train.out (oos-batch37), shortened: colbert/training/training.py print_message(batch_idx,
# train_loss) per step, "#> Done with all triples!", then manage_checkpoints' save lines.
_COLBERT_END = """[Mar 29, 16:34:28] #> Done with all triples!
#> Saving a checkpoint to /home/ubuntu/colbert/experiments/test/none/2024-03/29/16.21.45/checkpoints/colbert ..
#> Joined...
#> Joined...
Saved checkpoint to None...
"""


def test_colbert_save_after_done_with_all_triples_is_not_a_stall() -> None:
    # no step record the reader knows: the save after ColBERT's end-of-data line was read as a save that never ended
    assert trial_outcome("#> LR will use 100 warmup steps and linear decay over 500000 steps.\n"
                         + _COLBERT_END).failure_kind == "ok"


def _colbert_records(first: int, last: int, start_s: int, step_s: float) -> str:
    lines = []
    for n in range(first, last + 1):
        t = start_s + int((n - first) * step_s)
        lines.append(f"[Mar 29, {t // 3600:02d}:{t // 60 % 60:02d}:{t % 60:02d}] {n} {6.26 - n * 1e-3}\nTrue\n"
                     f"\t\t\t\t 0.5036752820014954 5.614562511444092\n#>>>    5.4 5.43 \t\t|\t\t -0.0299\n")
    return "".join(lines)


def test_colbert_step_records_give_the_clock_over_steps() -> None:
    text = _colbert_records(10, 200, 16 * 3600 + 22 * 60 + 6, 0.738) + _COLBERT_END
    reading = read_records(text)
    assert reading.n_records == 191 and reading.iterations
    assert abs(reading.iterations[-1].step_time_s - 0.738) < 0.01
    out = trial_outcome(text)
    assert out.failure_kind == "ok" and abs(out.metrics["step_time_s"] - 0.738) < 0.01


def test_colbert_records_over_a_short_baseline_give_no_time() -> None:
    # whole-second stamps over less than a minute: too coarse for a step time
    assert not read_records(_colbert_records(10, 40, 16 * 3600, 0.738)).iterations


# ---- 3. Composer's ConsoleLogger: a record whose count reached the run's max_duration
# https://github.com/mosaicml/llm-foundry/issues/117 (oos-batch37), shortened: composer/loggers/console_logger.py
# log_to_console's header f"[{unit}={curr}/{total}]:" and its "\t Train {name}: {value}" lines.
_COMPOSER = """[batch=10/10]:
         Train time/batch: 9
         Train time/sample: 2304
         Train memory/allocated_mem: 3.8951
         Train loss/train/total: 10.9654
         Train time/train: 0.0606
         Train time/remaining_estimate: 0.0000
"""


def test_composer_last_batch_of_its_max_duration_is_a_finished_run() -> None:
    assert trial_outcome(_COMPOSER).failure_kind == "ok"


def test_composer_record_short_of_its_total_or_per_epoch_is_not_a_finish() -> None:
    assert trial_outcome(_COMPOSER.replace("[batch=10/10]", "[batch=9/10]")).failure_kind != "ok"
    # max_duration in epochs: the batch count is the epoch's, not the run's
    assert trial_outcome(_COMPOSER.replace("[batch=10/10]", "[epoch=1][batch=10/10]")).failure_kind != "ok"


# ---- 4. a per-epoch cumulative clock over the epoch's stated batches (rasbt's training loops)
# github aqpower/PoeticTransformer train.out (oos-batch37), shortened: f'Epoch: {e:03d}/{n:03d} | Batch
# {b:04d}/{len(train_loader):04d} | Loss: ...' every 5 batches, f'Time elapsed: {min:.2f} min' after each epoch.
def _epochs(n: int, per_epoch_min: float, batches: int = 11, clock: bool = True) -> str:
    out = []
    for e in range(1, n + 1):
        out.append(f"Epoch: {e:03d}/{n:03d} | Current Learning Rate: 0.001000\n")
        out.extend(f"Epoch: {e:03d}/{n:03d} | Batch {b:04d}/{batches:04d} | Loss: 0.2{b}\n" for b in (0, 5, 10))
        if clock:
            out.append(f"Time elapsed: {e * per_epoch_min:.2f} min\n")
    return "".join(out) + f"Total Training Time: {n * per_epoch_min:.2f} min\n"


def test_epoch_clock_over_stated_batches_gives_the_step_time() -> None:
    text = _epochs(90, 0.0461)   # 0.0461 min per epoch of 11 batches: 0.2515 s a batch
    reading = read_records(text)
    assert reading.iterations and abs(reading.iterations[-1].step_time_s - 0.2515) < 0.005
    assert abs(trial_outcome(text).metrics["step_time_s"] - 0.2515) < 0.005


def test_epoch_records_without_the_clock_give_no_time() -> None:
    assert not read_records(_epochs(90, 0.0461, clock=False)).iterations
