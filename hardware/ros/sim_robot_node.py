"""``sim_robot_node``: a simulated robot that presents itself on ROS 2 as a real one would.

It runs the task's simulated robot (:mod:`robolearn.hardware.sim_robot`: one world of the task,
MuJoCo or PyBullet) and, every control period of wall-clock time (or, with ``realtime`` false,
whenever a command arrives):

- applies the newest command (the task's action, decoded per ``command_type``) and steps;
- publishes, with sensor-data QoS and the sample time in every stamp: ``frames/<name>``
  (``nav_msgs/Odometry``) for each frame the task's observation terms read (the Panda's tool, the
  drone's body, the car's base, objects such as the cube), ``joint_states``
  (``sensor_msgs/JointState``), and ``task_state`` (goal, waypoints, impedance target, ...; on a
  real robot an operator or perception node publishes these); for a task with cameras, each
  camera's image as image_transport publishes a camera: ``cameras/<name>/image_raw``
  (``sensor_msgs/Image``, ``rgb8``) and ``cameras/<name>/image_raw/compressed``
  (``sensor_msgs/CompressedImage``, ``compressed_format``; encoded only while someone subscribes);
- measures the task's success from the robot's side, resets episodes with the task's reset events
  and publishes each outcome on ``episode`` (``std_msgs/String``, JSON); after ``episodes``
  episodes it writes a JSON summary to ``summary_path`` (if set) and exits;
- after each step, reports on ``applied_action`` the action it took (before its actuation delay),
  stamped with the sample it started from, so a recorder knows what acted even where a command came
  late and the one before was applied again (see :func:`~.messages.applied_action_layout`);
- implements the reset protocol of training on a robot (docs/ros.md, "Resets"): a request on
  ``reset`` (``std_msgs/UInt64``, a request number) sends the robot to the task's reset pose (a new
  episode from the task's reset distribution); once its first sample is out, the number comes back
  on ``ready`` (``std_msgs/UInt64``, latched) and the robot holds until the next command. With
  ``self_reset`` false an episode that ends holds the robot where it is until such a request.

Physics starts with the first command: until then the robot holds its initial state and keeps
publishing it (a robot on the ground waiting to be commanded). Imperfections a real link has can
be injected: ``obs_latency_ms`` delivers samples late (stamped with their true sample time),
``obs_noise`` adds Gaussian noise to measured quantities (see :func:`measurement_noise`),
``drop_rate`` drops published messages at random. ``bag`` records every message published and
received as a rosbag2 folder (MCAP).

Run: ``sim_robot_node --ros-args -p task:=panda_reach -p backend:=mujoco`` or
``python -m robolearn.hardware.ros.sim_robot_node --ros-args ...``; rename topics with ``-r``.
"""

from __future__ import annotations

import collections
import functools
import json
import logging
import math
import threading
import time
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np

from robolearn.hardware.ros._rclpy import (
    RosParameterError,
    command_qos,
    latched_qos,
    msg,
    run_node,
    sensor_qos,
)
from robolearn.hardware.ros.bag import BagRecorder
from robolearn.hardware.ros.images import (
    COMPRESSED_FORMATS,
    camera_topic,
    compressed_image_msg,
    image_msg,
    message_type,
)
from robolearn.hardware.ros.messages import (
    APPLIED_ACTION,
    MessageError,
    TaskStateLayout,
    applied_action_layout,
    joint_state_msg,
    make_codec,
    odometry_msg,
)
from robolearn.hardware.ros.state_view import probe_reads, tracked_frames, tracked_joints
from robolearn.hardware.sim_robot import StepOutcome, make_sim_robot
from robolearn.sim.backend import FloatArray
from robolearn.sim.scene import JointPositionCfg, JointVelocityCfg
from robolearn.sim.transforms import quat_from_euler, quat_mul
from robolearn.tasks import make_task_cfg
from robolearn.tasks.cameras import RGB, render_cameras
from robolearn.tasks.core import TaskCfg
from robolearn.tasks.worlds import TaskWorlds

log = logging.getLogger(__name__)

SIM_BACKENDS = ("mujoco", "pybullet")
"""Backends a simulated robot runs on (one world each)."""

