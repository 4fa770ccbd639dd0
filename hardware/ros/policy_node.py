"""``policy_node``: runs an exported policy against a robot over ROS 2, through the safety layer.

It subscribes (sensor-data QoS) to what a robot publishes (see :mod:`.messages`): ``frames/<name>``,
``joint_states`` and ``task_state``, for the frames and joints the task's observation terms read.
A pixel policy's cameras come as ``cameras/<name>/image_raw`` (``sensor_msgs/Image``) or, with
``image_transport`` compressed, ``cameras/<name>/image_raw/compressed`` (JPEG or PNG), converted
to the policy's encoding and resized to its resolution (:mod:`.images`).
It rebuilds the task's observation by running those very terms on a
:class:`~robolearn.hardware.ros.state_view.RemoteStateView`, runs the policy, passes the action
through :class:`robolearn.hardware.safety.SafetyLayer` and publishes the command per
``command_type`` (see ``docs/ros.md``).

Timing: with ``trigger`` ``timer`` (the default) the policy acts at ``rate_hz`` on the newest
messages, on a thread of its own that sleeps to absolute deadlines (not the executor, whose
callbacks would delay it). With ``trigger`` ``observation`` it acts as soon as a complete new sample
arrives (every source stamped with the same time), which removes the wait for the next tick; the
thread then only enforces the watchdog.

State messages arrive serialized (``raw=True``) and are read field by field into the view
(:class:`~robolearn.hardware.ros.messages.CdrReader`), without rclpy's Python message objects. Only
the topics the task needs are required (:func:`~robolearn.hardware.ros.state_view.required_sources`);
one still silent a second after start is logged by name, a refused message once with what is
expected, both then every :data:`REPEAT_LOG_PERIOD` seconds. ``profile_path`` times every step's
stages (:data:`STAGES`); a step longer than the period counts as a deadline miss.

Safety: the newest stamps of the required topics feed the safety layer's watchdog; stale
observations (a dead sensor, a cut link) make it send the embodiment's safe-stop command.
``estop`` (``std_msgs/Bool``, latched: reliable, transient local) true latches the e-stop;
``estop_reset`` (``std_msgs/Empty``) clears it, and a latched protective stop (geofence, joint
limit) too; ``release_at_reset`` releases the latter when the robot starts a new episode.
Intervention counters go out on ``safety`` (``std_msgs/String``, JSON) twice a second.

Run: ``policy_node --ros-args -p policy:=scripted:panda_reach`` or ``-p policy:=exported/dir``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import json
import logging
import math
import os
import struct
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

from robolearn.hardware.registry import load_safety_config, safety_robot
from robolearn.hardware.ros import TRIGGERS
from robolearn.hardware.ros._rclpy import (
    RosParameterError,
    command_qos,
    latched_qos,
    msg,
    run_node,
    sensor_qos,
)
from robolearn.hardware.ros.images import TRANSPORTS, FrameReader, camera_topic, message_type
from robolearn.hardware.ros.messages import MessageError, make_codec, within_command
from robolearn.hardware.ros.state_view import (
    RemoteStateView,
    completes_sample,
    required_sources,
    tracked_frames,
    tracked_joints,
)
from robolearn.hardware.safety import SafetyLayer
from robolearn.policy.runtime import RUNTIMES, Runtime, load_exported, scripted_policy
from robolearn.tasks import make_task_cfg

log = logging.getLogger(__name__)

SAFETY_REPORT_PERIOD = 0.5
"""Seconds between messages on ``safety``."""
MISSING_SOURCE_GRACE = 1.0
"""Seconds after start before a required topic that has sent nothing is reported by name."""
REPEAT_LOG_PERIOD = 10.0
"""Seconds between repeats of one warning (a missing topic, a refused message on one topic): the
first says what is expected, the repeats that it persists, not once per message (issue 12: 766
identical lines in 20 s)."""
MESSAGE_TYPES = {
    "joint_states": ("sensor_msgs", "JointState"),
    "task_state": ("std_msgs", "Float64MultiArray"),
}
"""Message type of each state topic other than ``frames/<name>`` (``nav_msgs/Odometry``)."""


STAGES = ("arrival", "read", "images", "observe", "policy", "safety", "publish", "step")
"""Stages of one control step timed with ``profile_path`` (ms): ``arrival`` from the stamp of the
message that completed the sample to its callback (the robot's publishing, DDS transport, rclpy's
deserialization and the executor's wake-up; in timer mode, the tick's lateness), ``read`` that
message into the view (a camera's: decoded, converted and resized), ``images`` the camera frames the
step used, each made from its message in its own callback (decode, convert, resize; summed over the
cameras; 0 for a state policy), ``observe`` the observation terms and the robot state, ``policy``
normalization and network, ``safety`` the safety layer, ``publish`` encoding and publishing the
command, ``step`` observe to publish."""
MAX_PROFILED_STEPS = 200_000
"""Steps kept by the profiler (preallocated: a control step allocates nothing for it)."""


class StageProfile:
    """Per-step stage times (ms), in a preallocated array; later steps past its size are not kept."""

    def __init__(self, steps: int = MAX_PROFILED_STEPS) -> None:
        self.times = np.zeros((steps, len(STAGES)))
        self.count = 0

    def add(self, arrival: float, read: float, images: float, marks: Sequence[float]) -> None:
        """One step: the times (s) before it, and ``marks``, perf_counter readings (s) at the start
        and after each of observe, policy, safety and publish."""
        if self.count < len(self.times):
            row = self.times[self.count]
            row[0], row[1], row[2] = arrival * 1e3, read * 1e3, images * 1e3
            for k in range(4):
                row[3 + k] = (marks[k + 1] - marks[k]) * 1e3
            row[7] = (marks[4] - marks[0]) * 1e3
            self.count += 1

    def write(self, path: Path) -> None:
        """The kept steps as ``{stage: [ms, ...]}``."""
        kept = self.times[: self.count]
        path.write_text(json.dumps({s: kept[:, i].tolist() for i, s in enumerate(STAGES)}))


class ThrottledLog:
    """Warnings by key: the first at once, repeats at most every :data:`REPEAT_LOG_PERIOD` seconds
    with the number held back in between."""

    def __init__(self, period: float = REPEAT_LOG_PERIOD) -> None:
        self.period = period
        self._next: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def warning(self, key: str, text: str, count: bool = True) -> None:
        """Log ``text`` unless ``key`` was logged less than a period ago; ``count`` the held-back
        calls (messages; not the checks of a condition that persists)."""
        now = time.monotonic()
        if now < self._next.get(key, -math.inf):
            self._held[key] = self._held.get(key, 0) + count
            return
        held = self._held.pop(key, 0)
        log.warning("%s%s", text, f" ({held} more like it since the last report)" if held else "")
        self._next[key] = now + self.period


@dataclass(frozen=True)
class PolicyNodeParams:
    """ROS parameters of ``policy_node``."""

    policy: str = ""
    """Exported policy folder, or ``scripted:TASK`` for a task's scripted expert."""
    runtime: str = "auto"
    """What runs an exported network: auto (ONNX Runtime where the folder has policy.onnx and
    onnxruntime is installed, else TorchScript), torchscript or onnx."""
    robot: str = ""
    """Safety configuration: a robot name (see ``robolearn robots``) or a YAML path; "" picks the task's
    robot's, else the embodiment's."""
    command_type: str = ""
    """Command message type (see docs/ros.md); "" is the embodiment's default."""
    rate_hz: float = 0.0
    """Control rate (Hz); 0 is the policy's own control rate."""
    watchdog_timeout: float = 0.0
    """Observations older than this (s, by their stamps) make the safety layer stop the robot; 0 keeps
    the safety configuration's ``watchdog_timeout``."""
    trigger: str = "timer"
    """timer: act at rate_hz on the newest messages; observation: act on every complete new sample."""
    priority: int = 0
    """SCHED_FIFO real-time priority (1-99) of the node's threads, as ros2_control gives its control
    loop; 0 keeps the normal scheduler. Needs CAP_SYS_NICE (root, or an rtprio limit)."""
    cpus: str = ""
    """CPUs the node's threads run on, comma-separated (``"1"``, ``"2,3"``); "" leaves them to the
    scheduler. A core of its own keeps the control step's code and data in that core's caches."""
    profile_path: str = ""
    """Write each control step's stage times (ms, see :data:`STAGES`) to this JSON file when the
    node stops; "" keeps none (timing costs a few microseconds a step)."""
    release_at_reset: bool = False
    """Release a latched protective stop (the robot left its geofence, a joint passed its range) when
    the robot starts a new episode (its step count falls back), as a stand-in that resets itself
    within its limits does: each evaluation episode then stands alone (``robolearn bench``). False
    keeps it latched until ``estop_reset``, the release of a person who has put the robot back."""
    image_transport: str = "raw"
    """How a pixel policy's cameras arrive, as image_transport names it: raw (``sensor_msgs/Image`` on
    ``cameras/<name>/image_raw``) or compressed (``sensor_msgs/CompressedImage``, JPEG or PNG, on
    ``cameras/<name>/image_raw/compressed``). See docs/ros.md."""

    def check(self) -> None:
        """Raise :class:`RosParameterError` naming a bad value."""
        if not self.policy:
            raise RosParameterError(
                "parameter policy is required: an exported policy folder or scripted:TASK"
            )
        if self.runtime not in RUNTIMES:
            raise RosParameterError(f"runtime {self.runtime!r} is not one of {', '.join(RUNTIMES)}")
        if self.rate_hz < 0 or self.watchdog_timeout < 0:
            raise RosParameterError("rate_hz and watchdog_timeout must not be negative")
        if self.trigger not in TRIGGERS:
            raise RosParameterError(f"trigger {self.trigger!r} is not one of {', '.join(TRIGGERS)}")
        if not 0 <= self.priority <= 99:
            raise RosParameterError(f"priority must be in 0..99, got {self.priority}")
        if self.cpus:
            parse_cpus(self.cpus)
        if self.image_transport not in TRANSPORTS:
            raise RosParameterError(
                f"image_transport {self.image_transport!r} is not one of {', '.join(TRANSPORTS)}"
            )


def _each_thread(apply: Callable[[int], None]) -> None:
    """Apply to every thread of this process (by thread ID); those started later inherit it from theirs."""
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(ProcessLookupError):  # a thread that just ended
            apply(int(tid))


def set_realtime_priority(priority: int) -> None:
    """Schedule this process SCHED_FIFO at ``priority``: every thread it has (the middleware's
    receive threads start with the node, before its parameters are read) and those it starts
    afterwards; and keep the CPUs out of deep idle states while it runs (``/dev/cpu_dma_latency``
    0, as cyclictest does), where waking up costs a control step several times its compute.

    Other processes then cannot delay the control loop; it sleeps most of the time, and Linux's
    real-time throttling keeps 5 % of each second for everything else regardless.
    """
    param = os.sched_param(priority)
    try:
        _each_thread(lambda tid: os.sched_setscheduler(tid, os.SCHED_FIFO, param))
    except PermissionError:
        raise RosParameterError(
            f"priority {priority} needs permission to use SCHED_FIFO (CAP_SYS_NICE, or an rtprio limit "
            "in /etc/security/limits.conf); use priority 0 for the normal scheduler"
        ) from None
    global _CPU_LATENCY_FD
    if _CPU_LATENCY_FD is None:
        with contextlib.suppress(OSError):  # no such device, or no permission: idle states stay
            _CPU_LATENCY_FD = os.open("/dev/cpu_dma_latency", os.O_WRONLY)
            os.write(_CPU_LATENCY_FD, struct.pack("i", 0))  # held while the file is open


def parse_cpus(text: str) -> set[int]:
    """``"1"`` or ``"0,2"`` as CPU numbers; raises :class:`RosParameterError`."""
    try:
        cpus = {int(c) for c in text.split(",")}
    except ValueError:
        cpus = set()
    count = os.cpu_count() or 1  # not this process's affinity: a parent's pinning is inherited
    if not cpus or not cpus <= set(range(count)):
        raise RosParameterError(f"cpus {text!r} must be comma-separated CPU numbers from 0 to {count - 1}")
    return cpus


def pin_to_cpus(cpus: set[int]) -> None:
    """Run every thread of this process, and those it starts afterwards, on ``cpus`` only."""
    _each_thread(lambda tid: os.sched_setaffinity(tid, cpus))


_CPU_LATENCY_FD: int | None = None
"""The open ``/dev/cpu_dma_latency`` request of :func:`set_realtime_priority` (released at exit)."""


def load_policy_spec(spec: str, runtime: Runtime = "torchscript") -> Any:
    """An exported policy folder (run by ``runtime``), or ``scripted:TASK``."""
    if spec.startswith("scripted:"):
        return scripted_policy(spec.removeprefix("scripted:"))
    return load_exported(Path(spec), runtime)


class PolicyNode:
    """The node (see the module doc)."""

    def __init__(self, node: Any, params: PolicyNodeParams) -> None:
        params.check()
        if params.priority:
            set_realtime_priority(params.priority)
        if params.cpus:
            pin_to_cpus(parse_cpus(params.cpus))
        self.node, self.p = node, params
        self.policy = load_policy_spec(params.policy, cast(Runtime, params.runtime))
        if getattr(self.policy, "runtime", None) == "torchscript":
            import torch  # only for a TorchScript export: an ONNX one runs without torch

            torch.set_num_threads(1)  # one thread: no spinning workers stealing the control loop's core
        self.cfg = make_task_cfg(self.policy.meta.task)
        self.codec = make_codec(self.cfg, params.command_type)
        robot = safety_robot(self.cfg, params.robot)
        safety_cfg = within_command(load_safety_config(robot), self.codec)
        if params.watchdog_timeout > 0:
            safety_cfg = dataclasses.replace(safety_cfg, watchdog_timeout=params.watchdog_timeout)
        self.safety = SafetyLayer(safety_cfg, self.cfg)
        self.watchdog_timeout = safety_cfg.watchdog_timeout
        self.rate_hz = params.rate_hz or float(self.policy.meta.control_hz)
        self.period = 1.0 / self.rate_hz

        self.view = RemoteStateView(self.cfg, tracked_frames(self.cfg), tracked_joints(self.cfg))
        with np.errstate(all="ignore"):  # the view holds no state yet; only the shapes count
            shapes = {k: v.shape for k, v in self.view.observe().items()}
        self.policy.check_compatible(self.cfg, shapes)
        self.stamps = dict.fromkeys(self.view.sources, -math.inf)
        self.required = required_sources(self.cfg)
        """The sources without which the node commands nothing; their oldest stamp feeds the watchdog."""
        # A pixel policy's cameras (issue 13) are required like state topics: a stale camera trips
        # the watchdog as a stale state topic does.
        transport = params.image_transport
        self.cameras = {
            camera_topic(c.camera, transport): FrameReader(c, transport) for c in self.policy.meta.cameras
        }
        """Each camera's topic and what turns its messages into the policy's frames."""
        self.frames: dict[str, Any] = {}
        """The newest frame of each camera, by the policy's input name."""
        self.image_seconds = dict.fromkeys(self.cameras, 0.0)
        """The time each camera's newest frame took to make from its message (s)."""
        self.stamps |= dict.fromkeys(self.cameras, -math.inf)
        self.required += list(self.cameras)
        self.throttled = ThrottledLog()
        self._last_step_count = 0
        self._acted_stamp = -math.inf
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.done = threading.Event()  # set only by close(): the node runs until interrupted
        self.counts = {
            "commands": 0,
            "rejected_messages": 0,
            "stale_ticks": 0,
            "overruns": 0,
            "deadline_misses": 0,
        }
        self.profile = StageProfile() if params.profile_path else None
        self._arrival = (0.0, 0.0)  # the newest message's stamp-to-callback time and read time (s)

        # Serialized (raw) state messages, read field by field into the view: rclpy's conversion to
        # Python messages cost more than all the node does with them (issue 18).
        self.subs = [
            node.create_subscription(
                msg(*MESSAGE_TYPES.get(src, ("nav_msgs", "Odometry"))),
                src,
                functools.partial(self._received, src),
                sensor_qos(),
                raw=True,
            )
            for src in self.view.sources
        ]
        self.topics = {src: sub.topic_name for src, sub in zip(self.view.sources, self.subs, strict=True)}
        for src in self.cameras:
            image_sub = node.create_subscription(
                message_type(transport), src, functools.partial(self._received_image, src), sensor_qos()
            )
            self.subs.append(image_sub)
            self.topics[src] = image_sub.topic_name
        self.subs.append(
            node.create_subscription(msg("std_msgs", "Bool"), "estop", self._on_estop, latched_qos())
        )
        self.subs.append(
            node.create_subscription(
                msg("std_msgs", "Empty"), "estop_reset", self._on_estop_reset, command_qos()
            )
        )
        self.pubs = {
            role: node.create_publisher(cls, role, command_qos()) for role, cls in self.codec.roles().items()
        }
        self.safety_pub = node.create_publisher(msg("std_msgs", "String"), "safety", 10)
        self._thread = threading.Thread(target=self._run, name="policy_loop", daemon=True)
        gc.freeze()  # what loading made lives on: the collector need not walk it from the control loop
        self._thread.start()
        log.info(
            "policy %s (%s) for %s at %.0f Hz (%s), commands %s on %s, safety %s",
            params.policy, getattr(self.policy, "runtime", "scripted"), self.cfg.name, self.rate_hz,
            params.trigger, self.codec.name,
            [p.topic_name for p in self.pubs.values()], robot,
        )  # fmt: skip

    # -- what the robot reports ------------------------------------------------------------------
    def _received(self, source: str, m: bytes) -> None:
        """Take a serialized message into the view; in observation mode, act on a complete new sample."""
        entered, t0 = time.time(), time.perf_counter()
        with self._lock:
            try:
                self.stamps[source] = self.view.read_cdr(source, m)
                self._arrival = (entered - self.stamps[source], time.perf_counter() - t0)
            except MessageError as exc:
                self.counts["rejected_messages"] += 1
                self.throttled.warning(
                    f"refused {source}", f"ignored a message on {self.topics[source]}: {exc}"
                )
                return
            if not self._completes(source):
                return
        self._act(time.time())

    def _completes(self, source: str) -> bool:
        """Whether, in observation mode, the message just taken from ``source`` completes a new
        sample: every required source stamped alike, later than the last one acted on."""
        if self.p.trigger != "observation" or source not in self.required:
            return False
        return completes_sample(self.stamps, self.required, self._acted_stamp)

    def _default_type(self, source: str) -> tuple[str, str]:
        """The message type of a topic not in :data:`MESSAGE_TYPES`: a camera's or a frame's."""
        if source in self.cameras:
            return ("sensor_msgs", message_type(self.p.image_transport).__name__)
        return ("nav_msgs", "Odometry")

    def _received_image(self, source: str, m: Any) -> None:
        """Take a camera's image as the policy's frame (converted and resized, see
        :class:`~robolearn.hardware.ros.images.FrameReader`); one it cannot take, or a corrupted
        one, is counted and logged (rate-limited), never raised. In observation mode, act on a
        complete new sample."""
        entered, t0 = time.time(), time.perf_counter()
        reader = self.cameras[source]
        try:
            frame, stamp = reader(m)  # outside the lock: decoding must not hold up the control loop
        except MessageError as exc:
            with self._lock:
                self.counts["rejected_messages"] += 1
            self.throttled.warning(f"refused {source}", f"ignored a message on {self.topics[source]}: {exc}")
            return
        read = time.perf_counter() - t0
        with self._lock:
            self.frames[reader.spec.name] = frame
            self.stamps[source] = stamp
            self.image_seconds[source] = read
            self._arrival = (entered - stamp, read)
            if not self._completes(source):
                return
        self._act(time.time())

    def _on_estop(self, m: Any) -> None:
        if m.data:
            log.warning("e-stop latched")
            self.safety.estop()

    def _on_estop_reset(self, m: Any) -> None:
        log.warning("e-stop reset")
        self.safety.reset()

    # -- acting --------------------------------------------------------------------------------
    def _act(self, now: float, arrival: tuple[float, float] | None = None) -> None:
        """One control step: observation, policy, safety filter, command.

        A step that takes longer than the control period misses its deadline: counted in
        ``deadline_misses`` (on ``safety``) and logged, never skipped or hidden. ``arrival`` is what
        :data:`STAGES` times before the step (s): the message's or the tick's delay, and its read.
        """
        t0 = time.perf_counter()
        with self._lock:
            stamp = self._oldest()
            if stamp == -math.inf:
                return  # nothing from the robot yet: no command at all
            self._acted_stamp = max(self.stamps[s] for s in self.required)
            step = int(self.view.step_count[0])
            if step < self._last_step_count:
                self.view.new_episode()
                self.safety.new_episode(release_protective=self.p.release_at_reset)
            self._last_step_count = step
            obs = self.view.observe() | self.frames
            state = self.view.robot_state(stamp)
        t1 = time.perf_counter()
        action = self.policy(obs)
        t2 = time.perf_counter()
        self.safety.observed(stamp)
        command = self.safety.filter(action, state, now)
        t3 = time.perf_counter()
        for role, m in self.codec.encode(command, now).items():
            self.pubs[role].publish(m)
        t4 = time.perf_counter()
        with self._lock:
            self.view.record_action(command)
            self.counts["commands"] += 1
            if self.profile is not None:
                images = sum(self.image_seconds.values())
                self.profile.add(*(arrival or self._arrival), images, (t0, t1, t2, t3, t4))
        if t4 - t0 > self.period:
            self.counts["deadline_misses"] += 1
            self.throttled.warning(
                "deadline",
                f"a control step took {(t4 - t0) * 1e3:.2f} ms, over the {self.period * 1e3:g} ms period",
            )

    def _run(self) -> None:
        try:
            self._loop()
        except Exception:
            if self.node.context.ok():
                log.exception("the control loop failed")
            self.done.set()

    def _oldest(self) -> float:
        """The oldest of the required sources' newest stamps (-inf while one has sent nothing)."""
        return min(self.stamps[s] for s in self.required)

    def _report_missing(self) -> None:
        missing = [s for s in self.required if self.stamps[s] == -math.inf]
        if missing:
            expected = ", ".join(
                f"{self.topics[s]} ({'/'.join(MESSAGE_TYPES.get(s, self._default_type(s)))})" for s in missing
            )
            self.throttled.warning(
                "missing",
                f"nothing received yet on {expected}, sensor-data QoS (best effort); no command is sent "
                f"until each of {[self.topics[s] for s in self.required]} has sent one (see docs/ros.md)",
                count=False,
            )

    def _loop(self) -> None:
        next_tick = time.monotonic()
        next_report = next_tick
        check_missing = next_tick + MISSING_SOURCE_GRACE
        while not self._stop.is_set():
            now = time.time()
            oldest = self._oldest()
            stale = oldest > -math.inf and now - oldest > self.watchdog_timeout
            if stale:
                self.counts["stale_ticks"] += 1
            if self.p.trigger == "timer" or stale:
                self._act(now, (time.monotonic() - next_tick, 0.0))
            if time.monotonic() >= next_report:
                self._report()
                next_report += SAFETY_REPORT_PERIOD
            if oldest == -math.inf and time.monotonic() >= check_missing:
                self._report_missing()
            next_tick += self.period
            delay = next_tick - time.monotonic()
            if delay < 0:
                self.counts["overruns"] += 1
                next_tick = time.monotonic()
                delay = 0.0
            self._stop.wait(delay)

    def _report(self) -> None:
        report = {
            "stamp": time.time(),
            "stopped": self.safety.stopped,
            "counts": dict(self.safety.counts),
            **self.counts,
        }
        self.safety_pub.publish(msg("std_msgs", "String")(data=json.dumps(report)))

    def close(self) -> None:
        """Stop the control loop (and write the stage times, with ``profile_path``)."""
        self._stop.set()
        self._thread.join(timeout=2.0)
        self.done.set()
        if self.profile is not None:
            self.profile.write(Path(self.p.profile_path))


def main(argv: Sequence[str] | None = None) -> None:
    """Entry point of ``policy_node``."""
    run_node("policy_node", PolicyNodeParams, PolicyNode, argv)


if __name__ == "__main__":
    main()
