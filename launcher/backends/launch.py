"""The per-node launch text every backend shares: where this node sits in the job, then `exec` the launcher.

A trial's script runs ONCE PER NODE: under `srun --ntasks-per-node=1` on SLURM, directly on the local executor.
It works out MASTER_ADDR / NODE_RANK / NNODES / MASTER_PORT (`node_preamble`), optionally clears a stale Megatron
fused-kernel build lock, exports the trial's environment, builds the per-node launcher as a bash array
(`torchrun_launcher` or `deepspeed_launcher`) and finally `exec`s it with the training program (`exec_program`).
Every configured value passes through `shlex.quote`, so a value like `; rm -rf ~` or `$(...)` reaches the program
as literal text. Pure functions: text in, text out.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from dataclasses import dataclass

from launcher.core.errors import ConfigError
from launcher.core.layout import Layout

# MASTER_PORT = base + SLURM_JOB_ID % span: every node of a job computes the same port without talking to the
# others, and two jobs sharing a node (non-exclusive partitions) almost never pick the same one.
MASTER_PORT_BASE = 20000
MASTER_PORT_SPAN = 20000

# A live fused-kernel build holds its lock for one extension's compile (1-3 minutes); a lock older than this was
# left by a killed run. See stale_lock_cleanup for why a fresh lock is left alone.
STALE_LOCK_AGE_MIN = 5

FREE_PORT_PY = 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
"""Asks the kernel for a free port (bind to port 0); DeepSpeed's runner has no --standalone like torchrun's."""


@dataclass(frozen=True)
class LaunchSpec:
    """Everything the lead needs to run one trial; it writes `files` into the trial folder before submission."""

    script: str
    """Bash text run once per node (under srun on SLURM, directly on the local executor)."""
    files: dict[str, str]
    """File name (relative to the trial folder) -> content, e.g. {"ds_config.json": ...}."""
    env: dict[str, str]
    """Extra environment for the job (the script exports it too, so it also runs on its own)."""
    program_argv: list[str]
    """The training program and its arguments, interpreter first (for display, export and golden tests)."""
    nproc_per_node: int
    """Processes (ranks) the launcher starts on each node."""
    nnodes: int = 1
    """Nodes the trial spans (the script refuses to start in a job of another size)."""


def quote(value: object) -> str:
    return shlex.quote(str(value))


def node_preamble(expected_nodes: int) -> str:
    """Shell lines that set MASTER_ADDR, MASTER_PORT, NODE_RANK, NNODES and UNDER_SLURM on every node.

    Under SLURM (one task per node): the rendezvous host is the first host of the allocation, the node rank is the
    task rank. Alone: a single node. The job must have exactly `expected_nodes` nodes; a mismatch would otherwise
    hang at the rendezvous until the time limit, so it fails at once with a message.
    """
    return f"""\
# Where this node sits in the job. Under SLURM the script runs as one task per node (srun --ntasks-per-node=1).
EXPECTED_NNODES={expected_nodes}
# SUBMITIT_EXECUTOR=local: a local trial started from inside an allocation must not take its SLURM_* variables.
if [[ -n "${{SLURM_JOB_NODELIST:-}}" && "${{SUBMITIT_EXECUTOR:-}}" != local ]]; then
  UNDER_SLURM=1
  # sed (not head) reads all of scontrol's output, so pipefail never sees a SIGPIPE.
  MASTER_ADDR="$(scontrol show hostnames "$SLURM_JOB_NODELIST" | sed -n 1p)"
  NODE_RANK="${{SLURM_PROCID:?run one task per node under srun (SLURM_PROCID is unset)}}"
  NNODES="${{SLURM_NNODES:?SLURM_NNODES is unset}}"
  JOB_ID="${{SLURM_JOB_ID:?SLURM_JOB_ID is unset}}"
  # Same port on every node of the job, {MASTER_PORT_BASE}-{MASTER_PORT_BASE + MASTER_PORT_SPAN - 1}, unless set.
  MASTER_PORT="${{MASTER_PORT:-$(( {MASTER_PORT_BASE} + JOB_ID % {MASTER_PORT_SPAN} ))}}"
else
  UNDER_SLURM=0
  MASTER_ADDR=127.0.0.1
  NODE_RANK=0
  NNODES=1
