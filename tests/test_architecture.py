"""The import rule (docs/architecture.md): every module belongs to a phase, and imports only its own phase and
earlier ones; no import cycle; no function-level import of a project module (lazy imports are for heavy optional
dependencies only); no module but launcher.core.layout keeps its own list of the Layout's dimensions.

Read from the source with `ast` (module level and inside functions), so that it holds for code no test runs."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from launcher.core.layout import NAMES

REPO = Path(__file__).resolve().parent.parent
PHASES = ("core", "config", "plan", "backends", "run", "logs", "report", "cli")
PREFIXES = (  # module prefix -> phase; the longest prefix wins
    ("launcher.core", "core"), ("launcher.config", "config"), ("launcher.plan", "plan"),
    ("launcher.backends", "backends"), ("launcher.run", "run"), ("launcher.netbench", "run"),
    ("launcher.computebench", "run"),
    ("launcher.workload", "run"), ("analysis.logs", "logs"), ("analysis.report", "report"),
    ("launcher.netbench.__main__", "cli"),
    ("launcher.computebench.__main__", "cli"), ("launcher.workload.__main__", "cli"),
    ("launcher", "cli"), ("analysis", "cli"),
)
JOB_SIDE = ("launcher.workload",)
"""Runs on the compute nodes of every job: imports nothing of the project but itself and launcher.core. It is a
program of its own (like Megatron-LM): its command-line arguments are its interface, which the torch backend
renders and tests/plan/test_rules.py checks against the rules table, so it may spell the dimensions itself."""
LAZY_ALLOWED = {("launcher.workload.__main__", "launcher.workload.train"):
                "train imports torch: the workload checks its arguments before paying for it"}


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted([*REPO.glob("launcher/**/*.py"), *REPO.glob("analysis/**/*.py")]):
        name = ".".join(path.relative_to(REPO).with_suffix("").parts)
        found[name.removesuffix(".__init__")] = path
    return found


MODULES = modules()


def phase(module: str) -> str:
    best = max((p for p, _ in PREFIXES if module == p or module.startswith(p + ".")), key=len)
    return dict(PREFIXES)[best]


def _target(node: ast.ImportFrom | ast.Import, alias: ast.alias) -> str:
    if isinstance(node, ast.Import):
        return alias.name
    assert node.module is not None and node.level == 0, "relative imports are not used in this project"
    sub = f"{node.module}.{alias.name}"
    return sub if sub in MODULES else node.module


def imports(module: str) -> list[tuple[str, bool, int]]:
    """(imported project module, inside a function?, line) of every import statement of `module`."""
    tree = ast.parse(MODULES[module].read_text())
    out = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            lazy = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                for alias in child.names:
                    target = _target(child, alias)
                    if target.split(".")[0] in ("launcher", "analysis"):
                        out.append((target, in_function, child.lineno))
            visit(child, lazy)

    visit(tree, False)
    return out


GRAPH = {m: imports(m) for m in MODULES}


def test_every_module_has_a_phase():
    assert {phase(m) for m in MODULES} <= set(PHASES)
    assert phase("launcher.run.loop") == "run" and phase("analysis.logs.judge") == "logs"
    assert phase("launcher.__main__") == "cli" and phase("analysis.classify.__main__") == "cli"


def test_no_import_of_a_later_phase():
    wrong = [f"{m}:{line} ({phase(m)}) imports {t} ({phase(t)})" for m, edges in GRAPH.items()
             for t, _, line in edges if PHASES.index(phase(t)) > PHASES.index(phase(m))]
    assert not wrong, "\n".join(wrong)


def test_no_lazy_import_of_a_project_module():
    lazy = [f"{m}:{line} imports {t} inside a function" for m, edges in GRAPH.items() for t, inside, line in edges
            if inside and (m, t) not in LAZY_ALLOWED]
    assert not lazy, "\n".join(lazy)


def test_the_job_side_imports_only_itself_and_the_core():
    wrong = [f"{m} imports {t}" for m, edges in GRAPH.items() if m.startswith(JOB_SIDE) for t, _, _ in edges
             if not t.startswith((*JOB_SIDE, "launcher.core"))]
    assert not wrong, "\n".join(wrong)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found = []

    def strong(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in graph:
        if v not in index:
            strong(v)
    return found


def test_no_import_cycle():
    graph = {m: {t for t, _, _ in edges if t != m} for m, edges in GRAPH.items()}
    assert not cycles(graph)


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


LIST_OF_DIMENSIONS = 4
"""A literal naming this many dimensions is a list of dimensions (a rule reading three fields is not)."""


def dimension_lists(module: str) -> list[int]:
    """Lines of tuple/list/set literals that name LIST_OF_DIMENSIONS or more Layout dimensions."""
    tree = ast.parse(MODULES[module].read_text())
    names = set(NAMES)
    return [node.lineno for node in ast.walk(tree) if isinstance(node, (ast.Tuple, ast.List, ast.Set))
            and len({e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in names})
            >= LIST_OF_DIMENSIONS]


def test_no_module_keeps_its_own_list_of_dimensions():
    owned = [f"{m}:{line}" for m in MODULES if m != "launcher.core.layout" and not m.startswith(JOB_SIDE)
             for line in dimension_lists(m)]
    assert not owned, "derive these from launcher.core.layout (DIMENSIONS, NAMES, NUMERIC, ...):\n" + "\n".join(owned)


@pytest.mark.parametrize("source, expected", [
    ('KEYS = ("gpus", "tp", "pp", "dp")', [1]), ('KEYS = ["tp", "pp", "dp"]', []),
    ("x = {'tp', 'cp', 'vpp', 'mbs'}", [1]), ("for k in ('tp', 'pp', 'dp', 'zero_stage'):\n    pass", [1]),
])
def test_the_dimension_list_finder(tmp_path, monkeypatch, source, expected):
    path = tmp_path / "m.py"
    path.write_text(source)
    monkeypatch.setitem(MODULES, "m", path)
    assert dimension_lists("m") == expected
