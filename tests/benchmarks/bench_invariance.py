"""Metamorphic audit of the failure classifier: does a verdict survive the way a log was captured?

    python tests/benchmarks/bench_invariance.py [--sample N] [--jobs J] [--only NAME,...] [--batches 1,2,...]

Every labelled fixture (tests/fixtures/INDEX.tsv and every oos-batch*/INDEX.tsv) is judged as it is and after each
transformation below, in memory, the way `python -m analysis.classify --json LOG` judges a file (the fixture's
`# SOURCE` note removed, JobLog.join, measurements, trial_outcome). A transformation wraps the same framework lines
the way some launcher, console or collector does; none changes what the log says. Printed per transformation: how
many verdicts change (the kind, or the step time by more than 1 %), how many of those were right before (right ->
wrong matters most), and each changed file (original kind -> transformed kind, the transformed reason).
"""

from __future__ import annotations

import argparse
import csv
import random
import re
import sys
import time
import zlib
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "fixtures"
STEP_TOLERANCE = 0.01


def _each_line(text: str, wrap: Callable[[int, str], str]) -> str:
    """Apply `wrap(index, line)` to every line, keeping the final newline (or its absence)."""
    lines = text.split("\n")
    tail = lines.pop() if lines and lines[-1] == "" else None
    out = [wrap(i, line) for i, line in enumerate(lines)]
    return "\n".join(out) + ("\n" if tail is not None else "")


def torchrun_tee(text: str) -> str:
    """torchrun --tee 3 / --log-dir: every line of local rank 0 as `[default0]:text`."""
    return _each_line(text, lambda _, line: f"[default0]:{line}")


def torch_rank(text: str) -> str:
    """torch >= 2.2 (TORCHELASTIC_ENABLE_FILE_TIMER off, torchrun --local-ranks-filter): `[rank0]:text`."""
    return _each_line(text, lambda _, line: f"[rank0]:{line}")


def srun_label(text: str) -> str:
    """srun --label (and the Slurm launchers of NeMo-Run / submitit with it): `0: text`."""
    return _each_line(text, lambda _, line: f"0: {line}")


def mpirun_tag(text: str) -> str:
    """Open MPI's mpirun --tag-output: `[1,0]<stdout>:text`."""
    return _each_line(text, lambda _, line: f"[1,0]<stdout>:{line}")


def ray_worker(text: str) -> str:
    """Ray Train: every worker's stdout reaches the driver as `(RayTrainWorker pid=1234, ip=10.0.0.1) text`."""
    return _each_line(text, lambda _, line: f"(RayTrainWorker pid=1234, ip=10.0.0.1) {line}")


def pdsh_host(text: str) -> str:
    """pdsh (the DeepSpeed multi-node launcher's default runner): `node012: text`."""
    return _each_line(text, lambda _, line: f"node012: {line}")


def kubectl_timestamps(text: str) -> str:
    """`kubectl logs --timestamps`: an RFC 3339 nanosecond stamp in front of every line, one millisecond apart."""
    def stamp(i: int, line: str) -> str:
        ms = 10 * 3_600_000 + i  # 10:00:00.000 plus one millisecond per line
        return (f"2025-11-27T{ms // 3_600_000:02d}:{ms // 60_000 % 60:02d}:{ms // 1000 % 60:02d}."
                f"{ms % 1000:03d}456789Z {line}")
    return _each_line(text, stamp)


def crlf(text: str) -> str:
    """A log written on Windows or copied through a Windows console / browser paste: CR LF line endings."""
    return text.replace("\n", "\r\n")


def ansi_lines(text: str) -> str:
    """A colouring logger (rich, colorlog, loguru) writing to a terminal that a `script`/tmux capture kept: every
    line wrapped in a colour code and a reset."""
    return _each_line(text, lambda _, line: f"\x1b[32m{line}\x1b[0m" if line else line)


def ansi_levels(text: str) -> str:
    """colorlog / loguru: only the level name coloured (`\\x1b[1;31mERROR\\x1b[0m`)."""
    for level, code in (("ERROR", "1;31"), ("WARNING", "33"), ("INFO", "32"), ("CRITICAL", "1;41")):
        text = text.replace(level, f"\x1b[{code}m{level}\x1b[0m")
    return text


