"""Simulated robots: one world of a task run behind the :class:`~robolearn.hardware.robots.Robot` interface.

:class:`SimArm`, :class:`SimDrone` and :class:`SimCar` run one world of a task
(:class:`~robolearn.tasks.worlds.TaskWorlds`) and advance it one control period per command; a
script drives them like the real robots, and ``sim_robot_node`` presents them on ROS 2. Commands
other than the native one go through the robot's own controller (:meth:`SimRobot.task_action`);
task action vectors, as a policy or a ROS command carries them, go in through :meth:`SimRobot.apply`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import ClassVar, Generic, Literal, Self, TypeVar

import numpy as np

from robolearn.hardware.robots import (
    ActionFilter,
    Arming,
    ArmState,
    CarState,
    Command,
    DroneController,
    DroneState,
    EeDelta,
    JointPositions,
    JointVelocities,
    Land,
    NativeCommand,
    PositionSetpoint,
    RateSetpoint,
    RobotError,
    RobotState,
    SpeedSteering,
    Takeoff,
    VelocitySetpoint,
    robot_state,
    state_features,
)
from robolearn.sim.backend import FloatArray
from robolearn.sim.robot_description import ArmKinematics
from robolearn.sim.transforms import quat_from_euler, yaw_of
from robolearn.tasks import make_task_cfg
from robolearn.tasks.robots.arm import servo_step
from robolearn.tasks.robots.crazyflie import NAME as DRONE_FRAME
from robolearn.tasks.sim_params import apply_sim_params, load_sim_params
from robolearn.tasks.worlds import TaskWorlds


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
    episode_return: float = 0.0
    """Sum of the rewards of the episode so far."""
    episode_length: int = 0
    """Control steps of the episode so far."""
    episode_success: bool = False
    """The success condition held at some step of the episode."""


StateT = TypeVar("StateT", ArmState, DroneState, CarState)
NativeT = TypeVar("NativeT", EeDelta, RateSetpoint, SpeedSteering)


class SimRobot(Generic[StateT, NativeT]):
    """One world of a task run as a robot: each command advances it one control period.

    The world does not reset by itself when the task's episode ends (``last_step`` says so);
    :meth:`reset` starts a new episode. Time (``time``, the states' stamps) is simulated time and
    keeps running across resets. With ``safety``, every command's action passes through its
    ``filter`` before it is applied, and every state read feeds its watchdog. With ``randomize``,
    every reset draws the task's domain randomization (masses, friction, gains, action latency).
    With ``sim_params`` (a parameter file from ``robolearn sysid``), the identified robot is simulated
    and randomization is centred on it.
    """

    embodiment: ClassVar[str]
    state_type: ClassVar[type[RobotState]]
    native_command: ClassVar[type[NativeCommand]]
    command_types: ClassVar[tuple[type, ...]]

    def __init__(
        self,
        task: str,
        backend: str = "mujoco",
        *,
        seed: int = 0,
        safety: ActionFilter | None = None,
        randomize: bool = False,
        sim_params: str | Path | None = None,
    ) -> None:
        cfg = make_task_cfg(task)
        if sim_params is not None:  # read now: a bad file fails before connect()
            cfg = apply_sim_params(cfg, load_sim_params(sim_params))
        if cfg.embodiment != self.embodiment:
            raise RobotError(
                f"{type(self).__name__} drives {self.embodiment} tasks; task {task} is for a {cfg.embodiment}"
            )
        if backend not in cfg.backends:
            raise RobotError(
                f"task {task} does not run on backend {backend!r}; it runs on {', '.join(cfg.backends)}"
            )
        self.task_cfg, self.backend, self.seed, self.safety = cfg, backend, seed, safety
        self.randomize = randomize
        self.name = f"sim_{cfg.name}"
        self.state_features = state_features(self.state_type, cfg)
        self.action_features = dict(zip(cfg.action.names, cfg.action.units, strict=True))
        self.time = 0.0
        self.last_step = StepOutcome(0.0, False, False, False)
        self._worlds: TaskWorlds | None = None
        self._obs: dict[str, np.ndarray] = {}

    # -- lifecycle
    @property
    def is_connected(self) -> bool:
        return self._worlds is not None

    @property
    def worlds(self) -> TaskWorlds:
        """The simulated world (one), as the task's terms see it; what a simulated sensor reads."""
        return self._connected()

    def connect(self) -> None:
        """Build the simulated world and start the first episode."""
        if self._worlds is not None:
            raise RobotError(f"{self.name} is already connected")
        self._worlds = TaskWorlds(self.task_cfg, self.backend, 1, seed=self.seed, randomize=self.randomize)
        self.reset()

    def disconnect(self) -> None:
        if self._worlds is not None:
            self._worlds.close()
            self._worlds = None

    def __enter__(self) -> Self:
        self.connect()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.disconnect()

    def reset(self, seed: int | None = None) -> None:
        """Start a new episode from the task's reset distribution (``seed``: restart its random
        streams first)."""
        worlds = self._connected()
        if seed is not None:
            worlds.reseed(seed)
        worlds.reset_worlds(np.arange(1))
        self._obs = {k: v[0] for k, v in worlds.observe().items()}
        self.last_step = StepOutcome(0.0, False, False, False)
        self._after_reset(worlds)

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
        return self.from_task_action(self.apply(self.task_action(cmd)))

    def apply(self, action: FloatArray) -> FloatArray:
        """Apply a task action vector for one control period; return the action applied (after the
        safety filter, the task's action bounds and, under randomization, its latency).

        The outcome is :attr:`last_step`; an ended episode is not reset (see :meth:`reset`).
        """
        worlds = self._connected()
        if self.safety is not None:
            action = self.safety.filter(action, self.get_state(), self.time)
        result = worlds.advance(np.asarray(action, dtype=np.float64)[None])
        self.time += self.task_cfg.control_dt
        self._obs = {k: v[0] for k, v in worlds.observe().items()}
        self.last_step = StepOutcome(
            float(result.reward[0]),
            bool(result.success[0]),
            bool(result.terminated[0]),
            bool(result.truncated[0]),
            float(worlds.episode_return[0]),
            int(worlds.step_count[0]),
            bool(worlds.episode_success[0]),
        )
        return worlds.action[0].copy()

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
    def _read_state(self, worlds: TaskWorlds) -> StateT:
        return robot_state(worlds, self.time)  # type: ignore[return-value]

    def _controller_action(self, cmd: Command, state: StateT) -> FloatArray:
        raise NotImplementedError

    def _after_reset(self, worlds: TaskWorlds) -> None:
        """Bring a freshly reset world into the robot's starting condition."""

    def _connected(self) -> TaskWorlds:
        if self._worlds is None:
            raise RobotError(f"{self.name} is not connected; call connect() or use it as a context manager")
        return self._worlds


class SimArm(SimRobot[ArmState, EeDelta]):
    """A simulated arm of an arm task (any serial arm, from its description file), driven through
    the task's Cartesian impedance target.

    Joint commands go through the same target, since the tasks' controller is Cartesian: a joint
    target becomes the tool position it puts the tool at (forward kinematics of the robot's file,
    :class:`~robolearn.sim.robot_description.ArmKinematics`), approached with the scripted experts'
    damped servo step; joint velocities become the tool displacement they make in one control
    period. The controller holds the tool's orientation and leaves the arm's redundancy free, so
    only the tool position of a joint command is followed.
    """

    embodiment = "arm"
    state_type = ArmState
    native_command = EeDelta
    command_types = (EeDelta, JointPositions, JointVelocities)

    def __init__(
        self,
        task: str,
        backend: str = "mujoco",
        *,
        seed: int = 0,
        safety: ActionFilter | None = None,
        randomize: bool = False,
        sim_params: str | Path | None = None,
    ) -> None:
        super().__init__(task, backend, seed=seed, safety=safety, randomize=randomize, sim_params=sim_params)
        self._kinematics: ArmKinematics | None = None
        self.has_gripper = "gripper_opening" in self.task_cfg.action.names

    @property
    def kinematics(self) -> ArmKinematics:
        """Forward kinematics of the arm to its ``ee`` frame (built at the first joint command)."""
        if self._kinematics is None:
            robot = self.task_cfg.scene.robot
            ee = next((f for f in robot.frames if f.name == "ee"), None)
            if ee is None or not robot.arm_joints:
                raise RobotError(f"robot {robot.name} of task {self.task_cfg.name} lacks arm_joints or ee")
            self._kinematics = ArmKinematics(robot.asset, robot.arm_joints, ee.link, ee.pos, robot.base_pos)
        return self._kinematics

    def _controller_action(self, cmd: Command, state: ArmState) -> FloatArray:
        if not isinstance(cmd, JointPositions | JointVelocities):
            raise AssertionError(cmd)  # task_action checked the type
        values = np.asarray(cmd.positions if isinstance(cmd, JointPositions) else cmd.velocities)
        if values.shape != state.joint_pos.shape:
            raise RobotError(
                f"{type(cmd).__name__} has {values.size} values; {self.name} has "
                f"{state.joint_pos.size} arm joints ({', '.join(self.task_cfg.scene.robot.arm_joints)})"
            )
        if (cmd.gripper is None) == self.has_gripper:
            wanted = "a gripper opening" if self.has_gripper else "no gripper opening (it has no gripper)"
            raise RobotError(f"{self.name} takes {wanted}; got gripper={cmd.gripper}")
        tool = self.kinematics.tool_position
        if isinstance(cmd, JointPositions):
            offset = tool(values) - state.ee_pos
            delta = servo_step(offset[None], state.ee_linvel[None], self.task_cfg.action.high[0])[0]
        else:
            delta = tool(state.joint_pos + values * self.task_cfg.control_dt) - tool(state.joint_pos)
        return np.array([*delta] if cmd.gripper is None else [*delta, cmd.gripper])


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
        randomize: bool = False,
        start: Literal["task", "ground"] = "task",
        sim_params: str | Path | None = None,
    ) -> None:
        super().__init__(task, backend, seed=seed, safety=safety, randomize=randomize, sim_params=sim_params)
        self.start = start
        self.controller = DroneController(self.task_cfg)
        self.armed = start == "task"
        self._manoeuvre: Takeoff | Land | None = None
        self._reference = np.zeros(3)
        """Moving position target of the take-off or landing under way (m)."""

    def _after_reset(self, worlds: TaskWorlds) -> None:
        self.armed = self.start == "task"
        self._manoeuvre = None
        if self.start == "ground":
            # Level on the floor (the collision box is 12 mm tall), heading kept, then one period
            # with the motors off so that the observation describes the drone at rest.
            state = self._read_state(worlds)
            heading = yaw_of(state.quat[None])
            pos = np.array([[state.pos[0], state.pos[1], 0.007]])
            worlds.sim.set_root_state(
                np.array([0]), DRONE_FRAME, pos, quat_from_euler(np.zeros(1), np.zeros(1), heading)
            )
            worlds.sim.forward(np.array([0]))
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
    task: str,
    backend: str = "mujoco",
    *,
    seed: int = 0,
    safety: ActionFilter | None = None,
    randomize: bool = False,
    sim_params: str | Path | None = None,
) -> SimArm | SimDrone | SimCar:
    """The simulated robot for a task's embodiment (a drone starts as the task puts it: in the air);
    ``sim_params``: a parameter file from ``robolearn sysid`` giving its dynamics."""
    embodiment = make_task_cfg(task).embodiment
    if embodiment not in SIM_ROBOTS:
        raise RobotError(f"task {task} is for a {embodiment}; simulated robots: {', '.join(SIM_ROBOTS)}")
    return SIM_ROBOTS[embodiment](
        task, backend, seed=seed, safety=safety, randomize=randomize, sim_params=sim_params
    )
