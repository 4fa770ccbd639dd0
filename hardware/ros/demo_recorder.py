"""``demo_recorder``: teleoperated demonstrations from a ROS 2 robot, written as a LeRobot dataset.

It listens to what the robot publishes (the topics ``policy_node`` reads, see :mod:`.messages`),
to the commands a teleoperation node sends it (``command``, per ``command_type``) and to ``episode``
(``std_msgs/String``, JSON with ``success``, ``return`` and ``length``: ``sim_robot_node``
publishes it; with a real robot, the operator's node marks episode ends and outcomes there).

The observation is rebuilt by the task's own terms on a
:class:`~robolearn.hardware.ros.state_view.RemoteStateView`. Messages are gathered by stamp (the
sources of one sample may arrive interleaved with the next one's when the recorder lags, and its
queues are deep for the same reason); a complete new sample (every source stamped alike) whose
``step_count`` advanced closes the previous step: its frame is the observation
then, the last command received since (the one the robot applied), and the reward and success the
task's own terms give on the new state. Recording starts with an episode (``step_count`` 0). An
episode ends when the next one begins or its ``episode`` message says so (matched by its length);
its last frame takes the robot's success, and the reward that makes the frames' rewards add up to
the episode's return as the robot measured it. Every frame
is flagged ``is_intervention`` (a person drove). Episodes go to
:class:`robolearn.data.episodes.EpisodeWriter` (a new dataset, or appended to one of the same task).

Run: ``demo_recorder --ros-args -p task:=panda_pick_cube -p out:=data/pick``.
"""

from __future__ import annotations

import collections
import functools
import json
import logging
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from robolearn.data.episodes import EpisodeWriter
from robolearn.data.writer import DatasetWriter
from robolearn.hardware.ros._rclpy import RosParameterError, command_qos, msg, run_node, sensor_qos
from robolearn.hardware.ros.messages import MessageError, make_codec
from robolearn.hardware.ros.state_view import RemoteStateView, tracked_frames, tracked_joints
from robolearn.tasks import make_task_cfg

log = logging.getLogger(__name__)

QUEUE_DEPTH = 100
"""Messages kept per state topic for a recorder that falls behind (seconds of samples, not one)."""
INCOMPLETE_SAMPLES = 16
"""Incomplete samples kept waiting for their other sources (older ones are given up)."""

SOURCE_TYPES = {
    "joint_states": ("sensor_msgs", "JointState"),
    "task_state": ("std_msgs", "Float64MultiArray"),
}
"""Message type of each state source that is not a frame (frames are ``nav_msgs/Odometry``)."""


class Frame(NamedTuple):
    """One recorded step: what was seen, what was done, what the task's terms made of the result."""

    obs: dict[str, np.ndarray]
    action: np.ndarray
    reward: float
    success: bool


class ClosedEpisode(NamedTuple):
    """An episode whose end was seen, waiting for the robot's outcome to score its last step."""

    frames: list[Frame]
    length: int
    last_obs: dict[str, np.ndarray]
    last_action: np.ndarray


@dataclass(frozen=True)
class DemoRecorderParams:
    """ROS parameters of ``demo_recorder``."""

    task: str = ""
    """Task the robot runs (its observation, action, rewards)."""
    out: str = ""
    """Dataset folder: created, or appended to if it holds a dataset of the same task."""
    command_type: str = ""
    """How the teleoperation's commands travel (see docs/ros.md); "" is the embodiment's default."""
    episodes: int = 0
    """Exit after saving this many episodes (0: until stopped)."""


