"""The failure families (analysis.logs.families), row by row and by shape: each row's example is classified as
its kind with its needle in the reason; lines this project has never seen, written in a family's shape, map to the
family; and look-alike lines do not. All lines here are written for these tests."""

from __future__ import annotations

import pytest

from analysis.logs.classify import classify
from analysis.logs.families import completion, config, divergence, hardware, memory, network, orchestrator
from analysis.logs.outcome import trial_outcome
from launcher.core.kinds import FailureKind
from launcher.core.states import TrialState, state_for_kind

FAILURE_TABLES = {
    "hardware": hardware.GPU_HARDWARE + hardware.GPU_HARDWARE_SHAPES,
    "memory": memory.MEMORY + memory.RAY_WORKER_DIED,
    "network": network.NETWORK,
    "orchestrator": orchestrator.NODE_LOST + orchestrator.PREEMPTION + orchestrator.DEADLINE
    + orchestrator.OUTSIDE_STOP + orchestrator.TERMINATED + orchestrator.NODE_DIED + orchestrator.CONTAINER_CONFIG
    + orchestrator.CONTAINER_CRASH,
    "divergence": divergence.DIVERGENCE,
    "config data": config.DATA_MISSING,
    "config resume and build": config.RESUME_MISSING + config.EXTENSION_BUILD + config.RESUME_LAYOUT,
    "config environment": config.ENVIRONMENT,
    "config op load": config.OP_LOAD,
    "config schema": config.SCHEMA,
    "config model missing": config.MODEL_MISSING,
    "config file": config.CONFIG_FILE,
    "config helpers build": config.HELPERS_BUILD,
    "config version refusal": config.VERSION_REFUSAL,
    "config judge14a": config.UNMOUNTED + config.SIGNATURE + config.BACKEND_MISSING + config.VERSION_FLOOR
    + config.PLACEHOLDER_VALUE + config.PATH_MISSING + config.NO_GPU + config.FLASH_REFUSAL + config.PACKAGE_GUARD
    + config.HUB_ACCESS + config.VERSION_UNSUPPORTED,
    "config judge16": config.COMPILE_TARGET,
    "config judge23": config.EMPTY_DATA,
    "config judge27": config.LAUNCH_TARGET + config.DUPLICATE_GPU + config.RESUME_SETTINGS,
    "config judge46b": config.DDP_UNUSED_PARAMETERS,
}
ROWS = [(family, row) for family, table in FAILURE_TABLES.items() for row in table]


@pytest.mark.parametrize("family, row", ROWS, ids=[f"{f}:{r.needle[:40]}" for f, r in ROWS])
def test_row_example_is_its_kind(family, row):
    assert row.needle in row.example and row.source
    failure = classify(f"start-up output\n{row.example}\nmore output\n")
    assert failure.kind == row.kind, failure.reason
    assert row.needle.strip() in failure.reason or row.shape is not None, failure.reason
    assert failure.evidence and failure.evidence[0][0] in (2, 3, 4)


@pytest.mark.parametrize("row", completion.COMPLETION + completion.PROGRESS,
                         ids=[r.needle[:40] for r in completion.COMPLETION + completion.PROGRESS])
def test_completion_rows_make_a_log_alone_ok(row):
    assert row.needle in row.example
    failure = classify(f"loading data\n{row.example}\n")
    assert failure.kind == "ok" and "no step time" in failure.reason
    # a failure printed after it still wins
    assert classify(f"{row.example}\nRuntimeError: CUDA error: an illegal memory access was encountered\n"
                    ).kind == "crashed"


# ---- hardware: Xid codes by the catalogue, and unknown codes by their text
@pytest.mark.parametrize("code, text, kind", [
    (145, "NVLink RLW error", "node_failure"), (119, "GSP RPC timeout", "node_failure"),
    (154, "GPU recovery action changed to 0x2 (reset required)", "node_failure"),
    (13, "Graphics Exception: ESR 0x5", "unknown"), (43, "Ch 00000008", "unknown"),
    (231, "uncorrectable DRAM ECC error in partition 3", "node_failure"),  # not in the catalogue; text says ECC
    (232, "unknown engine event 0x3", "unknown"),  # not in the catalogue; nothing says hardware
])
def test_xid_lines_by_catalogue_and_by_text(code, text, kind):
    line = f"kernel: NVRM: Xid (PCI:0000:5d:00): {code}, pid=8812, name=python, {text}"
    failure = classify(f"{line}\n")
    assert failure.kind == kind, failure.reason
    if kind == "node_failure":
        assert f"Xid {code}" in failure.reason


