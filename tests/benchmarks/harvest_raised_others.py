"""Harvest the configuration checks of the trainers run beside Megatron/DeepSpeed into
analysis/logs/families/raised_messages_others.tsv (families.raised reads every raised_messages*.tsv).

    python tests/benchmarks/harvest_raised_others.py --mirror /work/.mirror [--mirror DIR ...] [--out TSV]

For each source in SOURCES, the repository `MIRROR/<owner>+<name>/repo` (a bare git directory, read at HEAD) or, when
there is none, the plain folder `MIRROR/<owner>+<name>/tree` (its commit or release tag in a COMMIT file there) is
read, from the first --mirror that has it. transformers' repository is too large to fetch whole, so its released
wheel stands in: `pip download transformers --no-deps`, unzip it into `DIR/huggingface+transformers/tree/src` and
write the version (v5.24.0) to its COMMIT. Only the files its globs name are read (a `*` stays inside one folder), and
in them only the validation paths: functions whose name the source's pattern accepts and RUNTIME does not (module
level code counts as `<module>`, an argparse script's checks). Each `raise XError(<message>)` and
`assert cond, <message>` whose message is a string, an f-string, a `"...".format(...)` or a `"..." % (...)` becomes a
template: its literal text, `{}` for every field. Left out: import/file errors (an environment's, not a
configuration's), templates with fewer than raised.MIN_WORDS fixed words or without a distinctive word (GENERIC),
those already in another table, and those found in a healthy fixture log (tests/fixtures INDEX.tsv rows of kind ok). Each row records `path@commit` (12 hex).
"""

from __future__ import annotations

import argparse
import ast
import csv
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

from analysis.logs.families import raised as R  # noqa: E402

OUT = REPO / "analysis/logs/families/raised_messages_others.tsv"
FIXTURES = REPO / "tests/fixtures"
# Set-up and validation functions; a runtime assert in a forward pass or a step is not a configuration error.
SETUP = (r"__post_init__|__init__|validat|verify|check(?!point)|setup|set_up|configur|config|_init|init_|parse|select"
         r"|choose|<module>")
# Checkpoint saving/loading and state restoring: a refusal there is about files on disk, not the layout's settings.
RUNTIME = re.compile(r"checkpoint|load|save|restore|state_dict|forward|step")
# Exceptions that say the environment lacks something, not that the configuration is wrong.
NOT_CONFIG = {"ImportError", "ModuleNotFoundError", "FileNotFoundError", "OSError", "MemoryError", "KeyError",
              "StopIteration", "AttributeError"}


@dataclass(frozen=True)
class Source:
    framework: str
    repo: str  # owner/name
    globs: tuple[str, ...]
    functions: str = SETUP  # regex (search) on the enclosing function's name


TRANSFORMERS_SETUP = (r"__post_init__|__init__|_validate_args|_build_accelerator_args|create_accelerator_and_postprocess"
                      r"|_wrap_model|get_optimizer_cls_and_kwargs|_setup_devices")
