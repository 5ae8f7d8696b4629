"""Orchestrator events in the words of schedulers other than SLURM (whose verdicts are in
analysis.logs.patterns): a node lost, a preemption or eviction, a deadline, an outside termination.

Sources:
- torch.distributed.elastic rendezvous/dynamic_rendezvous.py (_keep_alive): "The node '%s' has failed to send a
  keep-alive heartbeat to the rendezvous '%s' due to an error of type %s.": the agent can no longer reach the
  rendezvous store, which lives on another node (the c10d backend's store host, usually node 0): that node is gone.
- Ray ActorDiedError (python/ray/exceptions.py, from the GCS death cause): "The actor is dead because its node has
  died." / "The actor died because its node has died." (checked after preemption and outside stops, whose
  qualifier lines say why the node went away when it was not a failure).
- torchrun / torch.distributed.elastic: agent/server/api.py logs "Received %s death signal, shutting down
  workers" when the agent itself gets SIGTERM/SIGINT/SIGHUP/SIGQUIT from outside, and raises
  multiprocessing.api.SignalException("Process %d got signal: %s"): the job was stopped from outside (a scancel,
  a pod deletion, a user) -> cancelled, unless a preemption or time-limit line says why, or (a log alone) the
  signal is the user's SIGINT and the line before it is not a step (families.stall: interrupted while stalled).
- Ray: gcs (gcs_actor_manager.cc) "The actor died because its node has died." with "the actor's node was
  preempted" / "was terminated unexpectedly" / "was terminated expectedly"; NodeDiedError "The node with node id
  ... has been marked dead because the detector has missed too many heartbeats from it"; the raylet's
  "health check failed due to missing too many heartbeats".
- Kubernetes: kubelet graceful node shutdown (nodeshutdown_manager: reason Terminated, "Pod was terminated in
  response to imminent node shutdown."), scheduler preemption (event "Preempted by ... on node ...", DisruptionTarget
  reason PreemptionByScheduler / PreemptionByKubeScheduler), kubelet critical-pod preemption ("Preempted in order
  to admit critical pod"), node-pressure and API evictions (reason Evicted, DisruptionTarget EvictionByEvictionAPI),
  NoExecute taint eviction of pods on an unreachable node (DeletionByTaintManager), the node controller's NodeLost
  ("... is unresponsive"), activeDeadlineSeconds (reason DeadlineExceeded, "Pod was active on the node longer than
  the specified deadline"; a Job's "Job was active longer than specified deadline"); a container that cannot start
  (ImagePullBackOff, ErrImagePull, InvalidImageName, CreateContainerConfigError, CreateContainerError: configuration)
  or keeps exiting (CrashLoopBackOff, "Back-off restarting failed container": a crash).
- Cloud spot/preemptible capacity: AWS "EC2 Spot Instance Interruption Warning" / "Spot Instance interruption
  notice" (two-minute warning), GCP Compute Engine preemption ("Instance was preempted",
  compute.instances.preempted), Azure Scheduled Events EventType "Preempt"; and the shape of any agent's notice:
  spot/preemptible/termination/interruption ... notice/imminent/warning.
- IBM Spectrum LSF job exit reasons (lsb.acct / bjobs -l "TERM_*"): TERM_RUNLIMIT (run time limit),
  TERM_PREEMPT (preempted), TERM_OWNER / TERM_ADMIN (killed by the owner or an administrator), TERM_REQUEUE_OWNER
  / TERM_REQUEUE_ADMIN (requeued); TERM_MEMLIMIT is an oom (families.memory). PBS/Torque's "=>> PBS: job killed:
  walltime N exceeded limit N".
- DeepSpeed's launcher (deepspeed/launcher/launch.py, sigkill_handler; read at 32c6645218a3): it logs "Killing
  subprocess <pid>" for every rank in two cases only: a rank exited with a non-zero code (then, after the kills,
  "<cmd> exits with return code = <code>", the rank's own code: -9 is a SIGKILL the launcher did not send, the host
  OOM killer's or a user's), or the launcher itself got SIGINT/SIGTERM (then "Main process received SIGTERM,
  exiting": stopped from outside, OUTSIDE_STOP). Rule (judge10a): kills with neither line after them (a log or an
  excerpt that stops there) are a crash: a rank failed or the launcher was stopped, and nothing says why. Not an
  oom, even after a checkpoint or optimizer-state load (DeepSpeed#3938, batch 10, labelled oom by its thread; the
  same shape in ChatGLM-Finetuning#102, batch 9, labelled crashed): the launcher's kills name no cause (unlike a
  rank's own -9 reported after them, judge56's host OOM in analysis.logs.classify); the reason says "(the host OOM
  killer?)".
- slurmctld's "Nodes n7 not responding, setting DOWN" (the node stopped answering the controller).
- The shape of any scheduler's or cloud's preemption notice: a job, instance, node, VM, pod or worker that "was
  (being/got) preempted"; not a word such as "non-preemptible".
"""

