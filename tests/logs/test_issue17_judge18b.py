"""Issue 17, batch 17's healthy-side causes (helper judge18b): communication warnings printed while a finished run shuts
down are noise; the ranks' copies of one step record are one step; a progress bar's per-step drawings beat the
Trainer's whole-run mean. Each family: real lines from a fixture (cited), made-up look-alikes that must not match."""

from __future__ import annotations

from analysis.logs.classify import classify
from analysis.logs.families.completion import planned_steps_reached, says_finished, teardown_noise_line
from analysis.logs.logtext import normalize
from analysis.logs.outcome import trial_outcome
from analysis.logs.read_log import read_log
from launcher.core.kinds import FailureKind

# tests/fixtures/oos-batch17/nemo/nemo2_toy_llama3_pretrain_max_steps_20_nccl_teardown_warns_1.log
_NEMO_STEP = ("Training epoch 0, iteration 19/19 | lr: 2.999e-06 | consumed_samples: 1280 | global_batch_size: 64 | "
              "global_step: 19 | reduced_train_loss: 10.84 | train_step_timing in s: 0.4437\n")
_NEMO_DONE = "`Trainer.fit` stopped: `max_steps=20` reached.\n"
_NEMO_WARNS = ("7d3aaba68423:444:957 [0] proxy.cc:1458 NCCL WARN [Service thread] Accept failed Success\n"
               "7d3aaba68423:444:957 [0] proxy.cc:1521 NCCL WARN [Proxy Service 0] Failed to execute operation Close "
               "from rank 0, retcode 3\n")
# tests/fixtures/oos-batch17/megatron_deepspeed/lockclock_ib_dual16_formal_1155_tcpstore_teardown_frames_1.log
_MDS_LAST = ("v100x16-2:  iteration       20/      20 | consumed samples:          320 | consumed tokens:       655360 | "
             "elapsed time per iteration (ms): 17518.8 | learning rate: 1.000E-06 | global batch size:    16 | "
             "lm loss: 1.028959E+01 | loss scale: 1.0 | grad norm: 18.573 |\n")
_TCPSTORE = ("v100x16-1: [rank7]:[W411 11:24:09.688070360 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=114, "
             "addr=[::]:63789, remote=[fdff:ffff::]:51200): Connection reset by peer\n"
             "v100x16-1: Exception raised from recvBytes at /pytorch/torch/csrc/distributed/c10d/Utils.hpp:679 (most "
             "recent call first):\n"
             "v100x16-1: [rank7]:[W411 11:24:09.691594190 ProcessGroupNCCL.cpp:1771] [PG ID 0 PG GUID 0(default_pg) Rank "
             "7] Failed to check the \"should dump\" flag on TCPStore, (maybe TCPStore server has shut down too early), "
             "with error: Connection reset by peer\n")
_DS_EXITS = "v100x16-2: [2026-04-11 11:24:13,208] [INFO] [launch.py:367:main] Process 143879 exits successfully.\n"
# tests/fixtures/oos-batch17/megatron_lm/attn_bench_throughput_pass_upstream_300_iters_teardown_warnings_1.log
_MLM_LAST = ("55:  [2026-06-26 15:10:26.739327] iteration      300/     300 | consumed samples:       100800 | elapsed "
             "time per iteration (ms): 1348.4 | throughput per GPU (TFLOP/s/GPU): 287.4 | learning rate: 4.000000E-05 "
             "| global batch size:   336 | lm loss: 4.308353E+00 | loss scale: 1.0 | grad norm: 0.198 |\n")
_MLM_DONE = " 0: [after training is done] datetime: 2026-06-26 15:10:26.816376 \n"
_MLM_STORE = ("55: [rank55]:[W626 15:11:03.092144172 TCPStore.cpp:125] [c10d] recvValue failed on SocketImpl(fd=75, "
              "addr=[nid007543]:44624, remote=[nid006691]:8891): Connection reset by peer\n")


def _kind(text: str) -> str:
    return trial_outcome(text).failure_kind


def test_teardown_warnings_after_a_finished_run_are_noise():
    assert _kind(_NEMO_STEP + _NEMO_DONE + _NEMO_WARNS) == "ok"
    assert _kind(_MDS_LAST + _TCPSTORE + _DS_EXITS) == "ok"  # the launcher's success comes after the warnings
    assert _kind(_MDS_LAST + _TCPSTORE) == "ok"  # the last record is the planned last iteration
    assert _kind(_MLM_LAST + _MLM_DONE + _MLM_STORE) == "ok"


def test_the_same_warnings_without_a_finished_run_are_a_communication_error():
    # made up: the run stopped short of its planned steps, or nothing says it finished
    short = _MDS_LAST.replace("iteration       20/      20", "iteration       12/      20")
    assert _kind(short + _TCPSTORE) == "comm_error"
    assert _kind(_NEMO_STEP + _NEMO_WARNS) == "comm_error"  # an epoch's last iteration is not the run's
    mlm_short = _MLM_LAST.replace("iteration      300/     300", "iteration      250/     300")
    assert _kind(mlm_short + _MLM_STORE) == "comm_error"


