"""Issue 17, batch 15's causes as families (helper judge15): Ray's list of possible causes is not evidence, Ray's
memory-monitor kill and a failed Ray job, RDMA/verbs completion errors, and HCCL in any spelling with Ascend's EI/EJ
codes. Each family: real lines from a fixture (cited), made-up look-alikes that must not match."""

from __future__ import annotations

import pytest

from analysis.logs.classify import classify
from launcher.core.kinds import FailureKind

# Ray's worker-died text (src/ray/core_worker): "There are some potential root causes. (1) ... OOM killer ... (3) ...
# SIGSEGV ..."; tests/fixtures/oos-batch15/deepspeed/openrlhf_reinforce_ring_attention_reference_allgather_watchdog_1
# .log (OpenRLHF#876)
_RAY_DIED = (
    "(raylet) A worker died or was killed while executing a task by an unexpected system error. To troubleshoot the "
    "problem, check the logs for the dead worker. RayTask ID: ffffffffffffffffd155ee3e0ad41ffd2c03df6802000000 "
    "Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a connection error code 2. End "
    "of file. There are some potential root causes. (1) The process is killed by SIGKILL by OOM killer due to high "
    "memory usage. (2) ray stop --force is called. (3) The worker is crashed unexpectedly due to SIGSEGV or other "
    "unexpected errors.\n")
_WATCHDOG = (
    "(ReferenceModelRayActor pid=4347, ip=10.164.204.17) [rank1]:[E317 03:27:31.594678338 ProcessGroupNCCL.cpp:616] "
    "[Rank 1] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=_ALLGATHER_BASE, NumelIn=110336, "
    "NumelOut=220672, Timeout(ms)=600000) ran for 600033 milliseconds before timing out.\n")


def test_a_real_cause_after_rays_possible_causes_wins():
    assert classify(_RAY_DIED + _WATCHDOG).kind == FailureKind.COMM_ERROR


def test_rays_possible_causes_alone_stay_the_first_listed_cause():
    # neither the third listed cause (SIGSEGV) nor the order of the log changes that
    assert classify(_RAY_DIED).kind == FailureKind.OOM
    assert classify(_WATCHDOG + _RAY_DIED).kind == FailureKind.COMM_ERROR
    # made up: a real SIGSEGV report beside it is a crash, not the list's first guess
    assert classify(_RAY_DIED + "Fatal Python error: Segmentation fault\n").kind == FailureKind.CRASHED


# Ray's memory monitor (src/ray/raylet/node_manager.cc) and Ray Jobs' failed status (dashboard/modules/job);
# tests/fixtures/oos-batch15/deepspeed/openrlhf_ray_node_low_memory_reference_actor_killed_1.log (OpenRLHF#911)
_RAY_JOB = (
    "2025-03-24 14:49:45,286\tINFO cli.py:83 -- Status message: Job entrypoint command failed with exit code 1, last "
    "available logs (truncated to 20,000 chars):\n"
    "(ActorModelRayActor pid=8249) 8800\t1.18\tray::ReferenceModelRayActor\n")
_MONITOR = (
    "(ActorModelRayActor pid=8249) Refer to the documentation on how to address the out of memory issue: "
    "https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html. Consider provisioning more memory on "
    "this node or reducing task parallelism by requesting more CPUs per task.\n")
_BAR = ("Episode [1/10000]:   7%|▋         | 11/147 [3:34:08<44:07:37, 1168.07s/it, policy_loss=-0.115, "
        "actor_lr=2e-6, kl=0.106, reward=1.93]\n")


def test_rays_memory_monitor_kill_is_a_host_oom_even_before_a_quoted_bar():
    found = classify(_RAY_JOB + _MONITOR + _BAR)
    assert found.kind == FailureKind.OOM and "out of memory issue" in found.reason


def test_a_failed_ray_job_is_not_finished_by_the_bar_it_quotes():
    # made up: the same status with nothing but a bar quoted is a crash; a bar alone is not
    assert classify(_RAY_JOB + _BAR).kind == FailureKind.CRASHED
    assert classify(_BAR).kind != FailureKind.CRASHED
    # look-alikes: a succeeded job, a docs link without the kill message
    assert classify("Job 'raysubmit_1' succeeded\n" + _BAR).kind != FailureKind.CRASHED
    assert classify("see https://docs.ray.io/en/latest/ray-core/scheduling/ray-oom-prevention.html\n" + _BAR).kind \
        != FailureKind.OOM


# rdma-core providers/mlx5/cq.c's error CQE dump; tests/fixtures/oos-batch15/deepspeed/
# openrlhf_multinode_ppo_epoch_end_vllm_update_mlx5_completion_error_1.log (OpenRLHF#621)
_DONE_BAR = ("Train epoch [1/1]: 100%|██████████| 128/128 [23:32<00:00, 11.04s/it, pg=-0.0683, rm=-0.5, "
             "act_lr=4.95e-7]\n")


@pytest.mark.parametrize("line", [
    "(LLMRayActor pid=90738, ip=172.19.24.110) mlx5: host_unknown: got completion with error:",  # the fixture's
    "ibv_poll_cq: status IBV_WC_RETRY_EXC_ERR (12) for wr_id 4",  # made up in libibverbs' status names
    "UCX ERROR ib_iface.c:742 work completion error: status=remote access error",
])
def test_verbs_completion_errors_are_network(line):
    assert classify(_DONE_BAR + line + "\n").kind == FailureKind.COMM_ERROR


@pytest.mark.parametrize("line", [
    "NCCL INFO NET/IB : Using [0]mlx5_0:1/IB [1]mlx5_1:1/IB ; OOB eth0:10.0.0.1<0>",
    "ibv_poll_cq: status IBV_WC_SUCCESS for wr_id 4",
    "counters: work completion errors count=0",
])
def test_verbs_look_alikes_are_not_errors(line):
    assert classify(_DONE_BAR + line + "\n").kind != FailureKind.COMM_ERROR


# Ascend HCCL: torch_npu's CamelCase call and the EI codes of Ascend's HCCL error-code table;
# tests/fixtures/oos-batch15/other/vllm_ascend_grpo_colocated_hccl_allreduce_socket_timeout_1.log (vllm-ascend#486)
# and tests/fixtures/oos-batch15/hf_trainer/llamafactory_ascend_ppo_hccl_socket_timeout_ei0006_1.log (LlamaFactory#5071)
@pytest.mark.parametrize("line", [
    "[rank1]: RuntimeError: InnerRunOpApi:torch_npu/csrc/framework/OpParamMaker.cpp:281 OPS function error: "
    "HcclAllreduce, error code is 6",
    "EI0006: 2024-08-05-18:15:21.270.506 Getting socket times out. Reason: Remote Rank did not send the data in time.",
    "[rank1]: EI0006: [PID: 1292363] 2025-04-08-18:07:20.444.436 Getting socket times out.",
    "EJ0001: Failed to initialize the HCCP process. Reason: Maybe the last training process is running.",  # made up
])
def test_hccl_in_any_spelling_and_its_communication_codes_are_network(line):
    assert classify(line + "\n").kind == FailureKind.COMM_ERROR


@pytest.mark.parametrize("line", [
    "[INFO] HCCL(1234,python):2024-01-01 HcclAllreduce launched, count 1024",  # a CamelCase call without a failure
    "EI0004: The ranktable is invalid. Reason: the rank_id 9 is out of range",  # a configuration code of the table
    "checkpoint EI0006x saved",
])
def test_hccl_look_alikes_are_not_network(line):
    assert classify(line + "\n").kind != FailureKind.COMM_ERROR
