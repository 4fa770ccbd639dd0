"""A robot's safety limits: the YAML file a user edits (``hardware/config/<robot>.yaml``) and its checks.

:meth:`SafetyCfg.load` reads a bundled configuration by robot name or a file, refusing with one
line that names the file and key: an unknown, missing or mistyped key, a value out of range, a
file that is not UTF-8, a key given twice, nesting past :data:`MAX_CONFIG_DEPTH`, a file past
:data:`MAX_CONFIG_BYTES`. :class:`~robolearn.hardware.safety.SafetyLayer` enforces the limits.
"""

from __future__ import annotations

import math
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, fields, is_dataclass, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
import yaml

from robolearn.errors import RobolearnError
from robolearn.sim.backend import FloatArray
from robolearn.sim.robot_description import ArmDescription, reachable_box

CONFIG_DIR = Path(__file__).parent / "config"
"""Where the bundled robot configurations live."""
ROBOT_CONFIGS = ("panda", "crazyflie", "racecar")
"""Names :meth:`SafetyCfg.load` accepts besides a path."""
MAX_CONFIG_BYTES = 1 << 20
"""Largest limits file read (bytes); the bundled ones are about 2 kB."""
MAX_CONFIG_DEPTH = 16
"""Deepest nesting of mappings and lists in a limits file (the schema needs 3)."""


class SafetyConfigError(RobolearnError):
    """A malformed, missing or mismatched safety configuration; the message names the file and key."""


# -- configuration -------------------------------------------------------------------------------
@dataclass(frozen=True)
class ComponentLimits:
    """Limits of one action component, in the task's units."""

    low: float
    """Smallest value sent."""
    high: float
    """Largest value sent."""
    max_rate: float
    """Largest change per second between consecutive commands (units per second)."""


@dataclass(frozen=True)
class JointLimits:
    """The range an arm joint's measured position stays in (rad or m)."""

    low: float
    """Lower end."""
    high: float
    """Upper end."""


@dataclass(frozen=True)
class ArmLimits:
    """Limits of an arm driven by tool displacements (the Panda tasks' action)."""

    workspace_low: tuple[float, float, float]
    """Lower corner of the box the impedance target stays in (m, base frame)."""
    workspace_high: tuple[float, float, float]
    """Upper corner of that box (m)."""
    max_ee_speed: float
    """Largest commanded tool speed: displacement per control period over the period (m/s)."""
    target_lead: float
    """How far the impedance controller lets its target lead the measured tool (m): the task's
    ``max_lead``, the ``translational_clip`` of SERL's Franka impedance controller."""


@dataclass(frozen=True)
class DroneLimits:
    """Limits and safe-stop parameters of a quadrotor driven by thrust and body rates."""

    geofence_low: tuple[float, float, float]
    """Lower corner of the flight box (m, world frame, floor at z = 0); leaving it lands the drone."""
    geofence_high: tuple[float, float, float]
    """Upper corner of the flight box (m)."""
    mass: float
    """Take-off mass with battery and markers (kg); the hover thrust is mass times g."""
    max_speed: float
    """Faster than this (m/s), the command becomes the hover controller's until the drone slows."""
    hover_time: float
    """How long a safe stop hovers before it descends (s)."""
    land_speed: float
    """Descent speed of a safe stop while the state is fresh (m/s)."""
    touchdown_height: float
    """Height below which a descending drone is down and its motors stop (m)."""
    land_thrust: float
    """Thrust, as a fraction of the hover thrust, of a safe stop descending without a fresh state."""
    land_timeout: float
    """Time after the hover by which the motors stop whatever the state says (s)."""


@dataclass(frozen=True)
class CarLimits:
    """Limits of a car driven by speed and steering angle."""

    geofence_low: tuple[float, float]
    """Lower corner of the box the rear axle centre stays in (m, map frame); leaving it brakes."""
    geofence_high: tuple[float, float]
    """Upper corner of that box (m)."""
    brake_decel: float
    """Deceleration assumed when limiting the speed toward the geofence (m/s^2)."""
    fence_margin: float
    """Distance short of the geofence where the car must be able to stop (m)."""