from __future__ import annotations

from analysis.logs.families import rows
from launcher.core.kinds import FailureKind

_TORCHRUN = "torch.distributed.elastic (agent/server/api.py, multiprocessing/api.py)"
_DS_LAUNCHER = "DeepSpeed deepspeed/launcher/launch.py (sigkill_handler)"
_RAY = "Ray (gcs_actor_manager.cc, NodeDiedError, raylet health check)"
_K8S = "Kubernetes (kubelet, kube-scheduler, node lifecycle controller, Job controller)"
_CLOUD = "AWS EC2 Spot interruption notices, GCP preemption, Azure Scheduled Events"

NODE_LOST = (
    rows(FailureKind.NODE_FAILURE, "node failure", _RAY,
         ("has been marked dead because the detector has missed too many heartbeats",
          "The node with node id: 9f2c and address: 10.0.3.7 and node name: 10.0.3.7 has been marked dead because "
          "the detector has missed too many heartbeats from it."),
         ("health check failed due to missing too many heartbeats",
          "the actor's node was terminated unexpectedly: health check failed due to missing too many heartbeats"),
         ("node was terminated unexpectedly", "\tthe actor's node was terminated unexpectedly: raylet crashed"))
    + rows(FailureKind.NODE_FAILURE, "node failure", _K8S,
           ("DeletionByTaintManager", "Conditions: DisruptionTarget True DeletionByTaintManager Taint manager: "
                                      "deleting due to NoExecute taint `node.kubernetes.io/unreachable`"),
           ("NodeLost", "Status: Unknown  Reason: NodeLost  Message: Node gpu-node-4 which was running pod "
                        "trainer-worker-3 is unresponsive"))
    + rows(FailureKind.NODE_FAILURE, "node failure (the rendezvous store's node is unreachable)",
           "torch.distributed.elastic rendezvous/dynamic_rendezvous.py",
           ("has failed to send a keep-alive heartbeat to the rendezvous",
            "WARNING:torch.distributed.elastic.rendezvous.dynamic_rendezvous:The node 'gpu-7_4411_0' has failed to "
            "send a keep-alive heartbeat to the rendezvous 'job42' due to an error of type RendezvousTimeoutError.")))
NODE_LOST = NODE_LOST + rows(
    FailureKind.NODE_FAILURE, "node failure", "slurmctld (node_mgr.c)",
    ("not responding, setting DOWN", "slurmctld: error: Nodes gpu-node-7 not responding, setting DOWN"))
