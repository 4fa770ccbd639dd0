"""Benchmark rows as a plain-text table for the terminal."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

COLUMNS = (
    ("part", "part"),
    ("contender", "contender"),
    ("num_envs", "envs"),
    ("steps_per_s", "env steps/s (best)"),
    ("median_steps_per_s", "median"),
    ("steps_per_cpu_s", "per CPU-s (best)"),
    ("reference_ratio", "ref/this"),
    ("note", "note"),
)
"""Row keys shown, with their headers. ``ref/this`` is the part's reference rate (robolearn's batched
environment; in a one-world part, the mujoco backend) over the row's."""


def _cell(key: str, value: Any) -> str:
    if value is None:
        return "-"
    if key == "reference_ratio":
        return f"{value:.2f}x"
    if isinstance(value, float):
        return f"{value:,.0f}"
    return str(value)


def format_table(rows: Sequence[dict[str, Any]]) -> str:
    """The rows as aligned columns under a header; numbers right-aligned, a missing value as ``-``."""
    cells = [[header for _, header in COLUMNS]]
    cells += [[_cell(key, row.get(key)) for key, _ in COLUMNS] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(COLUMNS))]
    numbers = ("num_envs", "steps_per_s", "median_steps_per_s", "steps_per_cpu_s", "reference_ratio")
    numeric = [key in numbers for key, _ in COLUMNS]
    lines = []
    for line in cells:
        padded = [c.rjust(w) if num else c.ljust(w) for c, w, num in zip(line, widths, numeric, strict=True)]
        lines.append("  ".join(padded).rstrip())
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)
