"""Evidence that a run finished: what launchers and trainers print when training ends normally. With no failure
after it, such a line makes a log alone `ok` even when no step time can be read from it.

Sources:
- torch.distributed.elastic agent/server/api.py: "[default] worker group successfully finished. Waiting 300
  seconds for other agents to finish." and "Local worker group finished (SUCCEEDED)"; the event
  "torchelastic.worker.status.SUCCEEDED".
- DeepSpeed launcher/launch.py: "Process N exits successfully."
- PyTorch Lightning fit_loop.py: "`Trainer.fit` stopped: `max_steps=N` reached." / "`max_epochs=N` reached."
- Hugging Face transformers trainer.py: "Training completed. Do not forget to share your model on
  huggingface.co/models =)"
- Megatron-LM training.py: print_datetime("after training is done"), and "exiting program after N minutes" /
  "exiting program at iteration N" (--exit-duration-in-mins, --exit-interval); tasks/finetune_utils.py: "done :-)".
- torchtitan train.py: "Training completed"; LSF's job report "Successfully completed."
- the shape `training (is) done|finished|complete(d)` / `finished training` (in any case: "TRAINING COMPLETE!").
- DeepSpeed-Chat e2e_rlhf.py / train.py: "---=== Finished Step 3 in 0:22:33 ===---".
- a configured training budget reached, the shape `max(imum) (training) steps|iterations|epochs ... reached` /
  `reached (the) max(imum) (number of) steps|...`: llama-recipes utils/train_utils.py ("max training steps reached,
  stopping training, total train steps finished: N"), PyTorch Lightning fit_loop.py ("`max_steps=N` reached."),
  MLX-LM / trainers that stop at a step budget ("Reached max steps", "maximum number of iterations reached").
"""

from __future__ import annotations

import re

from analysis.logs.families import line_around, rows
from launcher.core.kinds import FailureKind

_DONE = "training finished"
# A training budget used up: "max training steps reached", "max_iters reached", "reached max steps",
# "maximum number of epochs reached"; not "max seq length reached" or a budget of evaluation/generation.
_BUDGET_WHAT = r"(?:training[ _])?(?:steps?|iters?|iterations?|epochs?|updates?)"
_BUDGET = (rf"(?i)\bmax(?:imum)?[ _](?:number[ _]of[ _])?{_BUDGET_WHAT}\b[^\n]{{0,30}}"
           rf"\b(?:is |has been |was )?reached\b"
           rf"|\breached\b[^\n]{{0,12}}\bmax(?:imum)?[ _](?:number[ _]of[ _])?{_BUDGET_WHAT}\b")
# A line that names finishing as one of two outcomes ("completed or interrupted", "finished or failed") proves
# neither.
_NOT_OR = r"(?!\s{1,3}or\s{1,3}(?:interrupt|fail|abort|crash|stop|kill|cancel|error))"
_NOT_EITHER = "COMPLETED" + _NOT_OR
# `training (is) done|finished|complete(d)`, `finished|done training`; judge42b: with the phase named in the same
# word ("Pretraining completed successfully!", logger.info in AsanoHaruka157/scGPT's pre-training script, oos-batch37;
# "PRETRAINING COMPLETED SUCCESSFULLY", "Pre-training finished") and for fine-tuning ("Fine-tuning completed in
# 812.33 seconds", "LoRA instruction fine-tuning completed successfully!", "🎉 Fine-tuning completed!": trainer
# scripts' closing logger.info/print lines found in public training scripts): the same wording class, not a new one.
_PHASE = r"(?:pre-?|post-?)?training|(?:pre-?)?fine[- ]?tuning|finetuning"
# judge55: "finishing training" as a script's last line (oos-batch47's ShuffleFaceNet run, after its 70/70 epoch), not
# a set-up step named after training ("finishing training setup")
_TRAINING_DONE = (rf"(?i)\b(?:{_PHASE})\s{{1,3}}(?:is\s{{1,3}})?(?:done|finished|complete[d]?)\b" + _NOT_OR
                  + rf"|\bfinish(?:ed|ing) (?:{_PHASE})\b"
                  + r"(?!\s{0,3}(?:set-?up|init|config|prep|data|loop\s{1,3}start))"
                  + rf"|\bdone (?:{_PHASE})\b")
