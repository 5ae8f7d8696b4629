"""Harvest raised_messages*.tsv rows from the trainers' source: the messages their argument/config validation raises.

    python -m analysis.logs.families.harvest --mirror /work/.mirror [--mirror DIR ...] [--framework NAME ...]
        [--healthy tests/fixtures] [--functions] [--append | --rewrite]

One harvester for both tables. SOURCES is the data: for each framework its repository, the table its rows go to
(raised_messages.tsv: Megatron-LM, DeepSpeed, Megatron-DeepSpeed, NeMo and the NeMo family; raised_messages_others.tsv:
the trainers run beside them) and its validation code, as (path globs, function pattern) pairs. A glob's `*` stays
inside one folder, `**/` spans any number of folders; the pattern must match the enclosing function's whole name
(module-level code is `<module>`: an argparse script's checks), None reads the whole file, so a kernel's or a step's
runtime assert never becomes a config_error. In a file of the four frameworks' lists narrowed to some functions, those
named as checks (_CHECKS: `*sanity_check*`, `_check_*`, `_validate_*`, `verify_*`, `_assert_*`, `finalize`) are read
too, except the names read as runtime checks (_RUNTIME_CHECK_WORDS: a tensor, a buffer, a step's data, the program's
own state). Tests folders are never read.

A repository is read from the first --mirror that has it: `MIRROR/<owner>+<name>/repo`, a bare git directory (or a
clone) read at HEAD with `git ls-tree` / `git show`, or else the plain folder `MIRROR/<owner>+<name>/tree` with its
commit or release tag in a COMMIT file. transformers' repository is too large to fetch whole, so its released wheel
stands in: `pip download transformers --no-deps`, unzip it into `DIR/huggingface+transformers/tree/src` and write the
version (v5.24.0) to its COMMIT.

Older releases are read too (Source.tags, Source.commits): a run on an older release prints the checks that release
raised, reworded or gone since. A git mirror is read at HEAD, then at every tag the source's pattern names (newest
first), then at its listed commits; a plain tree's older releases are folders
`MIRROR/<owner>+<name>/releases/<version>/` laid out as the tree, each with its COMMIT (transformers: the wheels of
4.18 .. 5.10, unzipped the same way). A template is credited to the newest revision that raises it.

Each `raise XError(<message>)` and `assert <cond>, <message>` there becomes a template (template_of): an f-string
field, a `%s` or a `.format` field, or any part that is not a literal becomes `{}`, runs of fields are one field and
a field at either end is dropped (it matches anything and anchors nothing). Left out (one set of filters for every
framework): environment errors (ENVIRONMENT: an import or file error, not a configuration's), templates with fewer
than raised.MIN_WORDS fixed words or without a distinctive word (GENERIC), the EXCLUDED_PATHS and EXCLUDED_WORDS read
by hand (internal invariants), templates already in a raised_messages*.tsv table or harvested earlier in this run,
and those whose words occur in a healthy fixture log (--healthy: tests/fixtures INDEX.tsv rows of kind ok), as
raised.py's docstring asks. Each row records `path@commit` (12 characters).

Output: the new rows, `framework<TAB>path@commit<TAB>template` under a `# TABLE` line per table, for review;
--append adds them to their tables. --rewrite writes each table whose header says it is written by this harvester
(raised_messages_others.tsv) anew from the harvest alone (the other tables' templates count as known), so rows whose
check left the source go; it refuses --framework and a source in no mirror. raised_messages.tsv also holds rows read
by hand (and 17 reviewed rows that today's filters would not harvest) and is only appended to.
"""

from __future__ import annotations

import argparse
import ast
import csv
import re
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from analysis.logs.families.raised import MIN_WORDS, TABLE, _anchor, compile_template, fixed_words, read_tables

FIELD = "{}"
MAIN, OTHERS = TABLE.name, "raised_messages_others.tsv"
GENERATED = "# written by python -m analysis.logs.families.harvest --rewrite (see its docstring); do not edit by hand"

# --- what is read: the validation code of each framework -----------------------------------------------------------

Files = tuple[tuple[str, ...], str | None]  # (path globs, whole-name pattern of the enclosing function or None)


@dataclass(frozen=True)
class Source:
    framework: str
    repo: str  # owner/name
    table: str  # the raised_messages*.tsv its rows go to
    files: tuple[Files, ...]
    # Older revisions read besides HEAD: a run on an older release prints the checks it raised then, reworded or
    # gone since (batch 39's DeepSpeed refusals were in wordings no table held; LLaMA-Factory's "Freeze/Full PPO
    # training needs `reward_model_type=full`" lived from v0.3.3 to v0.5.2 only, so every release is read, not one a
    # year). `tags`: the whole-name pattern of the release tags (no release candidates); `commits`: where the
    # repository tags no release for a time. The files' globs name every layout (megatron/arguments.py ->
    # megatron/training/arguments.py). A git mirror is needed to read them.
    tags: str = ""
    commits: tuple[str, ...] = ()