def test_catalogue_meanings_name_the_fault():
    assert hardware.XID_CATALOGUE[79][0] == "GPU has fallen off the bus" and 79 in hardware.HARDWARE_XIDS
    assert 31 not in hardware.HARDWARE_XIDS and 45 not in hardware.HARDWARE_XIDS


@pytest.mark.parametrize("line", [
    "GPU 2: NVLink 7 reported an uncorrectable error; link disabled",
    "ECC: double-bit error on GPU 0000:db:00.0, page retired",
    "pcieport 0000:80:03.0: AER: Uncorrected (Fatal) error received: id=8018",
])
def test_hardware_shapes(line):
    assert classify(f"training...\n{line}\n").kind == "node_failure"


@pytest.mark.parametrize("line", [
    "NCCL INFO Channel 00 : 0[0] -> 1[1] via P2P/NVLink",  # topology, not a fault
    "ECC mode: Enabled",
    "[rank0] NVLink SHARP enabled: 0",
])
def test_hardware_look_alikes(line):
    # exit 0: a log alone that ends in NCCL INFO set-up is a hang (families.stall); here only the signatures count
    assert classify(f"{line}\n", exit_code=0).kind == "unknown"


# ---- network: NCCL WARN failure forms, the NCCLCHECK trace, benign WARNs
@pytest.mark.parametrize("line", network.NCCL_WARN_EXAMPLES + (network.NCCL_TRACE_EXAMPLE,))
def test_nccl_failure_shapes(line):
    failure = classify(f"init\n{line}\n")
    assert failure.kind == "comm_error", failure.reason


@pytest.mark.parametrize("line", [
    "n1:1:1 [0] NCCL INFO NET/Plugin: Failed to find ncclNetPlugin_v8 symbol.",
    "n1:1:1 [0] NCCL WARN NET/Plugin : Plugin load (libnccl-net.so) returned 2 : libnccl-net.so: cannot open "
    "shared object file: No such file or directory",
    "n1:1:1 [0] NCCL INFO transport/net.cc:1302 -> 0",
    "n1:1:1 [0] NCCL WARN Could not find real path of /sys/class/net/eth0/device",
])
def test_nccl_chatter_is_not_a_failure(line):
    assert classify(f"{line}\n", exit_code=0).kind == "unknown"  # exit 0: see test_hardware_look_alikes


# ---- config: rules stated in any wording
@pytest.mark.parametrize("line", config.EXAMPLES)
def test_config_shapes(line):
    failure = classify(f"Traceback (most recent call last):\n  File \"train.py\", line 3\n{line}\n", exit_code=1)
    assert failure.kind == "config_error", failure.reason
    assert not failure.retryable


def test_a_bare_assertion_in_dataset_building_is_config():
    text = ("Traceback (most recent call last):\n  File \"/opt/megatron/core/datasets/blended_megatron_dataset_"
            "builder.py\", line 210, in build\n    assert sum(weights) > 0\nAssertionError\n")
    assert classify(text, exit_code=1).kind == "config_error"


@pytest.mark.parametrize("line", [
    "ValueError: could not convert string to float: 'abc'",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "AssertionError: 7 != 8",
    "RuntimeError: The size of tensor a (64) must match the size of tensor b (32) at non-singleton dimension 1",
])
def test_config_look_alikes(line):
    assert classify(f"Traceback (most recent call last):\n{line}\n", exit_code=1).kind != "config_error"