def two_ranks(text: str) -> str:
    """Two ranks printing the same lines (no rank-0-only logging), their outputs interleaved line by line, as a
    job's stdout collects them without a rank prefix."""
    return _each_line(text, lambda _, line: f"{line}\n{line}")


def two_ranks_tagged(text: str) -> str:
    """The same two ranks through torchrun --tee: `[default0]:` and `[default1]:` versions of every line."""
    return _each_line(text, lambda _, line: f"[default0]:{line}\n[default1]:{line}")


_ENV_DUMP = "".join(
    [f"{k}={v}\n" for k, v in (("SLURM_JOB_ID", "123456"), ("SLURM_NNODES", "2"), ("CUDA_VISIBLE_DEVICES",
                                                                                    "0,1,2,3,4,5,6,7"),
                               ("NCCL_DEBUG", "WARN"), ("MASTER_ADDR", "node012"), ("MASTER_PORT", "29500"))]
    + ["Package                  Version\n", "------------------------ -----------\n"]
    + [f"{name:<24s} {ver}\n" for name, ver in (("accelerate", "0.30.1"), ("deepspeed", "0.14.2"),
                                                ("numpy", "1.26.4"), ("nvidia-nccl-cu12", "2.20.5"),
                                                ("safetensors", "0.4.3"), ("tokenizers", "0.19.1"),
                                                ("torch", "2.3.0"), ("transformers", "4.41.2"),
                                                ("triton", "2.3.0"))] * 40
    + ["Collecting environment information...\n", "PyTorch version: 2.3.0+cu121\n", "Is debug build: False\n",
       "CUDA used to build PyTorch: 12.1\n", "OS: Ubuntu 22.04.4 LTS (x86_64)\n",
       "GPU models and configuration: GPU 0: NVIDIA H100 80GB HBM3\n", "Nvidia driver version: 535.161.08\n"])


def env_dump(text: str) -> str:
    """A job script that prints `env`, `pip freeze` / `pip list` and `python -m torch.utils.collect_env` first."""
    return _ENV_DUMP + text


def progress_redraws(text: str) -> str:
    """A shard-loading tqdm bar (transformers' `Loading checkpoint shards`) redrawn with carriage returns before the
    log: one physical line, many drawings."""
    bar = "".join(f"\rLoading checkpoint shards: {25 * i:3d}%|{'#' * (2 * i):<8s}| {i}/4 [00:{3 * i:02d}<00:{3 * (4 - i):02d},"
                  f"  3.00s/it]" for i in range(5))
    return bar + "\n" + text


# --- chatter between the lines, footers after the last line, header material (judge25) ------------------------------
# Each is text that real jobs print around the framework's own lines and that says nothing about the run's outcome.
# Where it goes and its numbers (pids, hosts, ranks) are drawn from a generator seeded by the log's own text, so a
# fixture always gets the same variant and different fixtures get different ones.


def _rng(text: str) -> random.Random:
    return random.Random(zlib.crc32(text.encode("utf-8", errors="surrogateescape")))


def _lines(text: str) -> tuple[list[str], bool]:
    lines = text.split("\n")
    ends_nl = bool(lines) and lines[-1] == ""
    if ends_nl:
        lines.pop()
    return lines, ends_nl


def _join(lines: list[str], ends_nl: bool) -> str:
    return "\n".join(lines) + ("\n" if ends_nl else "")


def _continued(line: str) -> bool:
    """Does `line` visibly not end its record: a field separator ends it (Megatron's ` |`, a `,` or `\\`), or it
    opens a bracket it does not close (a repr cut by the console's wrap)? One print() is one write: a library's
    chatter lands between two writes, never inside one, unless another process interleaves (judge44a: an NCCL
    block inside a Megatron iteration record wrapped over lines, warnings inside a ZeRO-Offload exception's
    message)."""
    end = line.rstrip()
    return end.endswith(("|", ",", "\\", "(", "[", "{")) or any(end.count(o) > end.count(c) for o, c in ("()", "[]", "{}"))


