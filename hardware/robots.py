"""Robots in the task definitions' physical units: states, commands and the robot interface.

As LeRobot's ``Robot``: a robot has ``connect / get_state / send_command / disconnect``, is a
context manager, and knows its state features, action features and command types before it
connects; ``send_command`` returns the command actually sent. States and commands are typed and
in the units of :mod:`robolearn.tasks` (metres, radians, newtons, seconds; quaternions w, x, y, z).

Each embodiment has one *native* command, the tasks' action (:class:`EeDelta`,
:class:`RateSetpoint`, :class:`SpeedSteering`), with ``to_action`` / ``from_action`` to and from
the task's action vector. Other commands (joint targets, velocity and position setpoints,
take-off and landing) are turned into the native one the way the robot's own controller would
(:class:`DroneController` for the drone): that vector is what a safety layer filters and a policy
outputs. The simulated robots behind this interface are in :mod:`robolearn.hardware.sim_robot`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Any, ClassVar, Protocol

import numpy as np

from robolearn.errors import RobolearnError
from robolearn.sim.backend import FloatArray
from robolearn.sim.transforms import quat_to_mat, yaw_of
from robolearn.tasks import terms
from robolearn.tasks.core import TaskCfg
from robolearn.tasks.robots.crazyflie import GRAVITY, CascadedCtbrExpert
from robolearn.tasks.robots.crazyflie import NAME as DRONE_FRAME
from robolearn.tasks.robots.racecar import ROBOT_NAME as CAR_FRAME
from robolearn.tasks.robots.racecar import body_velocity, steering_angle, yaw_rate


class RobotError(RobolearnError):
    """A robot used wrongly (not connected, a command it does not take); the message says what is allowed."""


# -- states ------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class ArmState:
    """An arm's measured state, in the robot base frame (the tasks' world frame)."""

    joint_pos: FloatArray
    """(n,) arm joint positions (rad or m), in the order of the robot's ``arm_joints``."""
    joint_vel: FloatArray
    """(n,) arm joint velocities (rad/s or m/s)."""
    ee_pos: FloatArray
    """(3,) tool centre point position (m)."""
    ee_quat: FloatArray
    """(4,) tool orientation (w, x, y, z), w >= 0."""
    ee_linvel: FloatArray
    """(3,) tool centre point velocity (m/s)."""
    gripper_opening: float
    """Distance between the fingers (m): the sum of the gripper joints' positions; 0 without a gripper."""
    stamp: float
    """Time of the measurement (s)."""

    SHAPES: ClassVar[dict[str, tuple[int, ...]]] = {
        "joint_pos": (-1,),
        "joint_vel": (-1,),
        "ee_pos": (3,),
        "ee_quat": (4,),
        "ee_linvel": (3,),
    }
    """Shapes of the array fields; -1: one entry per arm joint (:func:`state_features` with a task)."""


@dataclass(frozen=True, eq=False)
class DroneState:
    """A quadrotor's estimated state, in the world (motion-capture) frame, z up, the floor at z = 0."""

    pos: FloatArray
    """(3,) centre of mass position (m)."""
    quat: FloatArray
    """(4,) orientation, body to world (w, x, y, z)."""
    linvel: FloatArray
    """(3,) velocity in the world frame (m/s)."""
    body_rates: FloatArray
    """(3,) angular velocity in the body frame, as the gyroscope reads it (rad/s)."""
    stamp: float
    """Time of the estimate (s)."""

    SHAPES: ClassVar[dict[str, tuple[int, ...]]] = {
        "pos": (3,),
        "quat": (4,),
        "linvel": (3,),
        "body_rates": (3,),
    }
    """Shapes of the array fields."""


@dataclass(frozen=True, eq=False)
class CarState:
    """A car's odometry in the plane of the map: rear axle centre, x forward and y left in its frame."""

    pos: FloatArray
    """(2,) rear axle centre position in the map (m)."""
    yaw: float
    """Heading about the map's z axis (rad)."""
    body_vel: FloatArray
    """(2,) forward and leftward velocity in the car's frame (m/s)."""
    yaw_rate: float
    """Turn rate (rad/s, positive to the left)."""
    steering_angle: float
    """Bicycle steering angle the front wheels steer (rad, positive to the left)."""
    stamp: float
    """Time of the measurement (s)."""

    SHAPES: ClassVar[dict[str, tuple[int, ...]]] = {"pos": (2,), "body_vel": (2,)}
    """Shapes of the array fields."""