def _one(*pairs: tuple[str, str | None]) -> tuple[Files, ...]:
    """One glob per pair (the four frameworks' lists); a narrowed file's check functions (_CHECKS) are read too."""
    return tuple(((glob,), function if function is None else rf"(?:{function})|{_CHECKS}") for glob, function in pairs)


# Set-up functions by exact name (a file in which run-time code sits beside the checks is narrowed to them).
_SETUP = r"__init__|__post_init__|validate|_validate|check|_check|configure|_configure|sanity|setup|_setup|init_"
# ... and, in any narrowed file, the functions named as checks. Read in the frameworks' sources (judge26): DeepSpeed
# engine.py `_do_optimizer_sanity_check` ("config based assertions": the untested ZeRO optimizer, Amp with ZeRO),
# `_do_sanity_check`, `_validate_zero3_moe_compatibility`, `_assert_valid_mixed_precision_config`; Megatron-LM
# `check_config_overrides_consistency`; NeMo `_validate_and_override_config`; NeMo-RL `_check_consistent`,
# `_check_port_range`, `assert_teacher_student_batch_grid`, `assert_xtoken_ipc_node_local`; Automodel
# `validate_tp_mesh`, `_validate_mesh_spec`, `_verify_sdpa_support` all test the user's settings before the first step.
_CHECK_NAMES = r"\w*sanity_check\w*|_?check_\w+|_?validate_\w+|_?verify_\w+|_?assert_\w+|finalize"
# Names of that shape whose checks test the run, not the settings (read in the same sources): a tensor, a shape or a
# buffer; the data a step got (`broadcast_and_check`, `validate_generate_data`); the program's own state
# (`_assert_step_open`, `_assert_same_partition_group`, `_assert_same_signature`, `_validate_te_ops_adapter_module`);
# the user's model or optimizer objects (`_check_for_duplicates`, `_validate_qwen_transformer_blocks`); the file
# system (`validate_dataset_asset_accessibility`); free memory (`_check_fp8_dequantize_will_fit`).
_RUNTIME_CHECK_WORDS = (r"tensors?(?!_?(?:parallel|model))|shape|numel|_nan|nan_|finite|overflow|buffer|bucket"
                        r"|broadcast|generate_data|inputs|step_open|partition_group|signature|adapter_module|duplicate"
                        r"|transformer_blocks|accessib|will_fit")
# The other trainers' set-up and validation functions: any name holding one of these words ...
_SETUP_WORDS = (r"__post_init__|__init__|validat|verify|check(?!point)|_assert_|^assert_|finalize|setup|set_up|configur"
                r"|config|_init|init_|parse|select|choose|<module>")
# ... and none of these: checkpoint saving/loading and state restoring refuse files on disk, not the layout's settings
# (`offload` is a setting: accelerate's `validate_cpu_offload`); a forward pass or a step asserts at run time.
_RUNTIME_WORDS = r"checkpoint|(?<!off)load|save|restore|state_dict|forward|step"
_CHECKS = rf"(?!.*(?:{_RUNTIME_WORDS}|{_RUNTIME_CHECK_WORDS}))(?:{_CHECK_NAMES})"


def _named(words: str) -> str:
    """A whole-name pattern for the names that hold one of `words` and none of _RUNTIME_WORDS."""
    return rf"(?!.*(?:{_RUNTIME_WORDS})).*(?:{words}).*"


_TRANSFORMERS_SETUP = (r"__post_init__|__init__|_validate_args|_build_accelerator_args"
                       r"|create_accelerator_and_postprocess|_wrap_model|get_optimizer_cls_and_kwargs|_setup_devices")
