"""The failure kinds a finished trial can have, with what each one means for a retry.

A str enum (launcher.core.names.StrEnum): `FailureKind.OOM == "oom"`, so the ledger and MLflow tags keep their text;
`str()` and f-strings give the plain value too.

Retry rules, and why:
- oom and config_error fail the same way every time: never retried.
- A hang is retried once: a stale fused-kernel lock or a flaky start clears, a real deadlock of the layout does not.
- node_failure, comm_error and preempted avoid the node they ran on (as the cluster-path issue asks): a node that
  keeps being preempted is as useless to a short benchmark as a broken one. The launcher only excludes when enough
  other nodes remain (launcher.run.policy.may_exclude).
- invalid_measurement (the log reports numbers that cannot be true) is retried once: a transient glitch in a
  timer or a counter clears, a workload that always prints nonsense does not, and it must never be ranked.
- diverged (the loss went NaN/inf, the fp16 loss scale hit its minimum, Megatron's iterations kept skipping) is
  never retried: a training run is deterministic given its seed, data order and layout, so the retry computes
  the same NaN at the same step; its step time measured a broken run and is not ranked.
- submit_refused (sbatch refused the job at submit time: controller down or busy, a submit limit) is not the
  trial's failure and never ran: it costs no attempt and is not resubmitted in the same run (a controller that is
  down refuses the retry too); the next run of the same command submits it again (launcher/run/loop.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from launcher.core.names import StrEnum


@dataclass(frozen=True)
class KindPolicy:
    retryable: bool
    exclude_node: bool  # should the retry avoid the node the failure happened on?
    max_retries: int | None  # None: up to retry.max_attempts
    description: str


class FailureKind(StrEnum):
    OK = "ok"
    OOM = "oom"
    CONFIG_ERROR = "config_error"
    NODE_FAILURE = "node_failure"
    COMM_ERROR = "comm_error"
    PREEMPTED = "preempted"
    HANG = "hang"
    TIME_LIMIT = "time_limit"
    CANCELLED = "cancelled"
    CRASHED = "crashed"
    DIVERGED = "diverged"
    INVALID_MEASUREMENT = "invalid_measurement"
    SUBMIT_REFUSED = "submit_refused"
    UNKNOWN = "unknown"

    @property
    def policy(self) -> KindPolicy:
        return _POLICY[self]

    @property
    def retryable(self) -> bool:
        return _POLICY[self].retryable

    @property
    def exclude_node(self) -> bool:
        return _POLICY[self].exclude_node

    @property
    def max_retries(self) -> int | None:
        return _POLICY[self].max_retries

    @property
    def description(self) -> str:
        return _POLICY[self].description


_POLICY: dict[FailureKind, KindPolicy] = {
    FailureKind.OK: KindPolicy(False, False, 0, "finished without a failure (with its measurement when the log "
                                                "gives one; never retried)"),
    FailureKind.OOM: KindPolicy(False, False, 0, "out of device or host memory: the layout does not fit"),
    FailureKind.CONFIG_ERROR: KindPolicy(False, False, 0,
                                         "invalid arguments or environment: fails the same way every time"),
    FailureKind.NODE_FAILURE: KindPolicy(True, True, None, "hardware or node fault (GPU, ECC, SLURM node failure)"),
    FailureKind.COMM_ERROR: KindPolicy(True, True, None, "NCCL/gloo/network error or collective timeout"),
    FailureKind.PREEMPTED: KindPolicy(True, True, None, "preempted by the scheduler"),
    FailureKind.HANG: KindPolicy(True, False, 1, "no progress: stuck at a known stall point or past the timeout"),
    FailureKind.TIME_LIMIT: KindPolicy(True, False, None, "killed at the job's time limit"),
    FailureKind.CANCELLED: KindPolicy(True, False, None, "cancelled (scancel, or the job was lost)"),
    FailureKind.CRASHED: KindPolicy(True, False, None, "crashed (exception, signal, non-zero exit)"),
    FailureKind.DIVERGED: KindPolicy(False, False, 0,
                                     "loss diverged (NaN/inf loss, loss scale at its minimum): the same seed and "
                                     "layout diverge the same way, so it is not retried"),
    FailureKind.INVALID_MEASUREMENT: KindPolicy(True, False, 1,
                                                "finished, but reported numbers that cannot be true"),
    FailureKind.SUBMIT_REFUSED: KindPolicy(False, False, 0, "sbatch refused the submission (controller down or "
                                           "busy, a submit limit): never ran, no attempt counted; the same "
                                           "command submits it again"),
    FailureKind.UNKNOWN: KindPolicy(True, False, None, "no failure signature and no readable result"),
}

FAILURE_KINDS: tuple[str, ...] = tuple(k.value for k in FailureKind)

# The retry tuples the sweep loop used before this enum: kind -> (retryable, exclude_node, max_retries).
RETRY_POLICY: dict[str, tuple[bool, bool, int | None]] = {
    k.value: (k.retryable, k.exclude_node, k.max_retries) for k in FailureKind
}
