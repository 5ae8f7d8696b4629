"""Issue 17 (helper judge32): batch 28's misses as families. A time over a window of N steps (HugeCTR's
`Time(1000 iters): 1.598919s`: the step time is the time over N, and N is no duration), tqdm's whole-second elapsed
column (a median of one-step differences of whole seconds is quantised), importlib.metadata's missing package (also
logged without its exception's name) and accelerate's own missing `--config_file`. Each: a real line with its
source, look-alikes that must not match."""

from __future__ import annotations

import pytest
from log_fixtures import body

from analysis.logs.classify import classify
from analysis.logs.parse_generic import BarDrawing, bar_step_times, read_records
from analysis.logs.parse_megatron import Iteration
from analysis.logs.read_log import read_log
from analysis.logs.steady_state import steady_state

_BATCH28 = "oos-batch28/"


def _step_s(text: str) -> float:
    reading = read_records(text)
    assert reading.iterations, reading
    return steady_state(reading.iterations).median_step_time_s


# ---- 1. a time over the last N steps
# NVIDIA-Merlin/HugeCTR HugeCTR/src/pybind/model.cpp@0861cd7b76194aa0db555759268062fe61a36733, Model::fit:
#     HCTR_LOG_S(INFO, ROOT) << "Iter: " << iter + 1 << " Time(" << display << " iters): "
#                            << timer_train.elapsedSeconds() << "s Loss: " << loss << std::endl;
#     timer_train.start();
@pytest.mark.parametrize("window, seconds", [(1000, 1.6), (200, 0.5), (50, 12.5)])
def test_a_time_over_n_iterations_is_divided_by_n(window, seconds):
    text = "".join(f"[HUGECTR][INFO]: Iter: {window * i} Time({window} iters): {seconds + 0.001 * (i % 2):f}s "
                   f"Loss: 0.000000\n" for i in range(1, 30))
    assert _step_s(text) == pytest.approx(seconds / window, rel=0.01)


@pytest.mark.parametrize("line", [
    "Iter: {i}000 Time(1000 iters): {t}s Loss: 0.1",
    "step {i}000 | time (1000 steps) = {t} s | loss 0.1",
])
def test_the_window_is_never_read_as_a_duration(line):
    text = "".join(line.format(i=i, t=1.5 + 0.01 * (i % 3)) + "\n" for i in range(1, 20))
    assert _step_s(text) < 0.01  # 1.5 s over 1000 steps, not 1000 s nor 1.5 s


def test_a_bare_iteration_time_is_unchanged():
    text = "".join(f"Iter: {i} Time: 1.5s Loss: 0.1\n" for i in range(1, 20))
    assert _step_s(text) == pytest.approx(1.5)


def test_the_hugectr_log_of_batch_28_reads_its_step_time():
    reading = read_log(body(_BATCH28 + "other/b_mlperf_v11_azure_hugectr_dlrm_hits_target_auc_1.log"))
    assert steady_state(reading.iterations).median_step_time_s == pytest.approx(0.0016024, rel=0.05)


# ---- 3. a missing install and a missing launcher configuration
# python/cpython Lib/importlib/metadata/__init__.py@39c253627a96f858781400948ecbdab34221d0f0, PackageNotFoundError:
#     def __str__(self) -> str:
#         return f"No package metadata was found for {self.name}"
@pytest.mark.parametrize("line", [
    "importlib.metadata.PackageNotFoundError: No package metadata was found for bitsandbytes",
    "2025-04-25 12:53:29,221 - finetune - ERROR - model load failed: No package metadata was found for bitsandbytes",
])
def test_no_package_metadata_is_a_missing_install(line):
    failure = classify(f"loading model\n{line}\n")
    assert failure.kind == "config_error", failure.reason


def test_the_xllm_log_of_batch_28_is_config():
    text = body(_BATCH28 + "other/c_xllm_llmsr_llama3_8b_qlora_finetune_no_bitsandbytes_package_1.log")
    assert classify(text).kind == "config_error"


# huggingface/accelerate src/accelerate/commands/config/config_args.py@6a0677cc2778d9e807f97e386a29eab0522d1731,
# load_config_from_file:
#     raise FileNotFoundError(f"The passed configuration file `{config_file}` does not exist. "
#                             "Please pass an existing file to `accelerate launch`, or use the default one ...")
def test_accelerates_missing_config_file_is_config():
    text = ("Traceback (most recent call last):\n  File \"/env/bin/accelerate\", line 8, in <module>\n"
            "FileNotFoundError: The passed configuration file `recipes/accelerate_configs/zero3.yaml` does not exist. "
            "Please pass an existing file to `accelerate launch`, or use the default one created through `accelerate "
            "config` and run `accelerate launch` without the `--config_file` argument.\n")
    failure = classify(text)
    assert failure.kind == "config_error", failure.reason
    assert "configuration file" in failure.reason


