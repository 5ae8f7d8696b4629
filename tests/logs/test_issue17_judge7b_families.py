"""Issue 17, batch 6's OOM, communication, hardware, orchestrator and completion misses generalised into family
rules (analysis.logs.families.{memory,network,hardware,orchestrator,completion}). Each rule is checked on a real
excerpt (the batch-6 or batch-5 line it failed on, source named) and on lines written for this test in the same
family's other wordings; look-alikes that name the same words without the failure must not decide the kind."""

from __future__ import annotations

import pytest

from analysis.logs.classify import classify
from analysis.logs.outcome import trial_outcome
from launcher.core.kinds import FailureKind

OOM, COMM, NODE, CRASHED = FailureKind.OOM, FailureKind.COMM_ERROR, FailureKind.NODE_FAILURE, FailureKind.CRASHED


# ---- OOM in every runtime: an allocator's or runtime's own words
@pytest.mark.parametrize("text", [
    # real: batch 6 other/tfasr_conformer_ga_resource_exhausted_oom_1.log (TensorFlowASR#147)
    "tensorflow.python.framework.errors_impl.ResourceExhaustedError:  OOM when allocating tensor with "
    "shape[2,1751,906,640]\n",
    # real: batch 6 other/tfasr_conformer_p100_bfc_allocator_oom_1.log (TensorFlowASR#62), the OOM line cut short
    "2020-12-05 14:53:17.261450: W tensorflow/core/common_runtime/bfc_allocator.cc:431] Allocator (GPU_0_bfc) ran "
    "out of memory trying to allocate 4.42GiB (rounded to 4746649600)requested by\nCurrent allocation summary "
    "follows.\n",
    # real: batch 6 other/flashlight_conformer_arrayfire_device_oom_1.log (flashlight#211): the af::exception's
    # terminate line comes after the allocator's, and must not win
    "Failed to allocate memory of size 1.27 GiB (Device: 0, Capacity: 31.74 GiB, Allocated: 29.98 GiB) with error "
    "'ArrayFire Exception (Device out of memory:101):\nterminate called after throwing an instance of "
    "'af::exception'\n  what():  ArrayFire Exception (Device out of memory:101):\n",
    # real: batch 6 megatron_lm/pretrain_bert_cublas_not_initialized_stale_procs_1.log (Megatron-LM#146)
    "RuntimeError: CUDA error: CUBLAS_STATUS_NOT_INITIALIZED when calling `cublasCreate(handle)`\n",
    # written: other runtimes' wordings
    "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 17179869184 "
    "bytes.\n",
    "RuntimeError: MPS backend out of memory (MPS allocated: 17.9 GB, other allocations: 1.2 GB)\n",
    "RuntimeError: NPU out of memory. Tried to allocate 1.50 GiB (NPU 0; 60.97 GiB total capacity)\n",
    "RuntimeError: HIP error: out of memory\n",
    "RuntimeError: cuda runtime error (2) : out of memory at /pytorch/aten/src/THC/THCCachingAllocator.cpp:510\n",
    "CUDA driver error: out of memory\nterminate called after throwing an instance of 'c10::Error'\n",
    "Traceback (most recent call last):\n  File \"prep.py\", line 3, in <module>\nMemoryError\n",
    "numpy.core._exceptions._ArrayMemoryError: Unable to allocate 3.73 GiB for an array with shape (500000, 1000)\n",
    "TERM_MEMLIMIT: job killed after reaching LSF memory usage limit.\n",
    "cudaMalloc failed: out of memory\n",
    "RuntimeError: [Rank:0] FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed for size::1073741824 (1024)MB\n",
    "RuntimeError: No executable batch size found, reached zero.\n",
])
def test_oom_in_any_runtime(text):
    failure = classify(text)
    assert failure.kind == OOM, failure.reason


@pytest.mark.parametrize("text", [
    # advice and settings that name memory without running out of it
    "WARNING: large micro batch sizes may run out of memory on the GPU; reduce --micro-batch-size\n",
    "INFO: set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid GPU out of memory from fragmentation\n",
    "grpc: RESOURCE_EXHAUSTED: received message larger than max (8388608 vs. 4194304)\n",
    "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 98304, Hardware limit: 65536\n",
    "[WARNING] [stage3.py:1850:step] 4 pytorch allocator cache flushes since last step. this happens when there is "
    "high memory pressure and is detrimental to performance.\n",
])
def test_memory_words_that_are_not_an_oom(text):
    assert classify(text).kind != OOM, classify(text).reason