def _boundaries(lines: list[str], share: float) -> list[int]:
    """Indexes i (insert before lines[i]) in the first `share` of the log, before its last line, that fall between
    two records, not inside a traceback, an indented continuation or a record continued on the next line: neither
    neighbour is indented or a `Traceback` header, and the line above ends its record (_continued)."""
    last = min(max(1, int(len(lines) * share)), len(lines) - 1)  # never after the last line: that is the tail
    out = [i for i in range(0, last + 1)
           if (i == 0 or (lines[i - 1].strip() and not lines[i - 1][:1].isspace()
                          and not lines[i - 1].startswith("Traceback") and not lines[i - 1].rstrip().endswith(":")
                          and not _continued(lines[i - 1])))
           and not lines[i][:1].isspace()]
    return out or [0]


def _insert(text: str, blocks: list[list[str]], share: float) -> str:
    """Each block inserted at its own seeded record boundary in the first `share` of the log."""
    rng = _rng(text)
    lines, ends_nl = _lines(text)
    spots = _boundaries(lines, share)
    at = sorted((rng.choice(spots), k) for k in range(len(blocks)))
    for i, k in reversed(at):
        lines[i:i] = blocks[k]
    return _join(lines, ends_nl or not lines)


def _append(text: str, block: list[str]) -> str:
    """`block` after the log's last line (which keeps its own end: a log cut mid-line is closed by the footer's
    newline, as a shell's next `echo` would)."""
    body = text if text.endswith("\n") or not text else text + "\n"
    return body + "\n".join(block) + "\n"


def _nccl_init_lines(rng: random.Random) -> list[str]:
    """NCCL_DEBUG=INFO at communicator set-up, in NCCL's own format (src/debug.cc: `host:pid:tid [cudaDev] NCCL
    INFO ...`; the messages of src/init.cc, src/bootstrap.cc, src/graph/connect.cc, src/transport/net_ib.cc and
    the missing-plugin message of src/net.cc, NCCL 2.18-2.21)."""
    host, pid, dev = f"node{rng.randint(1, 64):03d}", rng.randint(1000, 99999), rng.randint(0, 7)
    tid = pid + rng.randint(20, 400)
    nranks = rng.choice((8, 16, 32))
    comm = f"0x{rng.getrandbits(40):x}"
    main, init = f"{host}:{pid}:{pid} [{dev}] NCCL INFO", f"{host}:{pid}:{tid} [{dev}] NCCL INFO"
    ring = " ".join(f"{r:3d}" for r in range(nranks))
    return [
        f"{main} Bootstrap : Using eth0:10.0.{rng.randint(0, 9)}.{rng.randint(2, 250)}<0>",
        f"{main} NET/Plugin : dlerror=libnccl-net.so: cannot open shared object file: No such file or directory No "
        "plugin found (libnccl-net.so), using internal implementation",
        f"{main} cudaDriverVersion 12020",
        "NCCL version 2.18.5+cuda12.2",
        f"{init} NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB [2]mlx5_2:1/IB [3]mlx5_3:1/IB ; OOB eth0:10.0.0.12<0>",
        f"{init} Using network IB",
        f"{init} comm {comm} rank {dev} nranks {nranks} cudaDev {dev} nvmlDev {dev} busId 18000 commId "
        f"0x{rng.getrandbits(60):x} - Init START",
        f"{init} Setting affinity for GPU {dev} to ffffff,ffffffff",
        f"{init} Channel 00/32 :  {ring}",
        f"{init} Channel 01/32 :  {ring}",
        f"{init} Trees [0] 1/-1/-1->0->-1 [1] 1/-1/-1->0->-1",
        f"{init} P2P Chunksize set to 131072",
        f"{init} Channel 00/0 : {dev}[18000] -> {(dev + 1) % nranks}[2a000] via P2P/IPC/read",
        f"{init} Connected all rings",
        f"{init} Connected all trees",
        f"{init} threadThresholds 8/8/64 | 128/8/64 | 512 | 512",
        f"{init} 32 coll channels, 0 nvls channels, 32 p2p channels, 32 p2p channels per peer",
        f"{init} comm {comm} rank {dev} nranks {nranks} cudaDev {dev} busId 18000 commId 0x1 - Init COMPLETE",
    ]


