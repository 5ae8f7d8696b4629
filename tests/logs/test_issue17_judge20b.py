"""families.raised reads every raised_messages*.tsv; raised_messages_others.tsv holds the configuration checks of the
trainers run beside Megatron/DeepSpeed (transformers' neighbours, TRL, PEFT, Lightning, torchtitan, veRL, OpenRLHF,
LLaMA-Factory, ms-swift, ColossalAI), harvested from their source by families.harvest (its tests: test_harvest.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

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
