"""Hangs from the log alone (analysis.logs.families.stall): a log whose last activity is a wait phase, a user's
interrupt while the log was not at a step, a tail of liveness lines only; and the look-alikes that must stay as they
were (a wait phase followed by steps, a run stopped by hand at a step, a short liveness tail, job context given)."""

from __future__ import annotations

import pytest

from analysis.logs.classify import classify
from analysis.logs.families import stall
from analysis.logs.outcome import trial_outcome

MEGATRON_STEP = (" iteration       20/    1000 | consumed samples:          640 | elapsed time per iteration (ms): 812.4 |"
                 " learning rate: 1.000E-04 | global batch size:    32 | lm loss: 7.112E+00 | loss scale: 65536.0 |")


@pytest.mark.parametrize("row", stall.WAIT_PHASES, ids=[r.label[-40:] + ":" + r.needle[:20] for r in stall.WAIT_PHASES])
def test_wait_phase_row_at_the_end_is_a_hang(row):
    assert row.needle in row.example and row.source
    failure = classify(f"loading data\n{row.example}\n")
    assert failure.kind == "hang", failure.reason
    assert failure.evidence and failure.evidence[0][0] == 2


@pytest.mark.parametrize("row", stall.WAIT_PHASES + stall.SETUP_PHASES,
                         ids=[r.label[-40:] + ":" + r.needle[:20] for r in stall.WAIT_PHASES + stall.SETUP_PHASES])
def test_wait_or_setup_phase_followed_by_steps_is_ok(row):
    outcome = trial_outcome(f"{row.example}\n{MEGATRON_STEP}\n{MEGATRON_STEP.replace(' 20/', ' 30/')}\n")
    assert outcome.failure_kind == "ok", outcome.reason


@pytest.mark.parametrize("text", [
    # ray-project/ray#46795 (corpus other-logs/ray_megatron_actor_stuck_second_iteration_nccl_info_1.log): stops in
    # NCCL set-up lines
    "(MegatronActor pid=12880, ip=33.207.59.232) t-20240725161813-n7hxb-worker-1:12880:13786 [0] NCCL INFO Channel "
    "30/32 :    0\n(MegatronActor pid=12880, ip=33.207.59.232) t-20240725161813-n7hxb-worker-1:12880:13786 [0] NCCL "
    "INFO Channel 31/32 :    0\n",
    # OpenRLHF#670 (corpus hf-logs/openrlhf_dpo_zero3_hang_first_step_1.log): the bar never left step 0
    "Train epoch:   0%|                                        | 0/1 [00:00<?, ?it/s]\n"
    "Train step of epoch 0:   0%|                           | 0/4887 [00:00<?, ?it/s]\n",
    # THUDM/slime#1487 (corpus megatron-logs/slime_megatron_actor_train_hang_1.log): a timer started, then only a
    # polled metrics endpoint
    "> (MegatronTrainRayActor pid=19450) [2026-03-24 06:36:50] timer.py:24 - Timer actor_train start\n"
    '> (SGLangEngine pid=17467) [2026-03-24 06:36:52] INFO:     172.17.0.11:41646 - "GET /metrics HTTP/1.1" 200 OK '
    "[repeated 4x across cluster]\n",
])
def test_real_stalls_are_hangs(text):
    assert classify(text).kind == "hang"


@pytest.mark.parametrize("text, kind", [
    ("NCCL INFO comm 0x5581 rank 0 nranks 8 cudaDev 0 busId 1b000 - Init COMPLETE\n"
     "RuntimeError: CUDA error: an illegal memory access was encountered\n", "crashed"),  # an error after it wins
    ("n1:1:1 [0] NCCL INFO transport/net.cc:1302 -> 2\n", "comm_error"),  # NCCLCHECK trace: a failure, not a wait
    ("Epoch 3:  10%|#         | 10/100 [00:05<00:45,  2.00it/s]\n", "ok"),  # a bar that moved
    ("[2026-03-24 06:40:02] timer.py:24 - Timer actor_train end\n", "unknown"),  # a phase that ended
    ("restarting training from checkpoint\n", "unknown"),  # not a start line
])
def test_stall_look_alikes(text, kind):
    assert trial_outcome(text).failure_kind == kind


@pytest.mark.parametrize("tail, kind", [
    ("n1:12880:13786 [0] NCCL INFO Channel 31/32 :    0", "hang"),  # a communicator set up after step 1: stuck
    ("INFO:torch.distributed.distributed_c10d:Waiting in store based barrier to initialize process group for "
     "rank: 0, key: store_based_barrier_key:2 (world_size=8, worker_count=4, timeout=0:30:00)", "hang"),
    ("Epoch 1:   0%|          | 0/100 [00:00<?, ?it/s]", "ok"),  # a new epoch's first line: start-up waits only
    ("Starting training ...", "ok"),
    ("NCCL INFO Connected all rings\n[titan] 2025-06-01 12:00:00,000 - root - INFO - Training completed", "ok"),
])
def test_waits_after_steps(tail, kind):
    outcome = trial_outcome(f"{MEGATRON_STEP}\n{MEGATRON_STEP.replace(' 20/', ' 30/')}\n{tail}\n")
    assert outcome.failure_kind == kind, outcome.reason


