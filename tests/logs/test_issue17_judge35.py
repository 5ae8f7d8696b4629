"""Issue 17 (helper judge35): batch 31's misses as families. A loss rounded to 0.0 after decaying below the printed
precision is no divergence; torch's device-string parse errors and the HF Trainer's column checks are configuration
errors; an overflow that lowers the fp16 loss scale to 0 is a collapse. Each: a real line with its source,
look-alikes that must not match."""

from __future__ import annotations

import pytest
from log_fixtures import body

from analysis.logs.classify import classify
from analysis.logs.families import first_match
from analysis.logs.families.config import DEVICE_STRING, TRAINER_COLUMNS
from analysis.logs.families.divergence import ROUNDED_ZERO_LOSS, scale_reduced_to_zero, series_diverged
from analysis.logs.outcome import trial_outcome
from launcher.core.kinds import FailureKind

# ---- 1. a loss printed as 0.0 after rounding
# huggingface/transformers src/transformers/trainer.py (4.x) _maybe_log_save_evaluate:
# logs["loss"] = round(tr_loss_scalar / (self.state.global_step - self._globalstep_last_logged), 4)
_OVERFIT = "oos-batch31/deepspeed/a_hf_trainer_llama70b_qlora_8gpu_100_epochs_complete_1.log"
_ZERO_DIVERGED = [  # a loss that falls to 0.0 from a real level: broken runs, each stays diverged
    "oos-batch5/deepspeed/zeropp_hpz_llama2_7b_loss_zero_from_step3_1.log",
    "oos-batch31/hf_trainer/c_trl_dpo_175_steps_loss_2e9_then_zero_nan_rewards_1.log",
]


def test_an_overfit_trainer_run_rounding_to_zero_is_ok():
    out = trial_outcome(body(_OVERFIT))
    assert out.failure_kind == FailureKind.OK.value


@pytest.mark.parametrize("path", _ZERO_DIVERGED)
def test_a_loss_falling_to_zero_from_a_real_level_stays_diverged(path):
    assert trial_outcome(body(path)).failure_kind == FailureKind.DIVERGED.value


def test_rounded_zero_needs_a_last_positive_loss_below_the_precision():
    decayed = [2.1, 0.8, 0.01, 0.0002, 0.0001, 0.0, 0.0, 0.0]
    assert series_diverged(decayed) is None
    assert series_diverged([2.1, 1.9, 1.8, 0.0, 0.0]) is not None  # a jump from 1.8 to zero
    assert series_diverged([2.1, ROUNDED_ZERO_LOSS, 0.0]) is not None  # at the threshold: not below the precision
    assert series_diverged([0.0002, 0.0001, float("nan")]) is not None  # a NaN still ends a series diverged


# ---- 2. configuration errors: torch's device string, the Trainer's columns
# pytorch/pytorch c10/core/Device.cpp (v2.4.0) parse_type / Device::Device(const std::string&)
_DEVICE_REAL = ("RuntimeError: Expected one of cpu, cuda, ipu, xpu, mkldnn, opengl, opencl, ideep, hip, ve, fpga, ort, "
                "xla, lazy, vulkan, mps, meta, hpu, mtia, privateuseone device type at start of device string: auto")
_DEVICE_OLD = ("RuntimeError: Expected one of cpu, cuda, mkldnn, opengl, opencl, ideep, hip, msnpu device type at start "
               "of device string: gpu")
_DEVICE_LOOKALIKES = [
    "Failed to initialize CNN model: Expected one of cpu, cuda, ... device type at start of device string: auto",
    "WARNING: RuntimeError: Invalid device string: 'cuda:x', falling back to cpu",
    "device string: auto",
    "RuntimeError: Expected all tensors to be on the same device, but found at least two devices, cuda:0 and cpu!",
]


@pytest.mark.parametrize("line", [_DEVICE_REAL, _DEVICE_OLD, "RuntimeError: Invalid device string: 'cuda:abc'",
                                  "RuntimeError: Device string must not be empty"])
