"""oom: a device's or the host's memory ran out. PyTorch's CUDA allocator and SLURM's own OOM verdicts are in
analysis.logs.patterns (DEVICE_OOM, HOST_OOM); this module holds every other runtime's wording (DEVICE_MEMORY)
and the host's (HOST_MEMORY). MEMORY is both, device first, as analysis.logs.classify checks them: after GPU
hardware faults and before configuration, crash and wrapper lines, so an allocator's OOM outranks the `terminate
called after throwing ...` or launcher line its exception produces later.

Rule for the device: an allocator or runtime that says it could not allocate, in any runtime's words (below); a
bare "out of memory" decides only on a line that names a device or an allocation (shape DEVICE_OOM_SHAPE), never
on advice ("to avoid out of memory, ...", "may run out of memory").

Sources (device):
- TensorFlow: errors_impl.ResourceExhaustedError ("OOM when allocating tensor with shape[...]"), the BFC
  allocator's warning (core/common_runtime/bfc_allocator.cc: "Allocator (GPU_0_bfc) ran out of memory trying to
  allocate 4.42GiB"), op_kernel's "OP_REQUIRES failed ... Resource exhausted: OOM when allocating tensor".
- XLA / JAX / TPU: "RESOURCE_EXHAUSTED: Out of memory while trying to allocate N bytes", "Ran out of memory in
  memory space hbm"; PaddlePaddle's "ResourceExhaustedError: Out of memory error on GPU 0"; gRPC also uses
  RESOURCE_EXHAUSTED for message sizes, so RESOURCE_EXHAUSTED decides only with memory/OOM/allocate on its line.
- ArrayFire (flashlight): AF_ERR_NO_MEM, "ArrayFire Exception (Device out of memory:101)".
- PyTorch backends: "MPS backend out of memory", "XPU out of memory", torch_npu "NPU out of memory", Ascend
  CANN error code EL0004 (memory allocation failed), HIP's hipErrorOutOfMemory; old torch's THC
  "cuda runtime error (2) : out of memory"; MindSpore's "memory isn't enough and alloc failed"; Apple Metal's
  kIOGPUCommandBufferCallbackErrorOutOfMemory.
- CUDA math libraries' allocation statuses (cuFFT, cuSOLVER, cuSPARSE, cuRAND: *_ALLOC_FAILED).
- cuBLAS: cublasCreate fails with CUBLAS_STATUS_NOT_INITIALIZED when the context's workspace cannot be allocated
  on a full GPU (the usual cause in PyTorch threads: another process holds the memory); taken as oom.
Sources (host):

Sources:
- Linux mm/oom_kill.c: "Out of memory: Killed process N (comm)", "oom-kill:constraint=...", "invoked
  oom-killer", "Memory cgroup out of memory: Killed process N".
- Kubernetes container termination reason OOMKilled (kubelet; `kubectl describe pod`: "Reason: OOMKilled",
  "Exit Code: 137") and the kubelet's node-pressure eviction message "The node was low on resource: memory."
- Ray's memory monitor and its out-of-memory troubleshooting guide (docs.ray.io, "Debugging Out of Memory"):
  `ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory`, the raylet's
  "N Workers (tasks / actors) killed due to memory pressure (OOM)", worker exit type NODE_OUT_OF_MEMORY; and, in
  the same guide, how a Linux OOM-killer SIGKILL of a worker shows up in the driver's log: "A worker died or was
  killed while executing a task by an unexpected system error ... Worker exit type: SYSTEM_ERROR Worker exit detail:
  Worker unexpectedly exits with a connection error code 2. End of file. There are some potential root causes.
  (1) The process is killed by SIGKILL by OOM killer due to high memory usage ..." (Ray cannot see the SIGKILL
  itself, so it names the OOM killer first).
- Python's MemoryError and numpy's _ArrayMemoryError ("Unable to allocate 3.5 GiB for an array with shape"),
  PyTorch's Windows allocator ("DefaultCPUAllocator: not enough memory"), Windows' paging file error (os error
  1455), older kernels' "Out of memory: Kill process N (comm) score S or sacrifice child", the oom_reaper,
  systemd-oomd; LSF's TERM_MEMLIMIT and PBS's "job killed: mem ... exceeded limit"; Rust's allocator
  ("memory allocation of N bytes failed", std alloc.rs default_alloc_error_hook).
- A DataLoader worker SIGKILLed (PyTorch's torch/utils/data/_utils/signal_handling.py "DataLoader worker (pid N)
  is killed by signal: Killed.", Paddle's data_loader.cc "DataLoader process (pid N) exited is killed by signal:
  Killed."): the loader's workers hold prefetched batches in host memory and are the OOM killer's usual victims.
A job's own SIGKILL with no error above it (a launcher's "exits with return code = -9", torchrun's "exitcode: -9",
exit code 137, the shell's "Killed") is judged in analysis.logs.classify (judge56): the kernel's OOM killer is its
usual sender, so it is `oom` (host memory) with "(a SIGKILL with no error above it)" in the reason. A launcher's
SIGKILL of the surviving ranks after one failed is not this: the failed rank's error stands above it, or the
launcher says it is killing its subprocesses (families.orchestrator), which stays `crashed`.
"""