fi
if [[ "$NNODES" -ne "$EXPECTED_NNODES" ]]; then
  echo "parasweep: this trial needs $EXPECTED_NNODES node(s) but runs on $NNODES" >&2
  exit 2
fi
export MASTER_ADDR NODE_RANK NNODES
"""


def stale_lock_cleanup(megatron_path: str) -> str:
    """Shell lines that remove a stale Megatron fused-kernel build lock.

    A run killed while compiling leaves megatron/fused_kernels/build/lock behind, and every later run then waits
    forever at "compiling and loading fused kernels" (fixtures fused_kernel_hang_1.log and
    fused_kernel_compile_hang_2.log; the fix quoted there is `rm megatron/fused_kernels/build/lock`). Trials of a
    sweep share one checkout and start together, so a FRESH lock may belong to another trial's live build:
    removing it would start a second build in the same folder. Only a lock older than STALE_LOCK_AGE_MIN goes; a
    trial blocked by a younger stale lock is caught by the hang monitor and its retry finds the lock old enough.
    """
    return f"""\
# Remove a stale fused-kernel build lock (a killed build's lock hangs every later run at "compiling and loading
# fused kernels"); a lock younger than {STALE_LOCK_AGE_MIN} min may be another trial's live build and is kept.
MEGATRON_PATH={quote(megatron_path)}
FUSED_KERNEL_LOCK="$MEGATRON_PATH/megatron/fused_kernels/build/lock"
if [[ -n "$(find "$FUSED_KERNEL_LOCK" -maxdepth 0 -mmin +{STALE_LOCK_AGE_MIN} 2>/dev/null)" ]]; then
  rm -f "$MEGATRON_PATH/megatron/fused_kernels/build/lock"
fi
"""


def env_exports(env: dict[str, str]) -> str:
    if not env:
        return ""
    for name in env:  # a name is written as is (`export NAME=...`): it must be one, not shell code
        if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", str(name)):
            raise ConfigError(f"executor.env[{name!r}]", name, "use an environment variable name (letters, digits, "
                              "'_'; not starting with a digit)")
    lines = [f"export {name}={quote(value)}" for name, value in sorted(env.items())]
    return "\n".join(lines) + "\n"


def torchrun_launcher(python: str, nproc_per_node: int) -> str:
    """The torchrun launcher as the bash array LAUNCHER (flags of torch.distributed.run, torch 2.x)."""
    return f"""\
# Per-node launcher: torchrun. Under SLURM all nodes join one c10d rendezvous on the first node; alone,
# --standalone lets torchrun pick a free port, so concurrent local trials never collide.
LAUNCHER=({quote(python)} -m torch.distributed.run --nproc-per-node {nproc_per_node})
if [[ "$UNDER_SLURM" == 1 ]]; then
  LAUNCHER+=(--nnodes "$NNODES" --node-rank "$NODE_RANK" --rdzv-backend c10d \\
    --rdzv-endpoint "$MASTER_ADDR:$MASTER_PORT" --rdzv-id "$JOB_ID")
else
  LAUNCHER+=(--standalone --nnodes 1)
