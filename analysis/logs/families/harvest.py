"""Harvest raised_messages.tsv rows from a framework's source: the messages its argument/config validation raises.

    python -m analysis.logs.families.harvest FRAMEWORK GIT_DIR [--healthy tests/fixtures] [--functions]

(run once per framework, appending to raised_messages.tsv after review: a template already in the table, from an
earlier framework too, is not printed again).

GIT_DIR is a clone or a bare mirror (read with `git ls-tree` / `git show` at HEAD, no work tree needed). Only the
validation code paths listed in SOURCES are read (a file, and where the file also holds run-time code, the functions
whose name says they check or set up: `validate_args`, `__post_init__`, `_configure_*`), so a kernel's runtime
assert never becomes a config_error. Each `raise XError(<message>)` and `assert <cond>, <message>` there becomes a
template: an f-string field, a `%s` or a `.format` field, or any part that is not a literal becomes `{}`. Rows are
printed as `framework<TAB>path@commit<TAB>template`; a template with fewer than raised.MIN_WORDS fixed words, one
already in a raised_messages*.tsv table, or one whose words occur in a healthy fixture log (--healthy) is left out,
as raised.py's docstring asks. The output is for review: a human appends the rows to the table.
"""

from __future__ import annotations

import argparse
import ast
import csv
import fnmatch
import re
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from analysis.logs.families.raised import MIN_WORDS, TABLE, compile_template, fixed_words

FIELD = "{}"
# Validation code: (path glob, regex of the enclosing function's name or None for the whole file). A file in which
# run-time code sits beside the checks is narrowed to its set-up functions.
_SETUP = r"__init__|__post_init__|validate|_validate|check|_check|configure|_configure|sanity|setup|_setup|init_"
SOURCES: dict[str, tuple[tuple[str, str | None], ...]] = {
    "Megatron-LM": (
        ("megatron/training/arguments.py", None),
        ("megatron/core/*config.py", None),  # fnmatch: * spans folders
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
    ),
    "DeepSpeed": (
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
        ("deepspeed/runtime/zero/stage_1_and_2.py", r"__init__"),
        ("deepspeed/runtime/zero/stage3.py", r"__init__"),
        ("deepspeed/runtime/activation_checkpointing/config.py", None),
        ("deepspeed/runtime/fp16/loss_scaler.py", r"__init__"),
        ("deepspeed/utils/groups.py", r"_create_\w+|initialize\w*"),
        ("deepspeed/runtime/sequence_parallel/*.py", r"__init__"),
        ("deepspeed/sequence/layer.py", r"__init__"),
    ),
    "Megatron-DeepSpeed": (
        ("megatron/arguments.py", None),
        ("megatron/initialize.py", None),
        ("megatron/global_vars.py", None),
        ("megatron/microbatches.py", None),
        ("megatron/core/parallel_state.py", r"initialize_model_parallel"),
        ("megatron/training.py", r"setup_model_and_optimizer|get_model|pretrain"),
    ),
    "NeMo": (
        ("nemo/lightning/pytorch/strategies/megatron_strategy.py", _SETUP),
        ("nemo/lightning/megatron_parallel.py", _SETUP),
        ("nemo/lightning/_strategy_lib.py", None),
        ("nemo/lightning/pytorch/plugins/mixed_precision.py", _SETUP),
        ("nemo/collections/llm/gpt/model/base.py", r"configure_model|__post_init__|__init__"),
        ("nemo/collections/llm/recipes/*.py", None),
        ("nemo/collections/llm/api.py", r"_validate\w*|_setup\w*"),
        ("nemo/utils/exp_manager.py", r"check\w*|error_checks|exp_manager"),
        ("nemo/collections/nlp/parts/nlp_overrides.py", _SETUP),
        ("nemo/collections/nlp/models/language_modeling/megatron_base_model.py", _SETUP),
        ("nemo/collections/nlp/models/language_modeling/megatron_gpt_model.py", r"__init__|_validate\w*|setup\w*"),
        ("nemo/collections/nlp/modules/common/megatron/megatron_init.py", None),
        ("nemo/collections/llm/gpt/data/pre_training.py", _SETUP),
    ),
    "Megatron-Bridge": (
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
    ),
    "NeMo-RL": (
        ("nemo_rl/models/policy/*.py", r"__init__|_validate\w*|validate\w*|check\w*|configure\w*"),
        ("nemo_rl/models/policy/**/*.py", r"__init__|_validate\w*|validate\w*|check\w*|configure\w*"),
        ("nemo_rl/algorithms/*.py", r"setup|validate\w*|_validate\w*|check\w*"),
        ("nemo_rl/distributed/virtual_cluster.py", r"__init__|init_ray|_init\w*"),
        ("nemo_rl/models/generation/vllm/config.py", None),
        ("nemo_rl/models/generation/vllm/vllm_generation.py", r"__init__"),
        ("nemo_rl/utils/config.py", None),
    ),
    "Automodel": (
        ("nemo_automodel/components/config/*.py", None),
        ("nemo_automodel/components/distributed/*.py", _SETUP + r"|\w*parallel\w*|create\w*|get_\w*mesh\w*"),
        ("nemo_automodel/_transformers/*.py", r"__init__|_validate\w*|validate\w*|check\w*"),
        ("nemo_automodel/recipes/llm/train_ft.py", r"setup|build_\w+|_validate\w*|validate\w*"),
        ("nemo_automodel/components/moe/config.py", None),
    ),
}


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
)


