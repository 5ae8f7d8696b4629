"""Issue 17, batch 6's causes as families (judge7): configuration errors, crash signatures and hangs that a report
quotes in one to three lines. Each rule is tested on a real excerpt (the batch-6 log it comes from is named) and on
look-alikes written for these tests: lines of the same family in another framework's spelling, which must map to
the family, and lines that only share words with it, which must not."""

from __future__ import annotations

import pytest

from analysis.logs.outcome import trial_outcome


def kind(text: str) -> str:
    return trial_outcome(text).failure_kind


# ---- configuration errors
@pytest.mark.parametrize("text", [
    # deepspeed/anomalygpt_init_cpu_adam_no_ds_opt_adam_1.log (AnomalyGPT#24): the CPU Adam op did not build
    "AttributeError: 'DeepSpeedCPUAdam' object has no attribute 'ds_opt_adam'\n",
    # deepspeed/simple_grpo_cpu_adam_del_no_ds_opt_adam_1.log (simple_GRPO#7): only the destructor's ignored error
    "Exception ignored in: <function DeepSpeedCPUAdam.__del__ at 0x7fe9ffe7dc60>\nTraceback (most recent call last):\n"
    '  File "/env/lib/python3.11/site-packages/deepspeed/ops/adam/cpu_adam.py", line 102, in __del__\n'
    "AttributeError: 'DeepSpeedCPUAdam' object has no attribute 'ds_opt_adam'\n",
    # deepspeed/hf_zeropp_config_extra_fields_not_permitted_1.log (DeepSpeed#3827): pydantic v1 body
    "ValidationError: 3 validation errors for DeepSpeedZeroConfig\nzero_hpz_partition_size\n"
    "  extra fields not permitted (type=value_error.extra)\n",
    # other/auto_avsr_hydra_key_defaults_not_in_fairseqconfig_1.log (auto_avsr#3): Hydra merge, no class name
    "Error merging data/dataset=cstm\nKey 'defaults' not in 'FairseqConfig'\n\tfull_key: defaults\n"
    "\treference_type=Optional[FairseqConfig]\n\tobject_type=FairseqConfig\n\n"
    "Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.\n",
    # lightning/deepspeech_an4_key_period_not_in_checkpoint_conf_1.log (deepspeech.pytorch#670)
    "Key 'period' not in 'ModelCheckpointConf'\n    full_key: checkpoint.period\n    object_type=ModelCheckpointConf\n",
    # nemo/canary_codeswitch_aggregate_tokenizer_lang_assert_1.log (NeMo Speech#12690): a manifest without 'lang'
    "AssertionError: Expected 'lang' to be set for AggregateTokenizer.\n",
    # hf_trainer/alpaca_lora_resume_adapter_no_inf_checks_1.log: nothing trainable reaches GradScaler.step
    "AssertionError: No inf checks were recorded for this optimizer.\n",
    # hf_trainer/medicalgpt_resume_no_valid_checkpoint_1.log (MedicalGPT#91)
    "ValueError: Can't find a valid checkpoint at /finetune-sft/outputs-sft-v2/checkpoint-32500\n",
])
def test_batch6_configuration_errors(text):
    assert kind(text) == "config_error"


