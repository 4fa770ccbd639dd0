"""The safety layer under input made to break it (issue 15): stamps, states, actions, limits files.

Whatever the action, the state and the stamps, every command the layer sends is finite, inside the
limits and within the rate limit of the one before (outside a safe stop, which brakes at once),
and silence longer than the watchdog timeout stops the robot whatever was stamped before it.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import yaml

from robolearn.hardware.robots import ArmState, CarState, DroneState, RobotState
from robolearn.hardware.safety import SafetyLayer
from robolearn.hardware.safety_config import CONFIG_DIR, SafetyCfg, SafetyConfigError
from robolearn.sim.transforms import quat_from_euler
from robolearn.tasks import make_task_cfg

EPS = 1e-9
ROBOTS = {"panda": "panda_reach", "crazyflie": "quadrotor_hover", "racecar": "car_checkpoints"}
HOSTILE_VALUES = (math.nan, math.inf, -math.inf, 1e39, 1e308, -1e308)
HOSTILE_ACTIONS = (math.inf, -math.inf, math.nan, 1e308, -1e308)


def _layer(robot: str) -> SafetyLayer:
    return SafetyLayer(SafetyCfg.load(robot), make_task_cfg(ROBOTS[robot]))


def _box(layer: SafetyLayer) -> tuple[np.ndarray, np.ndarray]:
    """The workspace (arm) or geofence (drone, car) corners."""
    if layer.cfg.arm is not None:
        return np.asarray(layer.cfg.arm.workspace_low), np.asarray(layer.cfg.arm.workspace_high)
    lim = layer.cfg.drone or layer.cfg.car
    assert lim is not None
    return np.asarray(lim.geofence_low), np.asarray(lim.geofence_high)


def _state(robot: str, pos: np.ndarray, rng: np.random.Generator, stamp: float) -> RobotState:
    """A plausible state at ``pos`` (m), moving a little."""
    if robot == "panda":
        return ArmState(
            joint_pos=rng.uniform(-2, 2, 7),
            joint_vel=rng.normal(0, 0.3, 7),
            ee_pos=pos,
            ee_quat=np.array([0.0, 1.0, 0.0, 0.0]),
            ee_linvel=rng.normal(0, 0.1, 3),
            gripper_opening=float(rng.uniform(0, 0.08)),
            stamp=stamp,
        )
    if robot == "crazyflie":
        roll, pitch, yaw = rng.uniform(-0.4, 0.4, 3)
        quat = quat_from_euler(np.array([roll]), np.array([pitch]), np.array([yaw]))[0]
        return DroneState(
            pos=pos, quat=quat, linvel=rng.normal(0, 0.5, 3), body_rates=rng.normal(0, 1, 3), stamp=stamp
        )
    return CarState(
        pos=pos,
        yaw=float(rng.uniform(-4, 4)),
        body_vel=rng.normal(0, 1, 2),
        yaw_rate=float(rng.normal(0, 1)),
        steering_angle=float(rng.uniform(-0.5, 0.5)),
        stamp=stamp,
    )


def _corrupt(state: RobotState, rng: np.random.Generator) -> RobotState:
    """``state`` with one field (all of it or one component) set to a hostile value."""
    names = [f.name for f in dataclasses.fields(state) if f.name != "stamp"]
    name = names[int(rng.integers(len(names)))]
    value = float(rng.choice(HOSTILE_VALUES))
    old = getattr(state, name)
    if isinstance(old, np.ndarray):
        new = old.copy()
        if rng.random() < 0.5:
            new[int(rng.integers(len(new)))] = value
        else:
            new[:] = value
        return dataclasses.replace(state, **{name: new})
    return dataclasses.replace(state, **{name: value})


def _hostile_action(rng: np.random.Generator, scale: np.ndarray, i: int, mode: int) -> np.ndarray:
    if mode == 0:  # far past the bounds
        return rng.uniform(-3, 3, scale.shape) * scale
    if mode == 1:  # non-finite or the largest floats, mixed with ordinary values
        hostile = rng.choice(HOSTILE_ACTIONS, scale.shape)
        return np.where(rng.random(scale.shape) < 0.5, hostile, rng.uniform(-1, 1, scale.shape) * scale)
    if mode == 2:  # sign-oscillating at ten times full scale
        return (-1.0) ** i * 10 * scale
    return rng.uniform(-1, 1, scale.shape) * scale  # ordinary


def _stamp(rng: np.random.Generator, now: float, last_good: float) -> float | None:
    """What is stamped on this step's observation (None: nothing arrives)."""
    kind = rng.choice(
        ["good", "good", "good", "good", "none", "future", "far", "nan", "inf", "-inf", "old", "repeat"]
    )
    return {
        "good": now - float(rng.uniform(0, 0.01)),
        "none": None,
        "future": now + 3600.0,
        "far": 1e308,
        "nan": math.nan,
        "inf": math.inf,
        "-inf": -math.inf,
        "old": now - 10.0,
        "repeat": last_good,
    }[str(kind)]


