"""How quantities are written for people: memory figures keep their significant digits (a CPU trial's 0.0347 GB is
not '0.0', an A100's 75.3 GB is not '75.31234')."""

from __future__ import annotations


def gb_text(value_gb: float) -> str:
    """A memory figure in GB without its unit: one decimal from 10 GB up, three significant digits below."""
    return f"{value_gb:.1f}" if abs(value_gb) >= 10 else f"{value_gb:.3g}"
