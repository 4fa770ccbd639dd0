"""How robot state and commands travel as standard ROS 2 messages.

State (published by the robot side, read by the policy side):

- ``frames/<name>``: ``nav_msgs/Odometry`` per observed frame. Pose in ``header.frame_id``
  (``world``); twist in the frame itself (``child_frame_id``), as the message defines it
  (REP 105); :func:`read_odometry` rotates it back to the world frame the tasks use.
- ``joint_states``: ``sensor_msgs/JointState``, position and velocity, naming at least every joint
  the task tracks (:func:`~robolearn.hardware.ros.state_view.tracked_joints`).
- ``task_state``: ``std_msgs/Float64MultiArray``: the task's per-world state (goal, waypoints,
  checkpoint index, impedance target, ...) flattened in ``TaskCfg.state`` order. The layout labels
  each segment: one ``MultiArrayDimension`` per entry, ``label`` its name, ``size`` and ``stride``
  its number of values. The message has no header, so the first two segments are ``stamp`` (sample
  time, s since the epoch) and ``step_count`` (control steps into the episode).

Commands (published by the policy side): one :class:`CommandCodec` per command type, see
:data:`COMMAND_TYPES` and ``docs/ros.md``.
"""

from __future__ import annotations

import array
import dataclasses
import logging
import math
import struct
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from robolearn.errors import RobolearnError
from robolearn.hardware.ros._rclpy import RosParameterError, msg
from robolearn.hardware.safety_config import SafetyCfg
from robolearn.sim.backend import FloatArray
from robolearn.sim.transforms import quat_rotate_inverse
from robolearn.tasks.core import TaskCfg

log = logging.getLogger(__name__)

WORLD_FRAME = "world"
"""``header.frame_id`` of every pose: the task's world frame."""


class MessageError(RobolearnError):
    """A received message that does not fit what the task expects; the message says how."""


# -- time --------------------------------------------------------------------------------------
def set_stamp(stamp: Any, t: float) -> None:
    """Write ``t`` (s since the epoch) into a ``builtin_interfaces/Time``."""
    sec = math.floor(t)
    stamp.sec = sec
    stamp.nanosec = min(round((t - sec) * 1e9), 999_999_999)


def stamp_seconds(stamp: Any) -> float:
    """A ``builtin_interfaces/Time`` as seconds since the epoch."""
    return float(stamp.sec) + float(stamp.nanosec) * 1e-9


def _finite(values: Iterable[float], what: str) -> None:
    # math.isfinite over a few values costs a fraction of np.isfinite's call overhead.
    if not all(map(math.isfinite, values)):
        raise MessageError(f"{what} holds non-finite values")


# -- frames ------------------------------------------------------------------------------------
def odometry_msg(
    name: str, pos: FloatArray, quat: FloatArray, linvel: FloatArray, angvel: FloatArray, t: float
) -> Any:
    """A frame's state as ``nav_msgs/Odometry``; ``quat`` is (w, x, y, z), velocities in the world frame."""
    m = msg("nav_msgs", "Odometry")()
    set_stamp(m.header.stamp, t)
    m.header.frame_id = WORLD_FRAME
    m.child_frame_id = name
    p, o = m.pose.pose.position, m.pose.pose.orientation
    p.x, p.y, p.z = (float(v) for v in pos)
    o.w, o.x, o.y, o.z = (float(v) for v in quat)
    q = np.asarray(quat, dtype=np.float64)[None]
    lin = quat_rotate_inverse(q, np.asarray(linvel, dtype=np.float64)[None])[0]
    ang = quat_rotate_inverse(q, np.asarray(angvel, dtype=np.float64)[None])[0]
    tl, ta = m.twist.twist.linear, m.twist.twist.angular
    tl.x, tl.y, tl.z = (float(v) for v in lin)
    ta.x, ta.y, ta.z = (float(v) for v in ang)
    return m


