"""The safety layer every command to a robot passes through, and the per-robot limits it enforces.

:class:`SafetyLayer` works on the task's action vector (physical units) and the latest
:data:`~robolearn.hardware.robots.RobotState`. Each call of :meth:`SafetyLayer.filter`, in order:

1. **Stops.** A latched emergency stop (:meth:`SafetyLayer.estop`, released only by
   :meth:`SafetyLayer.reset`), a latched geofence breach (drone, car: the robot left its box), or
   the watchdog (the newest observation fed to :meth:`SafetyLayer.observed` is older than
   ``watchdog_timeout``, or none came yet) return the embodiment's safe stop whatever the input:
   the arm holds (zero displacement, gripper as last commanded), the drone hovers then lands, the
   car brakes (speed 0, steering held). Stops are not slowed by the rate limits.
2. **Non-finite input.** An action with a NaN or an infinity is replaced by the safe command
   (hold, hover, brake), which then passes through the limits below like any action.
3. **Bounds.** Each component is clipped to its limits from the YAML file.
4. **Velocity.** Arm: the tool's commanded speed (displacement per control period) is at most
   ``max_ee_speed``. Drone: faster than ``max_speed``, the command becomes the hover controller's.
   Car: the speed allows braking at ``brake_decel`` before the geofence, ``fence_margin`` short of it.
5. **Rate of change.** Each component changes by at most ``max_rate`` per second since the last
   command, counting at most one control period: a late command is not a licence to jump.
6. **Arm workspace.** The impedance target (tracked here as the task's controller moves it: the
   previous target plus the displacement, kept within ``target_lead`` of the tool) stays inside
   the workspace box. Near a face the target slows down so that it can stop at the face within
   the rate limits; should the two still conflict (irregular command timing), the box wins.

Every intervention is counted by kind in :attr:`SafetyLayer.counts` and logged (at most once a
second per kind). Limits come from ``hardware/config/<robot>.yaml`` (:meth:`SafetyCfg.load`).
"""

from __future__ import annotations

import logging
import math
import time
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, fields, is_dataclass, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
import yaml

from robolearn.hardware.robots import ArmState, CarState, DroneController, DroneState, RobotState
from robolearn.sim.backend import FloatArray
from robolearn.sim.transforms import quat_to_mat
from robolearn.tasks.core import TaskCfg
from robolearn.tasks.robots.crazyflie import GRAVITY

log = logging.getLogger(__name__)

CONFIG_DIR = Path(__file__).parent / "config"
"""Where the bundled robot configurations live."""
ROBOT_CONFIGS = ("panda", "crazyflie", "racecar")
"""Names :meth:`SafetyCfg.load` accepts besides a path."""
INTERVENTIONS = ("estop", "geofence", "watchdog", "nonfinite", "clip", "velocity", "rate", "workspace")
"""Kinds of intervention counted in :attr:`SafetyLayer.counts`."""
LOG_INTERVAL = 1.0
"""Seconds (wall clock) between log messages of one kind of intervention."""


class SafetyConfigError(ValueError):
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
        try:
            data = yaml.safe_load(path.read_text())
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = f" at line {mark.line + 1}" if mark is not None else ""
            raise SafetyConfigError(
                f"{path}: not valid YAML{where}: {getattr(exc, 'problem', exc)}"
            ) from None
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
            low, high = _box(value)
            if not np.all(low < high):
                raise fail(f"{section}", "every lower corner coordinate must be below the upper one")
        if self.drone is not None and self.drone.land_thrust > 1:
            raise fail(
                "drone.land_thrust",
                f"is a fraction of the hover thrust in (0, 1], got {self.drone.land_thrust}",
            )


def _box(limits: ArmLimits | DroneLimits | CarLimits) -> tuple[FloatArray, FloatArray]:
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
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise fail(key, f"must be a finite number, got {value!r}")
        return float(value)
    raise TypeError(f"no YAML conversion for {hint}")  # a config field of a type this loader lacks