RobotState = ArmState | DroneState | CarState


def state_features(
    state_type: type[RobotState], task_cfg: TaskCfg | None = None
) -> dict[str, tuple[int, ...]]:
    """Name to shape of every field of a state type, scalars as ``()`` (known without a robot); with
    a task, an arm's joint fields have one entry per joint of its robot's ``arm_joints``."""
    joints = len(task_cfg.scene.robot.arm_joints) if task_cfg is not None else -1
    return {
        f.name: tuple(joints if n == -1 else n for n in state_type.SHAPES.get(f.name, ()))
        for f in fields(state_type)
    }


# -- commands ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class EeDelta:
    """Arm: move the impedance target by (dx, dy, dz) this control step, set the gripper opening (m).

    The arm tasks' action; an arm without a gripper has no ``gripper`` (None).
    """

    dx: float
    """Displacement along x (m)."""
    dy: float
    """Displacement along y (m)."""
    dz: float
    """Displacement along z (m)."""
    gripper: float | None = None
    """Opening between the fingers (m); None for an arm without a gripper."""

    def to_action(self) -> FloatArray:
        grip = () if self.gripper is None else (self.gripper,)
        return np.array([self.dx, self.dy, self.dz, *grip], dtype=np.float64)

    @classmethod
    def from_action(cls, action: FloatArray) -> EeDelta:
        dx, dy, dz, *gripper = (float(v) for v in action)
        return cls(dx, dy, dz, gripper[0] if gripper else None)


@dataclass(frozen=True)
class JointPositions:
    """Arm: servo the joints toward target positions (rad), set the gripper opening (m)."""

    positions: tuple[float, ...]
    """One target per arm joint (rad or m), in the robot's ``arm_joints`` order."""
    gripper: float | None = None
    """Opening between the fingers (m); None for an arm without a gripper."""


@dataclass(frozen=True)
class JointVelocities:
    """Arm: move the joints at these velocities (rad/s) for a control period, set the gripper opening (m)."""

    velocities: tuple[float, ...]
    """One velocity per arm joint (rad/s or m/s), in the robot's ``arm_joints`` order."""
    gripper: float | None = None
    """Opening between the fingers (m); None for an arm without a gripper."""


@dataclass(frozen=True)
class RateSetpoint:
    """Drone: collective thrust (N) and body rates (rad/s), the quadrotor tasks' action (CTBR)."""

    thrust: float
    """Collective thrust along the body z axis (N)."""
    roll_rate: float
    """Rate about body x (rad/s)."""
    pitch_rate: float
    """Rate about body y (rad/s)."""
    yaw_rate: float
    """Rate about body z (rad/s)."""

    def to_action(self) -> FloatArray:
        return np.array([self.thrust, self.roll_rate, self.pitch_rate, self.yaw_rate], dtype=np.float64)

    @classmethod
    def from_action(cls, action: FloatArray) -> RateSetpoint:
        thrust, roll, pitch, yaw = (float(v) for v in action)
        return cls(thrust, roll, pitch, yaw)


@dataclass(frozen=True)
class VelocitySetpoint:
    """Drone: fly at a world-frame velocity (m/s) while turning at a yaw rate (rad/s)."""

    vx: float
    """Velocity along world x (m/s)."""
    vy: float
    """Velocity along world y (m/s)."""
    vz: float
    """Velocity along world z, up (m/s)."""
    yaw_rate: float = 0.0
    """Heading rate (rad/s, positive counter-clockwise seen from above)."""


@dataclass(frozen=True)
class PositionSetpoint:
    """Drone: fly to a world position (m) and hold it, at a heading (rad)."""

    x: float
    """Target x (m)."""
    y: float
    """Target y (m)."""
    z: float
    """Target height above the floor (m)."""
    yaw: float = 0.0
    """Target heading (rad)."""


