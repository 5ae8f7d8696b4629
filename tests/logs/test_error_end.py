"""The rules added after batch 4 (tests/fixtures/OUT_OF_SAMPLE.md, "Batch 4"): a log alone ending in an error record
is crashed (families.error_end), one ending in a set-up or save phase is a hang (families.stall.SETUP_PHASES), a
loss-scale collapse before a traceback is a divergence, and four signatures. Each rule with a real excerpt (the
source named above it; lines shortened where they say so) and a look-alike that must keep its old verdict."""

from __future__ import annotations

import pytest

from analysis.logs.classify import classify
from analysis.logs.families import error_end, stall
from analysis.logs.outcome import trial_outcome

MEGATRON_STEP = (" iteration       20/    1000 | consumed samples:          640 | elapsed time per iteration (ms): 812.4 |"
                 " learning rate: 1.000E-04 | global batch size:    32 | lm loss: 7.112E+00 | loss scale: 65536.0 |")


# ---- error records that end a log
@pytest.mark.parametrize("text, kind, what", [
    # batch 4 deepspeed/zero_infinity_aio_n_completes_assert_1.log (DeepSpeed NVMe offload, async I/O assertion)
    ("[2023-03-01 10:00:00,000] [INFO] [stage3.py:100:setup] ZeRO Stage 3 with NVMe offload\n"
     "python: /usr/local/lib/python3.8/dist-packages/deepspeed/ops/csrc/aio/common/deepspeed_aio_common.cpp:125: "
     "void _do_io_complete(long long int, long long int, std::unique_ptr<aio_context>&, std::vector<std::chrono::"
     "duration<double> >&): Assertion `n_completes >= min_completes' failed.\n", "crashed", "C/C++ assertion"),
    # batch 4 megatron_lm/megatron_llama_nll_loss_n_classes_assert_1.log (device-side assert, shortened)
    ("/opt/pytorch/aten/src/ATen/native/cuda/Loss.cu:240: nll_loss_forward_reduce_cuda_kernel_2d: block: [0,0,0], "
     "thread: [5,0,0] Assertion `t >= 0 && t < n_classes` failed.\n", "crashed", "C/C++ assertion"),
    # batch 4 megatron_lm/slime_two_node_async_checkpoint_errno5_1.log (a logger ERROR line, shortened)
    ("INFO: saving checkpoint at iteration 100\nERROR: megatron.core.dist_checkpointing.strategies.async_utils: "
     "[Errno 5] Input/output error\n", "crashed", "logger error record"),
    # batch 4 other/mmf_butd_coco_worker_bus_error_1.log (DataLoader.cpp, no Python exception)
    ("ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared memory (shm).\n",
     "crashed", "logger error record"),
    # batch 4 deepspeed/pipe_zero_batch_size_mismatch_recursion_error_1.log: frames without a header, then the type
    ('  File "/opt/deepspeed/runtime/pipe/engine.py", line 306, in _aggregate_total_loss\n'
     "    agg_loss = self.total_loss.clone().detach()\n"
     "RecursionError: maximum recursion depth exceeded while calling a Python object\n", "crashed", "RecursionError"),
    # batch 4 megatron_deepspeed/llama_pipe_zero_stage_enum_call_type_error_1.log (padding after the colon)
    ('File "/x/deepspeed/runtime/pipe/engine.py", line 246, in _exec_reduce_grads\n'
     "TypeError:     __call__() missing 1 required positional argument: 'value'\n", "crashed", "TypeError"),
    # libstdc++'s terminate handler (the shape of c10::Error escaping a thread)
    ("terminate called after throwing an instance of 'c10::Error'\n  what():  CUDA driver error: unknown error\n",
     "crashed", "terminate called"),
])
def test_error_record_ending_a_log_crashes(text, kind, what):
    failure = classify(text)
    assert failure.kind == kind, failure.reason
    assert what in failure.reason and failure.evidence


