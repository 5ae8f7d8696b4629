"""Issue 17, batch 16's causes as families (helper judge16): step records spread over several lines (a JSON object
after a prefix, DLLogger's; a bracketed counter followed by indented name=value lines, OLMo's console logger), GPU
architecture refusals before training, a cluster's automatic node replacement, and a logged uncaught exception after
progress. Each family: real lines from a fixture (cited), made-up look-alikes that must not match."""

from __future__ import annotations

import pytest

from analysis.logs.classify import classify
from analysis.logs.families import first_match
from analysis.logs.families.config import COMPILE_TARGET
from analysis.logs.outcome import trial_outcome
from analysis.logs.parse_generic import read_records
from launcher.core.kinds import FailureKind

# NVIDIA/dllogger JSONStreamBackend: "DLLL " + {"timestamp", "datetime", "elapsedtime", "type": "LOG", "step", "data"},
# pretty-printed in the recipe's README; tests/fixtures/oos-batch16/nemo/gpu_recipes_gpt3_175b_a3mega_dllogger_entry_1
# .log (AI-Hypercomputer/gpu-recipes)
_DLLL = """DLLL {
  "timestamp": "1727463426.984522",
  "datetime": "2024-09-27 18:57:06.984522",
  "elapsedtime": "1645.119157",
  "type": "LOG",
  "step": 47,
  "data": {
    "reduced_train_loss": 7.890198707580566,
    "lr": 0.000036782606912311167,
    "global_step": 47,
    "consumed_samples": 98304,
    "train_backward_timing in s": 0.00004844665454584174,
    "grad_norm": 8.800999641418457,
    "train_step_timing in s": 25.115550994873047,
    "epoch": 0
  }
}
"""


def test_a_dllogger_record_over_several_lines_is_one_step_record():
    reading = read_records(_DLLL)
    assert [(it.iteration, it.step_time_s) for it in reading.iterations] == [(47, pytest.approx(25.11555, rel=1e-6))]
    outcome = trial_outcome(_DLLL)
    assert outcome.failure_kind == "ok" and outcome.metrics["step_time_s"] == pytest.approx(25.11555, rel=1e-6)


def test_json_over_lines_that_is_no_step_record_stays_unread():
    # made up: a config object (no step counter), a record cut before its closing brace, an inner object alone,
    # text that only looks like JSON
    config = '{\n  "train_batch_size": 16,\n  "gradient_clipping": 1.0,\n  "steps_per_print": 10\n}\n'
    cut = "\n".join(_DLLL.splitlines()[:-3]) + "\n"
    inner = '  "data": {\n    "global_step": 47,\n    "train_step_timing in s": 25.1\n  }\n'
    broken = 'DLLL {\n  step: 47,\n  "train_step_timing in s": 25.1\n}\n'
    for text in (config, cut, inner, broken):
        assert not read_records(text).iterations, text


# OLMo's log_metrics_to_console: f"[step={global_step}/{max_steps},epoch={epoch}]" then one f"    {name}={value}" a
# line (format_float writes thousands with commas); throughput/device/batches_per_second is steps per second;
# tests/fixtures/oos-batch16/other/olmo_1b_tied_emb_1000_steps_training_complete_1.log (AntonioLopardo/OLMo)
def _olmo_block(step: int, rate: str) -> str:
    return (f"2025-12-26 20:32:40.111\tripe-sun-crunches-fin-03:0\tolmo.train:990\tINFO\t[step={step}/1000,epoch=0]\n"
            "    optim/total_grad_norm=0.8647\n"
            "    train/CrossEntropyLoss=4.011\n"
            "    throughput/total_tokens=2,034,237,440\n"
            "    throughput/device/tokens_per_second=55,999\n"
            f"    throughput/device/batches_per_second={rate}\n"
            "    System/Peak GPU Memory (MB)=114,390\n")


def test_olmo_metric_blocks_are_step_records_timed_by_batches_per_second():
    text = _olmo_block(970, "0.2136") + _olmo_block(980, "0.2137")
    reading = read_records(text)
    assert [it.iteration for it in reading.iterations] == [970, 980]
    assert reading.iterations[-1].step_time_s == pytest.approx(1 / 0.2137)
    assert reading.losses == (4.011, 4.011)


def test_a_bracketed_line_without_indented_metrics_is_not_a_block():
    # made up: the same header followed by an unindented line, and indented lines that are not name=value
    header = "2025-12-26 20:32:40.111\tolmo.train:990\tINFO\t[step=970/1000,epoch=0]\n"
    assert not read_records(header + "throughput/device/batches_per_second=0.2136\n").iterations
    assert not read_records(header + "    at step 970 the loader waits\n    see https://x/y?a=1\n").iterations


