"""Issue 17, batch 17's failure-side misses (helper judge18a): errors printed at exit or at warning level are not the
cause; Slurm's task-failure cancel is not a cancel; a launcher's failure report is not a step record; the model's
files asked for offline and not cached. Each rule: real lines from a fixture (cited), made-up look-alikes that must
not match."""

from __future__ import annotations

from analysis.logs.classify import classify
from analysis.logs.outcome import trial_outcome
from launcher.core.kinds import FailureKind

# tests/fixtures/oos-batch17/deepspeed/ulysses_toy_dataloader_name_deepspeed_not_defined_1.log (lines 13-21, 125-134,
# shortened): the rank's NameError, then at exit DeepSpeed's Triton autotune cache's atexit handler fails
_NAME_ERROR = ('0: [rank0]: Traceback (most recent call last):\n'
               '0: [rank0]:   File "/home/bigyang/llm-training/DeepSpeed/deepspeed/runtime/sequence_parallel/'
               'ulysses_sp.py", line 1649, in refill\n'
               '0: [rank0]:     print(f"world size is {deepspeed.comm.get_world_size()}\\n")\n'
               "0: [rank0]: NameError: name 'deepspeed' is not defined\n")
_ATEXIT = ('0: Exception ignored in atexit callback: <function matmul_ext_update_autotune_table at 0x7f06b40afba0>\n'
           '0: Traceback (most recent call last):\n'
           '0:   File "/home/bigyang/llm-training/DeepSpeed/deepspeed/ops/transformer/inference/triton/matmul_ext.py",'
           ' line 105, in put\n'
           '0:     os.replace(self.file_path + ".tmp", self.file_path)\n'
           "0: FileNotFoundError: [Errno 2] No such file or directory: '/home/bigyang/.triton/autotune/"
           "Fp16Matmul_2d_kernel.pickle.tmp' -> '/home/bigyang/.triton/autotune/Fp16Matmul_2d_kernel.pickle'\n")


def test_an_exception_ignored_at_exit_is_not_the_cause():
    assert classify(_NAME_ERROR + _ATEXIT).kind == FailureKind.CRASHED
    # without the atexit line the same FileNotFoundError is the job's own and is read: the program renaming its own
    # temporary file (os.replace), a crash since judge63 (a missing input before it)
    raised = _ATEXIT.replace("0: Exception ignored in atexit callback: <function matmul_ext_update_autotune_table at "
                             "0x7f06b40afba0>\n", "")
    verdict = classify(_NAME_ERROR.replace("NameError: name 'deepspeed' is not defined", "x") + raised)
    assert verdict.kind == FailureKind.CRASHED
    assert "FileNotFoundError" in verdict.reason


def test_an_ignored_traceback_alone_is_still_read():
    # tests/fixtures/oos-batch6/deepspeed/simple_grpo_cpu_adam_del_no_ds_opt_adam_1.log: the destructor's error is all
    # the log shows of a CPU Adam op that never built
    text = ("Exception ignored in: <function DeepSpeedCPUAdam.__del__ at 0x7fe9ffe7dc60>\n"
            "Traceback (most recent call last):\n"
            '  File "/env/lib/python3.11/site-packages/deepspeed/ops/adam/cpu_adam.py", line 102, in __del__\n'
            "AttributeError: 'DeepSpeedCPUAdam' object has no attribute 'ds_opt_adam'\n")
    assert classify(text).kind == FailureKind.CONFIG_ERROR


# tests/fixtures/oos-batch17/megatron_lm/attn_bench_llama_pretrain_step_cancelled_time_limit_1.log (lines 203, 330):
# torch inductor's warning-level cache miss, then Slurm's end reason
_INDUCTOR_WARNING = ("24: [rank24]:W0527 00:19:08.340000 50695 torch/_inductor/codecache.py:1052] [1/1] "
                     "FileNotFoundError: [Errno 2] No such file or directory: '/iopsstor/scratch/cscs/elyulina/tmp/"
                     "torchinductor_elyulina/fxgraph/ta/ftarrkxgew326ydbz'\n")
_TIME_LIMIT = ("0: [2026-05-27T00:26:27.019] error: *** STEP 2403450.1 ON nid006239 CANCELLED AT 2026-05-27T00:26:27 "
               "DUE TO TIME LIMIT ***\n")


def test_a_warning_level_exception_does_not_outrank_slurms_end_reason():
    assert classify(_INDUCTOR_WARNING + _TIME_LIMIT).kind == FailureKind.TIME_LIMIT
    # made up look-alikes: the same exception at E level, or raised, is the failure
    error_level = _INDUCTOR_WARNING.replace(":W0527", ":E0527")
    assert classify(error_level + _TIME_LIMIT).kind == FailureKind.CONFIG_ERROR
    raised = "FileNotFoundError: [Errno 2] No such file or directory: '/data/my-gpt2_text_document.idx'\n"
    assert classify(raised + _TIME_LIMIT).kind == FailureKind.CONFIG_ERROR
    # a warning line without an exception name is untouched (c10d's TCPStore warning still reads as a network error)
    tcp = ("[W428 13:33:32.345474775 TCPStore.cpp:122] [c10d] sendBytes failed on SocketImpl(fd=5, addr=[h1]:36420, "
           "remote=[h2]:29501): Broken pipe\n")
    assert classify(tcp).kind == FailureKind.COMM_ERROR


