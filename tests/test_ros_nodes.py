"""ROS 2 deployment: message encodings, the remote observation, and the two nodes over real rclpy.

The nodes run as child processes on a domain ID drawn for this test session, discovery limited to
this machine (Fast DDS over loopback); the test watches them through a node of its own.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

pytest.importorskip("rclpy", reason="needs rclpy: install robolearn[ros] or source a ROS 2 installation")

from ros_helpers import ArmCommandLog

from robolearn.envs.task_env import TaskEnv
from robolearn.hardware.robots import DroneState
from robolearn.hardware.ros._rclpy import RosParameterError, command_qos, latched_qos, msg, sensor_qos
from robolearn.hardware.ros.harness import (
    local_node,
    node_env,
    private_domain,
    start_node,
    stop_node,
    wait_for_matches,
    wait_until,
)
from robolearn.hardware.ros.messages import (
    COMMAND_TYPES,
    MessageError,
    TaskStateLayout,
    TwistRates,
    applied_action_layout,
    make_codec,
    stamp_seconds,
    within_command,
)
from robolearn.hardware.ros.sim_robot_node import RobotReport, measurement_noise
from robolearn.hardware.ros.state_view import RemoteStateView, tracked_frames, tracked_joints
from robolearn.hardware.safety import SafetyLayer
from robolearn.hardware.safety_config import SafetyCfg
from robolearn.tasks import make_task_cfg

# rosbags' message parser imports lark, which imports modules Python 3.11 deprecates.
pytestmark = [pytest.mark.ros, pytest.mark.filterwarnings("ignore::DeprecationWarning:lark")]

DEPLOYED_TASKS = (
    "panda_reach",
    "panda_pick_cube",
    "quadrotor_hover",
    "quadrotor_waypoints",
    "car_checkpoints",
)


@pytest.fixture(scope="module")
def domain() -> int:
    """A ROS domain of this test session's own, so that runs on one machine never hear each other."""
    return private_domain()


# -- encodings -----------------------------------------------------------------------------------
ENCODINGS = [
    (t, c.name)
    for t in ("panda_pick_cube", "quadrotor_hover", "car_checkpoints")
    for c in COMMAND_TYPES[make_task_cfg(t).embodiment]
]


@pytest.mark.parametrize(("task", "command_type"), ENCODINGS)
def test_commands_decode_to_the_action_they_encode(task: str, command_type: str) -> None:
    cfg = make_task_cfg(task)
    codec = make_codec(cfg, command_type)
    rng = np.random.default_rng(0)
    low, high = np.asarray(cfg.action.low), np.asarray(cfg.action.high)
    if command_type == "cmd_vel_legacy":
        high = high.copy()
        high[0] *= 0.8  # Crazyswarm2 clips the 16-bit thrust at 60,000: 0.84 of the maximum thrust
    for _ in range(20):
        action = rng.uniform(low, high)
        decoded = np.asarray(cfg.action.neutral, dtype=np.float64).copy()
        for role, m in codec.encode(action, time.time()).items():
            assert isinstance(m, codec.roles()[role])
            codec.decode(role, m, decoded)
        # cmd_vel_legacy rounds the thrust to a 16-bit command: 2 T / 65535 at most, 2e-5 N.
        np.testing.assert_allclose(
            decoded, action, rtol=0, atol=2e-5 if command_type == "cmd_vel_legacy" else 1e-12
        )


def test_cmd_vel_legacy_follows_crazyswarm2_and_the_firmware_rate_mode() -> None:
    cfg = make_task_cfg("quadrotor_hover")
    codec = make_codec(cfg, "cmd_vel_legacy")
    thrust_max = cfg.action.high[0]
    m = codec.encode(np.array([thrust_max / 4, 1.0, -0.5, 0.25]), 0.0)["command"]
    assert m.linear.z == round(65535 * math.sqrt(0.25)) == 32768  # thrust command: sqrt of the fraction
    assert m.linear.y == pytest.approx(math.degrees(1.0))  # roll rate, deg/s
    assert m.linear.x == pytest.approx(
        math.degrees(-0.5)
    )  # pitch rate: Crazyswarm2 negates it, as the firmware
    assert m.angular.z == pytest.approx(-math.degrees(0.25))  # legacy yaw rate input is inverted
    full = codec.encode(np.array([thrust_max, 0.0, 0.0, 0.0]), 0.0)["command"]
    assert full.linear.z == 60000  # Crazyswarm2's limit