from __future__ import annotations

import re

from analysis.logs.families import rows
from analysis.logs.logtext import message_of
from launcher.core.kinds import FailureKind

_DEVICE = "out of memory (device)"
# "out of memory" said of a device or an allocation, not advice about avoiding it.
_ADVICE = r"(?i)\A(?![^\n]*\b(?:avoid|prevent|may|might|could|reduce|to fit|if you|tips?|hint|try)\b)"
DEVICE_OOM_SHAPE = (_ADVICE + r"[^\n]*?(?:(?:\b(?:cuda|hip|gpu|device|mps|xpu|npu|vram|hbm|cudnn|cublas|nccl|"
                    r"runtime error \(2\))\b|cudaMalloc|cuMemAlloc|hipMalloc)[^\n]{0,60}\bout of memory\b|"
                    r"\bout of memory\b[^\n]{0,60}"
                    r"(?:tried to allocate|when allocating|trying to allocate|\bon (?:device|gpu)\b|\bgpu\b|THC|"
                    r"Caching))")
_EXHAUSTED = r"(?i)\bOOM\b|out of memory|\bmemory\b|\balloc"
# An error line's message that is "out of memory" itself, and a failed allocation of a stated size.
OOM_AS_MESSAGE = (r"(?i)(?:\w(?:error|exception)|^\s{0,8}(?:\[[^\]\n]{0,80}\]\s{0,4})?(?:error|fatal))\s{0,2}[:：]"
                  r"\s{0,4}\(?out of memory\)?\s{0,4}(?:[.!]|$)")
# not advice, and not a warning of an allocation the program falls back from (a cache, a pinned buffer)
_NOT_ADVICE = (r"(?i)\A(?![^\n]*\b(?:avoid|prevent|if you|if it|tips?|hint|try|consider|may|might|warn\w*|"
               r"fall(?:ing)? ?back|instead|skipp\w*|retry\w*)\b)(?!\s{0,8}(?:W\d{4}\s|W:|\[W\]))")
_SIZE = r"[\d.,]{1,20} ?(?:[KMGT]i?B|bytes)\b"
SIZED_ALLOCATION_FAILED = (_NOT_ADVICE + r"[^\n]*?\b(?:failed|unable|cannot|could not|couldn't) (?:to )?allocate "
                           r"(?:" + _SIZE + r"|memory\b[^\n]{0,30}?\b" + _SIZE + r")")