@dataclass(frozen=True)
class SafetyCfg:
    """A robot's safety limits, read from YAML."""

    embodiment: Literal["arm", "drone", "car"]
    """Which kind of robot the limits are for; the file has the section of that name."""
    watchdog_timeout: float
    """Age of the newest observation past which the robot is safely stopped (s)."""
    action: Mapping[str, ComponentLimits]
    """Limits of every task action component, by the task's component name."""
    arm: ArmLimits | None = None
    """Arm limits (``embodiment: arm``)."""
    drone: DroneLimits | None = None
    """Drone limits (``embodiment: drone``)."""
    car: CarLimits | None = None
    """Car limits (``embodiment: car``)."""
    joints: Mapping[str, JointLimits] | None = None
    """Arm only, optional: each arm joint's range (rad or m), by the robot file's joint names;
    a joint past it is a protective stop."""
    source: str = "<memory>"
    """The file the configuration came from (not a YAML key)."""

    @classmethod
    def load(cls, name_or_path: str | Path) -> SafetyCfg:
        """Read a bundled configuration by robot name (``panda``, ``crazyflie``, ``racecar``) or a file."""
        text = str(name_or_path)
        if text in ROBOT_CONFIGS:
            path = CONFIG_DIR / f"{text}.yaml"
        elif text.endswith((".yaml", ".yml")) or "/" in text:
            path = Path(text)
        else:
            names = ", ".join(ROBOT_CONFIGS)
            raise SafetyConfigError(
                f"unknown safety config {text!r}; use one of {names} or a path to a .yaml file"
            )
        if not path.is_file():
            raise SafetyConfigError(f"safety config file {path} not found")
        data = _read_yaml(path)
        cfg = replace(_build(cls, data, "", str(path)), source=str(path))
        cfg.validate()
        return cfg

    def validate(self) -> None:
        """Check values against each other; raise :class:`SafetyConfigError` naming the key."""

        def fail(key: str, problem: str) -> SafetyConfigError:
            return SafetyConfigError(f"{self.source}: {key}: {problem}")

        if self.watchdog_timeout <= 0:
            raise fail("watchdog_timeout", f"must be positive, got {self.watchdog_timeout}")
        for name, lim in self.action.items():
            if not lim.low < lim.high:
                raise fail(f"action.{name}", f"low ({lim.low}) must be below high ({lim.high})")
            if lim.max_rate <= 0:
                raise fail(f"action.{name}.max_rate", f"must be positive, got {lim.max_rate}")
        sections = {"arm": self.arm, "drone": self.drone, "car": self.car}
        for section, value in sections.items():
            if (value is None) == (section == self.embodiment):
                wanted = "is required" if value is None else f"is for embodiment {section}"
                raise fail(section, f"{wanted}; this file's embodiment is {self.embodiment}")
            if value is None:
                continue
            for f in fields(value):
                item = getattr(value, f.name)
                if not isinstance(item, tuple) and item <= 0:
                    raise fail(f"{section}.{f.name}", f"must be positive, got {item}")
            low, high = box_corners(value)
            if not np.all(low < high):
                raise fail(f"{section}", "every lower corner coordinate must be below the upper one")
        if self.joints is not None:
            if self.embodiment != "arm":
                raise fail("joints", f"is for embodiment arm; this file's embodiment is {self.embodiment}")
            for name, rng in self.joints.items():
                if not rng.low < rng.high:
                    raise fail(f"joints.{name}", f"low ({rng.low}) must be below high ({rng.high})")
        if self.drone is not None and self.drone.land_thrust > 1:
            raise fail(
                "drone.land_thrust",
                f"is a fraction of the hover thrust in (0, 1], got {self.drone.land_thrust}",
            )


class _LimitsFileFault(Exception):
    """A limits file refused while it is parsed, at a key path (turned into :class:`SafetyConfigError`)."""

    def __init__(self, key: str, problem: str) -> None:
        super().__init__(f"{key or 'top level'}: {problem}")