# tests/fixtures/oos-batch17/megatron_lm/attn_bench_nccl_init_failed_to_initialize_any_net_plugin_1.log (lines
# 232-239, 298-299, shortened)
_NET_PLUGIN = ("40: torch.distributed.DistBackendError: NCCL error in: /opt/pytorch/pytorch/torch/csrc/distributed/"
               "c10d/NCCLUtils.cpp:93, invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.29.3\n"
               "40: ncclInvalidUsage: This usually reflects invalid usage of NCCL library.\n"
               "40: Last error:\n40: Failed to initialize any NET plugin\n")
_TASK_FAILURE = ("srun: Terminating StepId=2611400.1\n"
                 " 0: [2026-06-24T18:46:24.864] error: *** STEP 2611400.1 ON nid006687 CANCELLED AT "
                 "2026-06-24T18:46:24 DUE TO TASK FAILURE ***\n")


def test_slurms_task_failure_cancel_defers_to_the_tasks_error():
    assert classify(_NET_PLUGIN + _TASK_FAILURE).kind == FailureKind.COMM_ERROR
    # either line alone says the step was ended for a failed task
    assert classify(_NET_PLUGIN + _TASK_FAILURE.split("\n", 1)[1]).kind == FailureKind.COMM_ERROR
    assert classify(_NET_PLUGIN + _TASK_FAILURE.split("\n", 1)[0] + "\n slurmstepd: error: *** STEP 2611400.1 ON "
                    "nid006687 CANCELLED AT 2026-06-24T18:46:24 ***\n").kind == FailureKind.COMM_ERROR


def test_a_plain_cancel_is_still_a_cancel():
    # made up: scancel of the step, no srun termination line and no DUE TO
    cancel = "slurmstepd: error: *** STEP 2611400.1 ON nid006687 CANCELLED AT 2026-06-24T18:46:24 ***\n"
    assert classify(_NET_PLUGIN + cancel).kind == FailureKind.CANCELLED


# tests/fixtures/oos-batch17/megatron_deepspeed/lockclock_dual8_smoke_nccl_init_cuda_calloc_out_of_memory_1.log
# (lines 3, 75, and the launcher's report, shortened): the deepspeed launcher's failure report quotes the command line
# with '--train-iters', which a reader took for a step record, so the run looked as if it had trained
_NCCL_OOM = ("localhost: [2026-03-31 15:32:44] DGX2-1:2394670:2396491 [1] include/alloc.h:228 NCCL WARN Cuda failure 2 "
             "'out of memory'\n"
             "localhost: [rank1]: torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/"
             "c10d/NCCLUtils.cpp:230, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version "
             "2.27.5\n")
_REPORT = ("192.168.205.202: [2026-03-31 15:32:51,868] [ERROR] [launch.py:341:sigkill_handler] ['/usr/bin/python3', "
           "'-u', 'pretrain_gpt.py', '--local_rank=3', '--train-iters', '20', '--log-interval', '1', '--bf16'] exits "
           "with return code = {rc}\n")


def test_a_launchers_failure_report_is_not_progress():
    outcome = trial_outcome(_NCCL_OOM + _REPORT.format(rc=1))
    assert outcome.failure_kind == FailureKind.OOM.value, outcome.reason
    # the classifier alone, told a step record starts on the report line, still reads the failure
    text = _NCCL_OOM + _REPORT.format(rc=1)
    assert classify(text, progress_offset=text.find("192.168")).kind == FailureKind.OOM


def test_a_record_before_a_failure_report_still_counts():
    # made up: a real step record, then a clean exit report (code 0) -- progress stays progress
    record = " iteration       20/      20 | elapsed time per iteration (ms): 812.5 | lm loss: 7.1E+00 |\n"
    text = record + _REPORT.format(rc=0)
    assert classify(text, progress_offset=0).kind == FailureKind.OK


# tests/fixtures/oos-batch17/deepspeed/ulysses_zero_run_hf_offline_model_files_not_cached_1.log (lines 39, 77)
_OFFLINE = ("1: [rank5]: huggingface_hub.errors.LocalEntryNotFoundError: Cannot find the requested files in the disk "
            "cache and outgoing traffic has been disabled. To enable hf.co look-ups and downloads online, set "
            "'local_files_only' to False.\n",
            "1: [rank5]: OSError: We couldn't connect to 'https://huggingface.co' to load the files, and couldn't find "
            "them in the cached files.\n")


