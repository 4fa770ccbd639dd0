"""The safety layer every command to a robot passes through, and the per-robot limits it enforces.

:class:`SafetyLayer` works on the task's action vector (physical units) and the latest
:data:`~robolearn.hardware.robots.RobotState`. Each call of :meth:`SafetyLayer.filter`, in order:

1. **Stops.** A latched emergency stop (:meth:`SafetyLayer.estop`, released only by
   :meth:`SafetyLayer.reset`), a latched geofence breach (drone, car: the robot left its box), a
   state the layer cannot trust (a field not finite or beyond :data:`MAX_STATE_MAGNITUDE`, a
   quaternion far from unit norm), an arm joint measured past its range (``joints`` in the file, a
   protective stop latched like the geofence), or the watchdog (no observation fed to
   :meth:`SafetyLayer.observed` arrived within ``watchdog_timeout``, the newest is older than
   that, none came yet, or a stamp was non-finite or ahead of the clock) return the embodiment's
   safe stop whatever the input: the arm holds (zero displacement, gripper as last commanded),
   the drone hovers then lands, the car brakes (speed 0, steering held). A stop without a trusted
   state does not depend on it (the drone hovers blind). Stops are not slowed by the rate limits.
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
   the rate limits; should the two still conflict (irregular command timing, a tool that moved
   by itself), the box wins by slowing down, never by reversing. A target outside the box comes
   back at up to ``max_ee_speed``.

Every intervention is counted by kind in :attr:`SafetyLayer.counts` and logged (at most once a
second per kind). A command the rate window narrowed counts as ``rate`` when it asked for more
than ``max_rate`` allows over a whole control period (what a simulation trained with
``--rate-limits`` also clips), as ``rate_period`` when it was within that and only the time since
the last command, short of a period, made the window narrower. Limits come from
``hardware/config/<robot>.yaml`` (:meth:`~robolearn.hardware.safety_config.SafetyCfg.load`).
"""

from __future__ import annotations

import logging
import math
import operator
import time
from dataclasses import fields
from typing import Any

import numpy as np

from robolearn.hardware.robots import ArmState, CarState, DroneController, DroneState, RobotState
from robolearn.hardware.safety_config import (
    ArmLimits,
    CarLimits,
    DroneLimits,
    SafetyCfg,
    SafetyConfigError,
    box_corners,
)
from robolearn.sim import host_xp as xp
from robolearn.sim.backend import FloatArray
from robolearn.sim.transforms import quat_to_mat
from robolearn.tasks.core import TaskCfg
from robolearn.tasks.robots.crazyflie import GRAVITY

log = logging.getLogger(__name__)

PROTECTIVE_STOPS = ("geofence", "joint_limit")
"""Latched stops the robot's own motion trips (it left its box, a joint passed its range), as
against the operator's e-stop."""