SOURCES: tuple[Source, ...] = (
    Source("Megatron-LM", "NVIDIA/Megatron-LM", MAIN, _one(
        ("megatron/training/arguments.py", None),
        ("megatron/core/**/*config.py", None),
        ("megatron/core/parallel_state.py", r"initialize_model_parallel|RankGenerator|generate_masked"),
        ("megatron/core/num_microbatches_calculator.py", None),
        ("megatron/training/initialize.py", None),
        ("megatron/training/global_vars.py", None),
        ("megatron/core/optimizer/__init__.py", r"get_megatron_optimizer|_get_param_groups"),
        ("megatron/core/distributed/distributed_data_parallel.py", r"__init__"),
        ("megatron/core/pipeline_parallel/schedules.py", r"get_forward_backward_func|forward_backward_pipelining_\w+"),
        ("megatron/core/transformer/moe/moe_layer.py", r"__init__"),
        ("megatron/core/transformer/moe/router.py", r"__init__"),
        ("megatron/core/transformer/moe/token_dispatcher.py", r"__init__"),
        ("megatron/core/models/gpt/gpt_model.py", r"__init__"),
        ("megatron/core/models/gpt/gpt_layer_specs.py", r"get_\w+spec\w*"),
        ("megatron/core/extensions/transformer_engine.py", r"__init__"),
        # the layout before core_v0.6.0 (megatron/training/ did not exist) and before 23.04 (megatron/mpu/)
        ("megatron/arguments.py", None),
        ("megatron/initialize.py", None),
        ("megatron/global_vars.py", None),
        ("megatron/microbatches.py", None),
        ("megatron/training/microbatches.py", None),
        ("megatron/mpu/initialize.py", r"initialize_model_parallel"),
        ("megatron/optimizer/__init__.py", r"get_megatron_optimizer|_get_param_groups"),
    ), tags=r"v\d+\.\d+|2\d\.\d\d|core_[rv]\d+\.\d+\.\d+", commits=("55ba1f7b96d1",)),  # May 2022: no tag in 2022
    Source("DeepSpeed", "deepspeedai/DeepSpeed", MAIN, _one(
        ("deepspeed/__init__.py", r"initialize|_parse_version|add_config_arguments"),
        ("deepspeed/runtime/config.py", None),
        ("deepspeed/runtime/config_utils.py", None),
        ("deepspeed/runtime/zero/config.py", None),
        ("deepspeed/runtime/zero/offload_config.py", None),
        ("deepspeed/runtime/engine.py", _SETUP),
        ("deepspeed/runtime/pipe/engine.py", r"__init__"),
        ("deepspeed/runtime/pipe/module.py", r"__init__|_partition_layers|_build"),
        ("deepspeed/runtime/pipe/topology.py", r"__init__"),
        ("deepspeed/moe/layer.py", r"__init__"),
        ("deepspeed/moe/utils.py", r"split_params_\w+|is_moe_param_group|configure_moe_param_groups"),
        # judge53: the MoE set-up checks __init__ delegates ("The model has moe layers, but None of the param groups
        # are marked as MoE. Create a param group with 'moe' key set to True ...", oos-batch46's ZeRO-2 MoE run)
        ("deepspeed/runtime/zero/stage_1_and_2.py", r"__init__|_configure_moe_settings"),
        ("deepspeed/runtime/bf16_optimizer.py", r"_configure_moe_settings"),
        ("deepspeed/runtime/zero/stage3.py", r"__init__"),
        ("deepspeed/runtime/activation_checkpointing/config.py", None),
        ("deepspeed/runtime/fp16/loss_scaler.py", r"__init__"),
        ("deepspeed/utils/groups.py", r"_create_\w+|initialize\w*"),
        ("deepspeed/runtime/sequence_parallel/*.py", r"__init__"),
        ("deepspeed/sequence/layer.py", r"__init__"),
        ("deepspeed/runtime/zero/stage1.py", r"__init__"),  # before v0.5 (stage_1_and_2.py since)
        ("deepspeed/runtime/zero/stage2.py", r"__init__"),
    ), tags=r"v\d+\.\d+\.\d+"),
    Source("Megatron-DeepSpeed", "deepspeedai/Megatron-DeepSpeed", MAIN, _one(
        ("megatron/arguments.py", None),
        ("megatron/initialize.py", None),
        ("megatron/global_vars.py", None),
        ("megatron/microbatches.py", None),
        ("megatron/core/parallel_state.py", r"initialize_model_parallel"),
        ("megatron/training.py", r"setup_model_and_optimizer|get_model|pretrain"),
    ), commits=("2755bcb87b88", "a284045fbb49", "4822c87ee6ad", "7eb36a11b3a9")),  # no tag since the fork:
    # Jul 2022, Mar 2023, Oct 2023, Jun 2024
    Source("NeMo", "NVIDIA/NeMo", MAIN, _one(
        ("nemo/lightning/pytorch/strategies/megatron_strategy.py", _SETUP),
        ("nemo/lightning/megatron_parallel.py", _SETUP),
        ("nemo/lightning/_strategy_lib.py", None),
        ("nemo/lightning/pytorch/plugins/mixed_precision.py", _SETUP),
        ("nemo/collections/llm/gpt/model/base.py", r"configure_model|__post_init__|__init__"),
        ("nemo/collections/llm/recipes/**/*.py", None),
        ("nemo/collections/llm/api.py", r"_validate\w*|_setup\w*"),
        ("nemo/utils/exp_manager.py", r"check\w*|error_checks|exp_manager"),
        ("nemo/collections/nlp/parts/nlp_overrides.py", _SETUP),
        ("nemo/collections/nlp/models/language_modeling/megatron_base_model.py", _SETUP),
        ("nemo/collections/nlp/models/language_modeling/megatron_gpt_model.py", r"__init__|_validate\w*|setup\w*"),
        ("nemo/collections/nlp/modules/common/megatron/megatron_init.py", None),
        ("nemo/collections/llm/gpt/data/pre_training.py", _SETUP),
    ), tags=r"v\d+\.\d+\.\d+"),
    Source("Megatron-Bridge", "NVIDIA-NeMo/Megatron-Bridge", MAIN, _one(
        ("src/megatron/bridge/training/config.py", None),
        ("src/megatron/bridge/training/initialize.py", None),
        ("src/megatron/bridge/training/setup.py", None),
        ("src/megatron/bridge/training/comm_overlap.py", _SETUP),
        ("src/megatron/bridge/training/mixed_precision.py", None),
        ("src/megatron/bridge/models/transformer_config.py", None),
        ("src/megatron/bridge/models/gpt_provider.py", r"__post_init__|provide\w*|finalize"),
        ("src/megatron/bridge/models/model_provider.py", r"provide\w*|finalize|initialize\w*"),
        ("src/megatron/bridge/recipes/utils/*.py", None),
        ("src/megatron/bridge/peft/*.py", r"__post_init__|__init__"),
    ), tags=r"v\d+\.\d+\.\d+"),
    Source("NeMo-RL", "NVIDIA-NeMo/RL", MAIN, _one(
        ("nemo_rl/models/policy/**/*.py", r"__init__|_validate\w*|validate\w*|check\w*|configure\w*"),
        ("nemo_rl/algorithms/**/*.py", r"setup|validate\w*|_validate\w*|check\w*"),
        ("nemo_rl/distributed/virtual_cluster.py", r"__init__|init_ray|_init\w*"),
        ("nemo_rl/models/generation/vllm/config.py", None),
        ("nemo_rl/models/generation/vllm/vllm_generation.py", r"__init__"),
        ("nemo_rl/utils/config.py", None),
    ), tags=r"v\d+\.\d+\.\d+"),
    Source("Automodel", "NVIDIA-NeMo/Automodel", MAIN, _one(
        ("nemo_automodel/components/config/*.py", None),
        ("nemo_automodel/components/distributed/**/*.py", _SETUP + r"|\w*parallel\w*|create\w*|get_\w*mesh\w*"),
        ("nemo_automodel/_transformers/**/*.py", r"__init__|_validate\w*|validate\w*|check\w*"),
        ("nemo_automodel/recipes/llm/train_ft.py", r"setup|build_\w+|_validate\w*|validate\w*"),
        ("nemo_automodel/components/moe/config.py", None),
    ), tags=r"v\d+\.\d+\.\d+"),
    Source("transformers", "huggingface/transformers", OTHERS, (
        (("src/transformers/training_args.py", "src/transformers/trainer.py"), _named(_TRANSFORMERS_SETUP)),
        (("src/transformers/integrations/deepspeed.py", "src/transformers/integrations/fsdp.py",
          "src/transformers/deepspeed.py"), _named(".")),  # deepspeed.py: before v4.33
    )),
    Source("accelerate", "huggingface/accelerate", OTHERS, (
        (("src/accelerate/utils/dataclasses.py", "src/accelerate/parallelism_config.py"), _named(_SETUP_WORDS)),
        (("src/accelerate/accelerator.py",), _named(r"__init__|_prepare_deepspeed|_prepare_fsdp|_prepare_tp|_prepare_cp"
                                                    r"|_prepare_megatron|prepare_model")),
    ), tags=r"v\d+\.\d+\.\d+"),
    Source("TRL", "huggingface/trl", OTHERS, (
        (("trl/trainer/*_config.py", "trl/experimental/*/*_config.py"), _named(_SETUP_WORDS)),
        (("trl/trainer/*_trainer.py",), _named("__init__")),
    ), tags=r"v\d+\.\d+\.\d+"),
    Source("PEFT", "huggingface/peft", OTHERS, (
        (("src/peft/tuners/*/config.py", "src/peft/config.py"), _named(_SETUP_WORDS)),
        (("src/peft/tuners/*.py",), r"__post_init__"),  # before v0.7 each tuner's config sat beside its model
    ), tags=r"v\d+\.\d+\.\d+"),
    Source("Lightning", "Lightning-AI/pytorch-lightning", OTHERS, (
        (("src/lightning/pytorch/trainer/connectors/*.py", "src/lightning/pytorch/trainer/configuration_validator.py",
          "src/lightning/fabric/connector.py",
          # 1.8-1.9 (src/pytorch_lightning, src/lightning_fabric) and before 1.8 (pytorch_lightning at the root)
          "src/pytorch_lightning/trainer/connectors/*.py", "src/pytorch_lightning/trainer/configuration_validator.py",
          "src/lightning_fabric/connector.py", "pytorch_lightning/trainer/connectors/*.py",
          "pytorch_lightning/trainer/configuration_validator.py"), _named(".")),
        (("src/lightning/pytorch/strategies/*.py", "src/lightning/fabric/strategies/*.py",
          "src/pytorch_lightning/strategies/*.py", "src/lightning_fabric/strategies/*.py",
          "pytorch_lightning/strategies/*.py", "pytorch_lightning/plugins/training_type/*.py"), _named(_SETUP_WORDS)),
    ), tags=r"\d+\.\d+\.\d+"),
    Source("torchtitan", "pytorch/torchtitan", OTHERS, (
        (("torchtitan/config/*.py", "torchtitan/distributed/parallel_dims.py",
          "torchtitan/config_manager.py", "torchtitan/parallelisms/parallel_dims.py"), _named(".")),  # before v0.2
    ), tags=r"v\d+\.\d+\.\d+"),
    Source("veRL", "verl-project/verl", OTHERS, (
        (("verl/workers/config/*.py", "verl/trainer/config/*.py", "verl/utils/config.py", "verl/base_config.py"),
         _named(".")),
        (("verl/trainer/ppo/ray_trainer.py", "verl/trainer/main_ppo.py"), _named(_SETUP_WORDS)),
    ), tags=r"v\d+\.\d+(?:\.\d+)?(?:\.post\d+)?"),
    Source("OpenRLHF", "OpenRLHF/OpenRLHF", OTHERS, (
        (("openrlhf/cli/train_*.py", "openrlhf/utils/config.py"), _named(".")),
    ), tags=r"v\d+\.\d+\.\d+(?:\.post\d+)?"),
    Source("LLaMA-Factory", "hiyouga/LLaMA-Factory", OTHERS, (
        (("src/llamafactory/hparams/*.py", "src/llmtuner/hparams/*.py"), _named(".")),  # llmtuner before v0.8
    ), tags=r"v\d+\.\d+\.\d+"),
    Source("ms-swift", "modelscope/ms-swift", OTHERS, (
        (("swift/arguments/*.py", "swift/arguments/*/*.py", "swift/megatron/arguments/*.py",
          "swift/trainers/arguments.py", "swift/rlhf_trainers/arguments.py",
          # v3 (swift/llm/argument/) and v1-v2 (swift/llm/utils/argument.py)
          "swift/llm/argument/*.py", "swift/llm/argument/*/*.py", "swift/llm/utils/argument.py",
          "swift/llm/megatron/argument.py"), _named(".")),
        (("swift/pipelines/train/*.py",), _named(r"__init__|_prepare")),  # set-up
    ), tags=r"v\d+\.\d+\.\d+"),
    Source("ColossalAI", "hpcaitech/ColossalAI", OTHERS, (
        (("colossalai/booster/plugin/*.py", "colossalai/booster/booster.py"),
         _named(r"__init__|configure|_check|check|validate|setup")),
    ), tags=r"v\d+\.\d+\.\d+"),
)

