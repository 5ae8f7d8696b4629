"""The README and docs/ (the README is a one-screen quick start; the reference lives in docs/): every relative link
and #anchor resolves, every repository path a page names in backticks exists, and every benchmark command it
shows names a script that is there. A page moved or a file renamed fails here, not in a reader's browser."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
TOP_LEVEL = ("launcher/", "analysis/", "tests/", "conf/", "docs/", ".ci/")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)  # a '# comment' in a block is no heading
    return {slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", text, re.MULTILINE)}


def test_the_reference_pages_are_there():
    names = {p.name for p in PAGES}
    assert {"configuration.md", "slurm.md", "mlflow.md", "estimator.md", "search.md", "benchmarks.md",
            "judgement.md", "architecture.md"} <= names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_link_and_anchor_resolves(page):
    for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text()):
        if re.match(r"[a-z]+://", target):
            continue
        path, _, anchor = target.partition("#")
        linked = (page.parent / path).resolve() if path else page
        assert linked.exists(), f"{page.name}: link to {target}: no such file"
        if anchor:
            assert anchor in anchors(linked), f"{page.name}: link to {target}: no such heading in {linked.name}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_repository_path_named_exists(page):
    text = page.read_text()
    named = {m.rstrip(".,;:") for m in re.findall(r"`([^`\s]+)`", text) if m.startswith(TOP_LEVEL)}
    named |= set(re.findall(r"python (tests/benchmarks/\w+\.py)", text))
    missing = sorted(p for p in named if "<" not in p and "*" not in p and not (REPO / p).exists())
    assert not missing, f"{page.name} names paths that do not exist: {missing}"
