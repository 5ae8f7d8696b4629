"""oom on the host: the node's memory ran out and the kernel (or the orchestrator on its behalf) killed a rank.
Device (GPU) memory and SLURM's own OOM verdicts are in analysis.logs.patterns (DEVICE_OOM, HOST_OOM).

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
A bare SIGKILL (a launcher's "exits with return code = -9", exit code 137, the shell's "Killed") is NOT taken
for a host OOM here: the OOM killer is its usual sender, but launchers also SIGKILL the surviving ranks after one
failed, and users and schedulers kill -9 too; it stays `crashed`, with "(the host OOM killer?)" in the reason.
"""

from __future__ import annotations

from analysis.logs.families import rows
from launcher.core.kinds import FailureKind

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