# --- what is left out -----------------------------------------------------------------------------------------------

# Read by hand and left out: checks that live in validation files but test the program's own state, not the user's
# configuration (an internal invariant, a runtime handle, a parser of file names), or that name a missing device or
# too few nodes (not a configuration error), or whose words any TypeError prints.
EXCLUDED_PATHS = ("audio_feature_config.py", "core/inference/config.py", "cp_vision_frame_shard.py",
                  "sentence_transformer_export.py", "tokenization_mistral_common.py", "_transformers/mfu.py",
                  "recipes/log/default.py", "optimized_tp_plans.py", "context_parallel/sharder.py",
                  "core/process_groups_config.py")
EXCLUDED_WORDS = (
    "already initialized", "should have registered recv", "should be cleared at the end of a step",
    "invalid model chunking", "Buffer keys from param grouping", "do not match between grouping and layout",
    "RECURSIVE BUILD", "dist is not initialized", "No inf checks were recorded", "source state dict is empty",
    "does not match any model sharded param", "got an unexpected keyword argument", "Setup should be completed",
    "should not be in both the vision", "should be in either the language", "Megatron requires CUDA",
    "Megatron requires accelerator", "no CUDA devices available", "the last training run has already completed",
    "device drift after", "Token->ID mapping differs", "Validation rewards must be divisible",
    "Not enough alive Ray nodes", "Maximum number of retries reached", "Expected model not to have lm_head",
    "Expected model to have score", "apply_fsdp2_sharding_recursively", "pg_collection must have",
    "p2p_communicator must have a config", "Invalid combination of p2p_communicator",
    "Provide both p2p_communicator", "pg_collection must be ProcessGroupCollection",
    "interleaved pipeline parallelism expected", "Expected at least one", "Invalid local expert indices",
    "local_expert_indices must be continuous", "Expected OptimizerConfig, got", "Mesh dim", "No parent flattened mesh",
    "Invalid layer number", "Unknown param group type", "model_parameters must be a list",
    "param argument that would be given", "LayerSpec only supports", "deepspeed.initialize requires a model",
    "must base PipelineModule", "Refusing to load", "Cannot create module spec", "No _target_ found",
    "Key {} not found", "Left side of", "Access to private", "Cannot resolve target", "Module '{}' loaded",
    "Environment variable names must be non-empty", "must have a scalar value",
    "vocab_size must be configured before calling provide", "Megatron Core TransformerConfig does not expose",
    "Unable to import apex", "to be an int, but got",
    # read in the older releases (Source.releases): a timer's own state, the order of set-up calls, custom process
    # groups passed by code (as pg_collection above), an index list's spelling of the same invariant
    "timer has already been started", "timer is not started", "torch distributed is not initialized",
    "model parallel group is not initialized", "grad_finalize_pgs must have", "model_comm_pgs must have",
    "required but not provided in", "Grad and model comm process groups", "local_expert_indices must be continous",
    "must be set before find_shared_parameters", "To silence this warning", "This will be replaced by",
    "Timed out waiting for placement groups",
    # the user's own module still implements a hook or method the release removed: the fix is in that code, which
    # the corpus labels crashed (oos-batch5's `validation_epoch_end` under Lightning 2.0), not a setting
    "implements this method", "hook was removed in", "callback hook was", "no longer supported as of v1.8",
    "has changed its signature and behavior",
)