# -- property: 10,000 hostile steps per robot -------------------------------------------------------------
@pytest.mark.parametrize("robot", list(ROBOTS))
def test_fuzz_outputs_stay_finite_bounded_rate_limited_and_silence_stops(robot: str) -> None:
    layer = _layer(robot)
    rng = np.random.default_rng(15)
    low, high = _box(layer)
    centre, half = (low + high) / 2, (high - low) / 2
    task = layer.task_cfg
    scale = np.maximum(np.abs(task.action.low), np.abs(task.action.high))
    timeout, dt_max = layer.cfg.watchdog_timeout, task.control_dt
    arm = layer.cfg.arm
    max_step = arm.max_ee_speed * dt_max if arm is not None else math.inf

    now, prev, last_heard, last_good = 100.0, None, -math.inf, 100.0
    pos, was_outside = centre.copy(), False
    action_mode, state_mode, silence = 0, 0, 0
    checked_rate = 0
    for k in range(10_000):
        if k % 50 == 0:  # a new stretch: how actions, states and the link misbehave for a while
            if state_mode == 3 and arm is not None:  # the arm put back home for a new episode
                pos = centre.copy()
                layer.new_episode()
            action_mode, state_mode = int(rng.integers(4)), int(rng.integers(4))
            silence = int(rng.integers(3, 40)) if rng.random() < 0.2 else 0
        dt = float(rng.choice([0.005, 0.02, 0.021, 0.04]))
        now += dt
        # Where the robot is: following the commands (arm) or wandering, sometimes past its box.
        if state_mode == 3:
            pos = centre + half * rng.choice([-1.3, 1.3], size=centre.shape) * rng.uniform(1.0, 2.0)
        elif robot == "panda":
            if prev is not None and np.all(np.isfinite(prev)):
                pos = np.clip(pos + prev[:3], low - 0.05, high + 0.05)
        else:
            pos = centre + 0.85 * half * np.sin(0.05 * k + np.arange(len(half)))
        outside = bool(np.any((pos < low) | (pos > high)))
        state = _state(robot, pos.copy(), rng, now)
        if state_mode == 1 or (state_mode == 2 and rng.random() < 0.1):
            state = _corrupt(state, rng)

        if silence > 0:
            silence -= 1
        else:
            stamp = _stamp(rng, now, last_good)
            if stamp is not None:
                layer.observed(stamp)
                last_heard = now
                if math.isfinite(stamp) and stamp <= now:
                    last_good = max(last_good, stamp)
        action = _hostile_action(rng, scale, k, action_mode)
        out = layer.filter(action, state, now)

        assert out.shape == scale.shape and np.isfinite(out).all(), (k, out)
        assert np.all(out >= layer.low - EPS) and np.all(out <= layer.high + EPS), (k, out)
        if now - last_heard > timeout + EPS:
            assert layer.stopped, (k, "moving after silence", now - last_heard)
        if arm is not None:
            assert np.linalg.norm(out[:3]) <= max_step + EPS, (k, out)
        if not layer.stopped and prev is not None:
            step = layer.max_rate * min(dt, dt_max) + EPS
            jump = np.abs(out - prev)
            if arm is None:
                assert np.all(jump <= step), (k, out, prev)
            else:
                # The workspace may make the arm slow down faster than the rate limit (the box wins),
                # never reverse; an arm put outside its box comes back at full step.
                slowing = (np.minimum(prev, 0) - EPS <= out) & (out <= np.maximum(prev, 0) + EPS)
                if not (outside or was_outside):
                    assert np.all((jump[:3] <= step[:3]) | slowing[:3]), (k, out, prev)
                assert jump[3] <= step[3], (k, out, prev)
            checked_rate += 1
        if layer.stop_reason == "geofence" and not outside:
            layer.reset()  # the operator releases the stop once the robot is back inside
        prev, was_outside = out, outside

    counts = layer.counts
    assert counts["state"] > 100 and counts["stamp"] > 100 and counts["watchdog"] > 100, counts
    assert counts["nonfinite"] > 0 and counts["rate"] > 0 and checked_rate > 1000, (counts, checked_rate)
    if arm is None:
        assert counts["geofence"] > 0, counts


