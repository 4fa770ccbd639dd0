"""The robot registry: every robot robolearn can simulate and deploy to, built-in or from a plugin.

A robot is a :class:`RobotSpec`: what it is (embodiment, description file), the safety limits
the deployment enforces (a YAML file :class:`~robolearn.hardware.safety_config.SafetyCfg` loads)
and how it is simulated (the :class:`~robolearn.sim.scene.RobotCfg` tasks build their scenes on).
A package adds its own in the ``robolearn.robots`` entry-point group, name = a callable returning
a ``RobotSpec`` (see :mod:`robolearn.tasks.plugins` and ``docs/own-robot.md``). Listing the names
imports no plugin.

A task names its robot by ``TaskCfg.scene.robot.name``; a deployment (``policy_node``) without an
explicit safety configuration uses the registered robot of that name.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pybullet_data

from robolearn.errors import RobolearnError
from robolearn.hardware.safety_config import CONFIG_DIR, SafetyCfg, SafetyConfigError
from robolearn.sim.scene import RobotCfg
from robolearn.tasks.core import Embodiment, TaskCfg
from robolearn.tasks.plugins import BUILTIN, ROBOT_GROUP, Plugin, PluginError, discover


class UnknownRobotError(RobolearnError):
    """A robot name nothing registers."""


@dataclass(frozen=True)
class RobotSpec:
    """One robot: what a plugin's ``robolearn.robots`` entry point returns."""

    name: str
    """Registry name (the entry point's name), also ``RobotCfg.name`` of the simulated robot."""
    embodiment: Embodiment
    """Which kind of robot: arm, drone, car or legged."""
    description: str
    """One sentence for listings."""
    safety_config: Path
    """The YAML limits the safety layer enforces on this robot (review it before the robot moves)."""
    make_robot: Callable[[], RobotCfg]
    """The robot as simulated: description file, initial pose, controllers (tasks build on it)."""
    model: Path | None = None
    """The robot description file (URDF or MJCF) for an arm read with
    :func:`robolearn.sim.robot_description.read_arm`; None for a robot described by a parameter file."""


_BUILTIN: dict[str, Callable[[], RobotSpec]] = {}


def _builtin(fn: Callable[[], RobotSpec]) -> Callable[[], RobotSpec]:
    _BUILTIN[fn.__name__.removesuffix("_spec")] = fn
    return fn


@_builtin
def panda_spec() -> RobotSpec:
    from robolearn.tasks.robots.panda import panda_robot

    return RobotSpec(
        name="panda",
        embodiment="arm",
        description="Franka Emika Panda, 7 joints and the Franka Hand (pybullet_data's URDF).",
        safety_config=CONFIG_DIR / "panda.yaml",
        make_robot=panda_robot,
        model=Path(pybullet_data.getDataPath()) / "franka_panda" / "panda.urdf",
    )


@_builtin
def crazyflie_spec() -> RobotSpec:
    from robolearn.tasks.robots.crazyflie import crazyflie_robot

    return RobotSpec(
        name="crazyflie",
        embodiment="drone",
        description="Bitcraze Crazyflie 2.1 quadrotor (parameter file tasks/robots/crazyflie.py).",
        safety_config=CONFIG_DIR / "crazyflie.yaml",
        make_robot=crazyflie_robot,
    )


@_builtin
def racecar_spec() -> RobotSpec:
    from robolearn.tasks.robots.racecar import racecar_robot

    return RobotSpec(
        name="racecar",
        embodiment="car",
        description="MIT RACECAR 1/10 car (pybullet_data's URDF, parameters in tasks/robots/racecar.py).",
        safety_config=CONFIG_DIR / "racecar.yaml",
        make_robot=racecar_robot,
        model=Path(pybullet_data.getDataPath()) / "racecar" / "racecar.urdf",
    )


@functools.cache
def _plugins() -> tuple[dict[str, Plugin], tuple[str, ...]]:
    plugins, errors = discover(ROBOT_GROUP, _BUILTIN)
    return plugins, tuple(errors)


def reload_plugins() -> None:
    """Read the installed entry points again (after installing a plugin into a running process)."""
    _plugins.cache_clear()


def robot_names() -> list[str]:
    """Every robot name: built-in, then plugins (sorted)."""
    return [*_BUILTIN, *_plugins()[0]]


def robot_source(name: str) -> str:
    """The distribution a robot comes from (``robolearn`` for a built-in one)."""
    if name in _BUILTIN:
        return BUILTIN
    plugins = _plugins()[0]
    if name not in plugins:
        raise UnknownRobotError(f"unknown robot {name!r}; robots: {', '.join(robot_names())}")
    return plugins[name].distribution


def plugin_errors() -> list[str]:
    """One line per robot plugin refused for its name (a collision)."""
    return list(_plugins()[1])


def get_robot(name: str) -> RobotSpec:
    """A robot's specification; a broken plugin raises :class:`PluginError` naming it."""
    if name in _BUILTIN:
        return _BUILTIN[name]()
    plugins = _plugins()[0]
    if name not in plugins:
        raise UnknownRobotError(f"unknown robot {name!r}; robots: {', '.join(robot_names())}")
    plugin = plugins[name]
    spec: RobotSpec = plugin.call(RobotSpec)
    if spec.name != name:
        raise PluginError(
            f"{plugin.label()} returned robot {spec.name!r}, not {name!r}"
        )
    if not Path(spec.safety_config).is_file():
        raise PluginError(
            f"{plugin.label()}: safety_config {spec.safety_config} is not a file"
        )
    return spec


DEFAULT_ROBOTS = {"arm": "panda", "drone": "crazyflie", "car": "racecar"}
"""Safety configuration used for each embodiment when ``robot`` is not given and the task's robot
(``scene.robot.name``) is not a registered one."""


def task_robot(cfg: TaskCfg) -> str | None:
    """The registered robot a task's scene simulates (by ``scene.robot.name``), or None."""
    name = cfg.scene.robot.name
    return name if name in robot_names() else None


def safety_robot(cfg: TaskCfg, robot: str = "") -> str:
    """The robot whose safety configuration a task runs under: ``robot`` (a name or file) when given,
    else the task's own robot (a plugin's included) when registered, else its embodiment's built-in one."""
    return robot or task_robot(cfg) or DEFAULT_ROBOTS[cfg.embodiment]


def rate_limited_task(cfg: TaskCfg, robot: str = "") -> TaskCfg:
    """``cfg`` with its actions rate-limited as the safety layer of ``robot`` (:func:`safety_robot`)
    will limit them on the robot: each component's ``max_rate`` (``robolearn train --rate-limits``)."""
    safety = load_safety_config(safety_robot(cfg, robot))
    missing = [n for n in cfg.action.names if n not in safety.action]
    if missing:
        raise SafetyConfigError(
            f"{safety.source}: no action limits for {', '.join(missing)} of task {cfg.name} "
            f"(it has {', '.join(safety.action)})"
        )
    rates = tuple(float(safety.action[n].max_rate) for n in cfg.action.names)
    return dataclasses.replace(cfg, action=dataclasses.replace(cfg.action, max_rate=rates))


def load_safety_config(name_or_path: str | Path) -> SafetyCfg:
    """A safety configuration by registered robot name (built-in or plugin) or by YAML path."""
    text = str(name_or_path)
    if text in robot_names():
        return SafetyCfg.load(get_robot(text).safety_config)
    if not text.endswith((".yaml", ".yml")) and "/" not in text:
        raise SafetyConfigError(
            f"unknown safety config {text!r}; use a robot name ({', '.join(robot_names())}) "
            "or a path to a .yaml file"
        )
    return SafetyCfg.load(text)