INTERVENTIONS = (
    "estop",
    "geofence",
    "state",
    "watchdog",
    "stamp",
    "nonfinite",
    "clip",
    "velocity",
    "rate",
    "rate_period",
    "workspace",
    "joint_limit",
)
"""Kinds of intervention counted in :attr:`SafetyLayer.counts`."""
LOG_INTERVAL = 1.0
"""Seconds (wall clock) between log messages of one kind of intervention."""
MAX_STATE_MAGNITUDE = 1e6
"""Largest absolute value of a state field the layer trusts (m, rad, m/s, rad/s): no robot it drives
is 1,000 km from its origin or turns at 10^6 rad/s, and beyond it the controllers' float32
arithmetic overflows (issue 15: a field of 1e39 turned a drone's safe stop into NaN)."""
QUAT_NORM_TOLERANCE = 0.01
"""How far from 1 the norm of an orientation quaternion the layer trusts may be."""
_WITHIN_MAGNITUDE = MAX_STATE_MAGNITUDE.__ge__
"""``abs(v)`` within :data:`MAX_STATE_MAGNITUDE` (False for NaN), as a C-level callable for ``map``."""


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
        arm_joints = task_cfg.scene.robot.arm_joints
        if cfg.joints is not None and set(cfg.joints) != set(arm_joints):
            raise SafetyConfigError(
                f"{cfg.source}: joints lists {', '.join(cfg.joints)}; task {task_cfg.name}'s robot "
                f"{task_cfg.scene.robot.name} has arm joints {', '.join(arm_joints) or '(none)'}"
            )
        self.cfg, self.task_cfg = cfg, task_cfg
        self.num_joints = len(arm_joints)
        self.low = np.array([cfg.action[n].low for n in act.names])
        self.high = np.array([cfg.action[n].high for n in act.names])
        self.max_rate = np.array([cfg.action[n].max_rate for n in act.names])
        self._period_step = (self.max_rate * task_cfg.control_dt).tolist()
        """Each component's largest change over a whole control period (``rate`` against ``rate_period``)."""
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
        """Stamp of the newest observation accepted (s)."""
        self._arrived = 0.0
        """When it arrived at the latest (s, the clock of ``now``; see :meth:`_watchdog`)."""
        self._pending: float | None = None
        """Newest finite stamp observed since the last :meth:`filter`, not yet judged."""
        self._stamp_fault: str | None = None
        """A bad stamp seen since the newest accepted one; the robot stops until a good one comes."""
        self._latched: str | None = None
        self._stop_reason: str | None = None
        self._stop_since = 0.0
        self._logged_at: dict[str, float] = {}

    @property
    def stopped(self) -> bool:
        """True while the last :meth:`filter` returned a safe stop, or a stop is latched."""
        return self._latched is not None or self._stop_reason is not None

    @property
    def protective_stop(self) -> str | None:
        """The latched protective stop (:data:`PROTECTIVE_STOPS`), if one is latched."""
        return self._latched if self._latched in PROTECTIVE_STOPS else None

    @property
    def stop_reason(self) -> str | None:
        """``estop``, ``geofence``, ``state`` (an untrusted one) or ``watchdog`` while stopped, else None."""
        return self._latched or self._stop_reason

    def observed(self, stamp: float) -> None:
        """Feed the watchdog: an observation stamped ``stamp`` (s, on the clock of ``filter``'s ``now``)
        arrived.

        The next :meth:`filter` judges it. It is fresh if its stamp is finite, newer than every
        stamp accepted before and at most ``watchdog_timeout`` ahead of ``now``; the watchdog then
        counts both the stamp's age and the time since it arrived, so that no stamp, however
        wrong, keeps the robot moving without fresh observations (issue 15: one stamp an hour
        ahead, then silence, used to keep it moving for the hour). A non-finite stamp or one ahead
        of the clock is a fault: the robot stops until a good stamp arrives after it.
        """
        try:
            value = float(stamp)
        except (TypeError, ValueError):
            value = math.nan
        if not math.isfinite(value):
            self._stamp_fault, self._pending = f"non-finite stamp {stamp!r}", None
            self._count("stamp")
            return
        self._pending = value if self._pending is None else max(self._pending, value)

    def estop(self) -> None:
        """Latch the emergency stop: every command is the safe stop until :meth:`reset`."""
        if self._latched != "estop":
            log.warning("safety: emergency stop latched")
        self._latched = "estop"

    def reset(self) -> None:
        """Release a latched stop and start a new episode (see :meth:`new_episode`)."""
        self._release()
        self.new_episode()

    def _release(self) -> None:
        if self._latched is not None:
            log.warning("safety: %s stop released by reset", self._latched)
        self._latched = self._stop_reason = None

    def new_episode(self, release_protective: bool = False) -> None:
        """Forget the tracked arm target (the robot was reset); a latched stop stays latched, but for
        a protective one with ``release_protective`` (the robot is back at its reset pose).
        The last command is kept: the next one is rate-limited from it, as the robot still runs it."""
        if release_protective and self.protective_stop is not None:
            self._release()
        self._rules.reset()

    def filter(self, action: FloatArray, state: RobotState, now: float) -> FloatArray:
        """The action to send instead of ``action`` (task units), given the latest state and the time (s)."""
        act = np.array(action, dtype=np.float64).reshape(-1)
        if act.shape != self.low.shape:
            raise ValueError(
                f"action has {act.size} components; {self.task_cfg.name} takes {', '.join(self.cfg.action)}"
            )
        stale = self._watchdog(now)
        if not math.isfinite(now):  # a broken clock: no time can be judged, so stop as if blind
            now, stale = self._last_time, True
        untrusted = _untrusted_field(state, self.num_joints)
        trusted = state if untrusted is None else None
        if trusted is not None and self._latched is None and self._rules.outside_geofence(trusted):
            self._latched = "geofence"
        if trusted is not None and self._latched is None and self._rules.past_joint_limit(trusted):
            self._latched = "joint_limit"
        reason = self._latched or ("state" if trusted is None else None) or ("watchdog" if stale else None)
        if reason is not None:
            if self._stop_reason is None:
                self._stop_since = now
            self._stop_reason = reason
            self._count(reason, f" ({untrusted} not finite or out of range)" if reason == "state" else "")
            elapsed = now - self._stop_since
            stop = self._rules.safe_stop(trusted, elapsed, stale or trusted is None, self._last)
            if not xp.all_finite(stop):  # a config at the edge of floats: the blind stop is finite
                stop = self._rules.safe_stop(None, elapsed, True, self._last)
            return self._send(xp.clip(stop, self.low, self.high), trusted, now)
        assert trusted is not None  # an untrusted state is a stop reason
        self._stop_reason = None

        if not xp.all_finite(act):
            self._count("nonfinite")
            act = self._rules.safe_stop(trusted, 0.0, False, self._last)
        out = xp.clip(act, self.low, self.high)
        if out.tolist() != act.tolist():  # both finite: the lists compare as the arrays would
            self._count("clip")
        if self._last is None:
            window = (np.full_like(out, -np.inf), np.full_like(out, np.inf))
        else:
            step = self.max_rate * min(max(now - self._last_time, 0.0), self.task_cfg.control_dt)
            window = (self._last - step, self._last + step)
        out = self._rules.limit(out, trusted, window)
        if not xp.all_finite(out):  # not for a trusted state; kept so nothing non-finite goes out
            self._count("nonfinite")
            blind = xp.clip(self._rules.safe_stop(None, 0.0, True, self._last), self.low, self.high)
            out = xp.clip(blind, *window) if self._last is not None else blind
        return self._send(out, trusted, now)

    # -- internals shared by the rules
    def _watchdog(self, now: float) -> bool:
        """Judge the stamp observed since the last call; True if the robot has no fresh observation."""
        timeout = self.cfg.watchdog_timeout
        if self._pending is not None and math.isfinite(now):
            stamp, self._pending = self._pending, None
            if stamp > now + timeout:
                self._stamp_fault = f"stamp {stamp!r} is {stamp - now:.3g} s ahead of the clock"
                self._count("stamp")
            elif self._newest_obs is None or stamp > self._newest_obs:
                # It arrived after the last call (or, sanely stamped, not before its stamp): the
                # later of the two, never a time it cannot have arrived by.
                after = now if self._last is None else self._last_time
                arrived = max(after, stamp) if stamp <= now else after
                self._newest_obs, self._arrived, self._stamp_fault = stamp, arrived, None
        if self._newest_obs is None or self._stamp_fault is not None:
            return True
        return now - self._newest_obs > timeout or now - self._arrived > timeout

    def _send(self, out: FloatArray, state: RobotState | None, now: float) -> FloatArray:
        self._rules.sent(out, state)
        self._last, self._last_time = out, now
        return out.copy()

    def _rate_limit(self, act: FloatArray, window: tuple[FloatArray, FloatArray]) -> FloatArray:
        out = xp.clip(act, *window)
        if not xp.array_equal(out, act):
            self._count_rate(act.tolist())
        return out

    def _count_rate(self, requested: list[float], first: int = 0) -> None:
        """Count a command the rate window narrowed (components ``first`` on as requested): as
        ``rate_period`` if each was within ``max_rate`` of the last command over a whole control
        period, else as ``rate`` (see the module doc). Only called with a last command."""
        assert self._last is not None  # without one the window is unbounded
        last, full = self._last.tolist(), self._period_step
        within = all(
            last[i] - full[i] <= v <= last[i] + full[i] for i, v in enumerate(requested, start=first)
        )
        self._count("rate_period" if within else "rate")

    def _count(self, kind: str, detail: str = "") -> None:
        self.counts[kind] += 1
        wall = time.monotonic()
        if wall - self._logged_at.get(kind, -math.inf) >= LOG_INTERVAL:
            self._logged_at[kind] = wall
            if kind == "stamp":
                detail = f" ({self._stamp_fault})"
            log.warning("safety: %s intervention%s (%d so far)", kind, detail, self.counts[kind])