# -- the layer -----------------------------------------------------------------------------------
class SafetyLayer:
    """Filters every action sent to one robot (see the module docstring for the rules, in order).

    ``filter(action, state, now)`` returns the action to send; ``now`` and the stamps given to
    :meth:`observed` are seconds on one clock.
    """

    def __init__(self, cfg: SafetyCfg, task_cfg: TaskCfg) -> None:
        act = task_cfg.action
        if cfg.embodiment != task_cfg.embodiment:
            raise SafetyConfigError(
                f"{cfg.source}: embodiment {cfg.embodiment} does not fit task {task_cfg.name}, "
                f"a {task_cfg.embodiment} task"
            )
        if set(cfg.action) != set(act.names):
            raise SafetyConfigError(
                f"{cfg.source}: action lists {', '.join(cfg.action)}; task {task_cfg.name}'s action has "
                f"{', '.join(act.names)}"
            )
        for name, lo, hi in zip(act.names, act.low, act.high, strict=True):
            lim = cfg.action[name]
            if lim.low < lo or lim.high > hi:
                raise SafetyConfigError(
                    f"{cfg.source}: action.{name}: [{lim.low}, {lim.high}] exceeds task {task_cfg.name}'s "
                    f"bounds [{lo}, {hi}]; limits may only be narrower"
                )
        self.cfg, self.task_cfg = cfg, task_cfg
        self.low = np.array([cfg.action[n].low for n in act.names])
        self.high = np.array([cfg.action[n].high for n in act.names])
        self.max_rate = np.array([cfg.action[n].max_rate for n in act.names])
        self.counts: dict[str, int] = dict.fromkeys(INTERVENTIONS, 0)
        self._rules: _Rules
        if cfg.arm is not None:
            self._rules = _ArmRules(self, cfg.arm)
        elif cfg.drone is not None:
            self._rules = _DroneRules(self, cfg.drone)
        else:
            assert cfg.car is not None  # validate() ensures the embodiment's section exists
            self._rules = _CarRules(self, cfg.car)
        self._last: FloatArray | None = None
        self._last_time = 0.0
        self._newest_obs: float | None = None
        self._latched: str | None = None
        self._stop_reason: str | None = None
        self._stop_since = 0.0
        self._logged_at: dict[str, float] = {}

    @property
    def stopped(self) -> bool:
        """True while the last :meth:`filter` returned a safe stop, or a stop is latched."""
        return self._latched is not None or self._stop_reason is not None

    @property
    def stop_reason(self) -> str | None:
        """``estop``, ``geofence`` or ``watchdog`` while stopped, else None."""
        return self._latched or self._stop_reason

    def observed(self, stamp: float) -> None:
        """Feed the watchdog: an observation stamped ``stamp`` (s) arrived."""
        self._newest_obs = stamp if self._newest_obs is None else max(self._newest_obs, stamp)

    def estop(self) -> None:
        """Latch the emergency stop: every command is the safe stop until :meth:`reset`."""
        if self._latched != "estop":
            log.warning("safety: emergency stop latched")
        self._latched = "estop"

    def reset(self) -> None:
        """Release a latched stop and start a new episode (see :meth:`new_episode`)."""
        if self._latched is not None:
            log.warning("safety: %s stop released by reset", self._latched)
        self._latched = self._stop_reason = None
        self.new_episode()

    def new_episode(self) -> None:
        """Forget the tracked arm target (the robot was reset); a latched stop stays latched.
        The last command is kept: the next one is rate-limited from it, as the robot still runs it."""
        self._rules.reset()

    def filter(self, action: FloatArray, state: RobotState, now: float) -> FloatArray:
        """The action to send instead of ``action`` (task units), given the latest state and the time (s)."""
        act = np.array(action, dtype=np.float64).reshape(-1)
        if act.shape != self.low.shape:
            raise ValueError(
                f"action has {act.size} components; {self.task_cfg.name} takes {', '.join(self.cfg.action)}"
            )
        if self._latched is None and self._rules.outside_geofence(state):
            self._latched = "geofence"
        stale = self._newest_obs is None or now - self._newest_obs > self.cfg.watchdog_timeout
        reason = self._latched or ("watchdog" if stale else None)
        if reason is not None:
            if self._stop_reason is None:
                self._stop_since = now
            self._stop_reason = reason
            self._count(reason)
            stop = self._rules.safe_stop(state, now - self._stop_since, stale, self._last)
            return self._send(np.clip(stop, self.low, self.high), state, now)
        self._stop_reason = None

        if not np.isfinite(act).all():
            self._count("nonfinite")
            act = self._rules.safe_stop(state, 0.0, False, self._last)
        out = np.clip(act, self.low, self.high)
        if not np.array_equal(out, act):
            self._count("clip")
        if self._last is None:
            window = (np.full_like(out, -np.inf), np.full_like(out, np.inf))
        else:
            step = self.max_rate * min(max(now - self._last_time, 0.0), self.task_cfg.control_dt)
            window = (self._last - step, self._last + step)
        out = self._rules.limit(out, state, window)
        if not np.isfinite(out).all():  # only a corrupt state gets here: send the task's neutral action
            self._count("nonfinite")
            out = np.clip(np.asarray(self.task_cfg.action.neutral), self.low, self.high)
        return self._send(out, state, now)

    # -- internals shared by the rules
    def _send(self, out: FloatArray, state: RobotState, now: float) -> FloatArray:
        self._rules.sent(out, state)
        self._last, self._last_time = out, now
        return out.copy()

    def _rate_limit(self, act: FloatArray, window: tuple[FloatArray, FloatArray]) -> FloatArray:
        out = np.clip(act, *window)
        if not np.array_equal(out, act):
            self._count("rate")
        return out

    def _count(self, kind: str) -> None:
        self.counts[kind] += 1
        wall = time.monotonic()
        if wall - self._logged_at.get(kind, -math.inf) >= LOG_INTERVAL:
            self._logged_at[kind] = wall
            log.warning("safety: %s intervention (%d so far)", kind, self.counts[kind])