def test_the_safety_layer_clips_and_counts_the_thrust_cmd_vel_legacy_cannot_carry() -> None:
    # crazyflie.yaml lets 0.59 N through; Crazyswarm2's clip at 60,000 carries 0.50 N at most. The
    # safety layer of a cmd_vel_legacy drone clips there, and counts it, instead of the message.
    cfg = make_task_cfg("quadrotor_hover")
    legacy, rates = make_codec(cfg, "cmd_vel_legacy"), make_codec(cfg, "twist_rates")
    safety = SafetyCfg.load("crazyflie")
    narrowed = within_command(safety, legacy)
    top = narrowed.action["thrust"].high
    arrives = np.zeros(4)
    legacy.decode(
        "command", legacy.encode(np.array([safety.action["thrust"].high, 0, 0, 0]), 0.0)["command"], arrives
    )
    assert top == pytest.approx(arrives[0], abs=2e-5) and top < safety.action["thrust"].high - 0.05
    assert narrowed.action["roll_rate"] == safety.action["roll_rate"]
    assert within_command(safety, rates) == safety  # twist_rates carries the task's whole range
    layer = SafetyLayer(narrowed, cfg)
    quat = np.array([1.0, 0.0, 0.0, 0.0])
    state = DroneState(
        pos=np.array([0.0, 0.0, 1.0]), quat=quat, linvel=np.zeros(3), body_rates=np.zeros(3), stamp=0.0
    )
    sent = []
    for k in range(40):  # a thrust that climbs past what the message carries, within the rate limit
        now = 0.02 * k
        layer.observed(now)
        sent.append(layer.filter(np.array([0.3 + 0.01 * k, 0.0, 0.0, 0.0]), state, now)[0])
    assert max(sent) == pytest.approx(top) and layer.counts["clip"] == sum(
        0.3 + 0.01 * k > top for k in range(40)
    )


def test_command_types_outside_an_embodiment_are_refused() -> None:
    with pytest.raises(RosParameterError, match="joint_trajectory needs a joint-space policy"):
        make_codec(make_task_cfg("panda_reach"), "joint_trajectory")
    with pytest.raises(RosParameterError, match="choose one of cmd_vel_legacy, twist_rates"):
        make_codec(make_task_cfg("quadrotor_hover"), "twist_stamped")
    with pytest.raises(RosParameterError, match="carries actions"):
        TwistRates(make_task_cfg("car_checkpoints"))
    with pytest.raises(RosParameterError, match="ROS 2 deployment supports"):
        make_codec(make_task_cfg("ant"))


def test_a_malformed_message_is_refused_by_name() -> None:
    reach, car = make_task_cfg("panda_reach"), make_task_cfg("car_checkpoints")
    view = RemoteStateView(reach, tracked_frames(reach), tracked_joints(reach))
    other = TaskStateLayout(car).to_msg({k: np.zeros(s) for k, s in car.state.items()}, 0, 1.0)
    with pytest.raises(MessageError, match="task_state has segments"):
        view.read("task_state", other)
    codec = make_codec(reach, "forward_command")
    bad = codec.encode(np.array([0.0, 0.0, np.nan, 0.04]), 0.0)["command"]
    with pytest.raises(MessageError, match="non-finite"):
        codec.decode("command", bad, np.zeros(4))


def test_sensor_noise_goes_to_the_measured_quantities_at_the_tasks_levels() -> None:
    assert measurement_noise(make_task_cfg("panda_reach")) == {
        ("frame", "ee", "pos"): 0.001,
        ("frame", "ee", "linvel"): 0.005,
    }
    drone = measurement_noise(make_task_cfg("quadrotor_hover"))
    assert drone[("frame", "crazyflie", "quat")] == 0.01  # the attitude term's level, in radians
    car = measurement_noise(make_task_cfg("car_checkpoints"))
    assert ("frame", "racecar", "quat") not in car  # no term in units of an angle reads the heading
    assert car[("joint", "left_steering_hinge_joint", "pos")] == 0.01


