"""Issue 17 (helper judge30): batch 26's misses as families. MLPerf Training result files (mlcommons/logging's mllog,
`:::MLLOG {json}` records, mlperf_logging/mllog/mllog.py@399280cb0cb21247c4c08b0050ee7c882b9a1560): a record's
`time_ms` is a wall-clock stamp (`_current_time_ms`: `int(time.time() * 1e3)`), never a step time; a `run_stop`
with `metadata.status` "success" (constants.py: RUN_STOP, STATUS, SUCCESS) is the run's end, "aborted" is not; the
`tracked_stats` record's `train_step_time` is the step time (analysis.logs.parse_mllog)."""

from __future__ import annotations

from pathlib import Path

import pytest
from log_fixtures import body, kind_of

from analysis.logs.outcome import measurements
from analysis.logs.parse_generic import read_records
from analysis.logs.parse_mllog import parse_mllog

FIXTURES = Path(__file__).parents[1] / "fixtures" / "oos-batch26"
_HPE = FIXTURES / "nemo/b_mlperf_v51_hpe_xd670_h200_llama31_8b_64gpu_run_stop_success_1.log"
_ORACLE = FIXTURES / "nemo/b_mlperf_v50_oracle_h200_llama2_70b_lora_nccl_proxy_warn_after_success_1.log"
_HABANA = FIXTURES / "megatron_deepspeed/b_mlperf_v31_habana_gaudi2_gpt3_175b_mllog_only_run_stop_success_1.log"

# the shapes of the fixtures' lines (HPE's result_1.txt: tracked_stats at custom_callbacks.py:476, run_stop at
# mlperf_common callbacks/logging.py:106)
_STAT = (' 0: :::MLLOG {{"namespace": "", "time_ms": {ms}, "event_type": "POINT_IN_TIME", "key": "tracked_stats", '
         '"value": {{"train_step_time": {t}, "reduced_train_loss": 3.38}}, "metadata": {{"file": '
         '"/workspace/llm/custom_callbacks.py", "lineno": 476, "step": {step}.0}}}}\n')
_STOP = (' 0: :::MLLOG {{"namespace": "", "time_ms": 1760094112066, "event_type": "INTERVAL_END", "key": "run_stop", '
         '"value": null, "metadata": {{"file": "/usr/local/lib/python3.12/dist-packages/mlperf_common/callbacks/'
         'logging.py", "lineno": 106, "step": 6144, "samples_count": 196608, "status": "{status}"}}}}\n')
_PROXY = ("7: GPU-358:2996589:3001603 [7] proxy.cc:1458 NCCL WARN [Service thread] Accept failed Resource temporarily "
          "unavailable\n")


def _stats(n: int = 12, step_s: float = 0.35) -> str:
    return "".join(_STAT.format(ms=1760093749552 + 11_300 * i, t=step_s + 0.001 * (i % 3), step=5151 + 32 * i)
                   for i in range(n))


def test_mllog_train_step_time_is_the_step_time():
    iters = parse_mllog(_stats())
    assert [it.iteration for it in iters[:2]] == [5151, 5183]
    assert measurements(_stats() + _STOP.format(status="success"))[0]["step_time_s"] == pytest.approx(0.351, rel=0.01)


def test_mllog_records_without_a_step_are_read_in_order():
    # mlperf_common's block summary: only samples_count in its metadata (Lambda's v5.1 LoRA result_1.txt)
    line = (':::MLLOG {"namespace": "", "time_ms": 17598521%05d, "event_type": "POINT_IN_TIME", "key": '
            '"tracked_stats", "value": {"train_step_time": 0.182}, "metadata": {"file": "logging.py", "lineno": 210, '
            '"samples_count": 387}}\n')
    assert len(parse_mllog("".join(line % (9_600 * i) for i in range(5)))) == 5


def test_time_ms_is_a_stamp_not_a_step_time():
    # the time_ms field alone: no per-step time at all (it was read as 1.76e9 s per step)
    text = "".join(_STAT.format(ms=1760093749552 + 11_300 * i, t="null", step=5151 + 32 * i) for i in range(12))
    reading = read_records(text)
    assert all(it.step_time_s < 1e6 for it in reading.iterations)
    # a real duration in ms is still one
    real = "".join(f"step {i} | loss 2.1 | time_ms {350 + i % 3}\n" for i in range(12))
    assert read_records(real).iterations[-1].step_time_s == pytest.approx(0.35, abs=0.01)


@pytest.mark.parametrize("path", [_HPE, _ORACLE, _HABANA], ids=["hpe", "oracle_proxy_warn", "habana_mllog_only"])
def test_batch26_mlperf_results_are_ok(path):
    assert kind_of(body(path)) == "ok"


def test_nccl_proxy_warnings_after_a_successful_run_stop_are_teardown_noise():
    assert kind_of(_stats() + _STOP.format(status="success") + _PROXY * 3) == "ok"


@pytest.mark.parametrize("status", ["aborted", "running"])
def test_run_stop_without_success_is_not_a_finished_run(status):
    assert kind_of(_stats() + _STOP.format(status=status) + _PROXY * 3) != "ok"