# -- the watchdog against stamps ---------------------------------------------------------------------------
def _nominal(robot: str) -> RobotState:
    rng = np.random.default_rng(0)
    low, high = _box(_layer(robot))
    return _state(robot, (low + high) / 2, rng, 0.0)


def _good_action(layer: SafetyLayer) -> np.ndarray:
    return np.asarray(layer.task_cfg.action.neutral) * 0.9 + 0.1 * layer.high


STAMP_ATTACKS: dict[str, Callable[[float], float]] = {
    "an hour ahead": lambda now: now + 3600.0,
    "the largest float": lambda now: 1e308,
    "infinite": lambda now: math.inf,
    "NaN": lambda now: math.nan,
    "minus infinity": lambda now: -math.inf,
    "just inside the allowed lead": lambda now: now + 0.099,
}


@pytest.mark.parametrize("robot", list(ROBOTS))
@pytest.mark.parametrize("attack", list(STAMP_ATTACKS))
def test_one_bad_stamp_then_silence_stops(robot: str, attack: str) -> None:
    """Good observations, one hostile stamp, then 50 s of silence: stopped within the timeout."""
    layer, state = _layer(robot), _nominal(robot)
    timeout, now = layer.cfg.watchdog_timeout, 0.0
    for _ in range(20):
        now += 0.02
        layer.observed(now)
        layer.filter(_good_action(layer), state, now)
        assert not layer.stopped
    last_heard = now
    layer.observed(STAMP_ATTACKS[attack](now))
    while now < last_heard + 50.0:
        now += 0.02
        out = layer.filter(_good_action(layer), state, now)
        assert np.isfinite(out).all()
        if now - last_heard > timeout:
            assert layer.stop_reason == "watchdog", (attack, now - last_heard)


@pytest.mark.parametrize("robot", list(ROBOTS))
@pytest.mark.parametrize("attack", ["NaN", "an hour ahead", "infinite"])
def test_a_bad_stamp_first_stops_until_a_good_one(robot: str, attack: str) -> None:
    layer, state = _layer(robot), _nominal(robot)
    layer.observed(STAMP_ATTACKS[attack](0.0))
    for now in np.arange(0.02, 50.0, 0.02):  # 50 s of silence after it
        layer.filter(_good_action(layer), state, float(now))
        assert layer.stop_reason == "watchdog"
    layer.observed(50.0)
    layer.filter(_good_action(layer), state, 50.0)
    assert not layer.stopped  # a good stamp after the bad one clears the fault
    assert layer.counts["stamp"] == 1


@pytest.mark.parametrize("robot", list(ROBOTS))
def test_a_bad_stamp_among_good_ones_stops_until_the_next_good_one(robot: str) -> None:
    layer, state = _layer(robot), _nominal(robot)
    for k in range(1, 10):
        layer.observed(k * 0.02)
        layer.filter(_good_action(layer), state, k * 0.02)
    layer.observed(0.19)
    layer.observed(math.nan)  # after the good one: the fault stands
    layer.filter(_good_action(layer), state, 0.2)
    assert layer.stop_reason == "watchdog"
    layer.observed(0.21)
    layer.filter(_good_action(layer), state, 0.22)
    assert not layer.stopped


