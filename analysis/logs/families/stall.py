"""Hangs read from the log alone: a log that stops while its job waits.

A hang prints nothing: the job's monitor decides it (still running, no progress for longer than the hang timeout;
classify's `seconds_since_progress`). A log without that context can still show a stall in three shapes, each
judged only where nothing else (a failure signature, a traceback, a finished line) explains the end:
- the log's last activity is a phase that waits on other ranks or on a shared resource and prints its next line
  only when the wait is over (WAIT_PHASES): NCCL communicator set-up, a store-based barrier, a rendezvous, the
  start of a collective or of a timed phase, a progress bar still at its first step. A log that stops there never
  got past it;
- the user interrupted the job (INTERRUPT: Ctrl-C, SIGINT) while its last line was not a step record: people stop
  a job by hand when it has stopped moving (a healthy run stopped by hand ends on a step record and stays
  `cancelled`);
- after its last progress the log only shows liveness lines (LIVENESS: a cron pulse, a metrics endpoint polled,
  a heartbeat) whose timestamps span longer than STALLED_SPAN_S: the job was alive and made no progress.

Sources of the wordings:
- NCCL src/init.cc, src/transport/*.cc, src/graph/*.cc: the INFO lines of communicator set-up ("NCCL INFO
  Channel 00/32 :", "Connected all rings", "comm 0x... rank 0 nranks 8 ... - Init COMPLETE", "Bootstrap :",
  "NET/IB", "Using network"); every NCCL INFO line is printed before or between collectives, never as a step.
  Not a wait: NCCL's teardown ("comm 0x... rank 1 nranks 2 ... - Abort COMPLETE" / "- Destroy COMPLETE", src/init.cc
  ncclCommAbort / ncclCommDestroy finishing): the communicator is gone, the job is ending, not waiting on it (a
  watchdog's abort after a stuck collective is judged by its timeout lines first).
- torch/distributed/distributed_c10d.py `_store_based_barrier`: "Added key: store_based_barrier_key:1 to store for
  rank: 0" and "Waiting in store based barrier to initialize process group for rank: 0, key: ...".
- torch/distributed/elastic/agent/server/api.py: "[default] Rendezvous'ing worker group" (the agent waits for the
  other nodes) and the death signal `Received 2 death signal` / `Received Signals.SIGINT death signal`.
- DeepSpeed deepspeed/comm/torch.py / comm.py: "Initializing TorchBackend in DeepSpeed with backend nccl" (the
  next line comes after init_process_group returns).
- Megatron-LM megatron/training/initialize.py: "> initializing torch distributed ..." (in patterns.STALL_POINTS
  too). Megatron's "training ..." and "[before the start of training step]" are NOT wait phases: the next line is
  the first log_interval's record, which can be minutes away.
- tqdm's first rendering of a bar, `0%|          | 0/4887 [00:00<?, ?it/s]`: no step has finished.
- the shape of a phase-start line: "Timer actor_train start" (slime's timer.py), "Starting training ...",
  "Begin training": a start with no later record or end.
- Python: "KeyboardInterrupt" and the terminal's "^C" echo.
- cron/monitor pulses ("PULSE: <job> is running for 1-07:27:33", BigScience's slurm pulse), HTTP access lines of a
  polled metrics endpoint ("GET /metrics HTTP/1.1" 200 OK, uvicorn/sglang), Ray's "[repeated 4x across cluster]".
"""

from __future__ import annotations

import re

from analysis.logs.families import rows
from launcher.core.kinds import FailureKind

STALLED_SPAN_S = 1800.0  # liveness-only tail longer than this = no progress (the corpus's monitor hang timeout)
LAST_LINES = 40  # lines from the end looked at for the last activity (past trailing liveness lines)