SOURCES = (
    Source("transformers", "huggingface/transformers",
           ("src/transformers/training_args.py", "src/transformers/trainer.py"), TRANSFORMERS_SETUP),
    Source("transformers", "huggingface/transformers",
           ("src/transformers/integrations/deepspeed.py", "src/transformers/integrations/fsdp.py"), r".*"),
    Source("accelerate", "huggingface/accelerate",
           ("src/accelerate/utils/dataclasses.py", "src/accelerate/parallelism_config.py")),
    Source("accelerate", "huggingface/accelerate", ("src/accelerate/accelerator.py",),
           r"__init__|_prepare_deepspeed|_prepare_fsdp|_prepare_tp|_prepare_cp|_prepare_megatron|prepare_model"),
    Source("TRL", "huggingface/trl", ("trl/trainer/*_config.py", "trl/experimental/*/*_config.py")),
    Source("TRL", "huggingface/trl", ("trl/trainer/*_trainer.py",), r"__init__"),
    Source("PEFT", "huggingface/peft", ("src/peft/tuners/*/config.py", "src/peft/config.py")),
    Source("Lightning", "Lightning-AI/pytorch-lightning",
           ("src/lightning/pytorch/trainer/connectors/*.py", "src/lightning/pytorch/trainer/configuration_validator.py",
            "src/lightning/fabric/connector.py"), r".*"),
    Source("Lightning", "Lightning-AI/pytorch-lightning",
           ("src/lightning/pytorch/strategies/*.py", "src/lightning/fabric/strategies/*.py")),
    Source("torchtitan", "pytorch/torchtitan",
           ("torchtitan/config/*.py", "torchtitan/distributed/parallel_dims.py"), r".*"),
    Source("veRL", "verl-project/verl",
           ("verl/workers/config/*.py", "verl/trainer/config/*.py", "verl/utils/config.py", "verl/base_config.py"),
           r".*"),
    Source("veRL", "verl-project/verl", ("verl/trainer/ppo/ray_trainer.py", "verl/trainer/main_ppo.py")),
    Source("OpenRLHF", "OpenRLHF/OpenRLHF", ("openrlhf/cli/train_*.py", "openrlhf/utils/config.py"), r".*"),
    Source("LLaMA-Factory", "hiyouga/LLaMA-Factory", ("src/llamafactory/hparams/*.py",), r".*"),
    Source("ms-swift", "modelscope/ms-swift",
           ("swift/arguments/*.py", "swift/arguments/*/*.py", "swift/megatron/arguments/*.py",
            "swift/trainers/arguments.py", "swift/rlhf_trainers/arguments.py"), r".*"),
    Source("ms-swift", "modelscope/ms-swift", ("swift/pipelines/train/*.py",), r"__init__|_prepare"),  # set-up
    Source("ColossalAI", "hpcaitech/ColossalAI",
           ("colossalai/booster/plugin/*.py", "colossalai/booster/booster.py"),
           r"__init__|configure|_check|check|validate|setup"),
)


# --- reading a repository -------------------------------------------------------------------------------------------

def _checkout(mirrors: list[Path], repo: str) -> tuple[Path, bool]:
    for mirror in mirrors:
        base = mirror / repo.replace("/", "+")
        if (base / "repo").is_dir():
            return base / "repo", True
        if (base / "tree").is_dir():
            return base / "tree", False
    return mirrors[0] / repo.replace("/", "+") / "repo", True


def _commit(where: Path, is_git: bool) -> str:
    if is_git:
        return subprocess.run(["git", "-C", str(where), "rev-parse", "HEAD"], check=True, capture_output=True,
                              text=True).stdout.strip()[:12]
    return (where / "COMMIT").read_text(encoding="utf-8").strip()[:12]


def _paths(where: Path, is_git: bool) -> list[str]:
    if is_git:
        out = subprocess.run(["git", "-C", str(where), "ls-tree", "-r", "--name-only", "HEAD"], check=True,
                             capture_output=True, text=True).stdout
        return out.splitlines()
    return sorted(str(p.relative_to(where)) for p in where.rglob("*.py"))


def _read(where: Path, is_git: bool, path: str) -> str:
    if is_git:
        return subprocess.run(["git", "-C", str(where), "show", f"HEAD:{path}"], check=True, capture_output=True,
                              text=True).stdout
    return (where / path).read_text(encoding="utf-8")


# --- messages to templates ------------------------------------------------------------------------------------------

_FORMAT_FIELD = re.compile(r"\{[^{}]*\}")
_PERCENT_FIELD = re.compile(r"%(?:\([^)]*\))?[-+ #0]*\d*(?:\.\d+)?[sdrfigxX]")
_MARK = "\0"  # a field while the message is assembled (a literal brace stays a brace)


def template_of(node: ast.expr) -> str | None:
    """The message `node` builds, with `{}` for each field; None when it is not built from a literal."""
    text = _assembled(node)
    return None if text is None else _clean(text)


def _assembled(node: ast.expr) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else _MARK for v in node.values)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _assembled(node.left), _assembled(node.right)
        if left is None and right is None:
            return None
        return (_MARK if left is None else left) + (_MARK if right is None else right)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mod):
        left = _assembled(node.left)
        return None if left is None else _PERCENT_FIELD.sub(_MARK, left)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format":
        base = _assembled(node.func.value)
        return None if base is None else _FORMAT_FIELD.sub(_MARK, base).replace("{{", "{").replace("}}", "}")
    return None