@dataclass(frozen=True)
class Row:
    framework: str
    source: str  # path@commit
    template: str
    function: str  # the enclosing function (for review; not written to the table)

    def tsv(self) -> str:
        return f"{self.framework}\t{self.source}\t{self.template}"


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
        return _PERCENT.sub(FIELD, message_of(node.left).replace("%%", "%"))
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


def _raised_messages(tree: ast.AST, function: re.Pattern[str] | None) -> Iterator[tuple[str, str]]:
    """(function name, message) of each raise/assert in a function whose name matches (any, with None)."""
    def visit(node: ast.AST, fn: str) -> Iterator[tuple[str, str]]:
        for child in ast.iter_child_nodes(node):
            name = child.name if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else fn
            wanted = function is None or (name and function.fullmatch(name))
            if wanted and isinstance(child, ast.Assert) and child.msg is not None:
                yield name, message_of(child.msg)
            elif wanted and isinstance(child, ast.Raise) and isinstance(child.exc, ast.Call) and child.exc.args \
                    and _exception_name(child.exc.func).endswith(("Error", "Exception")):
                yield name, message_of(child.exc.args[0])
            yield from visit(child, name)
    yield from visit(tree, "")


def _exception_name(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def harvest_source(framework: str, path: str, commit: str, source: str,
                   function: str | None) -> list[Row]:
    """Rows for one file's text (a file that does not parse gives none)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    pattern = re.compile(function) if function else None
    rows, seen = [], set()
    for fn, message in _raised_messages(tree, pattern):
        text = template_of(message)
        if fixed_words(text) >= MIN_WORDS and text not in seen and not any(w in text for w in EXCLUDED_WORDS):
            seen.add(text)
            rows.append(Row(framework, f"{path}@{commit}", text, fn))
    return rows


def _git(git_dir: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(git_dir), *args], check=True, capture_output=True, text=True).stdout


def harvest_repo(framework: str, git_dir: Path, sources: Sequence[tuple[str, str | None]] | None = None) -> list[Row]:
    """Rows from the validation files of a repository at HEAD (SOURCES[framework] unless `sources` is given)."""
    commit = _git(git_dir, "rev-parse", "--short=12", "HEAD").strip()
    files = _git(git_dir, "ls-tree", "-r", "--name-only", "HEAD").splitlines()
    rows: list[Row] = []
    for glob, function in SOURCES[framework] if sources is None else sources:
        for path in sorted(p for p in files if p.endswith(".py") and fnmatch.fnmatch(p, glob)
                           and "/tests/" not in p and not p.startswith("tests/")
                           and not p.endswith(EXCLUDED_PATHS)):
            rows += harvest_source(framework, path, commit, _git(git_dir, "show", f"HEAD:{path}"), function)
    return rows


def tabled_templates(folder: Path = TABLE.parent) -> set[str]:
    """Templates already in a raised_messages*.tsv table."""
    out = set()
    for table in sorted(folder.glob("raised_messages*.tsv")):
        for line in table.read_text(encoding="utf-8").splitlines():
            if line and not line.startswith(("#", "framework\t")):
                out.add(line.split("\t")[2])
    return out


def healthy_texts(fixtures: Path) -> list[str]:
    """The text of every log labelled `ok` in fixtures/INDEX.tsv and fixtures/oos-batch*/INDEX.tsv."""
    texts = []
    for index in [fixtures / "INDEX.tsv", *sorted(fixtures.glob("oos-batch*/INDEX.tsv"))]:
        with index.open(encoding="utf-8") as fh:
            texts += [(index.parent / row["path"]).read_text(encoding="utf-8", errors="replace")
                      for row in csv.DictReader(fh, delimiter="\t") if row["kind"] == "ok"]
    return texts


def new_rows(rows: Sequence[Row], known: set[str], healthy: Sequence[str]) -> list[Row]:
    """Rows whose template is neither tabled already (nor repeated) nor found anywhere in a healthy log."""
    out, seen = [], set(known)
    for row in rows:
        if row.template in seen:
            continue
        seen.add(row.template)
        pattern, anchor = compile_template(row.template), max(row.template.split(FIELD), key=len).strip()
        if not any(anchor in text and pattern.search(text) for text in healthy):
            out.append(row)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("framework", choices=sorted(SOURCES))
    parser.add_argument("git_dir", type=Path)
    parser.add_argument("--healthy", type=Path, help="fixtures folder whose ok logs no row may match")
    parser.add_argument("--functions", action="store_true", help="print the enclosing function as a 4th column")
    args = parser.parse_args(argv)
    healthy = healthy_texts(args.healthy) if args.healthy else []
    for row in new_rows(harvest_repo(args.framework, args.git_dir), tabled_templates(), healthy):
        print(row.tsv() + (f"\t{row.function}" if args.functions else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