# ---- orchestrators
@pytest.mark.parametrize("line, kind", [
    ("W0101 10:00:00.000000 77 torch/distributed/elastic/agent/server/api.py:704] Received Signals.SIGHUP death "
     "signal, shutting down workers", "cancelled"),
    ("Warning  Preempted  pod/worker-1  Preempted by pod 99aa on node gpu-7", "preempted"),
    ("metadata agent: preemptible VM termination notice received", "preempted"),
    ("Reason: DeadlineExceeded  Message: Pod was active on the node longer than the specified deadline",
     "time_limit"),
    ("The node with node id: ab12 and address: 10.1.1.1 and node name: w3 has been marked dead because the detector "
     "has missed too many heartbeats from it.", "node_failure"),
])
def test_orchestrator_events(line, kind):
    failure = classify(f"step 1\n{line}\nTraceback (most recent call last):\nRuntimeError: x\n")
    assert failure.kind == kind, failure.reason


def test_a_time_limit_beats_the_death_signal_it_causes():
    text = ("slurmstepd: error: *** STEP 77.0 ON n3 CANCELLED AT 2025-01-01T00:00:00 DUE TO TIME LIMIT ***\n"
            "torch/distributed/elastic/agent/server/api.py:704] Received 15 death signal, shutting down workers\n")
    assert classify(text).kind == "time_limit"


def test_node_memory_eviction_is_oom_other_evictions_are_preemptions():
    assert classify("Reason: Evicted  Message: The node was low on resource: memory.\n").kind == "oom"
    assert classify("Reason: Evicted  Message: The node was low on resource: ephemeral-storage.\n").kind == "preempted"


# ---- divergence: text, Megatron records, loss series
def test_a_loss_that_ends_nan_is_diverged_and_not_retried():
    text = "\n".join([f"iter {i}: loss {3.0 - i / 100:.4f}, time 500.00ms" for i in range(1, 30)]
                     + [f"iter {i}: loss nan, time 480.00ms" for i in range(30, 33)])
    out = trial_outcome(text)
    assert out.failure_kind == "diverged" and "nan" in out.reason and out.metrics == {}
    failure = classify(text, losses=(1.0, float("nan")))
    assert (failure.retryable, failure.exclude_node, failure.max_retries) == (False, False, 0)


def test_a_nan_the_run_got_past_is_not_diverged():
    text = "\n".join(f"iter {i}: loss {'nan' if i == 10 else '2.5'}, time 500.00ms" for i in range(1, 30))
    assert trial_outcome(text).failure_kind == "ok"


def _megatron(i: int, fields: str) -> str:
    return (f" iteration {i:8d}/ 100000 | consumed samples: {i * 64:10d} | elapsed time per iteration (ms): 900.0 | "
            f"learning rate: 1.000E-04 | global batch size: 64 | {fields}")


def test_megatron_records_without_a_loss():
    healthy = [_megatron(i, "lm loss: 2.500000E+00 | loss scale: 1.0 | number of skipped iterations: 0 | "
                            "number of nan iterations: 0 |") for i in (10, 20, 30)]
    nan_loss = _megatron(40, "loss scale: 1.0 | grad norm: nan | number of skipped iterations: 0 | "
                             "number of nan iterations: 0 |")
    out = trial_outcome("\n".join(healthy + [nan_loss]) + "\n")
    assert out.failure_kind == "diverged" and "no loss" in out.reason
    fp16_search = [_megatron(i, f"loss scale: {2.0 ** (32 - i // 5):.1f} | number of skipped iterations: 5 | "
                                "number of nan iterations: 0 |") for i in (5, 10)]
    assert trial_outcome("\n".join(fp16_search) + "\n").failure_kind != "diverged"  # the start of fp16 training
    skipping = [_megatron(i, f"loss scale: {2.0 ** -i:.6f} | number of skipped iterations: 10 | "
                             "number of nan iterations: 0 |") for i in (50, 60, 70)]
    out = trial_outcome("\n".join(healthy + skipping) + "\n")
    assert out.failure_kind == "diverged" and "skipped" in out.reason
    nan_counted = _megatron(40, "lm loss: 2.4E+00 | loss scale: 1.0 | number of skipped iterations: 0 | "
                                "number of nan iterations: 3 |")
    assert trial_outcome("\n".join(healthy + [nan_counted]) + "\n").failure_kind == "diverged"


