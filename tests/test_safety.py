"""The safety layer: limits under adversarial commands, watchdog, e-stop, safe stops, YAML errors."""

from __future__ import annotations

import inspect
import math
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import yaml

from robolearn.hardware.robots import ArmState, CarState, DroneState, RateSetpoint, SpeedSteering
from robolearn.hardware.safety import SafetyLayer
from robolearn.hardware.safety_config import CONFIG_DIR, SafetyCfg, SafetyConfigError
from robolearn.hardware.sim_robot import SimArm, SimCar, SimDrone, make_sim_robot
from robolearn.sim.transforms import quat_from_euler, quat_to_mat
from robolearn.tasks import make_task_cfg
from robolearn.tasks.robots.arm import ee_delta_to_controls

EPS = 1e-9
CONFIG_TASKS = [
    ("panda", "panda_reach"),
    ("panda", "panda_pick_cube"),
    ("crazyflie", "quadrotor_hover"),
    ("crazyflie", "quadrotor_waypoints"),
    ("racecar", "car_checkpoints"),
]


def adversarial(rng: np.random.Generator, n: int, scale: np.ndarray) -> Iterator[np.ndarray]:
    """``n`` hostile actions in stretches of 20 to 300 steps: random far past the bounds, huge,
    partly NaN, partly infinite, sign-oscillating at full scale, a constant push one way."""
    k = 0
    while k < n:
        mode, length = rng.integers(6), int(rng.integers(20, 300))
        push = rng.choice([-1.0, 1.0], size=scale.shape) * rng.uniform(0.5, 10.0, size=scale.shape)
        for i in range(min(length, n - k)):
            if mode == 0:
                a = rng.uniform(-3, 3, scale.shape) * scale
            elif mode == 1:
                a = rng.choice([-1e9, 1e9], scale.shape)
            elif mode == 2:
                a = np.where(rng.random(scale.shape) < 0.5, np.nan, rng.uniform(-3, 3, scale.shape) * scale)
            elif mode == 3:
                a = rng.choice([-np.inf, np.inf, 1.0], scale.shape) * scale
            elif mode == 4:
                a = (-1.0) ** i * 10 * np.sign(push) * scale
            else:
                a = push * scale
            yield a
        k += length


def _layer(robot: str, task: str) -> SafetyLayer:
    return SafetyLayer(SafetyCfg.load(robot), make_task_cfg(task))


def _assert_bounded(layer: SafetyLayer, out: np.ndarray) -> None:
    assert np.isfinite(out).all()
    assert np.all(out >= layer.low - EPS) and np.all(out <= layer.high + EPS), out


# -- configurations --------------------------------------------------------------------------------
@pytest.mark.parametrize(("robot", "task"), CONFIG_TASKS)
def test_bundled_configs_fit_their_tasks(robot: str, task: str) -> None:
    cfg = SafetyCfg.load(robot)
    task_cfg = make_task_cfg(task)
    layer = SafetyLayer(cfg, task_cfg)
    assert cfg.embodiment == task_cfg.embodiment
    assert np.all(layer.low >= task_cfg.action.low) and np.all(layer.high <= task_cfg.action.high)
    assert SafetyCfg.load(CONFIG_DIR / f"{robot}.yaml") == cfg


def test_arm_target_lead_matches_the_task_controller() -> None:
    # The layer tracks the impedance target as ee_delta_to_controls moves it: same lead.
    default = inspect.signature(ee_delta_to_controls).parameters["max_lead"].default
    assert SafetyCfg.load("panda").arm.target_lead == default  # type: ignore[union-attr]


