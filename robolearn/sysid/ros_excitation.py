"""An excitation recorded on a robot over ROS 2, every command through the safety layer (issue 19).

The recorder speaks docs/ros.md's topics, as ``policy_node`` does: it reads ``frames/<name>``,
``joint_states`` and ``task_state``, and each time a complete new sample has come (every source
stamped alike) it sends the next command of a multisine through
:class:`~robolearn.hardware.safety.SafetyLayer`, encoded per ``command_type``. The arm tasks' action
is a displacement per control step (of the tool, or of the joint targets): the excitation is the
step-to-step difference of a multisine around where the episode starts, so the target never strays
more than ``amplitude`` from it, and the safety layer still has the last word.

The command log is what the robot applied, not what was sent. A command that reaches the robot
after its next control tick is not applied at that tick (the robot acts on the one before once
more), and with displacement actions every such slip stays in the target for the rest of the
episode: a log rebuilt from the commands sent drifts from what moved the robot (issue 19: the
replay of the gapped robot with its true parameters was off by 0.63 of the nominal model's error).
So the robot reports on ``applied_action`` the action its controller took at each step, before its
actuation delay (:func:`~robolearn.hardware.ros.messages.applied_action_layout`; ros2_control's
controller state and a Franka's ``O_T_EE_d`` report the same), and the log is built from those;
where a robot reports none, from the commands sent, with a warning. Sample times are the robot
controller's clock, ``step_count`` control periods from the episode's first sample (``clock``):
the stamps pair a sample's messages, but carry the transport's jitter, and a simulated robot that
falls behind real time still integrates one control period per step.

Each of the robot's episodes becomes a rosbag2 folder ``episode_NNN`` (MCAP) holding
``joint_states`` as received (stamped on that clock) and ``joint_commands``: a
``sensor_msgs/JointState`` naming the robot model's actuators, ``position`` their inputs, computed
by the task's own action mapping from the applied actions and the measured state, stamped with the
sample each acted from (until the next). ``sent_commands`` holds the same computed from the
commands sent, for comparison (they differ where a command came late). A sample that never came
(a ``step_count`` skipped) splits the episode into ``episode_NNN_K`` folders. An episode is written
once the sample after its end has come, so that its last applied action is in.
:func:`robolearn.sysid.recording.read_recordings` reads the folder back.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from robolearn.hardware.registry import load_safety_config, task_robot
from robolearn.hardware.ros._rclpy import command_qos, msg, sensor_qos
from robolearn.hardware.ros.bag import BagRecorder
from robolearn.hardware.ros.messages import (
    APPLIED_ACTION,
    MessageError,
    applied_action_layout,
    joint_state_msg,
    make_codec,
    set_stamp,
    within_command,
)
from robolearn.hardware.ros.state_view import RemoteStateView, tracked_frames
from robolearn.hardware.safety import SafetyLayer
from robolearn.sim.backend import FloatArray
from robolearn.sysid.excitation import multisine
from robolearn.sysid.model import SysidError, model_from_task
from robolearn.tasks import make_task_cfg
from robolearn.tasks.core import TaskCfg, TermConstants

log = logging.getLogger(__name__)

MIN_FRAMES = 25
"""Fewest commands an episode takes (half a second at 50 Hz); shorter ones are recorded again."""
MIN_SEGMENT = 10
"""Fewest samples a stretch between missing samples keeps (what a fit needs, see Recording.check)."""
SAMPLE_QUEUE = 50
"""Depth of the recorder's sensor subscriptions: a recorder wants every sample, not only the newest."""
APPLIED_QUEUE = 100
"""Depth of its reliable ``applied_action`` subscription."""
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
    clock: Literal["steps", "stamps"] = "steps"
    """Sample times: the robot controller's steps (``task_state``'s ``step_count`` control periods)
    or the messages' stamps (for a robot whose steps are not evenly spaced)."""


class _CommandedView(TermConstants):
    """The task's view with the recorder's own controller state: the task's action mapping run on
    it turns the actions applied into the actuators' inputs, as the robot's controller does."""

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