@pytest.mark.parametrize("text", [
    # other optimizers' op handles and extension modules built for another version
    "AttributeError: 'DeepSpeedCPUAdagrad' object has no attribute 'ds_opt_adagrad'\n",
    "[rank1]: AttributeError: 'DeepSpeedCPULion' object has no attribute 'ds_opt_lion'\n",
    "AttributeError: module 'fused_layer_norm_cuda' has no attribute 'rms_forward_affine'\n",
    "AttributeError: module 'torch._C' has no attribute '_cuda_setDevice'\n",
    "deepspeed.ops.op_builder.builder.CUDAMismatchException: >- DeepSpeed Op Builder: Installed CUDA version 11.7 "
    "does not match the version torch was compiled with 12.1\n",
    "RuntimeError: Ninja is required to load C++ extensions\n",
    "/usr/bin/ld: cannot find -laio\ncollect2: error: ld returned 1 exit status\n",
    # pydantic v2, OmegaConf and Hydra in their own spellings
    "  Extra inputs are not permitted [type=extra_forbidden, input_value=True, input_type=bool]\n",
    "pydantic_core._pydantic_core.ValidationError: 1 validation error for TrainingConfig\n",
    "Missing mandatory value: model.tokenizer.model\n    full_key: model.tokenizer.model\n",
    "omegaconf.errors.InterpolationKeyError: Interpolation key 'model.tp' not found\n",
    "In 'megatron_gpt_config': Could not find 'model/llama99'\n",
    "huggingface_hub.utils._validators.HFValidationError: Repo id must be in the form 'repo_name' or "
    "'namespace/repo_name': '/data/llama'.\n",
    # argument checks of other frameworks
    "ValueError: Please specify `target_modules` in `peft_config`\n",
    "AssertionError: args.micro_batch_size must be set\n",
    "ValueError: Your setup doesn't support bf16/gpu. You need torch>=1.10, using Ampere GPU with cuda>=11.0\n",
    "lightning.fabric.utilities.exceptions.MisconfigurationException: You requested gpu: [0, 1] But your machine "
    "only has: [0]\n",
    # resume and model paths
    "FileNotFoundError: Checkpoint at /runs/exp1/last.ckpt not found. Aborting training.\n",
    "OSError: Can't load tokenizer for '/models/llama-7b'. If you were trying to load it from "
    "'https://huggingface.co/models', make sure you don't have a local directory with the same name.\n",
    "ValueError: Tokenizer class LlamaTokenizer does not exist or is not currently imported.\n",
    "ValueError: The checkpoint you are trying to load has model type `qwen2` but Transformers does not recognize this "
    "architecture.\n",
    "FileNotFoundError: Unable to find '/data/sft/train.json'\n",
    "RuntimeError: CUDA error: invalid device ordinal\n",
    "ValueError: You selected an invalid strategy name: `strategy='deepspeed_stage_4'`.\n",
    "deepspeed.runtime.zero.utils.ZeRORuntimeException: You are using ZeRO-Offload with a client provided optimizer "
    "(<class 'torch.optim.adamw.AdamW'>) which in most cases will yield poor performance. Please either use "
    "deepspeed.ops.adam.DeepSpeedCPUAdam or set an optimizer in your ds_config.\n",
    "OSError: llama-7b is not a local folder and is not a valid model identifier listed on "
    "'https://huggingface.co/models'\n",
])
def test_configuration_look_alikes_in_other_spellings(text):
    assert kind(text) == "config_error"


@pytest.mark.parametrize("text, expected", [
    # an attribute error of the model's own code is a crash (batch 6: other/catalyst_resume_callbacks_list_no_values_1,
    # megatron_deepspeed/gptneox_bf16_save_no_fp16_groups_1)
    ("AttributeError: 'list' object has no attribute 'values'\n", "crashed"),
    ("AttributeError: 'BF16_Optimizer' object has no attribute 'fp16_groups'\n", "crashed"),
    ("AttributeError: 'DeepSpeedEngine' object has no attribute 'ds_config_path'\n", "crashed"),
    ("AttributeError: 'list' object has no attribute 'is_cuda'\n", "crashed"),
    # merging LoRA weights is no Hydra composition
    ("RuntimeError: Error merging adapter weights into the base model\n", "crashed"),
    # a warning that training starts from scratch is no resume refusal; a run that goes on is ok
    ("WARNING: could not find the metadata file /ckpt/latest_checkpointed_iteration.txt\n"
     "    will not load any checkpoints and will start from random\n", "unknown"),
    ("[WARNING] Unable to find latest file at /ckpt/latest, if trying to load latest checkpoint please ensure this "
     "file exists or pass an explicit checkpoint tag when loading a checkpoint.\n", "unknown"),
    # GradScaler's other assertion is a code path, not the configuration
    ("RuntimeError: No inf checks were recorded prior to update.\n", "crashed"),
    # an out-of-memory error wins over configuration words in its traceback and a follow-on op error
    ('Traceback (most recent call last):\n  File "megatron/arguments.py", line 10, in validate_args\n'
     "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n", "oom"),
    ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB\n"
     "Exception ignored in: <function DeepSpeedCPUAdam.__del__>\n"
     "AttributeError: 'DeepSpeedCPUAdam' object has no attribute 'ds_opt_adam'\n", "oom"),
    # "not permitted" of the operating system is not a schema error
    ("PermissionError: [Errno 1] Operation not permitted: '/mnt/ckpt'\n", "crashed"),
])
def test_configuration_look_alikes_of_other_kinds(text, expected):
    assert kind(text) == expected


