"""The task registry: task name to the module whose ``make_cfg()`` builds its definition.

Built-in tasks are listed here explicitly (no registration by import side effect); a user's own
task is added with :func:`register_task`. Each call builds a fresh config, so no two environments
share mutable parts.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable

from robolearn.tasks.core import TaskCfg, TaskError

_BUILTIN = {
    "panda_reach": "robolearn.tasks.panda_reach",
    "panda_pick_cube": "robolearn.tasks.panda_pick_cube",
    "quadrotor_hover": "robolearn.tasks.quadrotor_hover",
    "quadrotor_waypoints": "robolearn.tasks.quadrotor_waypoints",
    "car_checkpoints": "robolearn.tasks.car_checkpoints",
    "ant": "robolearn.tasks.ant",
}
_USER: dict[str, Callable[[], TaskCfg]] = {}

DEFAULT_TASK = "panda_pick_cube"


def register_task(name: str, factory: Callable[[], TaskCfg]) -> None:
    """Add a task defined outside robolearn."""
    if name in _BUILTIN or name in _USER:
        raise TaskError(f"task {name!r} is already registered")
    _USER[name] = factory


def task_names() -> list[str]:
    """Every registered task name."""
    return [*_BUILTIN, *_USER]


def make_task_cfg(name: str) -> TaskCfg:
    """Build a task's definition, validated."""
    if name in _USER:
        cfg = _USER[name]()
    elif name in _BUILTIN:
        cfg = importlib.import_module(_BUILTIN[name]).make_cfg()
    else:
        raise TaskError(f"unknown task {name!r}; tasks: {', '.join(task_names())}")
    cfg.validate()
    return cfg


def gym_id(name: str) -> str:
    """Gymnasium id of a task: ``panda_pick_cube`` is ``robolearn/PandaPickCube-v0``."""
    return "robolearn/" + "".join(part.capitalize() for part in name.split("_")) + "-v0"