# A CUDA driver/runtime status printed as its number: 2 is the out-of-memory code in both APIs (CUresult
# CUDA_ERROR_OUT_OF_MEMORY, cudaError_t cudaErrorMemoryAllocation); with its name in brackets or not.
# An allocation that failed on the device, without a size (an allocator's or a runtime's own words), not advice.
DEVICE_ALLOCATION_FAILED = (_NOT_ADVICE + r"[^\n]*?\b(?:failed|unable|cannot|could not|couldn't) (?:to )?allocate "
                            r"(?:(?:device|gpu|cuda|hbm|vram) memory\b|(?:\w{1,20} )?memory (?:on|in) (?:the )?"
                            r"(?:gpu|device|cuda|hbm|vram)\b)")
CU_RESULT_OOM = r"\bCUresult\b[^\n]{0,20}?(?:\b2\b|CUDA_ERROR_OUT_OF_MEMORY|\bout of memory\b)"
DEVICE_MEMORY = (
    rows(FailureKind.OOM, _DEVICE, "TensorFlow errors_impl / bfc_allocator.cc / op_kernel.cc",
         ("OOM when allocating", "tensorflow.python.framework.errors_impl.ResourceExhaustedError:  OOM when "
                                 "allocating tensor with shape[2,1751,906,640]"),
         ("ran out of memory trying to allocate", "W tensorflow/core/common_runtime/bfc_allocator.cc:431] Allocator "
                                                  "(GPU_0_bfc) ran out of memory trying to allocate 4.42GiB"),
         ("ResourceExhaustedError", "paddle.fluid.core_avx.ResourceExhaustedError: Out of memory error on GPU 0. "
                                    "Cannot allocate 1.2GB memory", _EXHAUSTED),
         ("Resource exhausted", "OP_REQUIRES failed at matmul_op.cc:481 : Resource exhausted: OOM when allocating",
          _EXHAUSTED))
    # judge58 (in sample after batch 49): the Rust GPU stack of burn/CubeCL on wgpu reports a failed device
    # allocation as "failed to reserve N bytes of device memory: can't allocate buffer of size: N"
    # (ArthurBrussee/brush#551, oos-batch49, a Gaussian-splatting trainer on an RTX 4090)
    + rows(FailureKind.OOM, _DEVICE, "burn / CubeCL wgpu runtime (device allocation failed)",
           ("bytes of device memory", "failed to reserve 3595479680 bytes of device memory: can't allocate buffer of "
                                      "size: 3595479680",
            r"(?i)failed to (?:reserve|allocate) \d{1,15} bytes of device memory"))
    # judge60 (in sample after batch 50): HAMi, the Kubernetes GPU-sharing layer (Project-HAMi/HAMi-core
    # src/allocator/allocator.c), refuses an allocation over the vGPU's memory quota as "[HAMI-core ERROR (pid:..
    # allocator.c:49)]: Device 0 OOM <wanted> / <limit>" before the framework's own error (X-R1#13, oos-batch50)
    + rows(FailureKind.OOM, _DEVICE, "HAMi-core vGPU allocator (memory quota)",
           ("HAMI-core ERROR", "[HAMI-core ERROR (pid:34464 thread=140052775450176 allocator.c:49)]: Device 0 OOM "
                               "42744416256 / 42505076736",
            r"HAMI-core ERROR[^\n]{0,120}?\bDevice \d{1,3} OOM \d{1,15} / \d{1,15}"))
    # PaddlePaddle 1.x platform/gpu_info.cc (GpuMaxChunkSize: PADDLE_ENFORCE_LE(allocating, available, ...)): the
    # chunk its allocator reserves at start (FLAGS_fraction_of_gpu_memory_to_use) is more than the device has free
    + rows(FailureKind.OOM, _DEVICE, "PaddlePaddle 1.x platform/gpu_info.cc",
           ("Insufficient GPU memory to allocation", "Insufficient GPU memory to allocation. at "
                                                     "[/paddle/paddle/fluid/platform/gpu_info.cc:120]"))
    + rows(FailureKind.OOM, _DEVICE, "XLA / JAX / TPU runtime",
           ("RESOURCE_EXHAUSTED", "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Failed to allocate "
                                  "request for 2.00GiB (2147483648B) on device ordinal 0", _EXHAUSTED),
           ("Out of memory while trying to allocate", "Execution of replica 0 failed: Out of memory while trying to "
                                                      "allocate 17179869184 bytes."),
           ("Ran out of memory in memory space", "Ran out of memory in memory space hbm. Used 20.5G of 15.48G hbm."))
    # judge64 (in sample after batch 53): MindSpore's dynamic device allocator (ccsrc/backend/common/mem_reuse/
    # mem_dynamic_allocator.cc CalMemBlockAllocSize: "Memory not enough: current free memory size[0] is smaller than
    # required size[29491200]."), and its data pipeline's pinned host buffer (minddata/dataset/util/arena.cc:
    # "cudaHostAlloc failed, ret[2], out of memory"; mindone#465, mindspore#172)
    + rows(FailureKind.OOM, _DEVICE, "MindSpore mem_dynamic_allocator.cc",
           ("Memory not enough: current free memory size", "[WARNING] PRE_ACT(70996,7f8ce37fe700,python):2024-04-26-"
                                                           "00:50:19.865.072 [mem_dynamic_allocator.cc:303] "
                                                           "CalMemBlockAllocSize] Memory not enough: current free "
                                                           "memory size[0] is smaller than required size[29491200]."))
    + rows(FailureKind.OOM, "out of memory (host)", "MindSpore minddata arena.cc (pinned host memory)",
           ("cudaHostAlloc failed", "[arena.cc:250] Init] cudaHostAlloc failed, ret[2], out of memory",
            r"cudaHostAlloc failed[^\n]{0,40}\bout of memory"))
    # judge63 (in sample after batch 52): Jittor's allocator (jittor/src/mem/allocator.cc: "GPU memory is overflow,
    # please reduce your batch_size or data size!"), before the CUDA and NCCL errors of the teardown (jittor#396)
    + rows(FailureKind.OOM, _DEVICE, "Jittor mem/allocator",
           ("GPU memory is overflow", "GPU memory is overflow, please reduce your batch_size or data size!"))
    + rows(FailureKind.OOM, _DEVICE, "ArrayFire (AF_ERR_NO_MEM), flashlight memory manager",
           ("Device out of memory", "terminate called after throwing an instance of 'af::exception'  what():  "
                                    "ArrayFire Exception (Device out of memory:101):"))
    + rows(FailureKind.OOM, _DEVICE, "PyTorch MPS/XPU backends, torch_npu, HIP, MindSpore, Apple Metal",
           ("MPS backend out of memory", "RuntimeError: MPS backend out of memory (MPS allocated: 17.9 GB, other "
                                         "allocations: 1.2 GB, max allowed: 18.1 GB)."),
           ("XPU out of memory", "torch.OutOfMemoryError: XPU out of memory. Tried to allocate 2.00 GiB."),
           ("NPU out of memory", "RuntimeError: NPU out of memory. Tried to allocate 1.50 GiB (NPU 0; 60.97 GiB "
                                 "total capacity)"),
           ("EL0004", "EL0004: [PID: 4242] 2024-03-01-10:00:00 Failed to allocate memory.", r"(?i)alloc|memory"),
           ("hipErrorOutOfMemory", "RuntimeError: HIP error: hipErrorOutOfMemory"),
           ("memory isn't enough", "Device(id:0) memory isn't enough and alloc failed, kernel name: Default/MatMul, "
                                   "alloc size: 1073741824B."),
           ("kIOGPUCommandBufferCallbackErrorOutOfMemory",
            "[METAL] Command buffer execution failed: Insufficient Memory "
            "(00000008:kIOGPUCommandBufferCallbackErrorOutOfMemory)"))
    + rows(FailureKind.OOM, _DEVICE, "Habana/Gaudi PyTorch bridge (PT_DEVMEM), Hugging Face Accelerate "
           "find_executable_batch_size (raised after halving the batch on every OOM)",
           ("PT_DEVMEM", "RuntimeError: [Rank:0] FATAL ERROR :: MODULE:PT_DEVMEM Allocation failed for "
                         "size::1073741824 (1024)MB", r"(?i)alloc|out of memory"),
           ("No executable batch size found", "RuntimeError: No executable batch size found, reached zero."))
    + rows(FailureKind.OOM, _DEVICE, "cuFFT / cuSOLVER / cuSPARSE / cuRAND status codes",
           ("_ALLOC_FAILED", "RuntimeError: cuSOLVER error: CUSOLVER_STATUS_ALLOC_FAILED, when calling "
                             "`cusolverDnCreate(handle)`", r"(?:CUFFT|CUSOLVER|CUSPARSE|CURAND|NVJPEG|CUTENSOR)\w*"
                                                           r"_ALLOC_FAILED"))
    + rows(FailureKind.OOM, _DEVICE + " (cuBLAS could not create its handle on a full GPU)",
           "cuBLAS cublasCreate; PyTorch threads on CUBLAS_STATUS_NOT_INITIALIZED",
           ("CUBLAS_STATUS_NOT_INITIALIZED when calling `cublasCreate", "RuntimeError: CUDA error: "
                                                                        "CUBLAS_STATUS_NOT_INITIALIZED when calling "
                                                                        "`cublasCreate(handle)`"))
    # judge28 (oos-batch24's DeepSpeed-Chat hybrid engine): DeepSpeed's inference kernels raise this when the free
    # GPU memory cannot hold their workspace (csrc/transformer/inference/includes/inference_context.h GenWorkSpace:
    # "Workspace can't be allocated, no enough memory." in older releases, "..., not enough memory" in newer ones
    # and the SYCL port); a RuntimeError, so without this row it read as a crash.
    + rows(FailureKind.OOM, _DEVICE + " (DeepSpeed inference workspace)",
           "DeepSpeed csrc/transformer/inference inference_context.h (GenWorkSpace)",
           ("Workspace can't be allocated", "RuntimeError: Workspace can't be allocated, not enough memory",
            r"Workspace can't be allocated, not? enough memory"))
    + rows(FailureKind.OOM, _DEVICE, "PyTorch < 1.0 THC (THCudaCheck, error=2 is cudaErrorMemoryAllocation); the "
           "traceback after it is often cut before its last line",
           ("THCudaCheck FAIL", "THCudaCheck FAIL file=/pytorch/aten/src/THC/generic/THCStorage.cu line=58 error=2 "
                                ": out of memory", r"THCudaCheck FAIL[^\n]{0,300}(?:\bout of memory\b|error=2\b)"))
    + rows(FailureKind.OOM, _DEVICE, "CUDA driver API (CUresult 2 = CUDA_ERROR_OUT_OF_MEMORY) and runtime API "
           "(cudaErrorMemoryAllocation = 2) codes, as allocators built on them print them (torch_memory_saver's "
           "cuMemCreate: '[torch_memory_saver.cpp] CUresult error: 2 (out of memory)', slime#274, batch 10)",
           ("CUDA_ERROR_OUT_OF_MEMORY", "CUDA_ERROR_OUT_OF_MEMORY: out of memory (cuMemAlloc failed)"),
           ("cudaErrorMemoryAllocation", "cudaErrorMemoryAllocation: out of memory"),
           ("CUresult", "[torch_memory_saver.cpp] CUresult error: 2 (out of memory) file=csrc/utils.h "
                        "func=cu_mem_create line=187", CU_RESULT_OOM))
    + rows(FailureKind.OOM, "out of memory", "judge10a: an error line whose own words say an allocation failed: "
           "the message IS 'out of memory' (old PyTorch's 'RuntimeError: out of memory', a relayed 'error: out of "
           "memory'), or an allocation of a stated size failed (allocators of every runtime: 'failed to allocate "
           "2147483648 bytes', 'unable to allocate 3.2 GiB of pinned memory'); not advice, which states no failed size",
           ("out of memory", "RuntimeError: out of memory", OOM_AS_MESSAGE),
           ("llocate", "RuntimeError: failed to allocate 2147483648 bytes", SIZED_ALLOCATION_FAILED))
    # judge14a: ROCm's runtime status for a failed device allocation (ROCR-Runtime hsa_status_string:
    # "HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate the necessary resources."; the same status
    # names other exhausted resources, so only with "allocate" on its line), and an allocator's failure without a
    # size, said of the device ("Unable to allocate memory on the GPU", "failed to allocate device memory").
    + rows(FailureKind.OOM, _DEVICE, "ROCR-Runtime hsa_status_string; allocators' unsized device-allocation failures",
           ("HSA_STATUS_ERROR_OUT_OF_RESOURCES", "Callback: Queue 0x7f aborting with error : "
                                                 "HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate "
                                                 "the necessary resources.",
            r"HSA_STATUS_ERROR_OUT_OF_RESOURCES[^\n]{0,120}\ballocate"),
           ("llocate", "ERROR: Unable to allocate memory on the GPU", DEVICE_ALLOCATION_FAILED))
    + rows(FailureKind.OOM, _DEVICE, "any runtime's 'out of memory' said of a device or an allocation",
           ("out of memory", "RuntimeError: cuda runtime error (2) : out of memory at /pytorch/aten/src/THC/"
                             "THCCachingAllocator.cpp:510", DEVICE_OOM_SHAPE),
           ("Out of memory", "Out of memory on device 1 while allocating 3.1 GiB", DEVICE_OOM_SHAPE))
)