def read_odometry(m: Any, pos: FloatArray, quat: FloatArray, linvel: FloatArray, angvel: FloatArray) -> float:
    """Write an ``Odometry`` into (1, 3) and (1, 4) arrays, velocities rotated to the world frame;
    returns its stamp (s). Refuses a non-finite or non-unit orientation."""
    p, o = m.pose.pose.position, m.pose.pose.orientation
    tl, ta = m.twist.twist.linear, m.twist.twist.angular
    values = (p.x, p.y, p.z, o.w, o.x, o.y, o.z, tl.x, tl.y, tl.z, ta.x, ta.y, ta.z)
    store_odometry(m.child_frame_id, values, pos, quat, linvel, angvel)
    return stamp_seconds(m.header.stamp)


def store_odometry(
    name: str,
    values: Sequence[float],
    pos: FloatArray,
    quat: FloatArray,
    linvel: FloatArray,
    angvel: FloatArray,
) -> None:
    """Position, orientation (w, x, y, z) and body-frame twist, 13 values, into the view's arrays."""
    # Plain floats: a handful of numpy calls on 3-vectors cost several times the arithmetic, and
    # this runs on the policy node's critical path once per frame and sample.
    _finite(values, f"odometry of {name}")
    w, x, y, z = values[3:7]
    if abs(w * w + x * x + y * y + z * z - 1.0) > 1e-3:
        raise MessageError(f"odometry of {name}: orientation is not a unit quaternion")
    # The body-to-world rotation, as quat_to_mat has it.
    r00, r01, r02 = 1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)
    r10, r11, r12 = 2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)
    r20, r21, r22 = 2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)
    pos[0] = values[0:3]
    quat[0] = values[3:7]
    for out, (a, b, c) in ((linvel, values[7:10]), (angvel, values[10:13])):
        out[0] = (r00 * a + r01 * b + r02 * c, r10 * a + r11 * b + r12 * c, r20 * a + r21 * b + r22 * c)


# -- joints ------------------------------------------------------------------------------------
def joint_state_msg(names: list[str], pos: FloatArray, vel: FloatArray, t: float) -> Any:
    """Joint positions and velocities as ``sensor_msgs/JointState``."""
    m = msg("sensor_msgs", "JointState")()
    set_stamp(m.header.stamp, t)
    m.name = names
    m.position = array.array("d", np.asarray(pos, dtype=np.float64).tobytes())
    m.velocity = array.array("d", np.asarray(vel, dtype=np.float64).tobytes())
    return m


def read_joint_state(m: Any, index: Mapping[str, int], pos: FloatArray, vel: FloatArray) -> float:
    """Write the joints of ``index`` from a ``JointState`` into ``pos`` and ``vel``; returns its
    stamp (s). Other joints in the message are ignored. A message that does not name every joint of
    ``index`` is refused, naming those it lacks: taking the others would leave those at stale values."""
    store_joint_state(m.name, np.frombuffer(m.position), np.frombuffer(m.velocity), index, pos, vel)
    return stamp_seconds(m.header.stamp)


def store_joint_state(
    names: Sequence[str],
    position: FloatArray,
    velocity: FloatArray,
    index: Mapping[str, int],
    pos: FloatArray,
    vel: FloatArray,
) -> None:
    """A ``JointState``'s names, positions and velocities into the view's arrays (see
    :func:`read_joint_state`)."""
    if len(position) != len(names) or len(velocity) != len(names):
        raise MessageError("joint_states: name, position and velocity must have the same length")
    if not index.keys() <= set(names):
        missing = [j for j in index if j not in set(names)]
        raise MessageError(f"joint_states lacks joints {missing}; this task needs {list(index)}")
    _finite(position, "joint_states position")
    _finite(velocity, "joint_states velocity")
    for k, name in enumerate(names):
        i = index.get(name)
        if i is not None:
            pos[i], vel[i] = position[k], velocity[k]