COMPLETION = (
    rows(FailureKind.OK, _DONE, "torch.distributed.elastic agent/server/api.py",
         ("worker group successfully finished", "INFO:torch.distributed.elastic.agent.server.api:[default] worker "
                                                "group successfully finished. Waiting 300 seconds for other agents to "
                                                "finish."),
         ("Local worker group finished (SUCCEEDED)", "Local worker group finished (SUCCEEDED). Waiting 300 seconds "
                                                     "for other agents to finish"),
         ("torchelastic.worker.status.SUCCEEDED", '{"name": "torchelastic.worker.status.SUCCEEDED", "source": '
                                                  '"WORKER"}'))
    + rows(FailureKind.OK, _DONE, "DeepSpeed launcher/launch.py",
           ("exits successfully", "[INFO] [launch.py:351:main] Process 4242 exits successfully."))
    + rows(FailureKind.OK, _DONE, "PyTorch Lightning fit_loop.py",
           ("`Trainer.fit` stopped: `max_", "`Trainer.fit` stopped: `max_steps=2000` reached."))
    + rows(FailureKind.OK, _DONE, "Hugging Face transformers trainer.py",
           ("Training completed. Do not forget to share your model", "Training completed. Do not forget to share "
                                                                     "your model on huggingface.co/models =)"))
    # Trainer.train() returns (and logs) its TrainOutput metrics when training is over: the dict "{'train_runtime':
    # 754.5, 'train_samples_per_second': ...}" and, in the examples' scripts, trainer_pt_utils.log_metrics's block
    # "***** train metrics *****" with "  train_runtime = 0:12:34.56"
    + rows(FailureKind.OK, _DONE, "transformers trainer.py train() (its TrainOutput metrics), trainer_pt_utils.py "
                                  "log_metrics",
           ("train_runtime", "{'train_runtime': 754.56, 'train_samples_per_second': 12.345, 'epoch': 3.0}",
            r"\btrain_runtime['\"]?\s{0,30}[:=]\s{0,30}\d"),
           ("***** train metrics *****", "***** train metrics *****"))
    + rows(FailureKind.OK, _DONE, "Megatron-LM training.py",
           ("after training is done", "[after training is done] datetime: 2025-03-02 10:44:12"),
           ("exiting program", "exiting program after 240.0 minutes", r"exiting program (?:after|at iteration)"))
    # (judge22) Megatron-LM tasks/finetune_utils.py finetune() ends with print_rank_0('done :-)') after the last
    # epoch (or the evaluation-only pass); the line alone, behind launcher prefixes at most.
    + rows(FailureKind.OK, _DONE, "Megatron-LM tasks/finetune_utils.py (finetune)",
           ("done :-)", "done :-)", r"^\s{0,8}done :-\)\s*$"))
    + rows(FailureKind.OK, _DONE, "torchtitan train.py; LSF job report",
           # not "Training completed or interrupted" (verl's fully-async runner prints it on either outcome)
           ("Training completed", "[titan] 2025-06-01 12:00:00,000 - root - INFO - Training completed",
            _NOT_EITHER.replace("COMPLETED", "Training completed")),
           ("Successfully completed.", "Successfully completed."))
    + rows(FailureKind.OK, _DONE, "trainers' end-of-training lines",
           ("raining", "Finished training after 5000 steps",
            _TRAINING_DONE),
           # judge37a: the same shape in capitals ("🎉 TRAINING COMPLETE!", a QLoRA script's closing banner in
           # oos-batch33): the needle is found case-sensitively, so "raining" never reached the case-insensitive shape
           ("RAINING", "INFO:__main__:🎉 TRAINING COMPLETE!",
            _TRAINING_DONE),
           # judge42b: fine-tuning's own word ("Fine-tuning completed in 812.33 seconds"), which "raining" misses
           ("uning", "Fine-tuning completed in 812.33 seconds", _TRAINING_DONE),
           ("UNING", "FINE-TUNING COMPLETE", _TRAINING_DONE))
    # judge37a: DeepSpeed-Chat's wrapper (deepspeedai/DeepSpeedExamples applications/DeepSpeed-Chat/e2e_rlhf.py, later
    # train.py, main: print(f"---=== Finished Step {step_num} in {time_str} ===---") after launch_cmd, which raises
    # "Step {step_num} exited with non-zero status {returncode}" when the step's training script failed; and
    # "---=== Finished Steps {args.step} in {time_str} ===---" after several): a step's training ran to its end.
    + rows(FailureKind.OK, _DONE, "DeepSpeed-Chat e2e_rlhf.py / train.py main",
           ("=== Finished Step", "---=== Finished Step 3 in 0:22:33 ===---",
            r"---=== Finished Steps? [^\n]{1,80}? in \d{1,6}:\d{2}:\d{2} ===---"))
    # (judge30) MLPerf's result files: mlcommons/logging mllog (mlperf_logging/mllog/mllog.py@399280cb encodes each
    # record as ':::MLLOG {json}'; constants.py@0257c344: RUN_STOP = "run_stop", STATUS = "status", SUCCESS = "success",
    # ABORTED = "aborted") ends a run with mllogger.end(RUN_STOP, metadata={STATUS: SUCCESS}) when it reached its
    # target, {STATUS: ABORTED} when it did not: only the success is a finished run.
    + rows(FailureKind.OK, _DONE, "mlcommons/logging mllog (run_stop, status success)",
           ('"run_stop"', ':::MLLOG {"namespace": "", "time_ms": 1746081991207, "event_type": "INTERVAL_END", "key": '
                          '"run_stop", "value": 0.92, "metadata": {"file": "/workspace/ft-llm/custom_callbacks.py", '
                          '"lineno": 321, "samples_count": 3072, "status": "success"}}',
            r':::MLLOG \{[^\n]{0,200}"key":\s{0,2}"run_stop"[^\n]{0,600}"status":\s{0,2}"success"'))
    # judge42b: ColBERT (stanford-futuredata/ColBERT colbert/training/training.py train(): after the loop over the
    # triples, `print_message("#> Done with all triples!")` on rank 0, then manage_checkpoints(...,
    # consumed_all_triples=True) saves the final checkpoint ("#> Saving a checkpoint to ...", "Saved checkpoint to
    # None..."): the training data is used up, the run ends normally; the save after it is the run's last act, not a
    # phase it stalled in.
    + rows(FailureKind.OK, _DONE, "ColBERT colbert/training/training.py train",
           ("#> Done with all triples!", "[Mar 29, 16:34:28] #> Done with all triples!"))
    # judge42b: MosaicML Composer's ConsoleLogger (mosaicml/composer composer/loggers/console_logger.py@02c872e4
    # _get_progress_string / log_to_console): with max_duration in batches (or samples, tokens) each train record opens
    # f"[{unit.name.lower()}={curr_duration}/{total}]" + ":", then one "\t Train {name}: {value}" line a metric
    # (llm-foundry's train.py logs through it: "[batch=10/10]:" / "\t Train loss/train/total: 10.9654"); a header
    # whose count has reached the total is the record of the run's last batch (max_duration reached). Not the
    # epoch-based header "[epoch=1][batch=10/10]", whose batch count is the epoch's, nor the eval's "[Eval
    # batch=10/10]": anchored at the line's start, the count equal to its total.
    + rows(FailureKind.OK, _DONE, "MosaicML Composer loggers/console_logger.py (a max_duration reached)",
           ("[batch=", "[batch=10/10]:", r"^\s{0,8}\[batch=(\d{1,15})/\1\]:?\s{0,4}$"),
           ("[sample=", "[sample=2304/2304]:", r"^\s{0,8}\[sample=(\d{1,15})/\1\]:?\s{0,4}$"),
           ("[token=", "[token=4718592/4718592]:", r"^\s{0,8}\[token=(\d{1,15})/\1\]:?\s{0,4}$"))
    + rows(FailureKind.OK, _DONE, "llama-recipes train_utils.py; Lightning fit_loop.py; trainers' step budgets",
           ("eached", "max training steps reached, stopping training, total train steps finished:  6", _BUDGET),
           ("eached", "Reached maximum number of iterations (20000), stopping", _BUDGET))
)