# judge16: a cluster's own automatic replacement of a failed node, which ends or interrupts the step it ran.
# SageMaker HyperPod's auto-resume (its Slurm plugin, `srun --auto-resume=1`; the HyperPod guide's "auto-resume"
# section) prints "[Auto Resume] Info: JobID: N StepID: M ..." records: after the cluster agent's health diagnosis,
# "Job failed - replacing nodes" / "Job failed - Droping unhealthy nodes" (its spelling) before the step is requeued
# on healthy nodes. slurmctld (job_mgr.c) logs "requeue job JobId=N due to failure of node X" when a node goes down
# under a requeueable job. Kubernetes' node lifecycle controller taints a node that stops reporting with
# node.kubernetes.io/not-ready:NoExecute and the taint manager evicts its pods (event reason NodeNotReady, "Node is
# not ready"). Not a health check that passed (ResumeAction without a failed node), nor a pod merely scheduled around
# a NotReady node ("0/4 nodes are available: 1 node(s) had untolerated taint {node.kubernetes.io/not-ready: }": a
# pending pod, the scheduler's wording, no taint effect).
NODE_LOST = NODE_LOST + rows(
    FailureKind.NODE_FAILURE, "node failure (the cluster replaced it)",
    "SageMaker HyperPod auto-resume (Slurm plugin), slurmctld job_mgr.c, Kubernetes node lifecycle controller",
    ("[Auto Resume]", "[Auto Resume] Info: JobID: 7 StepID: 0 Job failed - replacing nodes",
     r"\[Auto Resume\][^\n]{0,200}?(?:replacing nodes|unhealthy nodes?|faulty nodes?|node (?:failure|replacement))"),
    ("due to failure of node", "slurmctld: requeue job JobId=412 due to failure of node gpu-node-7",
     r"(?i)requeu\w{0,4} (?:job\b[^\n]{0,40}?)?due to failure of node"),
    ("node.kubernetes.io/not-ready", "Warning  TaintManagerEviction  pod/trainer-1  Marking for deletion Pod "
                                     "default/trainer-1 (taint node.kubernetes.io/not-ready:NoExecute)",
     r"node\.kubernetes\.io/not-ready:NoExecute"),
    ("NodeNotReady", "Warning  NodeNotReady  pod/trainer-1  Node is not ready", r"\bNodeNotReady\b[^\n]{0,40}"
                                                                               r"Node is not ready"))
# judge28: containerd's CRI cannot get the node's own pause image when the kubelet asks it for a pod sandbox
# (containerd internal/cri/server/sandbox_run.go: fmt.Errorf("failed to get sandbox image %q: %w",
# c.config.SandboxImage, err), inside the kubelet's FailedCreatePodSandBox event "Failed to create pod sandbox: rpc
# error: ..."). The sandbox image is the node's runtime configuration, not the job's: no pod can start on that node,
# a node fault like NodeNotReady. Only this cause: a sandbox that fails on the CNI ("failed to setup network for
# sandbox": IP exhaustion is the cluster's) or on a runtime class the pod names (the job's) is left out.
NODE_LOST = NODE_LOST + rows(
    FailureKind.NODE_FAILURE, "node failure (its container runtime cannot start a pod sandbox)",
    "containerd CRI sandbox_run.go under the kubelet's FailedCreatePodSandBox event",
    ("sandbox image", "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to start sandbox "
                      "\"3f1e\": failed to get sandbox image \"registry.k8s.io/pause:3.9\": failed to pull image",
     r"\bfailed to get sandbox image\b"))
# The actor's node died, with no qualifier that makes it a preemption or an expected stop (checked after those).
NODE_DIED = rows(FailureKind.NODE_FAILURE, "node failure", _RAY,
                 ("NodeDiedError", "ray.exceptions.NodeDiedError: Task failed due to the node (node ID: 5c1e) "
                                   "dying."),
                 ("because its node has died", "ray.exceptions.ActorDiedError: The actor died unexpectedly before "
                                               "finishing this task. The actor is dead because its node has died. "
                                               "Node Id: 5c1e"))