_TRUST_FIELDS: dict[tuple[type, int], tuple[tuple[str, tuple[int, ...], bool], ...]] = {}
"""Per state type and arm joint count: each field checked by :func:`_untrusted_field`, its shape,
whether a quaternion."""


def _untrusted_field(state: RobotState, joints: int) -> str | None:
    """The first field of ``state`` the layer cannot act on (not finite, past
    :data:`MAX_STATE_MAGNITUDE`, the wrong shape, a quaternion far from unit norm), or None.
    ``joints`` is the arm's number of joints (the length of its joint fields).

    The stamp is the watchdog's business (:meth:`SafetyLayer.observed`), not checked here.
    """
    checks = _TRUST_FIELDS.get((type(state), joints))
    if checks is None:

        def dims(name: str) -> tuple[int, ...]:  # -1 in SHAPES: the arm's number of joints
            return tuple(joints if n == -1 else n for n in state.SHAPES.get(name, ()))

        names = [f.name for f in fields(state) if f.name != "stamp"]
        checks = tuple((name, dims(name), name.endswith("quat")) for name in names)
        _TRUST_FIELDS[(type(state), joints)] = checks
    for name, shape, is_quat in checks:
        try:
            value = np.asarray(getattr(state, name), dtype=np.float64)
        except (TypeError, ValueError):
            return name
        if value.shape != shape:
            return name
        # Python floats: a field has a handful of values, fewer than numpy's calls would cost
        # (issue 18). Written so that NaN fails it: NaN compares false.
        values = value.tolist() if shape else [value.item()]
        if not all(map(_WITHIN_MAGNITUDE, map(abs, values))):
            return name
        norm = math.sqrt(sum(map(operator.mul, values, values))) if is_quat else 1.0
        if not abs(norm - 1.0) <= QUAT_NORM_TOLERANCE:
            return name
    return None