def test_a_failed_exit_or_a_hang_after_finishing_is_not_noise():
    # made up: a launcher's non-zero exit status, the job's own traceback, a watchdog timeout
    failed = "[INFO] [launch.py:367:main] Process 143879 exits with return code = 1\n"
    assert _kind(_MDS_LAST + _TCPSTORE + failed) != "ok"
    trace = ("Traceback (most recent call last):\n  File \"pretrain_gpt.py\", line 12, in <module>\n"
             "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, remote process exited\n")
    assert _kind(_MLM_LAST + _MLM_DONE + _MLM_STORE + trace) != "ok"
    watchdog = ("[rank3]:[E ProcessGroupNCCL.cpp:563] [Rank 3] Watchdog caught collective operation timeout: "
                "WorkNCCL(SeqNum=305, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600015 milliseconds before timing "
                "out.\n")
    assert _kind(_MLM_LAST + _MLM_DONE + watchdog) != "ok"
    assert not teardown_noise_line(watchdog)
    assert teardown_noise_line(_NEMO_WARNS.splitlines()[0])


def test_planned_steps_reached_reads_the_last_record_and_not_an_epoch():
    assert planned_steps_reached(_MDS_LAST) and planned_steps_reached(_MLM_LAST)
    assert not planned_steps_reached(_MDS_LAST + _MDS_LAST.replace("20/      20", "21/      40"))
    assert not planned_steps_reached(_NEMO_STEP)
    assert not planned_steps_reached("Epoch 0: 100%|##########| 19/19 [00:08<00:00, 2.28it/s, loss=10.8]\n")
    assert says_finished(_NEMO_DONE) and says_finished(_DS_EXITS) and not says_finished(_TCPSTORE)


def test_a_log_without_steps_keeps_its_communication_error():
    # classify on the warnings alone (no progress at all): a failure, whatever the wording
    assert classify(_TCPSTORE).kind == FailureKind.COMM_ERROR


# tests/fixtures/oos-batch17/deepspeed/step_time_analysis_gpt_1_8b_zero_baseline_100_steps_summary_1.log: four ranks
# each print a record of the same step, behind the launcher's rank label ("2: ")
def _ranked_steps(first: int, last: int) -> str:
    return "".join(f"{r}: [Rank {r}] Step {s}: loss=2.4375, time=0.851s, alloc_mem=8.11 GB, peak_mem=11.68 GB\n"
                   for s in range(first, last + 1) for r in (2, 3, 1, 0))


def test_per_rank_copies_of_one_step_are_one_step():
    reading = read_log(normalize(_ranked_steps(90, 99)))
    assert {it.iteration for it in reading.iterations} == set(range(90, 100))
    assert all(abs(it.step_time_s - 0.851) < 1e-9 for it in reading.iterations)


def test_named_inner_counters_are_still_added_up():
    # made up: nanoGPT-style gradient accumulation, two logged iterations per optimizer step, 0.4 s each
    text = "".join(f"iter {2 * s + k} step {s}: loss 2.1, time 400.00ms\n" for s in range(1, 11) for k in (0, 1))
    reading = read_log(normalize(text))
    assert reading.iterations and all(abs(it.step_time_s - 0.8) < 1e-9 for it in reading.iterations)


# tests/fixtures/oos-batch17/hf_trainer/ezpz_hf_trainer_fsdp_aurora_100_steps_execution_finished_1.log: the bar times
# the loop (3.58 s/it); train_runtime (425.4 s over 100 steps) and the bar's closing drawing include the saves
def _bar(n: int, rate: float) -> str:
    elapsed = round(n * rate)
    return f"{n:3d}%|#         | {n}/100 [{elapsed // 60:02d}:{elapsed % 60:02d}<00:30,  {rate:.2f}s/it]\n"


_HF_END = ("[INFO|trainer.py:4309] 2025-12-31 13:18:50,978 >> Saving model checkpoint to outputs/checkpoint-100\n"
           "Training completed. Do not forget to share your model on huggingface.co/models =)\n"
           "{'train_runtime': 425.4295, 'train_samples_per_second': 5.641, 'train_steps_per_second': 0.235, "
           "'train_loss': 2.489668021202087, 'epoch': 1.0}\n"
           "100%|##########| 100/100 [07:05<00:00,  3.58s/it]\n"
           "100%|##########| 100/100 [07:05<00:00,  4.25s/it]\n")


def test_a_bar_that_times_the_steps_beats_the_trainer_whole_run_mean():
    text = "".join(_bar(n, 3.58) for n in range(10, 100)) + _HF_END
    outcome = trial_outcome(text)
    assert outcome.failure_kind == "ok"
    assert abs(outcome.metrics["step_time_s"] - 3.58) / 3.58 < 0.05  # not 4.255 (1 / 0.235)


def test_without_a_bar_the_trainer_whole_run_mean_stands():
    reading = read_log(normalize(_HF_END.split("100%")[0]))
    assert reading.format == "hf_trainer" and reading.final is not None
    assert abs(reading.final.step_time_s - 1 / 0.235) < 1e-9