def _write(tmp_path: Path, data: object, name: str = "robot.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(data, sort_keys=False) if not isinstance(data, str) else data)
    return path


def _panda() -> dict:
    return yaml.safe_load((CONFIG_DIR / "panda.yaml").read_text())


def _racecar() -> dict:
    return yaml.safe_load((CONFIG_DIR / "racecar.yaml").read_text())


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda d: d.update(watchdog=0.1), ["watchdog: unknown key", "watchdog_timeout"]),
        (lambda d: d["arm"].update(max_speed=1.0), ["arm.max_speed: unknown key", "max_ee_speed"]),
        (lambda d: d.pop("watchdog_timeout"), ["watchdog_timeout: missing key"]),
        (lambda d: d["arm"].pop("target_lead"), ["arm.target_lead: missing key"]),
        (lambda d: d["action"]["ee_dx"].pop("max_rate"), ["action.ee_dx.max_rate: missing key"]),
        (lambda d: d["arm"].update(max_ee_speed="fast"), ["arm.max_ee_speed", "finite number", "'fast'"]),
        (lambda d: d["arm"].update(workspace_low=[0.3, 0.0]), ["arm.workspace_low", "list of 3 numbers"]),
        (lambda d: d.update(embodiment="boat"), ["embodiment", "arm, drone, car", "'boat'"]),
        (lambda d: d["action"]["ee_dx"].update(low=0.02), ["action.ee_dx", "below high"]),
        (lambda d: d["action"]["ee_dy"].update(max_rate=0), ["action.ee_dy.max_rate", "positive"]),
        (lambda d: d["arm"].update(max_ee_speed=-1.0), ["arm.max_ee_speed", "positive"]),
        (lambda d: d.pop("arm"), ["arm: is required", "embodiment is arm"]),
        (lambda d: d.update(car=_racecar()["car"]), ["car: is for embodiment car", "embodiment is arm"]),
        (lambda d: d["arm"].update(workspace_high=[0.1, 0.3, 0.55]), ["arm", "lower corner"]),
        (lambda d: d.update(action=[1, 2]), ["action", "must be a mapping"]),
    ],
)
def test_config_errors_are_one_line_naming_the_key(tmp_path: Path, edit, expected: list[str]) -> None:
    data = _panda()
    edit(data)
    path = _write(tmp_path, data)
    with pytest.raises(SafetyConfigError) as err:
        SafetyCfg.load(str(path))
    message = str(err.value)
    assert "\n" not in message and message.startswith(str(path))
    for part in expected:
        assert part in message


def test_file_and_name_errors_are_one_line(tmp_path: Path) -> None:
    cases = [
        ("boat", ["unknown safety config 'boat'", "panda, crazyflie, racecar"]),
        (str(tmp_path / "missing.yaml"), ["missing.yaml not found"]),
        (
            str(_write(tmp_path, "embodiment: arm\naction: {ee_dx: [1, 2\n", "a.yaml")),
            ["not valid YAML at line"],
        ),
        (str(_write(tmp_path, "- 1\n- 2\n", "b.yaml")), ["top level: must be a mapping"]),
    ]
    for name, expected in cases:
        with pytest.raises(SafetyConfigError) as err:
            SafetyCfg.load(name)
        assert "\n" not in str(err.value)
        for part in expected:
            assert part in str(err.value)


def test_mismatched_task_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SafetyConfigError, match="embodiment car does not fit task panda_reach"):
        _layer("racecar", "panda_reach")
    data = _panda()
    data["action"]["ee_dx"]["high"] = 0.05
    with pytest.raises(SafetyConfigError, match=r"action.ee_dx: .* exceeds task panda_reach's bounds"):
        SafetyLayer(SafetyCfg.load(_write(tmp_path, data)), make_task_cfg("panda_reach"))
    data = _panda()
    data["action"]["gripper"] = data["action"].pop("gripper_opening")
    with pytest.raises(
        SafetyConfigError, match=r"gripper; task panda_reach's action has ee_dx, .*, gripper_opening"
    ):
        SafetyLayer(SafetyCfg.load(_write(tmp_path, data)), make_task_cfg("panda_reach"))
    with pytest.raises(ValueError, match="takes ee_dx, ee_dy, ee_dz, gripper_opening"):
        layer = _layer("panda", "panda_reach")
        layer.filter(np.zeros(3), _arm_state(), 0.0)