# -- the remote observation ----------------------------------------------------------------------
@pytest.mark.parametrize("task", DEPLOYED_TASKS)
def test_the_policy_side_rebuilds_the_simulators_observation_from_messages(task: str) -> None:
    cfg = make_task_cfg(task)
    env = TaskEnv(cfg, "mujoco", 1, seed=3)
    obs, _ = env.reset(seed=3)
    report = RobotReport(cfg)
    view = RemoteStateView(cfg, tracked_frames(cfg), tracked_joints(cfg))
    assert cfg.expert is not None
    expert = cfg.expert(cfg)
    for step in range(12):
        for source, m in report.messages(env, 100.0 + step).items():
            assert view.read(source, m) == 100.0 + step
        remote = view.observe()
        for key, value in obs.items():
            np.testing.assert_allclose(remote[key], value[0], atol=2e-6, err_msg=f"{key} at step {step}")
        action = expert(obs)
        obs, *_ = env.step(action)
        view.record_action(env.action[0])
    state = view.robot_state(0.0)
    assert state.stamp == 0.0
    env.close()


@pytest.mark.parametrize("task", DEPLOYED_TASKS)
def test_serialized_messages_read_as_the_messages_do(task: str) -> None:
    """policy_node reads its subscriptions' serialized bytes (raw=True) field by field: into the
    same view values and stamps as the Python messages rclpy would build; cut or foreign bytes are
    refused as messages that do not fit, never an exception of another kind."""
    from rclpy.serialization import serialize_message

    cfg = make_task_cfg(task)
    env = TaskEnv(cfg, "mujoco", 1, seed=5)
    env.reset(seed=5)
    rng = np.random.default_rng(0)
    objects, raw = (RemoteStateView(cfg, tracked_frames(cfg), tracked_joints(cfg)) for _ in range(2))
    for step in range(5):
        env.step(rng.uniform(cfg.action.low, cfg.action.high, (1, len(cfg.action.low))))
        for source, m in RobotReport(cfg).messages(env, 100.25 + step).items():
            buf = serialize_message(m)
            assert raw.read_cdr(source, buf) == objects.read(source, m) == pytest.approx(100.25 + step)
            for cut in (0, 3, 4, 9, len(buf) // 2, len(buf) - 8):  # (the last 4 may be padding)
                with pytest.raises(MessageError):
                    raw.read_cdr(source, buf[:cut])
        for name in objects.sim.pos:
            for field in ("pos", "quat", "linvel", "angvel"):
                np.testing.assert_array_equal(
                    getattr(raw.sim, field)[name], getattr(objects.sim, field)[name]
                )
        np.testing.assert_array_equal(raw.sim.jpos, objects.sim.jpos)
        np.testing.assert_array_equal(raw.sim.jvel, objects.sim.jvel)
        for key in cfg.state:
            np.testing.assert_array_equal(raw.state[key], objects.state[key])
        assert raw.step_count[0] == objects.step_count[0] == step + 1
    env.close()
    other = make_task_cfg("car_checkpoints" if task != "car_checkpoints" else "panda_reach")
    foreign = TaskStateLayout(other).to_msg({k: np.zeros(s) for k, s in other.state.items()}, 0, 1.0)
    with pytest.raises(MessageError, match="task_state has segments"):
        raw.read_cdr("task_state", serialize_message(foreign))


# -- the nodes ---------------------------------------------------------------------------------
def _run_pair(
    tmp_path: Path, domain: int, task: str, sim: dict[str, Any], policy: dict[str, Any], timeout: float
) -> dict[str, Any]:
    """Run sim_robot_node until it has finished its episodes, with policy_node; the sim's summary."""
    summary = tmp_path / f"{task}.json"
    with open(tmp_path / f"{task}-policy.log", "w") as plog, open(tmp_path / f"{task}-sim.log", "w") as slog:
        pol = start_node("policy_node", {"policy": f"scripted:{task}", **policy}, domain, log=plog)
        robot = start_node(
            "sim_robot_node", {"task": task, "summary_path": str(summary), **sim}, domain, log=slog
        )
        try:
            code = robot.wait(timeout)
        finally:
            stop_node(robot)
            assert stop_node(pol) == 0, (tmp_path / f"{task}-policy.log").read_text()
    assert code == 0, (tmp_path / f"{task}-sim.log").read_text()
    return json.loads(summary.read_text())


def test_a_scripted_arm_succeeds_over_ros_recorded_as_a_bag_and_a_dataset(
    tmp_path: Path, domain: int
) -> None:
    """The sim robot records a bag; a demonstration recorder (the scripted policy node standing in
    for a teleoperation node) writes three of the episodes as a dataset."""
    from rosbags.rosbag2 import Reader
    from rosbags.typesys import Stores, get_typestore

    from robolearn.data.format import INTERVENTION, REWARD, SUCCESS
    from robolearn.data.reader import read_dataset
    from robolearn.data.validate import validate_dataset

    bag, demos = tmp_path / "bag", tmp_path / "demos"
    with open(tmp_path / "recorder.log", "w") as rlog:
        recorder = start_node(
            "demo_recorder", {"task": "panda_reach", "out": str(demos), "episodes": 3}, domain, log=rlog
        )
        try:
            summary = _run_pair(
                tmp_path, domain, "panda_reach", {"episodes": 10, "bag": str(bag), "seed": 1}, {}, timeout=90
            )
            assert recorder.wait(30) == 0, (tmp_path / "recorder.log").read_text()
        finally:
            stop_node(recorder)
    assert summary["episodes"] == 10
    assert summary["success_rate"] >= 0.9, summary
    assert summary["counts"]["rejected_commands"] == 0

    info = yaml.safe_load((bag / "metadata.yaml").read_text())["rosbag2_bagfile_information"]
    assert info["storage_identifier"] == "mcap" and (bag / info["relative_file_paths"][0]).is_file()
    # Each topic as offered, so that ros2 bag play replays sensor data best effort (issue 12).
    offered = {
        t["topic_metadata"]["name"]: t["topic_metadata"]["offered_qos_profiles"]
        for t in info["topics_with_message_count"]
    }
    for topic in ("/frames/ee", "/joint_states", "/task_state"):
        assert [(q["reliability"], q["history"], q["depth"]) for q in offered[topic]] == [
            ("best_effort", "keep_last", 5)
        ]
    assert [(q["reliability"], q["depth"]) for q in offered["/command"]] == [("reliable", 1)]
    assert offered["/episode"][0]["reliability"] == "reliable"
    store = get_typestore(Stores.ROS2_KILTED)
    with Reader(bag) as reader:
        counts = {c.topic: c.msgcount for c in reader.connections}
        # (/ready: the reset handshake of robolearn.envs.ros_env, recorded where the robot offers it.)
        assert set(counts) - {"/ready"} == {
            "/frames/ee",
            "/joint_states",
            "/task_state",
            "/command",
            "/episode",
            "/applied_action",
        }
        assert counts["/episode"] == 10
        assert 0 < counts["/applied_action"] <= summary["counts"]["steps"]  # one per step, if published
        assert counts["/command"] == summary["counts"]["commands"]
        assert counts["/frames/ee"] >= summary["counts"]["steps"]
        seen = set()
        for conn, _, raw in reader.messages():
            if conn.topic in seen:
                continue
            seen.add(conn.topic)
            m = store.deserialize_cdr(raw, conn.msgtype)
            if conn.topic == "/frames/ee":
                assert m.child_frame_id == "ee" and m.header.frame_id == "world"
            elif conn.topic == "/command":
                assert len(m.data) == 4
            elif conn.topic == "/episode":
                assert set(json.loads(m.data)) == {"episode", "success", "return", "length"}
        assert seen == {t for t, n in counts.items() if n > 0}  # every topic with a message read

    # The recorder starts with an episode: should it miss the first, it records the three after. Its
    # last frame's reward makes each episode add up to the robot's return, which identifies it.
    assert validate_dataset(demos) == []
    ds = read_dataset(demos)
    assert len(ds.episodes) == 3
    for i, info in enumerate(ds.episodes):
        frames = ds.episode_frames(i)
        total = float(frames[REWARD].sum())  # float32 rewards: equal to the return within 1e-3
        robot_side = min(summary["per_episode"], key=lambda e: abs(e["return"] - total))
        assert robot_side["return"] == pytest.approx(total, abs=1e-3)
        # A frame per step, but for a sample the recorder could not take whole (two steps in one frame).
        assert 0.9 * robot_side["length"] <= info.length <= robot_side["length"]
        assert frames[SUCCESS][-1] and robot_side["success"]
        assert not frames[SUCCESS][:-1].any()
        assert frames[INTERVENTION].all()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("task", "command_type"), [("quadrotor_hover", "cmd_vel_legacy"), ("car_checkpoints", "")]
)
def test_scripted_drone_and_car_succeed_over_ros(
    tmp_path: Path, domain: int, task: str, command_type: str
) -> None:
    # In real time: stepping faster than that would make the safety layer's rate limits, which count
    # wall-clock time between commands, bind harder than on a robot.
    summary = _run_pair(
        tmp_path,
        domain,
        task,
        {"episodes": 3, "command_type": command_type},
        {"command_type": command_type},
        120,
    )
    assert summary["episodes"] == 3
    assert summary["success_rate"] >= 0.9, summary