class _Rules:
    """What differs between embodiments: the geofence, the safe stop and the velocity limits."""

    def __init__(self, layer: SafetyLayer, fence: tuple[FloatArray, FloatArray] | None = None) -> None:
        self.layer = layer
        self.fence = fence
        """Lower and upper corners of the geofence (m), if the robot has one."""

    def outside_geofence(self, state: Any) -> bool:
        return self.fence is not None and bool(
            np.any((state.pos < self.fence[0]) | (state.pos > self.fence[1]))
        )

    def safe_stop(self, state: Any, elapsed: float, stale: bool, last: FloatArray | None) -> FloatArray:
        """The safe command ``elapsed`` s into a stop; ``stale``: the state is too old to act on."""
        raise NotImplementedError

    def limit(self, act: FloatArray, state: Any, window: tuple[FloatArray, FloatArray]) -> FloatArray:
        """Velocity, rate (``window``: each component's allowed range) and workspace limits."""
        raise NotImplementedError

    def sent(self, out: FloatArray, state: Any) -> None:
        """Note the action sent."""

    def reset(self) -> None:
        """Forget what was tracked about the robot."""


def _braking_step(distance: FloatArray, step_change: FloatArray) -> FloatArray:
    """Largest displacement per step toward a face ``distance`` away (m) from which the displacement
    can fall to zero, losing ``step_change`` per step, without crossing the face.

    The steps s, s - c, s - 2c, ... add up to at most s^2 / 2c + s / 2 + c / 8 = ((s + c/2)^2) / 2c,
    which must not exceed the distance: s <= sqrt(2 c d) - c / 2. It also never exceeds d.
    """
    return np.maximum(np.sqrt(2 * step_change * np.maximum(distance, 0.0)) - step_change / 2, 0.0)


class _ArmRules(_Rules):
    """Tool displacement: speed, rate and workspace limits solved together; hold as the safe stop."""

    def __init__(self, layer: SafetyLayer, lim: ArmLimits) -> None:
        super().__init__(layer)
        self.lim = lim
        self.box_low, self.box_high = _box(lim)
        self.max_step = lim.max_ee_speed * layer.task_cfg.control_dt
        self.target: FloatArray | None = None
        """Where the task's controller has its impedance target (m), as the commands sent moved it."""

    def _target(self, state: ArmState) -> FloatArray:
        return state.ee_pos.copy() if self.target is None else self.target

    def safe_stop(self, state: ArmState, elapsed: float, stale: bool, last: FloatArray | None) -> FloatArray:
        gripper = state.gripper_opening if last is None else last[3]
        return np.array([0.0, 0.0, 0.0, gripper])

    def limit(self, act: FloatArray, state: ArmState, window: tuple[FloatArray, FloatArray]) -> FloatArray:
        layer, d = self.layer, act[:3]
        target = self._target(state)
        low, high = layer.low[:3], layer.high[:3]
        # Hard: the target stays in the box; one outside it (an arm started there) comes back at full step.
        hard_low, hard_high = np.maximum(low, self.box_low - target), np.minimum(high, self.box_high - target)
        back = np.clip(np.clip(target, self.box_low, self.box_high) - target, low, high)
        outside = hard_low > hard_high
        hard_low, hard_high = np.where(outside, back, hard_low), np.where(outside, back, hard_high)
        # Soft, in priority order: the rate window, then slowing down toward the faces, planned with
        # 90% of the rate limit so that rounding never leaves the two without a common point.
        step_change = 0.9 * layer.max_rate[:3] * layer.task_cfg.control_dt
        slow_low = -_braking_step(target - self.box_low, step_change)
        slow_high = _braking_step(self.box_high - target, step_change)
        box_low, box_high = hard_low, hard_high
        for lo, hi in ((window[0][:3], window[1][:3]), (slow_low, slow_high)):
            keep = np.maximum(box_low, lo) <= np.minimum(box_high, hi)
            box_low = np.where(keep, np.maximum(box_low, lo), box_low)
            box_high = np.where(keep, np.minimum(box_high, hi), box_high)
        out = np.clip(d, box_low, box_high)
        if np.linalg.norm(out) > self.max_step:
            # The point of the box nearest to zero is the slowest allowed; go from it toward the
            # request as far as the speed limit lets (it stays in the box: the box is convex).
            slowest = np.clip(0.0, box_low, box_high)
            out = slowest + _reach(slowest, out - slowest, self.max_step) * (out - slowest)
            layer._count("velocity")
        if np.any((d < np.maximum(hard_low, slow_low)) | (d > np.minimum(hard_high, slow_high))):
            layer._count("workspace")
        if np.any((d < window[0][:3]) | (d > window[1][:3])):
            layer._count("rate")
        gripper = layer._rate_limit(act[3:], (window[0][3:], window[1][3:]))
        return np.concatenate([out, gripper])

    def sent(self, out: FloatArray, state: ArmState) -> None:
        # As the task's controller: the target moves by the displacement, within reach of the tool.
        lead = self.lim.target_lead
        self.target = np.clip(self._target(state) + out[:3], state.ee_pos - lead, state.ee_pos + lead)

    def reset(self) -> None:
        self.target = None


