"""Failure classification and retry policy, on every fixture log and on small synthetic lines."""

from __future__ import annotations

import pytest
from log_fixtures import ALL_LOGS, FIXTURES, body  # noqa: F401  (shared with the other log tests)

from analysis.logs.classify import FAILURE_KINDS, RETRY_POLICY, Failure, classify

HUNG = {"seconds_since_progress": 7200.0, "hang_timeout_s": 1800.0}

# The first 27 fixtures under several job states (tests/logs/test_corpus.py judges every fixture once, with the context
# its INDEX.tsv row gives). (fixture, classify kwargs, expected kind, text the reason must contain)
FIXTURE_CASES = [
    ("alcf_mds_iter_kv_format_1.log", {"has_result": True, "exit_code": 0}, "ok", "finished"),
    ("alcf_mds_iter_mem_1.log", {"has_result": True, "slurm_state": "COMPLETED"}, "ok", "finished"),
    # no result given, but Megatron's own end-of-run line: finished (families.completion)
    ("bigscience_mds_exit_duration_1.log", {"exit_code": 0}, "ok", "exiting program after 1190"),
    # faulty GPU: ECC error, then "CUDA error: out of memory" at the restart's barrier -> the node, not the layout
    ("bigscience_mds_gpu_fault_cuda_oom_1.log", {"exit_code": 1}, "node_failure", "uncorrectable ECC error"),
    ("bigscience_mds_hang_eval_1.log", {"slurm_state": "RUNNING", **HUNG}, "hang", "no progress for 7200 s"),
    ("bigscience_mds_hang_eval_1.log", {"slurm_state": "RUNNING"}, "unknown", "PULSE"),  # log alone: can't tell
    ("bigscience_mds_iter_fp16_losscale_1.log", {"slurm_state": "TIMEOUT"}, "time_limit", "SLURM state TIMEOUT"),
    ("bigscience_mds_iter_ok_1.log", {"has_result": True, "exit_code": 0}, "ok", "finished"),
    ("bigscience_mds_iter_wrapped_1.log", {"slurm_state": "PREEMPTED"}, "preempted", "SLURM state PREEMPTED"),
    ("fused_kernel_compile_hang_2.log", {"slurm_state": "TIMEOUT"}, "hang", "compiling and loading fused kernels"),
    ("fused_kernel_hang_1.log", {"slurm_state": "CANCELLED by 0", **HUNG}, "hang", "fused_kernels/build/lock"),
    # a log alone that ends at a known stall point: nothing says the job ended any other way
    ("fused_kernel_hang_1.log", {}, "hang", "compiling and loading fused kernels"),
    ("fused_kernel_hang_1.log", {"exit_code": 1}, "crashed", "exit code 1"),
    ("mds_iter_ok_1.log", {"has_result": True, "exit_code": 0}, "ok", "finished"),
    ("mds_oom_1.log", {"exit_code": 1}, "oom", "Tried to allocate 37631.79 GiB"),
    ("megatronlm_bert_iter_mem_1.log", {"slurm_state": "CANCELLED+"}, "cancelled", "SLURM state CANCELLED"),
    ("megatronlm_iter_mem_new_1.log", {"has_result": True, "exit_code": 0}, "ok", "finished"),
    ("megatronlm_iter_ok_1.log", {"exit_code": 1}, "crashed", "exit code 1"),
    ("megatronlm_old_iter_mem_1.log", {"slurm_state": "NODE_FAIL"}, "node_failure", "SLURM state NODE_FAIL"),
    ("megatronlm_oom_1.log", {"exit_code": 1}, "oom", "Tried to allocate 786.00 MiB"),  # not ChildFailedError
    ("nccl_error_broken_network_1.log", {}, "comm_error", "unhandled system error"),  # the RuntimeError line
    ("nccl_timeout_1.log", {}, "comm_error", "Watchdog caught collective operation timeout"),
    ("nccl_timeout_2.log", {"exit_code": 1}, "comm_error", "SeqNum=305, OpType=ALLREDUCE"),
    # the watchdog line is more informative than the "terminate called ... DistBackendError" printed before it
    ("nccl_timeout_3.log", {}, "comm_error", "OpType=_REDUCE_SCATTER_BASE"),
    ("nccl_warn_connect_refused_1.log", {}, "comm_error", "Connect to 10.148.3.247<56821> failed"),
    ("slurm_cancelled_1.log", {}, "cancelled", "CANCELLED AT 2025-02-13T15:47:35"),
    ("slurm_cancelled_2.log", {"slurm_state": "CANCELLED+", "exit_code": 0}, "cancelled", "lrdn1786"),
    ("slurm_node_failure_1.log", {}, "node_failure", "Node failure on worker-1"),
    ("slurm_time_limit_1.log", {"slurm_state": "CANCELLED"}, "time_limit", "DUE TO TIME LIMIT"),
    ("slurm_time_limit_2.log", {}, "time_limit", "STEP 32233190.0 ON nid01934"),
]