# judge58 (in sample after batch 49): a framework's own report that a collective waits on ranks that never joined it.
# Horovod's stall inspector (horovod/common/stall_inspector.cc, CheckForStalledTensors) warns after 60 s: "One or more
# tensors were submitted to be reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of
# ranks for more than 60 seconds. This may indicate that different ranks are trying to submit different tensors or
# that only subset of ranks is submitting tensors, which will cause deadlock." (horovod#215, #1442, oos-batch49): the
# job is stuck, whatever it printed before.
STALL_REPORTS = rows(FailureKind.HANG, "a collective waits on ranks that never joined it (the framework's stall "
                     "report)", "Horovod common/stall_inspector.cc",
                     ("by subset of ranks and are waiting", "[2019-10-09 05:33:38.249493: W horovod/common/stall_"
                      "inspector.cc:105] One or more tensors were submitted to be reduced, gathered or broadcasted by "
                      "subset of ranks and are waiting for remainder of ranks for more than 60 seconds."))
# judge63 (in sample after batch 52): a wait on other tasks that the framework gave up on, not a collective's transport:
# JAX's coordination service barrier (jax.distributed.initialize: "DEADLINE_EXCEEDED: Barrier timed out. Barrier_id:
# PjRT_Client_Connect"; a task never connected) and Sample Factory's runner, which stops when a component stops
# beating (sample_factory/algo/runners/runner.py: "No heartbeat for components ... Stopping training due to lack of
# heartbeats")
STALL_REPORTS += rows(FailureKind.HANG, "the framework gave up waiting on a task or component that stopped answering",
                      "JAX coordination service (xla/tsl coordination_service.cc); Sample Factory runner.py",
                      ("Barrier timed out", "jaxlib.xla_extension.XlaRuntimeError: DEADLINE_EXCEEDED: Barrier timed "
                       "out. Barrier_id: PjRT_Client_Connect", r"DEADLINE_EXCEEDED: Barrier timed out\b"),
                      ("lack of heartbeats", "[2023-09-18 21:35:46,519][196071] Stopping training due to lack of "
                       "heartbeats from <class 'sample_factory.algo.sampling.inference_worker.InferenceWorker'>",
                       r"Stopping training due to lack of heartbeats"))

_WAIT = "the log ends while the job waits"
# Waits on other ranks that a running job also enters after its first steps (a communicator created lazily, a
# barrier before evaluation or a checkpoint): a log that stops there after steps is stuck there too.
COLLECTIVE_WAITS = (
    rows(FailureKind.HANG, _WAIT + " (NCCL communicator set-up or a collective)",
         "NCCL src/init.cc, src/transport/*.cc",
         ("NCCL INFO", "node1:12880:13786 [0] NCCL INFO Channel 31/32 :    0",
          r"NCCL INFO(?![^\n]*\.(?:cc|h|cu|cpp):\d+ -> \d)(?![^\n]*- (?:Abort|Destroy) COMPLETE)"))
    + rows(FailureKind.HANG, _WAIT + " (a store-based barrier or rendezvous)",
           "torch/distributed/distributed_c10d.py _store_based_barrier; torch elastic agent/server/api.py",
           ("store based barrier", "INFO:torch.distributed.distributed_c10d:Waiting in store based barrier to "
                                   "initialize process group for rank: 0, key: store_based_barrier_key:1"),
           ("store_based_barrier_key", "INFO:torch.distributed.distributed_c10d:Added key: store_based_barrier_key:1 "
                                       "to store for rank: 0"),
           ("Rendezvous'ing worker group", "INFO:torch.distributed.elastic.agent.server.api:[default] Rendezvous'ing "
                                           "worker group"))
)
# Waits of start-up only (process-group initialisation, the first step, a phase start): after steps they are a new
# epoch's or phase's ordinary first line, so they count only in a log without steps.
WAIT_PHASES = COLLECTIVE_WAITS + (
    rows(FailureKind.HANG, _WAIT + " (process-group initialisation)",
           "DeepSpeed deepspeed/comm/torch.py; Megatron-LM megatron/training/initialize.py",
           ("Initializing TorchBackend", "[comm.py:637:init_distributed] Initializing TorchBackend in DeepSpeed "
                                         "with backend nccl"),
           ("initializing torch distributed", "> initializing torch distributed ..."))
    + rows(FailureKind.HANG, _WAIT + " (process-group initialisation)",
           "Lightning lightning/fabric/utilities/distributed.py _init_dist_connection (NeMo's trainer): the rank "
           "waits in init_process_group for the others",
           ("Initializing distributed: GLOBAL_RANK", "Initializing distributed: GLOBAL_RANK: 3, MEMBER: 4/8"))
    + rows(FailureKind.HANG, _WAIT + " (its progress bar never left the first step)", "tqdm's first rendering",
           ("0%|", "Train step of epoch 0:   0%|          | 0/4887 [00:00<?, ?it/s]",
            r"(?<![\d.])0%\|[^\n]{0,200}?\|\s{0,4}0/\d{1,12}\s{0,4}\[00:00<\?"),
           ("0it [00:00", "Validation: 0it [00:00, ?it/s]", r"(?:^|[:|]\s{0,4})0it \[00:00, \?it/s\]\s{0,4}$"))
    # a line that says the job is waiting ("Waiting for all ranks to finish saving", "waiting on the other nodes"):
    # the next line comes only when the wait is over
    + rows(FailureKind.HANG, _WAIT + " (a line says it waits)", "trainers' and launchers' wait messages (the shape)",
           ("aiting ", "[rank0] Waiting for all ranks to finish saving the checkpoint ...",
            r"(?i)(?:^|[\]:|>-]\s{0,4})(?:still )?waiting (?:for|on|in|until)\b(?![^\n]{0,200}(?:\bdone\b|finished|"
            r"complete[d ]|took|[\d.]+ ?s(?:ec(?:onds)?)?\b))"))
    + rows(FailureKind.HANG, _WAIT + " (a phase started and never ended)", "slime timer.py; trainers' start lines",
           ("start", "[2026-03-24 06:36:50] timer.py:24 - Timer actor_train start",
            r"(?i)\btimer\s{1,3}\S{1,80}\s{1,3}start\s{0,3}$"),
           ("tart", "Starting training ...",
            r"(?i)\bstart(?:ing)?\s{1,3}(?:the\s{1,3})?train(?:ing|er)\b[\s.]{0,8}$"),
           ("egin", "Begin training", r"(?i)\bbegin(?:ning)?\s{1,3}(?:the\s{1,3})?training\b[\s.]{0,8}$"))
)