# Lines that prove training steps ran, printed without a step counter: per-step timer breakdowns, the
# Hugging Face Trainer's logged dicts and the fp16 loss scaler's skipped steps.
# Sources: DeepSpeed runtime/engine.py timer names (FORWARD_MICRO_TIMER 'forward_microstep',
# BACKWARD_MICRO_TIMER 'backward_microstep', STEP_MICRO_TIMER 'step_microstep'; deepspeed/utils/timer.py now
# 'fwd_microstep', 'bwd_microstep', 'step_microstep') and its progress line "step=N, skipped=M, lr=[...]";
# Megatron-LM training.py's timers_to_log ('forward-backward', 'optimizer'); transformers trainer.py Trainer.log
# (printed by PrinterCallback/ProgressCallback as a dict: {'loss': ..., 'learning_rate': ..., 'epoch': ...}); DeepSpeed
# runtime/fp16/loss_scaler.py (DynamicLossScaler.update_scale: "[deepspeed] OVERFLOW! Rank 0 Skipping step.
# Attempted loss scale: 65536, reducing to 32768", also "... but hysteresis is 2. Reducing hysteresis to 1") and
# the older fused_optimizer.py ("Overflow detected. Skipping step. Attempted loss scale: 8.0, reducing to 4.0"):
# the scaler runs after a step's backward pass, so a skipped step is a step that ran; at start-up the dynamic
# scale searches down from 2^16 or 2^32 this way before the first step is applied. A scale that collapses is
# judged by families.divergence first.
_DURATION = r"(?:\d{1,3}:\d{2}:\d{2}(?:\.\d+)?|\d+(?:\.\d+)?\s{0,2}(?:s|sec|secs|seconds|ms|min|mins|minutes|h)\b)"
_EPOCH_DURATION = rf"(?i)\bepoch (?:took|time|duration)\b\s{{0,3}}[:=]?\s{{0,3}}{_DURATION}"
_EPOCH_LOSS = (r"(?i)\bepoch\b\s{0,3}[:#=\[]?\s{0,3}\d{1,6}\s{0,2}(?:/\s{0,2}\d{1,6})?\]?[^\n]{0,40}"
               r"\btrain(?:ing)?[ _]loss\b\s{0,3}[:=]?\s{0,3}-?\d")
_VALUE_FIRST_LOSS = (r"-?\d+(?:\.\d+)?\s{1,3}loss,[^\n]{0,160}?\b\d+(?:\.\d+)?\s{0,2}(?:s|ms|sec)"
                     r"(?:\s*$|\s*,|\s+run\b)|\b\d+(?:\.\d+)?\s{0,2}(?:s|ms|sec)\s+run,\s{0,3}-?\d+(?:\.\d+)?"
                     r"\s{1,3}loss,")