@pytest.mark.parametrize("name, kwargs, kind, reason", FIXTURE_CASES,
                         ids=[f"{c[0]}-{c[2]}" for c in FIXTURE_CASES])
def test_fixture_classification(name, kwargs, kind, reason):
    failure = classify(body(name), **kwargs)
    assert failure.kind == kind, failure.reason
    assert reason in failure.reason
    assert (failure.retryable, failure.exclude_node, failure.max_retries) == RETRY_POLICY[kind]


# Real runs of the embedded workload on this machine (torchrun, 2 CPU ranks, gloo); tracebacks shortened.
WORKLOAD_CPU_OOM = """\
[parasweep] iteration 1/3 | phase warmup | step time (ms): 3207.39 | lm loss: 7.047820 | tokens/s: 319.3
[rank0]: Traceback (most recent call last):
[rank0]:   File "/work/main/launcher/workload/model.py", line 96, in forward
[rank0]:     return self.fc2(F.gelu(self.fc1(x)))
[rank0]: RuntimeError: [enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: \
you tried to allocate 4194304 bytes. Error code 12 (Cannot allocate memory)
[rank1]: Traceback (most recent call last):
[rank1]:   File "/work/main/launcher/workload/grad_sync.py", line 30, in all_reduce_
[rank1]:     flat = _flatten_dense_tensors(tensors)
[rank1]: RuntimeError: [enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: \
you tried to allocate 52727808 bytes. Error code 12 (Cannot allocate memory)
W1121 23:53:56.869000 23963 site-packages/torch/distributed/elastic/multiprocessing/api.py:1028] Sending process \
24202 closing signal SIGTERM
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
  exitcode  : -15 (pid: 24202)  (SIGTERM)
"""
WORKLOAD_BAD_ARGS = """\
parasweep workload: error: --tp 1 x --pp 1 x --dp 1 = 1 must equal WORLD_SIZE 2
E1121 23:52:28.509000 22096 site-packages/torch/distributed/elastic/multiprocessing/api.py:1002] failed \
(exitcode: 2) local_rank: 0 (pid: 22284) of binary: /root/.pyenv/versions/3.11.7/bin/python
Traceback (most recent call last):
  File "<frozen runpy>", line 198, in _run_module_as_main
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
"""


def test_real_workload_cpu_oom():
    failure = classify(WORKLOAD_CPU_OOM, exit_code=1)
    assert failure.kind == "oom" and "4194304 bytes" in failure.reason and not failure.retryable


def test_real_workload_argument_error_through_torchrun_exit_1():
    failure = classify(WORKLOAD_BAD_ARGS, exit_code=1)
    assert failure.kind == "config_error" and "must equal WORLD_SIZE 2" in failure.reason