# -- task state --------------------------------------------------------------------------------
class TaskStateLayout:
    """The task's per-world state as one labelled ``Float64MultiArray`` (see the module doc)."""

    HEADER = ("stamp", "step_count")

    def __init__(
        self, cfg: TaskCfg, shapes: Mapping[str, tuple[int, ...]] | None = None, topic: str = "task_state"
    ) -> None:
        # ``shapes`` and ``topic``: another labelled array with the same header (applied_action_layout).
        self.topic = topic
        self.shapes = dict(cfg.state if shapes is None else shapes)
        self.labels = [*self.HEADER, *self.shapes]
        self.sizes = [1, 1, *(int(np.prod(s)) for s in self.shapes.values())]
        self.size = sum(self.sizes)
        self.offsets = np.cumsum([0, *self.sizes[:-1]]).tolist()

    def to_msg(self, state: Mapping[str, npt.NDArray[Any]], step_count: int, t: float) -> Any:
        """One world's state (entries without the batch axis) as a labelled message."""
        m = msg("std_msgs", "Float64MultiArray")()
        dim = msg("std_msgs", "MultiArrayDimension")
        m.layout.dim = [dim(label=k, size=n, stride=n) for k, n in zip(self.labels, self.sizes, strict=True)]
        values = [np.array([t, float(step_count)])]
        values += [np.asarray(state[k], dtype=np.float64).reshape(-1) for k in self.shapes]
        m.data = array.array("d", np.concatenate(values).tobytes())
        return m

    def read(self, m: Any, state: Mapping[str, npt.NDArray[Any]], step_count: npt.NDArray[np.int64]) -> float:
        """Write a message into ``state`` (entries with a batch axis of 1) and ``step_count``;
        returns its stamp (s). Refuses a layout other than this task's."""
        labels = [d.label for d in m.layout.dim]
        sizes = [d.size for d in m.layout.dim]
        return self.store(labels, sizes, np.frombuffer(m.data), state, step_count)

    def store(
        self,
        labels: list[str],
        sizes: list[int],
        data: FloatArray,
        state: Mapping[str, npt.NDArray[Any]],
        step_count: npt.NDArray[np.int64],
    ) -> float:
        """A message's labels, sizes and data into ``state`` and ``step_count`` (see :meth:`read`)."""
        if labels != self.labels or sizes != self.sizes or len(data) != self.size:
            raise MessageError(
                f"{self.topic} has segments {list(zip(labels, sizes, strict=False))}; this task's are "
                f"{list(zip(self.labels, self.sizes, strict=True))}"
            )
        _finite(data, self.topic)
        for k, offset, n in zip(self.labels[2:], self.offsets[2:], self.sizes[2:], strict=True):
            state[k].reshape(-1)[:] = data[offset : offset + n]
        step_count[0] = int(data[1])
        return float(data[0])


APPLIED_ACTION = "applied_action"
"""Topic on which a robot reports the action its controller took at each control step."""


def applied_action_layout(cfg: TaskCfg) -> TaskStateLayout:
    """``applied_action`` (``std_msgs/Float64MultiArray``): the task action a robot's controller took
    at one control step, after the task's action bounds and before any actuation delay, as ros2_control's
    controller state or a Franka's ``O_T_EE_d`` report what was commanded. Segments ``stamp`` and
    ``step_count`` name the sample the step started from (the state it acted on for one control
    period), then ``action``. A recorder builds its command log from these, not from what it sent: a
    command that arrives late is replaced by the one before, which only the robot knows (issue 19)."""
    return TaskStateLayout(cfg, {"action": (len(cfg.action.names),)}, APPLIED_ACTION)