def _reach(start: FloatArray, direction: FloatArray, radius: float) -> float:
    """Largest t in [0, 1] with |start + t direction| <= radius, for |start| <= radius."""
    a, b = float(direction @ direction), 2.0 * float(start @ direction)
    c = float(start @ start) - radius**2
    if a == 0 or c > 0:
        return 0.0
    return min(1.0, (-b + math.sqrt(max(b * b - 4 * a * c, 0.0))) / (2 * a))


class _DroneRules(_Rules):
    """Geofence box, hover-then-land safe stop, hover controller above the speed limit."""

    def __init__(self, layer: SafetyLayer, lim: DroneLimits) -> None:
        super().__init__(layer, _box(lim))
        self.lim = lim
        self.hover_thrust = lim.mass * GRAVITY
        self.controller = DroneController(layer.task_cfg, mass=lim.mass)

    def safe_stop(
        self, state: DroneState, elapsed: float, stale: bool, last: FloatArray | None
    ) -> FloatArray:
        lim = self.lim
        descending = elapsed - lim.hover_time
        if descending > lim.land_timeout:
            return np.zeros(4)
        if stale:
            # Nothing fresh to act on: hold the attitude (zero rates, the onboard gyro loop keeps it)
            # and the hover thrust for the hover time, then let the thrust down to descend.
            tilt_cos = max(float(quat_to_mat(state.quat[None])[0, 2, 2]), 0.5)
            fraction = 1.0 if descending < 0 else lim.land_thrust
            return np.array([fraction * self.hover_thrust / tilt_cos, 0.0, 0.0, 0.0])
        if state.pos[2] < lim.touchdown_height:
            return np.zeros(4)
        # Level out and stop (attitude from the braking force, rates from the attitude error), then
        # descend at the landing speed, reached over a second.
        sink = lim.land_speed * float(np.clip(descending, 0.0, 1.0))
        return self.controller.velocity(state, np.array([0.0, 0.0, -sink]))

    def limit(self, act: FloatArray, state: DroneState, window: tuple[FloatArray, FloatArray]) -> FloatArray:
        if np.linalg.norm(state.linvel) > self.lim.max_speed:
            self.layer._count("velocity")
            act = np.clip(self.controller.velocity(state, np.zeros(3)), self.layer.low, self.layer.high)
        return self.layer._rate_limit(act, window)


class _CarRules(_Rules):
    """Geofence box, brake as the safe stop, speed that can stop before the fence."""

    def __init__(self, layer: SafetyLayer, lim: CarLimits) -> None:
        super().__init__(layer, _box(lim))
        self.lim = lim

    def safe_stop(self, state: CarState, elapsed: float, stale: bool, last: FloatArray | None) -> FloatArray:
        return np.array([0.0, state.steering_angle if last is None else last[1]])

    def _room(self, state: CarState, heading: FloatArray) -> float:
        """Distance (m) from the car along ``heading`` to the geofence."""
        low, high = _box(self.lim)
        with np.errstate(divide="ignore"):
            to_face = np.where(heading > 0, high - state.pos, low - state.pos) / heading
        return float(np.min(np.where(heading != 0, to_face, np.inf)))

    def limit(self, act: FloatArray, state: CarState, window: tuple[FloatArray, FloatArray]) -> FloatArray:
        heading = np.array([math.cos(state.yaw), math.sin(state.yaw)])
        ahead, behind = (
            math.sqrt(2 * self.lim.brake_decel * max(self._room(state, h) - self.lim.fence_margin, 0.0))
            for h in (heading, -heading)
        )
        if not -behind <= act[0] <= ahead:
            self.layer._count("velocity")
            act = np.array([np.clip(act[0], -behind, ahead), act[1]])
        return self.layer._rate_limit(act, window)