@pytest.mark.parametrize("line, kind", [
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "oom"),
    ("RuntimeError: CUDA error: out of memory", "oom"),
    ("terminate called after throwing an instance of 'std::bad_alloc'", "oom"),
    ("slurmstepd: error: Detected 1 oom-kill event(s) in StepId=12.0. Some of your processes may have been killed",
     "oom"),
    ("n1:1:1 [0] NCCL WARN Cuda failure 'out of memory'", "oom"),
    ("RuntimeError: NCCL error in: ProcessGroupNCCL.cpp:1269, internal error, ncclInternalError: Internal check "
     "failed.", "comm_error"),
    ("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970", "comm_error"),
    ("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer "
     "[127.0.0.1]:23456", "comm_error"),
    ("RuntimeError: Gloo connectFullMesh failed with [../third_party/gloo/gloo/transport/tcp/pair.cc:144] no "
     "error", "comm_error"),
    # a peer process died: its own log says why, this one only sees the socket close (the run did not finish)
    ("n1:1:1 [0] NCCL WARN Net : Connection closed by remote peer", "comm_error"),
    ("n1:1:1 [0] NCCL WARN NET/Plugin : No plugin found (libnccl-net.so)", "unknown"),  # WARN chatter
    ("pretrain_gpt.py: error: unrecognized arguments: --bogus", "config_error"),
    ("AssertionError: ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism", "config_error"),
    ("AssertionError: number of attention heads (12) must be divisible by tensor parallel size (8)",
     "config_error"),
    ("ValueError: global batch size (6) is not divisible by micro batch size (4) times data parallel size (1)",
     "config_error"),
    ("slurmstepd: error: *** JOB 7 ON n1 CANCELLED AT 2024-01-01T00:00:00 DUE TO PREEMPTION ***", "preempted"),
    ("slurmstepd: error: *** JOB 7 ON n1 CANCELLED AT 2024-01-01T00:00:00 DUE TO NODE FAILURE ***",
     "node_failure"),
    ("submitit WARNING (2024-01-01) - Caught signal SIGUSR2 on n1: this job is timed-out.", "time_limit"),
    ("submitit WARNING (2024-01-01) - Caught signal SIGUSR2 on n1: this job is preempted.", "preempted"),
    ("submitit INFO (2024-01-01) - Job has not timed out. Ran 3 minutes out of requested 10 minutes.", "unknown"),
    ("Segmentation fault (core dumped)", "crashed"),
])
def test_synthetic_lines(line, kind):
    failure = classify(f"some start-up output\n{line}\nmore output\n")
    assert failure.kind == kind, failure.reason
    if kind != "unknown":
        assert line[:40] in failure.reason


def test_megatron_argument_assertion_is_config_error_but_other_assertions_crash():
    tb = ('Traceback (most recent call last):\n  File "pretrain_gpt.py", line 9, in <module>\n'
          '  File "/m/megatron/training/arguments.py", line 420, in validate_args\n'
          '    assert args.num_layers % args.transformer_pipeline_model_parallel_size == 0\n'
          'AssertionError: number of layers should be divisible by the pipeline parallel size\n')
    assert classify(tb, exit_code=1).kind == "config_error"
    other = tb.replace("megatron/training/arguments.py", "megatron/core/models/gpt.py").replace(
        "validate_args", "forward").replace("should be divisible by the pipeline parallel size", "got NaN")
    failure = classify(other, exit_code=1)
    assert failure.kind == "crashed" and "AssertionError: number of layers got NaN" in failure.reason
    # a divisibility message is a configuration error wherever it is raised (deep in model code too)
    deep = other.replace("got NaN", "should be divisible by the pipeline parallel size")
    assert classify(deep, exit_code=1).kind == "config_error"


@pytest.mark.parametrize("state, kind", [
    ("OUT_OF_MEMORY", "oom"), ("NODE_FAIL", "node_failure"), ("BOOT_FAIL", "node_failure"),
    ("PREEMPTED", "preempted"), ("TIMEOUT", "time_limit"), ("DEADLINE", "time_limit"),
    ("CANCELLED by 1000", "cancelled"), ("cancelled+", "cancelled"), ("FAILED", "crashed"),
    ("COMPLETED", "unknown"),  # completed without a result
])
def test_slurm_state_alone(state, kind):
    assert classify("", slurm_state=state).kind == kind