def nccl_init(text: str) -> str:
    """NCCL_DEBUG=INFO: a communicator's set-up lines (NCCL's format, _nccl_init_lines) near the start, where NCCL
    prints them at the first collective (not at the tail, where the last words of a job would be a wait)."""
    return _insert(text, [_nccl_init_lines(_rng(text))], 0.2)


# warnings.showwarning's format (`{filename}:{lineno}: {category}: {message}` then the source line), with messages
# that torch 2.1-2.4, transformers 4.4x and Megatron-Core print as they are.
_PY_WARNINGS = (
    ["/usr/local/lib/python3.10/dist-packages/torch/distributed/distributed_c10d.py:2965: UserWarning: "
     "torch.distributed._all_gather_base is a private function and will be deprecated. Please use "
     "torch.distributed.all_gather_into_tensor instead.", "  warnings.warn("],
    ["/opt/conda/lib/python3.10/site-packages/transformers/training_args.py:1474: FutureWarning: "
     "`evaluation_strategy` is deprecated and will be removed in version 4.46 of Transformers. Use `eval_strategy` "
     "instead", "  warnings.warn("],
    ["/usr/local/lib/python3.10/dist-packages/megatron/core/tensor_parallel/layers.py:280: FutureWarning: "
     "`torch.cuda.amp.custom_fwd(args...)` is deprecated. Please use `torch.amp.custom_fwd(args..., "
     "device_type='cuda')` instead.", "  def forward("],
    ["/opt/conda/lib/python3.10/site-packages/torch/utils/checkpoint.py:464: UserWarning: torch.utils.checkpoint: "
     "the use_reentrant parameter should be passed explicitly. In version 2.4 we will raise an exception if "
     "use_reentrant is not passed. use_reentrant=False is recommended, but if you need to preserve the current "
     "default behavior, you can pass use_reentrant=True.", "  warnings.warn("],
    ["/usr/lib/python3/dist-packages/pkg_resources/__init__.py:121: DeprecationWarning: pkg_resources is deprecated "
     "as an API", "  warnings.warn(\"pkg_resources is deprecated as an API\", DeprecationWarning)"],
)


def py_warnings(text: str) -> str:
    """Python warnings (UserWarning / FutureWarning / DeprecationWarning, each with its source line) printed at
    their first occurrence, in the first half of the run."""
    rng = _rng(text)
    return _insert(text, rng.sample(list(_PY_WARNINGS), 3), 0.5)


def torch_debug_warnings(text: str) -> str:
    """TORCH_DISTRIBUTED_DEBUG=INFO / DDP's reducer and torch.compile (dynamo, inductor) warnings, in c10's glog
    format (`[W reducer.cpp:1346] ...`, `W1127 10:00:00.123000 140 torch/_dynamo/...] [0/0] ...`) and as
    warnings.warn pairs, near the start of training."""
    return _insert(text, [[
        "[I ProcessGroupNCCL.cpp:686] [Rank 0] ProcessGroupNCCL initialization options:NCCL_ASYNC_ERROR_HANDLING: 1, "
        "NCCL_DESYNC_DEBUG: 0, NCCL_ENABLE_TIMING: 0, NCCL_BLOCKING_WAIT: 0, TIMEOUT(ms): 600000, USE_HIGH_PRIORITY_"
        "STREAM: 0",
        "[I logger.cpp:408] [Rank 0]: DDP Initialized with: broadcast_buffers: 1 bucket_cap_bytes: 26214400 "
        "find_unused_parameters: 1 gradient_as_bucket_view: 0",
        "[W reducer.cpp:1346] Warning: find_unused_parameters=True was specified in DDP constructor, but did not find "
        "any unused parameters in the forward pass. This flag results in an extra traversal of the autograd graph "
        "every iteration,  which can adversely affect performance. If your model indeed never has any unused "
        "parameters in the forward pass, consider turning this flag off. (function operator())",
        "/usr/local/lib/python3.10/dist-packages/torch/_inductor/compile_fx.py:150: UserWarning: TensorFloat32 tensor "
        "cores for float32 matrix multiplication available but not enabled. Consider setting "
        "`torch.set_float32_matmul_precision('high')` for better performance.",
        "  warnings.warn(",
        "W1127 10:00:00.123000 140234 torch/_dynamo/variables/tensor.py:715] [4/0] Graph break from `Tensor.item()`, "
        "consider setting:",
        "W1127 10:00:00.123000 140234 torch/_dynamo/variables/tensor.py:715] [4/0]     torch._dynamo.config."
        "capture_scalar_outputs = True",
    ]], 0.3)


