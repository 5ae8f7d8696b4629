"""families.raised reads every raised_messages*.tsv; raised_messages_others.tsv holds the configuration checks of the
trainers run beside Megatron/DeepSpeed (transformers' neighbours, TRL, PEFT, Lightning, torchtitan, veRL, OpenRLHF,
LLaMA-Factory, ms-swift, ColossalAI), harvested from their source by tests/benchmarks/harvest_raised_others.py."""

from __future__ import annotations

from pathlib import Path

import pytest
from benchmarks.harvest_raised_others import Source, harvest, template_of

from analysis.logs.classify import classify
from analysis.logs.families import raised as R
from launcher.core.kinds import FailureKind

HEADER = "framework\tsource\ttemplate\n"


def test_every_table_beside_raised_is_read_in_name_order(tmp_path: Path) -> None:
    (tmp_path / "raised_messages.tsv").write_text(
        HEADER + "A\ta.py@000000000000\tthe first table: {} is wrong in this place\n", encoding="utf-8")
    (tmp_path / "raised_messages_others.tsv").write_text(
        HEADER + "# a comment\nB\tb.py@111111111111\tthe second table refuses {} outright\n", encoding="utf-8")
    (tmp_path / "unrelated.tsv").write_text(HEADER + "C\tc.py@2\tnot a table of messages at all\n",
                                            encoding="utf-8")
    paths = R.tables(tmp_path)
    assert [p.name for p in paths] == ["raised_messages.tsv", "raised_messages_others.tsv"]
    rows = R.read_tables(paths)
    assert [(t.framework, t.anchor) for t in rows] == [("A", "is wrong in this place"), ("B", "the second table refuses")]


def test_the_shipped_tables_are_both_read() -> None:
    frameworks = {t.framework for t in R.templates()}
    assert {"Megatron-LM", "DeepSpeed"} <= frameworks  # raised_messages.tsv
    assert {"veRL", "LLaMA-Factory", "ms-swift", "TRL", "accelerate", "Lightning"} <= frameworks  # the others
    others = R.read_tables([R.TABLE.with_name("raised_messages_others.tsv")])
    assert others and all("@" in t.source and R.fixed_words(t.text) >= R.MIN_WORDS for t in others)


MADE_UP = '''
from dataclasses import dataclass

class Boom(Exception):
    pass

@dataclass
class Args:
    def __post_init__(self):
        if self.tp > self.world:
            raise ValueError(f"tensor_parallel_size ({self.tp}) cannot exceed the world size {self.world}")
        if self.a:
            raise ValueError("micro batch {} does not divide global batch {}".format(self.mb, self.gb))
        if self.b:
            raise TypeError("optimizer %s is not supported with offload %r" % (self.o, self.off))
        assert self.pp >= 1, "pipeline_model_parallel_size must be at least one"
        if self.c:
            raise ImportError("please install the flash attention package first")
        if self.d:
            raise ValueError("bad value")
        if self.f:
            raise ValueError(f"dtype {self.dtype} is not supported")
        if self.e:
            raise Boom("the " + self.name + " plugin cannot be combined with zero stage three")

    def forward(self, x):
        assert x.dim() == 3, "the input tensor must have three dimensions here"
'''


def test_the_harvester_reads_validation_paths_of_a_made_up_tree(tmp_path: Path) -> None:
    tree = tmp_path / "acme+trainer" / "tree"
    (tree / "acme").mkdir(parents=True)
    (tree / "COMMIT").write_text("0123456789abcdef0123\n", encoding="utf-8")
    (tree / "acme" / "args.py").write_text(MADE_UP, encoding="utf-8")
    (tree / "acme" / "model.py").write_text(MADE_UP, encoding="utf-8")  # not named by the glob
    known = {"pipeline_model_parallel_size must be at least one"}  # in another table already
    healthy = ["step 10 loss 2.3\nthe {} plugin cannot be combined with zero stage three is fine\n"]
    rows = harvest([tmp_path], (Source("Acme", "acme/trainer", ("acme/args.py",), r"__post_init__"),), known,
                   healthy)
    assert rows == [
        ("Acme", "acme/args.py@0123456789ab", "tensor_parallel_size ({}) cannot exceed the world size {}"),
        ("Acme", "acme/args.py@0123456789ab", "micro batch {} does not divide global batch {}"),
        ("Acme", "acme/args.py@0123456789ab", "optimizer {} is not supported with offload {}"),
    ]  # not: the known assert, ImportError (the environment), "bad value" (2 words), "dtype {} is not supported"
    #      (no distinctive word: a crash's line says as much), the healthy log's words, the forward pass's assert


def test_template_of_turns_fields_into_braces() -> None:
    import ast
    expr = ast.parse('f"a {x}{y} b {{literal}}: {z!r}"', mode="eval").body
    assert template_of(expr) == "a {} b {literal}: {}"
    assert template_of(ast.parse("message", mode="eval").body) is None  # a variable: no literal to match


@pytest.mark.parametrize("line", [
    # as the trainers print them (values made up; the templates are the table's rows)
    "(TaskRunner pid=2177, ip=10.0.0.3) AssertionError: When using sequence parallelism for actor/ref policy, you "
    "must enable `use_remove_padding`.",
    "[rank0]: ValueError: train_batch_size (256) must be >= actor.ppo_mini_batch_size (512)",
    "ValueError: `use_llama_pro` is only valid for Freeze or LoRA training.",
    "lightning.fabric.utilities.exceptions.MisconfigurationException: You selected an invalid accelerator name: "
    "`accelerator='tpuu'`. Available names are: auto, cpu, cuda, mps, tpu.",
    "AssertionError: apply_chat_template must be enabled when using multiturn format",
])
def test_a_new_row_is_a_config_error_on_an_error_line(line: str) -> None:
    text = "loading\n" + line + "\n"
    hit = R.first_raised(text)
    assert hit is not None and hit[1].source.split("@")[0].endswith(".py")
    assert classify(text).kind is FailureKind.CONFIG_ERROR


@pytest.mark.parametrize("line", [
    # the same words where the run goes on, or other words that share a few
    "WARNING: When using sequence parallelism for actor/ref policy, you must enable `use_remove_padding`.",
    "INFO train_batch_size (256) must be >= actor.ppo_mini_batch_size (512) -- adjusted automatically",
    "ValueError: `use_llama_pro` requires a model with expandable layers.",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
])
def test_look_alikes_do_not_match(line: str) -> None:
    assert R.first_raised("loading\n" + line + "\n") is None


@pytest.mark.parametrize("text", [
    "x\nValueError: train_batch_size (8) must be >= actor.ppo_mini_batch_size (16)\n",
    "AssertionError: Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * "
    "gradient_acc_step * world_size 96 != 4 * 2 * 8\n",
    "ERROR: `use_llama_pro` is only valid for Freeze or LoRA\n",  # cut: the lead's words only
    "RuntimeError: precision bf16-mixed is not supported on this device\n",
])
def test_the_word_index_tries_what_every_template_would(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    indexed = R.first_raised(text)
    monkeypatch.setattr(R, "_candidates", lambda window: list(R.templates()))
    assert R.first_raised(text) == indexed
