"""Helpers the ROS 2 tests share (imported by them; pytest puts this folder on the path)."""

from __future__ import annotations

import json
import threading
from typing import Any

import numpy as np

from robolearn.hardware.ros.messages import make_codec, stamp_seconds
from robolearn.tasks import make_task_cfg


class ArmCommandLog:
    """What the test's node hears from policy_node driving the arm with ``servo_twist``: each
    command's stamp (the node's decision time, which is what the watchdog and the e-stop act on) with
    the tool displacement it carries, and the safety reports."""

    def __init__(self, task: str, still: float = 1e-3) -> None:
        self.still = still
        """The largest displacement (m) that counts as holding still."""
        self.lock = threading.Lock()
        self.codec = make_codec(make_task_cfg(task), "servo_twist")
        self.commands: list[tuple[float, np.ndarray]] = []
        self.reports: list[dict[str, Any]] = []

    def on_command(self, m: Any) -> None:
        action = np.zeros(4)
        self.codec.decode("command", m, action)
        with self.lock:
            self.commands.append((stamp_seconds(m.header.stamp), action[:3]))

    def on_report(self, m: Any) -> None:
        with self.lock:
            self.reports.append(json.loads(m.data))

    def stamped_after(self, t: float) -> list[np.ndarray]:
        """Displacements of the commands decided after ``t`` (s since the epoch)."""
        with self.lock:
            return [d for stamp, d in self.commands if stamp > t]

    def moving_after(self, t: float) -> bool:
        """Whether a command decided after ``t`` moves the tool."""
        return any(np.abs(d).max() > self.still for d in self.stamped_after(t))

    def report_where(self, condition: Any) -> dict[str, Any] | None:
        """The first safety report for which ``condition(report)`` holds, or None."""
        with self.lock:
            return next((r for r in self.reports if condition(r)), None)