# -- serialized messages -----------------------------------------------------------------------
class CdrReader:
    """Reads the fields of a serialized message (CDR, the bytes an rclpy subscription with
    ``raw=True`` hands over) in order, without building the Python message.

    rclpy's conversion of a message into Python objects costs several times what the policy node
    does with it (an ``Odometry``, with its two 36-value covariances, 0.035 ms warm), on the path
    from observation to command. Each field is aligned to its size from the start of the data,
    after the 4-byte encapsulation header; a buffer that ends early is refused.
    """

    __slots__ = ("buf", "pos")
    _U32 = struct.Struct("<I")
    _I32_U32 = struct.Struct("<iI")

    def __init__(self, buf: bytes, what: str) -> None:
        if len(buf) < 4 or buf[1] != 1:  # 0x0001: CDR, little endian
            raise MessageError(f"{what}: not little-endian CDR")
        self.buf, self.pos = buf, 4

    def _take(self, size: int, align: int) -> int:
        at = self.pos + (-(self.pos - 4) % align)
        if at + size > len(self.buf):
            raise MessageError("message ends early")
        self.pos = at + size
        return at

    def stamp(self) -> float:
        """A ``builtin_interfaces/Time`` as seconds."""
        sec, nanosec = self._I32_U32.unpack_from(self.buf, self._take(8, 4))
        return float(sec) + float(nanosec) * 1e-9

    def u32(self) -> int:
        return int(self._U32.unpack_from(self.buf, self._take(4, 4))[0])

    def string(self) -> str:
        n = self.u32()  # with the terminating NUL
        at = self._take(n, 1)
        return self.buf[at : at + max(n - 1, 0)].decode("utf-8", "replace")

    def doubles(self, n: int) -> FloatArray:
        at = self._take(8 * n, 8 if n else 1)
        return np.frombuffer(self.buf, np.float64, n, at)

    def double_seq(self) -> FloatArray:
        n = self.u32()
        if 8 * n > len(self.buf):  # before aligning: a hostile count must not become an allocation
            raise MessageError("message ends early")
        return self.doubles(n)


_ODOMETRY_ORDER = (0, 1, 2, 6, 3, 4, 5)
"""The message's x, y, z, qx, qy, qz, qw as x, y, z, qw, qx, qy, qz."""


def read_odometry_cdr(
    buf: bytes, pos: FloatArray, quat: FloatArray, linvel: FloatArray, angvel: FloatArray
) -> float:
    """:func:`read_odometry` of a serialized ``nav_msgs/Odometry``."""
    r = CdrReader(buf, "odometry")
    stamp = r.stamp()
    r.string()  # header.frame_id
    name = r.string()
    pose = r.doubles(7).tolist()
    r.doubles(36)  # pose covariance
    twist = r.doubles(6).tolist()
    r.doubles(36)  # twist covariance: read, so that a message cut short is refused
    values = [pose[i] for i in _ODOMETRY_ORDER] + twist
    store_odometry(name, values, pos, quat, linvel, angvel)
    return stamp


def read_joint_state_cdr(buf: bytes, index: Mapping[str, int], pos: FloatArray, vel: FloatArray) -> float:
    """:func:`read_joint_state` of a serialized ``sensor_msgs/JointState``."""
    r = CdrReader(buf, "joint_states")
    stamp = r.stamp()
    r.string()  # header.frame_id
    count = r.u32()
    if 4 * count > len(buf):
        raise MessageError("message ends early")
    names = [r.string() for _ in range(count)]
    position, velocity = r.double_seq(), r.double_seq()
    r.double_seq()  # effort: read, so that a message cut short is refused
    store_joint_state(names, position, velocity, index, pos, vel)
    return stamp


def read_task_state_cdr(
    buf: bytes,
    layout: TaskStateLayout,
    state: Mapping[str, npt.NDArray[Any]],
    step_count: npt.NDArray[np.int64],
) -> float:
    """:meth:`TaskStateLayout.read` of a serialized ``std_msgs/Float64MultiArray``."""
    r = CdrReader(buf, "task_state")
    count = r.u32()
    if 12 * count > len(buf):
        raise MessageError("message ends early")
    labels, sizes = [], []
    for _ in range(count):
        labels.append(r.string())
        sizes.append(r.u32())
        r.u32()  # stride
    r.u32()  # data_offset
    return layout.store(labels, sizes, r.double_seq(), state, step_count)