@pytest.mark.parametrize("text, kind", [
    # a warning, a level word inside a message, a metrics key: not error records (no other evidence: unknown)
    ("UserWarning: torch.distributed.reduce_op is deprecated\n", "unknown"),
    ("WARNING: no checkpoint found, starting from scratch\n", "unknown"),
    ("eval summary: 0 ERROR(s), 3 warnings\n", "unknown"),
    ("{'Error': 0.12, 'epoch': 3}\n", "unknown"),
    # an error record far above the end (more than TAIL_LINES lines): a failure the job got past
    ("ERROR: transient I/O failure, retrying\n" + "loading shard\n" * (error_end.TAIL_LINES + 2), "unknown"),
    # an error record followed by healthy step records: the run went on
    (f"ERROR: could not reach wandb, logging offline\n{MEGATRON_STEP}\n{MEGATRON_STEP.replace(' 20/', ' 30/')}\n",
     "ok"),
])
def test_error_record_look_alikes(text, kind):
    outcome = trial_outcome(text)  # the reader finds the step records; classify alone does not parse them
    assert outcome.failure_kind == kind, outcome.reason


def test_exception_line_stating_a_configuration_rule_is_a_config_error():
    # the shape of Megatron's argument checks, quoted without a traceback header or frame
    failure = classify("building model\nValueError: num_layers (30) must be divisible by pipeline_model_parallel_size"
                       " (4)\n")
    assert failure.kind == "config_error", failure.reason


@pytest.mark.parametrize("line", ["Assertion `x' failed.", "terminate called after throwing an instance of 'E'",
                                  "[2024-05-01 10:00:00,123] [ERROR] [engine.py:80:step] boom",
                                  "2024-05-01 10:00:00 | ERROR | train:12 - boom", "ERROR:root:boom",
                                  "F0501 10:00:00.123456 123 checkpoint.cc:80] Check failed: ok", "valueError: bad"])
def test_error_record_shapes(line):
    assert error_end.error_record(line) is not None


@pytest.mark.parametrize("line", ["DeprecationWarning: x", "StopIteration", "ERRORS: 0", "no ERROR here",
                                  "INFO: all good", "Error rate 0.1", "error: 0.12"])
def test_error_record_look_alike_shapes(line):
    assert error_end.error_record(line) is None


# ---- set-up and save phases that end a log
@pytest.mark.parametrize("row", stall.SETUP_PHASES, ids=[r.needle[:30] for r in stall.SETUP_PHASES])
def test_setup_phase_row_at_the_end_is_a_hang(row):
    assert row.needle in row.example and row.source
    failure = classify(f"loading data\n{row.example}\n")
    assert failure.kind == "hang", failure.reason


@pytest.mark.parametrize("text", [
    # batch 4 deepspeed/onebit_stage2_stuck_after_checkpoint_5000_1.log (paths shortened)
    "[2024-06-26 04:16:15,567] [INFO] [torch_checkpoint_engine.py:21:save] [Torch] Saving /ckpt/checkpoint-5000/"
    "global_step5000/zero_pp_rank_0_mp_rank_00_optim_states.pt...\n[2024-06-26 04:16:33,652] [INFO] "
    "[torch_checkpoint_engine.py:23:save] [Torch] Saved /ckpt/checkpoint-5000/global_step5000/"
    "zero_pp_rank_0_mp_rank_00_optim_states.pt.\n",
    # batch 4 nemo/llama2_sft_pp2_hangs_sanity_checking_1.log
    "1,751.384 Total estimated model params size (MB)\nSanity Checking: |          | 0/? [00:00<?, ?it/s]\n",
    # batch 4 hf_trainer/axolotl_fsdp_stuck_starting_trainer_1.log
    " [INFO] [axolotl.train.log:61] [PID:1516652] [RANK:0] Starting trainer...\n",
    # batch 7 lightning/lit_parrot_2gpu_stuck_after_utils_op_load_1.log (judge8: DeepSpeed loads its ops inside
    # deepspeed.initialize, so a log that ends on the op's load time never left start-up)
    "Loading extension module utils...\nTime to load utils op: 11.247538805007935 seconds\n",
])
def test_real_setup_stalls_are_hangs(text):
    assert classify(text).kind == "hang"


@pytest.mark.parametrize("text", [
    "Validation loss decreased (24.71 --> 24.50).  Saving model ...\n",  # EarlyStopping: no checkpoint named
    "Sanity Checking DataLoader 0: 100%|██████████| 2/2 [00:01<00:00,  1.50it/s]\n",  # the sanity check finished
])
def test_setup_stall_look_alikes_stay_unknown(text):
    assert classify(text).kind == "unknown"


# ---- a loss-scale collapse before the traceback it causes
def test_gpt_neox_skipped_iterations_is_diverged():
    # batch 4 megatron_deepspeed/neox_enron_skipped_50_iterations_overflow_1.log (frames shortened)
    text = ("Traceback (most recent call last):\n  File \"train.py\", line 27, in <module>\n    pretrain(neox_args)\n"
            "Exception: Skipped 50 iterations in a row due to Overflow - Exiting training.\n")
    assert classify(text).kind == "diverged"