# A bare stack dump: frames in faulthandler's format (`  File "x.py", line 12 in func`: no comma before "in", unlike a
# traceback's frames) or py-spy's (`    func (x.py:12)`), with no header, exception or fatal-signal line left in the
# log (a fatal signal's dump says "Fatal Python error", which the crash family reads first). Only a process that was
# still alive is dumped that way (faulthandler.dump_traceback(_later), SIGUSR1, py-spy dump), and people dump a job
# that has stopped printing: the log ends while the job waits, in the innermost frame (a barrier, a collective, a
# validation round, a queue).
DUMP_FRAMES = (
    rows(FailureKind.HANG, _WAIT + " (a stack dump of the live job, without a header)",
         "CPython Python/traceback.c (faulthandler's dump_traceback frame format); py-spy src/dump.rs",
         ('", line ', '  File "/opt/ds/deepspeed/runtime/engine.py", line 1456 in _checkpoint_tag_validation',
          r'^\s{0,12}File "[^"\n]{1,400}", line \d{1,7} in [\w<>.]{1,120}\s{0,4}$'),
         (".py:", "    barrier (torch/distributed/distributed_c10d.py:3328)",
          r"^\s{0,12}[\w<>.]{1,120} \([^()\n]{1,400}\.py:\d{1,7}\)\s{0,4}$"))
)
# A file lock held by another process (a rank that died or a stale lock from a killed run): py-filelock's DEBUG
# records ("Attempting to acquire lock 1401 on /x.lock", "Lock 1401 not acquired on /x.lock, waiting 0.05 seconds
# ...") and torch's FileBaton (cpp_extension's "Waiting for ... lock"): the job retries for ever.
FILE_LOCKS = rows(
    FailureKind.HANG, _WAIT + " (a file lock held by another process)",
    "py-filelock filelock/_api.py (acquire's DEBUG records); torch/utils/file_baton.py",
    ("Attempting to acquire lock", "2024-01-01 10:00:00,001 - filelock - DEBUG: Attempting to acquire lock 1401 on "
                                   "/home/u/.triton/autotune/kernel.pickle.lock"),
    (" not acquired on ", "Lock 140192009925296 not acquired on /data/.cache/x.lock, waiting 0.05 seconds ...",
     r"\bLock \d{1,20} not acquired on "))
