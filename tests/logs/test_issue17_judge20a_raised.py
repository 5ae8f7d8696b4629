"""families.harvest: raised_messages.tsv rows harvested from the validation code of Megatron-LM, DeepSpeed,
Megatron-DeepSpeed, NeMo (with Megatron-Bridge, NeMo-RL, Automodel); the new rows matched on the lines the frameworks
print, and not on look-alikes."""

from __future__ import annotations

import fnmatch
import subprocess
from pathlib import Path

import pytest

from analysis.logs.classify import classify
from analysis.logs.families import harvest as H
from analysis.logs.families import raised as R
from launcher.core.kinds import FailureKind

# A made-up framework: a config module, a module whose set-up function validates and whose step function asserts at
# run time, and a file outside the listed sources.
_CONFIG = '''
from dataclasses import dataclass

@dataclass
class ParallelConfig:
    tp: int = 1
    def __post_init__(self):
        assert self.world % self.tp == 0, f"world size ({self.world}) is not divisible by tp ({self.tp})"
        if self.pp < 1:
            raise ValueError("pipeline parallel size must be at least %d, got %s" % (1, self.pp))
        if self.ep:
            raise NotImplementedError("expert parallelism with {} is not supported for {name}".format(1, name=2))
        if self.cp:
            raise ValueError("context parallel " + "requires sequence packing, got " + str(self.cp))
        assert self.ok, "bad"  # too few words to be evidence
        assert self.ok, msg  # a message that is all field
'''
_ENGINE = '''
class Engine:
    def _configure_optimizer(self):
        raise RuntimeError(f"ZeRO offload requires a CPU optimizer, got {self.opt}")
    def step(self):
        assert self.buffer.numel() == self.size, "flat buffer size does not match the partition size"
'''


def _repo(tmp_path: Path) -> Path:
    files = {"fw/config.py": _CONFIG, "fw/engine.py": _ENGINE, "fw/kernels.py": _ENGINE}
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git[:3], "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    return tmp_path


def test_the_harvester_reads_only_the_validation_code_and_writes_templates(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    rows = H.harvest_repo("Toy", repo, sources=[("fw/*config.py", None), ("fw/engine.py", r"_configure\w*")])
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "--short=12", "HEAD"], check=True,
                            capture_output=True, text=True).stdout.strip()
    assert [(r.source, r.template, r.function) for r in rows] == [
        (f"fw/config.py@{commit}", "world size ({}) is not divisible by tp ({})", "__post_init__"),
        (f"fw/config.py@{commit}", "pipeline parallel size must be at least {}, got", "__post_init__"),
        (f"fw/config.py@{commit}", "expert parallelism with {} is not supported for", "__post_init__"),
        (f"fw/config.py@{commit}", "context parallel requires sequence packing, got", "__post_init__"),
        (f"fw/engine.py@{commit}", "ZeRO offload requires a CPU optimizer, got", "_configure_optimizer"),
    ]  # not the run-time assert in step(), nor kernels.py, nor the short or all-field messages


def test_new_rows_leave_out_tabled_templates_and_words_a_healthy_log_prints(tmp_path: Path) -> None:
    rows = H.harvest_repo("Toy", _repo(tmp_path), sources=[("fw/config.py", None)])
    healthy = ["step 10 | loss 2.3\n[INFO] context parallel requires sequence packing, got 2 (packing on)\n"]
    kept = H.new_rows(rows, {"world size ({}) is not divisible by tp ({})"}, healthy)
    assert [r.template for r in kept] == ["pipeline parallel size must be at least {}, got",
                                          "expert parallelism with {} is not supported for"]


def test_every_harvested_row_of_a_listed_framework_comes_from_a_listed_validation_file() -> None:
    for tpl in R.templates():
        if tpl.framework in H.SOURCES:
            path = tpl.source.rsplit("@", 1)[0]
            assert any(fnmatch.fnmatch(path, glob) for glob, _ in H.SOURCES[tpl.framework]), tpl.source
            assert not path.endswith(H.EXCLUDED_PATHS), tpl.source


def test_the_table_holds_each_template_once() -> None:
    texts = [tpl.text for tpl in R.templates()]
    assert len(texts) == len(set(texts))


@pytest.mark.parametrize(("framework", "line"), [
    ("Megatron-LM", "[rank0]: AssertionError: global batch size (512) is not divisible by micro batch size (3) "
                    "times data parallel size (8)"),
    ("DeepSpeed", "[rank3]: AssertionError: Number of experts (6) should be divisible by expert parallel size (4)"),
    ("DeepSpeed", "AssertionError: ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism"),
    ("Megatron-DeepSpeed", "AssertionError: DeepSpeed's sequence parallel does not work with tensor parallel or "
                           "pipeline parallel"),
    ("NeMo", "AssertionError: Global batch size must be divisible by the product of micro batch size and data "
             "parallel size"),
    ("NeMo", "ValueError: Virtual pipeline model parallel is only supported when using megatron_amp_O2"),
    ("Megatron-Bridge", "[rank0]: ValueError: MFSDP V2 does not support FP8 or FP4."),
    ("NeMo-RL", "ValueError: World size (8) must be divisible by PP * CP * TP (3). The data parallel size (DP = "
                "world_size / (PP * CP * TP)) must be a positive integer. Current DP would be 8/3 = 2.666667, which is "
                "not an integer. Please adjust your cluster size or parallelism parameters."),
])
def test_a_new_row_is_a_config_error_on_the_line_the_framework_prints(framework: str, line: str) -> None:
    text = "iteration 0 starting\nTraceback (most recent call last):\n  File \"train.py\", line 3, in <module>\n" \
        + line + "\n"
    hit = R.first_raised(text)
    assert hit is not None
    assert hit[1].framework == framework
    assert classify(text).kind is FailureKind.CONFIG_ERROR


@pytest.mark.parametrize("text", [
    # the same words on a warning or info record: the run goes on
    "[NeMo W 2025-01-02 10:00:00 api:88] WARNING: Global batch size must be divisible by the product of micro "
    "batch size and data parallel size\n iteration 10/100 | loss 2.1\n",
    "[2025-01-02 10:00:00] [INFO] ZeRO-2 and ZeRO-3 are incompatible with pipeline parallelism; using ZeRO-1\n",
    # a healthy log that names the options in prose
    "Using MFSDP V2 with bf16 (FP8 or FP4 are not used)\n step 1 loss 3.2\n step 2 loss 3.1\n",
    # an error line of another kind with some of the same words
    "RuntimeError: CUDA error: an illegal memory access was encountered (pipeline parallelism stage 2)\n",
])
def test_look_alikes_do_not_match(text: str) -> None:
    assert R.first_raised(text) is None


@pytest.mark.parametrize("glue", [("", ""), ("[rank0]: AssertionError: ", " (see docs)"), ("x", "y")])
def test_a_window_holding_a_templates_anchor_or_lead_tries_that_template(glue: tuple[str, str]) -> None:
    before, after = glue  # the anchor glued to letters on either side still offers its inner words
    for tpl in R.templates():
        for fragment in (tpl.anchor, tpl.lead):
            if fragment:
                assert tpl in R._candidates(before + fragment + after), (tpl.text, fragment)


def test_a_window_without_a_templates_words_does_not_try_it() -> None:
    tried = R._candidates("RuntimeError: CUDA error: an illegal memory access was encountered")
    assert len(tried) < len(R.templates()) // 10
