"""Issue 17, the config_error / crashed boundary (helper judge14a): a path not mounted where the rank runs, a call that
does not fit a library's keyword-only signature, torch built without the requested backend, a toolkit version floor,
an assertion raised inside a configuration validator. Each family: a real line (its fixture), a made-up line in the
family's shape, and look-alikes that must stay out."""

from __future__ import annotations

import pytest

from analysis.logs.classify import classify
from analysis.logs.families import config, first_match, memory

_TB = 'Traceback (most recent call last):\n  File "/opt/app/train.py", line 12, in <module>\n    main()\n'

# ---- a path not mounted where this rank runs

# NeMo-RL DPO on two Kubernetes pods (tests/fixtures/oos-batch14/nemo/nemorl_dpo_megatron_k8s_run_config_not_on_shared_
# mount_1.log), the exception line as the log has it
_NEMORL_MOUNT = ("FileNotFoundError: Pretrained run config not found at /root/.cache/huggingface/nemo_rl/model__fsx_"
                 "models_qwen3-4b/iter_0000000/run_config.yaml on rank=8. This usually means that the one-time "
                 "HF->mcore conversion on rank=0 saved to a directory not being mounted on this node. Please check")


@pytest.mark.parametrize("line", [
    _NEMORL_MOUNT,
    "[rank3]: OSError: /lustre/ckpt/run7 does not exist: the file system is not mounted on node gpu-017",  # made up
    'docker: Error response from daemon: invalid mount config for type "bind": bind source path does not exist: '
    "/data/tokens.",  # made up, Docker's wording
])
def test_a_path_not_mounted_is_config(line):
    failure = classify(f"{_TB}{line}\n")
    assert failure.kind == "config_error", failure.reason
    assert "mount" in failure.reason


@pytest.mark.parametrize("line", [
    "[INFO] /scratch is not mounted, caching the dataset in /tmp instead",  # a notice the job goes on from
    "WARNING: shared cache not mounted; falling back to local disk",
    "FileNotFoundError: [Errno 2] No such file or directory: '/data/run/doc_idx.npy'",  # no mount named
])
def test_a_mount_notice_or_a_plain_missing_file_is_not_the_mount_family(line):
    assert first_match(f"{line}\n", config.UNMOUNTED) is None


# ---- a call that does not fit the installed library's keyword-only signature

# CoLLiE's LLaMA against a newer megatron-core (tests/fixtures/oos-batch12/other/collie_llama_megatron_core_vocab_
# parallel_embedding_missing_args_1.log): rich's traceback, then the message in backticks over two lines
_COLLIE = ("│ ❱ 235 │   │   self.embed_tokens = tensor_parallel.VocabParallelEmbedding(                 │\n"
           "│   236 │   │   │   self.collie_config.vocab_size,                                          │\n"
           "`VocabParallelEmbedding.__init__() missing 2 required keyword-only arguments: \n"
           "'init_method' and 'config'`\n")


@pytest.mark.parametrize("text", [
    _COLLIE,
    f"{_TB}TypeError: RowParallelLinear.__init__() missing 1 required keyword-only argument: 'config'\n",  # made up
])
def test_a_missing_keyword_only_setting_is_config(text):
    failure = classify(text)
    assert failure.kind == "config_error", failure.reason
    assert "signature" in failure.reason


@pytest.mark.parametrize("line", [
    "TypeError: on_step_end() missing 1 required positional argument: 'outputs'",
    "TypeError: forward() missing 1 required keyword-only argument: 'mask'",  # an input of the program's own call
])
def test_a_missing_positional_argument_or_forward_input_stays_a_crash(line):
    failure = classify(f"{_TB}{line}\n")
    assert failure.kind == "crashed", failure.reason


# ---- torch built without the backend the run asks for; a toolkit version floor (made up in the sources' words)

@pytest.mark.parametrize("line", [
    "RuntimeError: Distributed package doesn't have NCCL built in",
    "RuntimeError: Distributed package doesn't have MPI built in",
    "RuntimeError: FlashAttention is only supported on CUDA 11.7 and above.  Note: make sure nvcc has a supported "
    "version by running nvcc -V.",
    "ImportError: sequence packing needs transformers 4.44 or later",
    "ValueError: fp8 requires transformer_engine>=1.0 or newer",
])
def test_a_build_or_version_the_code_does_not_run_on_is_config(line):
    failure = classify(f"{_TB}{line}\n")
    assert failure.kind == "config_error", failure.reason


@pytest.mark.parametrize("line", [
    "INFO: using torch 2.1 or later code path",  # not an error line
    "RuntimeError: shape [4, 11] is invalid for input of size 43 or above",  # no package with the number
    "Distributed package has NCCL built in",
])
def test_version_look_alikes_are_not_the_floor_family(line):
    assert first_match(f"{line}\n", config.VERSION_FLOOR + config.BACKEND_MISSING) is None