def test_exit_code_2_is_config_error_and_other_codes_crash():
    assert classify("", exit_code=2).kind == "config_error"
    assert classify("last words\n", exit_code=-9).kind == "oom"  # judge56: a bare SIGKILL is the OOM killer's
    assert classify("last words\n", exit_code=-9).reason.endswith("(exit code -9, SIGKILL): last words")
    assert classify("x\n", exit_code=139).reason == "crashed (exit code 139, SIGSEGV): x"
    assert classify("", exit_code=0).kind == "unknown"
    assert classify("").reason == "no failure signature; last line: (empty log)"


# ---- order: the first cause wins over the noise it drags behind it

def test_oom_beats_the_nccl_teardown_and_the_time_limit_it_caused():
    text = body("mds_oom_1.log") + body("nccl_timeout_2.log") + body("slurm_time_limit_1.log")
    assert classify(text, slurm_state="TIMEOUT").kind == "oom"


def test_time_limit_beats_the_nccl_errors_of_killed_ranks():
    text = body("slurm_time_limit_2.log") + body("nccl_error_broken_network_1.log")
    assert classify(text, exit_code=1).kind == "time_limit"


def test_cancelled_due_to_time_limit_is_time_limit():
    failure = classify(body("slurm_time_limit_1.log"), slurm_state="CANCELLED")
    assert failure.kind == "time_limit"


def test_config_error_beats_gloo_noise_on_other_ranks():
    text = ("[rank1]: RuntimeError: Connection closed by peer [127.0.0.1]:29500\n"
            "[rank0]: ValueError: num_attention_heads (6) is not divisible by tp (4)\n")
    assert classify(text, exit_code=1).kind == "config_error"


def test_result_printed_and_exit_0_is_ok_despite_noise():
    text = body("nccl_warn_connect_refused_1.log") + "PARASWEEP_RESULT {}\n"
    assert classify(text, has_result=True, exit_code=0).kind == "ok"
    assert classify(text, has_result=True).kind == "ok"  # exit code and state unknown: trust the result
    assert classify(text, has_result=True, exit_code=1).kind == "comm_error"


def test_fused_kernel_line_after_success_or_followed_by_traceback_is_not_a_hang():
    done = ("> compiling and loading fused kernels ...\n>>> done with compiling and loading fused kernels. "
            "Compilation time: 3.1 seconds\n")
    assert classify(done, slurm_state="TIMEOUT").kind == "time_limit"
    crashed = "> compiling and loading fused kernels ...\nTraceback (most recent call last):\nOSError: x\n"
    failure = classify(crashed, exit_code=1)
    assert failure.kind == "crashed" and failure.reason == "crashed: OSError: x"


def test_hang_needs_both_timeout_and_elapsed_time():
    text = body("bigscience_mds_hang_eval_1.log")
    assert classify(text, seconds_since_progress=100.0, hang_timeout_s=1800.0).kind == "unknown"
    assert classify(text, seconds_since_progress=7200.0).kind == "unknown"
    assert classify(text, seconds_since_progress=1801.0, hang_timeout_s=1800.0).kind == "hang"


def test_exception_line_is_found_under_torchrun_prefixes():
    text = ("[default0]:Traceback (most recent call last):\n[default0]:  File \"x.py\", line 1, in <module>\n"
            "[default0]:    foo()\n[default0]:KeyError: 'lm_head.weight'\n")
    assert classify(text, exit_code=1).reason == "crashed: KeyError: 'lm_head.weight'"


def test_reason_is_trimmed_around_the_match():
    failure = classify("x" * 1000 + "CUDA out of memory. " + "y" * 1000)
    assert failure.kind == "oom" and len(failure.reason) <= 240 and failure.reason.endswith("...")
    assert "CUDA out of memory" in failure.reason


@pytest.mark.parametrize("name", ALL_LOGS)
@pytest.mark.parametrize("kwargs", [{}, {"exit_code": 1}, {"slurm_state": "FAILED"}, {"exit_code": 0}])
def test_every_fixture_gives_a_known_kind_and_its_policy(name, kwargs):
    failure = classify(body(name), **kwargs)
    assert isinstance(failure, Failure) and failure.kind in FAILURE_KINDS and failure.reason
    assert (failure.retryable, failure.exclude_node, failure.max_retries) == RETRY_POLICY[failure.kind]