WAIT_PHASES = WAIT_PHASES + DUMP_FRAMES + FILE_LOCKS

_SETUP = "the log ends in a set-up or save phase"
# Set-up, save and build phases whose next line comes only when the phase is over (a collective inside it, a file
# system, a compiler). Judged only for a log that shows no step, no error and no end (an otherwise `unknown` log): a
# job that stops printing there never got past it. A healthy job's log also passes through these lines, so they
# count only as its last activity.
SETUP_PHASES = (
    rows(FailureKind.HANG, _SETUP + " (distributed set-up)",
         "DeepSpeed deepspeed/comm/comm.py init_distributed, deepspeed/runtime/utils.py parameter parallel groups",
         ("init_distributed]", "[2024-01-01 10:00:00,001] [INFO] [comm.py:637:init_distributed] cdb=None"),
         ("_initialize_parameter_parallel_groups", "[2024-01-01 10:00:00,001] [INFO] [utils.py:13:"
                                                   "_initialize_parameter_parallel_groups] data_parallel_size: 8"))
    + rows(FailureKind.HANG, _SETUP + " (the first forward with activation checkpointing)",
           "DeepSpeed deepspeed/runtime/activation_checkpointing/checkpointing.py (configuration printed by the "
           "first checkpointed forward)",
           ("[checkpointing.py:", "[2024-01-01 10:00:00,001] [INFO] [checkpointing.py:548:forward] ----Partition "
                                  "Activations False, CPU CHECKPOINTING False"))
    + rows(FailureKind.HANG, _SETUP + " (the validation sanity check before the first step)",
           "Lightning pytorch/loops/evaluation_loop.py (the 'Sanity Checking' progress bar)",
           ("Sanity Checking", "Sanity Checking: |          | 0/? [00:00<?, ?it/s]",
            r"Sanity Checking(?: DataLoader \d{1,3})?:\s{0,4}(?:0%)?\|[^\n]{0,200}?\|\s{0,4}0/"))
    + rows(FailureKind.HANG, _SETUP + " (saving a checkpoint)",
           "DeepSpeed runtime/checkpoint_engine/torch_checkpoint_engine.py and engine.py save_checkpoint, "
           "HF Trainer _save_checkpoint, Megatron checkpointing.py save_checkpoint",
           ("checkpoint", "[INFO] [torch_checkpoint_engine.py:23:save] [Torch] Saved /ckpt/checkpoint-500/"
                          "global_step500/mp_rank_00_model_states.pt.", r"(?i)\bsav(?:e|ed|ing)\b"),

           ("Checkpoint", "Saving Checkpoint to /ckpt/step_100", r"(?i)\bsav(?:e|ed|ing)\b"))
    # loading one before the first step (Megatron's "loading checkpoint from ... at iteration N", NeMo's "Loading
    # distributed checkpoint"): the next line comes once every rank has read its shard
    + rows(FailureKind.HANG, _SETUP + " (loading a checkpoint)", "Megatron-LM checkpointing.py load_checkpoint; NeMo "
           "dist-checkpoint loading",
           ("checkpoint", " loading checkpoint from /ckpt/gpt-175b at iteration 4000",
            r"(?i)^(?![^\n]*(?:warn|\bif\b|please|\bnot?\b|skip|without))[^\n]*\bload(?:ing)?\b[^\n]{0,40}"
            r"\bcheckpoint\b"))
    + rows(FailureKind.HANG, _SETUP + " (building the training data's index mappings)",
           "Megatron-LM / GPT-NeoX megatron/data (gpt_dataset.py _build_index_mappings, blendable_dataset.py: "
           "'> building indices for blendable datasets ...', '> elapsed time for building blendable dataset "
           "indices', '> loading doc-idx mapping from ...'); megatron/core/datasets",
           ("dataset", "> RANK 1 elapsed time for building blendable dataset indices: 0.07 (sec)",
            r"(?i)\b(?:build(?:ing)?|load(?:ing)?)\b[^\n]{0,60}\b(?:datasets?|ind(?:ex|ices)|mappings?)\b"),
           ("mapping", "> loading doc-idx mapping from /data/pile_train_indexmap_1000ns_2048sl_1234s_doc_idx.npy",
            r"(?i)\bload(?:ing)?\b[^\n]{0,40}\bmapping\b"))
    + rows(FailureKind.HANG, _SETUP + " (building or loading a JIT extension)",
           "torch/utils/cpp_extension.py (_jit_compile: 'Building extension module', 'Loading extension module')",
           ("extension module", "Loading extension module fused_adam...",
            r"(?:Building|Loading) extension module \S{1,100}$"),
           # DeepSpeed op_builder/builder.py jit_load's timing line: the op is loaded; the next start-up step
           # (engine set-up, the first batch) prints its own line when it is done
           ("Time to load ", "Time to load fused_adam op: 0.51 seconds",
            r"^\s{0,8}Time to load \w{1,60} op: [\d.]{1,20} seconds\s{0,4}$"),
           ("Emitting ninja build file", "Emitting ninja build file /root/.cache/torch_extensions/py310_cu121/"
                                         "fused_adam/build.ninja..."))
    # DeepSpeed's engine set-up records (deepspeed/runtime/engine.py DeepSpeedEngine.__init__ and its _configure_*
    # steps): the engine is still being built; the first step's record follows when it is done.
    + rows(FailureKind.HANG, _SETUP + " (building the DeepSpeed engine)",
           "deepspeed/runtime/engine.py (DeepSpeedEngine.__init__, _configure_optimizer, _configure_zero_optimizer)",
           ("[engine.py:", "[2024-01-01 10:00:00,001] [INFO] [engine.py:1000:_configure_optimizer] Using DeepSpeed "
                           "Optimizer param name adamw as basic optimizer",
            r"\[engine\.py:\d{1,6}:(?:_configure_\w{1,60}|__init__)\]"),
           # the engine's configuration dump (runtime/config.py DeepSpeedConfig.print) that __init__ prints
           ("[config.py:", "[2024-01-01 10:00:00,001] [INFO] [config.py:1000:print] DeepSpeedEngine configuration:",
            r"\[config\.py:\d{1,6}:print\]"))
    # The start-up banners and dumps every framework prints once before its first step: Megatron-LM's arguments
    # dump ("  tensor_model_parallel_size ...... 8", "---- end of arguments ----") and its "> compiling/building/
    # setting ..." start-up steps (megatron/training/initialize.py, training.py); DeepSpeed's configuration dump
    # ("  zero_optimization_stage ...... 3"); HF Trainer's "***** Running training *****" header and its
    # "  Num examples = N" lines (trainer.py _inner_training_loop); Lightning's accelerator and model summaries
    # ("GPU available: True", "LOCAL_RANK: 0 - CUDA_VISIBLE_DEVICES: [0,1]", "Total estimated model params size
    # (MB)"). As a log's last activity (no step, no error, no end after it), the job never reached its first step.
    + rows(FailureKind.HANG, _SETUP + " (start-up banners and dumps before the first step)",
           "Megatron-LM arguments.py _print_args and initialize.py; DeepSpeed runtime/config.py print; transformers "
           "trainer.py _inner_training_loop; Lightning trainer/connectors and utilities/model_summary",
           (" ...", "  tensor_model_parallel_size ...................... 8",
            r"^\s{0,8}[\w.-]{2,80} \.{3,}\s{0,4}\S"),
           ("end of arguments", "-------------------- end of arguments ---------------------"),
           ("> ", "> compiling dataset index builder ...",
            r"^\s{0,8}> (?:compiling|building|setting|initializ|loading|finished|learning rate|done with setup)"),
           # the same start-up step without Megatron's "> " (a job script's or fork's own echo: "compiling fused
           # kernels ...", "building GPT model ..."): the trailing dots say the step is under way
           ("ing ", "compiling fused kernels ...",
            r"^\s{0,8}(?:compiling|building|initializing|loading)\b[^\n]{1,80}\.{3}\s{0,4}$"),
           # Megatron-LM arguments.py validate_args: "using world size: 1, data-parallel-size: 1, ..." and
           # "using torch.float16 for parameters ..." (rank 0, before the arguments dump)
           ("using ", "using torch.float16 for parameters ...",
            r"^\s{0,8}using (?:torch\.\w{1,20} for parameters \.{3}|world size: \d{1,7}, data-parallel[- ]size: )"),
           ("***** Running training", "***** Running training *****"),
           (" = ", "  Total optimization steps = 1,000",
            r"^\s{0,8}(?:Num examples|Num Epochs|Instantaneous batch size per device|Total train batch size[^=\n]{0,60}"
            r"|Gradient Accumulation steps|Total optimization steps|Number of trainable parameters)\s{0,4}= \S"),
           ("available: ", "GPU available: True (cuda), used: True",
            r"(?:^\s{0,8}|\] )(?:GPU|TPU|HPU|IPU) available: (?:True|False)"),
           ("CUDA_VISIBLE_DEVICES: ", "LOCAL_RANK: 0 - CUDA_VISIBLE_DEVICES: [0,1]",
            r"LOCAL_RANK: \d{1,5} - CUDA_VISIBLE_DEVICES: "),
           ("params size (MB)", "1,751.384 Total estimated model params size (MB)"))
    # The configuration echo a trainer prints once while it builds its config, before data, model and the first step:
    # MMF's mmf/utils/configuration.py ("Overriding option model to visual_bert"), argparse's Namespace(...) dump, and
    # DeepSpeed's pipeline topology (deepspeed/runtime/pipe/module.py PipelineModule.__init__ prints "Using topology:
    # {ProcessCoord(pipe=0, data=0, model=0): 0, ...}" on rank 0, then builds the stages and the engine).
    + rows(FailureKind.HANG, _SETUP + " (the configuration echo before the first step)",
           "MMF mmf/utils/configuration.py; Python argparse Namespace repr; DeepSpeed runtime/pipe/module.py",
           ("verrid", "mmf.utils.configuration: Overriding option datasets to masked_object",
            r"(?i)\boverrid(?:e|es|ing)\s{1,3}(?:option|config(?:uration)?|key|param(?:eter)?|setting|argument)s?"
            r"\s{1,3}\S{1,200}\s{1,3}(?:to|with|=|->)\s"),
           ("Namespace(", "Namespace(batch_size=8, lr=0.0001, model='gpt2')", r"^\s{0,8}Namespace\(\w{1,60}="),
           ("Using topology: {ProcessCoord(", "Using topology: {ProcessCoord(pipe=0, data=0, model=0): 0, "
                                              "ProcessCoord(pipe=1, data=0, model=0): 1}"))
)