# Exceptions that say the environment lacks something (a package, a file, a key of its own), not that the
# configuration is wrong.
ENVIRONMENT = frozenset({"ImportError", "ModuleNotFoundError", "FileNotFoundError", "OSError", "MemoryError",
                         "KeyError", "StopIteration", "AttributeError"})
# Words of any validation message: a template needs an identifier (a word with `_`) or two words besides these, or it
# reads on a crash's line as well ("dtype {} not supported", "precision {} is not supported").
GENERIC = frozenset({
    "not", "supported", "support", "supports", "must", "one", "got", "the", "and", "for", "with", "only", "requires",
    "require", "range", "out", "positive", "negative", "cannot", "Please", "please", "specify", "provide", "instance",
    "Model", "model", "precision", "strategy", "dtype", "are", "has", "was", "least", "greater", "than", "less",
    "should", "value", "invalid", "Invalid", "type", "set", "use", "when", "can"})


def distinctive(text: str) -> bool:
    words = [w for part in text.split(FIELD) for w in re.findall(r"[A-Za-z_]{3,}", part)]
    return any("_" in w.strip("_") for w in words) or sum(w not in GENERIC for w in words) >= 2


def evidence(text: str) -> bool:
    """Can the template be evidence at all: enough fixed words, a distinctive one, none of the internal checks?"""
    return fixed_words(text) >= MIN_WORDS and distinctive(text) and not any(w in text for w in EXCLUDED_WORDS)