# -- commands ----------------------------------------------------------------------------------
class CommandCodec:
    """How one task's action travels as command messages of one type.

    ``roles`` names each topic the command uses (``command``, and for some arms
    ``gripper_command``) with its message type. :meth:`encode` makes those messages from an action;
    :meth:`decode` writes the components one message carries into an action vector.
    """

    name: ClassVar[str]
    action_names: ClassVar[tuple[str, ...] | None] = None
    """The action components the encoding is defined for (None: any)."""

    def __init__(self, cfg: TaskCfg) -> None:
        names = tuple(cfg.action.names)
        if self.action_names is not None and names != self.action_names:
            raise RosParameterError(
                f"command_type {self.name} carries actions {list(self.action_names)}; "
                f"task {cfg.name} has {list(names)}"
            )
        self.cfg = cfg
        self.dt = cfg.control_dt

    def roles(self) -> dict[str, Any]:
        """Topic role to message class."""
        raise NotImplementedError

    def encode(self, action: FloatArray, t: float) -> dict[str, Any]:
        """Messages for one action (physical units), stamped ``t`` where the type has a header."""
        raise NotImplementedError

    def decode(self, role: str, m: Any, action: FloatArray) -> None:
        """Write what the message of ``role`` carries into ``action``; raise :class:`MessageError`."""
        raise NotImplementedError

    def carried(self) -> dict[str, tuple[float, float]]:
        """Action components whose values the messages carry over a narrower range than the task's
        action (name: low, high); a value outside it arrives as the nearest end."""
        return {}


def _float64_array(values: FloatArray) -> Any:
    out = msg("std_msgs", "Float64MultiArray")()
    out.data = array.array("d", np.asarray(values, dtype=np.float64).tobytes())
    return out


def _twist_stamped(frame_id: str, t: float) -> Any:
    out = msg("geometry_msgs", "TwistStamped")()
    out.header.frame_id = frame_id
    set_stamp(out.header.stamp, t)
    return out


class ForwardCommand(CommandCodec):
    """``std_msgs/Float64MultiArray``, the action as it is (``data`` in the task's action order),
    as ros2_control's ``forward_command_controller`` takes it for a controller whose command
    interfaces are the action's components."""

    name = "forward_command"

    def roles(self) -> dict[str, Any]:
        return {"command": msg("std_msgs", "Float64MultiArray")}

    def encode(self, action: FloatArray, t: float) -> dict[str, Any]:
        return {"command": _float64_array(action)}

    def decode(self, role: str, m: Any, action: FloatArray) -> None:
        data = np.frombuffer(m.data)
        if len(data) != len(action):
            raise MessageError(f"forward command has {len(data)} values; the task's action has {len(action)}")
        _finite(data, "forward command")
        action[:] = data


class ServoTwist(CommandCodec):
    """``geometry_msgs/TwistStamped`` for MoveIt Servo: ``linear`` is the tool displacement over the
    control period (m/s) in the world (planning) frame, ``angular`` zero (the tasks hold the tool's
    orientation). An arm with a gripper gets its opening separately, on ``gripper_command``, as a
    ``Float64MultiArray`` of its gripper joints' positions (an equal share of the opening each, m:
    half for two fingers, in the robot file's ``gripper_joints`` order) for a forward position
    controller of those joints."""

    name = "servo_twist"
    ARM = ("ee_dx", "ee_dy", "ee_dz")

    def __init__(self, cfg: TaskCfg) -> None:
        super().__init__(cfg)
        names = tuple(cfg.action.names)
        if names not in (self.ARM, (*self.ARM, "gripper_opening")):
            raise RosParameterError(
                f"command_type {self.name} carries actions {list(self.ARM)} and optionally gripper_opening; "
                f"task {cfg.name} has {list(names)}"
            )
        self.gripper = len(names) == 4
        self.fingers = max(len(cfg.scene.robot.gripper_joints), 1)

    def roles(self) -> dict[str, Any]:
        roles = {"command": msg("geometry_msgs", "TwistStamped")}
        if self.gripper:
            roles["gripper_command"] = msg("std_msgs", "Float64MultiArray")
        return roles

    def encode(self, action: FloatArray, t: float) -> dict[str, Any]:
        twist = _twist_stamped(WORLD_FRAME, t)
        lin = twist.twist.linear
        lin.x, lin.y, lin.z = (float(v) / self.dt for v in action[:3])
        if not self.gripper:
            return {"command": twist}
        share = float(action[3]) / self.fingers
        return {"command": twist, "gripper_command": _float64_array(np.full(self.fingers, share))}

    def decode(self, role: str, m: Any, action: FloatArray) -> None:
        if role == "gripper_command":
            data = np.frombuffer(m.data)
            if len(data) != self.fingers:
                raise MessageError(
                    f"gripper command has {len(data)} finger positions, expected {self.fingers}"
                )
            _finite(data, "gripper command")
            action[3] = data.sum()
            return
        lin = m.twist.linear
        values = np.array([lin.x, lin.y, lin.z]) * self.dt
        _finite(values, "servo twist")
        action[:3] = values