# DeepSpeed's pipeline partitioning (deepspeed/runtime/pipe/module.py PipelineModule._partition_layers) prints, on
# rank 0, "Partitioning pipeline stages with method type:transformer", then per stage "stage=0 layers=31" and one
# line per layer "    {idx:2d}: {name}" ("     3: ParallelTransformerLayerPipe", "    27: <lambda>") and
# "  loss: {name}"; the engine is built next. A log that ends in this listing ends in the partitioning phase
# (Megatron-DeepSpeed#116: stuck after it, DP=4). LISTING_ITEM: the listing's lines, skipped to find the phase.
SETUP_PHASES = SETUP_PHASES + rows(
    FailureKind.HANG, _SETUP + " (partitioning the pipeline stages)", "DeepSpeed runtime/pipe/module.py "
                                                                      "_partition_layers",
    ("Partitioning pipeline stages", "[INFO] [module.py:372:_partition_layers] Partitioning pipeline stages with "
                                     "method type:transformer"),
    ("layers=", "stage=0 layers=31", r"^\s{0,8}stage=\d{1,5} layers=\d{1,6}\s{0,4}$"))
LISTING_ITEM = re.compile(r"^\s{0,12}(?:\d{1,5}: [\w<>.]{1,120}|loss: [\w<>.]{1,120})\s{0,4}$")