def _clean(text: str) -> str:
    """One line, each run of fields (and the blanks between them) one `{}`."""
    text = re.sub(_MARK + r"(?:\s*" + _MARK + ")+", _MARK, text)
    return " ".join(text.replace(_MARK, "{}").split()).strip(" :")


def _exception_name(node: ast.expr | None) -> str:
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def messages(source: str, functions: str) -> Iterator[str]:
    """Templates of the raise/assert messages in the functions of `source` whose name matches `functions`."""
    accept = re.compile(functions)
    tree = ast.parse(source)

    def visit(node: ast.AST, func: str) -> Iterator[str]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                yield from visit(child, child.name)
                continue
            if accept.search(func) and not RUNTIME.search(func):
                found = _message_node(child)
                if found is not None:
                    text = template_of(found)
                    if text is not None:
                        yield text
            yield from visit(child, func)

    yield from visit(tree, "<module>")


def _message_node(node: ast.AST) -> ast.expr | None:
    if isinstance(node, ast.Assert):
        return node.msg
    if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and node.exc.args:
        name = _exception_name(node.exc)
        if name in NOT_CONFIG or not re.search(r"Error$|Exception$", name):
            return None
        return node.exc.args[0]
    return None


# --- filters and the table ------------------------------------------------------------------------------------------

def healthy_texts(fixtures: Path = FIXTURES) -> list[str]:
    out = []
    for index in [fixtures / "INDEX.tsv", *sorted(fixtures.glob("oos-batch*/INDEX.tsv"))]:
        if not index.is_file():
            continue
        with index.open(encoding="utf-8") as fh:
            for row in csv.DictReader(fh, delimiter="\t"):
                if row["kind"] == "ok":
                    out.append((index.parent / row["path"]).read_text(encoding="utf-8", errors="replace"))
    return out


# Words of any validation message: a template needs an identifier (a word with `_`) or two words besides these, or it
# reads on a crash's line as well ("dtype {} not supported", "precision {} is not supported").
GENERIC = {"not", "supported", "support", "supports", "must", "one", "got", "the", "and", "for", "with", "only",
           "requires", "require", "range", "out", "positive", "negative", "cannot", "Please", "please", "specify",
           "provide", "instance", "Model", "model", "precision", "strategy", "dtype", "are", "has", "was", "least",
           "greater", "than", "less", "should", "value", "invalid", "Invalid", "type", "set", "use", "when", "can"}


def distinctive(text: str) -> bool:
    words = [w for part in text.split("{}") for w in re.findall(r"[A-Za-z_]{3,}", part)]
    return any("_" in w.strip("_") for w in words) or sum(w not in GENERIC for w in words) >= 2


def keep(text: str, known: set[str], healthy: list[str]) -> bool:
    if R.fixed_words(text) < R.MIN_WORDS or text in known or not distinctive(text):
        return False
    anchor, pattern = R._anchor(text), R.compile_template(text)
    return not any(anchor in log and pattern.search(log) for log in healthy)


def harvest(mirrors: list[Path], sources: tuple[Source, ...], known: set[str], healthy: list[str]) -> list[tuple[str, str, str]]:
    rows: list[tuple[str, str, str]] = []
    seen = set(known)
    for src in sources:
        where, is_git = _checkout(mirrors, src.repo)
        if not where.is_dir():
            print(f"skipped {src.repo}: no {where}", file=sys.stderr)
            continue
        commit = _commit(where, is_git)
        for path in _paths(where, is_git):
            if not any(PurePosixPath(path).match(g) for g in src.globs) or not path.endswith(".py"):
                continue
            for text in messages(_read(where, is_git, path), src.functions):
                if text not in seen and keep(text, seen, healthy):
                    rows.append((src.framework, f"{path}@{commit}", text))
                seen.add(text)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", type=Path, action="append", required=True)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    others = {p for p in R.tables() if p.resolve() != args.out.resolve()}
    known = {t.text for t in R.read_tables(sorted(others))}
    rows = harvest(args.mirror, SOURCES, known, healthy_texts())
    with args.out.open("w", encoding="utf-8") as fh:
        fh.write("framework\tsource\ttemplate\n")
        fh.write("# written by tests/benchmarks/harvest_raised_others.py (see its docstring); do not edit by hand\n")
        for row in rows:
            fh.write("\t".join(row) + "\n")
    print(f"{len(rows)} rows -> {args.out}")


if __name__ == "__main__":
    main()