_TRAIN_LINE = (r"(?:^|[\]:|-]\s{1,3})Train(?:ing)?(?: [Ll]oss| metrics:[^\n]{0,80}?\bloss)\s{0,3}[:=]\s{0,3}-?\d")
# (a rate of tokens or samples alone is not enough: the embedded workload's records carry one, and its log is judged
# by its result line)
_COUNTER_AND_RATE = (r"(?i)^(?=[^\n]*\b(?:iteration|iter|step|global[ _]step)\b\s{0,3}[:=#]?\s{0,3}\d)"
                     r"(?=[^\n]*(?:\bthroughput\b[^\n]{0,12}?\d|\d\s{0,2}TFLOP(?:S|s)?(?:/s)?\b))")
PROGRESS = (rows(FailureKind.OK, "training steps ran", "DeepSpeed engine timers; Megatron-LM timers",
                 ("forward_microstep", "time (ms) | forward_microstep: 201.33 | backward_microstep: 340.12 | "
                                       "step_microstep: 0.06"),
                 # deepspeed/utils/timer.py since the timers were renamed (FORWARD_MICRO_TIMER = 'fwd_microstep')
                 ("fwd_microstep", "[Rank 0] time (ms) | fwd_microstep: 120.51 | bwd_microstep: 300.20 | "
                                   "bwd_inner_microstep: 290.10 | bwd_allreduce_microstep: 10.02 | "
                                   "step_microstep: 50.31",
                  r"time \(ms\) \|[^\n]{0,40}\bfwd_microstep: \d"),
                 ("forward-backward", "    forward-backward ...............................: (1904.22, 1910.87)",
                  r"forward-backward\s{0,4}(?:\.{3,}|:)"))
            + rows(FailureKind.OK, "training steps ran", "DeepSpeed runtime/fp16/loss_scaler.py, fused_optimizer.py",
                   ("Skipping step. Attempted loss scale", "[2025-02-03 10:11:12,345] [INFO] [loss_scaler.py:183:"
                                                          "update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. "
                                                          "Attempted loss scale: 65536, reducing to 32768"))
            # The other loss scalers' overflow notes, printed by an optimizer step that ran forward and backward
            # and found inf/NaN gradients (a healthy fp16 run prints some while its scale settles; a scale that
            # collapses is judged by families.divergence first): fairseq trainer.py train_step
            # (logger.info("NOTE: overflow detected, " + str(e)), the message of optim/dynamic_loss_scaler.py's
            # OverflowError "setting loss scale to: {}") and apex amp/scaler.py update_scale ("Gradient overflow.
            # Skipping step, loss scaler {} reducing loss scale to {}").
            + rows(FailureKind.OK, "training steps ran", "fairseq trainer.py train_step; apex amp/scaler.py "
                                                         "update_scale",
                   ("overflow detected, setting loss scale to", "2020-04-05 18:47:19 | INFO | fairseq.trainer | NOTE: "
                                                                "overflow detected, setting loss scale to: 64.0"),
                   ("Skipping step, loss scaler", "Gradient overflow.  Skipping step, loss scaler 0 reducing loss "
                                                  "scale to 32768.0"))
            # DeepSpeed's per-step optimizer timers (wall_clock_breakdown: fp16 fused_optimizer.py step's
            # compute_norm | overflow_check | unscale_and_clip | basic_step | update_fp16; ZeRO stage_1_and_2.py's
            # optimizer_allgather | optimizer_gradients | optimizer_step), logged once per optimizer step that ran
            # (parse_generic.optimizer_timer_step_times reads their timestamps)
            + rows(FailureKind.OK, "training steps ran", "DeepSpeed utils/timer.py log of the optimizer timers "
                                                         "(fused_optimizer.py, zero/stage_1_and_2.py)",
                   ("_step:", "[2024-03-08 16:52:55,712] [INFO] [logging.py:96:log_dist] [Rank 0] time (ms) | "
                              "optimizer_step: 147.32",
                    r"time \(ms\) \|[^\n]{0,80}\b(?:optimizer_step|basic_step):\s{0,3}\d"))
            # judge16: DeepSpeed's communication logger (deepspeed/utils/comms_logging.py, comms_logger verbose:
            # log_dist of "comm op: <op> | time (ms): t | msg size: s | algbw (Gbps): a | busbw (Gbps): b", one
            # record per collective the engine runs). The step's collectives only: ZeRO's gradient reduce-scatter and
            # all-reduce and its parameter all-gather; not a broadcast or barrier, which set-up runs too.
            + rows(FailureKind.OK, "training steps ran", "DeepSpeed utils/comms_logging.py (comms_logger, verbose)",
                   ("comm op: ", "[2024-03-08 16:52:55,712] [INFO] [logging.py:69:log_dist] [Rank 0] rank=0 | comm "
                                 "op: reduce_scatter_tensor | time (ms): 9.46 | msg size: 678.86 MB | algbw (Gbps): "
                                 "1204.52  | busbw (Gbps): 1129.23",
                    r"\bcomm op: (?:reduce_scatter|all_reduce|allreduce|all_gather|allgather)\w{0,30} \| time \(ms\): "
                    r"\d[\d.]{0,12} \| msg size: "))
            + rows(FailureKind.OK, "training steps ran", "DeepSpeed runtime/engine.py _report_progress (every "
                                                         "steps_per_print steps)",
                   ("skipped=", "[2024-01-01 10:00:01,000] [INFO] [logging.py:96:log_dist] [Rank 0] step=100, "
                                "skipped=0, lr=[0.0001], mom=[(0.9, 0.95)]",
                    r"\bstep=\d{1,12}, skipped=\d{1,12}, lr=\["))
            # judge61 (in sample: oos-batch50's Lightning GAT run, whose log holds no step record): Lightning's
            # EarlyStopping reports each validation that improved its metric (lightning/pytorch/callbacks/
            # early_stopping.py, _improvement_message: "Metric {monitor} improved by {delta:.3f} >= min_delta =
            # {min_delta}. New best score: {score:.3f}", the first "Metric {monitor} improved. New best score: ..."):
            # an epoch of training ran before each
            + rows(FailureKind.OK, "training steps ran", "Lightning callbacks/early_stopping.py "
                                                         "(_improvement_message)",
                   ("New best score: ", "Metric val_loss improved by 0.012 >= min_delta = 0.0. New best score: 0.345",
                    r"\bMetric \S{1,80} improved(?: by \d[\d.]{0,12} >= min_delta = [\d.e-]{1,12})?\. New best "
                    r"score: -?\d"))
            # Trainers without a step counter (any format): a per-epoch summary naming the epoch counter and its
            # train loss, an epoch's duration, or a loss written value-first with a time field. They show that
            # training ran; no step time is read from them (an epoch is not a step).
            + rows(FailureKind.OK, "training steps ran", "trainers' per-epoch summaries and value-first records "
                                                         "(nnU-Net, MonoCon, tinygrad, PyTorch loops)",
                   ("epoch took", "2021-05-20 14:49:17.903927: This epoch took 965.255083 s", _EPOCH_DURATION),
                   ("poch time", "epoch 3 done, epoch time: 412.7s", _EPOCH_DURATION),
                   ("poch Time", "- Epoch Time: 0:04:41", _EPOCH_DURATION),
                   ("rain loss", "Epoch: 8/200 | Train loss: 46.6655 | Val loss: 24.7954 | Time:  31.958s",
                    _EPOCH_LOSS),
                   ("RAIN LOSS", "EPOCH 4/50 TRAIN LOSS = 0.8123", _EPOCH_LOSS),
                   ("rain_loss", "epoch 7/30 - train_loss: 0.3120 - val_loss: 0.3411", _EPOCH_LOSS),
                   ("raining_loss", "[epoch 12] training_loss: 0.412 acc: 0.91", _EPOCH_LOSS),
                   ("poch duration", "epoch duration: 12.5 min", _EPOCH_DURATION),
                   # judge55: the same summary with the epoch on the line above it ("[Epoch 49/60]" then "Train Loss:
                   # 0.0274, Train Acc: 0.9893"; "Epoch 10/10" then "- Train metrics: accuracy: 0.927 ; loss: 0.246",
                   # oos-batch47's SpeedTransformer and TensorFlow scripts): the train loss opening its line
                   ("rain Loss", "2025-10-07 07:16:46,994 - INFO - Train Loss: 0.0274, Train Acc: 0.9893", _TRAIN_LINE),
                   ("rain metrics", "2018-07-30 14:29:18,858:INFO: - Train metrics: accuracy: 0.927 ; loss: 0.246",
                    _TRAIN_LINE),
                   (" loss, ", "9.8271 loss, 0.000050067902 LR, 124.27 GB used, 5.15 s", _VALUE_FIRST_LOSS),
                   (" loss, ", "   10 4.40 s run, 11.8750 loss, 0.000000000005 LR, 1454.57 GB used",
                    _VALUE_FIRST_LOSS))
            # Keras' Progbar at an epoch's end with verbose=2 as Keras 2.0-2.2 print it (keras-team/keras
            # keras/utils/generic_utils.py Progbar.update: '%ds' % (now - self.start) at 90f2691ad83b (Keras 2.0),
            # ' - %.0fs' % (now - self._start) from Keras 2.1; then ' - %s:' and ' %.4f' or ' %.4e' per metric, fit's
            # loss first, after fit's "Epoch N/M" line): the epoch's seconds,
            # no step count and no per-step time, so progress only. The later forms, "N/N [====] - 56s 30ms/step"
            # (verbose=1), tf.keras's "N/N - 56s - ... - 30ms/step" and Keras 3's "N/N ━━━━ 56s 30ms/step", carry
            # the step time and are step records (parse_generic._KERAS_EPOCH).
            + rows(FailureKind.OK, "training steps ran", "Keras 2.0-2.2 Progbar (verbose=2)",
                   ("s - loss: ", " - 15s - loss: 4.1070e-04 - acc: 0.5884 - val_loss: 9.4085e-04 - val_acc: 0.6114",
                    r"^\s{0,4}(?:\d{1,9}/\d{1,9}\s{1,3})?(?:-\s)?\d{1,7}s\s-\sloss:\s(?:-?\d|nan\b|inf\b)"))
            # A line with a named step counter and a throughput is a step's record whatever else it says (swiss-ai's
            # progress.txt "Saving async checkpoint  Iteration: 100  Job throughput: 364.8 TFLOP/s/GPU"): the
            # record reader rejects a counter whose key also names a phase ("saving checkpoint iteration"), which
            # must not make the line a save phase that never ended.
            + rows(FailureKind.OK, "training steps ran", "step records with a throughput (swiss-ai Megatron-LM "
                                                         "progress.txt; trainers' records)",
                   ("hroughput", "Saving async checkpoint Iteration: 100 Job throughput: 364.8 TFLOP/s/GPU",
                    _COUNTER_AND_RATE),
                   ("TFLOP", "Saving checkpoint | iteration 2000 | 151.2 TFLOP/s per GPU", _COUNTER_AND_RATE))
            # DeepSpeed's flops profiler prints its summary after the profiled step ran (profiling/flops_profiler/
            # profiler.py print_model_profile, called from engine.py at flops_profiler.profile_step): "Profile
            # Summary at step 21:", then "fwd flops per GPU: ...", "iter latency: ...". A profile of a step is a
            # step that ran (Megatron-DeepSpeed#98, DeepSpeed#4385: healthy runs whose logs hold only it).
            + rows(FailureKind.OK, "training steps ran (a flops profile of a step)",
                   "DeepSpeed profiling/flops_profiler/profiler.py print_model_profile",
                   ("Profile Summary at step", "Profile Summary at step 21:",
                    r"(?:^|\s)Profile Summary at step [1-9]\d{0,11}:"))
            # NeMo-RL's algorithms (nemo_rl/algorithms/sft.py, dpo.py, grpo.py) print a results block after each
            # training step: "📊 Training Results:" then bullet metrics ("• loss: 0.6931"); the block is a step that
            # ran.
            + rows(FailureKind.OK, "training steps ran", "NeMo-RL algorithms' per-step results block",
                   ("Training Results:", "📊 Training Results:", r"(?:^|\s)Training Results:\s*$"))
            # judge46a: a checkpoint of a trained step, saved: the step ran. DeepSpeed's torch checkpoint engine
            # (deepspeed/runtime/checkpoint_engine/torch_checkpoint_engine.py commit, e669aaf55 on: logger.info(
            # f"[Torch] Checkpoint {tag} is ready now!"), the tag "global_step{N}" by default; Megatron-LM's
            # save_checkpoint (megatron/training/checkpointing.py: "successfully saved checkpoint from iteration
            # {:7d} to {}"; "at iteration" before 2023); the HF Trainer's _save_checkpoint ("Saving model checkpoint
            # to {output_dir}", the folder f"{PREFIX_CHECKPOINT_DIR}-{global_step}"). Step 0 is no trained step.
            + rows(FailureKind.OK, "training steps ran (a checkpoint of a trained step saved)",
                   "DeepSpeed torch_checkpoint_engine.py commit; Megatron-LM checkpointing.py save_checkpoint; "
                   "transformers trainer.py _save_checkpoint",
                   ("is ready now!", "[INFO] [torch_checkpoint_engine.py:27:commit] [Torch] Checkpoint "
                                     "global_step4000 is ready now!",
                    r"\bCheckpoint global_step0{0,8}[1-9]\d{0,11} is ready now!"),
                   ("successfully saved checkpoint", " successfully saved checkpoint from iteration    2000 to "
                                                     "/ckpt/gpt [ t 1/2, p 1/1 ]",
                    r"\bsuccessfully saved checkpoint (?:from|at) iteration\s{0,10}0{0,8}[1-9]"),
                   ("Saving model checkpoint to", "[INFO|trainer.py:3984] Saving model checkpoint to "
                                                  "saves/llama3-8b/lora/sft/checkpoint-500",
                    r"\bSaving model checkpoint to \S{0,300}?checkpoint-0{0,8}[1-9]\d{0,11}\b"))
            # judge63 (in sample after batch 52): Lightning's ModelCheckpoint names a file by its step (NeMo's
            # template "{val_loss}-{step}-{consumed_samples}"), and NeMo's checkpoint rotation logs each file it
            # saves over (nemo/collections/nlp/parts/nlp_overrides.py remove_checkpoint: "Removing checkpoint:
            # <path>"): a checkpoint of a trained step, saved or rotated, says the step ran (two NeMo 1 LoRA ranks'
            # logs of oos-batch52 show nothing else of their 50 steps)
            + rows(FailureKind.OK, "training steps ran (a checkpoint of a trained step saved)",
                   "Lightning ModelCheckpoint file names; NeMo nlp_overrides.py remove_checkpoint",
                   ("step=", "[NeMo I 2024-08-22 22:25:15 nlp_overrides:464] Removing checkpoint: /results/checkpoints/"
                             "megatron_gpt_peft_lora_tuning--validation_loss=3.313-step=10-consumed_samples=320.0.ckpt",
                    r"\b(?:Removing|Saving|[Ss]aved) (?:latest |model |last )?checkpoint:? (?:to )?[^\s\n]{0,300}?"
                    r"[-_/]step=0{0,8}[1-9]\d{0,11}\b"))
            # judge46b: build-nanogpt's log file (karpathy/build-nanogpt train_gpt2.py: `f.write(f"{step} train
            # {loss_accum.item():.6f}\n")` each step, "{step} val {:.4f}" and "{step} hella {:.4f}" every 250), the
            # format of the many GPT-2 reproductions that follow it: a bare step, the word train and a loss with six
            # decimals, the whole line. Progress; no time in it.
            + rows(FailureKind.OK, "training steps ran", "karpathy/build-nanogpt train_gpt2.py (log.txt)",
                   (" train ", "38145 train 2.997005", r"^\s{0,4}\d{1,9} train -?\d{1,6}\.\d{6}\s{0,4}$"))
            + rows(FailureKind.OK, "training steps ran", "transformers Trainer.log",
                   ("{'loss':", "{'loss': 1.7342, 'grad_norm': 0.91, 'learning_rate': 1.9e-05, 'epoch': 0.12}"),
                   ('{"loss":', '{"loss": 1.7342, "grad_norm": 0.91, "learning_rate": 1.9e-05, "epoch": 0.12}')))