def wandb_header(text: str) -> str:
    """W&B's run set-up lines (wandb/sdk/wandb_init.py, wandb_run.py's _header), printed by the first rank as the
    trainer starts."""
    rng = _rng(text)
    run = f"{rng.getrandbits(32):08x}"
    return _insert(text, [[
        "wandb: Currently logged in as: mlteam. Use `wandb login --relogin` to force relogin",
        "wandb: Tracking run with wandb version 0.16.6",
        f"wandb: Run data is saved locally in /workspace/wandb/run-20251127_100000-{run}",
        "wandb: Run `wandb offline` to turn off syncing.",
        "wandb: Syncing run golden-sun-12",
        "wandb: ⭐️ View project at https://wandb.ai/mlteam/pretrain",
        f"wandb: 🚀 View run at https://wandb.ai/mlteam/pretrain/runs/{run}",
    ]], 0.1)


def wandb_footer(text: str) -> str:
    """W&B's run footer after the trainer's last line (wandb_run.py's _footer: run history sparklines, run summary,
    sync and log-location lines), as HF Trainer and Lightning runs end. The exit status line `Waiting for W&B
    process to finish... (success|failed 1)` is left out: it would say how the run ended."""
    run = f"{_rng(text).getrandbits(32):08x}"
    return _append(text, [
        "wandb: ",
        "wandb: Run history:",
        "wandb:               train/epoch ▁▁▂▂▃▃▄▄▅▅▆▆▇▇██",
        "wandb:         train/global_step ▁▁▂▂▃▃▄▄▅▅▆▆▇▇██",
        "wandb:                train/loss █▆▅▄▄▃▃▂▂▂▂▁▁▁▁▁",
        "wandb: ",
        "wandb: Run summary:",
        "wandb:               train/epoch 1.0",
        "wandb:         train/global_step 500",
        "wandb:                train/loss 1.8123",
        "wandb:             train_runtime 1234.5678",
        "wandb:  train_samples_per_second 51.84",
        "wandb: ",
        f"wandb: 🚀 View run golden-sun-12 at: https://wandb.ai/mlteam/pretrain/runs/{run}",
        "wandb: ️⚡ View job at https://wandb.ai/mlteam/pretrain/jobs/QXJ0aWZhY3Q6MTIz/version_details/v0",
        "wandb: Synced 6 W&B file(s), 0 media file(s), 2 artifact file(s) and 0 other file(s)",
        f"wandb: Find logs at: ./wandb/run-20251127_100000-{run}/logs",
    ])


def seff_footer(text: str) -> str:
    """`seff $SLURM_JOB_ID` at the end of the batch script (slurm contribs/seff): the job is still running when its
    own script asks, so the state is RUNNING and seff warns that the figures may mislead."""
    job = _rng(text).randint(100000, 9999999)
    return _append(text, [
        f"Job ID: {job}", "Cluster: gpucluster", "User/Group: mlteam/mlteam", "State: RUNNING", "Nodes: 2",
        "Cores per node: 96", "CPU Utilized: 00:00:00", "CPU Efficiency: 0.00% of 3-04:48:00 core-walltime",
        "Job Wall-clock time: 00:59:24", "Memory Utilized: 0.00 MB (estimated maximum)",
        "Memory Efficiency: 0.00% of 1.95 TB (1000.00 GB/node)",
        "WARNING: Efficiency statistics may be misleading for RUNNING jobs.",
    ])


