"""How large a launch may grow before it is refused.

A launch file is input someone may have crafted (issue 15): a 1.3 kB YAML alias bomb, a ``<let>``
that doubles itself 40 times or includes that fan out 2^25 times would otherwise hang the launcher
or exhaust memory, and 5,000 nested groups would end in a ``RecursionError``. Every bound is far
above what a real launch file needs; the shipped ones are a few kB, nest 4 deep and start 1 or 2 processes.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LaunchLimits:
    """Bounds on what one ``resolve_launch`` reads, expands and starts."""

    max_file_bytes: int = 1 << 20
    """Size of one launch file (1 MiB)."""
    max_read_bytes: int = 4 << 20
    """Bytes of launch files read in all, a file included N times counted N times (4 MiB)."""
    max_depth: int = 100
    """Nesting: of XML tags or YAML collections in a file, of ``$(...)`` inside a value, and of
    groups and includes across files. Keeps every recursive step far from Python's recursion limit."""
    max_includes: int = 256
    """``<include>`` actions run in one launch, counted each time one runs."""
    max_include_depth: int = 32
    """Files including files: the length of the include chain."""
    max_value_chars: int = 128 * 1024
    """Length of one value a substitution, ``<let>`` or attribute expands to: Linux's limit on one
    argument of a process (MAX_ARG_STRLEN, 128 KiB), which a node's ``-p name:=value`` must fit."""
    max_expanded_chars: int = 16 << 20
    """Characters produced by substitutions in all (16 Mi): bounds the memory and time of expansion."""
    max_processes: int = 256
    """Processes one launch starts."""


DEFAULT_LIMITS = LaunchLimits()