@pytest.mark.parametrize("robot", list(ROBOTS))
def test_repeating_the_newest_stamp_is_not_fresh(robot: str) -> None:
    """policy_node feeds the same stamp again on every tick while the robot is silent."""
    layer, state = _layer(robot), _nominal(robot)
    layer.observed(0.0)
    layer.filter(_good_action(layer), state, 0.0)
    for now in np.arange(0.02, 1.0, 0.02):
        layer.observed(0.0)
        layer.filter(_good_action(layer), state, float(now))
        assert layer.stopped == (now > layer.cfg.watchdog_timeout)


@pytest.mark.parametrize("robot", list(ROBOTS))
@pytest.mark.parametrize("now", [math.nan, math.inf, -math.inf])
def test_a_broken_clock_stops(robot: str, now: float) -> None:
    layer, state = _layer(robot), _nominal(robot)
    layer.observed(0.0)
    first = layer.filter(_good_action(layer), state, 0.0)
    layer.observed(0.02)
    out = layer.filter(_good_action(layer), state, now)
    assert layer.stop_reason == "watchdog" and np.isfinite(out).all() and np.isfinite(first).all()
    layer.observed(0.04)
    layer.filter(_good_action(layer), state, 0.04)
    assert not layer.stopped  # a working clock again


# -- states the layer cannot trust ---------------------------------------------------------------------------
def _state_cases() -> list[tuple[str, str, float]]:
    return [
        (robot, f.name, value)
        for robot in ROBOTS
        for f in dataclasses.fields(type(_nominal(robot)))
        if f.name != "stamp"
        for value in HOSTILE_VALUES
    ]


@pytest.mark.parametrize(("robot", "field", "value"), _state_cases())
def test_an_untrusted_state_is_a_safe_stop(robot: str, field: str, value: float) -> None:
    layer = _layer(robot)
    good = _nominal(robot)
    old = getattr(good, field)
    bad = dataclasses.replace(
        good, **{field: np.full_like(old, value) if isinstance(old, np.ndarray) else value}
    )
    layer.observed(0.0)
    prev = layer.filter(_good_action(layer), good, 0.0)
    for k, hostile in enumerate([math.nan, *HOSTILE_ACTIONS]):
        now = 0.02 * (k + 1)
        layer.observed(now)
        action = _good_action(layer)
        action[k % len(action)] = hostile
        out = layer.filter(action, bad, now)
        assert np.isfinite(out).all() and np.all(out >= layer.low) and np.all(out <= layer.high), out
        assert layer.stop_reason == "state"
    layer.observed(1.0)
    out = layer.filter(_good_action(layer), good, 1.0)
    assert not layer.stopped and np.isfinite(out).all() and np.isfinite(prev).all()
    assert layer.counts["state"] == len(HOSTILE_ACTIONS) + 1


def test_drone_infinite_action_past_the_geofence_is_a_finite_stop() -> None:
    """Issue 15's case: an infinite thrust with the drone past its geofence gave [nan nan nan nan]."""
    layer = _layer("crazyflie")
    state = _nominal("crazyflie")
    layer.observed(0.0)
    layer.filter(_good_action(layer), state, 0.0)
    outside = dataclasses.replace(state, pos=np.array([0.0, 0.0, 3.0]), linvel=np.array([1e39, 0, 0]))
    for now in (0.02, 0.04):
        layer.observed(now)
        out = layer.filter(np.array([math.inf, 0.0, 0.0, 0.0]), outside, now)
        assert np.isfinite(out).all() and layer.stopped
    past = dataclasses.replace(state, pos=np.array([0.0, 0.0, 3.0]))
    layer.observed(0.06)
    out = layer.filter(np.array([math.inf, math.nan, 0.0, 0.0]), past, 0.06)
    assert np.isfinite(out).all() and layer.stop_reason == "geofence"


def test_car_infinite_yaw_brakes_instead_of_raising() -> None:
    """Issue 15's case: yaw=inf raised ValueError (math domain error) in the car's speed limit."""
    layer = _layer("racecar")
    state = _nominal("racecar")
    layer.observed(0.0)
    layer.filter(np.array([2.0, 0.2]), state, 0.0)
    layer.observed(0.02)
    out = layer.filter(np.array([2.0, 0.2]), dataclasses.replace(state, yaw=math.inf), 0.02)
    assert layer.stop_reason == "state" and out[0] == 0.0 and np.isfinite(out).all()