class _LimitsLoader(yaml.SafeLoader):
    """YAML's safe loader that refuses a key given twice in one mapping (plain PyYAML keeps the last
    silently) and nesting deeper than :data:`MAX_CONFIG_DEPTH` (which would exhaust the stack)."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._path: list[str | int | None] = []

    def _key(self, last: str | None = None) -> str:
        key = ""
        for part in [*self._path, last]:
            if isinstance(part, int):
                key += f"[{part}]"
            elif part:
                key += f".{part}" if key else part
        return key

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        if len(self._path) > MAX_CONFIG_DEPTH:
            raise _LimitsFileFault(self._key(), f"nested deeper than {MAX_CONFIG_DEPTH} levels")
        # The key a value sits under (a scalar key node), its index in a list, or None (a key itself).
        self._path.append(index.value if isinstance(index, yaml.ScalarNode) else index)
        try:
            node = super().compose_node(parent, index)
            if isinstance(node, yaml.ScalarNode) and node.tag.endswith(":int") and len(node.value) > 40:
                # Python refuses to read integers past 4,300 digits with a ValueError naming no key.
                raise _LimitsFileFault(self._key(), f"an integer of {len(node.value)} digits is no limit")
            if isinstance(node, yaml.MappingNode):
                seen: set[str] = set()
                for key_node, _ in node.value:
                    if isinstance(key_node, yaml.ScalarNode):
                        if key_node.value in seen:
                            raise _LimitsFileFault(
                                self._key(key_node.value),
                                f"duplicate key at line {key_node.start_mark.line + 1}; each key may "
                                "appear once in a mapping",
                            )
                        seen.add(key_node.value)
            return node
        finally:
            self._path.pop()


def _read_yaml(path: Path) -> Any:
    """A limits file parsed: at most :data:`MAX_CONFIG_BYTES`, UTF-8, no duplicate keys, bounded depth."""
    try:
        size = path.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise SafetyConfigError(f"{path}: {size} bytes; a limits file has at most {MAX_CONFIG_BYTES}")
        raw = path.read_bytes()
    except OSError as exc:
        raise SafetyConfigError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        key = re.match(r"\s*([^\s:#]+)\s*:", raw.splitlines()[line - 1].decode("utf-8", "replace"))
        raise SafetyConfigError(
            f"{path}: line {line}{f' (key {key.group(1)})' if key else ''}: byte 0x{raw[exc.start]:02x} "
            "is not UTF-8; a limits file is UTF-8 text"
        ) from None
    loader: _LimitsLoader | None = None
    try:
        loader = _LimitsLoader(text)  # its reader already refuses control characters
        return loader.get_single_data()
    except _LimitsFileFault as exc:
        raise SafetyConfigError(f"{path}: {exc}") from None
    except yaml.reader.ReaderError as exc:
        line = text.count("\n", 0, exc.position) + 1
        raise SafetyConfigError(
            f"{path}: line {line}: character #x{exc.character:04x} is not allowed in YAML"
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
        raise SafetyConfigError(f"{path}: not valid YAML{where}: {problem}") from None
    except ValueError as exc:  # what YAML's constructors let through: an integer of 5,000 digits
        raise SafetyConfigError(f"{path}: not a valid value: {' '.join(str(exc).split())}") from None
    finally:
        if loader is not None:
            loader.dispose()


def box_corners(limits: ArmLimits | DroneLimits | CarLimits) -> tuple[FloatArray, FloatArray]:
    """The workspace or geofence corners of a section."""
    if isinstance(limits, ArmLimits):
        return np.asarray(limits.workspace_low), np.asarray(limits.workspace_high)
    return np.asarray(limits.geofence_low), np.asarray(limits.geofence_high)


def _build(cls: type, data: Any, where: str, source: str) -> Any:
    """A config dataclass from parsed YAML, every key and type checked."""

    def fail(key: str, problem: str) -> SafetyConfigError:
        return SafetyConfigError(f"{source}: {key or 'top level'}: {problem}")

    if not isinstance(data, dict):
        raise fail(where, f"must be a mapping, got {type(data).__name__}")
    hints = typing.get_type_hints(cls)
    keys = [f for f in fields(cls) if f.name != "source"]
    allowed = ", ".join(f.name for f in keys)
    for key in data:
        if key not in hints or key == "source":
            raise fail(f"{where}{key}", f"unknown key; allowed: {allowed}")
    values = {}
    for f in keys:
        if f.name in data:
            values[f.name] = _convert(hints[f.name], data[f.name], f"{where}{f.name}", source, fail)
        elif f.default is MISSING:
            raise fail(
                f"{where}{f.name}",
                f"missing key; required: {', '.join(k.name for k in keys if k.default is MISSING)}",
            )
    return cls(**values)


def _convert(
    hint: Any, value: Any, key: str, source: str, fail: Callable[[str, str], SafetyConfigError]
) -> Any:
    """A YAML value as the type ``hint`` says: float, float tuple, literal, mapping or dataclass."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (types.UnionType, typing.Union):  # X | None
        return _convert(next(a for a in args if a is not type(None)), value, key, source, fail)
    if origin is Literal:
        if value not in args:
            raise fail(key, f"must be one of {', '.join(map(str, args))}, got {value!r}")
        return value
    if origin is tuple:
        if not isinstance(value, list) or len(value) != len(args):
            raise fail(key, f"must be a list of {len(args)} numbers, got {value!r}")
        return tuple(_convert(float, v, key, source, fail) for v in value)
    if origin is Mapping:
        if not isinstance(value, dict):
            raise fail(key, f"must be a mapping, got {value!r}")
        return {str(k): _build(args[1], v, f"{key}.{k}.", source) for k, v in value.items()}
    if isinstance(hint, type) and is_dataclass(hint):
        return _build(hint, value, f"{key}.", source)
    if hint is float:
        try:
            number = math.nan if isinstance(value, bool) else float(value)
        except (TypeError, ValueError, OverflowError):  # a string, a list, an integer past float's range
            number = math.nan
        if not isinstance(value, int | float) or not math.isfinite(number):
            shown = repr(value) if len(repr(value)) <= 40 else f"{repr(value)[:40]}..."
            raise fail(key, f"must be a finite number, got {shown}")
        return number
    raise TypeError(f"no YAML conversion for {hint}")  # a config field of a type this loader lacks


