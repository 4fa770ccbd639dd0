"""A node's spin loop and rclpy's own shutdown race (:func:`robolearn.hardware.ros._rclpy.run_node`):
an error from the executor after the context was shut down ends the node cleanly; one while the
context is up is a fault and keeps its traceback."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.ros

SCRIPT = textwrap.dedent(
    """
    import dataclasses, sys, threading

    import rclpy

    from robolearn.hardware.ros import _rclpy


    @dataclasses.dataclass(frozen=True)
    class Params:
        rate_hz: float = 10.0


    class App:
        def __init__(self, node, params):
            self.done = threading.Event()

        def close(self):
            print("closed")


    class Executor:
        def add_node(self, node):
            pass

        def spin_once(self, timeout_sec=None):
            if sys.argv[1] == "shutdown":
                rclpy.shutdown()  # what rclpy's SIGINT handler does, in the middle of the call
            raise RuntimeError("Unable to convert call argument '0' to Python object")


    _rclpy.make_executor = lambda context=None: Executor()
    _rclpy.run_node("racing_node", Params, App, [])
    print("returned")
    """
)


def _run(case: str) -> subprocess.CompletedProcess[str]:
    pytest.importorskip("rclpy", reason="needs rclpy: install robolearn[ros]")
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, case], capture_output=True, text=True, timeout=120, check=False
    )


def test_an_executor_error_after_shutdown_ends_the_node_cleanly() -> None:
    done = _run("shutdown")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["closed", "returned"]


def test_an_executor_error_with_the_context_up_keeps_its_traceback() -> None:
    done = _run("fault")
    assert done.returncode == 1
    assert "Traceback" in done.stderr and "Unable to convert call argument" in done.stderr
    assert "closed" in done.stdout  # the node was still closed on the way out
