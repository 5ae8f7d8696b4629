"""Issue 17, the config_error / crashed boundary (helper judge14a): a path not mounted where the rank runs, a call that
does not fit a library's keyword-only signature, torch built without the requested backend, a toolkit version floor,
an assertion raised inside a configuration validator. Each family: a real line (its fixture), a made-up line in the
family's shape, and look-alikes that must stay out."""

from __future__ import annotations

import pytest

from analysis.logs.classify import classify
from analysis.logs.families import config, first_match

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


def test_a_missing_positional_argument_stays_a_crash():
    failure = classify(f"{_TB}TypeError: on_step_end() missing 1 required positional argument: 'outputs'\n")
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
])
def test_other_literals_and_unknown_errors_stay_crashes(line):
    failure = classify(f"{_TB}{line}\n")
    assert failure.kind == "crashed", failure.reason