def test_job_context_decides_over_the_log_alone():
    text = "NCCL INFO Connected all rings\n"
    assert classify(text, exit_code=0).kind == "unknown"
    assert classify(text, slurm_state="CANCELLED").kind == "cancelled"


# NVIDIA/Megatron-LM#82 (corpus megatron-logs/fused_kernel_compile_stuck_ctrl_c_1.log), cut: stuck compiling the
# fused kernels, then Ctrl-C.
CTRL_C_AT_START_UP = ("using torch.float16 for parameters ...\n^CTraceback (most recent call last):\n"
                      '  File "pretrain_gpt.py", line 149, in <module>\n')
# MCG-NJU/RTD-Action#31 (corpus torch-logs/biot5_ddp_stuck_after_reducer_rebuilt_sigint_1.log), cut.
SIGINT_AFTER_DDP_INFO = ("[2024-02-22 19:20:22,163][torch.nn.parallel.distributed][INFO] - Reducer buckets have been "
                         "rebuilt in this iteration.\n\nWARNING:torch.distributed.elastic.agent.server.api:Received 2 "
                         "death signal, shutting down workers\n")


@pytest.mark.parametrize("text", [CTRL_C_AT_START_UP, "building datasets ...\nKeyboardInterrupt\n"])
def test_interrupt_while_not_at_a_step_is_a_hang(text):
    failure = classify(text)
    assert failure.kind == "hang" and "interrupted" in failure.reason, failure.reason


def test_interrupt_with_no_step_and_no_sign_of_a_stall_is_a_stop_by_hand():
    # judge52: DDP's info line opens no phase, no step record stands above it and no clock runs on to the interrupt:
    # nothing in the log says the job had stopped moving (the thread's title says it; the log alone does not)
    failure = classify(SIGINT_AFTER_DDP_INFO)
    assert failure.kind == "cancelled" and "interrupted by hand" in failure.reason, failure.reason


@pytest.mark.parametrize("text, kind", [
    (f"{MEGATRON_STEP}\n^CTraceback (most recent call last):\n  File \"pretrain_gpt.py\", line 149\nKeyboardInterrupt\n",
     "cancelled"),  # a running job stopped by hand at a step, before its planned end (judge20c: was crashed)
    ("building datasets ...\nWARNING:torch.distributed.elastic.agent.server.api:Received 15 death signal, shutting "
     "down workers\n", "cancelled"),  # SIGTERM: stopped from outside, not the user's interrupt
    ("Traceback (most recent call last):\n  File \"train.py\", line 3\nRuntimeError: CUDA error: an illegal memory "
     "access was encountered\n^C\n", "crashed"),  # the crash stands above the interrupt
])
def test_interrupt_look_alikes(text, kind):
    assert classify(text).kind == kind


def test_caret_c_inside_a_line_is_not_an_interrupt():
    # '^C' inside a line (a regex, binary junk) is not the terminal's echo of Ctrl-C
    assert classify("building datasets ...\nfilter: ^C[a-z]+ applied to names\n").kind == "unknown"
    assert classify("building datasets ...\n\x00\x01 ^Cq\x7f\n").kind != "hang"


# bigscience-workshop/bigscience tr11-176B-ml chronicles (corpus megatron-logs/bigscience_mds_hang_eval_1.log),
# cut: a step, an evaluation, then only the cron pulse.
PULSE_TAIL = ("[default7]: iteration    45000/  115311 | consumed samples:     76002224 | elapsed time per iteration (s): "
              "111.00 | learning rate: 4.298E-05 | global batch size:  2048 | lm loss: 2.113567E+00 |\n"
              "[default7]:valid loss at iteration 45000 | lm loss value: 2.327091E+00 | lm loss PPL: 1.024808E+01 |\n"
              "[2022-05-01 03:56:11] PULSE: tr11-176B-ml is running for 1-07:27:33 since 2022-04-29T20:28:38\n"
              "[{t}] PULSE: tr11-176B-ml is running for 1-09:27:40 since 2022-04-29T20:28:38\n")


def test_liveness_only_tail_longer_than_the_span_is_a_hang():
    outcome = trial_outcome(PULSE_TAIL.format(t="2022-05-01 05:56:18"))
    assert outcome.failure_kind == "hang", outcome.reason


def test_short_liveness_tail_stays_ok():
    outcome = trial_outcome(PULSE_TAIL.format(t="2022-05-01 04:06:11"))  # 10 min: a slow evaluation, not a stall
    assert outcome.failure_kind == "ok", outcome.reason


@pytest.mark.parametrize("text", ["^C", "KeyboardInterrupt", "0%|", "\n\n\n", "PULSE: " * 50, "NCCL INFO\n" * 3,
                                  "x\n" * 100 + "^C" * 1000])
def test_odd_inputs_never_raise(text):
    assert classify(text).kind in ("hang", "unknown", "crashed", "cancelled")