def test_the_alignment_handbook_config_log_of_batch_28_is_config():
    text = body(_BATCH28 + "deepspeed/a_alignment_handbook_accelerate_zero3_config_file_does_not_exist_1.log")
    assert classify(text).kind == "config_error"


@pytest.mark.parametrize("text", [
    # a version probe that falls back: a warning, the run goes on
    "WARNING: No package metadata was found for flash_attn, using the default kernels\nstep 1 loss 2.0\n",
    # a data or checkpoint file missing mid-run is not the launcher's configuration
    "Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\nFileNotFoundError: The checkpoint "
    "file `ckpt/step_400.pt` does not exist.\n",
    "Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\nFileNotFoundError: [Errno 2] No "
    "such file or directory: 'data/shard_0007.bin'\n",
])
def test_look_alikes_are_not_a_missing_install_or_config(text):
    failure = classify(text)
    assert "installed" not in failure.reason and "configuration file the launcher" not in failure.reason, failure


# ---- 2. tqdm's elapsed column is whole seconds
# tqdm/tqdm tqdm/std.py@5dcab08071690868fd6289948d9e3451098478d3 format_meter: `elapsed_str = tqdm.format_interval(elapsed)`, and format_interval(t) begins
# `mins, s = divmod(int(t), 60)`: the elapsed time truncated to whole seconds. One 11.2 s step a window reads 11 or
# 12 s, and the median of those is 11; windows of many steps keep the truncation's error small.
def _drawings(step_s: float, steps: int) -> list[BarDrawing]:
    return [BarDrawing(n, float(int(n * step_s)), step_s, 0) for n in range(1, steps + 1)]


@pytest.mark.parametrize("step_s", [11.2, 6.4, 2.37, 0.43])
def test_a_bar_of_whole_second_elapsed_reads_the_step_time_within_two_percent(step_s):
    source, steps = bar_step_times(_drawings(step_s, 150))
    assert source == "progress bar elapsed time"
    assert steady_state([Iteration(iteration=n, step_time_s=s) for n, s in steps]).median_step_time_s == \
        pytest.approx(step_s, rel=0.02)


def test_a_short_bar_keeps_its_short_windows():
    # 4 s in all: under two short windows, the rates stand in (unchanged by the long windows)
    source, _ = bar_step_times(_drawings(1.0, 4))
    assert source != "progress bar elapsed time"


def test_the_alignment_handbook_bar_of_batch_28_reads_its_rate():
    reading = read_log(body(_BATCH28 + "deepspeed/a_alignment_handbook_mistral7b_sft_zero3_eight_gpus_142_steps_"
                                       "completes_1.log"))
    assert steady_state(reading.iterations).median_step_time_s == pytest.approx(11.2, rel=0.01)  # the bar's 11.2 s/it


# ---- 4. a run-time data count is no configuration rule
# NVIDIA-NeMo/RL nemo_rl/distributed/batched_data_dict.py, BatchedDataDict.make_microbatch_iterator:
#     bsize = self.size
#     assert bsize % microbatch_size == 0, (
#         f"Data dict size ({bsize}) is not a multiple of the provided microbatch size ({microbatch_size})")
# where `size` is the leading dimension of the data the worker holds: a count of the data, not a setting
_NEMO_RL_FRAME = ('  File "/opt/nemo-rl/nemo_rl/distributed/batched_data_dict.py", line 612, in '
                  'make_microbatch_iterator\n    assert bsize % microbatch_size == 0, (\n')


def test_a_data_dict_size_not_a_multiple_is_not_config():
    text = ("Traceback (most recent call last):\n" + _NEMO_RL_FRAME
            + "AssertionError: Data dict size (249) is not a multiple of the provided microbatch size (2)\n")
    failure = classify(text)
    assert failure.kind == "crashed", failure.reason


@pytest.mark.parametrize("line", [
    "AssertionError: sequence length 4095 is not a multiple of tensor parallel size 2",  # a setting: still config
    "ValueError: global batch size 6 is not a multiple of micro batch size 4",
])
def test_a_setting_not_a_multiple_stays_config(line):
    failure = classify(f"Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n{line}\n")
    assert failure.kind == "config_error", failure.reason


def test_the_nemo_rl_logs_of_batches_14_and_28_are_crashed():
    for name in ("oos-batch14/nemo/nemorl_grpo_seq_packing_no_dynamic_batching_microbatch_assert_1.log",
                 _BATCH28 + "nemo/b_nemorl_dpo_llama31_8b_microbatch_multiple_assert_1.log"):
        assert classify(body(name)).kind == "crashed", name