# -- a first configuration from the robot description ----------------------------------------------
def arm_safety_yaml(
    desc: ArmDescription,
    control_dt: float = 0.02,
    max_ee_speed: float = 0.5,
    workspace: tuple[tuple[float, float, float], tuple[float, float, float]] | None = None,
    joint_margin: float = 0.05,
) -> str:
    """A safety configuration for an arm driven by the generic tool-displacement action, derived from
    its description file, as commented YAML for the user to review before the robot moves.

    Joint ranges are the file's limits brought in by ``joint_margin`` of each range at both ends;
    the workspace is ``workspace`` if given, else the box the tool reaches above the floor
    (:func:`~robolearn.sim.robot_description.reachable_box`), which a real cell narrows. The action
    limits allow ``max_ee_speed`` per axis; the gripper, if any, its full opening.
    """
    if workspace is None:
        workspace = reachable_box(desc)
    low, high = workspace
    step = max_ee_speed * control_dt
    lines = [
        f"# Safety limits of the arm in {desc.path.name}, derived by robolearn from the file: REVIEW",
        "# every number against the robot's manual and the cell it works in before it moves.",
        "embodiment: arm",
        "",
        f"# Seconds without a new observation before the arm holds: five control periods of {control_dt} s.",
        f"watchdog_timeout: {5 * control_dt:.4g}",
        "",
        f"# Tool displacement per control step (m): {max_ee_speed} m/s per axis at most.",
        "action:",
    ]
    lines += [f"  ee_d{axis}: {{low: {-step:.4g}, high: {step:.4g}, max_rate: 0.2}}" for axis in "xyz"]
    if desc.gripper:
        opening = sum(j.high for j in desc.gripper)
        lines.append(f"  gripper_opening: {{low: 0.0, high: {opening:.4g}, max_rate: {5 * opening:.4g}}}")
    lines += [
        "",
        "arm:",
        "  # The box the impedance target stays in (m, base frame). Derived: where the tool reaches above",
        "  # the floor; narrow it to the cell (tables, walls, people).",
        f"  workspace_low: [{', '.join(f'{v:.3g}' for v in low)}]",
        f"  workspace_high: [{', '.join(f'{v:.3g}' for v in high)}]",
        f"  max_ee_speed: {max_ee_speed}",
        "  # How far the impedance target may lead the measured tool (m): the action term's max_lead.",
        "  target_lead: 0.06",
        "",
        f"# Joint ranges (rad or m): the file's limits, {joint_margin:.0%} of each range inside both ends.",
        "joints:",
    ]
    for joint in desc.joints:
        pad = joint_margin * (joint.high - joint.low)
        note = "" if joint.limited else "  # continuous in the file: limited here to one turn"
        lines.append(f"  {joint.name}: {{low: {joint.low + pad:.4g}, high: {joint.high - pad:.4g}}}{note}")
    return "\n".join(lines) + "\n"