# A record a training loop repeats (per epoch or per logging interval) with a duration field and nothing else to
# tell its step: accelerate examples' loguru "__main__:training_function:68 - time : 0:00:10.736053" once per epoch
# and rank, a script's "epoch done, time: 12.3s". The same line, digits aside, three times or more among the log's
# last lines, each with a key naming a time and a duration after it (Python's str(timedelta) "H:MM:SS.ffffff", or
# a number with a time unit). The loop ran that many times: progress, never a step time (a record per epoch is not
# a step). Not a line that waits, retries or warns (a wait loop also repeats a line with a time in it), nor one of
# set-up work repeated per dataset or part (Megatron's index builds, JIT builds, shard loads: "done in 0.5 s"), nor a
# liveness pulse (families.stall.LIVENESS), which says a job is alive, not that it progresses.
REPEATS_MIN = 3
REPEAT_TAIL_LINES = 60
_TIMEDELTA = r"\d{1,3}:\d{2}:\d{2}\.\d{3,6}\b"
# the key may end a longer one ("epoch_time", a JSON key in quotes); a bare number needs its decimals ("time: 12.41")
_DURATION_FIELD = re.compile(rf"(?i)(?:(?<![A-Za-z])(?:time|took|duration|cost)[\"']?\s{{0,3}}[:=]"
                             r"|\b(?:finished|completed|done|took)\s{1,3}in)\s{0,3}"
                             rf"(?:{_TIMEDELTA}|\d+(?:\.\d+)?\s{{0,2}}(?:s|sec|secs|seconds|ms|min|mins|minutes)\b"
                             r"|\d+\.\d+(?![\d.:]))")