def slurm_epilog(text: str) -> str:
    """A cluster's SLURM epilogue appended to the job's output (the Georgia Tech PACE / Torque-style
    `Begin Slurm Epilog ... End Slurm Epilog` block: resources used, queue, account, nodes)."""
    job = _rng(text).randint(100000, 9999999)
    return _append(text, [
        "---------------------------------------",
        "Begin Slurm Epilog: Nov-27-2025 10:59:24",
        f"Job ID:        {job}",
        "User ID:       mlteam",
        "Account:       gts-mlteam",
        "Job name:      pretrain",
        "Resources:     cpu=192,gres/gpu:h100=16,mem=2000G,node=2",
        "Rsrc Used:     cput=3-04:48:00,vmem=0,walltime=00:59:24,mem=812345678K,energy_used=0",
        "Partition:     gpu-h100",
        "QOS:           inferno",
        "Nodes:         atl1-1-03-004-[21-22]",
        "---------------------------------------",
    ])


def nvidia_smi_footer(text: str) -> str:
    """`nvidia-smi` at the end of the batch script (its default table: driver, one GPU, no processes left)."""
    return _append(text, [
        "Thu Nov 27 10:59:24 2025       ",
        "+---------------------------------------------------------------------------------------+",
        "| NVIDIA-SMI 535.161.08             Driver Version: 535.161.08   CUDA Version: 12.2     |",
        "|-----------------------------------------+----------------------+----------------------+",
        "| GPU  Name                 Persistence-M | Bus-Id        Disp.A | Volatile Uncorr. ECC |",
        "| Fan  Temp   Perf          Pwr:Usage/Cap |         Memory-Usage | GPU-Util  Compute M. |",
        "|                                         |                      |               MIG M. |",
        "|=========================================+======================+======================|",
        "|   0  NVIDIA H100 80GB HBM3          On  | 00000000:18:00.0 Off |                    0 |",
        "| N/A   34C    P0              71W / 700W |      4MiB / 81559MiB |      0%      Default |",
        "|                                         |                      |             Disabled |",
        "+-----------------------------------------+----------------------+----------------------+",
        "                                                                                         ",
        "+---------------------------------------------------------------------------------------+",
        "| Processes:                                                                            |",
        "|  GPU   GI   CI        PID   Type   Process name                            GPU Memory |",
        "|        ID   ID                                                             Usage      |",
        "|=======================================================================================|",
        "|  No running processes found                                                           |",
        "+---------------------------------------------------------------------------------------+",
    ])


def date_lines(text: str) -> str:
    """`date` before and after the training command in the batch script (coreutils' default format)."""
    return "Thu Nov 27 10:00:01 UTC 2025\n" + _append(text, ["Thu Nov 27 10:59:24 UTC 2025"])


_MEGATRON_ARGS = [  # megatron/training/arguments.py _print_args: `  name ....... value`, sorted, dotted to width 48
    "accumulate_allreduce_grads_in_fp32", "False", "adam_beta1", "0.9", "adam_beta2", "0.95", "bf16", "True",
    "check_for_nan_in_loss_and_grad", "True", "clip_grad", "1.0", "data_parallel_size", "4",
    "distributed_backend", "nccl", "distributed_timeout_minutes", "10", "eval_interval", "1000", "eval_iters", "10",
    "exit_duration_in_mins", "None", "exit_interval", "None", "exit_on_missing_checkpoint", "False",
    "exit_signal_handler", "False", "ffn_hidden_size", "11008", "fp16", "False", "global_batch_size", "256",
    "hidden_size", "4096", "log_interval", "1", "log_throughput", "False", "loss_scale", "None",
    "lr", "0.0003", "micro_batch_size", "1", "num_attention_heads", "32", "num_layers", "32",
    "overlap_grad_reduce", "True", "pipeline_model_parallel_size", "2", "save_interval", "1000",
    "seq_length", "4096", "tensor_model_parallel_size", "2", "timing_log_level", "0", "train_iters", "500",
    "use_distributed_optimizer", "True", "use_flash_attn", "True", "world_size", "16",
]


