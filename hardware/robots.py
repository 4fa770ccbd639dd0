"""Robots in the task definitions' physical units, and simulated robots behind the same interface.

As LeRobot's ``Robot``: a robot has ``connect / get_state / send_command / disconnect``, is a
context manager, and knows its state features, action features and command types before it
connects; ``send_command`` returns the command actually sent. States and commands are typed and
in the units of :mod:`robolearn.tasks` (metres, radians, newtons, seconds; quaternions w, x, y, z).

Each embodiment has one *native* command, the tasks' action (:class:`EeDelta`,
:class:`RateSetpoint`, :class:`SpeedSteering`), with ``to_action`` / ``from_action`` to and from
the task's action vector. Other commands (joint targets, velocity and position setpoints,
take-off and landing) are turned into the native one by :meth:`SimRobot.task_action`, the way the
robot's own controller would: that vector is what a safety layer filters and a policy outputs.

:class:`SimArm`, :class:`SimDrone` and :class:`SimCar` run one world of a task's
:class:`~robolearn.envs.task_env.TaskEnv` and advance it one control period per command; a ROS node or a
script drives them like the real robots.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, fields, replace
from types import TracebackType
from typing import Any, ClassVar, Generic, Literal, Protocol, Self, TypeVar

import numpy as np

from robolearn.envs.task_env import TaskEnv
from robolearn.sim.backend import FloatArray
from robolearn.sim.transforms import quat_from_euler, quat_to_mat, yaw_of
from robolearn.tasks import make_task_cfg, terms
from robolearn.tasks.car_checkpoints import body_velocity, steering_angle, yaw_rate
from robolearn.tasks.core import TaskCfg
from robolearn.tasks.quadrotor_hover import CascadedCtbrExpert
from robolearn.tasks.robots.crazyflie import GRAVITY
from robolearn.tasks.robots.crazyflie import NAME as DRONE_FRAME
from robolearn.tasks.robots.panda import ARM_JOINTS, FINGER_JOINTS, servo_step
from robolearn.tasks.robots.racecar import ROBOT_NAME as CAR_FRAME

log = logging.getLogger(__name__)


class RobotError(ValueError):
    """A robot used wrongly (not connected, a command it does not take); the message says what is allowed."""


# -- states ------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class ArmState:
    """A Panda's measured state, in the robot base frame (the tasks' world frame)."""

    joint_pos: FloatArray
    """(7,) arm joint positions (rad)."""
    joint_vel: FloatArray
    """(7,) arm joint velocities (rad/s)."""
    ee_pos: FloatArray
    """(3,) tool centre point position (m)."""
    ee_quat: FloatArray
    """(4,) tool orientation (w, x, y, z), w >= 0."""
    ee_linvel: FloatArray
    """(3,) tool centre point velocity (m/s)."""
    gripper_opening: float
    """Distance between the fingers (m)."""
    stamp: float
    """Time of the measurement (s)."""

    SHAPES: ClassVar[dict[str, tuple[int, ...]]] = {
        "joint_pos": (7,),
        "joint_vel": (7,),
        "ee_pos": (3,),
        "ee_quat": (4,),
        "ee_linvel": (3,),
    }
    """Shapes of the array fields."""


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


def state_features(state_type: type[RobotState]) -> dict[str, tuple[int, ...]]:
    """Name to shape of every field of a state type, scalars as ``()`` (known without a robot)."""
    return {f.name: state_type.SHAPES.get(f.name, ()) for f in fields(state_type)}


# -- commands ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class EeDelta:
    """Arm: move the impedance target by (dx, dy, dz) this control step, set the gripper opening (m).

    The arm tasks' action.
    """

    dx: float
    """Displacement along x (m)."""
    dy: float
    """Displacement along y (m)."""
    dz: float
    """Displacement along z (m)."""
    gripper: float
    """Opening between the fingers (m)."""

    def to_action(self) -> FloatArray:
        return np.array([self.dx, self.dy, self.dz, self.gripper], dtype=np.float64)

    @classmethod
    def from_action(cls, action: FloatArray) -> EeDelta:
        dx, dy, dz, gripper = (float(v) for v in action)
        return cls(dx, dy, dz, gripper)


@dataclass(frozen=True)
class JointPositions:
    """Arm: servo the joints toward target positions (rad), set the gripper opening (m)."""

    positions: tuple[float, ...]
    """Seven joint targets (rad)."""
    gripper: float
    """Opening between the fingers (m)."""


@dataclass(frozen=True)
class JointVelocities:
    """Arm: move the joints at these velocities (rad/s) for a control period, set the gripper opening (m)."""

    velocities: tuple[float, ...]
    """Seven joint velocities (rad/s)."""
    gripper: float
    """Opening between the fingers (m)."""


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


# -- kinematics and controllers ------------------------------------------------------------------
# Joint origins of panda.urdf (Franka's published kinematics): translation from the parent
# joint (m) and roll about the parent's x axis (rad); every joint turns about its own z axis.
_PANDA_JOINT_ORIGINS = (
    ((0.0, 0.0, 0.333), 0.0),
    ((0.0, 0.0, 0.0), -math.pi / 2),
    ((0.0, -0.316, 0.0), math.pi / 2),
    ((0.0825, 0.0, 0.0), math.pi / 2),
    ((-0.0825, 0.384, 0.0), -math.pi / 2),
    ((0.0, 0.0, 0.0), math.pi / 2),
    ((0.088, 0.0, 0.0), math.pi / 2),
)
_PANDA_TOOL_OFFSET = 0.107 + 0.105
"""Flange, then the grasp target between the fingertips, along link 7's z axis (m)."""