_NOT_PROGRESS = re.compile(r"(?i)\b(?:wait\w*|retr\w*|timed? ?out|timeout|warn\w*|error|sleep\w*|heartbeat|pulse|"
                           r"alive|running for|elapsed since|connect\w*|download\w*|load\w*|"
                           # set-up work repeated per dataset, extension or model part: not training
                           r"build\w*|buil[td]|creat\w*|compil\w*|initiali\w*|ind(?:ex|ices)\w*|mappings?|"
                           r"datasets?|tokeniz\w*|prepar\w*|shards?)\b")
_DIGITS = re.compile(r"\d+")


def repeated_duration_record(lines: list[tuple[int, str]]) -> tuple[int, str] | None:
    """(position, line) of the last of the log's repeated duration records, from `lines` ((position, message)
    of the log's last lines, last first, launcher prefixes and timestamps removed); None when no such record
    repeats REPEATS_MIN times."""
    counts: dict[str, int] = {}
    last: dict[str, tuple[int, str]] = {}
    for pos, body in lines[:REPEAT_TAIL_LINES]:
        if _DURATION_FIELD.search(body) is None or _NOT_PROGRESS.search(body) is not None:
            continue
        template = _DIGITS.sub("#", body.strip())
        counts[template] = counts.get(template, 0) + 1
        last.setdefault(template, (pos, body))
    best = [last[t] for t, n in counts.items() if n >= REPEATS_MIN]
    return max(best) if best else None