_HOST = "out of memory (host)"
HOST_MEMORY = (
    rows(FailureKind.OOM, _HOST, "Linux mm/oom_kill.c",
         ("invoked oom-killer", "python3 invoked oom-killer: gfp_mask=0x100cca(GFP_HIGHUSER_MOVABLE), order=0, "
                                "oom_score_adj=0"),
         ("Memory cgroup out of memory", "Memory cgroup out of memory: Killed process 4242 (python) total-vm:812"
                                         "34567kB, anon-rss:65432100kB"),
         ("oom-kill:constraint=", "oom-kill:constraint=CONSTRAINT_MEMCG,nodemask=(null),cpuset=/,mems_allowed=0-1,"
                                  "task=python,pid=4242,uid=1000"))
    + rows(FailureKind.OOM, _HOST, "Kubernetes container termination reason / kubelet eviction",
           ("OOMKilled", "    Last State:  Terminated\n      Reason:    OOMKilled\n      Exit Code: 137"),
           ("low on resource: memory", "Status: Failed  Reason: Evicted  Message: The node was low on resource: "
                                       "memory. Container trainer was using 190Gi, which exceeds its request of 64Gi."))
    + rows(FailureKind.OOM, _HOST, "Ray memory monitor and OOM guide (docs.ray.io)",
           ("running low on memory", "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low "
                                     "on memory."),
           ("killed due to memory pressure", "(raylet) 2 Workers (tasks / actors) killed due to memory pressure (OOM), "
                                             "0 Workers crashed due to other reasons at node (ID: 6b3f, IP: 10.0.0.5)"),
           ("NODE_OUT_OF_MEMORY", "Reporting worker exit, worker id = 1c42, exit_type = NODE_OUT_OF_MEMORY"),
           # judge15: the memory monitor's kill message (src/ray/raylet/node_manager.cc, CreateOomKillMessage*):
           # "Memory on the node ... was X / Y GB, which exceeds the memory usage threshold of 0.95. Ray killed this
           # worker ... Refer to the documentation on how to address the out of memory issue: ...ray-oom-prevention"
           ("Refer to the documentation on how to address the out of memory issue",
            "Refer to the documentation on how to address the out of memory issue: https://docs.ray.io/en/latest/"
            "ray-core/scheduling/ray-oom-prevention.html."),
           ("which exceeds the memory usage threshold", "Memory on the node (IP: 10.0.0.5, ID: 6b3f) where the task "
                                                        "was running was 241.07GB / 251.55GB (0.958), which exceeds "
                                                        "the memory usage threshold of 0.95."))
    + rows(FailureKind.OOM, _HOST, "CPython MemoryError, numpy _ArrayMemoryError, PyTorch's Windows allocator",
           # the exception's own line (a traceback's last line), not a name inside other words or frames
           ("MemoryError", "MemoryError: Unable to allocate 3.73 GiB for an array with shape (500000, 1000)",
            r"(?:^|[\s.:\]])(?:_Array)?MemoryError(?::|\s*$)"),
           ("for an array with shape", "numpy.core._exceptions._ArrayMemoryError: Unable to allocate 3.73 GiB for "
                                       "an array with shape (500000, 1000) and data type float64",
            r"Unable to allocate [\d.]+ ?[KMGT]i?B for an array"),
           ("DefaultCPUAllocator: not enough memory", "RuntimeError: [enforce fail at C:\\cb\\pytorch\\c10\\core"
                                                      "\\impl\\alloc_cpu.cpp:72] data. DefaultCPUAllocator: not enough "
                                                      "memory: you tried to allocate 1073741824 bytes."),
           ("The paging file is too small", "OSError: [WinError 1455] The paging file is too small for this "
                                            "operation to complete."))
    + rows(FailureKind.OOM, _HOST, "Linux mm/oom_kill.c (older kernels, oom_reaper), systemd-oomd",
           ("Out of memory: Kill process", "Out of memory: Kill process 4242 (python) score 912 or sacrifice child"),
           ("oom_reaper: reaped process", "oom_reaper: reaped process 4242 (python), now anon-rss:0kB"),
           ("due to memory pressure", "systemd-oomd[812]: Killed /user.slice/user-1000.slice/session-3.scope due to "
                                      "memory pressure for /user.slice being 92.1% > 80.0% for > 20s",
            r"(?i)\bkill(?:ed|ing)?\b"))
    # judge14a: a process reported killed by the OOM killer in any tool's words ("Container killed by the OOM
    # killer", container runtimes and batch systems; "Killed by the kernel OOM killer"), not a guess about it ("may
    # have been killed by the OOM killer?", launchers' hints).
    + rows(FailureKind.OOM, _HOST, "container runtimes' and schedulers' kill reports (OOM killer named as the sender)",
           ("OOM killer", "ERROR: Container killed by the OOM killer",
            r"(?i)\A(?![^\n]*(?:\b(?:may|might|maybe|possibly|perhaps|likely|probably|could|potential|if)\b|\?))"
            r"[^\n]*\b(?:killed|terminated|reaped) by (?:the )?(?:kernel(?:'s)? |linux |host )?OOM[ _-]?killer\b"))
    # judge37a: Rust's global allocator failing (rust-lang/rust library/std/src/alloc.rs default_alloc_error_hook:
    # "memory allocation of {} bytes failed", then the process aborts): a host allocation, e.g. the tokenizers
    # library (Rust) of a Hugging Face data pipeline on a host out of memory (DeepSpeedExamples#321). Ranks that
    # abort together interleave it ("memory allocation of memory allocation of 20971522097152 bytes failed"): any
    # intact copy on its own line decides.
    + rows(FailureKind.OOM, _HOST, "Rust std alloc.rs default_alloc_error_hook (host allocator)",
           ("memory allocation of ", "memory allocation of 2097152 bytes failed",
            r"^\s{0,8}memory allocation of \d{1,20} bytes failed\s*$"))
    # judge56: a data-loader worker killed by SIGKILL (the loader's own report names the signal "Killed"; a
    # "Bus error" worker is shared memory running out, analysis.logs.patterns.HARD_CRASH's crash).
    + rows(FailureKind.OOM, _HOST, "PyTorch DataLoader signal_handling.py, Paddle data_loader.cc (SIGKILLed worker)",
           ("is killed by signal: Killed", "RuntimeError: DataLoader worker (pid 1104) is killed by signal: Killed."))
    + rows(FailureKind.OOM, _HOST, "LSF job exit reasons (TERM_MEMLIMIT), PBS/Torque resource limits",
           ("TERM_MEMLIMIT", "TERM_MEMLIMIT: job killed after reaching LSF memory usage limit."),
           ("exceeded limit", "=>> PBS: job killed: mem 134217728kb exceeded limit 125829120kb",
            r"(?i)job killed: (?:v?mem|pmem|vmem)\b[^\n]{0,40}exceeded limit")))
