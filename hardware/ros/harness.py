"""Running nodes on a ROS domain of their own: the two executables as child processes, and an
in-process node that watches them (benchmarks, tests).

A benchmark or test must never talk to a robot that happens to run on the same network, nor to
another run on the same machine: :func:`private_domain` draws a domain ID at random, :func:`node_env`
pins it, with discovery limited to this machine, in a child's environment, and :func:`local_node`
joins it from this process with a context of its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from robolearn.hardware.ros._rclpy import ROS_ENV_DEFAULTS, apply_env_defaults, make_executor, rclpy

NODES = {
    "policy_node": "robolearn.hardware.ros.policy_node",
    "sim_robot_node": "robolearn.hardware.ros.sim_robot_node",
    "demo_recorder": "robolearn.hardware.ros.demo_recorder",
}
"""Executable name to module."""
MAX_DOMAIN_ID = 101
"""Largest domain ID whose DDS ports stay clear of Linux's ephemeral port range."""


def private_domain() -> int:
    """A domain ID drawn at random from 1..:data:`MAX_DOMAIN_ID` (0, ROS 2's default, is left to robots)."""
    return random.SystemRandom().randint(1, MAX_DOMAIN_ID)


def node_env(domain_id: int) -> dict[str, str]:
    """This process's environment with ``ROS_DOMAIN_ID`` set and discovery limited to this machine."""
    env = dict(os.environ)
    env.update(ROS_ENV_DEFAULTS)
    env["ROS_DOMAIN_ID"] = str(domain_id)
    return env


def ros_arg(value: object) -> str:
    """A parameter value as ``-p name:=value`` reads it (YAML): strings quoted, booleans lower case."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | Path):
        return json.dumps(str(value))
    return repr(value)


def start_node(
    executable: str,
    params: Mapping[str, object],
    domain_id: int,
    *,
    remap: Mapping[str, str] | None = None,
    log: IO[str] | None = None,
) -> subprocess.Popen[str]:
    """Start one of :data:`NODES` with ``--ros-args -p name:=value -r from:=to``."""
    cmd = [sys.executable, "-m", NODES[executable], "--ros-args"]
    for name, value in params.items():
        cmd += ["-p", f"{name}:={ros_arg(value)}"]
    for src, dst in (remap or {}).items():
        cmd += ["-r", f"{src}:={dst}"]
    return subprocess.Popen(
        cmd, env=node_env(domain_id), stdout=log or subprocess.DEVNULL, stderr=subprocess.STDOUT, text=True
    )


def stop_node(proc: subprocess.Popen[str], timeout: float = 5.0) -> int:
    """Interrupt a node (SIGINT, as Ctrl-C) and wait for it; kill it if it does not stop in time."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    return proc.returncode


@contextlib.contextmanager
def local_node(name: str, domain_id: int) -> Iterator[Any]:
    """A node of this process on ``domain_id``, with a context of its own, spun by a thread of its own
    (its callbacks run there) until the block ends."""
    ros = rclpy()
    apply_env_defaults()
    context = ros.Context()
    ros.init(args=[], context=context, domain_id=domain_id)
    node = ros.create_node(name, context=context)
    executor = make_executor(context)
    executor.add_node(node)
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set() and context.ok():
            executor.spin_once(timeout_sec=0.05)

    thread = threading.Thread(target=spin, name=f"{name}_spin", daemon=True)
    thread.start()
    try:
        yield node
    finally:
        stop.set()
        thread.join(timeout=2.0)
        executor.shutdown()
        node.destroy_node()
        context.try_shutdown()