class CmdVelLegacy(CommandCodec):
    """``geometry_msgs/Twist`` as Crazyswarm2's ``cmd_vel_legacy`` takes it, with the Crazyflie's
    firmware in rate mode (``flightmode.stabModeRoll/Pitch/Yaw = 0``).

    Crazyswarm2 sends ``roll = linear.y``, ``pitch = -linear.x``, ``yawrate = angular.z`` and
    ``thrust = clip(linear.z, 0, 60000)`` in the legacy setpoint packet. In rate mode the firmware
    tracks roll rate against gyro x, pitch rate against minus gyro y, and negates the packet's yaw
    rate ("legacy rate input is inverted"). So, with body rates (p, q, r) about the body x
    (forward), y (left) and z (up) axes:

    - ``linear.y = p``, ``linear.x = q``, ``angular.z = -r``, all in deg/s;
    - ``linear.z = 65535 sqrt(T / T_max)``: rotor thrust grows with the square of motor speed and
      the 16-bit command sets the motors' duty cycle, roughly proportional to speed. ``T_max`` is
      the task's maximum collective thrust; calibrate it on the vehicle (the command that hovers
      is ``65535 sqrt(T_hover / T_max)``, about 43,700 for the tasks' thrust-to-weight of 2.25).
      Crazyswarm2 clips at 60,000, so commands above 0.84 T_max saturate.
    """

    name = "cmd_vel_legacy"
    action_names = ("thrust", "roll_rate", "pitch_rate", "yaw_rate")
    MAX_COMMAND = 65535.0
    CLIP = 60000.0

    def __init__(self, cfg: TaskCfg) -> None:
        super().__init__(cfg)
        self.max_thrust = float(cfg.action.high[0])

    def roles(self) -> dict[str, Any]:
        return {"command": msg("geometry_msgs", "Twist")}

    def encode(self, action: FloatArray, t: float) -> dict[str, Any]:
        m = msg("geometry_msgs", "Twist")()
        ratio = max(float(action[0]), 0.0) / self.max_thrust
        m.linear.z = float(min(round(self.MAX_COMMAND * math.sqrt(ratio)), self.CLIP))
        m.linear.y = math.degrees(float(action[1]))
        m.linear.x = math.degrees(float(action[2]))
        m.angular.z = -math.degrees(float(action[3]))
        return {"command": m}

    def decode(self, role: str, m: Any, action: FloatArray) -> None:
        values = np.array([m.linear.z, m.linear.y, m.linear.x, m.angular.z])
        _finite(values, "cmd_vel_legacy")
        action[0] = self._newtons(min(max(values[0], 0.0), self.CLIP))
        action[1] = math.radians(values[1])
        action[2] = math.radians(values[2])
        action[3] = -math.radians(values[3])

    def carried(self) -> dict[str, tuple[float, float]]:
        # Crazyswarm2's clip at 60,000: 0.84 of the task's maximum thrust reaches the motors.
        return {"thrust": (0.0, self._newtons(self.CLIP))}

    def _newtons(self, command: float) -> float:
        """The thrust (N) a 16-bit thrust command sets."""
        return self.max_thrust * (command / self.MAX_COMMAND) ** 2