class _Rules:
    """What differs between embodiments: the geofence, the safe stop and the velocity limits."""

    def __init__(self, layer: SafetyLayer, fence: tuple[FloatArray, FloatArray] | None = None) -> None:
        self.layer = layer
        self.fence = fence
        """Lower and upper corners of the geofence (m), if the robot has one."""

    def past_joint_limit(self, state: Any) -> bool:
        """An arm joint measured past its range (``joints`` limits): a protective stop."""
        return False

    def outside_geofence(self, state: Any) -> bool:
        return self.fence is not None and bool(
            xp.any((state.pos < self.fence[0]) | (state.pos > self.fence[1]))
        )

    def safe_stop(
        self, state: Any | None, elapsed: float, stale: bool, last: FloatArray | None
    ) -> FloatArray:
        """The safe command ``elapsed`` s into a stop; ``stale``: the state is too old to act on;
        ``state`` None: there is none the layer trusts (the command must not depend on it)."""
        raise NotImplementedError

    def limit(self, act: FloatArray, state: Any, window: tuple[FloatArray, FloatArray]) -> FloatArray:
        """Velocity, rate (``window``: each component's allowed range) and workspace limits."""
        raise NotImplementedError

    def sent(self, out: FloatArray, state: Any | None) -> None:
        """Note the action sent (``state`` None: no trusted state came with it)."""

    def reset(self) -> None:
        """Forget what was tracked about the robot."""


def _braking_step(distance: float, step_change: float) -> float:
    """Largest displacement per step toward a face ``distance`` away (m) from which the displacement
    can fall to zero, losing ``step_change`` per step, without crossing the face.

    The steps s, s - c, s - 2c, ... add up to at most s^2 / 2c + s / 2 + c / 8 = ((s + c/2)^2) / 2c,
    which must not exceed the distance: s <= sqrt(2 c d) - c / 2. It also never exceeds d.
    """
    return _max(math.sqrt(2 * step_change * _max(distance, 0.0)) - step_change / 2, 0.0)