# A record a loop prints once per epoch with its epoch counter and a metric, without a step counter or a duration:
# accelerate's examples ("epoch 0: {'accuracy': 0.77, 'f1': 0.84}", nlp_example.py's accelerator.print), scripts'
# "Epoch 3 | val_acc 0.91". The same line, digits aside, with the epoch counter rising over EPOCHS_MIN records: that
# many epochs ended, so training ran (progress, never a step time). Not a line that waits, retries, warns or loads
# (_NOT_PROGRESS), nor a counter that does not rise (a line repeated by ranks).
EPOCHS_MIN = 2
# The epoch counter alone on its line, decoration aside (VITS train.py logs "====> Epoch: 43" when an epoch ends): the
# same rising counter, over BARE_EPOCHS_MIN records (a counter printed at an epoch's start proves less per line).
BARE_EPOCHS_MIN = 3
# (a logger's name and level may stay in front: VITS's "Model\tINFO\t====> Epoch: 43")
_DECORATION = re.compile(r"(?:(?:[\w.-]{1,40}[\s|:-]{1,3})?(?:INFO|DEBUG|NOTICE)\b)?[\s=<>\-*#:|\[\]()]*")
# A JSON record per epoch with its numbers written as strings (judge41, oos-batch36): ALBEF / X-VLM / BLIP / LAVIS
# (e.g. zengyan-97/X-VLM Pretrain.py: train_stats = {k: "{:.5f}".format(meter.global_avg) ...}; log_stats =
# {**{f'train_{k}': v ...}, 'epoch': current_epoch}; f.write(json.dumps(log_stats) + "\n")) print
# {"train_loss_itc": "1.32444", ..., "epoch": 32}: the key's closing quote may stand before the colon, and the
# value's opening quote after it.
_EPOCH_COUNTER = re.compile(r"(?i)\bepoch\b['\"]?\s{0,3}[:=#\[(]?\s{0,3}(\d{1,6})\b")
_METRIC = re.compile(r"[A-Za-z_][\w./-]{0,60}['\"]?\s{0,3}[:=]\s{0,3}['\"]?-?\d{1,12}(?:\.\d{1,12})?"
                     r"(?:[eE][-+]?\d{1,3})?\b")