MEASURED_UNITS = {
    ("frame", "pos"): ("m",),
    ("frame", "quat"): ("1", "rad"),
    ("frame", "linvel"): ("m/s",),
    ("frame", "angvel"): ("rad/s",),
    ("joint", "pos"): ("rad", "m"),
    ("joint", "vel"): ("rad/s", "m/s"),
}
"""Observation-term units whose noise level carries over to each measured quantity."""


@dataclass(frozen=True)
class SimRobotParams:
    """ROS parameters of ``sim_robot_node``."""

    task: str = "panda_reach"
    """Task whose robot and scene are simulated (embodiment arm, drone or car)."""
    backend: str = "mujoco"
    """Simulator: mujoco or pybullet."""
    seed: int = 0
    """Seed of the reset distribution, noise and drops."""
    episodes: int = 0
    """Episodes to run before exiting (0: until stopped)."""
    obs_latency_ms: float = 0.0
    """Delay (ms) between taking a sample and publishing it; stamps keep the sample time."""
    obs_noise: float = 0.0
    """Sensor noise as a multiple of the task's observation noise levels (0: none, 1: the task's)."""
    drop_rate: float = 0.0
    """Probability that a published message is dropped, each message independently."""
    randomize: bool = False
    """Apply the task's domain randomization (masses, friction, gains, action latency) at every reset."""
    sim_params: str = ""
    """A parameter file from ``robolearn sysid`` giving the simulated robot's dynamics (randomization
    centred on them); "" simulates the task's nominal robot."""
    realtime: bool = True
    """Step every control period of wall-clock time; false: step once per command, as fast as they come
    (a safety layer's rate limits, counting wall-clock time between commands, then bind harder)."""
    bag: str = ""
    """Record every message published and received to this new rosbag2 folder (MCAP); "" records nothing."""
    command_type: str = ""
    """How commands arrive (see docs/ros.md); "" is the embodiment's default."""
    summary_path: str = ""
    """Write the episode outcomes as JSON here when the node stops; "" writes nothing."""
    self_reset: bool = True
    """Start the next episode when one ends; false: hold until a request on ``reset`` (training on a
    robot: the trainer ends episodes and asks for resets, docs/ros.md)."""
    command_timeout: float = 0.1
    """Seconds without a new command after which the robot holds, as a real robot's driver stops when
    its commands stop (libfranka's communication check, a drive's command watchdog): the task's
    neutral action, a gripper kept at its last command; 0 never holds. In real time only. Without
    it the robot went on with its last command: an arm driven by a tool displacement kept moving."""
    compressed_format: str = "jpeg"
    """Codec of each camera's ``image_raw/compressed`` topic: jpeg or png (image_transport's
    ``format`` parameter)."""
    jpeg_quality: int = 95
    """JPEG quality, 1 to 100 (image_transport's default 95)."""
    png_level: int = 3
    """PNG compression level, 0 to 9 (image_transport's default 3)."""

    def check(self) -> TaskCfg:
        """The task's definition; raise :class:`RosParameterError` naming a bad value."""
        if self.backend not in SIM_BACKENDS:
            raise RosParameterError(f"backend {self.backend!r} is not one of {', '.join(SIM_BACKENDS)}")
        if self.episodes < 0 or self.obs_latency_ms < 0 or self.obs_noise < 0 or self.command_timeout < 0:
            raise RosParameterError(
                "episodes, obs_latency_ms, obs_noise and command_timeout must not be negative"
            )
        if not 0.0 <= self.drop_rate < 1.0:
            raise RosParameterError(f"drop_rate must be in [0, 1), got {self.drop_rate}")
        if self.compressed_format not in COMPRESSED_FORMATS:
            raise RosParameterError(
                f"compressed_format {self.compressed_format!r} is not one of {', '.join(COMPRESSED_FORMATS)}"
            )
        if not 1 <= self.jpeg_quality <= 100 or not 0 <= self.png_level <= 9:
            raise RosParameterError(
                f"jpeg_quality must be in 1..100 and png_level in 0..9, "
                f"got {self.jpeg_quality} and {self.png_level}"
            )
        return make_task_cfg(self.task)


