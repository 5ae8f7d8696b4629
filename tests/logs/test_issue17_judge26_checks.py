"""Batch 22's one miss as a family (judge26): DeepSpeed's `_do_optimizer_sanity_check` refused Lion under ZeRO, but the
harvester read engine.py only in functions named exactly as set-up (`_SETUP`), so the check's asserts were never in
raised_messages.tsv. A narrowed file's check functions (families.harvest._CHECKS: `*sanity_check*`, `_check_*`,
`_validate_*`, `verify_*`, `_assert_*`, `finalize`) are now read too, minus the names whose checks test the run
(a tensor, a buffer, a step's data, the program's own state)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from analysis.logs.classify import classify
from analysis.logs.families import harvest as H
from analysis.logs.families import raised as R
from launcher.core.kinds import FailureKind

_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
_NEOX = _FIXTURES / "oos-batch22/megatron_deepspeed/gpt_neox_lion_optimizer_zero1_untested_optimizer_assertion_1.log"


def test_the_gpt_neox_untested_zero_optimizer_log_is_a_config_error() -> None:
    text = _NEOX.read_text(encoding="utf-8")
    hit = R.first_raised(text)
    assert hit is not None and hit[1].framework == "DeepSpeed"
    assert hit[1].source.startswith("deepspeed/runtime/engine.py@")
    assert classify(text).kind is FailureKind.CONFIG_ERROR


@pytest.mark.parametrize("line", [
    "[rank0]: AssertionError: Amp and ZeRO are not currently compatible, please use (legacy) fp16 mode which performs "
    "similar to amp opt_mode=O2",
    "[rank1]: AssertionError: AutoEP with ZeRO Stage 3 does not support MiCS yet (mics_shard_size=8).",
    "ValueError: global batch size (96) must be divisible by student data_parallel size (5).",
    "AssertionError: num_attention_heads (12) must be divisible by TP size (8)",
])
def test_other_checks_of_the_widened_names_are_config_errors(line: str) -> None:
    text = "Traceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n" + line + "\n"
    assert classify(text).kind is FailureKind.CONFIG_ERROR


@pytest.mark.parametrize("line", [
    # DeepSpeed engine.py broadcast_and_check: a step's batch differs across the TP group (runtime, not a setting)
    "[rank2]: AssertionError: Data inconsistency within the TP group. Please check the Dataloader implementation to "
    "ensure consistency.",
    # DeepSpeed stage3.py _assert_same_partition_group: an internal invariant of the parameter buckets
    "AssertionError: ZeRO Stage 3 parameter bucket mixes partition process groups.",
    # NeMo-RL _assert_step_open: the program's own state
    "AssertionError: no train step open; begin_train_step must be called first",
])
def test_runtime_checks_in_functions_of_a_widened_name_are_not_config_errors(line: str) -> None:
    text = "iteration 10 | loss 2.3\nTraceback (most recent call last):\n  File \"x.py\", line 9, in step\n" + line
    assert R.first_raised(text) is None
    assert classify(text).kind is not FailureKind.CONFIG_ERROR


# A made-up engine: set-up and check functions beside run-time checks whose names have the same shape.
_ENGINE = '''
class Engine:
    def _do_optimizer_sanity_check(self, opt):
        assert self.allow_untested, "You are using an untested ZeRO Optimizer, set zero_allow_untested_optimizer"
    def _validate_moe_compatibility(self):
        if self.stage == 3:
            raise ValueError(f"expert parallel MoE is not supported with ZeRO stage {self.stage}")
    def _check_tensor_shapes(self, x):
        assert x.shape == self.shape, "the activation tensor shape differs from the recorded shape"
    def _assert_grad_buffer_ready(self):
        assert self.buffer is not None, "the gradient buffer was released before the reduction"
    def broadcast_and_check(self, batch):
        assert batch == self.first, "data inconsistency across the tensor parallel group ranks"
    def _validate_loaded_checkpoint(self):
        raise RuntimeError("the checkpoint shard count differs from the saved world size")
    def train_step(self):
        assert self.ok, "the flat parameter partition moved during the step"
'''


def _mirror(tmp_path: Path) -> None:
    repo = tmp_path / "acme+engine" / "repo"
    (repo / "eng").mkdir(parents=True)
    (repo / "eng" / "engine.py").write_text(_ENGINE, encoding="utf-8")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git[:3], "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)


def test_a_narrowed_file_gives_its_check_functions_but_not_its_runtime_checks(tmp_path: Path) -> None:
    _mirror(tmp_path)
    src = H.Source("Toy", "acme/engine", H.MAIN, H._one(("eng/engine.py", r"__init__")))
    rows = H.harvest([tmp_path], [src], set(), [])
    assert [(r.function, r.template) for r in rows] == [
        ("_do_optimizer_sanity_check", "You are using an untested ZeRO Optimizer, set zero_allow_untested_optimizer"),
        ("_validate_moe_compatibility", "expert parallel MoE is not supported with ZeRO stage"),
    ]  # not the tensor, buffer, broadcast, checkpoint or step checks


@pytest.mark.parametrize(("name", "is_check"), [
    ("_do_optimizer_sanity_check", True), ("_do_args_sanity_check", True), ("_check_consistent", True),
    ("validate_tp_mesh", True), ("_verify_sdpa_support", True), ("assert_teacher_student_batch_grid", True),
    ("finalize", True), ("_validate_tensor_parallel_config", True),
    ("_check_tensor_shapes", False), ("_check_for_nan_in_grad", False), ("_assert_grad_buffer_ready", False),
    ("broadcast_and_check", False), ("_validate_loaded_checkpoint", False), ("check_step_inputs", False),
    ("checkpoint_check", False), ("forward", False), ("_check_for_duplicates", False),
])
def test_the_widened_names(name: str, is_check: bool) -> None:
    assert bool(re.fullmatch(H._CHECKS, name)) is is_check


def test_offload_is_a_setting_not_a_load() -> None:
    setup = re.compile(H._named(H._SETUP_WORDS))
    assert setup.fullmatch("validate_cpu_offload") and not setup.fullmatch("load_state")


def test_a_hand_row_with_a_field_at_an_end_counts_as_known(tmp_path: Path) -> None:
    table = tmp_path / H.MAIN
    table.write_text("framework\tsource\ttemplate\nX\tx.py@1\t{} is not a supported DeepSpeed Optimizer\n",
                     encoding="utf-8")
    assert "is not a supported DeepSpeed Optimizer" in H.tabled_templates([table])