class TwistRates(CommandCodec):
    """``geometry_msgs/TwistStamped`` in SI units: ``linear.z`` collective thrust (N), ``angular``
    body rates (rad/s) about the body x, y, z axes; ``header.frame_id`` the body frame."""

    name = "twist_rates"
    action_names = ("thrust", "roll_rate", "pitch_rate", "yaw_rate")

    def roles(self) -> dict[str, Any]:
        return {"command": msg("geometry_msgs", "TwistStamped")}

    def encode(self, action: FloatArray, t: float) -> dict[str, Any]:
        m = _twist_stamped(self.cfg.scene.robot.name, t)
        m.twist.linear.z = float(action[0])
        ang = m.twist.angular
        ang.x, ang.y, ang.z = (float(v) for v in action[1:4])
        return {"command": m}

    def decode(self, role: str, m: Any, action: FloatArray) -> None:
        ang = m.twist.angular
        values = np.array([m.twist.linear.z, ang.x, ang.y, ang.z])
        _finite(values, "twist_rates")
        action[:] = values


class CarTwistStamped(CommandCodec):
    """``geometry_msgs/TwistStamped``: ``linear.x`` the rear axle centre's speed (m/s), ``angular.z``
    the bicycle steering angle (rad, positive left), as an Ackermann drive takes speed and
    steering angle (``ackermann_msgs`` carries the same two numbers; it is not on PyPI)."""

    name = "twist_stamped"
    action_names = ("speed", "steering_angle")

    def roles(self) -> dict[str, Any]:
        return {"command": msg("geometry_msgs", "TwistStamped")}

    def encode(self, action: FloatArray, t: float) -> dict[str, Any]:
        m = _twist_stamped(self.cfg.scene.robot.name, t)
        m.twist.linear.x = float(action[0])
        m.twist.angular.z = float(action[1])
        return {"command": m}

    def decode(self, role: str, m: Any, action: FloatArray) -> None:
        values = np.array([m.twist.linear.x, m.twist.angular.z])
        _finite(values, "twist_stamped")
        action[:] = values


COMMAND_TYPES: dict[str, tuple[type[CommandCodec], ...]] = {
    "arm": (ForwardCommand, ServoTwist),
    "drone": (CmdVelLegacy, TwistRates),
    "car": (CarTwistStamped,),
}
"""Command types per embodiment; the first is the default."""


def within_command(safety: SafetyCfg, codec: CommandCodec) -> SafetyCfg:
    """``safety`` with each action limit narrowed to the range ``codec``'s messages carry.

    A command the message type would saturate on its way (``cmd_vel_legacy``'s thrust above 0.84 of
    the task's maximum) is then clipped by the safety layer, counted as a ``clip`` intervention and
    seen by the policy's state view as what went out, instead of being clipped silently downstream.
    """
    action = dict(safety.action)
    for name, (low, high) in codec.carried().items():
        lim = action[name]
        if lim.low < low or lim.high > high:
            action[name] = dataclasses.replace(lim, low=max(lim.low, low), high=min(lim.high, high))
            log.info(
                "%s: action.%s [%g, %g] narrowed to [%g, %g], what command_type %s carries",
                safety.source,
                name,
                lim.low,
                lim.high,
                action[name].low,
                action[name].high,
                codec.name,
            )
    return dataclasses.replace(safety, action=action)


def make_codec(cfg: TaskCfg, command_type: str = "") -> CommandCodec:
    """The codec of ``command_type`` for the task (its embodiment's default for "")."""
    choices = COMMAND_TYPES.get(cfg.embodiment)
    if choices is None:
        raise RosParameterError(
            f"task {cfg.name} is a {cfg.embodiment}; ROS 2 deployment supports {', '.join(COMMAND_TYPES)}"
        )
    if command_type == "joint_trajectory" and cfg.embodiment == "arm":
        raise RosParameterError(
            f"command_type joint_trajectory needs a joint-space policy; task {cfg.name} acts in tool "
            f"space ({', '.join(cfg.action.names)}): use forward_command or servo_twist"
        )
    by_name = {c.name: c for c in choices}
    codec = by_name.get(command_type or choices[0].name)
    if codec is None:
        raise RosParameterError(
            f"unknown command_type {command_type!r} for a {cfg.embodiment}; "
            f"choose one of {', '.join(by_name)}"
        )
    return codec(cfg)