def measurement_noise(cfg: TaskCfg) -> dict[tuple[str, str, str], float]:
    """Standard deviation of the noise on each measured quantity, keyed (kind, name, field).

    Sensors measure frames and joints, not observations, so each observation term's ``noise_std``
    is carried over to the quantities it reads whose units match its own (a position read by a
    term in metres, an orientation by a term without units, ...); where several terms read one
    quantity, the smallest level counts. Task state (goals, checkpoints) comes from an operator or
    a map and is exact.
    """
    noise: dict[tuple[str, str, str], float] = {}
    for key, reads in probe_reads(cfg).items():
        term = cfg.observations[key]
        if term.noise_std <= 0:
            continue
        quantities = [("frame", n, f) for n, fs in reads.frames.items() for f in fs]
        quantities += [("joint", n, f) for n, fs in reads.joints.items() for f in fs]
        for kind, name, field in quantities:
            if term.units in MEASURED_UNITS[(kind, field)]:
                noise[(kind, name, field)] = min(noise.get((kind, name, field), math.inf), term.noise_std)
    return noise


def published_joints(cfg: TaskCfg) -> list[str]:
    """The robot's joints on ``joint_states``: those tracked, initialized or driven by a joint servo."""
    robot = cfg.scene.robot
    servo = [
        j for a in robot.actuators if isinstance(a, JointPositionCfg | JointVelocityCfg) for j in a.joints
    ]
    return list(dict.fromkeys([*tracked_joints(cfg), *robot.init_joint_pos, *servo]))


class RobotReport:
    """What a robot reports of one world of a task, as messages keyed by topic (see :mod:`.messages`).

    ``noise`` (from :func:`measurement_noise`, scaled) adds Gaussian noise drawn from ``rng`` to the
    measured quantities; orientations get a small random rotation of that many radians per axis.
    Cameras are reported raw and compressed with ``codec`` (``jpeg_quality``, ``png_level``).
    """

    def __init__(
        self,
        cfg: TaskCfg,
        noise: dict[tuple[str, str, str], float] | None = None,
        rng: np.random.Generator | None = None,
        codec: str = "jpeg",
        jpeg_quality: int = 95,
        png_level: int = 3,
    ) -> None:
        self.frames = tracked_frames(cfg)
        self.joints = published_joints(cfg)
        self.layout = TaskStateLayout(cfg)
        self.noise = {k: v for k, v in (noise or {}).items() if v > 0}
        self.rng = rng or np.random.default_rng()
        self.cameras = list(cfg.cameras)
        self.codec, self.jpeg_quality, self.png_level = codec, jpeg_quality, png_level

    def topics(self) -> dict[str, Any]:
        """Topic to message class."""
        out = {f"frames/{f}": msg("nav_msgs", "Odometry") for f in self.frames}
        if self.joints:
            out["joint_states"] = msg("sensor_msgs", "JointState")
        out["task_state"] = msg("std_msgs", "Float64MultiArray")
        for transport in ("raw", "compressed"):
            out |= {camera_topic(c, transport): message_type(transport) for c in self.cameras}
        return out

    def _noisy(self, key: tuple[str, str, str], value: FloatArray) -> FloatArray:
        std = self.noise.get(key, 0.0)
        return value + self.rng.normal(0.0, std, value.shape) if std > 0 else value

    def messages(self, env: TaskWorlds, t: float, skip: Collection[str] = ()) -> dict[str, Any]:
        """World 0 of ``env`` now, stamped ``t`` (s since the epoch); camera topics in ``skip`` are
        not made (a compressed topic nobody subscribes to)."""
        sim = env.sim
        out = {}
        for f in self.frames:
            quat = sim.frame_quat(f)[0]
            std = self.noise.get(("frame", f, "quat"), 0.0)
            if std > 0:
                e = self.rng.normal(0.0, std, (3, 1))
                quat = quat_mul(quat[None], quat_from_euler(e[0], e[1], e[2]))[0]
            pos = self._noisy(("frame", f, "pos"), sim.frame_pos(f)[0])
            linvel = self._noisy(("frame", f, "linvel"), sim.frame_linvel(f)[0])
            angvel = self._noisy(("frame", f, "angvel"), sim.frame_angvel(f)[0])
            out[f"frames/{f}"] = odometry_msg(f, pos, quat, linvel, angvel, t)
        if self.joints:
            pos, vel = sim.joint_pos(self.joints)[0].copy(), sim.joint_vel(self.joints)[0].copy()
            for i, j in enumerate(self.joints):
                pos[i : i + 1] = self._noisy(("joint", j, "pos"), pos[i : i + 1])
                vel[i : i + 1] = self._noisy(("joint", j, "vel"), vel[i : i + 1])
            out["joint_states"] = joint_state_msg(self.joints, pos, vel, t)
        state = {k: v[0] for k, v in env.state.items()}
        out["task_state"] = self.layout.to_msg(state, int(env.step_count[0]), t)
        if self.cameras:  # each camera's image of world 0 (issue 13)
            images = render_cameras(env)
            for c in self.cameras:
                frame = images[c + RGB][0]
                out[camera_topic(c)] = image_msg(frame, t, c)
                if camera_topic(c, "compressed") not in skip:
                    out[camera_topic(c, "compressed")] = compressed_image_msg(
                        frame, t, c, self.codec, self.jpeg_quality, self.png_level
                    )
        return out