def in_healthy_log(text: str, healthy: Sequence[str]) -> bool:
    pattern, anchor = compile_template(text), _anchor(text)
    return any(anchor in log and pattern.search(log) is not None for log in healthy)


# --- messages to templates ------------------------------------------------------------------------------------------

_PERCENT = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(?:\d+|\*)?(?:\.\d+)?[sdrfgiuxXeEc]")
_BRACES = re.compile(r"\{[^{}]*\}")
_FIELDS = re.compile(r"(?:\s*\{\}\s*)+")


def message_of(node: ast.expr) -> str:
    """The message an expression builds, literal parts as they are, every computed part as a field."""
    if isinstance(node, ast.Constant):
        return node.value if isinstance(node.value, str) else FIELD
    if isinstance(node, ast.JoinedStr):
        return "".join(part.value if isinstance(part, ast.Constant) and isinstance(part.value, str) else FIELD
                       for part in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return message_of(node.left) + message_of(node.right)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod) and _is_text(node.left):
        return _PERCENT.sub(FIELD, message_of(node.left).replace("%%", "\0")).replace("\0", "%")  # `%% d` is no field
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format" \
            and _is_text(node.func.value):
        raw = message_of(node.func.value).replace("{{", "\0").replace("}}", "\1")
        return _BRACES.sub(FIELD, raw).replace("\0", "{").replace("\1", "}")
    return FIELD


def _is_text(node: ast.expr) -> bool:
    return isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant) and isinstance(node.value, str))


def template_of(message: str) -> str:
    """One line; runs of fields (and the spaces around them) as one field; no field at either end (a field there
    matches anything and anchors nothing)."""
    text = " ".join(message.replace("{}", "\x00").split()).replace("\x00", FIELD)
    text = _FIELDS.sub(lambda m: (" " if m.group(0)[:1].isspace() else "") + FIELD
                       + (" " if m.group(0)[-1:].isspace() else ""), text)
    while text.startswith(FIELD) or text.endswith(FIELD):
        text = text.removeprefix(FIELD).removesuffix(FIELD).strip()
    return text.replace("\t", " ")