def test_diverged_is_a_failed_trial_in_the_ledger():
    assert state_for_kind("diverged") is TrialState.FAILED
    assert FailureKind("diverged") is FailureKind.DIVERGED and not FailureKind.DIVERGED.retryable
    assert "same seed" in FailureKind.DIVERGED.description


def test_a_long_log_is_searched_in_its_head_and_tail_with_true_line_numbers():
    filler = "".join(f"info line {i} nothing to see\n" for i in range(300_000))  # ~8.7 MB
    assert len(filler) > 8_000_000
    text = "start\n" + filler + "RuntimeError: CUDA error: an illegal memory access was encountered\n"
    failure = classify(text)
    assert failure.kind == "crashed"
    assert failure.evidence[0] == (300_002, "RuntimeError: CUDA error: an illegal memory access was encountered")
    early = "ModuleNotFoundError: No module named 'apex'\n" + filler
    assert classify(early, exit_code=1).kind == "config_error"


# ---- families found missing by out-of-sample batch 2 (OUT_OF_SAMPLE.md); every line written for the test

def test_missing_training_data_is_config_even_when_a_follow_on_error_ends_the_run():
    text = ("building GPT datasets ...\n"
            "Dataset does not exist: /lustre/corpora/wiki/wiki_text_document\n"
            "Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n"
            "    n = ds.sizes.shape[0]\nAttributeError: 'NoneType' object has no attribute 'sizes'\n")
    failure = classify(text)
    assert failure.kind == "config_error" and "does not exist" in failure.reason
    shaped = "ValueError: validation manifest /data/asr/dev.json does not exist\n"  # no row's own wording
    assert classify(shaped).kind == "config_error"


@pytest.mark.parametrize("line", [
    "Resolving data files: 100%|##########| 12/12 [00:00<00:00, 310.2it/s]",
    "checkpoint directory /ckpt/run1 not found, starting from scratch",
    "KeyError: 'label' not found in the batch",
])
def test_missing_data_look_alikes(line):
    assert classify(f"{line}\n").kind != "config_error"


def test_an_exception_without_a_traceback_header_is_judged_by_its_type_and_message():
    debugger = ("Exception has occurred: RuntimeError       (note: full exception trace is shown but execution is "
                "paused at: main)\nindex 7 is out of bounds for dimension 0 with size 4\n"
                '  File "/src/model/heads.py", line 88, in forward\n    logits = table[idx]\n'
                '  File "/src/train.py", line 12, in step\n    out = model(batch)\n')
    failure = classify(debugger)
    assert failure.kind == "crashed" and "RuntimeError: index 7 is out of bounds" in failure.reason
    config_msg = ("ValueError: global batch size 96 must be divisible by micro batch size 5 x data parallel 4\n"
                  '  File "/src/args.py", line 40, in validate\n    raise ValueError(msg)\n')
    assert classify(config_msg).kind == "config_error"
    stack_dump = ('Thread 0x7f (most recent call first):\n  File "/src/loader.py", line 3, in wait\n'
                  '  File "/src/train.py", line 12, in step\n')
    # frames with no exception above them: not a crash; under faulthandler's thread header, a live dump (a hang's
    # evidence, families.dumps)
    assert classify(stack_dump).kind == "hang"


def _ds_progress(step: int, skipped: int) -> str:
    return f"[2026-01-01 00:00:00,000] [INFO] [logging.py:96:log_dist] [Rank 0] step={step}, skipped={skipped}, " \
           "lr=[0.0001], mom=[(0.9, 0.999)]"


def test_deepspeed_skipping_nearly_every_step_is_diverged():
    losses = "\n".join(f"{{'loss': 0.0, 'learning_rate': 0.0001, 'epoch': 0.{i}}}" for i in range(1, 4))
    one_line = classify(f"{_ds_progress(600, 590)}\n{losses}\n", has_result=True)
    assert one_line.kind == "diverged" and "skipped 590 of 600" in one_line.reason
    interval = classify(f"{_ds_progress(100, 8)}\n{_ds_progress(200, 105)}\n")  # every step since step 100
    assert interval.kind == "diverged" and "97 of the last 100" in interval.reason