@dataclass(frozen=True)
class Arming:
    """Drone: arm (motors may spin) or disarm (motors off). Flight commands need an armed drone."""

    armed: bool
    """True to arm, False to disarm."""


@dataclass(frozen=True)
class Takeoff:
    """Drone: climb straight up to a height at a constant speed, then hold it. Send it every control
    period until the height is reached (sending the same command again continues the climb)."""

    height: float = 0.5
    """Height to hold above the floor (m)."""
    speed: float = 0.3
    """Climb speed (m/s)."""


@dataclass(frozen=True)
class Land:
    """Drone: descend straight down at a constant speed; the motors stop on touchdown (disarmed).
    Send it every control period until the drone is disarmed."""

    speed: float = 0.3
    """Descent speed (m/s)."""


@dataclass(frozen=True)
class SpeedSteering:
    """Car: speed of the rear axle centre (m/s, negative reverses) and bicycle steering angle (rad,
    positive left), as ackermann_msgs carries them; the car task's action."""

    speed: float
    """Speed (m/s)."""
    steering: float
    """Steering angle (rad)."""

    def to_action(self) -> FloatArray:
        return np.array([self.speed, self.steering], dtype=np.float64)

    @classmethod
    def from_action(cls, action: FloatArray) -> SpeedSteering:
        speed, steering = (float(v) for v in action)
        return cls(speed, steering)


NativeCommand = EeDelta | RateSetpoint | SpeedSteering
Command = (
    EeDelta
    | JointPositions
    | JointVelocities
    | RateSetpoint
    | VelocitySetpoint
    | PositionSetpoint
    | Arming
    | Takeoff
    | Land
    | SpeedSteering
)


# -- interfaces --------------------------------------------------------------------------------
class Robot(Protocol):
    """What a script or a ROS node drives: a real robot's driver or a simulated one."""

    name: str
    state_features: dict[str, tuple[int, ...]]
    """State field name to shape, known before connecting."""
    action_features: dict[str, str]
    """Task action component name to unit, known before connecting."""
    command_types: tuple[type, ...]
    """Commands :meth:`send_command` takes."""

    @property
    def is_connected(self) -> bool: ...

    def connect(self) -> None: ...

    def get_state(self) -> RobotState: ...

    def send_command(self, cmd: Command) -> NativeCommand:
        """Send a command; return the native command actually sent, after limits."""
        ...

    def disconnect(self) -> None: ...


class ActionFilter(Protocol):
    """What checks every action before it reaches a robot (:class:`robolearn.hardware.safety.SafetyLayer`)."""

    def observed(self, stamp: float) -> None: ...

    def filter(self, action: FloatArray, state: Any, now: float) -> FloatArray: ...


