"""What a launch file resolves to: the processes to start, and the error for a file that cannot run."""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from robolearn.errors import RobolearnError


class LaunchError(RobolearnError):
    """A launch file or launch argument that cannot be run; the message says what and why."""


def brief(text: str, width: int = 60) -> str:
    """A value as a one-line error message shows it: no line breaks, at most ``width`` characters
    (a value may be 128 KiB of crafted text)."""
    text = text.replace("\r", "\\r").replace("\n", "\\n")
    return text if len(text) <= width else text[: width - 3] + "..."


@dataclass(frozen=True)
class LaunchProcess:
    """One process a launch file starts, fully resolved."""

    label: str
    """Name its output lines are prefixed with: the node name, else the executable's."""
    cmd: tuple[str, ...]
    """Command line."""
    env: Mapping[str, str] = field(default_factory=dict)
    """Complete environment of the process."""
    cwd: str | None = None
    """Working directory (None: the launcher's)."""
    shutdown_on_exit: bool = False
    """``on_exit="shutdown"``: when this process exits, stop the others and exit with its code."""
    node: str | None = None
    """Fully qualified ROS node name (``/ns/name``) when the process is a ``<node>`` with a name."""

    def env_changes(self, base: Mapping[str, str]) -> dict[str, str | None]:
        """Variables that differ from ``base`` (None: unset)."""
        changed: dict[str, str | None] = {k: v for k, v in self.env.items() if base.get(k) != v}
        changed.update({k: None for k in base if k not in self.env})
        return changed

    def describe(self, base: Mapping[str, str]) -> str:
        """One line: label, environment changes and the command, as a shell would take it."""
        changes = self.env_changes(base)
        # env(1) takes its -u options before the assignments.
        env = [f"-u {k}" for k, v in changes.items() if v is None]
        env += [f"{k}={shlex.quote(v)}" for k, v in changes.items() if v is not None]
        words = (["env", *env] if env else []) + [shlex.join(self.cmd)]
        if self.cwd:
            words.insert(0, f"cd {shlex.quote(self.cwd)} &&")
        tail = "  (on_exit: shutdown)" if self.shutdown_on_exit else ""
        return f"[{self.label}] {' '.join(words)}{tail}"


@dataclass(frozen=True)
class LaunchPlan:
    """What a launch file resolves to: its arguments' values and the processes to start."""

    file: Path
    """The launch file."""
    arguments: Mapping[str, str]
    """Every declared launch argument with its value, in declaration order."""
    descriptions: Mapping[str, str]
    """Every declared launch argument's description."""
    processes: tuple[LaunchProcess, ...]
    """Processes in the order the file starts them."""


def format_plan(plan: LaunchPlan) -> str:
    """The ``--print`` text: the arguments with their values and meaning, then one line per process."""
    lines = [f"# {plan.file}"]
    lines += [
        f"#   {name}:={value}" + (f"  ({plan.descriptions[name]})" if plan.descriptions.get(name) else "")
        for name, value in plan.arguments.items()
    ]
    lines += [p.describe(os.environ) for p in plan.processes]
    return "\n".join(lines)
