"""Issue 17 (coordinator, stop 43, written while batch 42 was collected: blind to it, in sample for batch 41). (1) MPI
failing to initialise (MPICH's "Fatal error in internal_Init_thread", Open MPI's "It looks like MPI_INIT failed") is the
job's environment; MPICH's fatal error in a communication call is a communication error. (2) A line Ray marks
"[repeated Nx across cluster]" is a liveness line only when it is no error record: the error several workers died of
stays the log's last activity. Records: real lines with their source."""

from __future__ import annotations

import pytest

from analysis.logs.outcome import trial_outcome


@pytest.mark.parametrize(("line", "kind"), [
    # github saforem2/personal_site docs/posts/AuroraGPT/flash-attn-sunspot/index.md (oos-batch41): MPICH on Sunspot
    ("Abort(15): Fatal error in internal_Init_thread: Other MPI error", "config_error"),
    ("Abort(1091983) on node 0: Fatal error in PMPI_Init_thread: Other MPI error, error stack:", "config_error"),
    # Open MPI's help text (ompi/runtime/help-mpi-runtime.txt)
    ("It looks like MPI_INIT failed for some reason; your parallel process is likely to abort.  There are many "
     "reasons that a parallel process can fail during MPI_INIT;", "config_error"),
    # MPICH's abort in a collective, once the job runs
    ("Abort(201935887) on node 12: Fatal error in PMPI_Allreduce: Other MPI error, error stack:", "comm_error"),
])
def test_mpi_failing_to_start_is_the_environment_and_in_a_call_the_network(line: str, kind: str) -> None:
    assert trial_outcome("loading model\n" + line + "\n").failure_kind == kind


# https://github.com/uccl-project/uccl/issues/937 (oos-batch41): Ray's deduplicated worker lines, with NCCL's set-up
# lines printed before them (bench_invariance's nccl_init wrapping moved this verdict to a wait).
_NCCL = "".join(f"node031:3045:3223 [7] NCCL INFO Channel 0{i}/32 :    0   1   2   3\n" for i in range(4)) + (
    "node031:3045:3223 [7] NCCL INFO comm 0xca4fda6de6 rank 7 nranks 16 cudaDev 7 busId 18000 commId 0x1 - Init "
    "COMPLETE\n")
_RAY_END = (
    "(MegatronTrainRayActor pid=786375, ip=100.64.25.255) RDMA buffer MR registration failed: Invalid argument "
    "[repeated 28x across cluster]\n"
    "(MegatronTrainRayActor pid=786375, ip=100.64.25.255) free(): corrupted unsorted chunks [repeated 4x across "
    "cluster]\n"
    "(MegatronTrainRayActor pid=786373, ip=100.64.25.255) PC: @     0x7ff6e8bd6b2c  (unknown)  pthread_kill "
    "[repeated 6x across cluster]\n")


def test_an_error_ray_repeats_is_the_last_activity_not_a_pulse() -> None:
    assert trial_outcome(_NCCL + _RAY_END).failure_kind == "crashed"


def test_a_repeated_pulse_after_nccl_set_up_is_still_a_wait() -> None:
    pulse = "(RayTrainWorker pid=3045, ip=10.0.0.1) heartbeat ok [repeated 16x across cluster]\n"
    assert trial_outcome(_NCCL + pulse * 3).failure_kind == "hang"