# -- controllers ---------------------------------------------------------------------------------
class DroneController:
    """Velocity and position setpoints to collective thrust and body rates: the outer loops of a
    Crazyflie's cascade (its firmware turns velocity and position setpoints into attitude and rate
    targets the same way), for a drone whose inner rate loop takes CTBR.

    The control law is the Crazyflie's :class:`~robolearn.tasks.robots.crazyflie.CascadedCtbrExpert`,
    with its gains: velocity loop a = kd (v_des - v), kd = (4, 4, 8) 1/s, horizontal acceleration
    limited by a 0.5 rad tilt; position loop v_des = (kp / kd) e = (1.5, 1.5, 2.5) 1/s times the
    error, at most ``max_speed``; attitude loop rates = -(10, 10, 4) 1/s times the SO(3) error.
    It is fed a made-up position error: the expert asks for the velocity (kp / kd) e, so the error
    (kd / kp) v asks for v. Heading, which the expert holds, is steered by adding a yaw rate:
    ``YAW_GAIN`` times the heading error for a position setpoint.
    """

    YAW_GAIN = 2.0
    """Yaw rate per radian of heading error (1/s)."""

    def __init__(self, task_cfg: TaskCfg, mass: float | None = None, max_speed: float = 1.0) -> None:
        if mass is not None:  # the expert takes the mass from the hover thrust (the neutral action)
            neutral = (mass * GRAVITY, *task_cfg.action.neutral[1:])
            task_cfg = replace(task_cfg, action=replace(task_cfg.action, neutral=neutral))
        self._expert = CascadedCtbrExpert(task_cfg, max_speed=max_speed)
        self._gain = self._expert.kp / self._expert.kd
        self._low, self._high = np.asarray(task_cfg.action.low), np.asarray(task_cfg.action.high)

    def velocity(self, state: DroneState, velocity: FloatArray, yaw_rate: float = 0.0) -> FloatArray:
        """(4,) thrust and body rates that fly at a world velocity (m/s) and yaw rate (rad/s)."""
        return self._command(state, np.asarray(velocity, dtype=np.float64) / self._gain, yaw_rate)

    def position(
        self,
        state: DroneState,
        position: FloatArray,
        yaw: float | None = None,
        feedforward: FloatArray | None = None,
    ) -> FloatArray:
        """(4,) thrust and body rates that fly to a world position (m) at a heading (rad; None
        holds the current one), adding a feed-forward velocity (m/s) for a moving target."""
        error = np.asarray(position, dtype=np.float64) - state.pos
        if feedforward is not None:
            error = error + np.asarray(feedforward) / self._gain
        heading_rate = 0.0
        if yaw is not None:
            heading_error = yaw - float(yaw_of(state.quat[None])[0])
            heading_rate = self.YAW_GAIN * math.remainder(heading_error, 2 * math.pi)
        return self._command(state, error, heading_rate)

    def _command(self, state: DroneState, error: FloatArray, yaw_rate: float) -> FloatArray:
        obs = {
            "to_target": error[None].astype(np.float32),
            "linvel": state.linvel[None].astype(np.float32),
            "attitude": quat_to_mat(state.quat[None]).reshape(1, 9).astype(np.float32),
        }
        action = np.asarray(self._expert(obs)[0], dtype=np.float64)
        action[3] += yaw_rate
        return np.clip(action, self._low, self._high)


def robot_state(env: Any, stamp: float) -> RobotState:
    """The state of world 0 of ``env`` (a :class:`~robolearn.tasks.core.TaskEnvView`: a simulated
    world, or a view of a real robot's messages) for its task's embodiment, stamped ``stamp`` (s)."""
    embodiment = env.cfg.embodiment
    if embodiment == "arm":
        robot = env.cfg.scene.robot  # the joints the robot's description file names
        fingers = robot.gripper_joints
        return ArmState(
            joint_pos=env.sim.joint_pos(robot.arm_joints)[0].copy(),
            joint_vel=env.sim.joint_vel(robot.arm_joints)[0].copy(),
            ee_pos=terms.frame_pos(env, "ee")[0].copy(),
            ee_quat=terms.frame_quat(env, "ee")[0].copy(),
            ee_linvel=terms.frame_linvel(env, "ee")[0].copy(),
            gripper_opening=float(terms.joint_pos_sum(env, fingers)[0, 0]) if fingers else 0.0,
            stamp=stamp,
        )
    if embodiment == "drone":
        return DroneState(
            pos=terms.frame_pos(env, DRONE_FRAME)[0].copy(),
            quat=env.sim.frame_quat(DRONE_FRAME)[0].copy(),
            linvel=terms.frame_linvel(env, DRONE_FRAME)[0].copy(),
            body_rates=terms.frame_angvel_body(env, DRONE_FRAME)[0],
            stamp=stamp,
        )
    if embodiment == "car":
        return CarState(
            pos=terms.frame_pos(env, CAR_FRAME)[0, :2].copy(),
            yaw=float(yaw_of(env.sim.frame_quat(CAR_FRAME))[0]),
            body_vel=body_velocity(env)[0],
            yaw_rate=float(yaw_rate(env)[0, 0]),
            steering_angle=float(steering_angle(env)[0, 0]),
            stamp=stamp,
        )
    raise RobotError(f"no robot state for a {embodiment}; embodiments with one: arm, drone, car")