PREEMPTION = (
    rows(FailureKind.PREEMPTED, "preempted", _RAY,
         ("node was preempted", "\tthe actor's node was preempted: spot instance reclaimed"))
    + rows(FailureKind.PREEMPTED, "preempted", _K8S,
           ("imminent node shutdown", "Reason: Terminated  Message: Pod was terminated in response to imminent node "
                                      "shutdown."),
           ("PreemptionByScheduler", "Conditions: DisruptionTarget True PreemptionByScheduler"),
           ("PreemptionByKubeScheduler", "DisruptionTarget True PreemptionByKubeScheduler: Kube-scheduler: preempting "
                                         "to accommodate a higher priority pod"),
           ("Preempted by", "Warning  Preempted  pod/trainer-0  Preempted by pod 7e1f0c on node gpu-node-2"),
           ("Preempted in order to admit critical pod", "Message: Preempted in order to admit critical pod"),
           # the pod's status (Reason: Evicted / "status": "Evicted") or an eviction message about a pod or node,
           # not any log line that says "Evicted" (caches evict too)
           ("Evicted", "Status: Failed  Reason: Evicted  Message: The node was low on resource: ephemeral-storage.",
            r"(?:[Rr]eason|[Ss]tatus|[Pp]hase)[\"':=\s]{1,6}Evicted\b|Evicted[^\n]{0,80}(?:\b[Pp]od\b|\b[Nn]ode\b|"
            r"low on resource)"),
           ("EvictionByEvictionAPI", "DisruptionTarget True EvictionByEvictionAPI: Eviction API: evicting"))
    + rows(FailureKind.PREEMPTED, "preempted", _CLOUD,
           ("Spot Instance Interruption", "EC2 Spot Instance Interruption Warning for instance i-0abc1234 "
                                          "(action: terminate)"),
           ("Spot Instance interruption", "Received a Spot Instance interruption notice: instance-action terminate"),
           ("Instance was preempted", "gce: Instance was preempted: compute.instances.preempted"),
           ("compute.instances.preempted", "operationType: compute.instances.preempted"),
           ('"EventType": "Preempt"', 'Scheduled event {"EventType": "Preempt", "ResourceType": "VirtualMachine"}'),
           ("termination", "worker-agent: cloud metadata reports that VM termination is imminent, shutting down",
            r"(?i)(?:spot|preemptib|preempt|interruption|termination|reclaim)[^\n]{0,60}"
            r"(?:notice|imminent|warning|scheduled)"),
           ("interruption", "spot interruption notice received: node will be reclaimed in 120 s",
            r"(?i)(?:spot|preemptib|preempt|interruption|termination|reclaim)[^\n]{0,60}"
            r"(?:notice|imminent|warning|scheduled)")))
# judge57 (in sample after batch 48): NeMo's PreemptionCallback (nemo/lightning/pytorch/callbacks/preemption.py; the
# NeMo Framework user guide's resiliency page quotes both lines) catches the scheduler's SIGTERM ("Received signal 15,
# initiating graceful stop"), then saves a checkpoint and exits: "Preemption detected, saving checkpoint and exiting".
PREEMPTION = PREEMPTION + rows(
    FailureKind.PREEMPTED, "preempted", "NeMo lightning/pytorch/callbacks/preemption.py (PreemptionCallback)",
    ("Preemption detected, saving checkpoint", "[NeMo I 2025-03-07 22:48:03 preemption:67] Preemption detected, "
                                               "saving checkpoint and exiting"))
_LSF = "IBM Spectrum LSF job exit reasons (TERM_*)"
PREEMPTION = PREEMPTION + rows(
    FailureKind.PREEMPTED, "preempted", _LSF + "; schedulers' and clouds' preemption notices",
    ("TERM_PREEMPT", "TERM_PREEMPT: job killed after preemption."),
    ("TERM_REQUEUE_", "TERM_REQUEUE_ADMIN: job killed and requeued by LSF administrator."),
    ("preempted", "sky.jobs: managed job 17 was preempted; recovering on a new cluster",
     r"(?i)\b(?:job|jobs|instance|instances|node|nodes|vm|pod|worker|task|allocation|cluster)\b[^\n]{0,40}"
     r"\b(?:was|were|been|got|is being|are being)\s+preempted\b"))
DEADLINE = rows(FailureKind.TIME_LIMIT, "time limit", _LSF + "; PBS/Torque",
                ("TERM_RUNLIMIT", "TERM_RUNLIMIT: job killed after reaching LSF run time limit."),
                ("exceeded limit", "=>> PBS: job killed: walltime 172832 exceeded limit 172800",
                 r"(?i)job killed: walltime\b[^\n]{0,40}exceeded limit")) + rows(
                FailureKind.TIME_LIMIT, "time limit", _K8S,
                ("longer than the specified deadline", "Reason: DeadlineExceeded  Message: Pod was active on the node "
                                                       "longer than the specified deadline"),
                ("active longer than specified deadline", "Job was active longer than specified deadline")) + rows(
                FailureKind.TIME_LIMIT, "time limit", "Cobalt (ALCF's scheduler on Theta and ThetaGPU): its "
                "job.cobaltlog line when the job's wall time runs out",
                ("maximum execution time exceeded", "Wed Nov 09 22:47:05 2022 +0000 (UTC) Info: maximum execution time "
                                                    "exceeded; initiating job termination"))
