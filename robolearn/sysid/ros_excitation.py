"""An excitation recorded on a robot over ROS 2, every command through the safety layer (issue 19).

The recorder speaks docs/ros.md's topics, as ``policy_node`` does: it reads ``frames/<name>``,
``joint_states`` and ``task_state``, and each time a complete new sample has come (every source
stamped alike) it sends the next command of a multisine through
:class:`~robolearn.hardware.safety.SafetyLayer`, encoded per ``command_type``. The arm tasks' action
is a displacement per control step (of the tool, or of the joint targets): the excitation is the
step-to-step difference of a multisine around where the episode starts, so the target never strays
more than ``amplitude`` from it, and the safety layer still has the last word.

Each of the robot's episodes becomes a rosbag2 folder ``episode_NNN`` (MCAP) holding
``joint_states`` as received and ``joint_commands``: a ``sensor_msgs/JointState`` naming the robot
model's actuators, ``position`` their inputs, computed by the task's own action mapping from the
command actually sent and the measured state, stamped with the sample that command answered (it
acts from then to the next sample). :func:`robolearn.sysid.recording.read_recordings` reads the
folder back.
"""

from __future__ import annotations

import logging
import math
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from robolearn.hardware.registry import load_safety_config, task_robot
from robolearn.hardware.ros._rclpy import command_qos, msg, sensor_qos
from robolearn.hardware.ros.bag import BagRecorder
from robolearn.hardware.ros.messages import MessageError, joint_state_msg, make_codec
from robolearn.hardware.ros.state_view import RemoteStateView, tracked_frames
from robolearn.hardware.safety import SafetyLayer
from robolearn.sim.backend import FloatArray
from robolearn.sysid.excitation import multisine
from robolearn.sysid.model import SysidError, model_from_task
from robolearn.tasks import make_task_cfg
from robolearn.tasks.core import TaskCfg, TermConstants

log = logging.getLogger(__name__)

MIN_FRAMES = 25
"""Fewest samples an episode keeps (half a second at 50 Hz); shorter ones are recorded again."""
DEFAULT_SAFETY = {"arm": "panda"}
"""Safety configuration of an embodiment whose task names no registered robot."""


@dataclass(frozen=True)
class RosExcitationCfg:
    """What to record."""

    task: str
    """The task whose robot is excited (an arm task: its action is a displacement per step)."""
    out: Path
    """New folder; each episode becomes ``episode_NNN`` in it (a rosbag2 folder)."""
    episodes: int = 3
    """Robot episodes to record, each with its own frequencies."""
    amplitude: float = 0.04
    """Largest excursion of each displaced component from where the episode starts (m or rad)."""
    f_low: float = 0.5
    """Lowest excitation frequency (Hz)."""
    f_high: float = 2.0
    """Highest excitation frequency (Hz)."""
    fade: float = 0.2
    """Raised-cosine ramp at each end of an episode (s)."""
    robot: str = ""
    """Safety configuration: a registered robot or a YAML path ("": the task's robot)."""
    command_type: str = ""
    """How commands are sent (docs/ros.md); "" is the embodiment's default."""
    seed: int = 0
    """Seed of the excitation frequencies (episode e uses seed + e)."""
    timeout: float = 120.0
    """Give up (s) when the robot stops answering."""


class _CommandedView(TermConstants):
    """The task's view with the recorder's own controller state: the task's action mapping run on
    it turns the commands sent into the actuators' inputs, as the robot's controller does."""

    def __init__(self, cfg: TaskCfg, remote: RemoteStateView) -> None:
        self.cfg, self.num_envs, self.sim = cfg, 1, remote.sim
        self.xp, self.device, self.float_dtype = remote.xp, remote.device, remote.float_dtype
        self.state = {k: np.zeros((1, *shape)) for k, shape in cfg.state.items()}
        self.step_count = np.zeros(1, dtype=np.int64)

    def controls(self, action: FloatArray) -> FloatArray:
        act = self.cfg.action
        out = np.asarray(act.to_controls(self, action[None], **act.params), dtype=np.float64)[0]
        self.step_count += 1
        return out