@dataclass
class EpisodeRecord:
    """One finished episode as the robot side measured it."""

    episode: int
    success: bool
    ret: float
    length: int

    def as_json(self) -> dict[str, Any]:
        return {"episode": self.episode, "success": self.success, "return": self.ret, "length": self.length}


class SimRobotNode:
    """The node (see the module doc); ``close()`` stops it and flushes the bag and summary."""

    def __init__(self, node: Any, params: SimRobotParams) -> None:
        self.node, self.p = node, params
        self.cfg = params.check()
        self.codec = make_codec(self.cfg, params.command_type)
        self.robot = make_sim_robot(
            params.task,
            params.backend,
            seed=params.seed,
            randomize=params.randomize,
            sim_params=params.sim_params or None,
        )
        self.robot.connect()  # the first episode starts
        self.rng = np.random.default_rng(np.random.SeedSequence([params.seed, 1]))
        noise = measurement_noise(self.cfg) if params.obs_noise else {}
        self.report = RobotReport(
            self.cfg,
            {k: v * params.obs_noise for k, v in noise.items()},
            self.rng,
            params.compressed_format,
            params.jpeg_quality,
            params.png_level,
        )
        self.period = self.cfg.control_dt
        self.latency = params.obs_latency_ms / 1000.0

        self._lock = threading.Lock()
        self._action = np.asarray(self.cfg.action.neutral, dtype=np.float64).copy()
        self._started = False
        self._held = False  # an ended episode waits for a reset request (self_reset false)
        self._reset_request: int | None = None
        self._command = threading.Event()
        self._stop = threading.Event()
        self.done = threading.Event()
        self._outbox: collections.deque[tuple[float, list[tuple[Any, Any]]]] = collections.deque()
        self.records: list[EpisodeRecord] = []
        self.counts = {
            "steps": 0,
            "commands": 0,
            "rejected_commands": 0,
            "dropped": 0,
            "overruns": 0,
            "command_timeouts": 0,
        }
        self._last_command = -math.inf  # when the newest command arrived (monotonic s)
        self._timeout_logged = -math.inf
        gripper = self.cfg.action.gripper
        self._kept = None if gripper is None else self.cfg.action.names.index(gripper.action)
        """The action component a hold keeps at its last command (the gripper's), or None."""

        sensor = sensor_qos()
        self.pubs = {t: node.create_publisher(cls, t, sensor) for t, cls in self.report.topics().items()}
        self.compressed_topics = [camera_topic(c, "compressed") for c in self.report.cameras]
        self.episode_pub = node.create_publisher(msg("std_msgs", "String"), "episode", 10)
        self.ready_pub = node.create_publisher(msg("std_msgs", "UInt64"), "ready", latched_qos())
        # Reliable, as ros2_control's controller state: a recorder wants every step's action.
        self.applied_pub = node.create_publisher(msg("std_msgs", "Float64MultiArray"), APPLIED_ACTION, 10)
        self.applied_layout = applied_action_layout(self.cfg)
        self._sample: tuple[float, int] | None = None  # stamp and step count of the last sample made
        self.reset_sub = node.create_subscription(
            msg("std_msgs", "UInt64"), "reset", self._on_reset, command_qos()
        )
        self.subs = {
            role: node.create_subscription(
                cls, role, functools.partial(self._on_command, role), command_qos()
            )
            for role, cls in self.codec.roles().items()
        }
        self.bag = BagRecorder(Path(params.bag)) if params.bag else None
        if self.bag is not None:
            # A received topic is recorded with the profile it is subscribed with: the one
            # policy_node offers (command_qos), which is what a replay should offer again.
            pubs = [*self.pubs.values(), self.episode_pub, self.ready_pub, self.applied_pub]
            for entity in [*pubs, *self.subs.values()]:
                self.bag.add_topic(entity.topic_name, entity.msg_type, entity.qos_profile)
        self._thread = threading.Thread(target=self._run, name="sim_robot_loop", daemon=True)
        self._thread.start()
        log.info(
            "sim robot %s on %s: frames %s, joints %s, commands %s (%s)",
            self.cfg.name, params.backend, self.report.frames, self.report.joints, self.codec.name,
            "real time" if params.realtime else "one step per command",
        )  # fmt: skip

    # -- commands ------------------------------------------------------------------------------
    def _on_command(self, role: str, m: Any) -> None:
        if self.bag is not None:
            self.bag.write(self.subs[role].topic_name, m, time.time_ns())
        with self._lock:
            try:
                self.codec.decode(role, m, self._action)
            except MessageError as exc:
                self.counts["rejected_commands"] += 1
                log.warning("ignored a command: %s", exc)
                return
            self.counts["commands"] += 1
            self._last_command = time.monotonic()
            self._started = True
        self._command.set()

    def _commands_stopped(self) -> bool:
        """Whether the last command is older than ``command_timeout`` (counted, logged once a second)."""
        timeout = self.p.command_timeout
        now = time.monotonic()
        if not self.p.realtime or timeout <= 0 or now - self._last_command <= timeout:
            return False
        self.counts["command_timeouts"] += 1
        if now - self._timeout_logged >= 1.0:
            self._timeout_logged = now
            log.warning(
                "no command for %.2f s (command_timeout %g s): holding (%d steps so far)",
                now - self._last_command, timeout, self.counts["command_timeouts"],
            )  # fmt: skip
        return True

    def _hold_action(self, last: FloatArray) -> FloatArray:
        """The task's neutral action, the gripper where it was last commanded."""
        hold = np.asarray(self.cfg.action.neutral, dtype=np.float64).copy()
        if self._kept is not None:
            hold[self._kept] = last[self._kept]
        return hold

    def _on_reset(self, m: Any) -> None:
        """A reset request: served by the control loop at its next tick."""
        with self._lock:
            self._reset_request = int(m.data)

    def _serve_reset(self) -> int | None:
        """Start a new episode if one was asked for; returns the request's number."""
        with self._lock:
            request, self._reset_request = self._reset_request, None
            if request is None:
                return None
            self._started = False  # hold the reset pose until the next command
            self._action[:] = self.cfg.action.neutral
        ended = self.robot.last_step
        if not self._held and ended.episode_length > 0:  # ended by the trainer, not by the task
            self._finish_episode(ended)
        self._held = False
        self.robot.reset()
        return request

    # -- the control loop ------------------------------------------------------------------------
    def _run(self) -> None:
        try:
            self._loop()
        except Exception:
            if self.node.context.ok():  # not merely rclpy shutting down under the loop (Ctrl-C)
                log.exception("the simulation loop failed")
            self.done.set()

    def _loop(self) -> None:
        next_tick = time.monotonic()
        last_tick = -math.inf
        while not self._stop.is_set():
            now = time.monotonic()
            self._release(now)
            if self.p.realtime and now >= next_tick:
                self._tick(step=self._started)
                next_tick += self.period
                if next_tick < time.monotonic():
                    self.counts["overruns"] += 1
                    next_tick = time.monotonic() + self.period
            elif not self.p.realtime and self._command.is_set():
                self._command.clear()
                self._tick(step=True)
                last_tick = time.monotonic()
            elif not self.p.realtime and now - last_tick >= self.period + self.latency:
                # Idle: the robot stands still but keeps reporting. A sample goes out ``latency``
                # after its tick, and the controller has a period to answer it before this counts.
                self._tick(step=False)
                last_tick = time.monotonic()
            wake = next_tick if self.p.realtime else last_tick + self.period + self.latency
            if self._outbox:
                wake = min(wake, self._outbox[0][0])
            timeout = max(wake - time.monotonic(), 0.0)
            if self.p.realtime:
                self._stop.wait(timeout)
            else:
                self._command.wait(timeout)

    def _tick(self, step: bool) -> None:
        ready = self._serve_reset()
        applied = None
        if step and ready is None and not self._held:
            with self._lock:
                action = self._action.copy()
            if self._commands_stopped():
                action = self._hold_action(action)
            if self._sample is not None:  # what acts from the last sample on: bounded, not yet delayed
                taken = np.asarray(self.robot.worlds.sanitize(action[None])[0])[0]
                start_t, start_step = self._sample
                applied = self.applied_layout.to_msg({"action": taken}, start_step, start_t)
            self.robot.apply(action)
            self.counts["steps"] += 1
            outcome = self.robot.last_step
            if outcome.terminated or outcome.truncated:
                if self.p.self_reset:
                    self.robot.reset()  # before reporting: the robot reports the next episode's start
                else:
                    self._held = True
                self._finish_episode(outcome)
        worlds = self.robot.worlds
        # As image_transport does, compress a camera's image only for someone who reads it (or the bag).
        idle = [
            t
            for t in self.compressed_topics
            if self.bag is None and self.pubs[t].get_subscription_count() == 0
        ]
        stamp = time.time()
        messages = self.report.messages(worlds, stamp, skip=idle)
        self._sample = (stamp, int(worlds.step_count[0]))
        sample = [(self.pubs[t], m) for t, m in messages.items()]
        if applied is not None:
            sample.append((self.applied_pub, applied))
        if ready is not None:  # after the new episode's first sample, with its latency
            sample.append((self.ready_pub, msg("std_msgs", "UInt64")(data=ready)))
        if self.latency > 0:
            self._outbox.append((time.monotonic() + self.latency, sample))
        else:
            self._publish(sample)

    def _release(self, now: float) -> None:
        while self._outbox and self._outbox[0][0] <= now:
            self._publish(self._outbox.popleft()[1])

    def _publish(self, sample: Sequence[tuple[Any, Any]]) -> None:
        for pub, m in sample:
            # The protocol's answers are reliable; only sensor samples are lost on a bad link.
            reliable = pub is self.ready_pub or pub is self.applied_pub
            if self.p.drop_rate > 0 and not reliable and self.rng.random() < self.p.drop_rate:
                self.counts["dropped"] += 1
                continue
            pub.publish(m)
            if self.bag is not None:
                self.bag.write(pub.topic_name, m, time.time_ns())

    # -- what the robot reports ------------------------------------------------------------------
    def _finish_episode(self, final: StepOutcome) -> None:
        record = EpisodeRecord(
            len(self.records), final.episode_success, final.episode_return, final.episode_length
        )
        self.records.append(record)
        out = msg("std_msgs", "String")(data=json.dumps(record.as_json()))
        self.episode_pub.publish(out)
        if self.bag is not None:
            self.bag.write(self.episode_pub.topic_name, out, time.time_ns())
        log.info(
            "episode %d: success %s, return %.2f, %d steps",
            record.episode,
            record.success,
            record.ret,
            record.length,
        )
        if self.p.episodes and len(self.records) >= self.p.episodes:
            self._stop.set()
            self.done.set()

    def summary(self) -> dict[str, Any]:
        """Outcomes so far: success rate, mean return and length, every episode, counters."""
        successes = [r.success for r in self.records]
        return {
            "task": self.cfg.name,
            "backend": self.p.backend,
            "episodes": len(self.records),
            "success_rate": float(np.mean(successes)) if successes else None,
            "return_mean": float(np.mean([r.ret for r in self.records])) if self.records else None,
            "length_mean": float(np.mean([r.length for r in self.records])) if self.records else None,
            "per_episode": [r.as_json() for r in self.records],
            "counts": dict(self.counts),
            "params": asdict(self.p),
        }

    def close(self) -> None:
        """Stop the loop, close the bag and write the summary."""
        self._stop.set()
        self._thread.join(timeout=5.0)
        if self.bag is not None:
            self.bag.close()
        if self.p.summary_path:
            path = Path(self.p.summary_path)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(self.summary(), indent=2))
        self.robot.disconnect()


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of ``sim_robot_node``."""
    run_node("sim_robot_node", SimRobotParams, SimRobotNode, argv)


if __name__ == "__main__":
    main()