# -- adversarial commands --------------------------------------------------------------------------
def test_arm_closed_loop_adversarial_stays_in_limits_and_workspace() -> None:
    """10,000 hostile commands through the layer to a simulated Panda, in 100-step episodes."""
    layer = _layer("panda", "panda_reach")
    arm_lim = layer.cfg.arm
    assert arm_lim is not None
    box_low, box_high = np.asarray(arm_lim.workspace_low), np.asarray(arm_lim.workspace_high)
    dt = layer.task_cfg.control_dt
    rng = np.random.default_rng(0)
    worst_ee, prev = 0.0, None
    with SimArm("panda_reach", safety=layer, seed=0) as arm:
        for k, action in enumerate(adversarial(rng, 10_000, np.array([0.02, 0.02, 0.02, 0.08]))):
            if k % 100 == 0:  # a new episode: the arm goes home, the layer forgets its target
                arm.reset()
                layer.reset()
            out = arm.send_command(arm.from_task_action(action)).to_action()
            _assert_bounded(layer, out)
            assert np.linalg.norm(out[:3]) <= arm_lim.max_ee_speed * dt + EPS
            if prev is not None:
                assert np.all(np.abs(out - prev) <= layer.max_rate * dt + EPS), (k, out, prev)
            prev = out
            obs = arm.observation()
            target = obs["ee_pos"].astype(np.float64) + obs["ee_target_offset"]
            assert np.all(target >= box_low - 1e-6) and np.all(target <= box_high + 1e-6), (k, target)
            ee = obs["ee_pos"]
            worst_ee = max(worst_ee, float(np.max(np.maximum(box_low - ee, ee - box_high))))
    # The impedance-controlled tool lags and couples axes at 0.5 m/s: it may cross a face by the
    # tracking error (1.4 cm measured over this run), never more.
    assert worst_ee < 0.02
    for kind in ("nonfinite", "clip", "velocity", "rate", "workspace"):
        assert layer.counts[kind] > 0, kind


def _drone_state(pos: np.ndarray, vel: np.ndarray, roll: float, pitch: float, stamp: float) -> DroneState:
    quat = quat_from_euler(np.array([roll]), np.array([pitch]), np.array([0.3]))[0]
    return DroneState(pos=pos, quat=quat, linvel=vel, body_rates=np.zeros(3), stamp=stamp)


def _car_state(pos: np.ndarray, yaw: float, stamp: float, steering: float = 0.0) -> CarState:
    return CarState(
        pos=pos, yaw=yaw, body_vel=np.array([1.0, 0.0]), yaw_rate=0.0, steering_angle=steering, stamp=stamp
    )


def _arm_state(stamp: float = 0.0) -> ArmState:
    return ArmState(
        joint_pos=np.zeros(7),
        joint_vel=np.zeros(7),
        ee_pos=np.array([0.45, 0.0, 0.3]),
        ee_quat=np.array([0.0, 1.0, 0.0, 0.0]),
        ee_linvel=np.zeros(3),
        gripper_opening=0.05,
        stamp=stamp,
    )


def _brake_room(layer: SafetyLayer, state: CarState, speed: float) -> float:
    """Speed from which the car brakes to a stop short of the fence, driving the way ``speed`` says."""
    lim = layer.cfg.car
    assert lim is not None
    heading = np.array([math.cos(state.yaw), math.sin(state.yaw)]) * (1.0 if speed >= 0 else -1.0)
    low, high = np.asarray(lim.geofence_low), np.asarray(lim.geofence_high)
    with np.errstate(divide="ignore"):
        to_face = np.where(heading > 0, high - state.pos, low - state.pos) / heading
    room = float(np.min(np.where(heading != 0, to_face, np.inf))) - lim.fence_margin
    return math.sqrt(2 * lim.brake_decel * max(room, 0.0))


