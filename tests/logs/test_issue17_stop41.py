"""Issue 17 (in sample, coordinator, stop 41). (1) A trainer's `grad_norm` record field that ends NaN is a divergence,
as Megatron's printed NaN grad norm already is (families.divergence.trainer_grad_norm_diverged). fp16's loss scaler
skips an overflowed step instead: DeepSpeed's OVERFLOW line, or an inf norm followed by finite ones, is no verdict.
(2) A DeepSpeed config argument that is not a file fails in DeepSpeedConfig's base64 fallback: the configuration
family (families.config.CONFIG_FILE). (3) Batch 39's misses as families: DeepSpeed's launcher finding no device
(NO_GPU), an error asking for a minimum package version (VERSION_FLOOR), an installed package instantiating a plug-in
class that lacks its base's abstract methods (cross_library_call), an exception quoting a setting as `name=value`
(QUOTED_SETTING), detectron2's "Loss became infinite or NaN", a loss scale printed with 16 digits. Records: real lines with their source."""

from __future__ import annotations

import math

import pytest

from analysis.logs.families import divergence
from analysis.logs.outcome import trial_outcome

# https://github.com/modelscope/ms-swift/issues/2280 (oos-batch12): swift sft of Qwen2.5-VL with ZeRO-2, the first
# step's grad norm 6.08, then nan with a finite loss (the HF Trainer's dict records, shortened).
_SWIFT = ("{'loss': 2.3184967, 'token_acc': 0.5, 'grad_norm': 6.08488035, 'learning_rate': 1e-05, 'epoch': 0.0, "
          "'global_step/max_steps': '1/5130'}\n"
          "{'loss': 2.0832541, 'token_acc': 0.52479339, 'grad_norm': nan, 'learning_rate': 1e-05, 'epoch': 0.0, "
          "'global_step/max_steps': '2/5130'}\n")
# https://github.com/modelscope/ms-swift/issues/2436 (oos-batch33): swift's json.dumps records print NaN.
_SWIFT_JSON = ('{"loss": 2.23150921, "acc": 0.26, "grad_norm": 4.16534615, "learning_rate": 1.617e-05, '
               '"global_step/max_steps": "8270/11043"}\n'
               '{"loss": 2.23302879, "acc": 0.26443233, "grad_norm": NaN, "learning_rate": 1.617e-05, '
               '"global_step/max_steps": "8280/11043"}\n')
# DeepSpeed runtime/fp16/loss_scaler.py's overflow line (DynamicLossScaler.update_scale): the step was skipped.
_DS_OVERFLOW = ("[2023-12-21 16:35:32,112] [INFO] [loss_scaler.py:183:update_scale] [deepspeed] OVERFLOW! Rank 0 "
                "Skipping step. Attempted loss scale: 65536, reducing to 32768\n")


def test_a_last_nan_grad_norm_record_is_diverged() -> None:
    assert trial_outcome(_SWIFT).failure_kind == "diverged"
    assert trial_outcome(_SWIFT_JSON).failure_kind == "diverged"


def test_the_same_records_with_a_finite_last_norm_are_ok() -> None:
    healthy = _SWIFT.replace("'grad_norm': nan", "'grad_norm': 5.91")
    assert divergence.trainer_grad_norm_diverged(healthy) is None
    assert trial_outcome(healthy).failure_kind == "ok"


def test_a_nan_norm_the_run_recovered_from_is_no_verdict() -> None:
    assert divergence.trainer_grad_norm_diverged(_SWIFT + _SWIFT.split("\n")[0] + "\n") is None


def test_an_overflow_line_after_the_record_before_makes_it_a_skipped_step() -> None:
    first, last = _SWIFT.splitlines(keepends=True)
    assert divergence.trainer_grad_norm_diverged(first + _DS_OVERFLOW + last) is None


def test_one_inf_norm_is_a_scaler_skip_two_are_not() -> None:
    one_inf = _SWIFT.replace("'grad_norm': nan", "'grad_norm': inf")
    assert divergence.trainer_grad_norm_diverged(one_inf) is None
    two_inf = one_inf.replace("'grad_norm': 6.08488035", "'grad_norm': inf")
    found = divergence.trainer_grad_norm_diverged(two_inf)
    assert found is not None and "inf" in found[1]


def test_the_evidence_is_the_nan_record() -> None:
    found = divergence.trainer_grad_norm_diverged(_SWIFT)
    assert found is not None and _SWIFT[found[0]:].startswith("{'loss': 2.0832541")


# github stark-sim/megatron-deepspeed-lock-clock (oos-batch39, part d), shortened: Megatron-DeepSpeed given a
# DeepSpeed config path that is not a file; DeepSpeedConfig tries it as base64 (runtime/config.py) and the decode
# raises. The configuration family, not a crash.
_BASE64_CONFIG = """[rank13]: Traceback (most recent call last):
[rank13]:   File "/home/sd/Megatron-DeepSpeed/pretrain_gpt.py", line 360, in <module>
[rank13]:     pretrain(train_valid_test_datasets_provider,
[rank13]:   File "/home/sd/.local/lib/python3.10/site-packages/deepspeed/runtime/config.py", line 661, in __init__
[rank13]:     config_decoded = base64.urlsafe_b64decode(config).decode('utf-8')
[rank13]:   File "/usr/lib/python3.10/base64.py", line 87, in b64decode
[rank13]:     return binascii.a2b_base64(s)
[rank13]: binascii.Error: Incorrect padding
"""


def test_a_deepspeed_config_decoded_as_base64_is_a_missing_config_file() -> None:
    assert trial_outcome(_BASE64_CONFIG).failure_kind == "config_error"


