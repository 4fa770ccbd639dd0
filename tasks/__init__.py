"""The task registry, the one place every task name is resolved: built-in, plugin or registered here.

Built-in tasks are listed here explicitly (no registration by import side effect). Tasks of
installed packages come from the ``robolearn.tasks`` entry-point group (:mod:`.plugins`): listing
their names imports none of them, and the CLI, Gymnasium ids, launch files, ``policy_node`` and
the dataset tools see them exactly like built-in ones, since all of them come through
:func:`task_names` and :func:`make_task_cfg`. A task for one Python process only is added with
:func:`register_task`. Each call builds a fresh config, so no two environments share mutable parts.
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable

from robolearn.tasks.core import TaskCfg, TaskError
from robolearn.tasks.plugins import BUILTIN, TASK_GROUP, Plugin, PluginError, discover

_BUILTIN = {
    "panda_reach": "robolearn.tasks.panda_reach",
    "panda_pick_cube": "robolearn.tasks.panda_pick_cube",
    "panda_pick_cube_pixels": "robolearn.tasks.panda_pick_cube_pixels",
    "quadrotor_hover": "robolearn.tasks.quadrotor_hover",
    "quadrotor_waypoints": "robolearn.tasks.quadrotor_waypoints",
    "car_checkpoints": "robolearn.tasks.car_checkpoints",
    "car_checkpoints_pixels": "robolearn.tasks.car_checkpoints_pixels",
    "ant": "robolearn.tasks.ant",
}
_USER: dict[str, Callable[[], TaskCfg]] = {}
REGISTERED = "<register_task>"
"""What listings show as the distribution of a task added by :func:`register_task`."""

DEFAULT_TASK = "panda_pick_cube"


@functools.cache
def _plugins() -> tuple[dict[str, Plugin], tuple[str, ...]]:
    plugins, errors = discover(TASK_GROUP, _BUILTIN)
    return plugins, tuple(errors)


def reload_plugins() -> None:
    """Read the installed entry points again (after installing a plugin into a running process)."""
    _plugins.cache_clear()


def register_task(name: str, factory: Callable[[], TaskCfg]) -> None:
    """Add a task defined outside robolearn, for this process only (a package's plugin is for all)."""
    if name in task_names():
        raise TaskError(f"task {name!r} is already registered (from {task_source(name)})")
    _USER[name] = factory


def task_names() -> list[str]:
    """Every task name: built-in, then registered in this process, then plugins (sorted)."""
    return [*_BUILTIN, *_USER, *(n for n in _plugins()[0] if n not in _USER)]


def task_source(name: str) -> str:
    """The distribution a task comes from: ``robolearn``, a plugin's package, or :data:`REGISTERED`."""
    if name in _BUILTIN:
        return BUILTIN
    if name in _USER:
        return REGISTERED
    plugins = _plugins()[0]
    if name in plugins:
        return plugins[name].distribution
    raise TaskError(f"unknown task {name!r}; tasks: {', '.join(task_names())}")


def plugin_errors() -> list[str]:
    """One line per task plugin refused for its name (a collision); see :func:`.plugins.discover`."""
    return list(_plugins()[1])


def make_task_cfg(name: str) -> TaskCfg:
    """Build a task's definition, validated.

    A plugin that fails to import, raises, or returns something else than a ``TaskCfg`` named
    ``name`` raises :class:`~robolearn.tasks.plugins.PluginError` naming its distribution and entry point.
    """
    plugins = _plugins()[0]
    if name in _USER:
        cfg = _USER[name]()
    elif name in _BUILTIN:
        cfg = importlib.import_module(_BUILTIN[name]).make_cfg()
    elif name in plugins:
        plugin = plugins[name]
        cfg = plugin.call(TaskCfg)
        if cfg.name != name:
            raise PluginError(
                f"{plugin.label()} returned task {cfg.name!r}, not {name!r}"
            )
        try:
            cfg.validate()
        except TaskError as exc:
            raise PluginError(f"{plugin.label()}: {exc}") from exc
        return cfg
    else:
        raise TaskError(f"unknown task {name!r}; tasks: {', '.join(task_names())}")
    cfg.validate()
    return cfg


def gym_id(name: str) -> str:
    """Gymnasium id of a task: ``panda_pick_cube`` is ``robolearn/PandaPickCube-v0``."""
    return "robolearn/" + "".join(part.capitalize() for part in name.split("_")) + "-v0"
