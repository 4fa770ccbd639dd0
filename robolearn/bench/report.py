"""Benchmark rows as a plain-text table for the terminal."""

from __future__ import annotations

import importlib.metadata
import os
import platform
from collections.abc import Callable, Sequence
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


TEXT_KEYS = ("part", "contender", "note")
"""Columns shown left-aligned; every other column is a number."""


def format_table(
    rows: Sequence[dict[str, Any]],
    columns: Sequence[tuple[str, str]] = COLUMNS,
    cell: Callable[[str, Any], str] = _cell,
) -> str:
    """The rows as aligned columns under a header; numbers right-aligned, a missing value as ``-``."""
    cells = [[header for _, header in columns]]
    cells += [[cell(key, row.get(key)) for key, _ in columns] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    numeric = [key not in TEXT_KEYS for key, _ in columns]
    lines = []
    for line in cells:
        padded = [c.rjust(w) if num else c.ljust(w) for c, w, num in zip(line, widths, numeric, strict=True)]
        lines.append("  ".join(padded).rstrip())
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def ratio(a: float | None, b: float | None) -> float | None:
    """a / b, or None where either figure is missing."""
    return None if a is None or b is None else a / b


def usable_cpus() -> int:
    """CPUs this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def versions(packages: Sequence[str]) -> dict[str, str | None]:
    """Installed versions of the packages (None where one is missing)."""
    found: dict[str, str | None] = {}
    for package in packages:
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = None
    return found


def machine_info() -> dict[str, Any]:
    """What a figure was measured on, including how busy the machine was."""
    return {
        "cpu_count": os.cpu_count(),
        "cpus_usable": usable_cpus(),
        "processor": platform.processor() or platform.machine(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "load_average_1min_at_start": os.getloadavg()[0],
    }