class _ArmRules(_Rules):
    """Tool displacement: speed, rate and workspace limits solved together; hold as the safe stop.

    Worked out per axis on Python floats: the arm's vectors have three components, and numpy's call
    overhead on them cost more than the arithmetic (issue 18: 0.47 ms of a 1.5 ms control step).
    Every operation is the IEEE double one numpy did, in the same order.
    """

    def __init__(self, layer: SafetyLayer, lim: ArmLimits) -> None:
        super().__init__(layer)
        self.lim = lim
        box_low, box_high = box_corners(lim)
        self.box_low, self.box_high = box_low.tolist(), box_high.tolist()
        self.max_step = lim.max_ee_speed * layer.task_cfg.control_dt
        joints, order = layer.cfg.joints, layer.task_cfg.scene.robot.arm_joints
        self.joint_low = None if joints is None else [joints[j].low for j in order]
        self.joint_high = None if joints is None else [joints[j].high for j in order]
        self.low, self.high = layer.low[:3].tolist(), layer.high[:3].tolist()
        # Planned with 90% of the rate limit, so that rounding never leaves the rate window and the
        # braking range without a common point.
        self.step_change = [0.9 * r * layer.task_cfg.control_dt for r in layer.max_rate[:3].tolist()]
        self.target: list[float] | None = None
        """Where the task's controller has its impedance target (m), as the commands sent moved it."""

    def _target(self, state: ArmState) -> list[float]:
        return np.asarray(state.ee_pos, dtype=np.float64).tolist() if self.target is None else self.target

    def past_joint_limit(self, state: ArmState) -> bool:
        # The displacement that would free the joint is not known without the arm's Jacobian, so
        # none is guessed: the arm holds until a person resets the layer, as an industrial
        # arm's protective stop.
        if self.joint_low is None or self.joint_high is None:
            return False
        measured = np.asarray(state.joint_pos, dtype=np.float64).tolist()
        return any(
            q < lo or q > hi for q, lo, hi in zip(measured, self.joint_low, self.joint_high, strict=True)
        )

    def safe_stop(
        self, state: ArmState | None, elapsed: float, stale: bool, last: FloatArray | None
    ) -> FloatArray:
        if len(self.layer.low) == 3:  # an arm without a gripper
            return np.zeros(3)
        if last is not None:
            gripper = last[3]
        elif state is not None:
            gripper = state.gripper_opening
        else:  # nothing sent yet and nothing measured: the task's neutral opening
            gripper = self.layer.task_cfg.action.neutral[3]
        return np.array([0.0, 0.0, 0.0, gripper])

    def limit(self, act: FloatArray, state: ArmState, window: tuple[FloatArray, FloatArray]) -> FloatArray:
        layer, values = self.layer, act.tolist()
        d, target = values[:3], self._target(state)
        win_low, win_high = window[0].tolist(), window[1].tolist()
        out, box = [0.0, 0.0, 0.0], []  # the command, and each axis's allowed range
        counted_workspace = counted_rate = False
        for i in range(3):
            t, lo, hi = target[i], self.low[i], self.high[i]
            box_lo, box_hi = self.box_low[i], self.box_high[i]
            # Hard: the target stays in the box; one outside it (an arm started there) comes back at
            # full step.
            hard_lo, hard_hi = _max(lo, box_lo - t), _min(hi, box_hi - t)
            if hard_lo > hard_hi:
                hard_lo = hard_hi = _min(_max(_min(_max(t, box_lo), box_hi) - t, lo), hi)
            # Soft, in priority order: the rate window, then slowing down toward the faces.
            slow_lo = -_braking_step(t - box_lo, self.step_change[i])
            slow_hi = _braking_step(box_hi - t, self.step_change[i])
            a, b = hard_lo, hard_hi
            for soft_lo, soft_hi in ((win_low[i], win_high[i]), (slow_lo, slow_hi)):
                # Where the two have no common point, the box's point nearest the soft range: with
                # the target inside the box that is between the range and zero, so the rate limit is
                # broken only by slowing down, never by reversing (a command crossing zero at full step).
                if _max(a, soft_lo) <= _min(b, soft_hi):
                    a, b = _max(a, soft_lo), _min(b, soft_hi)
                else:
                    a = b = b if soft_lo > b else a
            out[i] = _min(_max(d[i], a), b)
            box.append((a, b))
            counted_workspace |= d[i] < _max(hard_lo, slow_lo) or d[i] > _min(hard_hi, slow_hi)
            counted_rate |= d[i] < win_low[i] or d[i] > win_high[i]
        if _norm3(out) > self.max_step:
            # The point of the box nearest to zero is the slowest allowed; go from it toward the
            # request as far as the speed limit lets (it stays in the box: the box is convex).
            slowest = [_min(_max(0.0, lo), hi) for lo, hi in box]
            toward = [o - s for o, s in zip(out, slowest, strict=True)]
            reach = _reach(slowest, toward, self.max_step)
            out = [s + reach * v for s, v in zip(slowest, toward, strict=True)]
            speed = _norm3(out)
            if speed > self.max_step:
                # Even the slowest point is too fast: a target outside the box on several axes,
                # whose way back at full step per axis adds up. The speed limit wins; it comes back
                # along the same direction, more slowly.
                scale = self.max_step / speed
                out = [o * scale for o in out]
            layer._count("velocity")
        if counted_workspace:
            layer._count("workspace")
        if counted_rate:
            layer._count_rate(d)
        window_rest = zip(values[3:], win_low[3:], win_high[3:], strict=True)
        gripper = [_min(_max(g, lo), hi) for g, lo, hi in window_rest]
        if gripper != values[3:]:
            layer._count_rate(values[3:], first=3)
        return np.array(out + gripper)

    def sent(self, out: FloatArray, state: ArmState | None) -> None:
        if state is None:  # a stop sent without a trusted state: zero displacement, the target stays
            return
        # As the task's controller: the target moves by the displacement, within reach of the tool.
        lead, target = self.lim.target_lead, self._target(state)
        ee, moved = np.asarray(state.ee_pos, dtype=np.float64).tolist(), out[:3].tolist()
        self.target = [
            _min(_max(t + m, e - lead), e + lead) for t, m, e in zip(target, moved, ee, strict=True)
        ]

    def reset(self) -> None:
        self.target = None