def test_other_run_stop_look_alikes_are_not_a_finish():
    # a JSON key that is not mllog's, and an eval record with a success status
    text = _stats() + ('{"key": "run_stop", "status": "success"}\n'
                       ':::MLLOG {"key": "eval_stop", "metadata": {"status": "success"}}\n') + _PROXY * 3
    assert kind_of(text) != "ok"


# A hand interrupt is a stall only when the job had stopped printing its steps (classify._in_step_cycle).
_MAP_NEO = FIXTURES / "megatron_lm/a_map_neo_2b_8gpu_two_iterations_keyboard_interrupt_in_allreduce_1.log"
_DISTILL = FIXTURES / "megatron_lm/c_moe_distill_cp2_ep2_keyboardinterrupt_in_token_dispatch_after_25_iterations_1.log"
_REAL_STALLS = [Path(__file__).parents[1] / "fixtures" / p for p in (
    "oos-batch5/deepspeed/peft_zero3_stuck_after_checkpoint_ctrl_c_1.log",
    "oos-batch3/pytorch/biot5_ddp_stuck_after_reducer_rebuilt_sigint_1.log",
    "oos-batch3/megatron_lm/fused_kernel_compile_stuck_ctrl_c_1.log")]


def _iteration(n: int) -> str:
    # Megatron-LM training.py training_log's record (the fixtures' shape)
    return (f" iteration {n:8d}/     448 | consumed samples: {2 * n:12d} | elapsed time per iteration (ms): "
            f"{3245.0 + n:.1f} | learning rate: 4.99E-06 | lm loss: 1.2E+00 |\n")


def _debug(n: int) -> str:  # an author's per-step debug print (orangeaico's fork prints its batch every step)
    return f"rank 0 tp rank 0 cp rank 0 token shape torch.Size([1, {65000 - n}]) loss mask {n}\n"


_LIST_TRACEBACK = ("WARNING:megatron.core.utils:\n['Traceback (most recent call last):\\n', '  File \"pretrain_gpt.py\", "
                   "line 161, in forward_step\\n', 'KeyboardInterrupt\\n']\n")
_PY_TRACEBACK = ("[rank7]: Traceback (most recent call last):\n[rank7]:   File \"pretrain_gpt.py\", line 205, in "
                 "<module>\n[rank7]:     work = group.allreduce([tensor], opts)\n[rank7]: KeyboardInterrupt\n")


@pytest.mark.parametrize("path", [_MAP_NEO, _DISTILL], ids=["map_neo_traceback", "distill_debug_prints"])
def test_batch26_interrupts_after_steps_are_cancelled(path):
    assert kind_of(body(path)) == "cancelled"


@pytest.mark.parametrize("path", _REAL_STALLS, ids=[p.name[:30] for p in _REAL_STALLS])
def test_real_stalls_stopped_by_hand_stay_hangs(path):
    assert kind_of(body(path)) == "hang"


def test_interrupt_after_the_steps_own_chatter_is_cancelled():
    text = "".join(_iteration(n) + _debug(n) + _debug(n + 1) for n in range(1, 6))
    assert kind_of(text + _LIST_TRACEBACK) == "cancelled"
    assert kind_of("".join(_iteration(n) for n in (1, 2)) + _PY_TRACEBACK) == "cancelled"


def test_interrupt_after_a_line_the_steps_never_print_is_a_stall():
    steps = "".join(_iteration(n) + _debug(n) for n in range(1, 6))
    # a phase the loop does not run at every step (the peft fixture's checkpoint save, then nothing)
    stuck = "Saving model checkpoint to ../output/checkpoint-5\nInvalidate trace cache @ step 0: expected module 0\n"
    assert kind_of(steps + stuck + _LIST_TRACEBACK) == "hang"


# A counter that never changes is not the step counter (parse_generic._constant_counter_sequence).
_AI4SCI = FIXTURES / "other/a_alcf_ai4sci_tf_horovod_ilsvrc_bs512_8gpu_one_epoch_completes_1.log"


def _ai4sci(i: int, dt: float, ms: int = 0) -> str:
    # the ai4sci trainer's line (the fixture's line 618, colour codes removed)
    sec = 47 * 60 + 9 * i  # records 9 s apart from 09:47:00
    return (f"[2022-11-03 09:{sec // 60:02d}:{sec % 60:02d},{ms:03d}][ai4sci.trainer][INFO] - [0] [0/1: {5120 * i} / "
            f"160145 (3%)] epoch=0.0000 dt={dt:.4f} running_loss=0.0005 batch_loss=0.0137 acc=0.0000\n")


def test_batch26_horovod_epoch_prefix_is_not_the_step_counter():
    assert _step_s(body(_AI4SCI)) == pytest.approx(0.5779, rel=0.05)


def _step_s(text: str) -> float | None:
    return measurements(text)[0].get("step_time_s")


def test_a_constant_counter_over_advancing_timestamps_is_a_sequence():
    text = _ai4sci(0, 26.35) + "".join(_ai4sci(i, 0.57 + 0.01 * (i % 2)) for i in range(1, 12))
    assert _step_s(text) == pytest.approx(0.575, rel=0.03)


def test_ranks_printing_one_step_are_still_one_record():
    # eight ranks print the same step within milliseconds: one record, the first (26.35 s, the warm-up)
    text = "".join(_ai4sci(0, 26.35 + r, ms=r) for r in range(8))
    assert len(read_records(text).iterations) == 1
