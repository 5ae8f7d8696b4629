"""Issue 17 (coordinator, stop 47, judge60: in sample, after batch 50's merged score). Families batch 50 showed in
wordings no rule held, and one rule that took a start-up warning for a failure. Records: real lines with their
source (oos-batch50)."""

from __future__ import annotations

import pytest

from analysis.logs.classify import classify
from analysis.logs.outcome import trial_outcome

_STEPS = "".join(f"step {s} | loss {2.5 - s / 1000:.3f} | step_time 0.45s\n" for s in range(10, 110, 10))


@pytest.mark.parametrize(("tail", "kind"), [
    # X-R1#13: HAMi's vGPU allocator refuses an allocation over the quota, then the trainer's traceback
    ("[HAMI-core ERROR (pid:34464 thread=140052775450176 allocator.c:49)]: Device 0 OOM 42744416256 / 42505076736\n"
     "Traceback (most recent call last):\n  File \"grpo.py\", line 179, in <module>\n", "oom"),
    # sfantao/lumi-ai-workflow-tests: AITER's kernel launch fails on MI300A after "training ..."
    ("[AITER] /workspace/TransformerEngine/build/cmake/ck_fused_attn/gen_src/asm_fmha_fwd_v3_gfx942.cpp:142 fail to "
     "call hipModuleLaunchKernel(kernel_func, gdx, gdy, gdz, bdx, 1, 1, 0, s.stream_id_, NULL, reinterpret_cast<void\n",
     "crashed"),
    ("RuntimeError: HIP error: invalid resource handle\n", "crashed"),
    # PaddleSeg: SIGTERM from another process, in Paddle's signal handler's words
    ("FatalError: `Termination signal` is detected by the operating system.\n  [SignalInfo: *** SIGTERM "
     "(@0x3e800001219) received by PID 4673 (TID 0x7fb44a6e0700) from PID 4633 ***]\n", "cancelled"),
    # PyTorch Lightning's own word for a caught Ctrl-C, right after a step record
    ("UserWarning: Detected KeyboardInterrupt, attempting graceful shutdown...\n", "cancelled"),
    # PaddleNLP: the dynamic loader cannot open libnccl.so
    ("RuntimeError: (PreconditionNotMet) The third-party dynamic library (libnccl.so) that Paddle depends on is not "
     "configured correctly. (error code is libnccl.so: cannot open shared object file: No such file or directory)\n",
     "config_error"),
    # a MindSpore CPU wheel asked for the GPU
    ("ValueError: Error, package type mindspore support device type cpu, but got device target GPU, please check "
     "the package type.\n", "config_error"),
    # a 32-rank MindSpore job on Ascend: a device stream's event wait timed out
    ("EE9999: Inner Error!\nEE9999 The error from device(chipId:3, dieId:0), serial number is 1, event wait timeout "
     "occurred during task execution, stream_id:122, sq_id:122, task_id:790, event_id=73, timeout=1980.\n",
     "comm_error"),
    # NeMo with a Lhotse (iterable) dataset and an epoch-based schedule
    ("TypeError: object of type 'LhotseSpeechToTextBpeDataset' has no len()\n", "config_error"),
])
def test_batch_50_families(tail, kind):
    assert classify(_STEPS + tail).kind == kind


def test_a_windows_interpreter_that_cannot_open_its_script_is_a_launch_error():
    line = (r"C:\Users\TAMER\AppData\Local\Programs\Python\Python310\python.exe: can't open file "
            r"'C:\\Users\\TAMER\\PycharmProjects\\echora\\tools\\train.py': [Errno 2] No such file or directory")
    assert classify(line + "\n").kind == "config_error"


def test_a_bug_with_no_length_is_not_the_datas_shape():
    assert classify(_STEPS + "TypeError: object of type 'NoneType' has no len()\n").kind == "crashed"


def test_hccls_start_up_timeout_warning_is_no_failure():
    # torch_npu's ProcessGroupHCCL.cpp at start-up, above a healthy torchtitan run
    warning = ("[rank0]:[W813 22:49:16.108614260 ProcessGroupHCCL.cpp:1235] Warning: The watchdog timeout "
               "300000ms(which is set by init_process_group) is less than or equal to HCCL execution timeout "
               "1836000ms! The plog may not be recorded. (function ProcessGroupHCCL)\n")
    assert trial_outcome(warning + _STEPS).failure_kind == "ok"
    assert classify(_STEPS + "[ERROR] HCCL(1234,python):2024-01-01-12:00:00.000 [hccl_communicator.cc:88] "
                             "HcclAllReduce failed, error code 9\n").kind == "comm_error"


def test_paddles_sigterm_below_a_rank_failure_is_the_teardown():
    # PaddleIBOT (oos-batch50): one rank's reshape error, then the launcher's SIGTERM reaches another rank
    text = (_STEPS + "Traceback (most recent call last):\n  File \"ibot.py\", line 178, in forward_features\n"
            "ValueError: (InvalidArgument) The 'shape' in ReshapeOp is invalid.\n\n"
            "--------------------------------------\nC++ Traceback (most recent call last):\n"
            "--------------------------------------\nNo stack trace in paddle, may be caused by external reasons.\n\n"
            "FatalError: `Termination signal` is detected by the operating system.\n")
    assert classify(text).kind == "crashed"