class DemoRecorderNode:
    """The node (see the module doc)."""

    def __init__(self, node: Any, params: DemoRecorderParams) -> None:
        if not params.task or not params.out:
            raise RosParameterError("parameters task and out are required")
        if params.episodes < 0:
            raise RosParameterError("episodes must not be negative")
        self.p = params
        self.cfg = make_task_cfg(params.task)
        self.codec = make_codec(self.cfg, params.command_type)
        self.view = RemoteStateView(self.cfg, tracked_frames(self.cfg), tracked_joints(self.cfg))
        out = Path(params.out)
        if (out / "meta" / "info.json").is_file():
            dataset = DatasetWriter.open(out)
        else:
            with np.errstate(all="ignore"):  # no state yet; only the shapes count
                shapes = {k: v.shape for k, v in self.view.observe().items()}
            dataset = DatasetWriter.for_task(out, self.cfg, shapes, repo_id=f"local/{self.cfg.name}")
        self.writer = EpisodeWriter(dataset, self.cfg.description)
        self._parts: dict[float, dict[str, Any]] = {}
        """Messages of samples not complete yet, by stamp."""
        self._action = np.asarray(self.cfg.action.neutral, dtype=np.float64).copy()
        self._pending: dict[str, np.ndarray] | None = None
        """The observation of the step under way (its frame is made once the robot has stepped)."""
        self._step = 0
        self._waiting = True
        """Until a sample at step 0: samples belong to an episode not recorded from its start."""
        self._frames: list[Frame] = []
        self._closed: collections.deque[ClosedEpisode] = collections.deque()
        self._outcomes: collections.deque[tuple[bool, float, int]] = collections.deque(maxlen=8)
        self._sampled = -math.inf
        self._lock = threading.Lock()
        self.saved = 0
        self.done = threading.Event()
        self.subs = [
            node.create_subscription(
                msg(*SOURCE_TYPES.get(src, ("nav_msgs", "Odometry"))),
                src,
                functools.partial(self._on_state, src),
                sensor_qos(QUEUE_DEPTH),
            )
            for src in self.view.sources
        ]
        self.subs += [
            node.create_subscription(cls, role, functools.partial(self._on_command, role), command_qos())
            for role, cls in self.codec.roles().items()
        ]
        self.subs.append(node.create_subscription(msg("std_msgs", "String"), "episode", self._on_episode, 10))
        log.info("recording %s demonstrations to %s", self.cfg.name, out)

    def _on_command(self, role: str, m: Any) -> None:
        with self._lock:
            try:
                self.codec.decode(role, m, self._action)
            except MessageError as exc:
                log.warning("ignored a command: %s", exc)

    def _on_state(self, source: str, m: Any) -> None:
        with self._lock:
            stamp = self.view.stamp_of(source, m)
            if stamp <= self._sampled:
                return
            parts = self._parts.setdefault(stamp, {})
            parts[source] = m
            if len(parts) < len(self.view.sources):
                while len(self._parts) > INCOMPLETE_SAMPLES:
                    del self._parts[min(self._parts)]
                return
            self._sampled = stamp
            self._parts = {s: p for s, p in self._parts.items() if s > stamp}
            try:
                for src, part in parts.items():
                    self.view.read(src, part)
            except MessageError as exc:
                log.warning("ignored a sample: %s", exc)
                return
            step = int(self.view.step_count[0])
            if self._waiting and step != 0:
                return  # the rest of an episode already closed, or one begun before recording
            self._waiting = False
            if self._pending is not None and step < self._step:
                # A new episode began before the robot's word on the last one: close it unscored.
                self._closed.append(self._close_open())
            elif self._pending is not None and step > self._step:
                # The robot stepped, with the command received last; the observation terms that
                # read the last action must see it too.
                self.view.record_action(self._action)
                reward, success = self.view.score_step()
                self._frames.append(Frame(self._pending, self._action.copy(), reward, success))
            self._pending, self._step = self.view.observe(), step
            self._save_scored()

    def _close_open(self) -> ClosedEpisode:
        """End the episode being recorded: its last step's frame awaits the robot's outcome."""
        assert self._pending is not None
        closed = ClosedEpisode(self._frames, self._step + 1, self._pending, self._action.copy())
        self._frames, self._pending = [], None
        self.view.new_episode()
        return closed

    def _on_episode(self, m: Any) -> None:
        try:
            data = json.loads(m.data)
            outcome = (bool(data["success"]), float(data["return"]), int(data["length"]))
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("ignored an episode message: %s", exc)
            return
        with self._lock:
            self._outcomes.append(outcome)
            if self._pending is not None and self._step + 1 == outcome[2]:
                # The end of the episode under way (no sample of the next one yet).
                self._closed.append(self._close_open())
                self._waiting = True
            self._save_scored()

    def _save_scored(self) -> None:
        """Save the closed episodes whose outcome has come, matched by length (steps taken)."""
        while self._closed:
            episode = self._closed[0]
            match = next((o for o in self._outcomes if o[2] == episode.length), None)
            if match is None:
                return
            self._outcomes.remove(match)
            self._closed.popleft()
            success, ret, length = match
            for f in episode.frames:
                self.writer.add_frame(0, f.obs, f.action, f.reward, f.success, False, is_intervention=True)
            # The last step's reward is what the robot's return leaves: the episode adds up as it measured.
            last_reward = ret - sum(f.reward for f in episode.frames)
            terminated = (success and self.cfg.end_on_success) or length < self.cfg.episode_length
            self.writer.add_frame(
                0, episode.last_obs, episode.last_action, last_reward, success, terminated, True
            )
            index = self.writer.end_episode()
            if index is None:  # a frame was not finite: the writer said so, and nothing was saved
                continue
            log.info("saved episode %d: %d frames, success %s", index, length, success)
            self.saved += 1
            if self.p.episodes and self.saved >= self.p.episodes:
                self.done.set()

    def close(self) -> None:
        """Close the dataset (an unfinished episode is dropped)."""
        with self._lock:
            self.writer.close()


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of ``demo_recorder``."""
    run_node("demo_recorder", DemoRecorderParams, DemoRecorderNode, argv)


if __name__ == "__main__":
    main()
