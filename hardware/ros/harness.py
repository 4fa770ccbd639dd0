"""Running nodes on a ROS domain of their own: the two executables as child processes, and an
in-process node that watches them (benchmarks, tests).

A benchmark or test must never talk to a robot that happens to run on the same network, nor to
another run on the same machine: :func:`private_domain` draws a domain ID at random, :func:`node_env`
pins it, with discovery limited to this machine, in a child's environment, and :func:`local_node`
joins it from this process with a context of its own.

Best-effort sensor topics make discovery a test's business: a subscription that has not yet matched
its publisher receives nothing, without an error, while nodes that found each other earlier already
talk (issue 12: a test's ``frames/ee`` subscription got no message while 25 commands arrived). A
test first waits for its own endpoints to match (:func:`wait_for_matches`), then for events
(:func:`wait_until`), never for a fixed time.
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
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from robolearn.hardware.ros._rclpy import (
    PARENT_PID_ENV,
    ROS_ENV_DEFAULTS,
    apply_env_defaults,
    make_executor,
    rclpy,
)

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
    """Start one of :data:`NODES` with ``--ros-args -p name:=value -r from:=to``; it stops when this
    process dies (:func:`~robolearn.hardware.ros._rclpy.stop_with_parent`). Linux signals the death
    of the *thread* that started it: call this from a thread that lives as long as the node should."""
    cmd = [sys.executable, "-m", NODES[executable], "--ros-args"]
    for name, value in params.items():
        cmd += ["-p", f"{name}:={ros_arg(value)}"]
    for src, dst in (remap or {}).items():
        cmd += ["-r", f"{src}:={dst}"]
    env = node_env(domain_id) | {PARENT_PID_ENV: str(os.getpid())}
    return subprocess.Popen(
        cmd, env=env, stdout=log or subprocess.DEVNULL, stderr=subprocess.STDOUT, text=True
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
    failed: list[BaseException] = []

    def spin() -> None:
        # A callback that raises ends the spinning: no callback runs after it, so the block that
        # waits for one must hear of it (``callbacks_alive``) rather than wait out its timeout.
        try:
            while not stop.is_set() and context.ok():
                executor.spin_once(timeout_sec=0.05)
        except BaseException as exc:
            failed.append(exc)
            raise

    thread = threading.Thread(target=spin, name=f"{name}_spin", daemon=True)
    thread.start()
    node.callbacks_alive = lambda: not failed
    try:
        yield node
    finally:
        stop.set()
        thread.join(timeout=2.0)
        executor.shutdown()
        node.destroy_node()
        context.try_shutdown()
    if failed:
        raise RuntimeError(f"a callback of {name} raised: {failed[0]!r}") from failed[0]


def unmatched(endpoints: Iterable[Any]) -> list[str]:
    """The topics of ``endpoints`` (publishers and subscriptions) that no peer matches yet.

    DDS matching, not the ROS graph: a subscription counts its matched publishers
    (``get_publisher_count``), a publisher its matched subscriptions (``get_subscription_count``),
    so an endpoint seen in the graph but refused for incompatible QoS stays unmatched.
    """
    out = []
    for e in endpoints:
        count = e.get_publisher_count() if hasattr(e, "get_publisher_count") else e.get_subscription_count()
        if count < 1:
            out.append(e.topic_name)
    return out


def wait_for_matches(
    endpoints: Iterable[Any], timeout: float = 60.0, processes: Iterable[subprocess.Popen[str]] = ()
) -> None:
    """Block until every endpoint of ``endpoints`` has matched at least one peer; raise
    :class:`TimeoutError` naming those that have not within ``timeout`` s (a node that never
    started, a QoS mismatch), or :class:`RuntimeError` as soon as one of ``processes`` (the nodes
    that would match them) has exited. Discovery over loopback takes milliseconds on an idle
    machine and seconds on a loaded one (a lost announcement waits for the next, 3 s later in Fast DDS).
    """
    endpoints, procs = list(endpoints), list(processes)

    def matched() -> bool:
        for proc in procs:
            if proc.poll() is not None:
                raise RuntimeError(f"{proc.args!r} exited with {proc.returncode}")
        return not unmatched(endpoints)

    wait_until(matched, timeout, lambda: f"no peer for {unmatched(endpoints)}")


def wait_until(
    condition: Callable[[], bool], timeout: float, what: str | Callable[[], str], poll: float = 0.01
) -> None:
    """Poll ``condition`` until it holds; raise :class:`TimeoutError` with ``what`` after ``timeout`` s.

    For tests and benchmarks: the timeout bounds a broken run, it is not a measurement, so it is
    generous; the condition, not the clock, decides what passes.
    """
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what() if callable(what) else what} after {timeout:g} s")
        time.sleep(poll)