# NVRTC's option parser through torch's jiterator; tests/fixtures/oos-batch16/other/
# olmo_1b_tied_init_nvrtc_invalid_gpu_architecture_1.log (the kernel source follows the error)
_NVRTC = ("nvrtc: error: invalid value for --gpu-architecture (-arch)\n"
          "2025-12-12 15:54:07.601\ttiny-time-shines-fin-03:0\tolmo.util:168\tCRITICAL\tUncaught RuntimeError:\n"
          "  #ifdef __HIPCC__\n  #define ERROR_UNSUPPORTED_CAST ;\n"
          "  // corresponds to aten/src/ATen/cuda/detail/OffsetCalculator.cuh\n")
# torch/cuda/__init__.py _check_capability's warning (made up in its shape)
_CAPABILITY = ("UserWarning: NVIDIA B200 with CUDA capability sm_100 is not compatible with the current PyTorch "
               "installation.\nThe current PyTorch install supports CUDA capabilities sm_50 sm_60 sm_70 sm_75 sm_80 "
               "sm_86 sm_90.\nTraceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n"
               "RuntimeError: CUDA error: misaligned address\n")


@pytest.mark.parametrize("text", [_NVRTC, _CAPABILITY])
def test_a_gpu_architecture_refusal_before_training_is_a_config_error(text: str):
    assert classify(text).kind == FailureKind.CONFIG_ERROR


def test_an_architecture_refusal_after_training_ran_is_not_a_config_error():
    # made up: Megatron iterations, then the same refusal from a kernel only evaluation needs
    steps = "".join(f" iteration {i}/100 | elapsed time per iteration (ms): 1200.0 | lm loss: 2.1 |\n"
                    for i in range(1, 4))
    assert classify(steps + _NVRTC).kind != FailureKind.CONFIG_ERROR
    # with an exit code the signatures are searched from the start: OLMo's step records before it count too
    assert classify(_olmo_block(970, "0.2136") + _NVRTC, exit_code=1).kind != FailureKind.CONFIG_ERROR
    assert classify(_NVRTC, exit_code=1).kind == FailureKind.CONFIG_ERROR


def test_architecture_look_alikes_are_not_refusals():
    # made up: nvcc's flag in a compile command line, a valid value, a capability listed as supported
    for text in ("nvcc -c x.cu --gpu-architecture=sm_90 -o x.o\n",
                 "nvrtc: compiling with --gpu-architecture=sm_90 (valid value for --gpu-architecture-list)\n",
                 "GPU sm_90 is compatible with the current PyTorch installation.\n"):
        assert first_match(text, COMPILE_TARGET) is None, text


# SageMaker HyperPod auto-resume records; tests/fixtures/oos-batch16/slurm/
# hyperpod_auto_resume_injected_node_failure_replacing_nodes_1.log (aws-samples/awsome-distributed-training)
_HYPERPOD = (
    "[Auto Resume] Info: JobID: 82 StepID: 0 Initiating communication with cluster agent to diagnose health of nodes\n"
    "[Auto Resume] Info: JobID: 82 StepID: 0 Response from cluster agent: JobId=82, ResumeAction=RETRYSTEP\n"
    "[Auto Resume] Info: JobID: 82 StepID: 0 Job failed - replacing nodes\n"
    "[Auto Resume] Info: JobID: 82 StepID: 0 Job failed - Droping unhealthy nodes\n"
    "srun: job 83 queued and waiting for resources\n")


@pytest.mark.parametrize("text", [
    _HYPERPOD,
    "slurmctld: requeue job JobId=412 due to failure of node gpu-node-7\n",  # made up in slurmctld's shape
    "Warning  TaintManagerEviction  pod/trainer-1  Marking for deletion Pod default/trainer-1 "
    "(taint node.kubernetes.io/not-ready:NoExecute)\n",
    "Warning  NodeNotReady  pod/trainer-1  Node is not ready\n",
])
def test_a_clusters_automatic_node_replacement_is_a_node_failure(text: str):
    assert classify(text).kind == FailureKind.NODE_FAILURE


def test_node_replacement_look_alikes_are_not_node_failures():
    # made up: a health check that found nothing, a pending pod scheduled around a NotReady node, a requeue for
    # another reason
    assert classify("[Auto Resume] Info: JobID: 82 StepID: 0 Initiating communication with cluster agent to "
                    "diagnose health of nodes\n").kind != FailureKind.NODE_FAILURE
    assert classify("Warning  FailedScheduling  0/4 nodes are available: 1 node(s) had untolerated taint "
                    "{node.kubernetes.io/not-ready: }\n").kind != FailureKind.NODE_FAILURE
    assert classify("slurmctld: requeue job JobId=412 due to preemption\n").kind != FailureKind.NODE_FAILURE