OUTSIDE_STOP = rows(FailureKind.CANCELLED, "stopped from outside", _LSF,
                    ("TERM_OWNER", "TERM_OWNER: job killed by owner."),
                    ("TERM_ADMIN", "TERM_ADMIN: job killed by root or LSF administrator.")) + rows(
                    FailureKind.CANCELLED, "stopped from outside", _TORCHRUN,
                    ("death signal, shutting down workers",
                     "W1203 11:02:07.118000 2201 torch/distributed/elastic/agent/server/api.py:704] Received "
                     "Signals.SIGTERM death signal, shutting down workers"),
                    ("SignalException: Process", "torch.distributed.elastic.multiprocessing.api.SignalException: "
                                                 "Process 2201 got signal: 2"),
                    ("the actor's node was terminated expectedly",
                     "\tthe actor's node was terminated expectedly: received SIGTERM")) + rows(
                    FailureKind.CANCELLED, "stopped from outside", _DS_LAUNCHER,
                    ("Main process received SIG", "[2024-05-26 15:06:41,122] [INFO] [launch.py:330:sigkill_handler] "
                                                  "Main process received SIGTERM, exiting",
                     r"Main process received SIG(?:TERM|INT|HUP|QUIT), exiting")) + rows(
                    # judge57 (in sample after batch 48): a training loop that catches KeyboardInterrupt and says so
                    # in its own log ("Training interrupted by user - Step 55 (Epoch 0)", acebot712/rl-token-
                    # compression's trainer, oos-batch48): a stop by hand, as a Ctrl-C's traceback would be
                    FailureKind.CANCELLED, "stopped from outside", "training loops that catch KeyboardInterrupt",
                    ("nterrupted by", "INFO - Training interrupted by user - Step 55 (Epoch 0)",
                     r"(?im)(?:\b(?:training|train|run|job|fine-?tuning)\b[^\n]{0,20}\b|^\s{0,8})"
                     r"interrupted by (?:the )?user\b"
                     r"(?!\s{0,3}\?)")) + rows(
                    # judge60 (in sample after batch 50): PyTorch Lightning's own word for a Ctrl-C it caught
                    # (pytorch_lightning/trainer/trainer.py, rank_zero_warn("Detected KeyboardInterrupt, attempting
                    # graceful shutdown...")), under NeMo 1 too (an Urdu Jasper run stopped after 21 hours,
                    # oos-batch50): the job was stopped from outside
                    FailureKind.CANCELLED, "stopped from outside", "PyTorch Lightning trainer",
                    ("Detected KeyboardInterrupt, attempting graceful shutdown",
                     "UserWarning: Detected KeyboardInterrupt, attempting graceful shutdown...",
                     r"\bDetected KeyboardInterrupt, attempting graceful shutdown\b"))
# judge60: PaddlePaddle's fatal-signal handler naming SIGTERM ("FatalError: `Termination signal` is detected by the
# operating system.", paddle/fluid/platform/init.cc SignalHandle): stopped from outside where nothing failed above it
# (PaddleSeg after 66,090 iterations, oos-batch50); below a traceback it is the launcher's teardown of the other ranks
# after that failure (an iBOT rank's reshape error, the same batch), and the traceback is the cause
# (classify._outside_stop).
# judge62 (in sample after batch 51): PyTorch Lightning's signal connector says the same ("[rank: 2] Received SIGTERM:
# 15", lightning/pytorch/trainer/connectors/signal_connector.py _sigterm_handler_fn), and its DataLoader workers then
# die "killed by signal: Terminated" (a QCNet DDP run on 5 GPUs, oos-batch51)
TERMINATED = (rows(FailureKind.CANCELLED, "stopped from outside", "PaddlePaddle signal handler (SIGTERM)",
                   ("`Termination signal` is detected by the operating system",
                    "FatalError: `Termination signal` is detected by the operating system."))
              + rows(FailureKind.CANCELLED, "stopped from outside", "PyTorch Lightning signal connector (SIGTERM)",
                     ("Received SIGTERM: ", "[rank: 2] Received SIGTERM: 15", r"\bReceived SIGTERM: 15\b")))