MEMORY = DEVICE_MEMORY + HOST_MEMORY

# judge15: Ray's worker-died text is not evidence of an OOM: python/ray/_private and src/ray/core_worker print "A worker
# died or was killed while executing a task by an unexpected system error" and "Worker unexpectedly exits with a
# connection error code 2. End of file. There are some potential root causes. (1) The process is killed by SIGKILL by
# OOM killer due to high memory usage. (2) ray stop --force is called. (3) The worker is crashed unexpectedly due to
# SIGSEGV or other unexpected errors." for any worker that died without telling Ray why -- a list of possible causes.
# classify checks these last, after every other family: a real cause anywhere in the log (an NCCL watchdog timeout,
# a device OOM) wins; alone, the first cause Ray lists stays the best guess.
RAY_WORKER_DIED = (
    rows(FailureKind.OOM, _HOST, "Ray core worker's worker-died text (its first listed possible cause)",
           ("killed by SIGKILL by OOM killer", "Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly "
                                               "exits with a connection error code 2. End of file. There are some "
                                               "potential root causes. (1) The process is killed by SIGKILL by OOM "
                                               "killer due to high memory usage."),
           ("The leased worker has unrecoverable failure", "Worker exit type: SYSTEM_ERROR Worker exit detail: The "
                                                           "leased worker has unrecoverable failure. Worker is "
                                                           "requested to be destroyed when it is returned."),
           ("A worker died or was killed while executing a task by an unexpected system error",
            "(raylet) A worker died or was killed while executing a task by an unexpected system error. To "
            "troubleshoot the problem, check the logs for the dead worker.")))

