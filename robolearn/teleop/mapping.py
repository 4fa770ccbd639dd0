"""Device axes to each embodiment's action space, scaled to the task's action bounds.

Hand-held devices report a *twist*: six axes in [-1, 1] in the robot's frame (x forward, away
from the person; y left; z up; then rotations about x, y, z: roll, pitch, yaw) and whether the
gripper is closed. :class:`ActionMapper` turns a twist into the task's action in physical units.
A deflection ``u`` maps to ``neutral + u * (high - neutral)`` for ``u > 0`` and
``neutral + u * (neutral - low)`` for ``u < 0``, times the device's ``scale`` (so full deflection
at ``scale = 1`` reaches the task's bound, and no input is the neutral action):

- **arm** (``ee_dx, ee_dy, ee_dz`` displacement per step, then ``gripper_opening`` if present):
  x, y, z move the end effector in the world frame; the gripper goes to its lower bound when
  closed, its upper when open.
- **drone**, ``drone_mode="velocity"`` (default): x, y, z are a world-frame velocity setpoint
  (full deflection ``scale`` x 1 m/s); the hover task's cascaded controller
  (:class:`~robolearn.tasks.robots.crazyflie.CascadedCtbrExpert`, a PD velocity loop and a
  geometric attitude loop) turns it into collective thrust and body rates, and yaw adds a yaw
  rate. No input hovers in place.
- **drone**, ``drone_mode="rates"`` (acro): z is thrust around hover, y rolls (left stick left:
  roll left, negative roll rate), x pitches (forward: nose down, positive pitch rate), yaw is the
  yaw rate. No input is hover thrust and no rotation, which drifts.
- **car** (``speed``, ``steering_angle``): x is the speed (forward up to the upper bound,
  backward down to the lower), y the steering angle (left positive).

Legged tasks have no hand-held mapping (drive them with the scripted or replay device).
:class:`HandDevice` is what the keyboard, gamepad and SpaceMouse share: this mapping, the latched
gripper and HIL-SERL's intervention rule.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from typing import Literal

import numpy as np

from robolearn.sim.backend import FloatArray
from robolearn.tasks.core import TaskCfg
from robolearn.tasks.robots.crazyflie import CascadedCtbrExpert
from robolearn.teleop.device import Device, DeviceError, ObsDict, TeleopCommand, TeleopEvent

DroneMode = Literal["velocity", "rates"]

TWIST_AXES = ("x", "y", "z", "roll", "pitch", "yaw")
"""Names of a twist's components, in order."""

DRONE_MAX_SPEED = 1.0
"""Velocity setpoint (m/s) at full deflection and ``scale = 1``: the hover expert's approach speed."""


def apply_deadzone(values: FloatArray, deadzone: float) -> FloatArray:
    """Zero inputs within ``deadzone`` of rest and rescale the rest to keep the full range [-1, 1]."""
    mag = np.abs(values)
    out = np.sign(values) * np.clip((mag - deadzone) / (1.0 - deadzone), 0.0, 1.0)
    return np.asarray(out, dtype=np.float64)


def scale_to_bounds(unit: FloatArray, low: FloatArray, neutral: FloatArray, high: FloatArray) -> FloatArray:
    """Deflections in [-1, 1] to physical values: 0 is neutral, +1 the upper bound, -1 the lower."""
    u = np.clip(unit, -1.0, 1.0)
    return np.where(u >= 0, neutral + u * (high - neutral), neutral + u * (neutral - low))