def test_model_files_asked_for_offline_and_not_cached_are_a_config_error():
    for line in _OFFLINE:
        assert classify(line).kind == FailureKind.CONFIG_ERROR, line
        # ahead of the TCPStore warnings the other node prints when the job goes down
        tcp = ("1: [W428 13:33:32.345474775 TCPStore.cpp:122] [c10d] sendBytes failed on SocketImpl(fd=5): Broken "
               "pipe\n")
        assert classify(line + tcp).kind == FailureKind.CONFIG_ERROR, line


def test_offline_look_alikes_do_not_match():
    # made up: the wording in prose, not as the exception
    assert classify("INFO: outgoing traffic has been disabled by HF_HUB_OFFLINE=1\n").kind != FailureKind.CONFIG_ERROR
    assert classify("We couldn't find them in the cached files yet, downloading\n").kind != FailureKind.CONFIG_ERROR


# ---- error wordings that are families (judge18a): each with the fixture line and look-alikes that must not match

def _kind(line: str) -> FailureKind:
    return classify(line + "\n").kind


def test_components_whose_versions_must_agree():
    # tests/fixtures/oos-batch17/nemo/mbridge_nemotron3_omni_stale_flashinfer_version_mismatch_1.log (line 2), and
    # flashinfer's older wording without the versions
    assert _kind("RuntimeError: flashinfer-cubin version (0.6.8.post1) does not match flashinfer version (X).") \
        == FailureKind.CONFIG_ERROR
    assert _kind("RuntimeError: flashinfer-jit-cache version does not match flashinfer version") \
        == FailureKind.CONFIG_ERROR
    # made up: not an exception line; a tensor's sizes, not versions
    assert _kind("INFO: flashinfer-cubin version does not match flashinfer version, check disabled") \
        != FailureKind.CONFIG_ERROR
    assert _kind("RuntimeError: The size of tensor a (4) must match the size of tensor b (8) at non-singleton "
                 "dimension 1") != FailureKind.CONFIG_ERROR


def test_an_import_guard_saying_not_installed():
    # tests/fixtures/oos-batch17/nemo/automodel_dspark_v4_flash_drafter_hybridep_not_installed_1.log (line 2)
    assert _kind("ImportError: HybridEP is not installed") == FailureKind.CONFIG_ERROR
    # made up: a warning that falls back is not a failure
    assert _kind("WARNING: apex is not installed, falling back to torch's fused Adam") != FailureKind.CONFIG_ERROR


def test_a_parallel_degree_larger_than_the_world():
    # tests/fixtures/oos-batch17/deepspeed/ulysses_toy_world_size_less_than_sp_size_1.log, and DeepSpeed's other
    # rendering of the same check (the size in parentheses)
    assert _kind("[rank0]: RuntimeError: world_size (4) is less than sequence_parallel_size 8") \
        == FailureKind.CONFIG_ERROR
    assert _kind("RuntimeError: world_size (4) is less than sequence_parallel_size (8)") == FailureKind.CONFIG_ERROR
    # made up: a comparison of other sizes (an index, a tensor) stays a crash
    assert _kind("RuntimeError: index 9 is larger than the batch size 4") == FailureKind.CRASHED
    assert _kind("RuntimeError: the output is larger than the input tensor") == FailureKind.CRASHED


def test_a_tokenizer_file_that_is_not_there():
    # tests/fixtures/oos-batch17/megatron_lm/attn_bench_tokenizer_metadata_file_missing_assertion_1.log (line 16)
    assert _kind("AssertionError: Tokenizer metadata file doesn't exist. Please, use MegatronTokenizer."
                 "write_metadata() method to generate metadata file.") == FailureKind.CONFIG_ERROR
    assert _kind("FileNotFoundError: tokenizer model file /models/llama/tokenizer.model not found") \
        == FailureKind.CONFIG_ERROR
    # made up: a log line, not an exception; an unrelated missing key
    assert _kind("INFO: tokenizer metadata file does not exist yet, writing it") != FailureKind.CONFIG_ERROR


def test_deepeps_communication_timeouts():
    # tests/fixtures/oos-batch17/nemo/mbridge_deepseek_v3_h100_deepep_dispatch_timeout_1.log (line 2), and the kernels'
    # device-side timeout (DeepEP csrc/kernels)
    assert _kind("RuntimeError: DeepEP error: timeout (dispatch CPU)") == FailureKind.COMM_ERROR
    assert _kind("DeepEP timeout for dispatch receivers, rank 3, responsible_channel = 2, tokens remained: 17") \
        == FailureKind.COMM_ERROR
    # made up / DeepEP's low-latency masking warning: the rank is masked and the run goes on
    assert _kind("Warning: DeepEP timeout for dispatch receive, rank 3, dst_rank 5") != FailureKind.COMM_ERROR
    assert _kind("DeepEP error: timeout value must be positive") != FailureKind.COMM_ERROR