# ---- communication: every torch version's collective/rendezvous/store timeout, NCCL WARN lines alone
@pytest.mark.parametrize("text", [
    # real: batch 6 pytorch/llama_cookbook_lora_watchdog_timeout_work5_1.log (llama-cookbook#920)
    "[rank0]:[E419 18:14:51.952620177 ProcessGroupNCCL.cpp:1834] [PG ID 0 PG GUID 0(default_pg) Rank 0] Timeout at "
    "NCCL work: 5, last enqueued NCCL work: 6, last completed NCCL work: 4.\n",
    # real: batch 6 megatron_lm/docker_multinode_nccl_proxy_connect_warn_1.log (Megatron-LM#450)
    "<cluster_name>:462:635 [3] proxy.cc:1484 NCCL WARN [Service thread] Error encountered progressing "
    "operation=Connect, res=2, closing connection\n",
    # real: batch 6 nemo/mbridge_dsv3_b200_pp16_coalesced_collective_timeout_1.log (Megatron-Bridge PR 6097)
    "NCCL collective timeout: WorkNCCL(SeqNum=16, OpType=COALESCED, NumelIn=0, NumelOut=0)\n"
    "  ... PIPELINE_MODEL_PARALLEL_GROUP\n",
    # real: batch 6 pytorch/ccfpse_tcp_rendezvous_connect_timed_out_1.log (CC-FPSE#6)
    "    store = TCPStore(result.hostname, result.port, world_size, start_daemon)\nRuntimeError: connect() timed "
    "out.\n",
    # real: batch 6 deepspeed/transpeeder_2node_store_barrier_timeout_1.log (transpeeder#22)
    "RuntimeError: Timed out initializing process group in store based barrier on rank: 11, for key: "
    "store_based_barrier_key:37 (world_size=16, worker_count=8, timeout=0:30:00)\n",
    # written: other torch versions' phrasings
    "[Rank 0] Caught collective operation timeout: WorkNCCL(OpType=ALLREDUCE, Timeout(ms)=1800000) ran for "
    "1800471 milliseconds before timing out.\n",
    "[PG 0 Rank 3] Exception (either an error or timeout) detected by watchdog at work: 23, last enqueued NCCL "
    "work: 23, last completed NCCL work: 22.\n",
    "RuntimeError: Work WorkNCCL(SeqNum=2, OpType=BROADCAST) timed out in blocking wait.\n",
    "RuntimeError: Timed out after 901 seconds waiting for clients. 1/2 clients joined.\n",
    "[W socket.cpp:663] [c10d] The client socket has failed to connect to [node0]:29500 (errno: 110 - Connection "
    "timed out).\n",
    "RuntimeError: NCCL Error 2: unhandled system error\n",
    "n1:77:91 [2] proxy.cc:1120 NCCL WARN [Proxy Service] Failed to execute operation Connect from rank 3, "
    "retcode 3\n",
    "n1:77:91 [0] proxy.cc:1349 NCCL WARN [Service thread] Accept failed Resource temporarily unavailable\n",
    "n1:77:91 [1] NCCL WARN NET/Socket : peer 10.0.0.2<43210> message truncated : receiving 1048576 bytes instead "
    "of 65536\n",
    "n1:77:77 [0] bootstrap.cc:45 NCCL WARN Bootstrap : no socket interface found\n",
    "RuntimeError: Stop_waiting response is expected\n",
    "RuntimeError: Rank 1 failed to pass monitoredBarrier in 1800000 ms\n",
    "[1717171717.123456] [node7:4242:0] UCX  ERROR   Transport retry count exceeded on mlx5_0:1/IB\n",
])
def test_comm_error_in_any_wording(text):
    failure = classify(text)
    assert failure.kind == COMM, failure.reason