class ActionMapper:
    """A twist and a gripper state to one task's action (see the module docstring)."""

    def __init__(
        self, cfg: TaskCfg, *, scale: float = 1.0, drone_mode: DroneMode = "velocity", device: str = "device"
    ) -> None:
        if not 0.0 < scale <= 1.0:
            raise DeviceError(f"{device}: scale must be in (0, 1], got {scale}")
        if drone_mode not in ("velocity", "rates"):
            raise DeviceError(f"{device}: drone_mode must be 'velocity' or 'rates', got {drone_mode!r}")
        act = cfg.action
        self.low, self.high = np.asarray(act.low, np.float64), np.asarray(act.high, np.float64)
        self.neutral = np.asarray(act.neutral, np.float64)
        self.scale, self.drone_mode = scale, drone_mode
        n = len(act.names)
        expected = {"arm": (3, 4), "drone": (4,), "car": (2,)}.get(cfg.embodiment)
        if expected is None:
            raise DeviceError(
                f"{device}: task {cfg.name} is {cfg.embodiment}; hand-held devices drive arm, drone and "
                "car tasks (use --device scripted or replay)"
            )
        if n not in expected:
            raise DeviceError(
                f"{device}: {cfg.embodiment} task {cfg.name} has {n} actions ({', '.join(act.names)}); "
                f"the {cfg.embodiment} mapping expects {' or '.join(map(str, expected))}"
            )
        self.embodiment = cfg.embodiment
        if cfg.embodiment == "drone" and drone_mode == "velocity":
            missing = {"linvel", "attitude"} - set(cfg.observations)
            if missing:
                raise DeviceError(
                    f"{device}: drone_mode 'velocity' needs observations {sorted(missing)}, which task "
                    f"{cfg.name} lacks; use drone_mode 'rates'"
                )
            self._velocity_ctrl = CascadedCtbrExpert(
                cfg, error_key="velocity_error", max_speed=DRONE_MAX_SPEED * scale
            )

    def __call__(self, twist: FloatArray, gripper_closed: bool, obs: ObsDict) -> FloatArray:
        """(A,) action in physical units for a (6,) twist."""
        u = np.clip(np.asarray(twist, np.float64), -1.0, 1.0) * self.scale
        x, y, z, _, _, yaw = u
        if self.embodiment == "arm":
            action = scale_to_bounds(u[:3], self.low[:3], self.neutral[:3], self.high[:3])
            if len(self.low) == 4:
                action = np.append(action, self.low[3] if gripper_closed else self.high[3])
            return action
        if self.embodiment == "car":
            return scale_to_bounds(np.array([x, y]), self.low, self.neutral, self.high)
        if self.drone_mode == "rates":
            return scale_to_bounds(np.array([z, -y, x, yaw]), self.low, self.neutral, self.high)
        return self._velocity(np.array([x, y, z]) * DRONE_MAX_SPEED, yaw, obs)

    def _velocity(self, v_des: FloatArray, yaw: float, obs: ObsDict) -> FloatArray:
        ctrl = self._velocity_ctrl
        # Its outer loop is a = kd (clip(kp/kd e, max_speed) - v): a position error e = kd/kp v_des
        # makes it a velocity loop tracking v_des.
        err = v_des * ctrl.kd / ctrl.kp
        batch = {
            "velocity_error": err[None],
            "linvel": np.asarray(obs["linvel"])[None],
            "attitude": np.asarray(obs["attitude"])[None],
        }
        action = ctrl(batch)[0]
        # The controller holds the heading (zero yaw-rate demand); the person's yaw rate adds to it.
        action[3] += scale_to_bounds(np.array([yaw]), self.low[3:], self.neutral[3:], self.high[3:])[0]
        return np.clip(action, self.low, self.high)


class HandDevice(Device):
    """Base of the devices a person holds: mapping, latched gripper, intervention rule.

    HIL-SERL's rule: the person intervenes on every step with input above the device's deadzone
    (its twist is already dead-zoned, so any non-zero axis), a gripper command, or the deadman
    control held (taking over while holding still).
    """

    name = "hand"

    def __init__(
        self, task_cfg: TaskCfg, *, scale: float, drone_mode: DroneMode, deadzone: float = 0.0
    ) -> None:
        if not 0.0 <= deadzone < 1.0:
            raise DeviceError(f"{self.name}: deadzone must be in [0, 1), got {deadzone}")
        self.task_cfg = task_cfg
        self.deadzone = deadzone
        """Axis deflection (a fraction of full scale) below which an axis reads zero."""
        self.mapper = ActionMapper(task_cfg, scale=scale, drone_mode=drone_mode, device=self.name)
        self.gripper_closed = False

    def reset(self) -> None:
        # Every task's reset opens the gripper; the latch follows.
        self.gripper_closed = False

    def command(
        self,
        obs: ObsDict,
        twist: FloatArray,
        *,
        grip: bool | None,
        deadman: bool,
        events: AbstractSet[TeleopEvent],
    ) -> TeleopCommand:
        """The command for a dead-zoned twist, a gripper command (None: unchanged) and the deadman."""
        if grip is not None:
            self.gripper_closed = grip
        intervening = deadman or grip is not None or bool(np.any(twist != 0.0))
        level = {TeleopEvent.INTERVENE} if intervening else set()
        action = self.mapper(twist, self.gripper_closed, obs)
        return TeleopCommand(action, intervening, frozenset(events) | level)