# A Python warning (warnings.showwarning: "path.py:252: UserWarning: message", then the source line or the
# message's own continuation lines) is printed and the job goes on: where a log ends in one, the phase it was in is
# the activity before it. WARNING_TAIL_LINES: the warning line and its continuation lines.
PY_WARNING = re.compile(r"^\s{0,8}\S{1,400}\.py:\d{1,7}: \w{0,60}Warning: ")
WARNING_TAIL_LINES = 3

# Lines that show the job (or its cluster) alive without saying anything about its progress.
LIVENESS = re.compile(r'PULSE: |"GET /[^"\n]{0,200}" \d{3}|\[repeated \d{1,9}x across cluster\]|(?i:heartbeat)')
# Chatter (judge44a): lines that libraries print around a run's own lines in a fixed format of their own and that
# say nothing about how far the run got. NCCL_DEBUG=INFO's "host:pid:tid [cudaDev] NCCL INFO " (src/debug.cc's
# ncclDebugLog) and the "NCCL version 2.18.5+cuda12.2" banner (src/init.cc); warnings.showwarning's
# "file.py:N: XWarning: message" (warnings.py's formatwarning; its source line is indented under it); c10's glog
# prefixes "[W reducer.cpp:1346] " / "[I ProcessGroupNCCL.cpp:686] " (c10/util/Logging.cpp) and glog's
# "W1127 10:00:00.123000 140234 file.py:715] " (torch._logging's glog-style format); W&B's terminal lines, each
# prefixed "wandb: " (wandb/errors/term.py's termlog), its ERROR lines left out; error levels (glog's E, "[E ...]")
# are not chatter. Where a window of the log's last lines is counted, or the line above a record is read, these take
# no place: a few inserted lines must not push the run's own last record out of the window. They keep their meaning
# where they are the log's last words (NCCL set-up ending a log is a wait).
CHATTER = re.compile(r"^\S{1,120}:\d{1,9}:\d{1,9} \[\d{1,4}\] NCCL INFO |^NCCL version \d+\.\d+\.\d+\S*$"
                     r"|^\S{1,400}\.py:\d{1,7}: \w{0,60}Warning: |^\[[IW] [\w./-]{1,80}:\d{1,7}\] "
                     r"|^[IW]\d{4} \d\d:\d\d:\d\d\.\d{1,9} {1,4}\d{1,9} [\w./-]{1,200}:\d{1,7}\] |^wandb: (?!ERROR)")