def _fairseq(scales: list[float]) -> str:
    lines = [f"| WARNING: overflow detected, setting loss scale to: {s}" for s in scales]
    return "\n".join(lines) + "\nTraceback (most recent call last):\n"


def test_fairseq_scale_collapse_then_traceback_is_diverged():
    # batch 4 other/fairseq_nmt_scaling_loss_scale_minimum_1.log: halving down to 0.000122, then a traceback
    failure = classify(_fairseq([0.0009765625, 0.00048828125, 0.000244140625, 0.0001220703125]))
    assert failure.kind == "diverged" and "0.000122" in failure.reason


@pytest.mark.parametrize("scales", [[128.0, 64.0, 32.0, 16.0], [0.5, 0.25, 0.5, 0.25], [0.5, 0.25]])
def test_fairseq_scale_look_alikes_stay_crashed(scales):
    # a start-up search above 1, a scale that recovered in between, too few overflows: the traceback decides
    assert classify(_fairseq(scales)).kind == "crashed"


# ---- signatures
@pytest.mark.parametrize("text, kind", [
    # batch 4 other/self_explaining_nlp_oom_message_tail_only_1.log
    ("Tried to allocate 20.00 MiB (GPU 0; 1.96 GiB total capacity; 1.24 GiB already allocated; 2.88 MiB free; "
     "1.25 GiB reserved in total by PyTorch)\n", "oom"),
    # batch 4 other/captcha_trainer_tf_validation_resource_exhausted_1.log
    ("Hint: If you want to see a list of allocated tensors when OOM happens, add report_tensor_allocations_upon_oom "
     "to RunOptions for current allocation info.\nTraceback (most recent call last):\n", "oom"),
    # batch 4 nemo/nemo2_finetune_qwen3_8b_collective_timeout_dump_signal_1.log (shortened)
    ("[rank7]:[E1006 15:30:20.630185464 ProcessGroupNCCL.cpp:1772] [PG ID 0 PG GUID 0(default_pg) Rank 7] Received "
     "a dump signal due to a collective timeout from  rank 3 and we will try our best to dump the debug info.\n",
     "comm_error"),
    # batch 4 megatron_lm/collnet_no_algorithm_protocol_available_barrier_1.log
    ("201: :41367:41367 [1] enqueue.cc:422 NCCL WARN Error : no algorithm/protocol available\n"
     "201: Traceback (most recent call last):\n", "comm_error"),
])
def test_new_signatures(text, kind):
    failure = classify(text)
    assert failure.kind == kind, failure.reason


@pytest.mark.parametrize("text", [
    "memory: 1.24 GiB allocated, 2.88 MiB free\n",  # a memory report, not the allocator's OOM body
    "Hint: set NCCL_ALGO=Ring if a collective is slow\n",
])
def test_signature_look_alikes_stay_unknown(text):
    assert classify(text).kind == "unknown"


# ---- a stall point that the NCCL watchdog ended
def test_stall_point_then_watchdog_timeout_is_comm_error():
    # batch 4 megatron_lm/gpt3_fused_kernels_stuck_watchdog_allreduce_1.log (Megatron-LM#1050, shortened)
    text = ("> compiling and loading fused kernels ...\ncompiling and loading fused kernels[rank1]:[E829 16:32:30.656"
            " ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, "
            "OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600034 milliseconds before timing "
            "out.\n")
    assert classify(text).kind == "comm_error"
    # look-alike: the same stall point with nothing after it stays a hang
    assert classify("> compiling and loading fused kernels ...\n").kind == "hang"


@pytest.mark.parametrize("text, kind", [
    # batch 4 hf_trainer/ms_swift_pack_to_max_length_needs_distributed_assert_1.log: a feature needing distributed
    # training, asked for in a single-process run
    ("Traceback (most recent call last):\n  File \"swift/llm/sft.py\", line 80, in main\n"
     "AssertionError: pack_to_max_length is only available with distributed training.\n", "config_error"),
    # look-alike: distributed training named, but no rule stated
    ("Traceback (most recent call last):\n  File \"train.py\", line 80, in main\n"
     "AssertionError: distributed training lost rank 3\n", "crashed"),
])
def test_distributed_training_requirement_is_a_config_rule(text, kind):
    assert classify(text).kind == kind