fi
"""


def deepspeed_launcher(python: str, nproc_per_node: int, trial_dir: str) -> str:
    """DeepSpeed's runner as the bash array LAUNCHER, started on every node on its own.

    deepspeed/launcher/runner.py (deepspeedai/DeepSpeed, --no_ssh added by PR #5728, July 2024; docs: "Launching
    without passwordless SSH"): with --no_ssh each node runs only its local launcher and --node_rank selects its
    slice of the world, which the runner reads from a hostfile ("host slots=N" lines) - so the hostfile must list
    every node of the job (without one the runner knows only localhost and refuses --num_nodes > 1).
    `--launcher slurm` is the other documented mechanism, but it runs srun itself from ONE process, while this
    script already runs once per node. --no_local_rank: ranks read LOCAL_RANK from the environment (newer
    Megatron-LM only accepts --local-rank, which the runner's --local_rank=N would not match).
    """
    hostfile = posixpath.join(trial_dir, "ds_hostfile.node")
    return f"""\
# Per-node launcher: DeepSpeed's runner with --no_ssh --node_rank on every node (DeepSpeed from mid-2024, PR #5728);
# the runner takes the node list from a hostfile, written here from the SLURM allocation.
LAUNCHER=({quote(python)} -u -m deepspeed.launcher.runner --num_gpus {nproc_per_node} --no_local_rank)
if [[ "$UNDER_SLURM" == 1 ]]; then
  DS_HOSTFILE={quote(hostfile)}"$NODE_RANK"
  scontrol show hostnames "$SLURM_JOB_NODELIST" | sed 's/$/ slots={nproc_per_node}/' > "$DS_HOSTFILE"
  LAUNCHER+=(--hostfile "$DS_HOSTFILE" --num_nodes "$NNODES" --no_ssh --node_rank "$NODE_RANK" \\
    --master_addr "$MASTER_ADDR" --master_port "$MASTER_PORT")
else
  # Alone: a free port, so that concurrent local trials never collide on DeepSpeed's default 29500.
  MASTER_PORT="${{MASTER_PORT:-$({quote(python)} -c {quote(FREE_PORT_PY)})}}"
  LAUNCHER+=(--master_port "$MASTER_PORT")
fi
"""


def exec_program(target: list[str], launcher: str) -> str:
    """`exec "${LAUNCHER[@]}"` followed by the program, one flag (and its values) per line.

    `target` is the program without its interpreter: ["-m", "module", args...] or ["script.py", args...]. The
    DeepSpeed runner spells torchrun's `-m` as `--module`.
    """
    if launcher == "deepspeed" and target[:1] == ["-m"]:
        target = ["--module", *target[1:]]
    lines: list[list[str]] = []
    for token in target:
        starts_flag = token.startswith("-") and not _is_number(token)
        if not lines or starts_flag or (lines[-1][0] in ("-m", "--module") and len(lines[-1]) == 2):
            lines.append([])
        lines[-1].append(quote(token))
    body = " \\\n".join("  " + " ".join(line) for line in lines)
    return 'exec "${LAUNCHER[@]}" \\\n' + body + "\n"


def _comment(text: str) -> str:
    """Text for a `#` comment: a newline in a config value must not end the comment and start a command."""
    return " ".join(text.splitlines())


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


def render_script(*, title: str, layout: Layout, python: str, launcher: str, target: list[str],
                  env: dict[str, str], trial_dir: str, megatron_path: str = "") -> str:
    """The whole per-node script: header, preamble, lock cleanup, environment, launcher, exec."""
    if launcher not in ("torchrun", "deepspeed"):
        raise ConfigError("backend.launcher", launcher, "use 'torchrun' or 'deepspeed'")
    header = (f"#!/usr/bin/env bash\n# parasweep trial: {_comment(title)}; layout {layout.label()}\n"
              f"# trial folder: {_comment(trial_dir)}\n# Runs once per node.\nset -euo pipefail\n")
    parts = [header, node_preamble(layout.nodes)]
    if megatron_path:
        parts.append(stale_lock_cleanup(megatron_path))
    parts.append(env_exports(env))
    if launcher == "torchrun":
        parts.append(torchrun_launcher(python, layout.gpus_per_node))
    else:
        parts.append(deepspeed_launcher(python, layout.gpus_per_node, trial_dir))
    parts.append(exec_program(target, launcher))
    return "\n".join(part for part in parts if part)


def one_line_command(spec: LaunchSpec) -> str:
    """A one-line torchrun command for the trial (best.json / export).

    One node: `torchrun --standalone`. Several nodes: the same command on every node, with NODE_RANK,
    MASTER_ADDR and MASTER_PORT set by the user (the trial's script does this itself under srun).
    """
    python, *target = spec.program_argv
    cmd = [python, "-m", "torch.distributed.run"]
    if spec.nnodes == 1:
        cmd += ["--standalone", "--nnodes", "1", "--nproc-per-node", str(spec.nproc_per_node)]
        rendezvous = ""
    else:
        cmd += ["--nnodes", str(spec.nnodes), "--nproc-per-node", str(spec.nproc_per_node)]
        rendezvous = ('--node-rank "$NODE_RANK" --rdzv-backend c10d '
                      '--rdzv-endpoint "$MASTER_ADDR:$MASTER_PORT" ')
    env = " ".join(f"{name}={quote(value)}" for name, value in sorted(spec.env.items()))
    head = shlex.join(cmd)
    return " ".join(part for part in (env, head, rendezvous.strip(), shlex.join(target)) if part)