def panda_tool_position(joint_pos: FloatArray) -> FloatArray:
    """(3,) tool centre point position (m, base frame) of seven Panda joint positions (rad)."""
    rot, pos = np.eye(3), np.zeros(3)
    for (offset, roll), angle in zip(_PANDA_JOINT_ORIGINS, joint_pos, strict=True):
        pos = pos + rot @ np.asarray(offset)
        cr, sr, ca, sa = math.cos(roll), math.sin(roll), math.cos(angle), math.sin(angle)
        rot = (
            rot
            @ np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
            @ np.array([[ca, -sa, 0], [sa, ca, 0], [0, 0, 1]])
        )
    return pos + rot[:, 2] * _PANDA_TOOL_OFFSET


class DroneController:
    """Velocity and position setpoints to collective thrust and body rates: the outer loops of a
    Crazyflie's cascade (its firmware turns velocity and position setpoints into attitude and rate
    targets the same way), for a drone whose inner rate loop takes CTBR.

    The control law is the quadrotor tasks' :class:`~robolearn.tasks.quadrotor_hover.CascadedCtbrExpert`,
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
        return ArmState(
            joint_pos=env.sim.joint_pos(ARM_JOINTS)[0].copy(),
            joint_vel=env.sim.joint_vel(ARM_JOINTS)[0].copy(),
            ee_pos=terms.frame_pos(env, "ee")[0].copy(),
            ee_quat=terms.frame_quat(env, "ee")[0].copy(),
            ee_linvel=terms.frame_linvel(env, "ee")[0].copy(),
            gripper_opening=float(terms.joint_pos_sum(env, FINGER_JOINTS)[0, 0]),
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


# -- simulated robots ----------------------------------------------------------------------------
@dataclass(frozen=True)
class StepOutcome:
    """What the task made of the last control step of a simulated robot."""

    reward: float
    """The task's reward."""
    success: bool
    """The task's success condition held."""
    terminated: bool
    """The episode reached a terminal state (success or failure, such as a crash)."""
    truncated: bool
    """The episode reached its time limit."""


StateT = TypeVar("StateT", ArmState, DroneState, CarState)
NativeT = TypeVar("NativeT", EeDelta, RateSetpoint, SpeedSteering)