def raised_messages(source: str, function: str | None) -> Iterator[tuple[str, str]]:
    """(enclosing function, message) of each raise/assert of a configuration error in the functions whose whole name
    matches `function` (every one with None; module-level code is `<module>`). A file that does not parse gives
    none."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return
    wanted = None if function is None else re.compile(function)

    def visit(node: ast.AST, fn: str) -> Iterator[tuple[str, str]]:
        for child in ast.iter_child_nodes(node):
            name = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else fn
            message = _message_node(child)
            if message is not None and (wanted is None or wanted.fullmatch(name)):
                yield name, message_of(message)
            yield from visit(child, name)
    yield from visit(tree, "<module>")


def _message_node(node: ast.AST) -> ast.expr | None:
    if isinstance(node, ast.Assert):
        return node.msg
    if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
        name = _exception_name(node.exc.func)
        if name.endswith(("Error", "Exception")) and name not in ENVIRONMENT:
            return node.exc.args[0]
    return None


def _exception_name(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


# --- reading a repository -------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Checkout:
    """A repository's files at one commit: a git directory read at `rev`, or a plain folder with a COMMIT file."""
    where: Path
    is_git: bool
    rev: str = "HEAD"

    def commit(self) -> str:
        if self.is_git:
            return self._git("rev-parse", f"{self.rev}^{{commit}}").strip()[:12]
        return (self.where / "COMMIT").read_text(encoding="utf-8").strip()[:12]

    def paths(self) -> list[str]:
        if self.is_git:
            return sorted(self._git("ls-tree", "-r", "--name-only", self.rev).splitlines())
        return sorted(p.relative_to(self.where).as_posix() for p in self.where.rglob("*.py"))

    def read(self, path: str) -> str:
        if self.is_git:
            return self._git("show", f"{self.rev}:{path}")
        return (self.where / path).read_text(encoding="utf-8")

    def has(self, rev: str) -> bool:
        return self.is_git and subprocess.run(["git", "-C", str(self.where), "rev-parse", "--verify", "-q",
                                               f"{rev}^{{commit}}"], capture_output=True).returncode == 0

    def tags(self, pattern: str) -> list[str]:
        """The tags whose whole name matches, newest commit first."""
        if not self.is_git or not pattern:
            return []
        wanted = re.compile(pattern)
        return [t for t in self._git("for-each-ref", "--sort=-creatordate", "--format=%(refname:short)",
                                     "refs/tags").split() if wanted.fullmatch(t)]

    def _git(self, *args: str) -> str:
        return subprocess.run(["git", "-C", str(self.where), *args], check=True, capture_output=True,
                              text=True).stdout


def checkout(mirrors: Sequence[Path], repo: str) -> Checkout | None:
    """The repository in the first mirror that has it (`repo`, a git directory, before `tree`, a plain folder)."""
    for mirror in mirrors:
        base = mirror / repo.replace("/", "+")
        if (base / "repo").is_dir():
            return Checkout(base / "repo", True)
        if (base / "tree").is_dir():
            return Checkout(base / "tree", False)
    return None


def revisions(mirrors: Sequence[Path], src: Source) -> tuple[list[Checkout], list[str]]:
    """The source at HEAD, then at each of its releases (newest first) and commits the mirror holds; and what no
    mirror holds: the repository, or `repo@rev` for each commit its mirror lacks (and `repo@<tags pattern>` when it
    holds no tag of the pattern)."""
    head = checkout(mirrors, src.repo)
    if head is None:
        return [], [src.repo]
    if not head.is_git:  # released packages unpacked beside the tree: MIRROR/<owner>+<name>/releases/<version>/
        return [head, *plain_releases(head.where.parent / "releases")], []
    tags = head.tags(src.tags)
    found = [rev for rev in src.commits if head.has(rev)]
    missing = [rev for rev in src.commits if rev not in found] + ([src.tags] if src.tags and not tags else [])
    return ([head] + [Checkout(head.where, True, rev) for rev in (*tags, *found)],
            [f"{src.repo}@{rev}" for rev in missing])


def plain_releases(folder: Path) -> list[Checkout]:
    """Each release folder (with its COMMIT file) under `folder`, newest version first."""
    found = [d for d in folder.glob("*") if (d / "COMMIT").is_file()] if folder.is_dir() else []
    return [Checkout(d, False) for d in sorted(found, key=lambda d: [int(n) for n in re.findall(r"\d+", d.name)],
                                                 reverse=True)]


def unread(mirrors: Sequence[Path], src: Source) -> list[str]:
    """What of the source no mirror holds (revisions' second part)."""
    return revisions(mirrors, src)[1]


def glob_pattern(glob: str) -> re.Pattern[str]:
    """A path glob as a regex on the whole path: `*` and `?` inside one folder, `**/` any number of folders."""
    out = []
    for part in re.split(r"(\*\*/|\*|\?)", glob):
        out.append({"**/": "(?:[^/]+/)*", "*": "[^/]*", "?": "[^/]"}.get(part, re.escape(part)))
    return re.compile("".join(out))


def read_files(path: str, globs: Sequence[str]) -> bool:
    """Is `path` one of the validation files the globs name (Python, outside tests, not excluded by hand)?"""
    return path.endswith(".py") and "/tests/" not in path and not path.startswith("tests/") \
        and not path.endswith(EXCLUDED_PATHS) and any(glob_pattern(g).fullmatch(path) for g in globs)


