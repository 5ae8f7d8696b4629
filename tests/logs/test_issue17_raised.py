"""families.raised: the configuration-validation messages of Megatron-LM, DeepSpeed, Megatron-DeepSpeed and
Transformer Engine, kept as a table with their source, matched on error lines only."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from analysis.logs.classify import classify
from analysis.logs.families import raised as R
from launcher.core.kinds import FailureKind

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _healthy_logs() -> list[Path]:
    out = []
    for index in [FIXTURES / "INDEX.tsv", *sorted(FIXTURES.glob("oos-batch*/INDEX.tsv"))]:
        with index.open(encoding="utf-8") as fh:
            out += [index.parent / row["path"] for row in csv.DictReader(fh, delimiter="\t") if row["kind"] == "ok"]
    return out


def test_every_row_compiles_with_a_source_and_enough_fixed_words() -> None:
    rows = R.templates()
    assert len(rows) > 100
    frameworks = {t.framework for t in rows}
    assert {"Megatron-LM", "DeepSpeed", "Megatron-DeepSpeed", "TransformerEngine"} <= frameworks
    for tpl in rows:
        assert "@" in tpl.source, tpl  # the file at the commit it was read from
        assert R.fixed_words(tpl.text) >= R.MIN_WORDS, tpl.text
        assert tpl.anchor in R.flat(tpl.text)  # whitespace runs as one space (the anchor is looked for so)


def test_no_row_matches_a_healthy_fixture_log() -> None:
    healthy = _healthy_logs()
    assert len(healthy) > 100
    for path in healthy:
        assert R.first_raised(path.read_text(encoding="utf-8", errors="replace")) is None, path


@pytest.mark.parametrize("line", [
    # real excerpts (tests/fixtures/oos-batch8)
    "ValueError: No dot product attention backend is available for the provided inputs. Please run with "
    "NVTE_DEBUG=1 NVTE_DEBUG_LEVEL=2 to find out the reasons for disabling all backends.",
    "deepspeed.runtime.zero.utils.ZeRORuntimeException: You are using ZeRO-Offload with a client provided optimizer "
    "(<class 'transformers.optimization.AdamW'\n>) which in most cases will yield poor performance. Please either use "
    "deepspeed.ops.adam.DeepSpeedCPUAdam or set an optimizer in your ds-config"
    " (https://www.deepspeed.ai/docs/config-json/#optimizer-parameters). If you really want to use a custom "
    "optimizer w. ZeRO-Offload and understand the performance impacts you can also set "
    "<\"zero_force_ds_cpu_optimizer\": false> in your configuration file.",
    # the same sources' messages with other values (made up)
    "AssertionError: Check batch related parameters. train_batch_size is not equal to micro_batch_per_gpu * "
    "gradient_acc_step * world_size 96 != 4 * 2 * 8",
    "[rank0]: ValueError: No dot product attention support for the provided inputs!",
])
def test_a_raised_validation_message_is_a_config_error(line: str) -> None:
    text = "starting\n" + line + "\n"
    hit = R.first_raised(text)
    assert hit is not None
    assert classify(text).kind is FailureKind.CONFIG_ERROR


@pytest.mark.parametrize("line", [
    # the same words on a warning line: the run goes on
    "[WARNING] You are using ZeRO-Offload with a client provided optimizer (<class 'X'>) which in most cases will "
    "yield poor performance. Please either use deepspeed.ops.adam.DeepSpeedCPUAdam or set an optimizer in your "
    "ds-config"
    " (https://www.deepspeed.ai/docs/config-json/#optimizer-parameters). If you really want to use a custom "
    "optimizer w. ZeRO-Offload and understand the performance impacts you can also set "
    "<\"zero_force_ds_cpu_optimizer\": false> in your configuration file.",
    # error lines of other kinds
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    "RuntimeError: NCCL communicator was aborted on rank 3.",
])
def test_other_lines_do_not_match(line: str) -> None:
    assert R.first_raised("starting\n" + line + "\n") is None