# OLMo's excepthook (olmo/util.py): log.critical("Uncaught %s: %s", ...); tests/fixtures/oos-batch5/other/
# olmo_step75_data_thread_failed_critical_1.log (allenai/OLMo#552), after a step record that now gives a step time
_OLMO_552 = ("[2024-04-18 19:06:17] INFO     [olmo.train:816, rank=0] [step=75/739328]\n"
             "    train/CrossEntropyLoss=7.417\n    train/Perplexity=1,664\n"
             "    throughput/total_tokens=314,572,800\n    throughput/device/tokens_per_second=9,407\n"
             "    throughput/device/batches_per_second=0.0022\n"
             "[2024-04-18 19:10:41] CRITICAL [olmo.util:158, rank=0] Uncaught OLMoThreadError: generator thread data "
             "thread 3 failed\n")


def test_a_logged_uncaught_exception_after_progress_is_a_crash():
    assert trial_outcome(_OLMO_552).failure_kind == "crashed"


def test_other_logger_errors_after_progress_stay_weaker_than_the_progress():
    # made up: a logger's error at exit that names no uncaught exception; "uncaught" in lower case prose
    for tail in ("[2024-04-18 19:10:41] ERROR [wandb] upload failed, retrying later\n",
                 "[2024-04-18 19:10:41] ERROR [olmo.util] uncaught warnings were suppressed\n"):
        assert trial_outcome(_OLMO_552.rsplit("[2024-04-18 19:10:41]", 1)[0] + tail).failure_kind == "ok", tail


# A job that said training finished and then only the scheduler's time limit; tests/fixtures/oos-batch15/nemo/
# bridge_qwen3_30b_nsys_no_exit_after_training_slurm_time_limit_1.log (Megatron-Bridge#1656)
_DONE = "[after training is done] datetime: 2025-12-03 14:45:03\n"
_LIMIT = "slurmstepd: error: *** STEP 4226796.2 ON eos0117 CANCELLED AT 2025-12-03T14:53:02 DUE TO TIME LIMIT ***\n"
_NSYS = "No transition in N5Agent6Client3FSM8Profiler8ShutdownE (1) for N5Agent6Client3FSM9InterruptE.\n"


def test_no_exit_after_training_until_the_time_limit_is_a_hang():
    assert classify(_DONE + _LIMIT + _NSYS * 3).kind == FailureKind.HANG
    assert classify(_DONE + "\n" + _LIMIT).kind == FailureKind.HANG


def test_a_time_limit_that_cut_work_after_training_stays_a_time_limit():
    # made up: a final checkpoint save or evaluation between the two lines, or no line saying training finished
    save = "saving checkpoint at iteration      50 to /ckpt in torch_dist format\n"
    assert classify(_DONE + save + _LIMIT).kind == FailureKind.TIME_LIMIT
    assert classify(" iteration       50/     100 | lm loss: 2.1 |\n" + _LIMIT).kind == FailureKind.TIME_LIMIT


# DeepSpeed's comms logger (utils/comms_logging.py, verbose); tests/fixtures/oos-batch15/deepspeed/
# ds_comms_logging_verbose_reduce_scatter_allgather_records_1.log (DeepSpeed's comms-logging tutorial)
_COMMS = ("[2022-06-26 01:39:55,722] [INFO] [logging.py:69:log_dist] [Rank 0] rank=0 | comm op: reduce_scatter_tensor "
          "| time (ms): 9.46 | msg size: 678.86 MB | algbw (Gbps): 1204.52  | busbw (Gbps): 1129.23\n"
          "[2022-06-26 01:39:56,470] [INFO] [logging.py:69:log_dist] [Rank 0] rank=0 | comm op: all_gather_into_tensor "
          "| time (ms): 0.11 | msg size: 6.0 MB | algbw (Gbps): 954.41  | busbw (Gbps): 894.76\n")


def test_the_steps_collectives_in_the_comms_logger_show_training_ran():
    assert classify(_COMMS).kind == FailureKind.OK
    assert classify(_COMMS + "RuntimeError: CUDA error: an illegal memory access was encountered\n").kind \
        == FailureKind.CRASHED


def test_set_up_collectives_in_the_comms_logger_are_no_progress():
    # made up: a broadcast and a barrier (set-up runs them too), and the summary table's header
    broadcast = _COMMS.replace("reduce_scatter_tensor", "broadcast").replace("all_gather_into_tensor", "barrier")
    assert classify(broadcast).kind != FailureKind.OK
    assert classify("Comm. Op            Message Size        Count     Total Latency(ms)\n").kind != FailureKind.OK