def test_estop_and_stale_observations_make_the_arm_hold(tmp_path: Path, domain: int) -> None:
    """E-stop latches a hold until reset; killing the robot's publishers makes the watchdog hold it
    once the newest observation is older than its timeout (0.1 s in the Panda's safety config).

    No fixed sleeps and no arrival times: the test waits for its endpoints to match and for events,
    and judges each command by its stamp, the time policy_node decided it (``servo_twist`` carries
    one), so a loaded machine delays the test but cannot fail it (issue 12).
    """
    timeout = 0.1
    with (
        open(tmp_path / "policy.log", "w") as plog,
        open(tmp_path / "sim.log", "w") as slog,
        local_node("observer", domain) as node,
    ):
        log = ArmCommandLog("panda_reach")
        ages: list[float] = []
        endpoints = [
            node.create_subscription(
                msg("geometry_msgs", "TwistStamped"), "command", log.on_command, command_qos()
            ),
            node.create_subscription(msg("std_msgs", "String"), "safety", log.on_report, 10),
            node.create_subscription(
                msg("nav_msgs", "Odometry"),
                "frames/ee",
                lambda m: ages.append(time.time() - stamp_seconds(m.header.stamp)),
                sensor_qos(),
            ),
            estop := node.create_publisher(msg("std_msgs", "Bool"), "estop", latched_qos()),
            reset := node.create_publisher(msg("std_msgs", "Empty"), "estop_reset", command_qos()),
        ]
        servo = {"command_type": "servo_twist"}
        pol = start_node("policy_node", {"policy": "scripted:panda_reach", **servo}, domain, log=plog)
        # A link as in the transfer benchmark: samples 20 ms late, noisy, 5 % of messages lost.
        link = {"obs_latency_ms": 20.0, "obs_noise": 1.0, "drop_rate": 0.05, **servo}
        robot = start_node("sim_robot_node", {"task": "panda_reach", "seed": 2, **link}, domain, log=slog)
        try:
            wait_for_matches(endpoints, timeout=120, processes=[pol, robot])
            wait_until(lambda: len(ages) >= 20, 60, lambda: f"{len(ages)} samples of frames/ee")
            # The robot publishes each sample no earlier than 20 ms after its stamp; a loaded machine
            # delays some further, but one in 20 arriving within 40 ms tells 20 ms from twice that.
            assert 0.02 - 1e-6 <= min(ages) < 0.04, "samples must arrive 20 ms after their stamps"
            wait_until(lambda: log.moving_after(0.0), 60, "no command moved the arm")

            estop.publish(msg("std_msgs", "Bool")(data=True))
            wait_until(lambda: log.report_where(lambda r: r["counts"]["estop"] > 0), 30, "no e-stop")
            latched = log.report_where(lambda r: r["counts"]["estop"] > 0)
            assert latched is not None and latched["stopped"]
            wait_until(lambda: len(log.stamped_after(latched["stamp"])) >= 10, 30, "no commands")
            t_reset = time.time()  # commands decided before it cannot have seen the reset
            with log.lock:
                held = [d for stamp, d in log.commands if latched["stamp"] < stamp < t_reset]
            assert len(held) >= 10 and all(np.all(d == 0.0) for d in held), "the e-stop did not hold"

            reset.publish(msg("std_msgs", "Empty")())
            wait_until(lambda: log.moving_after(t_reset), 30, "no motion after the reset")

            robot.kill()  # the robot's publishers die with it
            robot.wait()
            t_kill = time.time()  # no sample can be stamped later
            # Decided more than the timeout after the newest possible sample: a hold, every one.
            wait_until(lambda: len(log.stamped_after(t_kill + timeout)) >= 10, 30, "no commands")
            late = log.stamped_after(t_kill + timeout)
            assert all(np.all(d == 0.0) for d in late), "stale observations did not stop the arm"

            def watchdog_report() -> dict[str, Any] | None:
                return log.report_where(lambda r: r["stamp"] > t_kill + timeout and r["counts"]["watchdog"])

            wait_until(watchdog_report, 30, "no safety report of the watchdog after the robot died")
            last = watchdog_report()
            assert last is not None and last["stopped"] and last["counts"]["estop"] > 0
        finally:
            stop_node(robot)
            assert stop_node(pol) == 0, (tmp_path / "policy.log").read_text()