def _max(a: float, b: float) -> float:
    """``np.maximum`` of two floats: NaN propagates (Python's ``max`` would drop it)."""
    return a if a >= b or a != a else b


def _min(a: float, b: float) -> float:
    """``np.minimum`` of two floats: NaN propagates."""
    return a if a <= b or a != a else b


def _norm3(v: list[float]) -> float:
    return math.sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2])


def _reach(start: list[float], direction: list[float], radius: float) -> float:
    """Largest t in [0, 1] with |start + t direction| <= radius, for |start| <= radius."""
    a = sum(x * x for x in direction)
    b = 2.0 * sum(s * x for s, x in zip(start, direction, strict=True))
    c = sum(s * s for s in start) - radius**2
    if a == 0 or c > 0:
        return 0.0
    return min(1.0, (-b + math.sqrt(max(b * b - 4 * a * c, 0.0))) / (2 * a))


class _DroneRules(_Rules):
    """Geofence box, hover-then-land safe stop, hover controller above the speed limit."""

    def __init__(self, layer: SafetyLayer, lim: DroneLimits) -> None:
        super().__init__(layer, box_corners(lim))
        self.lim = lim
        self.hover_thrust = lim.mass * GRAVITY
        self.controller = DroneController(layer.task_cfg, mass=lim.mass)

    def safe_stop(
        self, state: DroneState | None, elapsed: float, stale: bool, last: FloatArray | None
    ) -> FloatArray:
        lim = self.lim
        descending = elapsed - lim.hover_time
        if descending > lim.land_timeout:
            return np.zeros(4)
        if stale or state is None:
            # Nothing fresh to act on: hold the attitude (zero rates, the onboard gyro loop keeps it)
            # and the hover thrust for the hover time, then let the thrust down to descend. The
            # thrust makes up for the last trusted tilt; with none, for none.
            tilt_cos = 1.0 if state is None else max(float(quat_to_mat(state.quat[None])[0, 2, 2]), 0.5)
            fraction = 1.0 if descending < 0 else lim.land_thrust
            return np.array([fraction * self.hover_thrust / tilt_cos, 0.0, 0.0, 0.0])
        if state.pos[2] < lim.touchdown_height:
            return np.zeros(4)
        # Level out and stop (attitude from the braking force, rates from the attitude error), then
        # descend at the landing speed, reached over a second.
        sink = lim.land_speed * float(xp.clip(descending, 0.0, 1.0))
        return self.controller.velocity(state, np.array([0.0, 0.0, -sink]))

    def limit(self, act: FloatArray, state: DroneState, window: tuple[FloatArray, FloatArray]) -> FloatArray:
        if np.linalg.norm(state.linvel) > self.lim.max_speed:
            self.layer._count("velocity")
            act = xp.clip(self.controller.velocity(state, np.zeros(3)), self.layer.low, self.layer.high)
        return self.layer._rate_limit(act, window)


class _CarRules(_Rules):
    """Geofence box, brake as the safe stop, speed that can stop before the fence."""

    def __init__(self, layer: SafetyLayer, lim: CarLimits) -> None:
        super().__init__(layer, box_corners(lim))
        self.lim = lim

    def safe_stop(
        self, state: CarState | None, elapsed: float, stale: bool, last: FloatArray | None
    ) -> FloatArray:
        if last is not None:
            steering = last[1]
        else:
            steering = state.steering_angle if state is not None else 0.0
        return np.array([0.0, steering])

    def _room(self, state: CarState, heading: FloatArray) -> float:
        """Distance (m) from the car along ``heading`` to the geofence."""
        low, high = box_corners(self.lim)
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
            act = np.array([xp.clip(act[0], -behind, ahead), act[1]])
        return self.layer._rate_limit(act, window)