@pytest.mark.parametrize("robot", ["crazyflie", "racecar"])
def test_mobile_adversarial_stays_in_limits_with_geofence_stops(robot: str) -> None:
    """10,000 hostile commands while the robot wanders (now and then out of its geofence, then
    back and reset), at irregular command intervals."""
    task = "quadrotor_hover" if robot == "crazyflie" else "car_checkpoints"
    layer = _layer(robot, task)
    lim = layer.cfg.drone or layer.cfg.car
    assert lim is not None
    fence_low, fence_high = np.asarray(lim.geofence_low), np.asarray(lim.geofence_high)
    centre, half = (fence_low + fence_high) / 2, (fence_high - fence_low) / 2
    rng = np.random.default_rng(1)
    scale = np.maximum(np.abs(layer.task_cfg.action.low), np.abs(layer.task_cfg.action.high))
    now, prev, stops = 0.0, None, 0
    phases = rng.uniform(0, 2 * np.pi, size=(2, len(half)))
    for k, action in enumerate(adversarial(rng, 10_000, scale)):
        dt = float(rng.choice([0.005, 0.02, 0.021, 0.04]))
        now += dt
        # Wander inside the fence; one stretch in ten reaches 15% past it.
        reach = 1.15 if (k // 250) % 10 == 9 else 0.85
        pos = centre + reach * half * np.sin(0.05 * k + phases[0]) * np.cos(0.013 * k + phases[1])
        outside = bool(np.any((pos < fence_low) | (pos > fence_high)))
        state: DroneState | CarState
        if robot == "crazyflie":
            vel = rng.normal(0, 0.5, 3) * (8.0 if k % 97 == 0 else 1.0)
            state = _drone_state(pos, vel, *rng.uniform(-0.4, 0.4, 2), now)
        else:
            state = _car_state(pos, float(np.sin(0.002 * k) * 4), now, steering=float(rng.uniform(-0.5, 0.5)))
        layer.observed(now)
        out = layer.filter(action, state, now)
        _assert_bounded(layer, out)
        if outside:
            assert layer.stopped and layer.stop_reason == "geofence"
        if layer.stopped:
            stops += 1
        elif prev is not None:
            step = layer.max_rate * min(dt, 0.02)
            assert np.all(np.abs(out - prev) <= step + EPS), (k, out, prev)
            if isinstance(state, CarState):  # room to brake before the fence, or slowing as fast as allowed
                assert abs(out[0]) <= max(_brake_room(layer, state, out[0]), abs(prev[0]) - step[0]) + 1e-9
        if layer.stop_reason == "geofence" and not outside:
            layer.reset()  # the operator releases the stop once the robot is back inside
        prev = out
    assert stops > 100 and layer.counts["geofence"] == stops
    for kind in ("nonfinite", "clip", "velocity", "rate"):
        assert layer.counts[kind] > 0, kind


# -- watchdog and e-stop ---------------------------------------------------------------------------
def _states() -> dict[str, tuple[str, object]]:
    return {
        "panda": ("panda_reach", _arm_state()),
        "crazyflie": ("quadrotor_hover", _drone_state(np.array([0, 0, 1.0]), np.zeros(3), 0.0, 0.0, 0.0)),
        "racecar": ("car_checkpoints", _car_state(np.zeros(2), 0.0, 0.0, steering=0.2)),
    }


@pytest.mark.parametrize("robot", ["panda", "crazyflie", "racecar"])
def test_watchdog_stops_within_timeout_and_releases(robot: str) -> None:
    task, state = _states()[robot]
    layer = _layer(robot, task)
    good = np.asarray(make_task_cfg(task).action.neutral) * 0.9 + 0.1 * layer.high
    dt, timeout = 0.02, layer.cfg.watchdog_timeout
    layer.filter(good, state, 0.0)
    assert layer.stop_reason == "watchdog"  # nothing observed yet
    now, expected_stops = 0.0, 1
    for _ in range(50):  # observations arrive
        now += dt
        layer.observed(now)
        out = layer.filter(good, state, now)
        assert not layer.stopped
    last_obs, steady = now, out
    for _ in range(30):  # they stop
        now += dt
        out = layer.filter(good, state, now)
        if now - last_obs <= timeout:
            assert not layer.stopped and np.allclose(out, steady)
            continue
        expected_stops += 1
        assert layer.stop_reason == "watchdog"
        if robot == "panda":
            assert np.array_equal(out, [0, 0, 0, steady[3]])  # hold, gripper as commanded
        elif robot == "racecar":
            assert np.array_equal(out, [0.0, steady[1]])  # brake, steering held
        else:  # hover blind: rate loop holding the attitude, hover thrust
            assert layer.cfg.drone is not None
            assert out == pytest.approx([layer.cfg.drone.mass * 9.81, 0, 0, 0], rel=1e-9)
    assert layer.counts["watchdog"] == expected_stops and expected_stops > 20
    layer.observed(now)
    layer.filter(good, state, now + 0.001)
    assert not layer.stopped


def test_drone_blind_safe_stop_sinks_then_stops_motors() -> None:
    layer = _layer("crazyflie", "quadrotor_hover")
    lim = layer.cfg.drone
    assert lim is not None
    state = _drone_state(np.array([0, 0, 1.0]), np.zeros(3), 0.0, 0.0, 0.0)
    layer.observed(0.0)
    hover = lim.mass * 9.81
    for now in np.arange(0.2, lim.hover_time + lim.land_timeout + 1.0, 0.02):
        out = layer.filter(np.array([0.5, 8, 8, 3]), state, float(now))
        elapsed = now - 0.2
        expected = hover if elapsed < lim.hover_time else lim.land_thrust * hover
        if elapsed > lim.hover_time + lim.land_timeout:
            expected = 0.0
        assert out[0] == pytest.approx(expected) and np.all(out[1:] == 0), now


@pytest.mark.parametrize("robot", ["panda", "crazyflie", "racecar"])
def test_estop_latches_until_reset(robot: str) -> None:
    task, state = _states()[robot]
    layer = _layer(robot, task)
    good = np.asarray(make_task_cfg(task).action.neutral)
    layer.observed(0.0)
    layer.filter(good, state, 0.0)
    layer.estop()
    first = None
    for k in range(1, 201):
        layer.observed(k * 0.02)
        out = layer.filter(good, state, k * 0.02)
        assert layer.stopped and layer.stop_reason == "estop"
        first = out if first is None else first
        if robot != "crazyflie":  # the drone's stop changes as it hovers, then descends
            assert np.array_equal(out, first)
    assert layer.counts["estop"] == 200
    layer.estop()  # again: still latched, nothing else changes
    layer.reset()
    layer.observed(4.02)
    layer.filter(good, state, 4.02)
    assert not layer.stopped and layer.stop_reason is None


def test_nonfinite_becomes_the_safe_command_within_rate_limits() -> None:
    layer = _layer("racecar", "car_checkpoints")
    state = _car_state(np.zeros(2), 0.0, 0.0, steering=0.1)
    layer.observed(0.0)
    out = layer.filter(np.array([2.0, 0.3]), state, 0.0)
    assert np.allclose(out, [2.0, 0.3])
    out = layer.filter(np.array([np.nan, 0.0]), state, 0.02)
    # Brake and hold the steering, as fast as the rate limit allows.
    assert out == pytest.approx([2.0 - 8.0 * 0.02, 0.3]) and layer.counts["nonfinite"] == 1


@pytest.mark.parametrize(("robot", "task"), [("racecar", "car_checkpoints"), ("panda", "panda_pick_cube")])
def test_rate_counts_tell_a_short_period_from_a_command_past_the_limit(robot: str, task: str) -> None:
    """A command within max_rate over a whole control period that a short period narrows counts as
    ``rate_period``; one past the limit of a whole period as ``rate``; one at the limit on time as neither."""
    layer = _layer(robot, task)
    dt = layer.task_cfg.control_dt
    full = layer.max_rate * dt
    state = _car_state(np.zeros(2), 0.0, 0.0) if robot == "racecar" else _arm_state()
    now = 0.0
    layer.observed(now)
    last = layer.filter(np.zeros_like(full), state, now)

    def send(action: np.ndarray, period: float) -> np.ndarray:
        nonlocal now
        now += period
        layer.observed(now)
        return layer.filter(action, state, now)

    # The first component moves at the limit, as a policy trained with --rate-limits moves it.
    at_limit = last.copy()
    at_limit[0] += 0.99 * full[0]
    out = send(at_limit, dt)
    assert out == pytest.approx(at_limit) and layer.counts["rate"] == layer.counts["rate_period"] == 0
    at_limit = out.copy()
    at_limit[0] += 0.99 * full[0]
    out = send(at_limit, 0.8 * dt)  # a period a fifth short: the window narrows by a fifth
    assert out[0] < at_limit[0] and layer.counts["rate_period"] == 1 and layer.counts["rate"] == 0
    past = out.copy()
    past[0] -= 1.5 * full[0]  # back the other way: inside the action's bounds
    out = send(past, dt)
    assert out[0] == pytest.approx(past[0] + 0.5 * full[0]) and layer.counts["rate"] == 1
    assert layer.counts["rate_period"] == 1


# -- closed loop in simulation ---------------------------------------------------------------------
def test_drone_estop_lands_level_and_slowly() -> None:
    task = make_task_cfg("quadrotor_hover")
    layer = SafetyLayer(SafetyCfg.load("crazyflie"), task)
    assert task.expert is not None
    expert = task.expert(task)
    with SimDrone("quadrotor_hover", safety=layer, seed=1) as drone:
        for _ in range(100):
            obs = drone.observation()
            drone.send_command(drone.from_task_action(expert({k: v[None] for k, v in obs.items()})[0]))
        assert drone.get_state().pos[2] > 0.5
        layer.estop()
        heights, sink, tilt = [], [], 0.0
        for _ in range(500):  # 10 s of a hostile policy: full thrust, full rates
            out = drone.send_command(RateSetpoint(0.59, 8.0, 8.0, 3.0))
            state = drone.get_state()
            heights.append(state.pos[2])
            sink.append(state.linvel[2])
            tilt = max(tilt, math.acos(min(1.0, quat_to_mat(state.quat[None])[0, 2, 2])))
    down = int(np.argmax(np.array(heights) < 0.06))
    assert 0 < down < 400 and heights[-1] < 0.02
    assert min(sink[: down + 1]) > -0.5  # descended at the landing speed, not falling
    assert tilt < 0.1
    assert out == RateSetpoint(0.0, 0.0, 0.0, 0.0)  # motors off on the ground


def test_car_full_throttle_stops_inside_geofence() -> None:
    layer = _layer("racecar", "car_checkpoints")
    lim = layer.cfg.car
    assert lim is not None
    with SimCar("car_checkpoints", safety=layer, seed=3) as car:
        farthest = 0.0
        for _ in range(300):  # 6 s at full speed straight ahead
            car.send_command(SpeedSteering(3.0, 0.0))
            state = car.get_state()
            farthest = max(farthest, float(np.max(np.abs(state.pos))))
        assert abs(state.body_vel[0]) < 0.05
    assert 3.0 < farthest < lim.geofence_high[0]
    assert layer.counts["velocity"] > 0 and layer.counts["geofence"] == 0


@pytest.mark.parametrize(
    ("robot", "task"),
    [("panda", "panda_pick_cube"), ("crazyflie", "quadrotor_hover"), ("racecar", "car_checkpoints")],
)
def test_scripted_experts_still_succeed_through_the_layer(robot: str, task: str) -> None:
    """The limits are for a real robot doing the task, not in its way."""
    task_cfg = make_task_cfg(task)
    layer = SafetyLayer(SafetyCfg.load(robot), task_cfg)
    assert task_cfg.expert is not None
    expert = task_cfg.expert(task_cfg)
    successes = 0
    with make_sim_robot(task, safety=layer) as robot_:
        for episode in range(3):
            robot_.reset(seed=episode)
            layer.reset()
            success = False
            for _ in range(task_cfg.episode_length):
                obs = robot_.observation()
                robot_.send_command(robot_.from_task_action(expert({k: v[None] for k, v in obs.items()})[0]))
                success |= robot_.last_step.success
                if robot_.last_step.terminated or robot_.last_step.truncated:
                    break
            successes += success
    assert successes == 3
    assert layer.counts["estop"] == layer.counts["geofence"] == layer.counts["watchdog"] == 0