def test_the_same_decode_error_elsewhere_is_not_a_config_file() -> None:
    other = _BASE64_CONFIG.replace("config_decoded = base64.urlsafe_b64decode(config).decode('utf-8')",
                                   "payload = base64.b64decode(blob)")
    assert trial_outcome(other).failure_kind == "crashed"


# (3) batch 39 part b's misses as families (in sample after the score). DeepSpeed launcher/runner.py with no device:
# intel/intel-extension-for-deepspeed (oos-batch39), shortened.
def test_the_deepspeed_launcher_finding_no_gpu_is_a_configuration_error() -> None:
    text = ("[2024-01-05 10:01:02,123] [INFO] [real_accelerator.py:191:get_accelerator] Setting ds_accelerator to xpu\n"
            "Traceback (most recent call last):\n"
            '  File "/usr/local/bin/deepspeed", line 6, in <module>\n    main()\n'
            '  File "/usr/local/lib/python3.10/site-packages/deepspeed/launcher/runner.py", line 460, in main\n'
            '    raise RuntimeError("Unable to proceed, no GPU resources available")\n'
            "RuntimeError: Unable to proceed, no GPU resources available\n")
    assert trial_outcome(text).failure_kind == "config_error"


# transformers trainer.py (4.2x) refusing an 8-bit model without a recent bitsandbytes (InternLM-XComposer, oos-batch39)
_FLOOR = ("ValueError: The model you want to train is loaded in 8-bit precision.  if you want to fine-tune an 8-bit "
          "model, please make sure that you have installed `bitsandbytes>=0.37.0`. ")


def test_an_error_asking_for_a_minimum_package_version_is_a_configuration_error() -> None:
    text = ('Traceback (most recent call last):\n  File "finetune.py", line 310, in train\n'
            "    trainer = Trainer(model=model, args=training_args)\n" + _FLOOR + "\n")
    assert trial_outcome(text).failure_kind == "config_error"
    assert trial_outcome(text.replace(_FLOOR, "ValueError: please check the model you want to train")
                         ).failure_kind == "crashed"


# intel/intel-extension-for-deepspeed#81 (oos-batch39): DeepSpeed instantiates the plug-in's accelerator, which lacks
# methods the installed DeepSpeed's abstract accelerator requires (a plug-in and host at versions that do not fit).
_ABSTRACT = ('  File "/home/u/miniconda3/envs/pytorch/lib/python3.10/site-packages/deepspeed/accelerator/'
             'real_accelerator.py", line 184, in get_accelerator\n'
             "    ds_accelerator = XPU_Accelerator()\n"
             "TypeError: Can't instantiate abstract class XPU_Accelerator with abstract methods available_memory, "
             "capture_to_graph, create_graph\n")


def test_a_package_instantiating_an_incomplete_plugin_class_is_a_version_mismatch() -> None:
    assert trial_outcome("Traceback (most recent call last):\n" + _ABSTRACT).failure_kind == "config_error"


def test_the_users_own_incomplete_class_is_a_crash() -> None:
    own = _ABSTRACT.replace("/home/u/miniconda3/envs/pytorch/lib/python3.10/site-packages/deepspeed/accelerator/"
                            "real_accelerator.py", "/home/u/project/train.py")
    assert trial_outcome("Traceback (most recent call last):\n" + own).failure_kind == "crashed"


# hiyouga/LLaMA-Factory (oos-batch39, an older release's wording of the PPO check): a refusal quoting `name=value`.
_PPO = ('Traceback (most recent call last):\n  File "src/train_bash.py", line 14, in <module>\n    main()\n'
        "ValueError: Freeze/Full PPO training needs `reward_model_type=full`.\n")


def test_an_exception_quoting_a_setting_to_change_is_a_configuration_error() -> None:
    assert trial_outcome(_PPO).failure_kind == "config_error"


def test_a_quoted_name_without_a_value_or_a_warning_is_not_a_refusal() -> None:
    assert trial_outcome(_PPO.replace("`reward_model_type=full`", "`reward_model`")).failure_kind == "crashed"
    warned = ("UserWarning: `use_cache=True` is incompatible with gradient checkpointing. Setting `use_cache=False`.\n"
              "{'loss': 1.2, 'learning_rate': 1e-05, 'epoch': 0.1}\n{'loss': 1.1, 'learning_rate': 1e-05, 'epoch': 0.2}\n"
              "{'train_runtime': 100.0, 'train_samples_per_second': 4.0, 'train_loss': 1.15, 'epoch': 0.2}\n")
    assert trial_outcome(warned).failure_kind == "ok"


# (5) batch 39 part a's misses as families. detectron2 engine/train_loop.py stops on a non-finite loss
# (facebookresearch/detectron2#508, oos-batch39).
def test_detectrons_loss_became_infinite_or_nan_is_diverged() -> None:
    text = ("[11/08 10:40:21 d2.utils.events]:  iter: 19  total_loss: 2.103  loss_cls: 0.951  time: 0.4121  lr: 0.000400\n"
            "Traceback (most recent call last):\n"
            '  File "detectron2/engine/train_loop.py", line 213, in _write_metrics\n'
            '    raise FloatingPointError(\n'
            "FloatingPointError: Loss became infinite or NaN at iteration=27!\n")
    assert trial_outcome(text).failure_kind == "diverged"


# NVIDIA/apex#318 (oos-batch39): amp's scaler halving to underflow, the scale printed as Python's float repr.
def test_a_loss_scale_printed_with_sixteen_digits_is_read() -> None:
    assert divergence.scale_reading("Gradient overflow. Skipping step, loss scaler 0 reducing loss scale to "
                                    "7.645295562778369e-298") == pytest.approx(math.log2(7.645295562778369e-298))