def is_chatter(line: str) -> bool:
    """Is `line` (stripped of launcher prefixes) one of CHATTER's library lines?"""
    return CHATTER.search(line) is not None


# Warnings: printed and the job goes on, so they say nothing of its progress either. A log whose tail after its last
# activity is warnings (and liveness lines) whose timestamps run more than STALLED_SPAN_S past that activity's made
# no progress for that long (NeMo's "[NeMo W 2023-11-25 21:45:41 nemo_logging:349] ... PossibleUserWarning" after an
# epoch's checkpoint, the next epoch never starting: NVIDIA-NeMo/Speech#7938 is that shape, but its excerpt is the
# one warning line, no time passes in it, and it stays unknown: a short log is not a hang). Logger levels: NeMo's
# "[NeMo W ", glog's "W1125 21:45:41.123", torch c10's "[W socket.cpp:663]", Python logging's WARNING/WARN, and
# warnings.showwarning's "file.py:N: XWarning:".
WARNING_LINE = re.compile(r"\[NeMo W |(?:^|\s)W\d{4} \d\d:\d\d:\d\d|\[W [\w./-]{1,80}:\d|\bWARN(?:ING)?\b"
                          r"|\w{0,60}Warning: ")

# The user's interrupt: Python's exception for Ctrl-C, torch elastic's forwarded SIGINT, and the terminal's echo
# "^C" where a terminal prints it: at the start of a line, alone or before what the program printed next.
INTERRUPT = ("KeyboardInterrupt", "Received 2 death signal", "Received Signals.SIGINT death signal")
CTRL_C = "^C"
# The echo runs into what the program printed next when that is a traceback or a bracketed log record (DeepSpeed's
# launcher: `^C[2024-05-26 15:06:40,046] [INFO] [launch.py:315:sigkill_handler] Killing subprocess 22523`).
CTRL_C_ECHO = re.compile(r"[ \t]{0,8}\^C(?:[ \t]*$|Traceback\b|\[)", re.MULTILINE)
MAX_CTRL_C_HITS = 200  # "^C" occurrences tested for the echo's shape (binary junk holds many)

# A stack dump taken from a live process (py-spy dump, faulthandler): families.dumps.