# --- the harvest ----------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Row:
    table: str
    framework: str
    source: str  # path@commit
    template: str
    function: str  # the enclosing function (for review; not written to the table)

    def tsv(self) -> str:
        return f"{self.framework}\t{self.source}\t{self.template}"


def candidates(src: Source, files: Checkout) -> Iterator[Row]:
    """Every template the source's validation code raises, in file order (before the known/healthy filters)."""
    commit, paths = files.commit(), files.paths()
    for globs, function in src.files:
        for path in (p for p in paths if read_files(p, globs)):
            for fn, message in raised_messages(files.read(path), function):
                text = template_of(message)
                if evidence(text):
                    yield Row(src.table, src.framework, f"{path}@{commit}", text, fn)


def harvest(mirrors: Sequence[Path], sources: Sequence[Source], known: set[str],
            healthy: Sequence[str]) -> list[Row]:
    """The rows of the sources found in a mirror: each template once, none of `known`, none a healthy log holds."""
    rows, seen = [], set(known)
    for src in sources:
        found, missing = revisions(mirrors, src)
        for name in missing:
            print(f"skipped {name}: in no mirror", file=sys.stderr)
        for files in found:  # HEAD first: a message still raised today is credited to today's source
            for row in candidates(src, files):
                if row.template not in seen and not in_healthy_log(row.template, healthy):
                    rows.append(row)
                seen.add(row.template)
    return rows


# --- the tables -----------------------------------------------------------------------------------------------------

def tabled_templates(tables: Sequence[Path]) -> set[str]:
    """The tables' templates, each also as the harvester would write it (a row read by hand may keep a field at an end:
    "{} is not a supported DeepSpeed Optimizer" is the harvested "is not a supported DeepSpeed Optimizer")."""
    texts = {tpl.text for tpl in read_tables(list(tables))}
    return texts | {template_of(text) for text in texts}


def healthy_texts(fixtures: Path) -> list[str]:
    """The text of every log labelled `ok` in fixtures/INDEX.tsv and fixtures/oos-batch*/INDEX.tsv."""
    texts = []
    for index in [fixtures / "INDEX.tsv", *sorted(fixtures.glob("oos-batch*/INDEX.tsv"))]:
        if index.is_file():
            with index.open(encoding="utf-8") as fh:
                texts += [(index.parent / row["path"]).read_text(encoding="utf-8", errors="replace")
                          for row in csv.DictReader(fh, delimiter="\t") if row["kind"] == "ok"]
    return texts


def is_generated(table: Path) -> bool:
    return table.is_file() and GENERATED in table.read_text(encoding="utf-8").splitlines()[:2]


def write_table(table: Path, rows: Sequence[Row]) -> None:
    with table.open("w", encoding="utf-8") as fh:
        fh.write(f"framework\tsource\ttemplate\n{GENERATED}\n")
        fh.writelines(row.tsv() + "\n" for row in rows)


def append_rows(table: Path, rows: Sequence[Row]) -> None:
    with table.open("a", encoding="utf-8") as fh:
        fh.writelines(row.tsv() + "\n" for row in rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--mirror", type=Path, action="append", required=True,
                        help="folder of <owner>+<name>/repo (git) or /tree (plain, with COMMIT)")
    parser.add_argument("--framework", action="append", choices=sorted({s.framework for s in SOURCES}),
                        help="only these frameworks (all by default)")
    parser.add_argument("--healthy", type=Path, help="fixtures folder whose ok logs no row may match")
    parser.add_argument("--functions", action="store_true", help="print the enclosing function as a 4th column")
    parser.add_argument("--tables", type=Path, default=TABLE.parent, help="folder of the raised_messages*.tsv")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--append", action="store_true", help="append the new rows to their tables")
    mode.add_argument("--rewrite", action="store_true", help="write the generated tables anew, append to the rest")
    args = parser.parse_args(argv)
    sources = [s for s in SOURCES if not args.framework or s.framework in args.framework]
    missing = sorted(name for s in sources for name in unread(args.mirror, s))
    if args.rewrite and (args.framework or missing):  # a table written anew from part of its sources loses rows
        parser.error(f"--rewrite needs every framework in a mirror (missing: {', '.join(missing) or 'none'})")
    tables = sorted(args.tables.glob("raised_messages*.tsv"))
    rewritten = {t.name for t in tables if args.rewrite and is_generated(t)}
    known = tabled_templates([t for t in tables if t.name not in rewritten])
    rows = harvest(args.mirror, sources, known, healthy_texts(args.healthy) if args.healthy else [])
    for name in sorted({s.table for s in sources} | rewritten):
        mine = [row for row in rows if row.table == name]
        if name in rewritten:
            write_table(args.tables / name, mine)
        elif args.append or args.rewrite:
            append_rows(args.tables / name, mine)
        else:
            print(f"# {name}")
            print("".join(row.tsv() + (f"\t{row.function}" if args.functions else "") + "\n" for row in mine), end="")
        print(f"{len(mine)} rows -> {name}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
