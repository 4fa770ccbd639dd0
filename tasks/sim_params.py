"""Identified simulation parameters: the file ``robolearn sysid`` writes and tasks, simulated robots
and domain randomization read (issue 19).

The file is YAML a person can review: the robot it was fitted on, and for each parameter its
identified value, its standard deviation from the fit and the value the description file had::

    robot: tiny_arm
    payload_link: link3
    parameters:
      joint1.armature: {value: 0.012, std: 0.0004, nominal: 0.01}
      joint1.damping: {value: 0.31, std: 0.01, nominal: 0.3}
      joint1.frictionloss: {value: 0.41, std: 0.02, nominal: 0.2}
      joint1_servo.gain: {value: 0.8, std: 0.01, nominal: 1.0}
      mass_scale: {value: 1.3, std: 0.02, nominal: 1.0}
      payload_mass: {value: 0.1, std: 0.01, nominal: 0.0}
      command_delay: {value: 0.02, std: 0.001, nominal: 0.0}

``<joint>.armature``, ``<joint>.damping`` and ``<joint>.frictionloss`` are absolute (SI units),
``<actuator>.gain`` and ``mass_scale`` multipliers, ``payload_mass`` in kg, ``command_delay`` in s.
The robot's surroundings take multipliers too (issue 10's reality gap): ``object_mass_scale`` and
``object_friction_scale`` for the free objects (the cube to pick), ``robot_friction_scale`` for the
contacts of the robot's own shapes (a car's tyres). A drone's motor constant is ``thrust.gain``.
:func:`apply_sim_params` makes the identified values a task's nominal robot and centres its domain
randomization on them, each range as wide as the fit is uncertain.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from robolearn.errors import RobolearnError
from robolearn.sim.scene import IdentifiedDynamics
from robolearn.tasks.core import DomainRandCfg, TaskCfg

JOINT_KINDS = ("armature", "damping", "frictionloss")
"""Per-joint parameters, named ``<joint>.<kind>``."""
SCALE_PARAMS = ("mass_scale", "object_mass_scale", "object_friction_scale", "robot_friction_scale")
"""Positive multipliers on the nominal robot and its surroundings."""
GLOBAL_PARAMS = (*SCALE_PARAMS, "payload_mass", "command_delay")
"""Parameters of the whole robot and its surroundings."""
MAX_DELAY = 1.0
"""Longest command delay a file may give (s): longer is a recording fault, not a robot."""


class SimParamsError(RobolearnError):
    """A parameter file that cannot be used; the message names the file and the fault."""


@dataclass(frozen=True)
class IdentifiedParam:
    """One identified parameter."""

    value: float
    """The identified value."""
    std: float
    """Its standard deviation from the fit (same units); ``inf`` when the data did not determine it."""
    nominal: float
    """The value before identification (the description file's)."""


@dataclass(frozen=True)
class SimParams:
    """The contents of a parameter file."""

    robot: str
    """Name of the robot the parameters were fitted on (a task scene's ``robot.name``)."""
    params: dict[str, IdentifiedParam]
    """Parameter name (see the module doc) to its identified value."""
    payload_link: str = ""
    """The link ``payload_mass`` hangs on (empty: no payload parameter)."""
    source: dict[str, Any] = field(default_factory=dict)
    """Where the fit came from (data path, episodes, cost): for the reader, not used."""

    def value(self, name: str, default: float) -> float:
        return self.params[name].value if name in self.params else default

    def dynamics(self) -> IdentifiedDynamics:
        """The identified values as the simulator applies them."""
        per_joint: dict[str, dict[str, float]] = {kind: {} for kind in JOINT_KINDS}
        gains: dict[str, float] = {}
        for name, p in self.params.items():
            owner, _, kind = name.rpartition(".")
            if kind in JOINT_KINDS:
                per_joint[kind][owner] = p.value
            elif kind == "gain":
                gains[owner] = p.value
        return IdentifiedDynamics(
            joint_armature=per_joint["armature"],
            joint_damping=per_joint["damping"],
            joint_frictionloss=per_joint["frictionloss"],
            actuator_gain_scale=gains,
            mass_scale=self.value("mass_scale", 1.0),
            payload_link=self.payload_link,
            payload_mass=self.value("payload_mass", 0.0),
            command_delay=self.value("command_delay", 0.0),
            object_mass_scale=self.value("object_mass_scale", 1.0),
            object_friction_scale=self.value("object_friction_scale", 1.0),
            robot_friction_scale=self.value("robot_friction_scale", 1.0),
        )

    def relative_std(self, names: list[str]) -> float:
        """The largest standard deviation relative to the value among ``names`` (0 if none)."""
        rel = [self.params[n].std / abs(self.params[n].value) for n in names if self.params[n].value != 0]
        return max(rel, default=0.0)

    def randomization(self, base: DomainRandCfg, control_dt: float, sigmas: float = 2.0) -> DomainRandCfg:
        """Domain randomization centred on the identified values, each range ``sigmas`` standard
        deviations to either side; what the fit did not touch keeps ``base``'s range."""

        def around_one(names: list[str], fallback: tuple[float, float]) -> tuple[float, float]:
            if not names:
                return fallback
            w = min(sigmas * self.relative_std(names), 0.9)  # a scale stays positive
            return (1.0 - w, 1.0 + w)

        kinds = {kind: [n for n in self.params if n.endswith("." + kind)] for kind in (*JOINT_KINDS, "gain")}
        latency = base.action_latency_steps
        if "command_delay" in self.params:
            # The identified delay is the nominal latency; randomization moves it by whole periods.
            steps = math.ceil(sigmas * self.params["command_delay"].std / control_dt - 1e-9)
            latency = (-steps, steps)
        return replace(
            base,
            mass_scale=around_one(["mass_scale"] if "mass_scale" in self.params else [], base.mass_scale),
            damping_scale=around_one(kinds["damping"], base.damping_scale),
            actuator_gain_scale=around_one(kinds["gain"], base.actuator_gain_scale),
            action_latency_steps=latency,
        )


def _number(path: Path, where: str, raw: Any) -> float:
    if isinstance(raw, bool) or not isinstance(raw, int | float | str):
        raise SimParamsError(f"{path}: {where} must be a number, got {raw!r}")
    try:
        return float(raw)  # YAML 1.1 reads 1e-3 as a string; .inf is a float
    except ValueError:
        raise SimParamsError(f"{path}: {where} must be a number, got {raw!r}") from None


def _check_param(path: Path, name: str, raw: Any) -> IdentifiedParam:
    if not isinstance(raw, Mapping) or set(raw) != {"value", "std", "nominal"}:
        raise SimParamsError(f"{path}: parameter {name} must be a mapping of value, std and nominal")
    value, std, nominal = (_number(path, f"{name}.{k}", raw[k]) for k in ("value", "std", "nominal"))
    if not (math.isfinite(value) and math.isfinite(nominal)) or math.isnan(std) or std < 0:
        raise SimParamsError(f"{path}: parameter {name}: value and nominal must be finite and std >= 0")
    owner, _, kind = name.rpartition(".")
    if kind in (*JOINT_KINDS, "gain"):
        if not owner:
            raise SimParamsError(f"{path}: parameter {name} names no joint or actuator before the dot")
        if value < 0 or (kind == "gain" and value == 0):
            raise SimParamsError(
                f"{path}: parameter {name} must be {'positive' if kind == 'gain' else '>= 0'}"
            )
    elif name in SCALE_PARAMS and value <= 0:
        raise SimParamsError(f"{path}: {name} must be positive, got {value}")
    elif name == "payload_mass" and value < 0:
        raise SimParamsError(f"{path}: payload_mass must be >= 0 kg, got {value}")
    elif name == "command_delay" and not 0 <= value <= MAX_DELAY:
        raise SimParamsError(f"{path}: command_delay must be within 0..{MAX_DELAY} s, got {value}")
    elif name not in GLOBAL_PARAMS:
        raise SimParamsError(
            f"{path}: unknown parameter {name!r}; allowed: <joint>.{{{','.join(JOINT_KINDS)}}}, "
            f"<actuator>.gain, {', '.join(GLOBAL_PARAMS)}"
        )
    return IdentifiedParam(value, std, nominal)


def load_sim_params(path: Path | str) -> SimParams:
    """Read and check a parameter file; raises :class:`SimParamsError` naming the fault."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SimParamsError(f"{path}: no such parameter file") from None
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise SimParamsError(f"{path}: not a YAML parameter file ({str(exc).splitlines()[0]})") from None
    if not isinstance(raw, Mapping):
        raise SimParamsError(f"{path}: expected a mapping with robot and parameters")
    unknown = set(raw) - {"robot", "parameters", "payload_link", "source"}
    if unknown:
        raise SimParamsError(
            f"{path}: unknown keys {sorted(map(str, unknown))}; allowed: robot, parameters, "
            "payload_link, source"
        )
    robot, params = raw.get("robot"), raw.get("parameters")
    if not isinstance(robot, str) or not robot:
        raise SimParamsError(f"{path}: robot must be the name of the robot the parameters were fitted on")
    if not isinstance(params, Mapping) or not params:
        raise SimParamsError(f"{path}: parameters must be a non-empty mapping of name to value, std, nominal")
    checked = {}
    for name, entry in params.items():
        if not isinstance(name, str):
            raise SimParamsError(f"{path}: parameter names must be strings, got {name!r}")
        checked[name] = _check_param(path, name, entry)
    link = raw.get("payload_link", "")
    if not isinstance(link, str):
        raise SimParamsError(f"{path}: payload_link must be a link name")
    if ("payload_mass" in checked) != bool(link):
        raise SimParamsError(f"{path}: payload_mass and payload_link come together")
    source = raw.get("source") or {}
    if not isinstance(source, Mapping):
        raise SimParamsError(f"{path}: source must be a mapping")
    return SimParams(robot, checked, link, dict(source))


def save_sim_params(params: SimParams, path: Path | str) -> None:
    """Write a parameter file (see the module doc)."""
    doc: dict[str, Any] = {"robot": params.robot}
    if params.payload_link:
        doc["payload_link"] = params.payload_link
    doc["parameters"] = {
        name: {"value": float(p.value), "std": float(p.std), "nominal": float(p.nominal)}
        for name, p in params.params.items()
    }
    if params.source:
        doc["source"] = params.source
    Path(path).write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")


def apply_sim_params(cfg: TaskCfg, params: SimParams, sigmas: float = 2.0) -> TaskCfg:
    """The task with the identified robot as its nominal one and randomization centred on it."""
    robot = cfg.scene.robot
    if params.robot != robot.name:
        raise SimParamsError(
            f"parameters were fitted on robot {params.robot!r}; task {cfg.name} runs robot {robot.name!r}"
        )
    scene = replace(cfg.scene, robot=replace(robot, identified=params.dynamics()))
    return replace(
        cfg, scene=scene, randomization=params.randomization(cfg.randomization, cfg.control_dt, sigmas)
    )
