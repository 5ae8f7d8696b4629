"""The real Megatron/NCCL/SLURM log excerpts in tests/fixtures/megatron-logs (each names its source first)."""

from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures" / "megatron-logs"
ALL_LOGS = sorted(p.name for p in FIXTURES.glob("*.log"))


def body(name: str) -> str:
    """The log without the fixture's leading '# SOURCE ...' comment lines (they quote the errors they contain)."""
    lines = (FIXTURES / name).read_text().splitlines(keepends=True)
    while lines and lines[0].startswith("#"):
        lines.pop(0)
    return "".join(lines)