# judge40a: a training loop that catches the CUDA OOM itself and logs it instead of raising: fairseq's old trainer and
# ParlAI (`print('| WARNING: ran out of memory, skipping batch. ...')`), and the scripts that copied it
# (GPT2-Chinese and its forks' train.py: `logger.info("WARNING: ran out of memory")` in `except RuntimeError` when
# "out of memory" is in the exception). One such line in a run that goes on is a skipped batch, not a failure; a log
# that ENDS on it (its last non-blank line: no step record, no result after it) is a run whose batches kept running
# out of memory until it stopped (oos-batch35: 484 of them in 5.5 s, then nothing). Checked after every other family.
CAUGHT_OOM_LABEL = "out of memory (the training loop caught the device OOM and the run ended on it)"
CAUGHT_OOM = re.compile(r"(?i)^(?:(?:INFO|WARNING|WARN)\s{0,4}[-:|]\s{0,4})?\|?\s{0,4}WARNING:?\s{1,4}"
                        r"ran out of memory\b(?![^\n]{0,40}\b(?:when regular|retrying with tiled))")
_TAIL_CHARS = 4000  # the end of the log read for its last non-blank line


def ends_on_caught_oom(text: str) -> int | None:
    """Position of the log's last non-blank line when it is a training loop's own caught-OOM warning; else None."""
    end = len(text.rstrip())
    if end == 0:
        return None
    start = text.rfind("\n", max(0, end - _TAIL_CHARS), end) + 1
    return start if CAUGHT_OOM.match(message_of(text[start:end]).strip()) else None