def megatron_args(text: str) -> str:
    """Megatron's argument dump at the start (megatron/training/arguments.py _print_args), in front of a Megatron
    log (one with its `elapsed time per iteration` records): another framework's log would not print it, and its
    batch and sequence length would be another run's."""
    if "elapsed time per iteration" not in text:
        return text
    pairs = zip(_MEGATRON_ARGS[::2], _MEGATRON_ARGS[1::2])
    return "\n".join(
        ["using world size: 16, data-parallel size: 4, context-parallel size: 1 tensor-model-parallel size: 2, "
         "pipeline-model-parallel size: 2 ",
         "------------------------ arguments ------------------------"]
        + [f"  {k} {'.' * (48 - len(k) - 2)} {v}" for k, v in pairs]
        + ["-------------------- end of arguments ---------------------", ""]) + text


def hydra_config(text: str) -> str:
    """The job's config printed at the start: an argparse Namespace line and a Hydra / OmegaConf YAML dump
    (`print(OmegaConf.to_yaml(cfg))`), with keys that name failure words (timeouts, nan checks, max restarts)."""
    return "\n".join([
        "Namespace(model='llama-7b', seq_len=4096, micro_batch=1, grad_accum=8, max_steps=500, nan_check=True, "
        "timeout_s=1800, resume=None, out_of_memory_retry=False)",
        "model:", "  name: llama-7b", "  hidden_size: 4096", "  num_layers: 32", "  seq_length: 4096",
        "trainer:", "  max_steps: 500", "  log_every_n_steps: 10", "  val_check_interval: 1000",
        "  gradient_clip_val: 1.0", "  precision: bf16-mixed", "  detect_anomaly: false",
        "distributed:", "  backend: nccl", "  timeout_minutes: 30", "  max_restarts: 0",
        "  fail_on_nan: true", "  error_on_oom: false", "",
    ]) + text


def module_preamble(text: str) -> str:
    """A batch script's environment set-up under `set -x`: `module load` (Lmod's reload message), conda
    activation, the launch command."""
    return "\n".join([
        "+ module purge", "+ module load cuda/12.1 nccl/2.18.3 gcc/11.2",
        "", "The following have been reloaded with a version change:", "  1) cuda/11.8 => cuda/12.1", "",
        "+ source /opt/conda/etc/profile.d/conda.sh", "+ conda activate train",
        "+ export NCCL_DEBUG=WARN", "+ srun --kill-on-bad-exit=1 python train.py --config cfg.yaml", "",
    ]) + text


TRANSFORMS: dict[str, Callable[[str], str]] = {
    f.__name__: f for f in (torchrun_tee, torch_rank, srun_label, mpirun_tag, ray_worker, pdsh_host,
                            kubectl_timestamps, crlf, ansi_lines, ansi_levels, two_ranks, two_ranks_tagged, env_dump,
                            progress_redraws, nccl_init, py_warnings, torch_debug_warnings, wandb_header,
                            wandb_footer, seff_footer, slurm_epilog, nvidia_smi_footer, date_lines, megatron_args,
                            hydra_config, module_preamble)}


@dataclass(frozen=True)
class Case:
    path: Path
    label: str  # "corpus" or "oos-batchN"
    kind: str


@dataclass(frozen=True)
class Verdict:
    kind: str
    reason: str
    step_time_s: float | None


def cases(batches: list[str] | None) -> list[Case]:
    """Every labelled fixture: the corpus index and each held-out batch's (`batches`: their numbers; None: all)."""
    out = []
    indexes = [(ROOT / "INDEX.tsv", "corpus")]
    # by number, then name: a batch's side folder ("oos-batch30-gpu") sorts after its batch
    folders = sorted(ROOT.glob("oos-batch*"), key=lambda p: (int(re.match(r"\d*", p.name.removeprefix("oos-batch"))
                                                                      .group() or 0), p.name))
    indexes += [(f / "INDEX.tsv", f.name) for f in folders
                if batches is None or f.name.removeprefix("oos-batch") in batches]
    for index, label in indexes:
        with open(index, newline="") as f:
            for row in csv.DictReader(f, delimiter="\t"):
                out.append(Case(index.parent / row["path"], label, row["kind"]))
    return out