# ---- crash signatures quoted without their exception type
@pytest.mark.parametrize("text", [
    # deepspeed/zero3_nvme_aio_swap_file_name_too_long_1.log (DeepSpeed#5087), the path cut short here
    "****** HERE IS THE COMMAND LINE OUTPUT. ********\nworker-3: deepspeed_aio:   open for write  failed on "
    "/workspace/finetune/disk0/zero_stage_3/optimizer/rank24/0_1_2_3_4_5_6_7\n8_9_10_11_12\n",
    # deepspeed/llava15_lora_zero2_mm_projector_state_dict_1.log (LLaVA#1428): source line and message on one line
    "raise RuntimeError('Error(s) in loading state_dict for {}:\\n\\t{}'.format( RuntimeError: Error(s) in loading "
    "state_dict for Sequential:\n",
    # nemo/fastpitch_adapter_word_emb_size_mismatch_1.log (NeMo Speech#11666)
    "Error(s) in loading state_dict for FastPitchModel: size mismatch for fastpitch.encoder.word_emb.weight: copying "
    "a param with shape torch.Size([97, 384]) from checkpoint, the shape in current model is torch.Size([115, 384]).\n",
    # other/mgt_meta_train_cublas_sgemm_execution_failed_1.log (MGT#4)
    "CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasSgemm( handle, opa, opb, m, n, k, &alpha, a, lda, "
    "b, ldb, &beta, c, ldc)`\n",
])
def test_batch6_crash_signatures(text):
    assert kind(text) == "crashed"


@pytest.mark.parametrize("text, expected", [
    ("cuDNN error: CUDNN_STATUS_INTERNAL_ERROR\n", "crashed"),
    ("[rank3]: deepspeed_aio: pwrite failed on /nvme/zero/rank3/opt.swp\n", "crashed"),
    ("Expected all tensors to be on the same device, but found at least two devices, cuda:1 and cpu!\n", "crashed"),
    ("mat1 and mat2 shapes cannot be multiplied (16x4096 and 1024x4096)\n", "crashed"),
    ("Illegal instruction\n", "crashed"),
    ("double free or corruption (!prev)\n", "crashed"),
    ("worker 3 exited with signal SIGABRT\n", "crashed"),
    ("No space left on device\n", "crashed"),
    ("Too many open files\n", "crashed"),
    ("PytorchStreamReader failed reading zip archive: failed finding central directory\n", "crashed"),
    # a line that names a signal or a disk without a failure is none
    ("Installed a handler for SIGABRT to dump stacks\n", "unknown"),
    # the cuBLAS status that means the allocator failed is an out-of-memory
    ("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`\n", "oom"),
    # a line that names the library without an error status is not a crash
    ("Using cuBLAS workspace config :4096:8 for deterministic algorithms\n", "unknown"),
])
def test_crash_look_alikes(text, expected):
    assert kind(text) == expected


# ---- hangs: a bare stack dump of the live job
HANG_DUMP = (  # deepspeed/hf_trainer_save_checkpoint_tag_validation_hang_1.log (DeepSpeed#797), paths shortened
    '  File "/code/DeepSpeed/deepspeed/runtime/engine.py", line 1456 in _checkpoint_tag_validation\n'
    '  File "/code/DeepSpeed/deepspeed/runtime/engine.py", line 1489 in save_checkpoint\n'
    '  File "/code/transformers/src/transformers/trainer.py", line 1212 in _save_checkpoint\n'
    '  File "/code/transformers/src/transformers/trainer.py", line 1094 in train\n')


def test_a_bare_faulthandler_frame_list_is_a_hang():
    outcome = trial_outcome(HANG_DUMP)
    assert outcome.failure_kind == "hang" and "stack dump" in outcome.reason