def epoch_records(lines: list[tuple[int, str]]) -> tuple[int, str] | None:
    """(position, line) of the last of the log's per-epoch records (the comment above) among `lines` ((position,
    message) of its last lines, last first); None when no such record rises over EPOCHS_MIN epochs."""
    epochs: dict[str, list[int]] = {}
    last: dict[str, tuple[int, str]] = {}
    bare: set[str] = set()
    for pos, body in lines[:REPEAT_TAIL_LINES]:
        m = _EPOCH_COUNTER.search(body)
        if m is None or _NOT_PROGRESS.search(body) is not None:
            continue
        rest = body[:m.start()] + body[m.end():]
        template = _DIGITS.sub("#", body.strip())
        if _METRIC.search(rest) is None:
            if _DECORATION.fullmatch(rest) is None:
                continue
            bare.add(template)
        epochs.setdefault(template, []).append(int(m.group(1)))
        last.setdefault(template, (pos, body))
    rising = [last[t] for t, seen in epochs.items()
              if len(seen) >= (EPOCHS_MIN if t not in bare else BARE_EPOCHS_MIN)
              and all(a > b for a, b in zip(seen, seen[1:]))]  # last first: falling
    return max(rising) if rising else None


# The run's own last step record names its planned length and has reached it: Megatron-LM / Megatron-DeepSpeed
# training.py training_log ("iteration       20/      20 | consumed samples: ..."), the shape `iteration|step N/N`.
_FINAL_STEP = re.compile(r"(?i)\b(?:iteration|iter|step)\s{0,3}[:=]?\s{0,8}(\d{1,9})\s{0,3}/\s{0,8}(\d{1,9})\b")


def planned_steps_reached(text: str) -> bool:
    """Does the log's last `iteration N/M` record have N == M (the run reached the step count it planned)? Not an
    epoch's count (NeMo 2's "Training epoch 0, iteration 19/19", a bar's "Epoch 0: ... 19/19"): an epoch's end is not
    the run's."""
    last = None
    for match in _FINAL_STEP.finditer(text):
        if "epoch" not in line_around(text, match.start()).lower():
            last = match
    return last is not None and int(last.group(1)) == int(last.group(2)) > 0


# Teardown noise (torch.distributed, NCCL): when a finished job's processes exit, the rank that hosts the TCPStore
# (rank 0) may exit first, and the other ranks' background threads then print, as warnings, that the store went away:
# c10d TCPStore.cpp "[W...] recvValue failed on SocketImpl(...): Connection reset by peer" (Broken pipe) and
# ProcessGroupNCCL.cpp's HeartbeatMonitor "Failed to check the "should dump" flag on TCPStore, (maybe TCPStore server
# has shut down too early)". NCCL's proxy service thread likewise warns "proxy.cc NCCL WARN [Service thread] Accept
# failed" / "[Proxy Service N] Failed to execute operation Close" while communicators are destroyed (or never
# destroyed: "destroy_process_group() was not called before program exit"). None of these changes the exit status.
# A timeout or a watchdog is not noise: a collective that never completes keeps the job from exiting.
_NOT_NOISE = re.compile(r"(?i)time(?:d)?[ _-]?out|watchdog|abort|terminate called|SIG[A-Z]{2,5}\b")


def teardown_noise_line(line: str) -> bool:
    """May this communication error line be shutdown noise (not a timeout, watchdog or abort)?"""
    return _NOT_NOISE.search(line) is None


def says_finished(text: str) -> bool:
    """Does the run say it finished: a completion line (COMPLETION) or its last `iteration N/N` record?"""
    for row in COMPLETION:
        idx = text.rfind(row.needle)
        if idx >= 0 and row.matches(line_around(text, idx)):
            return True
    return planned_steps_reached(text)
