"""Issue 17 (helper judge28): batch 24's misses as families. DeepSpeed's inference workspace that does not fit the
GPU (csrc/transformer/inference inference_context.h: "Workspace can't be allocated, no enough memory." / "..., not
enough memory") is oom (families.memory); a generation engine's progress bars (vLLM's "Adding requests" and
"Processed prompts", vllm/entrypoints/llm.py; CUDA-graph capture bars) are never training steps; a trainer's own
counterless per-step timing line (NeMo-RL's "Total step time", DeepSpeed-Chat's "End-to-End => Latency" and
"Model Parameters: ..., Latency", DeepSpeed's hybrid engine's "|E2E latency=") gives the step time and ranks above
a bar (parse_generic.trainer_step_lines)."""

from __future__ import annotations

from pathlib import Path

import pytest
from log_fixtures import body, kind_of

from analysis.logs.outcome import measurements
from analysis.logs.parse_generic import trainer_step_lines, training_bars

FIXTURES = Path(__file__).parents[1] / "fixtures" / "oos-batch24"
_WORKSPACE = FIXTURES / "deepspeed/dschat_opt1p3b_ppo_hybrid_engine_workspace_not_enough_memory_1.log"
_GRPO = FIXTURES / "nemo/nemo_rl_grpo_gemma3_1b_fsdp2_b200_ray_job_50_steps_succeeded_1.log"
_DSCHAT = FIXTURES / "deepspeed/dschat_opt1p3b_ppo_timing_run_3_steps_exits_successfully_1.log"
_LAUNCHER_END = ("[2024-01-20 10:17:17,380] [ERROR] [launch.py:321:sigkill_handler] ['python', '-u', 'main.py'] "
                 "exits with return code = 1\n")
_TRACE = "Traceback (most recent call last):\n  File \"main.py\", line 3, in <module>\n"


def _step_s(text: str) -> float | None:
    return measurements(text)[0].get("step_time_s")


def test_the_batch24_workspace_failure_is_oom():
    assert kind_of(body(_WORKSPACE)) == "oom"


@pytest.mark.parametrize("line", [
    "RuntimeError: Workspace can't be allocated, not enough memory",  # the fixture's lines 273 and 310
    "RuntimeError: Workspace can't be allocated, no enough memory.",  # older DeepSpeed releases' wording
])
def test_deepspeed_inference_workspace_is_oom(line):
    assert kind_of(_TRACE + line + "\n" + _LAUNCHER_END) == "oom"


@pytest.mark.parametrize("line", [
    # no memory said: a workspace of another library, or prose
    "RuntimeError: Workspace can't be allocated for this plan",
    "Allocatable workspace available (12 tokens) is less than minimum requested workspace (64 tokens)",
])
def test_workspace_look_alikes_are_not_oom(line):
    assert kind_of(_TRACE + line + "\n" + _LAUNCHER_END) != "oom"


def test_generation_engine_bars_are_not_training_steps():
    text = ("Adding requests: 100%|##########| 64/64 [00:00<00:00, 13559.40it/s]\n"
            "Processed prompts: 100%|##########| 64/64 [00:27<00:00,  2.29it/s, est. speed input: 216.17 toks/s]\n"
            "Capturing CUDA graphs (mixed prefill-decode, PIECEWISE): 100%|#####| 67/67 [00:03<00:00, 19.8it/s]\n"
            "Capturing batches (bs=1 avail_mem=20.1 GB): 100%|#####| 23/23 [00:05<00:00,  4.21it/s]\n")
    assert training_bars(text) == []
    # a training bar next to them is still read
    train = "".join(f"Epoch 0:  {n}%|#####     | {n}/100 [00:{n // 2:02d}<00:10,  2.00it/s, loss=2.1]\n"
                    for n in (20, 40, 60))
    assert [d.n for d in training_bars(text + train)] == [20, 40, 60]


def test_the_batch24_grpo_job_reads_the_trainers_step_time():
    step_s = _step_s(body(_GRPO))
    assert step_s is not None and abs(step_s / 40.71 - 1) <= 0.05


def test_the_batch24_dschat_timing_run_reads_its_e2e_latency():
    step_s = _step_s(body(_DSCHAT))
    assert step_s is not None and abs(step_s / 1.99 - 1) <= 0.05


def test_a_trainer_step_line_ranks_above_a_training_bar():
    text = "".join(f"Epoch 0:  {n}%|#####     | {n}/100 [00:{n // 5:02d}<00:10,  5.00it/s]\n"
                   f"  • Total step time: 30.{n:02d}s\n" for n in (20, 40, 60, 80))
    step_s = _step_s(text)
    assert step_s is not None and abs(step_s / 30.5 - 1) <= 0.05


@pytest.mark.parametrize("text", [
    "  • Total step time: 41.17s\n",  # once: a summary, not a series
    "Generation => Latency: 1.29s, Per-token Latency 5.04 ms\nTraining   => Latency: 0.50s, TFLOPs: 9.80\n" * 3,
    "|Gather latency=0.00s (0.00%) |Generate time=1.29s\n" * 3,
    "Mean total step time: 12.300 ms\n" * 3,  # a benchmark's summary wording, not NeMo-RL's line
    "  Total step time: 1234ms\n" * 3,  # milliseconds, another program's print
])
def test_trainer_step_line_look_alikes(text):
    assert trainer_step_lines(text) == []


def test_trainer_step_lines_in_their_own_words():
    text = ("|E2E latency=2.50s |Gather latency=0.00s (0.00%) |Generate time=1.81s\n"
            "End-to-End => Latency:   2.40s, TFLOPs:   3.21, Samples/sec: 2.05\n") * 2
    # one kind of line per log: DeepSpeed-Chat's own print before the engine's
    assert [s for _, s in trainer_step_lines(text)] == [2.40, 2.40]


_SANDBOX = FIXTURES / "other/k8s_training_pod_sandbox_pause_image_containerd_fault_node_blocked_1.log"


def test_the_batch24_sandbox_image_fault_is_a_node_failure():
    assert kind_of(body(_SANDBOX)) == "node_failure"


def test_a_pause_image_the_node_cannot_get_is_a_node_failure():
    # kubelet's FailedCreatePodSandBox event around containerd's sandbox_run.go error, on one line
    line = ("Warning  FailedCreatePodSandBox  12s (x9 over 2m)  kubelet  Failed to create pod sandbox: rpc error: "
            "code = Unknown desc = failed to get sandbox image \"registry.k8s.io/pause:3.9\": failed to pull image "
            "\"registry.k8s.io/pause:3.9\": dial tcp 10.0.0.1:443: i/o timeout\n")
    assert kind_of(line) == "node_failure"


@pytest.mark.parametrize("line", [
    # the CNI's sandbox network (IP exhaustion is the cluster's) and a runtime class the pod names (the job's)
    "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to setup network for sandbox \"3f1e\": "
    "plugin type=\"aws-cni\" failed (add): add cmd: failed to assign an IP address to container",
    "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to get sandbox runtime: no runtime for "
    "\"nvidia\" is configured",
])
def test_other_sandbox_failures_are_not_node_failures(line):
    assert kind_of(line + "\n") != "node_failure"