class SimRobot(Generic[StateT, NativeT]):
    """One world of a task run as a robot: each command advances it one control period.

    The world does not reset by itself when the task's episode ends (``last_step`` says so);
    :meth:`reset` starts a new episode. Time (``time``, the states' stamps) is simulated time and
    keeps running across resets. With ``safety``, every command's action passes through its
    ``filter`` before it is applied, and every state read feeds its watchdog.
    """

    embodiment: ClassVar[str]
    state_type: ClassVar[type[RobotState]]
    native_command: ClassVar[type[NativeCommand]]
    command_types: ClassVar[tuple[type, ...]]

    def __init__(
        self, task: str, backend: str = "mujoco", *, seed: int = 0, safety: ActionFilter | None = None
    ) -> None:
        cfg = make_task_cfg(task)
        if cfg.embodiment != self.embodiment:
            raise RobotError(
                f"{type(self).__name__} drives {self.embodiment} tasks; task {task} is for a {cfg.embodiment}"
            )
        if backend not in cfg.backends:
            raise RobotError(
                f"task {task} does not run on backend {backend!r}; it runs on {', '.join(cfg.backends)}"
            )
        self.task_cfg, self.backend, self.seed, self.safety = cfg, backend, seed, safety
        self.name = f"sim_{cfg.name}"
        self.state_features = state_features(self.state_type)
        self.action_features = dict(zip(cfg.action.names, cfg.action.units, strict=True))
        self.time = 0.0
        self.last_step = StepOutcome(0.0, False, False, False)
        self._env: TaskEnv | None = None
        self._obs: dict[str, np.ndarray] = {}

    # -- lifecycle
    @property
    def is_connected(self) -> bool:
        return self._env is not None

    def connect(self) -> None:
        """Build the simulated world and start the first episode."""
        if self._env is not None:
            raise RobotError(f"{self.name} is already connected")
        self._env = TaskEnv(self.task_cfg, self.backend, 1, seed=self.seed, autoreset=False)
        self.reset()

    def disconnect(self) -> None:
        if self._env is not None:
            self._env.close()
            self._env = None

    def __enter__(self) -> Self:
        self.connect()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.disconnect()

    def reset(self, seed: int | None = None) -> None:
        """Start a new episode from the task's reset distribution."""
        env = self._connected()
        obs, _ = env.reset(seed=seed)
        self._obs = {k: v[0] for k, v in obs.items()}
        self.last_step = StepOutcome(0.0, False, False, False)
        self._after_reset(env)

    # -- state and commands
    def get_state(self) -> StateT:
        state = self._read_state(self._connected())
        if self.safety is not None:
            self.safety.observed(state.stamp)
        return state

    def observation(self) -> dict[str, np.ndarray]:
        """The task's observation of the current state (float32, no batch axis), what a policy reads."""
        self._connected()
        return {k: v.copy() for k, v in self._obs.items()}

    def send_command(self, cmd: Command) -> NativeT:
        """Apply a command for one control period; return the native command applied (after the
        robot's own controller, the safety filter and the task's action bounds)."""
        env = self._connected()
        action = self.task_action(cmd)
        if self.safety is not None:
            action = self.safety.filter(action, self.get_state(), self.time)
        obs, reward, terminated, truncated, info = env.step(action[None])
        self.time += self.task_cfg.control_dt
        self._obs = {k: v[0] for k, v in obs.items()}
        self.last_step = StepOutcome(
            float(reward[0]), bool(info["success"][0]), bool(terminated[0]), bool(truncated[0])
        )
        return self.from_task_action(env.action[0])

    def task_action(self, cmd: Command) -> FloatArray:
        """The task action vector a command amounts to now (the robot's controller, in one step)."""
        if not isinstance(cmd, self.command_types):
            names = ", ".join(t.__name__ for t in self.command_types)
            raise RobotError(f"{type(self).__name__} takes {names}; got {type(cmd).__name__}")
        if isinstance(cmd, self.native_command):
            return cmd.to_action()
        return self._controller_action(cmd, self._read_state(self._connected()))

    def from_task_action(self, action: FloatArray) -> NativeT:
        """The native command of a task action vector."""
        return self.native_command.from_action(np.asarray(action, dtype=np.float64))  # type: ignore[return-value]

    # -- per embodiment
    def _read_state(self, env: TaskEnv) -> StateT:
        return robot_state(env, self.time)  # type: ignore[return-value]

    def _controller_action(self, cmd: Command, state: StateT) -> FloatArray:
        raise NotImplementedError

    def _after_reset(self, env: TaskEnv) -> None:
        """Bring a freshly reset world into the robot's starting condition."""

    def _connected(self) -> TaskEnv:
        if self._env is None:
            raise RobotError(f"{self.name} is not connected; call connect() or use it as a context manager")
        return self._env


class SimArm(SimRobot[ArmState, EeDelta]):
    """A simulated Franka Panda of an arm task, driven through the task's Cartesian impedance target.

    Joint commands go through the same target, since the tasks' controller is Cartesian: a joint
    target becomes the tool position it puts the tool at (:func:`panda_tool_position`), approached
    with the scripted experts' damped servo step; joint velocities become the tool displacement
    they make in one control period. The controller keeps the tool pointing down and leaves the
    arm's redundancy free, so only the tool position of a joint command is followed.
    """

    embodiment = "arm"
    state_type = ArmState
    native_command = EeDelta
    command_types = (EeDelta, JointPositions, JointVelocities)

    def _controller_action(self, cmd: Command, state: ArmState) -> FloatArray:
        if isinstance(cmd, JointPositions):
            offset = panda_tool_position(np.asarray(cmd.positions)) - state.ee_pos
            delta = servo_step(offset[None], state.ee_linvel[None], self.task_cfg.action.high[0])[0]
        elif isinstance(cmd, JointVelocities):
            moved = state.joint_pos + np.asarray(cmd.velocities) * self.task_cfg.control_dt
            delta = panda_tool_position(moved) - panda_tool_position(state.joint_pos)
        else:
            raise AssertionError(cmd)  # task_action checked the type
        return np.array([*delta, cmd.gripper])


