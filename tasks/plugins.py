"""Plugins from installed packages, found by entry points the way pytest and Gymnasium find theirs.

A user's package declares, in its ``pyproject.toml``::

    [project.entry-points."robolearn.tasks"]
    iiwa_reach = "iiwa_robolearn.reach:make_cfg"      # a callable returning a TaskCfg

    [project.entry-points."robolearn.robots"]
    iiwa = "iiwa_robolearn.robot:robot_spec"          # a callable returning a RobotSpec

Listing plugins reads the installed distributions' metadata only: no plugin module is imported
until its entry is loaded. A plugin whose name collides with a built-in one or with another
plugin's, or whose module fails to import, is refused with a one-line :class:`PluginError` naming
its distribution and entry point; every other plugin and built-in keeps working.
"""

from __future__ import annotations

import importlib.metadata
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from robolearn.errors import RobolearnError

log = logging.getLogger(__name__)

TASK_GROUP = "robolearn.tasks"
"""Entry-point group of task plugins: name = a callable returning a :class:`~robolearn.tasks.core.TaskCfg`."""
ROBOT_GROUP = "robolearn.robots"
"""Entry-point group of robot plugins: name = a callable returning a
:class:`~robolearn.hardware.registry.RobotSpec`."""
BUILTIN = "robolearn"
"""What listings show as the distribution of a built-in task or robot."""


class PluginError(RobolearnError):
    """A plugin that cannot be used (it fails to load, collides, returns the wrong thing)."""


@dataclass(frozen=True)
class Plugin:
    """One entry point of a plugin group, not loaded yet."""

    name: str
    """The entry point's name: the task or robot name."""
    value: str
    """``module:attribute`` it points at."""
    distribution: str
    """The installed distribution (package) that declares it."""
    group: str
    """The entry-point group."""

    def describe(self) -> str:
        """``distribution X, entry point name = value``: how error messages name a plugin."""
        return f"distribution {self.distribution}, entry point {self.name} = {self.value}"

    def label(self) -> str:
        """``robolearn.tasks plugin (distribution X, entry point ...)``: the start of its error messages."""
        return f"{self.group} plugin ({self.describe()})"

    def load(self) -> Callable[[], Any]:
        """Import the plugin's module and return its callable; refuse a failure in one line."""
        entry = importlib.metadata.EntryPoint(self.name, self.value, self.group)
        try:
            obj = entry.load()
        except Exception as exc:  # any failure inside a user's module: report it, break nothing else
            raise PluginError(f"{self.label()} failed to load: {_one_line(exc)}") from exc
        if not callable(obj):
            raise PluginError(f"{self.label()} is a {type(obj).__name__}, not a callable")
        return obj

    def call(self, kind: type) -> Any:
        """Load the plugin, call it and check it returns a ``kind``."""
        factory = self.load()
        try:
            obj = factory()
        except RobolearnError as exc:
            raise PluginError(f"{self.label()}: {exc}") from exc
        except Exception as exc:  # a bug in the user's factory: one line naming it, not our traceback
            raise PluginError(f"{self.label()} failed: {_one_line(exc)}") from exc
        if not isinstance(obj, kind):
            raise PluginError(
                f"{self.label()} returned a {type(obj).__name__}, not a {kind.__name__}"
            )
        return obj


def _one_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"


def discover(group: str, builtin: Iterable[str]) -> tuple[dict[str, Plugin], list[str]]:
    """The group's plugins by name, and one line per plugin refused for its name.

    Reads metadata only (``importlib.metadata.entry_points``). A built-in name wins over a plugin's;
    of two plugins with one name, neither is used (which one the user meant is not ours to guess).
    """
    taken = set(builtin)
    found: dict[str, list[Plugin]] = {}
    for entry in importlib.metadata.entry_points(group=group):
        dist = entry.dist.name if entry.dist is not None else "<unknown distribution>"
        found.setdefault(entry.name, []).append(Plugin(entry.name, entry.value, dist, group))
    plugins: dict[str, Plugin] = {}
    errors: list[str] = []
    for name, entries in sorted(found.items()):
        # The same distribution seen twice on the path (an editable install and a copy) is one plugin.
        unique = list({(p.distribution, p.value): p for p in entries}.values())
        if name in taken:
            errors += [f"{p.label()}: name {name!r} is already a built-in" for p in unique]
        elif len(unique) > 1:
            others = "; ".join(p.describe() for p in unique)
            errors.append(f"{group} plugins collide on name {name!r} ({others}); neither is used")
        else:
            plugins[name] = unique[0]
    return plugins, errors