def test_a_joint_state_that_lacks_a_needed_joint_is_refused_by_name() -> None:
    from robolearn.hardware.ros.messages import joint_state_msg

    cfg = make_task_cfg("panda_pick_cube")
    view = RemoteStateView(cfg, tracked_frames(cfg), tracked_joints(cfg))
    names = tracked_joints(cfg)
    renamed = [n.replace("panda_", "fr3_") if "finger" not in n else n for n in names]
    m = joint_state_msg(renamed, np.ones(len(names)), np.zeros(len(names)), 1.0)
    with pytest.raises(MessageError, match=r"lacks joints \['panda_joint1', .*'panda_joint7'\]"):
        view.read("joint_states", m)
    assert not view.sim.jpos.any(), "no joint may take a value from a refused message"
    # More joints than the task needs, in another order: fine.
    m = joint_state_msg(["extra", *names[::-1]], np.arange(len(names) + 1.0), np.zeros(len(names) + 1), 2.0)
    assert view.read("joint_states", m) == 2.0
    np.testing.assert_array_equal(view.sim.jpos, np.arange(len(names), 0.0, -1.0))


def test_policy_node_needs_only_what_the_task_reads_and_says_once_what_is_wrong(
    domain: int, caplog: pytest.LogCaptureFixture
) -> None:
    """panda_reach reads no joint: a robot without joint_states gets commands. A task_state of
    another layout is refused with the labels expected, logged once, not once per message; a topic
    that sends nothing is named after a second."""
    from robolearn.hardware.ros.messages import odometry_msg
    from robolearn.hardware.ros.policy_node import PolicyNode, PolicyNodeParams

    reach, car = make_task_cfg("panda_reach"), make_task_cfg("car_checkpoints")
    caplog.set_level("WARNING", logger="robolearn.hardware.ros.policy_node")
    commands: list[Any] = []
    with local_node("policy", domain) as pnode, local_node("robot", domain) as rnode:
        policy = PolicyNode(pnode, PolicyNodeParams(policy="scripted:panda_reach"))
        try:
            ee = rnode.create_publisher(msg("nav_msgs", "Odometry"), "frames/ee", sensor_qos())
            task_state = rnode.create_publisher(
                msg("std_msgs", "Float64MultiArray"), "task_state", sensor_qos()
            )
            sub = rnode.create_subscription(
                msg("std_msgs", "Float64MultiArray"), "command", commands.append, command_qos()
            )
            needed = [s for s in policy.subs if s.topic_name in ("/frames/ee", "/task_state")]
            wait_for_matches([ee, task_state, sub, *needed])

            def publish(layout: TaskStateLayout, state: dict[str, np.ndarray]) -> None:
                t = time.time()
                ee.publish(
                    odometry_msg(
                        "ee", np.array([0.5, 0.0, 0.3]), np.array([0, 1.0, 0, 0]), *[np.zeros(3)] * 2, t
                    )
                )
                task_state.publish(layout.to_msg(state, 3, t))

            wrong = {k: np.zeros(shape) for k, shape in car.state.items()}
            refused = lambda: policy.counts["rejected_messages"]  # noqa: E731
            start = time.monotonic()

            def refusing() -> bool:
                publish(TaskStateLayout(car), wrong)
                time.sleep(0.01)
                assert pnode.callbacks_alive(), "policy_node's callbacks stopped"
                return time.monotonic() > start + 1.5 and refused() >= 20

            wait_until(refusing, 60, lambda: f"{refused()} task_state messages refused")
            messages = [r.getMessage() for r in caplog.records]
            bad = [m for m in messages if "ignored a message on /task_state" in m]
            assert len(bad) == 1, messages
            assert (
                "this task's are [('stamp', 1), ('step_count', 1), ('goal', 3), ('ee_target', 3)]" in bad[0]
            )
            missing = [m for m in messages if "nothing received yet on" in m]
            assert len(missing) == 1 and "/task_state (std_msgs/Float64MultiArray)" in missing[0], messages
            assert "yet on /task_state (std_msgs/Float64MultiArray), sensor" in missing[0]  # only that one
            assert "each of ['/frames/ee', '/task_state'] has" in missing[0]  # no joint_states
            assert not commands

            right = {"goal": np.array([0.5, 0.1, 0.3]), "ee_target": np.array([0.5, 0.0, 0.3])}
            wait_until(
                lambda: publish(TaskStateLayout(reach), right) or time.sleep(0.02) or len(commands) >= 3,
                30,
                "no command without joint_states",
            )
            assert np.abs(np.frombuffer(commands[-1].data)[:3]).max() > 0, "the arm does not move to its goal"
        finally:
            policy.close()