# -- limits files -------------------------------------------------------------------------------------------
def _panda_text() -> str:
    return (CONFIG_DIR / "panda.yaml").read_text()


def _refused(path: Path, *parts: str) -> str:
    with pytest.raises(SafetyConfigError) as err:
        SafetyCfg.load(path)
    message = str(err.value)
    assert "\n" not in message and message.startswith(str(path)), message
    for part in parts:
        assert part in message, message
    return message


def test_limits_file_not_utf8_is_refused_naming_the_line_and_key(tmp_path: Path) -> None:
    text = _panda_text().replace(
        "  ee_dx: {low: -0.01", "  ee_dx: {low: -0.01 \xff".replace("\xff", "#\udcff")
    )
    path = tmp_path / "latin1.yaml"
    path.write_bytes(text.encode("utf-8", "surrogateescape"))
    _refused(path, "is not UTF-8", "key ee_dx", "0xff")
    path.write_bytes(b"# caf\xe9\n" + _panda_text().encode())
    _refused(path, "line 1", "0xe9", "not UTF-8")
    path.write_bytes(b"\xff\xfe" + _panda_text().encode("utf-16-le"))
    _refused(path, "not UTF-8")


@pytest.mark.parametrize("style", ["list", "mapping", "mixed"])
def test_limits_file_nested_5000_deep_is_refused(tmp_path: Path, style: str) -> None:
    depth = 5000
    if style == "list":
        deep = "[" * depth + "]" * depth
    elif style == "mapping":
        deep = "{a: " * depth + "1" + "}" * depth
    else:
        deep = "{a: [" * (depth // 2) + "1" + "]}" * (depth // 2)
    path = tmp_path / "deep.yaml"
    path.write_text(f"embodiment: arm\nwatchdog_timeout: 0.1\naction:\n  ee_dx: {deep}\n")
    _refused(path, "nested deeper than", "action.ee_dx")


@pytest.mark.parametrize(
    ("edit", "key"),
    [
        (
            lambda t: t.replace(
                "ee_dx: {low: -0.01, high: 0.01,", "ee_dx: {low: -0.01, high: 0.01, high: 0.5,"
            ),
            "action.ee_dx.high",
        ),
        (lambda t: t + "\nwatchdog_timeout: 5.0\n", "watchdog_timeout"),
        (
            lambda t: t.replace("  ee_dy:", "  ee_dx: {low: -0.01, high: 0.01, max_rate: 0.2}\n  ee_dy:"),
            "action.ee_dx",
        ),
        (
            lambda t: t.replace("  max_ee_speed: 0.5", "  max_ee_speed: 0.5\n  max_ee_speed: 5.0"),
            "arm.max_ee_speed",
        ),
    ],
)
def test_limits_file_duplicate_key_is_refused(tmp_path: Path, edit: Callable[[str], str], key: str) -> None:
    text = edit(_panda_text())
    assert text != _panda_text()
    path = tmp_path / "dup.yaml"
    path.write_text(text)
    _refused(path, f": {key}: duplicate key at line")


def test_limits_file_other_hostile_contents_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "robot.yaml"
    path.write_text(_panda_text() + "#" * (1 << 20))
    _refused(path, "bytes; a limits file has at most")
    path.write_text(_panda_text().replace("max_ee_speed: 0.5", f"max_ee_speed: {'9' * 5000}"))
    _refused(path, "arm.max_ee_speed: an integer of 5000 digits")
    path.write_text(_panda_text().replace("max_ee_speed: 0.5", f"max_ee_speed: {'9' * 400}"))
    _refused(path, "arm.max_ee_speed: an integer of 400 digits")
    path.write_text(_panda_text() + "\x00\n")
    _refused(path, f"line {_panda_text().count(chr(10)) + 1}: character #x0000 is not allowed")
    path.write_text(yaml.safe_dump({"a": 1}) + "b: &x [*x]\n")
    _refused(path, "a: unknown key")