@pytest.mark.parametrize("text, expected", [
    # py-spy's frame format without its Thread header
    ("    barrier (torch/distributed/distributed_c10d.py:3328)\n    main (train.py:88)\n", "hang"),
    # the same frames under a fatal signal's header are a crash
    ("Fatal Python error: Segmentation fault\n\nCurrent thread 0x00007f4a25687c40 (most recent call first):\n"
     + HANG_DUMP, "crashed"),
    # traceback frames (a comma before "in") cut before their exception are not a dump: the job raised (batch 9's
    # rule: a log cut inside a traceback is a crash)
    ('  File "train.py", line 88, in main\n    barrier()\n', "crashed"),
    # Lightning's validation bar with an unknown total that never moved
    ("Epoch 0: 100%|##########| 50/50 [00:10<00:00]\nValidation: 0it [00:00, ?it/s]\n", "hang"),
    # a line that says the job waits ends the log; a wait that says it is over does not
    ("loading\n[rank0] Waiting for all ranks to finish saving the checkpoint ...\n", "hang"),
    ("loading\nwaiting for checkpoint ... done\n", "unknown"),
    ("The model is waiting for you to provide input\n", "unknown"),
    # a dump followed by the traceback of the error that ended the job is that error
    (HANG_DUMP + "Traceback (most recent call last):\n  File \"train.py\", line 9, in <module>\n"
     "RuntimeError: boom\n", "crashed"),
])
def test_stack_dump_look_alikes(text, expected):
    assert kind(text) == expected


# ---- an assert statement on the run's arguments, quoted by its traceback
def test_a_bare_assertion_on_the_arguments_is_a_configuration_error():
    # batch 4 other/matchsum_batch_size_not_multiple_of_gpus_assert_1.log (MatchSum): no message, the source line
    text = ('Traceback (most recent call last):\n  File "train_matching.py", line 70, in train_model\n'
            "    assert args.batch_size % len(devices) == 0\nAssertionError\n")
    assert kind(text) == "config_error"
    # the same bare assertion on a tensor of the model's own code is a crash
    assert kind(text.replace("args.batch_size % len(devices) == 0", "logits.shape[0] == labels.shape[0]")) == "crashed"


@pytest.mark.parametrize("text, expected", [
    # batch 4 nemo/asr_tutorial_trainer_class_mismatch_value_error_1.log: the reporter's lower-case type
    ("valueError: trainer constructor argument must be either None or pytorch_lightning.Trainer. But got <class "
     "'lightning.pytorch.trainer.trainer.Trainer'> instead.\n", "config_error"),
    ("valueError: not enough values to unpack (expected 3, got 2)\n", "crashed"),
])
def test_a_lower_case_exception_type_is_judged_like_its_type(text, expected):
    assert kind(text) == expected


# ---- divergence stated in other words
@pytest.mark.parametrize("text, expected", [
    ("RuntimeError: The total norm of order 2.0 for gradients from `parameters` is non-finite, so it cannot be "
     "clipped. To disable this error and scale the gradients by the non-finite norm anyway, set "
     "`error_if_nonfinite=False`\n", "diverged"),
    ("AssertionError: loss is not finite at step 10\n", "diverged"),
    ("[rank0]: Grad norm is NaN\n", "diverged"),
    # a check that names the rule without breaking it, and a norm that is finite
    ("INFO: checking that the loss is finite every 10 steps\n", "unknown"),
    ("grad norm is 0.93 at step 10\n", "unknown"),
])
def test_divergence_in_other_words(text, expected):
    assert kind(text) == expected


@pytest.mark.parametrize("text, expected", [
    ("AssertionError: Only ZeRO stage 1 is supported with pipeline parallelism\n", "config_error"),
    # Lightning's (NeMo's) process-group start that never returns; the line after it shows the wait was over
    ("GPU available: True\nInitializing distributed: GLOBAL_RANK: 3, MEMBER: 4/8\n", "hang"),
    ("Initializing distributed: GLOBAL_RANK: 0, MEMBER: 1/8\n----\nAll distributed processes registered. Starting "
     "with 8 processes\n----\n", "unknown"),
    # a checkpoint load that never finishes before the first step; a finished one is not a stall
    ("building GPT model ...\n loading checkpoint from /ckpt/gpt at iteration 4000\n", "hang"),
    ("building GPT model ...\n  successfully loaded checkpoint from /ckpt/gpt at iteration 4000\n", "unknown"),
])
def test_more_start_up_spellings(text, expected):
    assert kind(text) == expected
