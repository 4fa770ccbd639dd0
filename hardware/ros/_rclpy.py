"""rclpy and the ROS 2 message packages, imported on first use, with safe middleware defaults.

Nothing in robolearn imports rclpy at module level: without ROS 2 the rest of the package works,
and asking for a node ends in one line that says how to get it. Message classes are looked up
through :func:`msg`, so code that only encodes or decodes messages needs no import of its own.

Defaults set here (only where the environment does not set them already):

- ``RMW_IMPLEMENTATION=rmw_fastrtps_cpp``: the middleware the ``ros-rmw-fastrtps-cpp`` wheel brings.
- ``ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST``: nodes find only nodes on this machine, so a policy
  under test never commands a robot elsewhere on the network. Deploying to a robot on another
  host means setting it to ``SUBNET`` (ROS 2's own default) on both sides, deliberately.

``ROS_DOMAIN_ID`` keeps ROS 2's default (0); the tests give each session its own.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import logging
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any, TypeVar

from robolearn.errors import RobolearnError

ROS_ENV_DEFAULTS = {
    "RMW_IMPLEMENTATION": "rmw_fastrtps_cpp",
    "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
}
"""Environment variables set (if unset) before rclpy is first imported."""
PARENT_PID_ENV = "ROBOLEARN_PARENT_PID"
"""Set by whoever starts a node as its child (:func:`robolearn.hardware.ros.harness.start_node`):
the node stops when that process dies, however it dies (:func:`stop_with_parent`)."""
_PR_SET_PDEATHSIG = 1
"""prctl(2)'s option: the signal this process gets when its parent dies."""


class RosUnavailableError(RobolearnError):
    """rclpy or a message package cannot be imported; the message says how to get it."""


class RosParameterError(RobolearnError):
    """A node parameter has a value the node cannot use; the message names it and what is allowed."""


def apply_env_defaults() -> None:
    """Set :data:`ROS_ENV_DEFAULTS` where the environment leaves them unset."""
    for key, value in ROS_ENV_DEFAULTS.items():
        os.environ.setdefault(key, value)


def _import(name: str) -> ModuleType:
    apply_env_defaults()
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise RosUnavailableError(
            f"cannot import {name} ({exc}): install robolearn[ros] or source a ROS 2 installation"
        ) from None


def rclpy() -> ModuleType:
    """The rclpy module (imported on first call)."""
    return _import("rclpy")


@functools.cache
def msg(package: str, name: str) -> Any:
    """A message class, e.g. ``msg("nav_msgs", "Odometry")``."""
    return getattr(_import(f"{package}.msg"), name)


def sensor_qos(depth: int = 5) -> Any:
    """Sensor-data QoS (best effort, keep last ``depth``, volatile): a late sample is worth less than
    the next. A recorder, which wants every sample, subscribes with a deeper queue."""
    qos = _import("rclpy.qos")
    profile = qos.qos_profile_sensor_data
    if depth == profile.depth:
        return profile
    return qos.QoSProfile(
        depth=depth, reliability=profile.reliability, durability=profile.durability, history=profile.history
    )


def command_qos() -> Any:
    """Reliable, keep last 1: what ros2_control's and Crazyswarm2's command subscribers offer to match."""
    qos = _import("rclpy.qos")
    return qos.QoSProfile(depth=1, reliability=qos.ReliabilityPolicy.RELIABLE)


def latched_qos() -> Any:
    """Reliable and transient local, keep last 1: a late joiner still gets the last value (an e-stop)."""
    qos = _import("rclpy.qos")
    return qos.QoSProfile(
        depth=1, reliability=qos.ReliabilityPolicy.RELIABLE, durability=qos.DurabilityPolicy.TRANSIENT_LOCAL
    )


P = TypeVar("P")


def declare_parameters(node: Any, params_cls: type[P]) -> P:
    """Declare one ROS parameter per field of the frozen dataclass ``params_cls`` (its default as
    the parameter's default, its type as the parameter's type) and return the values set with
    ``--ros-args -p name:=value``. An integer given for a float field is accepted."""
    descriptor = msg("rcl_interfaces", "ParameterDescriptor")
    values: dict[str, Any] = {}
    for f in dataclasses.fields(params_cls):  # type: ignore[arg-type]
        default = f.default
        # Dynamic typing, so that ``-p obs_latency_ms:=20`` (an integer) may set a float parameter.
        declared = node.declare_parameter(f.name, default, descriptor(dynamic_typing=True))
        value = declared.value
        if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if type(value) is not type(default):
            raise RosParameterError(f"parameter {f.name} must be a {type(default).__name__}, got {value!r}")
        values[f.name] = value
    return params_cls(**values)


def make_executor(context: Any = None) -> Any:
    """rclpy's events executor where it exists (Jazzy and later): it dispatches a message in about
    half the time of the single-threaded executor, which rebuilds its wait set on every call."""
    rclpy()
    try:
        from rclpy.experimental import EventsExecutor
    except ImportError:
        from rclpy.executors import SingleThreadedExecutor

        return SingleThreadedExecutor(context=context)
    return EventsExecutor(context=context)


def stop_with_parent() -> None:
    """Under :data:`PARENT_PID_ENV`: get SIGINT (as Ctrl-C, so the node closes its bag and robot)
    when the process that started this one dies, even by SIGKILL, instead of running on as an
    orphan that keeps a simulated robot stepping and its DDS ports open. Linux only (prctl)."""
    parent = os.environ.get(PARENT_PID_ENV)
    if parent is None or not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_PDEATHSIG, signal.SIGINT, 0, 0, 0) != 0:
        logging.getLogger(__name__).warning(
            "prctl(PR_SET_PDEATHSIG) failed: %s", os.strerror(ctypes.get_errno())
        )
        return
    if str(os.getppid()) != parent:  # it died before the prctl: nobody will send the signal
        raise SystemExit(f"the process that started this node ({parent}) is gone: not starting")


def run_node(name: str, params_cls: type, node_cls: Any, argv: Sequence[str] | None) -> None:
    """Start rclpy, build the node from its parameters and spin until it is done or interrupted.

    A bad parameter ends in one line on stderr and exit code 2.
    """
    logging.basicConfig(level=logging.INFO, format=f"[{name}] %(levelname)s %(message)s")
    try:
        stop_with_parent()
        ros = rclpy()
    except RobolearnError as exc:
        print(f"{name}: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    except KeyboardInterrupt:  # before there is a node to close (the parent died at once)
        return
    from rclpy.executors import ExternalShutdownException

    ros.init(args=list(argv) if argv is not None else sys.argv)
    node = ros.create_node(name)
    app = None
    try:
        app = node_cls(node, declare_parameters(node, params_cls))
        executor = make_executor()
        executor.add_node(node)
        while not app.done.is_set():
            try:
                executor.spin_once(timeout_sec=0.1)
            except RuntimeError:
                # rclpy racing its own shutdown: a SIGINT that shut the context down while the
                # executor was mid-call can surface as pybind's "Unable to convert call argument"
                # (seen under load, as in ros/joint_state_publisher#117). Only then is it the stop
                # that was asked for; with the context still up it is a fault and keeps its traceback.
                if ros.ok():
                    raise
                break
    except RobolearnError as exc:
        print(f"{name}: error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        if app is not None:
            app.close()
        node.destroy_node()
        if ros.ok():
            ros.shutdown()