@pytest.mark.parametrize("lines", [
    [(600, 12)],  # the loss-scale search at the start skipped a few steps
    [(40, 38)],  # too few steps to tell the start-up search from a collapse
    [(500, 480), (1000, 484)],  # it skipped nearly everything early, then recovered
])
def test_deepspeed_skips_of_a_healthy_run_are_not_diverged(lines):
    text = "\n".join(_ds_progress(s, k) for s, k in lines) + "\n"
    assert classify(text, has_result=True).kind == "ok"


@pytest.mark.parametrize("line", [
    "max sequence length reached, truncating the sample",
    "Reached max retries for the download",
])
def test_step_budget_look_alikes_are_not_completion(line):
    assert classify(f"loading data\n{line}\n").kind == "unknown"


def test_a_killed_child_after_a_cgroup_oom_report_is_oom():
    text = ("slurmstepd: error: Detected 1 oom-kill event(s) in StepId=42.batch cgroup. Some of your processes may "
            "have been killed by the cgroup out-of-memory handler.\n"
            + "\n".join(f"Epoch: [0][{i}/900]\t Loss 0.{i:03d}" for i in range(10, 200, 10)) + "\nKilled\n")
    assert classify(text).kind == "oom" and "oom-kill event" in classify(text).reason
    # without the report, the bare SIGKILL is still the OOM killer's usual work (judge56), said as a reading
    bare = classify(text.split("\n", 1)[1])
    assert bare.kind == "oom" and "a SIGKILL with no error above it" in bare.reason


def _overflow(prev: float, cur: float) -> str:
    return (f"[2026-01-01 00:00:00,000] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 "
            f"Skipping step. Attempted loss scale: {prev:g}, reducing to {cur:g}")


def test_a_deepspeed_loss_scale_halved_on_every_step_down_to_a_few_units_is_diverged():
    bar = "  9%|9         | {i}/2000 [01:00<10:00,  1.50s/it]"
    lines = [f"{bar.format(i=i)}{_overflow(2.0 ** (9 - i), 2.0 ** (8 - i))}" for i in range(1, 8)]  # 256 ... 2
    failure = classify("\n".join(lines) + "\n")
    assert failure.kind == "diverged" and "fell on 4 overflows in a row to 2" in failure.reason


@pytest.mark.parametrize("scales", [
    [(65536, 32768), (32768, 16384), (16384, 8192), (8192, 4096)],  # a normal start-up search: still thousands
    [(64, 32), (32, 16), (32, 16), (16, 8)],  # the scale rose in between (a clean window): not one collapse
    [(16, 8), (8, 4), (4, 2)],  # too few overflows to call it
])
def test_deepspeed_overflows_of_a_healthy_run_are_not_diverged(scales):
    text = "\n".join(_overflow(p, c) for p, c in scales) + "\n{'loss': 1.9, 'learning_rate': 1e-05, 'epoch': 0.5}\n"
    assert classify(text, has_result=True).kind == "ok"


def test_a_deepspeed_start_up_loss_scale_search_alone_is_a_run_that_took_steps():
    search = "\n".join(_overflow(2.0 ** k, 2.0 ** (k - 1)) for k in range(32, 27, -1)) + "\n"  # 2^32 ... 2^28
    failure = classify(f"Beginning of Epoch 1/16, Total Micro Batches 1840\n{search}")
    assert failure.kind == "ok" and "no step time" in failure.reason
    collapse = "\n".join(_overflow(2.0 ** k, 2.0 ** (k - 1)) for k in range(8, 1, -1)) + "\n"  # 256 ... 2
    assert classify(collapse).kind == "diverged"  # the divergence rule is checked first