@pytest.mark.parametrize("release", [True, False])
def test_policy_node_releases_a_geofence_stop_at_a_new_episode_only_when_told(
    domain: int, release: bool
) -> None:
    """A drone seen above its geofence latches the stop; when the robot starts a new episode inside
    it, ``release_at_reset`` (the benches' evaluations, a stand-in that resets itself) releases the
    stop, and without it the stop stays latched until ``estop_reset`` (a person's release)."""
    from robolearn.hardware.ros.messages import odometry_msg
    from robolearn.hardware.ros.policy_node import PolicyNode, PolicyNodeParams

    hover = make_task_cfg("quadrotor_hover")
    layout = TaskStateLayout(hover)
    target = {"target": np.array([0.0, 0.0, 1.0])}
    with local_node("policy", domain) as pnode, local_node("robot", domain) as rnode:
        params = PolicyNodeParams(policy="scripted:quadrotor_hover", release_at_reset=release)
        policy = PolicyNode(pnode, params)
        try:
            frame = rnode.create_publisher(msg("nav_msgs", "Odometry"), "frames/crazyflie", sensor_qos())
            task_state = rnode.create_publisher(
                msg("std_msgs", "Float64MultiArray"), "task_state", sensor_qos()
            )
            needed = [s for s in policy.subs if s.topic_name in ("/frames/crazyflie", "/task_state")]
            wait_for_matches([frame, task_state, *needed])

            def publish(z: float, step: int) -> None:
                t = time.time()
                still = np.zeros(3)
                frame.publish(
                    odometry_msg(
                        "crazyflie", np.array([0.0, 0.0, z]), np.array([1.0, 0, 0, 0]), still, still, t
                    )
                )
                task_state.publish(layout.to_msg(target, step, t))
                time.sleep(0.02)

            wait_until(
                lambda: publish(3.0, 5) or policy.safety.protective_stop == "geofence",
                30,
                "no geofence stop above the fence",
            )
            for step in range(50):  # a new episode inside the fence, a second of it
                publish(1.0, step)
            assert policy.safety.protective_stop == (None if release else "geofence")
        finally:
            policy.close()