# judge46a: a container the kubelet cannot start, or restarts because it keeps exiting. The waiting reasons are the
# kubelet's (pkg/kubelet/images: ErrImagePull, ImagePullBackOff, InvalidImageName; kuberuntime:
# CreateContainerConfigError, CreateContainerError; CrashLoopBackOff after repeated exits, the event "Back-off
# restarting failed container"), shown as a `kubectl get pods` STATUS column or a `kubectl describe pod` Reason. An
# image or a pod spec that cannot run fails the same way every time (configuration); a container that keeps
# exiting is a crash whose cause is in its own log (read first: its own traceback or OOM wins).
_POD_STATUS = r"(?:^\S{{1,253}}\s{{1,12}}\d{{1,3}}/\d{{1,3}}\s{{1,12}}|[Rr]eason:?\s{{1,12}}|\bstatus\W{{1,4}}){0}\b"
CONTAINER_CONFIG = rows(
    FailureKind.CONFIG_ERROR, "the container cannot start (its image or pod spec)", _K8S,
    ("ImagePullBackOff", "trainer-0   0/1   ImagePullBackOff   0   2m", _POD_STATUS.format("ImagePullBackOff")),
    ("ErrImagePull", "      Reason:       ErrImagePull", _POD_STATUS.format("ErrImagePull")),
    ("InvalidImageName", "trainer-0   0/1   InvalidImageName   0   10s", _POD_STATUS.format("InvalidImageName")),
    ("CreateContainerConfigError", "trainer-0   0/1   CreateContainerConfigError   0   30s",
     _POD_STATUS.format("CreateContainerConfigError")),
    ("CreateContainerError", "      Reason:       CreateContainerError", _POD_STATUS.format("CreateContainerError"))
) + rows(
    # judge62 (in sample after batch 51): Singularity / Apptainer cannot build the container from its image
    # (internal/pkg/runtime/engine: "FATAL:   container creation failed: mount ... can't mount image ...", an LSF job
    # whose squashfs image the node's kernel refused, oos-batch51): the image or the site, the same every time
    FailureKind.CONFIG_ERROR, "the container cannot start (its image or pod spec)", "Singularity / Apptainer runtime",
    ("container creation failed", "FATAL:   container creation failed: mount /proc/self/fd/10->/var/singularity/mnt/"
                                  "session/rootfs error: can't mount image /proc/self/fd/10",
     r"\bFATAL:?\W{0,12}container creation failed\b"))
CONTAINER_CRASH = rows(
    FailureKind.CRASHED, "crashed (the container keeps exiting and is restarted)", _K8S,
    ("CrashLoopBackOff", "pytorchjob-example-82cjcqdz-master-0   0/2   CrashLoopBackOff   8   2m32s",
     _POD_STATUS.format("CrashLoopBackOff")),
    ("Back-off restarting failed container", "  Warning  BackOff  3m (x12 over 5m)  kubelet  Back-off restarting "
                                             "failed container trainer in pod trainer-0_default"))
# The DeepSpeed launcher's kills of its ranks with no return code or signal line after them (module docstring).
LAUNCHER_KILLS = rows(FailureKind.CRASHED, "crashed (the launcher killed its ranks after one failed or it was "
                      "stopped; the log ends before it says which: the host OOM killer?)", _DS_LAUNCHER,
                      ("Killing subprocess", "[2023-07-25 00:38:05,103] [INFO] [launch.py:315:sigkill_handler] "
                                             "Killing subprocess 230",
                       r"(?:sigkill_handler\]\s{0,4}|^\s{0,8})Killing subprocess \d{1,10}\s{0,4}$"))
LAUNCHER_REPORTS = ("exits with return code", "Main process received")