@pytest.mark.parametrize("postfix, kind", [
    ("reduced_train_loss=nan.0, global_step=9e+3, train_step_timing in s=0.615", "diverged"),
    ("loss=inf, v_num=3", "diverged"),
    ("loss=2.31, nan_count=0, v_num=3", "ok"),
])
def test_a_progress_bar_ending_with_a_nan_training_loss_is_diverged(postfix, kind):
    bar = "Epoch 0:   3%|▎         | {n}/301500 [1:42:42<55:37:46,  1.62it/s, {postfix}]"
    healthy = bar.format(n=8999, postfix="reduced_train_loss=2.6, train_step_timing in s=0.61, v_num=0")
    failure = classify(f"{healthy}\n{bar.format(n=9000, postfix=postfix)}\n", has_result=True)
    assert failure.kind == kind, failure.reason
    # a NaN the bar printed before the run went on is not where the run ended
    if kind == "diverged":
        assert classify(f"{bar.format(n=9000, postfix=postfix)}\n{healthy}\n", has_result=True).kind == "ok"


@pytest.mark.parametrize("text, kind, quoted", [
    ("AssertionError: last epoch number of samples exceeded max value.\n", "config_error", "exceeded max value"),
    ("[rank3]: RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cpu "
     "and cuda:3!\n", "crashed", "Expected all tensors"),
    ("RuntimeError: Error(s) in loading state_dict for DataParallel:\n\tMissing key(s) in state_dict: "
     "\"module.encoder.conv1.weight\", \"module.encoder.bn1\n.weight\"...\n", "crashed", "Error(s) in loading"),
])
def test_a_bare_exception_line_is_the_jobs_error(text, kind, quoted):
    failure = classify(text)
    assert failure.kind == kind and quoted in failure.reason


@pytest.mark.parametrize("line", [
    "[W] the loader caught ValueError: bad image, skipping sample 17",  # not at the start of a line
    "UserWarning: torch.cuda.amp.GradScaler is deprecated",  # a warning, not an error
    "Error: 0 of 12 checks failed",  # no exception type
])
def test_exception_words_inside_log_lines_are_not_a_crash(line):
    assert classify(f"loading data\n{line}\n").kind == "unknown"


def test_a_traceback_python_reports_as_ignored_does_not_end_a_healthy_run():
    bar = "Epoch 1: 100%|██████████| 1017/1017 [00:09<00:00, 100.37it/s, loss=0.336, v_num=24]"
    ignored = ("Exception ignored in: <function tqdm.__del__ at 0x7fd9c4374f80>\nTraceback (most recent call last):\n"
               '  File "/env/lib/python3.8/site-packages/tqdm/std.py", line 1145, in __del__\n'
               "AttributeError: 'tqdm' object has no attribute 'last_print_t'\n")
    assert classify(f"{bar}\n{ignored}", has_result=True).kind == "ok"
    real = ('Traceback (most recent call last):\n  File "train.py", line 9, in <module>\n'
            "RuntimeError: CUDA error: device-side assert triggered\n")
    failure = classify(f"{bar}\n{ignored}{real}", has_result=True)
    assert failure.kind == "crashed" and "device-side assert" in failure.reason


def test_a_ray_actor_whose_node_died_is_a_node_failure_unless_the_node_was_taken_back():
    died = ("ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task.\n"
            "\tclass_name: RayTrainWorker\nThe actor is dead because its node has died. Node Id: 677df2\n"
            "Traceback (most recent call last):\n")
    assert classify(died).kind == "node_failure"
    preempted = ("The actor died because its node has died. Node Id: 9a1b\n"
                 "\tthe actor's node was preempted: spot instance reclaimed\n")
    assert classify(preempted).kind == "preempted"
    expected = ("The actor died because its node has died. Node Id: 9a1b\n"
                "\tthe actor's node was terminated expectedly: received SIGTERM\n")
    assert classify(expected).kind == "cancelled"


@pytest.mark.parametrize("message, kind", [
    ("Cuda failure 1 'invalid argument'", "comm_error"),
    ("Cuda failure 'out of memory'", "oom"),
])
def test_nccl_cuda_failures(message, kind):
    line = f"n176:2657296:2658232 [0] include/alloc.h:102 NCCL WARN {message}"
    assert classify(f"n176:2657296:2658229 [0] NCCL INFO Connected all rings\n{line}\n").kind == kind