def raw_text(path: Path) -> str:
    """The file as the classifier reads it, without the fixture's leading `# SOURCE` note lines."""
    data = path.read_bytes().decode("utf-8", errors="replace")
    while data.startswith("#"):
        data = data.split("\n", 1)[1] if "\n" in data else ""
    return data


def judge(name: str, text: str) -> Verdict:
    """What `python -m analysis.classify --json` prints for a file holding `text` (no job facts)."""
    from analysis.logs.joblog import JobLog
    from analysis.logs.outcome import measurements, trial_outcome

    log = JobLog.join([(name, text.encode("utf-8", errors="surrogateescape"))])
    try:
        measured = measurements(log.text)
    except Exception:  # noqa: BLE001 - as the command: trial_outcome reports the failure in its reason
        measured = None
    outcome = trial_outcome(log, measured=measured)
    step = measured[0].get("step_time_s") if measured is not None else None
    return Verdict(outcome.failure_kind, outcome.reason, step)


def _audit(args: tuple[Case, tuple[str, ...]]) -> tuple[Case, Verdict, dict[str, Verdict]]:
    case, names = args
    text = raw_text(case.path)
    return case, judge(case.path.name, text), {n: judge(case.path.name, TRANSFORMS[n](text)) for n in names}


def changed(before: Verdict, after: Verdict) -> str:
    """'' when the verdict is the same; else what changed."""
    if before.kind != after.kind:
        return "kind"
    a, b = before.step_time_s, after.step_time_s
    if (a is None) != (b is None) or (a is not None and b is not None and abs(b - a) > STEP_TOLERANCE * abs(a)):
        return "step"
    return ""


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sample", type=int, default=0, help="judge a random N of the fixtures (seeded; 0: all)")
    p.add_argument("--seed", type=int, default=17)
    p.add_argument("--jobs", type=int, default=1, help="worker processes")
    p.add_argument("--only", default="", help="comma-separated transformation names (default: all)")
    p.add_argument("--batches", default="", help="comma-separated oos batch numbers (default: every batch)")
    args = p.parse_args(argv)
    names = tuple(args.only.split(",")) if args.only else tuple(TRANSFORMS)
    unknown = [n for n in names if n not in TRANSFORMS]
    if unknown:
        p.error(f"unknown transformation(s) {unknown}; known: {', '.join(TRANSFORMS)}")
    todo = cases(args.batches.split(",") if args.batches else None)
    if args.sample:
        todo = sorted(random.Random(args.seed).sample(todo, min(args.sample, len(todo))), key=lambda c: str(c.path))
    start = time.monotonic()
    work = [(c, names) for c in todo]
    if args.jobs > 1:
        with ProcessPoolExecutor(args.jobs) as pool:
            results = list(pool.map(_audit, work, chunksize=4))
    else:
        results = [_audit(w) for w in work]
    print(f"{len(results)} fixtures, {len(names)} transformations, {time.monotonic() - start:.0f} s")
    print(f"{'transformation':20s} {'changed':>8s} {'kind':>5s} {'step':>5s} {'right->wrong':>13s}")
    details = []
    total = 0
    for n in names:
        rows = [(c, b, t[n], changed(b, t[n])) for c, b, t in results]
        rows = [r for r in rows if r[3]]
        total += len(rows)
        kinds = sum(r[3] == "kind" for r in rows)
        broke = sum(b.kind == c.kind and a.kind != c.kind for c, b, a, _ in rows)
        print(f"{n:20s} {len(rows):8d} {kinds:5d} {len(rows) - kinds:5d} {broke:13d}")
        for c, b, a, what in rows:
            where = f"{c.label}/{c.path.relative_to(c.path.parents[1]) if c.label != 'corpus' else c.path.name}"
            was = "right" if b.kind == c.kind else "wrong"
            step = f" step {b.step_time_s} -> {a.step_time_s}" if what == "step" else ""
            details.append(f"  {n}: {where} [{was}] {b.kind} -> {a.kind}{step}  [{a.reason[:100]}]")
    print(f"total changed: {total}")
    if details:
        print("\nchanged verdicts:")
        print("\n".join(details))
    return 0


if __name__ == "__main__":
    sys.exit(main())
