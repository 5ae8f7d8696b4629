"""families.harvest: the one harvester of both raised_messages*.tsv tables. Made-up source trees (a git repository
and a plain folder with a COMMIT file) show what it reads, how a message becomes a template and what it leaves out."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest

from analysis.logs.families import harvest as H
from analysis.logs.families import raised as R

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
# Another trainer's arguments: environment errors, a message without a distinctive word, a runtime method.
_ARGS = '''
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

    def forward_step(self, x):
        assert x.dim() == 3, "the input tensor must have three dimensions here"
'''


def _git_mirror(mirror: Path) -> str:
    """MIRROR/acme+fw/repo: a git repository of the made-up framework; its commit (12 hex)."""
    repo = mirror / "acme+fw" / "repo"
    for name, text in {"fw/config.py": _CONFIG, "fw/engine.py": _ENGINE, "fw/kernels.py": _ENGINE,
                       "fw/tests/config.py": _CONFIG}.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text, encoding="utf-8")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git[:3], "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "x"], check=True)
    return subprocess.run([*git[:3], "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout[:12]


def _tree_mirror(mirror: Path) -> None:
    """MIRROR/acme+trainer/tree: a plain folder with its release in COMMIT."""
    tree = mirror / "acme+trainer" / "tree"
    (tree / "acme").mkdir(parents=True)
    (tree / "COMMIT").write_text("0123456789abcdef0123\n", encoding="utf-8")
    (tree / "acme" / "args.py").write_text(_ARGS, encoding="utf-8")
    (tree / "acme" / "model.py").write_text(_ARGS, encoding="utf-8")  # not named by the glob


_FW = H.Source("Toy", "acme/fw", H.MAIN, ((("fw/**/*config.py",), None), (("fw/engine.py",), r"_configure\w*")))
_TRAINER = H.Source("Acme", "acme/trainer", H.OTHERS, ((("acme/args.py",), H._named(H._SETUP_WORDS)),))


def test_a_git_mirror_gives_the_validation_codes_templates(tmp_path: Path) -> None:
    commit = _git_mirror(tmp_path)
    rows = H.harvest([tmp_path], [_FW], set(), [])
    assert [(r.table, r.source, r.template, r.function) for r in rows] == [
        (H.MAIN, f"fw/config.py@{commit}", "world size ({}) is not divisible by tp ({})", "__post_init__"),
        (H.MAIN, f"fw/config.py@{commit}", "pipeline parallel size must be at least {}, got", "__post_init__"),
        (H.MAIN, f"fw/config.py@{commit}", "expert parallelism with {} is not supported for", "__post_init__"),
        (H.MAIN, f"fw/config.py@{commit}", "context parallel requires sequence packing, got", "__post_init__"),
        (H.MAIN, f"fw/engine.py@{commit}", "ZeRO offload requires a CPU optimizer, got", "_configure_optimizer"),
    ]  # not the run-time assert in step(), nor kernels.py, nor tests/, nor the short or all-field messages


def test_a_plain_tree_gives_its_validation_paths_minus_environment_and_generic_messages(tmp_path: Path) -> None:
    _tree_mirror(tmp_path)
    known = {"pipeline_model_parallel_size must be at least one"}  # in a table already
    healthy = ["step 10 loss 2.3\nthe {} plugin cannot be combined with zero stage three is fine\n"]
    rows = H.harvest([tmp_path], [_TRAINER], known, healthy)
    assert [(r.table, r.framework, r.source, r.template) for r in rows] == [
        (H.OTHERS, "Acme", "acme/args.py@0123456789ab", "tensor_parallel_size ({}) cannot exceed the world size"),
        (H.OTHERS, "Acme", "acme/args.py@0123456789ab", "micro batch {} does not divide global batch"),
        (H.OTHERS, "Acme", "acme/args.py@0123456789ab", "optimizer {} is not supported with offload"),
    ]  # not: the known assert, ImportError (the environment), "bad value" (2 words), "dtype {} is not supported"
    #      (no distinctive word: a crash's line says as much), the healthy log's words, the forward step's assert


def test_new_rows_leave_out_tabled_repeated_and_healthy_templates(tmp_path: Path) -> None:
    _git_mirror(tmp_path)
    healthy = ["step 10 | loss 2.3\n[INFO] context parallel requires sequence packing, got 2 (packing on)\n"]
    twice = H.Source("Toy", "acme/fw", H.MAIN, ((("fw/config.py",), None), (("fw/config.py",), None)))
    kept = H.harvest([tmp_path], [twice], {"world size ({}) is not divisible by tp ({})"}, healthy)
    assert [r.template for r in kept] == ["pipeline parallel size must be at least {}, got",
                                          "expert parallelism with {} is not supported for"]


def test_a_git_repo_is_read_before_a_tree_and_the_first_mirror_wins(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    (first / "o+n" / "tree").mkdir(parents=True)
    (second / "o+n" / "repo").mkdir(parents=True)
    (first / "o+n" / "repo").mkdir()
    assert H.checkout([first, second], "o/n") == H.Checkout(first / "o+n" / "repo", True)
    assert H.checkout([second / "x"], "o/n") is None


def test_a_glob_star_stays_in_one_folder_and_double_star_spans_folders() -> None:
    assert H.read_files("fw/core/config.py", ["fw/*/config.py"])
    assert not H.read_files("fw/core/sub/config.py", ["fw/*/config.py"])
    assert H.read_files("fw/core/sub/model_config.py", ["fw/**/*config.py"])
    assert H.read_files("fw/model_config.py", ["fw/**/*config.py"])
    assert not H.read_files("fw/tests/model_config.py", ["fw/**/*config.py"])  # tests are never read
    assert not H.read_files("x/fw/config.py", ["fw/*.py"])  # the whole path, not its tail


def test_template_of_turns_fields_into_braces_and_drops_them_at_the_ends() -> None:
    def template(expr: str) -> str:
        return H.template_of(H.message_of(ast.parse(expr, mode="eval").body))
    assert template('f"a {x}{y} b {{literal}}: {z!r}"') == "a {} b {literal}:"
    assert template('"%d%% done, %(n)s  ranks\\nare idle" % (p, d)') == "% done, {} ranks are idle"
    assert template('"{} needs {{braces}} and {name}".format(a, name=b)') == "needs {braces} and"
    assert template("message") == ""  # a variable: no literal to match


def test_the_other_trainers_names_exclude_runtime_functions() -> None:
    import re
    setup = re.compile(H._named(H._SETUP_WORDS))
    assert setup.fullmatch("__post_init__") and setup.fullmatch("_validate_args") and setup.fullmatch("<module>")
    assert not setup.fullmatch("load_checkpoint_config") and not setup.fullmatch("forward")


def test_every_harvested_row_of_a_listed_framework_comes_from_a_listed_validation_file() -> None:
    tables = {s.framework: s.table for s in H.SOURCES}
    for path in R.tables():
        for tpl in R.read_tables([path]):
            if tpl.framework in tables:
                assert tables[tpl.framework] == path.name, tpl.source
                file = tpl.source.rsplit("@", 1)[0]
                globs = [g for s in H.SOURCES if s.framework == tpl.framework for gs, _ in s.files for g in gs]
                assert H.read_files(file, globs), tpl.source


def test_the_tables_hold_each_template_once() -> None:
    texts = [tpl.text for tpl in R.templates()]
    assert len(texts) == len(set(texts))


def test_rewrite_writes_a_generated_table_anew_and_appends_to_the_others(tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    _tree_mirror(tmp_path / "m")
    _git_mirror(tmp_path / "m")
    tables = tmp_path / "tables"
    tables.mkdir()
    (tables / H.MAIN).write_text("framework\tsource\ttemplate\nHand\th.py@1\tread by hand and kept here\n",
                                 encoding="utf-8")
    H.write_table(tables / H.OTHERS, [H.Row(H.OTHERS, "Old", "o.py@2", "a check that left the source", "f")])
    monkeypatch.setattr(H, "SOURCES", (_FW, _TRAINER))
    assert H.main(["--mirror", str(tmp_path / "m"), "--tables", str(tables), "--rewrite"]) == 0
    main = (tables / H.MAIN).read_text(encoding="utf-8").splitlines()
    others = (tables / H.OTHERS).read_text(encoding="utf-8").splitlines()
    assert main[1] == "Hand\th.py@1\tread by hand and kept here" and len(main) == 2 + 5
    assert others[:2] == ["framework\tsource\ttemplate", H.GENERATED] and len(others) == 2 + 4
    assert not any("left the source" in line for line in others)


def test_rewrite_refuses_to_write_a_table_from_part_of_its_sources(tmp_path: Path) -> None:
    _tree_mirror(tmp_path)  # acme/fw is in no mirror
    with pytest.raises(SystemExit):
        H.main(["--mirror", str(tmp_path), "--rewrite"])
    with pytest.raises(SystemExit):
        H.main(["--mirror", str(tmp_path), "--framework", "TRL", "--rewrite"])


# --- older releases (Source.tags, Source.commits, a plain tree's releases/ folder) ----------------------------------

_OLD_CHECK = '''
class ParallelConfig:
    def __post_init__(self):
        assert self.layers % self.pp == 0, "number of layers should be divisible by the pipeline parallel size"
'''


def _tag_release(mirror: Path, tag: str, text: str) -> str:
    """Commit `text` as fw/config.py of acme/fw's repository, tag it, and restore HEAD's files in a later commit;
    the tagged commit (12 hex)."""
    repo = mirror / "acme+fw" / "repo"
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    head = (repo / "fw" / "config.py").read_text(encoding="utf-8")
    (repo / "fw" / "config.py").write_text(text, encoding="utf-8")
    subprocess.run([*git, "commit", "-qam", tag], check=True)
    subprocess.run([*git, "tag", tag], check=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout[:12]
    (repo / "fw" / "config.py").write_text(head, encoding="utf-8")
    subprocess.run([*git, "commit", "-qam", "head"], check=True)
    return commit


def test_a_tagged_release_adds_the_checks_head_no_longer_raises_and_head_keeps_its_own(tmp_path: Path) -> None:
    _git_mirror(tmp_path)
    old = _tag_release(tmp_path, "v1.0.0", _OLD_CHECK + _CONFIG)
    _tag_release(tmp_path, "v2.0.0rc1", _OLD_CHECK.replace("should be", "must be"))  # not a release: not read
    head = subprocess.run(["git", "-C", str(tmp_path / "acme+fw" / "repo"), "rev-parse", "HEAD"], check=True,
                          capture_output=True, text=True).stdout[:12]
    released = H.Source("Toy", "acme/fw", H.MAIN, _FW.files, tags=r"v\d+\.\d+\.\d+")
    rows = {row.template: row.source for row in H.harvest([tmp_path], [released], set(), [])}
    assert rows["number of layers should be divisible by the pipeline parallel size"] == f"fw/config.py@{old}"
    assert rows["world size ({}) is not divisible by tp ({})"] == f"fw/config.py@{head}"  # HEAD first
    assert not any("must be divisible" in text for text in rows)
    assert all(row.source.endswith(head) for row in H.harvest([tmp_path], [_FW], set(), []))  # no tags: HEAD only


def test_a_release_commit_the_mirror_lacks_is_reported_and_refuses_rewrite(tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    _git_mirror(tmp_path)
    _tree_mirror(tmp_path)
    pinned = H.Source("Toy", "acme/fw", H.MAIN, _FW.files, commits=("0123456789ab",))
    assert H.unread([tmp_path], pinned) == ["acme/fw@0123456789ab"]
    assert H.unread([tmp_path], _FW) == [] and H.unread([tmp_path / "none"], _FW) == ["acme/fw"]
    monkeypatch.setattr(H, "SOURCES", (pinned, _TRAINER))
    with pytest.raises(SystemExit):
        H.main(["--mirror", str(tmp_path), "--tables", str(tmp_path), "--rewrite"])


def test_a_plain_trees_release_folders_are_read_newest_first(tmp_path: Path) -> None:
    _tree_mirror(tmp_path)
    releases = tmp_path / "acme+trainer" / "releases"
    for version, extra in (("v4.9.0", "plugin stage two cannot be combined with tensor_parallel_size"),
                           ("v4.10.1", "plugin stage two cannot be combined with tensor_parallel_size")):
        (releases / version / "acme").mkdir(parents=True)
        (releases / version / "COMMIT").write_text(version + "\n", encoding="utf-8")
        (releases / version / "acme" / "args.py").write_text(
            _ARGS + f'\n    def validate(self):\n        raise ValueError("{extra}")\n', encoding="utf-8")
    rows = {row.template: row.source for row in H.harvest([tmp_path], [_TRAINER], set(), [])}
    assert rows["plugin stage two cannot be combined with tensor_parallel_size"] == "acme/args.py@v4.10.1"
    assert rows["micro batch {} does not divide global batch"] == "acme/args.py@0123456789ab"