def test_store_barrier_still_waiting_is_not_a_timeout():
    # no "Timed out": the log ends while the job waits (families.stall judges it), not a comm_error
    text = ("INFO:torch.distributed.distributed_c10d:Waiting in store based barrier to initialize process group for "
            "rank: 0, key: store_based_barrier_key:1 (world_size=8, worker_count=4, timeout=0:30:00)\n")
    assert classify(text).kind == FailureKind.HANG


@pytest.mark.parametrize("text, kind", [
    # NCCL's start-up chatter and a WorkNCCL description without a timeout
    ("n1:1:1 [0] NCCL WARN NET/Plugin : Plugin load (libnccl-net.so) returned 2 : libnccl-net.so: cannot open "
     "shared object file: No such file or directory\n", FailureKind.UNKNOWN),
    ("[Rank 0] ProcessGroupNCCL created WorkNCCL(SeqNum=1, OpType=BROADCAST, Timeout(ms)=600000)\n",
     FailureKind.UNKNOWN),
    # a timeout setting in an argument dump
    ("  distributed_timeout_minutes ..................... 10\n  nccl_collective_timeout: 600\n", FailureKind.UNKNOWN),
])
def test_comm_look_alikes(text, kind):
    assert classify(text).kind == kind, classify(text).reason


# ---- hardware: the rule for cudaErrorUnknown, quoted Xids, NVSwitch, fabric manager
def test_cuda_unknown_error_alone_is_a_crash_not_a_node_fault():
    # real: batch 6 deepspeed/lisa_4090_wsl_fused_adam_cuda_unknown_error_1.log (LISA#154), no hardware line
    text = ('  File "/x/deepspeed/ops/adam/fused_adam.py", line 157, in step\n'
            "    state['exp_avg_sq'] = torch.zeros_like(p.data)\nRuntimeError: CUDA error: unknown error\n")
    assert classify(text).kind == CRASHED
    # with the hardware line a sick GPU leaves, the node is at fault
    xid = "kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=4242, GPU has fallen off the bus.\n"
    assert classify(xid + text).kind == NODE


@pytest.mark.parametrize("line, kind", [
    ("GPU 3 on gpu-node-12 hit Xid 79 and the job died", NODE),
    ("DCGM health check: XID 48 reported on GPU 1", NODE),
    ("the job hit Xid 13 (graphics engine exception) in our kernel", FailureKind.UNKNOWN),  # application code
    ("nvidia-nvswitch0: SXid (PCI:0000:07:00.0): 20034, Fatal, Link 30 LTSSM Fault Up", NODE),
    ("nvidia-nvswitch0: SXid (PCI:0000:07:00.0): 12028, Non-fatal, Link 04 egress non-posted PRIV error",
     FailureKind.UNKNOWN),
    ("RuntimeError: CUDA error: system not yet initialized", NODE),
])
def test_hardware_lines(line, kind):
    assert classify(f"{line}\n").kind == kind, classify(f"{line}\n").reason


# ---- orchestrators other than SLURM
@pytest.mark.parametrize("line, kind", [
    ("TERM_RUNLIMIT: job killed after reaching LSF run time limit.", FailureKind.TIME_LIMIT),
    ("=>> PBS: job killed: walltime 172832 exceeded limit 172800", FailureKind.TIME_LIMIT),
    ("TERM_PREEMPT: job killed after preemption.", FailureKind.PREEMPTED),
    ("TERM_OWNER: job killed by owner.", FailureKind.CANCELLED),
    ("sky.jobs: managed job 17 was preempted; recovering on a new cluster", FailureKind.PREEMPTED),
    ("slurmctld: error: Nodes gpu-node-7 not responding, setting DOWN", NODE),
    ("ray.exceptions.NodeDiedError: Task failed due to the node (node ID: 5c1e) dying.", NODE),
    # look-alikes: a policy word, not an event
    ("scheduler: partition gpu is non-preemptible; jobs may not be preempted", FailureKind.UNKNOWN),
])
def test_orchestrator_lines(line, kind):
    assert classify(f"{line}\n").kind == kind, classify(f"{line}\n").reason