# ---- an assertion raised inside a configuration validator

# Megatron-Bridge's Llama 3.1 405B recipe (tests/fixtures/oos-batch12/megatron_lm/bridge_llama31_405b_default_recipe_
# seq_length_assert_cut_1.log): the excerpt cuts the assertion's message to two letters
_BRIDGE_VALIDATE = (
    "Traceback (most recent call last):\n"
    '  File "/opt/Megatron-Bridge/src/megatron/bridge/training/config.py", line 1135, in runtime_config_update\n'
    "    cfg.validate()\n"
    '  File "/opt/Megatron-Bridge/src/megatron/bridge/training/config.py", line 1087, in validate\n'
    "    assert self.model.seq_length == data_seq_length, (\n"
    "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
    "AssertionError: Pl\n")


@pytest.mark.parametrize("text", [
    _BRIDGE_VALIDATE,
    # made up: a dataclass config's __post_init__ and a trainer's check_args, bare asserts
    '[rank0]: Traceback (most recent call last):\n[rank0]:   File "/w/cfg.py", line 40, in __post_init__\n'
    "[rank0]:     assert self.window > 0\n[rank0]: AssertionError\n",
    f'{_TB}  File "/w/trainer.py", line 88, in _check_training_args\n    assert a.steps\nAssertionError\n',
])
def test_an_assertion_in_a_validator_is_config(text):
    failure = classify(text)
    assert failure.kind == "config_error", failure.reason


def test_an_assertion_whose_innermost_frame_is_not_a_validator_is_a_crash():
    # the validator is an outer frame; the assertion is raised in the model's forward
    text = ('Traceback (most recent call last):\n  File "/w/config.py", line 9, in validate\n    build(cfg)\n'
            '  File "/w/model.py", line 51, in forward\n    assert x.dim() == 3\nAssertionError\n')
    assert classify(text).kind == "crashed"
    assert not config.asserts_in_validator(text)


def test_an_assertion_in_the_evaluation_loops_validate_is_a_crash():
    # fairseq_cli/train.py's validate() runs the validation set: not a configuration module
    text = ('Traceback (most recent call last):\n  File "/w/fairseq_cli/train.py", line 402, in validate\n'
            "    assert len(itr) > 0\nAssertionError\n")
    assert classify(text).kind == "crashed"


# ---- a name the setting does not accept; a setting left as a placeholder string (made up in the sources' words)

@pytest.mark.parametrize("line", [
    "ValueError: Unknown optimizer type: lion8bit",
    "ValueError: unrecognized lr scheduler 'cosin', choose one of linear, cosine",
    "ValueError: tokenizer type 'sentencepiece2' is not registered",
    "ValueError: invalid literal for int() with base 10: 'auto'",
    "ValueError: could not convert string to float: '${oc.env:LEARNING_RATE}'",
    "ValueError: invalid literal for int() with base 10: '$MICRO_BATCH'",
])
def test_an_unknown_name_or_a_placeholder_setting_is_config(line):
    failure = classify(f"{_TB}{line}\n")
    assert failure.kind == "config_error", failure.reason


@pytest.mark.parametrize("line", [
    "ValueError: invalid literal for int() with base 10: 'n/a'",  # a data field the program parses
    "ValueError: could not convert string to float: '3.1.4'",
    "ValueError: unknown error while decoding a sample",  # 'unknown' without a setting it names
    "ValueError: unrecognized data format in batch 17",  # no refused value named
    "ValueError: Unknown format code 'd' for object of type 'float'",  # a format string, no setting
])
def test_other_literals_and_unknown_errors_stay_crashes(line):
    failure = classify(f"{_TB}{line}\n")
    assert failure.kind == "crashed", failure.reason


# ---- a path the configuration names that is not there, in any exception's words

@pytest.mark.parametrize("line", [
    # the made-up lines of the family's shape
    "AssertionError: /data/corpus/train does not exist",
    "ValueError: Path /data/foo does not exist",
    "[rank0]: RuntimeError: Directory '/ckpt/run3' does not exist",
    "NotADirectoryError: [Errno 20] Not a directory: '/data/train.jsonl/shard0'",
    "IsADirectoryError: [Errno 21] Is a directory: '/models/llama-7b'",
])
def test_a_named_path_that_is_not_there_is_config(line):
    failure = classify(f"{_TB}{line}\n")
    assert failure.kind == "config_error", failure.reason


# NeMo-RL GRPO rerun with the same checkpoint_dir (tests/fixtures/oos-batch14/nemo/nemorl_grpo_rerun_same_checkpoint_
# dir_model_path_missing_1.log, crashed: the run's own step_2 save lacks its weights)
_OWN_SAVE = ("FileNotFoundError: Failed to load model from '/storage/nemo_rl_2/step_2/policy/weights/model': Model path "
             "/storage/nemo_rl_2/step_2/policy/weights/model does not exist")