@dataclass
class _Episode:
    """What the recorder gathered of one robot episode, keyed by ``step_count``."""

    index: int
    start: float
    """Stamp of its first sample."""
    end: float = math.inf
    """Stamp of the first sample of the robot's next episode."""
    samples: dict[int, tuple[float, dict[str, Any]]] = field(default_factory=dict)
    """Each step's sample: stamp and the message of every source (a robot holding before its first
    command repeats step 0; the newest counts)."""
    sent: dict[int, FloatArray] = field(default_factory=dict)
    """The command sent in answer to each step's sample."""
    commands: int = 0
    """Excitation commands sent (where the multisine is)."""


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
        if cfg.clock not in ("steps", "stamps"):
            raise SysidError(f"clock must be steps or stamps, got {cfg.clock!r}")
        robot = self.task.scene.robot
        self.actuators = list(model_from_task(self.task, robot.arm_joints).actuators)
        self.joints = [*robot.arm_joints, *robot.gripper_joints]
        self.codec = make_codec(self.task, cfg.command_type)
        safety_name = cfg.robot or task_robot(self.task) or DEFAULT_SAFETY[self.task.embodiment]
        self.safety = SafetyLayer(within_command(load_safety_config(safety_name), self.codec), self.task)
        self.view = RemoteStateView(self.task, tracked_frames(self.task), self.joints)
        self.applied_layout = applied_action_layout(self.task)
        names = list(self.task.action.names)
        # Displacements are excited; a gripper opening is held where the task leaves it.
        self.excited = [i for i, n in enumerate(names) if n != "gripper_opening"]
        self.n_steps = self.task.episode_length
        self.sources = self.view.sources  # joint_states among them: the view is given the joints
        self.stamps = dict.fromkeys(self.sources, -math.inf)
        self.latest: dict[str, Any] = {}
        self._lock = threading.Lock()
        self.done = threading.Event()
        self.signal = np.zeros((0, len(self.excited)))
        self.acted = -math.inf
        self.last_step_count = 0
        self.next_index = 0
        self.current: _Episode | None = None
        self.pending: _Episode | None = None
        self.finished: list[_Episode] = []
        self.applied: dict[float, tuple[int, FloatArray]] = {}
        self.kept: list[dict[str, Any]] = []
        self._warned_sent = False
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
                sensor_qos(SAMPLE_QUEUE),
            )
            for s in self.sources
        ]
        self.subs.append(
            node.create_subscription(
                msg("std_msgs", "Float64MultiArray"), APPLIED_ACTION, self._on_applied, APPLIED_QUEUE
            )
        )

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

    def _on_applied(self, m: Any) -> None:
        action = {"action": np.zeros((1, len(self.task.action.names)))}
        step = np.zeros(1, dtype=np.int64)
        try:
            stamp = self.applied_layout.read(m, action, step)
        except MessageError as exc:
            log.warning("ignored a message on %s: %s", APPLIED_ACTION, exc)
            return
        with self._lock:
            self.applied[stamp] = (int(step[0]), action["action"][0])

    # -- one control step --------------------------------------------------------------------------
    def _act(self, stamp: float) -> None:
        step_count = int(self.view.step_count[0])
        if self.pending is not None:  # a sample after its end: its last applied action has come
            self.finished.append(self.pending)  # run() writes it
            self.pending = None
        if step_count < self.last_step_count:  # the robot started a new episode
            self.view.new_episode()
            self.safety.new_episode()
            self._end_episode(stamp)
        self.last_step_count = step_count
        wanted = self.cfg.episodes - len(self.kept) - len(self.finished) - (self.pending is not None)
        if self.current is None and step_count == 0 and wanted > 0 and not self.done.is_set():
            self._start_episode(stamp)
        ep = self.current
        action = np.asarray(self.task.action.neutral, dtype=np.float64).copy()
        action[self.excited] = 0.0  # before the first episode starts, and after the last: hold
        if ep is not None and ep.commands < self.n_steps:
            prev = self.signal[ep.commands - 1] if ep.commands > 0 else 0.0
            action[self.excited] = self.signal[ep.commands] - prev
            ep.commands += 1
        now = time.time()
        self.safety.observed(stamp)
        command = self.safety.filter(action, self.view.robot_state(stamp), now)
        for role, m in self.codec.encode(command, now).items():
            self.pubs[role].publish(m)
        self.view.record_action(command)
        if ep is not None:
            ep.samples[step_count] = (stamp, dict(self.latest))
            ep.sent[step_count] = np.asarray(command, dtype=np.float64).copy()

    def _start_episode(self, stamp: float) -> None:
        cfg, dt = self.cfg, self.task.control_dt
        self.current = _Episode(self.next_index, stamp)
        self.signal = multisine(
            self.n_steps,
            dt,
            np.full(len(self.excited), cfg.amplitude),
            f_low=cfg.f_low,
            f_high=cfg.f_high,
            fade=cfg.fade,
            seed=cfg.seed + self.next_index,
        )
        self.next_index += 1
        log.info("excitation episode %d of %s started", self.current.index, self.task.name)

    def _end_episode(self, stamp: float) -> None:
        ep, self.current = self.current, None
        if ep is None:
            return
        ep.end = stamp
        if ep.commands < MIN_FRAMES:  # the task ended it at once (a goal reached): record another
            log.info("excitation episode %d ended after %d steps; recording it again", ep.index, ep.commands)
            self.next_index = ep.index
            return
        self.pending = ep

    # -- writing an episode ------------------------------------------------------------------------
    def _actions(self, ep: _Episode) -> tuple[dict[int, FloatArray], str]:
        """Each step's action as the robot applied it (by the stamps of the samples they acted
        from, which lie in the episode's time), or as sent where the robot reports none."""
        applied = {step: a for t, (step, a) in self.applied.items() if ep.start <= t < ep.end}
        for t in [t for t in self.applied if t < ep.end]:
            del self.applied[t]
        if applied:
            return applied, "applied"
        if not self._warned_sent:
            log.warning(
                "the robot reports no %s: the command log is the commands sent, which differ from "
                "what acted wherever a command came after the robot's next control tick",
                APPLIED_ACTION,
            )
            self._warned_sent = True
        return dict(ep.sent), "sent"

    def _controls(
        self, ep: _Episode, actions: dict[int, FloatArray], last: int, hold: bool
    ) -> tuple[dict[int, FloatArray], int]:
        """The actuators' inputs of each step from its action, by the task's own mapping on the
        measured state (a fresh controller from the episode's first step), and the step where the
        actions stop before ``last`` (``last`` if none is missing). With ``hold`` (commands sent),
        a step without one repeats the one before, as the robot does when none comes."""
        view = RemoteStateView(self.task, tracked_frames(self.task), self.joints)
        shadow = _CommandedView(self.task, view)
        out: dict[int, FloatArray] = {}
        action = None
        for s in range(last + 1):
            if s in ep.samples:
                for source, m in ep.samples[s][1].items():
                    view.read(source, m)
            action = actions.get(s, action if hold else None)
            if action is None:  # the controller's target is unknown from here on
                return out, s
            out[s] = shadow.controls(action)
        return out, last

    def _write_episode(self, ep: _Episode, actions: dict[int, FloatArray], log_kind: str) -> dict[str, Any]:
        """Split ``ep`` where samples are missing, write each stretch (see the module doc) and
        return what happened to the episode's samples and commands."""
        last = max(ep.samples)
        applied, stop = self._controls(ep, actions, last, hold=log_kind == "sent")
        sent, _ = self._controls(ep, ep.sent, last, hold=True)
        stretches: list[list[int]] = []
        for s in (s for s in sorted(ep.samples) if s <= stop):
            if stretches and s == stretches[-1][-1] + 1:
                stretches[-1].append(s)
            else:
                stretches.append([s])
        kept = [st for st in stretches if len(st) >= MIN_SEGMENT]
        first = min(ep.samples)
        anchor = ep.samples[first][0] - first * self.task.control_dt
        for k, stretch in enumerate(kept):
            name = f"episode_{ep.index:03d}" + (f"_{k}" if len(kept) > 1 else "")
            self._write_bag(self.cfg.out / name, ep, stretch, anchor, applied, sent)
        written = sum(len(st) for st in kept)
        late = [s for s in actions if s in ep.sent and not np.array_equal(actions[s], ep.sent[s])]
        return {
            "episode": ep.index,
            "samples": written,
            "stretches": len(kept),
            "missing_samples": last + 1 - len(ep.samples),  # never came
            "missing_actions": last - stop,  # steps after an applied action that never came
            "dropped_samples": len(ep.samples) - written,  # came, but in too short a stretch
            "late_commands": len(late) if log_kind == "applied" else None,
            "command_log": log_kind,
        }

    def _write_bag(
        self,
        path: Path,
        ep: _Episode,
        steps: list[int],
        anchor: float,
        applied: dict[int, FloatArray],
        sent: dict[int, FloatArray],
    ) -> None:
        bag = BagRecorder(path)
        state_cls = msg("sensor_msgs", "JointState")
        bag.add_topic("joint_states", state_cls, sensor_qos())
        bag.add_topic("joint_commands", state_cls, command_qos())
        bag.add_topic("sent_commands", state_cls, command_qos())
        try:
            for s in steps:
                stamp, messages = ep.samples[s]
                t = anchor + s * self.task.control_dt if self.cfg.clock == "steps" else stamp
                t_ns = round(t * 1e9)
                state = messages["joint_states"]
                set_stamp(state.header.stamp, t)
                bag.write("joint_states", state, t_ns)
                for topic, controls in (("joint_commands", applied), ("sent_commands", sent)):
                    if s in controls:  # a stretch's last sample may end where the actions do
                        zeros = np.zeros_like(controls[s])
                        bag.write(topic, joint_state_msg(self.actuators, controls[s], zeros, t), t_ns)
        finally:
            bag.close()

    def _write_finished(self) -> None:
        """Write the oldest finished episode, if any (outside the lock: the robot keeps being
        answered meanwhile); one whose every stretch is too short is recorded again."""
        with self._lock:
            if not self.finished:
                return
            ep = self.finished[0]
            actions, log_kind = self._actions(ep)
        stats = self._write_episode(ep, actions, log_kind)
        log.info("excitation episode %d recorded: %s", ep.index, stats)
        with self._lock:
            self.finished.pop(0)
            if not stats["stretches"]:
                log.warning(
                    "excitation episode %d kept no %d samples in a row; recording another",
                    ep.index,
                    MIN_SEGMENT,
                )
                return
            self.kept.append(stats)
            if len(self.kept) >= self.cfg.episodes:
                self.done.set()

    def run(self) -> dict[str, Any]:
        """Record until the episodes are done; returns a summary."""
        self.cfg.out.mkdir(parents=True)
        start = time.monotonic()
        while not self.done.wait(0.1):
            self._write_finished()
            if time.monotonic() - start > self.cfg.timeout:
                with self._lock:
                    self.done.set()
                raise SysidError(
                    f"the robot did not finish {self.cfg.episodes} excitation episodes of {self.task.name} "
                    f"within {self.cfg.timeout:g} s ({len(self.kept)} done; is it running, on "
                    "this ROS domain, with the task's topics?)"
                )
        counted = ("stretches", "missing_samples", "missing_actions", "dropped_samples", "late_commands")
        return {
            "task": self.task.name,
            "episodes": len(self.kept),
            "frames": sum(e["samples"] for e in self.kept),
            **{k: sum(e[k] or 0 for e in self.kept) for k in counted},
            "command_log": sorted({e["command_log"] for e in self.kept}),
            "per_episode": self.kept,
            "interventions": {k: v for k, v in self.safety.counts.items() if v},
            "out": str(self.cfg.out),
        }


def record_ros_excitation(cfg: RosExcitationCfg, domain_id: int) -> dict[str, Any]:
    """Record ``cfg`` from a node of this process on ROS domain ``domain_id``."""
    from robolearn.hardware.ros.harness import local_node

    with local_node("sysid_excitation", domain_id) as node:
        return ExcitationRecorder(node, cfg).run()