def test_torch_device_string_errors_match(line):
    assert first_match(f"step 0\n{line}\n", DEVICE_STRING) is not None


@pytest.mark.parametrize("line", _DEVICE_LOOKALIKES)
def test_device_string_lookalikes_do_not_match(line):
    assert first_match(f"step 0\n{line}\n", DEVICE_STRING) is None


# huggingface/transformers src/transformers/trainer.py (v4.44.0) _remove_unused_columns, _prepare_inputs
_COLUMNS_REAL = ("ValueError: No columns in the dataset match the model's forward method signature: (inputs, kwargs, "
                 "label, label_ids). The following columns have been ignored: [attention_mask, input_ids]. Please "
                 "check the dataset and model. You may need to set `remove_unused_columns=False` in "
                 "`TrainingArguments`.")
_COLUMNS_LOOKALIKES = [
    "The following columns in the training set don't have a corresponding argument in `LlamaForCausalLM.forward` "
    "and have been ignored: text.",
    "# No columns in the dataset match the model's forward method signature is raised when remove_unused_columns",
    "ValueError: The batch size received was empty",
]


@pytest.mark.parametrize("line", [_COLUMNS_REAL,
                                  "ValueError: The batch received was empty, your model won't be able to train on "
                                  "it. Double-check that your training dataset contains keys expected by the model: "
                                  "input_ids,labels."])
def test_trainer_column_checks_match(line):
    assert first_match(f"{line}\n", TRAINER_COLUMNS) is not None


@pytest.mark.parametrize("line", _COLUMNS_LOOKALIKES)
def test_trainer_column_lookalikes_do_not_match(line):
    assert first_match(f"{line}\n", TRAINER_COLUMNS) is None


@pytest.mark.parametrize("path", [
    "oos-batch31/deepspeed/b_stic_llava_next_video_dpo_qlora_device_map_auto_string_1.log",
    "oos-batch31/hf_trainer/a_trl_unsloth_llama70b_lora_no_columns_match_forward_1.log",
])
def test_real_logs_are_config_errors(path):
    assert classify(body(path)).kind == FailureKind.CONFIG_ERROR


# ---- 3. an overflow that lowers the fp16 loss scale to 0
# deepspeedai/DeepSpeed deepspeed/runtime/fp16/loss_scaler.py (v0.10.0) DynamicLossScaler.update_scale:
# logger.info(f"[deepspeed] OVERFLOW! Rank {dist.get_rank()} Skipping step. Attempted loss scale: {prev_scale}, "
#             f"reducing to {self.cur_scale}")
_ZERO_SCALE = "oos-batch31/deepspeed/c_chinese_llama2_pt_peft_fp16_overflow_loss_scale_zero_exit_1.log"
_OVERFLOW = ("[INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 Skipping step. "
             "Attempted loss scale: {}, reducing to {}\n")


def test_a_real_scale_reduced_to_zero_is_a_divergence():
    assert classify(body(_ZERO_SCALE)).kind == FailureKind.DIVERGED


@pytest.mark.parametrize("text", [
    '"fp16": {"enabled": true, "loss_scale": 0, "initial_scale_power": 16}\n',  # the config: dynamic scaling
    "  loss_scale ...................... 0\n",  # Megatron's argument dump
    _OVERFLOW.format(0, 0) + _OVERFLOW.format(65536, 32768),  # a later overflow left a real scale
    _OVERFLOW.format(65536, 32768),
    "loss scale reducing to 0.5 after overflow\n",
])
def test_scale_zero_lookalikes_are_no_collapse(text):
    assert scale_reduced_to_zero(text) is None


@pytest.mark.parametrize("text", [_OVERFLOW.format(0, 0), _OVERFLOW.format(1, 0),
                                  "Gradient overflow. Reducing loss scale from 1.0 to 0.0\n"])
def test_scale_reduced_to_zero_lines(text):
    assert scale_reduced_to_zero(text) is not None
