"""Robot interfaces and the simulated robots: features, commands, kinematics, controllers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from robolearn.hardware.robots import (
    Arming,
    ArmState,
    CarState,
    DroneState,
    EeDelta,
    JointPositions,
    JointVelocities,
    Land,
    PositionSetpoint,
    RateSetpoint,
    RobotError,
    SpeedSteering,
    Takeoff,
    VelocitySetpoint,
)
from robolearn.hardware.sim_robot import SimArm, SimCar, SimDrone, make_sim_robot
from robolearn.sim.transforms import yaw_of
from robolearn.tasks.robots.panda import ARM_JOINTS
from robolearn.tasks.robots.panda import tool_position as panda_tool_position


def test_features_are_known_before_connecting() -> None:
    arm = SimArm("panda_pick_cube")
    assert not arm.is_connected
    assert arm.state_features == {
        "joint_pos": (7,),
        "joint_vel": (7,),
        "ee_pos": (3,),
        "ee_quat": (4,),
        "ee_linvel": (3,),
        "gripper_opening": (),
        "stamp": (),
    }
    assert arm.action_features == {"ee_dx": "m", "ee_dy": "m", "ee_dz": "m", "gripper_opening": "m"}
    assert SimDrone("quadrotor_hover").action_features["thrust"] == "N"
    assert SimCar("car_checkpoints").state_features["body_vel"] == (2,)
    with pytest.raises(RobotError, match=r"sim_panda_pick_cube is not connected; call connect\(\)"):
        arm.get_state()


def test_misuse_is_refused_in_one_line() -> None:
    with pytest.raises(RobotError, match="SimArm drives arm tasks; task car_checkpoints is for a car"):
        SimArm("car_checkpoints")
    with pytest.raises(RobotError, match="does not run on backend 'gazebo'"):
        SimCar("car_checkpoints", "gazebo")
    with pytest.raises(RobotError, match="task ant is for a legged; simulated robots: arm, drone, car"):
        make_sim_robot("ant")
    with SimCar("car_checkpoints") as car:
        with pytest.raises(RobotError, match=r"SimCar takes SpeedSteering; got EeDelta"):
            car.send_command(EeDelta(0.0, 0.0, 0.0, 0.0))
        with pytest.raises(RobotError, match="already connected"):
            car.connect()
    assert not car.is_connected


def test_native_commands_round_trip_the_task_action() -> None:
    for cmd in (
        EeDelta(0.01, -0.02, 0.003, 0.04),
        RateSetpoint(0.3, 1.0, -2.0, 0.5),
        SpeedSteering(1.5, -0.2),
    ):
        action = cmd.to_action()
        assert type(cmd).from_action(action) == cmd
        assert action.dtype == np.float64


def test_panda_kinematics_match_the_simulated_tool() -> None:
    rng = np.random.default_rng(0)
    with SimArm("panda_reach") as arm:
        env = arm.worlds
        for _ in range(5):
            q = arm.get_state().joint_pos + rng.uniform(-0.6, 0.6, 7)
            env.sim.set_joint_state(np.array([0]), ARM_JOINTS, q[None])
            env.sim.forward(np.array([0]))
            assert panda_tool_position(q) == pytest.approx(arm.get_state().ee_pos, abs=1e-9)


def test_sim_arm_follows_tool_and_joint_commands() -> None:
    with SimArm("panda_reach", seed=1) as arm:
        start = arm.get_state()
        assert isinstance(start, ArmState) and start.stamp == 0.0
        for _ in range(20):  # 0.1 m along +x over 0.4 s, then settle
            sent = arm.send_command(EeDelta(0.005, 0.0, 0.0, 0.02))
        assert sent == EeDelta(0.005, 0.0, 0.0, 0.02)
        for _ in range(20):
            arm.send_command(EeDelta(0.0, 0.0, 0.0, 0.02))
        moved = arm.get_state()
        assert moved.ee_pos - start.ee_pos == pytest.approx([0.1, 0.0, 0.0], abs=0.005)
        assert moved.gripper_opening == pytest.approx(0.02, abs=0.002)
        assert moved.stamp == pytest.approx(40 * 0.02)
        # Out of bounds: the task clips, and the command actually sent says so.
        assert arm.send_command(EeDelta(1.0, 0.0, 0.0, 0.5)) == EeDelta(0.02, 0.0, 0.0, 0.08)

        # A joint target: the tool goes where those joints would put it.
        goal = moved.joint_pos + np.array([0.3, 0.2, 0.0, 0.2, 0.0, 0.0, 0.0])
        for _ in range(60):
            arm.send_command(JointPositions(tuple(goal), 0.08))
        assert arm.get_state().ee_pos == pytest.approx(panda_tool_position(goal), abs=0.003)

        # Joint velocities: the tool moves the way the Jacobian says.
        state = arm.get_state()
        qdot = np.array([0.5, 0, 0, 0, 0, 0, 0])
        expected = panda_tool_position(state.joint_pos + qdot * 0.2) - state.ee_pos
        for _ in range(10):
            arm.send_command(JointVelocities(tuple(qdot), 0.08))
        for _ in range(10):
            arm.send_command(EeDelta(0.0, 0.0, 0.0, 0.08))
        assert arm.get_state().ee_pos - state.ee_pos == pytest.approx(expected, abs=0.004)


def test_sim_drone_takes_off_flies_and_lands() -> None:
    with SimDrone("quadrotor_hover", start="ground", seed=2) as drone:
        state = drone.get_state()
        assert isinstance(state, DroneState) and state.pos[2] < 0.02 and not drone.armed
        with pytest.raises(RobotError, match="disarmed and takes no Takeoff; send Arming"):
            drone.send_command(Takeoff(0.5))
        assert drone.send_command(Arming(True)) == RateSetpoint(0.0, 0.0, 0.0, 0.0)
        for _ in range(125):  # 2.5 s: 1.67 s of climb at 0.3 m/s, then settle
            drone.send_command(Takeoff(height=0.5, speed=0.3))
        state = drone.get_state()
        assert state.pos[2] == pytest.approx(0.5, abs=0.03)
        assert np.linalg.norm(state.linvel) < 0.05

        for _ in range(150):
            drone.send_command(PositionSetpoint(0.0, 0.3, 0.8, yaw=1.0))
        state = drone.get_state()
        assert state.pos == pytest.approx([0.0, 0.3, 0.8], abs=0.03)
        assert float(yaw_of(state.quat[None])[0]) == pytest.approx(1.0, abs=0.05)

        for _ in range(50):
            sent = drone.send_command(VelocitySetpoint(0.5, 0.0, 0.0))
        assert drone.get_state().linvel == pytest.approx([0.5, 0.0, 0.0], abs=0.05)
        assert isinstance(sent, RateSetpoint) and 0.2 < sent.thrust < 0.35

        steps = 0
        while drone.armed and steps < 400:
            drone.send_command(Land(speed=0.4))
            steps += 1
        assert not drone.armed and 80 < steps < 150  # about 0.8 m at 0.4 m/s
        assert drone.get_state().pos[2] < 0.03


def test_sim_drone_starts_flying_in_task_mode() -> None:
    with SimDrone("quadrotor_hover") as drone:
        assert drone.armed and drone.get_state().pos[2] > 0.2
        assert set(drone.observation()) >= {"to_target", "linvel", "attitude"}


def test_sim_car_drives_and_turns() -> None:
    with SimCar("car_checkpoints", seed=0) as car:
        start = car.get_state()
        assert isinstance(start, CarState)
        for _ in range(75):  # 1.5 s at 1 m/s, wheels straight
            car.send_command(SpeedSteering(1.0, 0.0))
        straight = car.get_state()
        heading = np.array([math.cos(start.yaw), math.sin(start.yaw)])
        travelled = straight.pos - start.pos
        sideways = heading[0] * travelled[1] - heading[1] * travelled[0]
        assert 1.0 < travelled @ heading < 1.5 and abs(sideways) < 0.05
        assert straight.body_vel == pytest.approx([1.0, 0.0], abs=0.05)
        for _ in range(50):  # 1 s steering left
            car.send_command(SpeedSteering(1.0, 0.3))
        turning = car.get_state()
        assert turning.steering_angle == pytest.approx(0.3, abs=0.03)
        # Bicycle model: yaw rate = v tan(steer) / wheelbase = 0.95 rad/s (the tyres slip a little).
        assert 0.7 < turning.yaw_rate < 1.0
        assert math.remainder(turning.yaw - straight.yaw, 2 * math.pi) > 0.6


def test_sim_car_on_pybullet() -> None:
    with SimCar("car_checkpoints", "pybullet", seed=0) as car:
        start = car.get_state()
        for _ in range(50):
            car.send_command(SpeedSteering(1.0, 0.0))
        assert car.get_state().body_vel[0] == pytest.approx(1.0, abs=0.1)
        assert np.linalg.norm(car.get_state().pos - start.pos) > 0.6
        car.reset(seed=1)
        assert car.last_step.reward == 0.0 and car.time == pytest.approx(1.0)