class SimDrone(SimRobot[DroneState, RateSetpoint]):
    """A simulated Crazyflie of a quadrotor task.

    ``start="task"``: each episode starts where the task's reset puts the drone (in the air,
    armed), so a policy can fly it at once. ``start="ground"``: the drone rests level on the floor
    under that point, disarmed, waiting for ``Arming(True)`` and ``Takeoff``. Velocity and position
    setpoints, take-off and landing go through :class:`DroneController` to thrust and body rates,
    as the Crazyflie's firmware does onboard; rate setpoints go to the rate loop as they are.
    """

    embodiment = "drone"
    state_type = DroneState
    native_command = RateSetpoint
    command_types = (RateSetpoint, VelocitySetpoint, PositionSetpoint, Arming, Takeoff, Land)

    TOUCHDOWN_HEIGHT = 0.03
    """Height (m) below which a landing drone counts as down and its motors stop."""

    def __init__(
        self,
        task: str,
        backend: str = "mujoco",
        *,
        seed: int = 0,
        safety: ActionFilter | None = None,
        start: Literal["task", "ground"] = "task",
    ) -> None:
        super().__init__(task, backend, seed=seed, safety=safety)
        self.start = start
        self.controller = DroneController(self.task_cfg)
        self.armed = start == "task"
        self._manoeuvre: Takeoff | Land | None = None
        self._reference = np.zeros(3)
        """Moving position target of the take-off or landing under way (m)."""

    def _after_reset(self, env: TaskEnv) -> None:
        self.armed = self.start == "task"
        self._manoeuvre = None
        if self.start == "ground":
            # Level on the floor (the collision box is 12 mm tall), heading kept, then one period
            # with the motors off so that the observation describes the drone at rest.
            state = self._read_state(env)
            heading = yaw_of(state.quat[None])
            pos = np.array([[state.pos[0], state.pos[1], 0.007]])
            env.sim.set_root_state(
                np.array([0]), DRONE_FRAME, pos, quat_from_euler(np.zeros(1), np.zeros(1), heading)
            )
            env.sim.forward(np.array([0]))
            self.send_command(Arming(False))

    def task_action(self, cmd: Command) -> FloatArray:
        if not self.armed and not isinstance(cmd, Arming | Land):
            raise RobotError(
                f"{self.name} is disarmed and takes no {type(cmd).__name__}; send Arming(True) first"
            )
        if not isinstance(cmd, Takeoff | Land):
            self._manoeuvre = None
        return super().task_action(cmd)

    def _controller_action(self, cmd: Command, state: DroneState) -> FloatArray:
        dt = self.task_cfg.control_dt
        motors_off = np.zeros(4)
        if isinstance(cmd, Arming):
            self.armed = cmd.armed
            return motors_off
        if isinstance(cmd, VelocitySetpoint):
            return self.controller.velocity(state, np.array([cmd.vx, cmd.vy, cmd.vz]), cmd.yaw_rate)
        if isinstance(cmd, PositionSetpoint):
            return self.controller.position(state, np.array([cmd.x, cmd.y, cmd.z]), cmd.yaw)
        if isinstance(cmd, Takeoff | Land):
            if cmd != self._manoeuvre:  # a new manoeuvre starts where the drone is
                self._manoeuvre, self._reference = cmd, state.pos.copy()
            if isinstance(cmd, Land):
                if not self.armed or state.pos[2] < self.TOUCHDOWN_HEIGHT:
                    self.armed, self._manoeuvre = False, None
                    return motors_off
                self._reference[2] = max(self._reference[2] - cmd.speed * dt, 0.0)
                return self.controller.position(
                    state, self._reference, feedforward=np.array([0, 0, -cmd.speed])
                )
            climbing = self._reference[2] < cmd.height
            self._reference[2] = min(self._reference[2] + cmd.speed * dt, cmd.height)
            climb = np.array([0.0, 0.0, cmd.speed if climbing else 0.0])
            return self.controller.position(state, self._reference, feedforward=climb)
        raise AssertionError(cmd)  # task_action checked the type


class SimCar(SimRobot[CarState, SpeedSteering]):
    """A simulated MIT RACECAR of a car task; it takes the task's speed and steering command only."""

    embodiment = "car"
    state_type = CarState
    native_command = SpeedSteering
    command_types = (SpeedSteering,)


SIM_ROBOTS: dict[str, type[SimArm] | type[SimDrone] | type[SimCar]] = {
    "arm": SimArm,
    "drone": SimDrone,
    "car": SimCar,
}
"""The simulated robot class of each embodiment."""


def make_sim_robot(
    task: str, backend: str = "mujoco", *, seed: int = 0, safety: ActionFilter | None = None
) -> SimArm | SimDrone | SimCar:
    """The simulated robot for a task's embodiment (a drone starts as the task puts it: in the air)."""
    embodiment = make_task_cfg(task).embodiment
    if embodiment not in SIM_ROBOTS:
        raise RobotError(f"task {task} is for a {embodiment}; simulated robots: {', '.join(SIM_ROBOTS)}")
    return SIM_ROBOTS[embodiment](task, backend, seed=seed, safety=safety)