class ExcitationRecorder:
    """Subscribes, commands and records on ``node`` (see the module doc); :meth:`run` blocks."""

    def __init__(self, node: Any, cfg: RosExcitationCfg) -> None:
        self.node, self.cfg = node, cfg
        self.task = make_task_cfg(cfg.task)
        if self.task.embodiment != "arm":
            raise SysidError(
                f"ROS 2 excitation drives arm tasks; task {cfg.task} is a {self.task.embodiment}"
            )
        if cfg.out.exists():
            raise SysidError(f"{cfg.out} exists already; give a new folder")
        if cfg.episodes < 1 or not 0 < cfg.amplitude <= 0.5:
            raise SysidError("episodes must be >= 1 and amplitude in (0, 0.5] (m or rad)")
        robot = self.task.scene.robot
        self.actuators = list(model_from_task(self.task, robot.arm_joints).actuators)
        self.joints = [*robot.arm_joints, *robot.gripper_joints]
        self.codec = make_codec(self.task, cfg.command_type)
        safety_name = cfg.robot or task_robot(self.task) or DEFAULT_SAFETY[self.task.embodiment]
        self.safety = SafetyLayer(load_safety_config(safety_name), self.task)
        self.view = RemoteStateView(self.task, tracked_frames(self.task), self.joints)
        names = list(self.task.action.names)
        # Displacements are excited; a gripper opening is held where the task leaves it.
        self.excited = [i for i, n in enumerate(names) if n != "gripper_opening"]
        self.n_steps = self.task.episode_length
        self.sources = self.view.sources  # joint_states among them: the view is given the joints
        self.stamps = dict.fromkeys(self.sources, -math.inf)
        self.latest: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.done = threading.Event()
        self.episode = -1
        self.bag: BagRecorder | None = None
        self.step = 0
        self.signal = np.zeros((0, len(self.excited)))
        self.commanded: _CommandedView | None = None
        self.acted = -math.inf
        self.last_step_count = 0
        self.frames = 0
        self.episode_frames: list[int] = []
        self.pubs = {
            role: node.create_publisher(cls, role, command_qos()) for role, cls in self.codec.roles().items()
        }
        cls = {
            "task_state": msg("std_msgs", "Float64MultiArray"),
            "joint_states": msg("sensor_msgs", "JointState"),
        }
        self.subs = [
            node.create_subscription(
                cls.get(s, msg("nav_msgs", "Odometry")),
                s,
                lambda m, s=s: self._on_message(s, m),
                sensor_qos(),
            )
            for s in self.sources
        ]

    # -- messages --------------------------------------------------------------------------------
    def _on_message(self, source: str, m: Any) -> None:
        with self._lock:
            if self.done.is_set():
                return
            try:
                stamp = self.view.read(source, m)
            except MessageError as exc:
                log.warning("ignored a message on %s: %s", source, exc)
                return
            self.stamps[source] = stamp
            self.latest[source] = m
            # A complete sample: every source has sent the one taken at this time (the task state's
            # float stamp and the headers' sec/nanosec agree to well under a microsecond).
            if stamp > self.acted + 1e-6 and all(abs(s - stamp) < 1e-6 for s in self.stamps.values()):
                self.acted = stamp
                self._act(stamp)

    # -- one control step --------------------------------------------------------------------------
    def _act(self, stamp: float) -> None:
        step_count = int(self.view.step_count[0])
        if step_count < self.last_step_count:  # the robot started a new episode
            self.view.new_episode()
            self.safety.new_episode()
            self._finish_episode()
        self.last_step_count = step_count
        if self.bag is None and step_count == 0 and self.episode + 1 < self.cfg.episodes:
            self._start_episode()
        now = time.time()
        if self.bag is not None and self.step < self.n_steps:
            action = np.asarray(self.task.action.neutral, dtype=np.float64).copy()
            prev = self.signal[self.step - 1] if self.step > 0 else 0.0
            action[self.excited] = self.signal[self.step] - prev
        else:  # before the first episode starts, and after the last: hold
            action = np.asarray(self.task.action.neutral, dtype=np.float64).copy()
            action[self.excited] = 0.0
        self.safety.observed(stamp)
        command = self.safety.filter(action, self.view.robot_state(stamp), now)
        for role, m in self.codec.encode(command, now).items():
            self.pubs[role].publish(m)
        self.view.record_action(command)
        if self.bag is not None and self.commanded is not None and self.step < self.n_steps:
            controls = self.commanded.controls(command)
            self.bag.write("joint_states", self.latest["joint_states"], time.time_ns())
            out = joint_state_msg(self.actuators, controls, np.zeros_like(controls), stamp)
            self.bag.write("joint_commands", out, time.time_ns())
            self.step += 1
            self.frames += 1

    def _start_episode(self) -> None:
        self.episode += 1
        cfg, dt = self.cfg, self.task.control_dt
        self.signal = multisine(
            self.n_steps,
            dt,
            np.full(len(self.excited), cfg.amplitude),
            f_low=cfg.f_low,
            f_high=cfg.f_high,
            fade=cfg.fade,
            seed=cfg.seed + self.episode,
        )
        self.step = 0
        self.commanded = _CommandedView(self.task, self.view)
        self.bag = BagRecorder(cfg.out / f"episode_{self.episode:03d}")
        self.bag.add_topic("joint_states", msg("sensor_msgs", "JointState"), sensor_qos())
        self.bag.add_topic("joint_commands", msg("sensor_msgs", "JointState"), command_qos())
        log.info("excitation episode %d of %s started", self.episode, self.task.name)

    def _finish_episode(self) -> None:
        if self.bag is None:
            return
        self.bag.close()
        self.bag = None
        if self.step < MIN_FRAMES:  # the task ended it at once (a goal reached): record another
            log.info(
                "excitation episode %d ended after %d steps; recording it again", self.episode, self.step
            )
            shutil.rmtree(self.cfg.out / f"episode_{self.episode:03d}")
            self.episode -= 1
            return
        self.episode_frames.append(self.step)
        if self.episode + 1 >= self.cfg.episodes:
            self.done.set()

    def run(self) -> dict[str, Any]:
        """Record until the episodes are done; returns a summary."""
        self.cfg.out.mkdir(parents=True)
        start = time.monotonic()
        while not self.done.wait(0.1):
            if time.monotonic() - start > self.cfg.timeout:
                with self._lock:
                    if self.bag is not None:
                        self.bag.close()
                        self.bag = None
                    self.done.set()
                raise SysidError(
                    f"the robot did not finish {self.cfg.episodes} excitation episodes of {self.task.name} "
                    f"within {self.cfg.timeout:g} s ({len(self.episode_frames)} done; is it running, on "
                    "this ROS domain, with the task's topics?)"
                )
        return {
            "task": self.task.name,
            "episodes": len(self.episode_frames),
            "frames": sum(self.episode_frames),
            "interventions": {k: v for k, v in self.safety.counts.items() if v},
            "out": str(self.cfg.out),
        }


def record_ros_excitation(cfg: RosExcitationCfg, domain_id: int) -> dict[str, Any]:
    """Record ``cfg`` from a node of this process on ROS domain ``domain_id``."""
    from robolearn.hardware.ros.harness import local_node

    with local_node("sysid_excitation", domain_id) as node:
        return ExcitationRecorder(node, cfg).run()