# ---- completion: a line naming finishing as one of two outcomes proves neither
def test_completed_or_interrupted_is_not_a_finish():
    # real (shortened): batch 5 ray/verl_fully_async_actor_dead_worker_oom_1.log (verl#3987)
    text = ("(FullyAsyncTaskRunner pid=130397) The actor is dead because its worker process has died. Worker exit "
            "type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2. End of "
            "file. There are some potential root causes. (1) The process is killed by SIGKILL by OOM killer due to "
            "high memory usage.\n(FullyAsyncTaskRunner pid=130397) [ASYNC MAIN] Training completed or interrupted\n"
            "Job 'raysubmit_Zw8TnRQiZGRP7Njt' failed\n")
    assert classify(text).kind == OOM
    assert classify("[titan] 2025-06-01 - root - INFO - Training completed\n").kind == FailureKind.OK


# ---- healthy runs in formats without a step counter: per-epoch summaries, epoch durations, value-first records
@pytest.mark.parametrize("text", [
    # real: batch 4 other/nnunet_cascade_epoch_took_seconds_1.log (nnUNet#640)
    "2021-05-20 14:48:24.368946: train loss : -0.7909\n2021-05-20 14:49:17.903927: This epoch took 965.255083 s\n",
    # real: batch 4 other/gpt_ts_epoch_train_val_loss_time_1.log (GPT-TS#4)
    "Epoch: 8/200 | Train loss: 46.665565490722656 | Val loss: 24.795454570225306 | Time:  31.958s\n"
    "Validation loss decreased (24.795455 --> 24.035553).  Saving model ...\n",
    # real: batch 5 other/monocon_epoch_24_25_progress_average_loss_1.log (monocon-pytorch#20)
    "- Average Loss: 6.726\n- Epoch Time: 0:04:42\n- Remain Time: 14:11:02\n",
    # real: batch 4 other/tinygrad_llama3_1b_amd_grad_acc1_loss_lines_1.log and ..._8b_mlperf_step_seconds_1.log
    "training llama3\n10.5008 loss, 0.000016689301 LR, 8.83 GB used, 18.70 s\n9.8271 loss, 0.00005 LR, 124.27 GB "
    "used, 5.15 s\n",
    "    9 4.36 s run, 11.8750 loss, 0.000000000005 LR, 1454.57 GB used, 397832.61 GFLOPS\n",
    # written: the same shapes in other spellings
    "EPOCH 4/50 TRAIN LOSS = 0.8123\n", "[epoch 12] training_loss: 0.412 acc: 0.91\n",
    "epoch duration: 12.5 min\n",
])
def test_counterless_training_records_make_a_log_alone_ok(text):
    failure = classify(text)
    assert failure.kind == FailureKind.OK and "no step time" in failure.reason, failure.reason
    # a failure after them still decides
    assert classify(text + "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n").kind == OOM


@pytest.mark.parametrize("text", [
    "the first epoch took longer because of compilation\n",  # no duration
    "Train loss decreased; saving the best model\n",  # no epoch counter, no value
    "final eval: 0.52 loss, 0.81 accuracy\n",  # value-first loss without a time field
    "epoch time limit reached? no\n",
])
def test_counterless_look_alikes_prove_nothing(text):
    assert classify(text).kind != FailureKind.OK, classify(text).reason


# ---- parse_generic: a step's duration said as a verb, and a bare steps/s rate
@pytest.mark.parametrize("record, step_s", [
    ("training step {i} took 1.25 seconds, loss 2.31", 1.25),
    ("Step {i} completed in 1.25s (loss=2.31)", 1.25),
    ("Step {i} finished in 1250 ms, loss 2.31", 1.25),
    ("step {i}/1000 loss 2.31 lr 1e-4 0.80 steps/s", 1.25),
    # the parts of a step said the same way are not its time
    ("step {i} | loss 2.31 | checkpoint saved in 12.0 s | data loaded in 0.02s | time 1.25s", 1.25),
])
def test_step_time_in_verb_and_rate_forms(record, step_s):
    text = "\n".join(record.format(i=i) for i in range(10, 200, 10)) + "\n"
    outcome = trial_outcome(text)
    assert outcome.failure_kind == FailureKind.OK
    assert outcome.metrics["step_time_s"] == pytest.approx(step_s, rel=0.01)