@pytest.mark.parametrize("line", [
    _OWN_SAVE,
    "INFO: /scratch/cache does not exist, creating it",  # not an exception's line
    "ValueError: the key 'lr' does not exist",  # no path
])
def test_a_missing_step_save_or_a_notice_is_not_the_path_family(line):
    assert first_match(f"{line}\n", config.PATH_MISSING) is None


# ---- no usable GPU or driver; flash-attn's refusals; a package guard; the Hub's access errors; an unsupported
# version (made up in the sources' words)

@pytest.mark.parametrize("line", [
    "RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU and installed a "
    "driver from http://www.nvidia.com/Download/index.aspx",
    "RuntimeError: No CUDA GPUs are available",
    "RuntimeError: CUDA error: CUDA driver version is insufficient for CUDA runtime version",
    "RuntimeError: FlashAttention only support fp16 and bf16 data type",
    "RuntimeError: FlashAttention backward for head dim > 192 requires A100/A800 or H100/H800",
    "ImportError: LlamaTokenizer requires the SentencePiece library but it was not found in your environment.",
    "ImportError: Using `bitsandbytes` 8-bit quantization requires Accelerate: `pip install accelerate`",
    "OSError: You are trying to access a gated repo.",
    "RuntimeError: Python 3.12+ not yet supported for torch.compile",
    "RuntimeError: Tensor parallel size 3 does not divide the number of attention heads 32",
    "ValueError: Asking to pad but the tokenizer does not have a padding token. Please select a token to use as "
    "`pad_token`",
])
def test_an_environment_or_setting_the_code_does_not_run_with_is_config(line):
    failure = classify(f"{_TB}{line}\n")
    assert failure.kind == "config_error", failure.reason


@pytest.mark.parametrize("line", [
    "RuntimeError: The size of tensor a (4096) must match the size of tensor b (2048) at non-singleton dimension 1",
    "ValueError: Expected input batch_size (16) to match target batch_size (8).",
    "RuntimeError: Error(s) in loading state_dict for LlamaForCausalLM:",
    "OSError: [Errno 28] No space left on device",
])
def test_the_programs_own_tensors_and_io_stay_crashes(line):
    failure = classify(f"{_TB}{line}\n")
    assert failure.kind == "crashed", failure.reason


def test_pip_advice_in_a_warning_is_not_the_package_guard():
    assert first_match("UserWarning: for faster kernels, pip install flash-attn\n", config.PACKAGE_GUARD) is None


# ---- oom in other runtimes' words (made up in the sources' words) and what must stay out

@pytest.mark.parametrize("line", [
    ":0:rocdevice.cpp            :2614: 1 us: [pid:1 tid:0x7f] Callback: Queue 0x7f aborting with error : "
    "HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate the necessary resources. code: 0x1008",
    "ERROR: Unable to allocate memory on the GPU",
    "RuntimeError: failed to allocate device memory for the KV cache",
    "ERROR: Container killed by the OOM killer",
    "trainer-0 was killed by the kernel OOM killer (exit 137)",
])
def test_other_runtimes_oom_wording_is_oom(line):
    failure = classify(f"training started\n{line}\n")
    assert failure.kind == "oom", failure.reason


@pytest.mark.parametrize("line", [
    "HSA_STATUS_ERROR_OUT_OF_RESOURCES: too many hardware queues requested",  # not an allocation
    "hint: if it fails to allocate memory on the GPU, reduce the batch size",  # advice
    "The worker may have been killed by the OOM killer?",  # a guess
])
def test_oom_look_alikes_are_not_oom_rows(line):

    assert first_match(f"{line}\n", memory.MEMORY) is None


# ---- relations and guards in other words (made up in the sources' words: DeepSpeed engine.py's Amp/ZeRO check,
# NeMo 2's strategy bound, import guards)

@pytest.mark.parametrize("line", [
    "AssertionError: Amp and ZeRO are not currently compatible",
    "ValueError: Expected tensor_model_parallel_size * pipeline_model_parallel_size * context_parallel_size <= "
    "world_size",
    "RuntimeError: Failed to import transformer_engine. Make sure it is installed",
])
def test_relations_and_guards_in_other_words_are_config(line):
    failure = classify(f"{_TB}{line}\n")
    assert failure.kind == "config_error", failure.reason


@pytest.mark.parametrize("line", [
    "RuntimeError: the tensor-parallel group has not been initialized",  # a group the program builds itself
    "AssertionError: batch_size == labels.size(0)",  # an equality of the program's tensors
])
def test_program_objects_and_equalities_stay_crashes(line):
    failure = classify(f"{_TB}{line}\n")
    assert failure.kind == "crashed", failure.reason