def test_a_bad_parameter_ends_in_one_line(domain: int) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "robolearn.hardware.ros.sim_robot_node",
            "--ros-args",
            "-p",
            "backend:=bullet",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=node_env(domain),
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1] == (
        "sim_robot_node: error: backend 'bullet' is not one of mujoco, pybullet"
    )


def test_policy_node_parameters_are_checked() -> None:
    from robolearn.hardware.ros._rclpy import RosParameterError
    from robolearn.hardware.ros.policy_node import PolicyNodeParams

    with pytest.raises(RosParameterError, match="runtime 'tensorrt' is not one of auto, torchscript, onnx"):
        PolicyNodeParams(policy="scripted:panda_reach", runtime="tensorrt").check()
    with pytest.raises(RosParameterError, match="trigger 'tick' is not one of timer, observation"):
        PolicyNodeParams(policy="scripted:panda_reach", trigger="tick").check()


def _gone(pid: int) -> bool:
    """Whether process ``pid`` has exited (a zombie waiting for its new parent counts as exited)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return True
    return state in ("Z", "X")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl(PR_SET_PDEATHSIG) is Linux's")
def test_a_node_stops_when_the_process_that_started_it_is_killed(domain: int) -> None:
    """A benchmark or trainer killed outright (SIGKILL, an OOM kill) leaves no robot node stepping on."""
    script = (
        "import sys, time\n"
        "from robolearn.hardware.ros.harness import start_node\n"
        f"node = start_node('sim_robot_node', {{'task': 'panda_reach'}}, {domain})\n"
        "print(node.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        time.sleep(3.0)  # most likely past the node's start-up (either way it must stop)
        assert not _gone(child), "the node did not start"
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 60.0
    while not _gone(child) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _gone(child), f"sim_robot_node {child} runs on after its parent was killed"


def test_the_robot_holds_when_its_commands_stop(tmp_path: Path, domain: int) -> None:
    """A robot whose controller falls silent holds (the task's neutral action, the gripper where it
    was) once ``command_timeout`` has passed, instead of going on with the last displacement.

    Judged on the robot's own ``applied_action`` reports, by the stamps of the samples each step
    started from: a loaded machine delays the test but cannot fail it."""
    cfg = make_task_cfg("panda_pick_cube")
    timeout, period = 0.1, cfg.control_dt  # the robot holds 0.1 s after the last command
    codec, layout = make_codec(cfg, ""), applied_action_layout(cfg)
    applied: list[tuple[float, np.ndarray]] = []

    def on_applied(m: Any) -> None:
        state = {"action": np.zeros((1, len(cfg.action.names)))}
        stamp = layout.read(m, state, np.zeros(1, np.int64))
        applied.append((stamp, state["action"][0].copy()))

    params = {"task": cfg.name, "command_timeout": timeout, "summary_path": str(tmp_path / "robot.json")}
    with open(tmp_path / "sim.log", "w") as slog, local_node("controller", domain) as node:
        pubs = {role: node.create_publisher(cls, role, command_qos()) for role, cls in codec.roles().items()}
        sub = node.create_subscription(msg("std_msgs", "Float64MultiArray"), "applied_action", on_applied, 10)
        robot = start_node("sim_robot_node", params, domain, log=slog)
        try:
            wait_for_matches([*pubs.values(), sub], timeout=120, processes=[robot])
            move = np.array([0.01, 0.0, 0.0, 0.02])  # a displacement each step, the gripper nearly closed
            # Commands every period, at least five and until the robot reports having applied one: a
            # robot still starting (its first steps, on a loaded machine) has not yet read any.
            sent, deadline = 0, time.monotonic() + 60
            while sent < 5 or not any(np.allclose(a, move) for _, a in list(applied)):
                assert time.monotonic() < deadline, f"the robot applied none of {sent} commands in 60 s"
                for role, m in codec.encode(move, time.time()).items():
                    pubs[role].publish(m)
                sent += 1
                time.sleep(period)
            silent = time.time()  # no command is sent after this
            # A second on: no command sent before ``silent`` can still be on its way, however loaded.
            wait_until(lambda: sum(t > silent + 1.0 for t, _ in applied) >= 20, 60, "no steps")
        finally:
            stop_node(robot)
    hold = [0.0, 0.0, 0.0, move[3]]
    # While commands came: the command (or, on a machine too loaded to send one per 0.1 s, the hold).
    before = [a for t, a in applied if t < silent]
    assert any(np.allclose(a, move) for a in before), before
    assert all(np.allclose(a, move) or np.allclose(a, hold) for a in before), before
    held = [a for t, a in applied if t > silent + 1.0]
    assert all(np.allclose(a, hold) for a in held), held
    summary = json.loads((tmp_path / "robot.json").read_text())
    assert summary["counts"]["command_timeouts"] >= len(held), summary["counts"]
