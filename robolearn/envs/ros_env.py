"""A robot that speaks ROS 2 as a training environment (``robolearn train TASK --robot ros``, issue 10).

The robot publishes and subscribes what ``docs/ros.md`` lists, the topics ``policy_node`` reads
and writes. :class:`RosRobotEnv` is a one-world Gymnasium-style vector environment over them, in
real time at the task's control rate:

- observations are the task's own observation terms run on the newest messages, through the
  :class:`~robolearn.hardware.ros.state_view.RemoteStateView` ``policy_node`` uses; reward,
  success and terminations are the task's terms on the same view;
- every action passes through the safety layer (:class:`~robolearn.hardware.safety.SafetyLayer`,
  the configuration of ``hardware/config/<robot>.yaml``); its watchdog and the latched e-stop
  (``estop``, ``std_msgs/Bool``; released by ``estop_reset``, ``std_msgs/Empty``) stay armed for the
  whole run;
- an e-stop, or observations that went stale, *pause* training: the safety layer's stop command
  goes out every period until the e-stop is released or fresh messages return, the pause is logged
  and counted; the episode it interrupted ends (truncated) and the robot is reset. Observations
  stale for longer than ``stale_timeout`` end the run with a one-line error;
- a protective stop the robot's own motion trips (it left the geofence, a joint passed its range:
  :data:`~robolearn.hardware.safety.PROTECTIVE_STOPS`) ends the episode (truncated: the policy no
  longer drives), is logged and counted (``protective_stops``), and is released once the robot is
  back at its reset pose by the protocol below (and the operator has confirmed the scene, where
  there is one), as a person releases it after putting the robot back. Left latched, every later
  episode ran the safe stop whatever the policy or the person commanded (a drone from scratch,
  2026-12-01). One that latches again on an episode's first step (a reset pose outside the fence)
  is a one-line error;
- episodes end on the task's terminations and its time limit (``episode_length`` control steps);
  resets follow the protocol of docs/ros.md ("Resets"): a numbered request on ``reset``
  (``std_msgs/UInt64``), and the next episode starts when the same number comes back on ``ready``
  (``std_msgs/UInt64``, latched) and the robot reports step 0. A robot that does not answer within
  ``reset_timeout`` is a one-line error. With an operator (:attr:`RosRobotEnv.operator`, HIL-SERL's
  reset on a real robot) the robot then holds its reset pose, no command sent, until the operator
  has reset the scene and confirmed it on the device (``RESET_DONE``); the wait is logged, counted
  and timed in :meth:`report`, never an error (a person may take a while);
- timing: with ``trigger`` ``timer`` a step's observation is taken at the next tick of the
  environment's own clock at the control rate; with ``observation`` as soon as the robot's next
  complete sample arrives (every required topic stamped alike, of a robot step after the last one seen),
  as ``policy_node``'s trigger: the loop's delay is then the robot's, not a phase each run draws
  against the robot's clock. Control-period overruns (a step that began after its deadline, or
  whose command went out late) are counted in :meth:`report`, which the run's summary carries, with
  the robot's samples the actor's observations skipped or repeated.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import logging
import math
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium.vector import AutoresetMode

from robolearn.errors import RobolearnError
from robolearn.hardware.registry import load_safety_config, safety_robot
from robolearn.hardware.ros import Trigger
from robolearn.hardware.ros._rclpy import command_qos, latched_qos, msg, sensor_qos
from robolearn.hardware.ros.harness import local_node
from robolearn.hardware.ros.messages import MessageError, make_codec, within_command
from robolearn.hardware.ros.policy_node import MESSAGE_TYPES
from robolearn.hardware.ros.state_view import (
    RemoteStateView,
    completes_sample,
    required_sources,
    tracked_frames,
    tracked_joints,
)
from robolearn.hardware.safety import SafetyLayer
from robolearn.sim.backend import FloatArray
from robolearn.tasks import make_task_cfg
from robolearn.tasks.core import Observation

log = logging.getLogger(__name__)

PAUSE_LOG_PERIOD = 10.0
"""Seconds between reports that training is still paused."""
AGE_WINDOW = 100_000
"""Steps whose observation ages :meth:`RosRobotEnv.report` summarizes (the latest): a run of days
must not keep one number per step."""


class RobotTrainingError(RobolearnError):
    """The robot does not answer as docs/ros.md says: a topic that never arrives, a reset never served."""


class SceneResetOperator(Protocol):
    """The person who resets the scene between episodes and confirms it on a device."""

    def scene_reset_requested(self) -> None:
        """The robot is at its reset pose and waits for the scene."""
        ...

    def scene_reset_confirmed(self, obs: Mapping[str, npt.NDArray[Any]]) -> bool:
        """Whether the person has confirmed the reset by now (one device read, never blocking long)."""
        ...


@dataclass(frozen=True)
class RosRobotCfg:
    """How to reach the robot and how long to wait for it."""

    safety: str = ""
    """Safety configuration: a robot name (``robolearn robots``) or a YAML path; "" is the task's robot's,
    else the embodiment's."""
    command_type: str = ""
    """Command message type (docs/ros.md); "" is the embodiment's default."""
    connect_timeout: float = 10.0
    """Seconds for every required topic to send its first message."""
    reset_timeout: float = 30.0
    """Seconds for the robot to answer a reset request on ``ready``."""
    stale_timeout: float = 10.0
    """Seconds observations may stay stale (training paused) before the run ends with an error."""
    domain_id: int | None = None
    """ROS domain to join; None: ``ROS_DOMAIN_ID`` (0 where unset)."""
    trigger: Trigger = "timer"
    """When a step's observation is taken: at the next tick of the environment's clock, or when the
    robot's next complete sample arrives (see the module doc)."""


class RosRobotEnv:
    """One robot as a one-world vector environment with same-step autoreset (see the module doc)."""

    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}  # noqa: RUF012
    num_envs = 1

    def __init__(self, task: str, cfg: RosRobotCfg | None = None, *, seed: int | None = None) -> None:
        self.rcfg = cfg or RosRobotCfg()
        self.cfg = make_task_cfg(task)
        self.period = self.cfg.control_dt
        self.codec = make_codec(self.cfg, self.rcfg.command_type)
        self.safety_cfg = within_command(
            load_safety_config(safety_robot(self.cfg, self.rcfg.safety)), self.codec
        )
        self.safety = SafetyLayer(self.safety_cfg, self.cfg)
        self.view = RemoteStateView(self.cfg, tracked_frames(self.cfg), tracked_joints(self.cfg))
        with np.errstate(all="ignore"):  # the view holds no state yet; only the shapes count
            sizes = {k: v.shape for k, v in self.view.observe().items()}
        act = self.cfg.action
        self.single_action_space = gym.spaces.Box(
            np.asarray(act.low, np.float32), np.asarray(act.high, np.float32), dtype=np.float32
        )
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, 1)
        self.single_observation_space = gym.spaces.Dict(
            {k: gym.spaces.Box(-np.inf, np.inf, shape=s, dtype=np.float32) for k, s in sizes.items()}
        )
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, 1)
        self.required = required_sources(self.cfg)
        self.stamps = dict.fromkeys(self.view.sources, -math.inf)
        self.counts = {
            "steps": 0,
            "episodes": 0,
            "resets": 0,
            "overruns": 0,
            "rejected_messages": 0,
            "estop_pauses": 0,
            "stale_pauses": 0,
            "protective_stops": 0,
            "operator_resets": 0,
            "skipped_samples": 0,
            "repeated_samples": 0,
        }
        self.paused_seconds = 0.0
        self.last_pause = 0.0
        """Seconds the last :meth:`_pause` held (0 when it did not pause)."""
        self.operator_seconds = 0.0
        self.operator: SceneResetOperator | None = None
        """Who confirms each scene reset before the next episode; None: the robot's ``ready`` suffices."""
        self.episode_step = 0
        self._lock = threading.Lock()
        self._sample = threading.Condition(self._lock)
        """Notified when a complete new sample arrives (``trigger`` ``observation``) or the e-stop latches."""
        self._observed = -math.inf
        """Stamp of the sample the last observation was taken from (its oldest required topic's)."""
        self._robot_step = 0
        """The robot's ``step_count`` at the last observation."""
        self._warned_no_sample = -math.inf
        self._ages: collections.deque[float] = collections.deque(maxlen=AGE_WINDOW)
        """Age of each recent step's observation when it was taken (s): now less its oldest required stamp."""
        self._estop = False
        self._ready: int | None = None
        self._request = 0
        self._deadline = -math.inf
        self._stack = contextlib.ExitStack()
        domain = self.rcfg.domain_id
        if domain is None:
            import os

            domain = int(os.environ.get("ROS_DOMAIN_ID", "0") or 0)
        self.node = self._stack.enter_context(local_node("robolearn_trainer", domain))
        try:
            self._connect()
        except BaseException:
            self._stack.close()
            raise

    # -- the robot's side -------------------------------------------------------------------------
    def _connect(self) -> None:
        node = self.node
        self.topics = {}
        for src in self.view.sources:
            cls = msg(*MESSAGE_TYPES.get(src, ("nav_msgs", "Odometry")))
            sub = node.create_subscription(
                cls, src, functools.partial(self._received, src), sensor_qos(), raw=True
            )
            self.topics[src] = sub.topic_name
        node.create_subscription(msg("std_msgs", "Bool"), "estop", self._on_estop, latched_qos())
        node.create_subscription(msg("std_msgs", "Empty"), "estop_reset", self._on_estop_reset, command_qos())
        node.create_subscription(msg("std_msgs", "UInt64"), "ready", self._on_ready, latched_qos())
        self.pubs = {
            role: node.create_publisher(cls, role, command_qos()) for role, cls in self.codec.roles().items()
        }
        self.reset_pub = node.create_publisher(msg("std_msgs", "UInt64"), "reset", command_qos())
        deadline = time.monotonic() + self.rcfg.connect_timeout
        while (
            missing := [s for s in self.required if self.stamps[s] == -math.inf]
        ) and time.monotonic() < deadline:
            time.sleep(0.02)
        if missing:
            names = ", ".join(self.topics[s] for s in missing)
            needed = ", ".join(self.topics[s] for s in self.required)
            raise RobotTrainingError(
                f"--robot ros: nothing received on {names} within {self.rcfg.connect_timeout:g} s "
                f"(--robot-timeout); the robot must publish {needed} (docs/ros.md) on ROS domain "
                f"{self.node.context.get_domain_id()}"
            )
        log.info(
            "robot for %s: %s, commands %s, safety %s", self.cfg.name, list(self.topics.values()),
            self.codec.name, self.safety_cfg.source,
        )  # fmt: skip

    def _received(self, source: str, m: bytes) -> None:
        with self._lock:
            try:
                self.stamps[source] = self.view.read_cdr(source, m)
            except MessageError as exc:
                self.counts["rejected_messages"] += 1
                log.debug("ignored a message on %s: %s", self.topics[source], exc)
                return
            if self.rcfg.trigger == "observation" and self._new_sample():
                self._sample.notify_all()

    def _new_sample(self) -> bool:
        """The robot's next step has arrived (under the lock): a complete sample newer than the last
        observation's, of another robot step. After a reset the robot publishes step 0 until its
        first command takes effect; another sample of step 0 is not the step the command made."""
        fresh = completes_sample(self.stamps, self.required, self._observed)
        return fresh and int(self.view.step_count[0]) != self._robot_step

    def _on_estop(self, m: Any) -> None:
        if m.data:
            with self._lock:
                self._estop = True
                self.safety.estop()
                self._sample.notify_all()  # a step waiting for a sample pauses instead

    def _on_estop_reset(self, m: Any) -> None:
        with self._lock:
            self._estop = False
            self.safety.reset()

    def _estop_latched(self) -> bool:
        with self._lock:
            return self._estop

    def _on_ready(self, m: Any) -> None:
        with self._lock:
            self._ready = int(m.data)

    def _oldest(self) -> float:
        return min(self.stamps[s] for s in self.required)

    # -- commands -------------------------------------------------------------------------------
    def _command(self, action: FloatArray) -> None:
        """Filter ``action`` through the safety layer and send it (under the lock)."""
        now = time.time()
        stamp = self._oldest()
        self.safety.observed(stamp)
        command = self.safety.filter(action, self.view.robot_state(stamp), now)
        for role, m in self.codec.encode(command, now).items():
            self.pubs[role].publish(m)
        self.view.record_action(command)

    def _hold(self) -> None:
        """Send the safety layer's stop command (the robot's state decides what it is)."""
        with self._lock:
            self._command(np.asarray(self.cfg.action.neutral, np.float64))

    def _sleep_to_deadline(self) -> None:
        """Wait for the next tick of the control clock (absolute deadlines)."""
        self._deadline += self.period
        delay = self._deadline - time.monotonic()
        if delay < 0:
            self.counts["overruns"] += 1
            self._deadline = time.monotonic()
        else:
            time.sleep(delay)

    def _await_sample(self) -> None:
        """Wait for the robot's next complete sample (``trigger`` ``observation``), at most the
        watchdog's timeout: the observations are then stale, which :meth:`_pause` handles."""
        limit = time.monotonic() + self.safety_cfg.watchdog_timeout
        with self._sample:
            while not self._new_sample() and not self._estop:
                left = limit - time.monotonic()
                if left <= 0:
                    self._no_sample_warning()
                    break
                self._sample.wait(left)
        # The caller's time to the next command counts from the sample (see step's overrun check).
        self._deadline = time.monotonic()

    def _no_sample_warning(self) -> None:
        """Say (at most every :data:`PAUSE_LOG_PERIOD` s) that a step waited the watchdog's timeout for
        a sample: a robot whose topics are not stamped alike per sample never completes one."""
        now = time.monotonic()
        if now - self._warned_no_sample >= PAUSE_LOG_PERIOD:
            self._warned_no_sample = now
            stamps = ", ".join(f"{self.topics[s]} {self.stamps[s]:.3f}" for s in self.required)
            log.warning(
                "--robot-trigger observation: no complete sample of a new robot step within %g s (every "
                "required topic stamped alike, docs/ros.md); newest stamps: %s",
                self.safety_cfg.watchdog_timeout, stamps,
            )  # fmt: skip

    def _pause(self) -> bool:
        """While the e-stop is latched or the observations are stale: hold the robot and wait.
        Returns whether training paused (the episode then ends)."""
        started = time.monotonic()
        reported = -math.inf
        reason = None
        while True:
            with self._lock:
                estop = self._estop
                stale = time.time() - self._oldest() > self.safety_cfg.watchdog_timeout
            if not estop and not stale:
                break
            if reason is None:
                reason = "estop" if estop else "stale"
                self.counts[f"{reason}_pauses"] += 1
            waited = time.monotonic() - started
            if not estop and waited > self.rcfg.stale_timeout:
                old = [
                    self.topics[s]
                    for s in self.required
                    if time.time() - self.stamps[s] > self.safety_cfg.watchdog_timeout
                ]
                raise RobotTrainingError(
                    f"--robot ros: no fresh messages on {', '.join(old)} for {waited:.0f} s "
                    f"(watchdog {self.safety_cfg.watchdog_timeout:g} s, "
                    f"--robot-timeout {self.rcfg.stale_timeout:g} s)"
                )
            if time.monotonic() - reported >= PAUSE_LOG_PERIOD:
                reported = time.monotonic()
                what = (
                    "e-stop latched (publish std_msgs/Empty on estop_reset to release)"
                    if estop
                    else "observations stale"
                )
                log.warning("training paused: %s for %.0f s", what, waited)
            self._hold()
            time.sleep(self.period)
        self.last_pause = 0.0
        if reason is not None:
            paused = self.last_pause = time.monotonic() - started
            self.paused_seconds += paused
            log.warning("training resumed after a %s pause of %.1f s", reason, paused)
        return reason is not None

    # -- resets ---------------------------------------------------------------------------------
    def _reset_robot(self) -> None:
        """The reset protocol (docs/ros.md, "Resets")."""
        request, sent_at, deadline = 0, 0.0, -math.inf
        while True:
            # No reset request while the e-stop is latched; one latched during the reset stopped the
            # robot on its way (a real robot's e-stop cuts its drives): pause, then ask again.
            if self._estop_latched() or not request:
                self._pause()
                self._request += 1
                request, sent_at = self._request, time.time()
                self.reset_pub.publish(msg("std_msgs", "UInt64")(data=request))
                deadline = time.monotonic() + self.rcfg.reset_timeout
            with self._lock:
                answered = self._ready == request
                fresh = self.stamps["task_state"] >= sent_at and int(self.view.step_count[0]) == 0
                estop = self._estop
            # An answer that comes with the e-stop latched is not taken: the reset starts over once
            # it is released (above), since a robot stopped at its pose may not hold it.
            if answered and fresh and not estop:
                break
            if time.monotonic() > deadline:
                what = (
                    "did not answer on ready"
                    if not answered
                    else "answered, but reported no step 0 on task_state"
                )
                raise RobotTrainingError(
                    f"--robot ros: reset request {request} on {self.reset_pub.topic_name}: the robot {what} "
                    f"within {self.rcfg.reset_timeout:g} s (--reset-timeout); it must implement the reset "
                    "protocol of docs/ros.md"
                )
            time.sleep(0.005)
        if self.operator is not None:
            self._await_operator(self.operator)
        with self._lock:
            self.view.new_episode()
            self.safety.new_episode(release_protective=True)  # the robot is back at its reset pose
        self.counts["resets"] += 1
        self.episode_step = 0
        self._deadline = time.monotonic()

    def _await_operator(self, operator: SceneResetOperator) -> None:
        """HIL-SERL's reset: the robot holds its reset pose (no command, as docs/ros.md's robot holds
        after ``ready``) until the operator has reset the scene and confirms on the device."""
        operator.scene_reset_requested()
        started = reported = time.monotonic()
        log.info("robot at its reset pose: reset the scene, then confirm on the device")
        while True:
            # An e-stop while the scene is reset: the time is the e-stop's, not the operator's.
            if self._estop_latched() and self._pause():
                started += self.last_pause
            with self._lock, np.errstate(all="ignore"):
                obs = self.view.observe()
            if operator.scene_reset_confirmed(obs):
                break
            if time.monotonic() - reported >= PAUSE_LOG_PERIOD:
                reported = time.monotonic()
                log.warning(
                    "waiting %.0f s for the operator to confirm the scene reset (RESET_DONE on the device)",
                    reported - started,
                )
            time.sleep(self.period)
        self.counts["operator_resets"] += 1
        self.operator_seconds += time.monotonic() - started

    def _observe(self) -> Observation:
        """The task's observation of the newest messages, (1, k) per key (under the lock), and which
        robot step it is of: counted as skipped or repeated against the last observation's."""
        step, self._observed = int(self.view.step_count[0]), self._oldest()
        if step > 0:  # a reset's first observation continues nothing
            self._ages.append(time.time() - self._observed)
            gap = step - self._robot_step
            if gap == 0:
                self.counts["repeated_samples"] += 1
            elif gap > 1:
                self.counts["skipped_samples"] += gap - 1
        self._robot_step = step
        with np.errstate(all="ignore"):
            return {k: v[None] for k, v in self.view.observe().items()}

    # -- the vector environment -----------------------------------------------------------------
    def reset(
        self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """Reset the robot by the protocol (a masked reset of world 0 or of nothing, as Gymnasium's)."""
        mask = None if options is None else options.get("reset_mask")
        if mask is None or bool(np.asarray(mask).reshape(-1)[0]):
            self._reset_robot()
        with self._lock:
            return self._observe(), {}

    def step(
        self, actions: Any
    ) -> tuple[Observation, FloatArray, npt.NDArray[np.bool_], npt.NDArray[np.bool_], dict[str, Any]]:
        action = np.asarray(actions, np.float64).reshape(-1)
        if time.monotonic() > self._deadline + self.period:
            self.counts["overruns"] += 1  # the caller came late: the previous command ran too long
            self._deadline = time.monotonic()
        with self._lock:
            self._command(action)
            protective = self.safety.protective_stop
        if protective is not None:
            self._protective_stop(protective)
        if self.rcfg.trigger == "observation":
            self._await_sample()
        else:
            self._sleep_to_deadline()
        paused = self._pause()
        self.episode_step += 1
        self.counts["steps"] += 1
        cfg = self.cfg
        with self._lock, np.errstate(all="ignore"):
            reward, success = self.view.score_step()
            obs = self._observe()
            terminated = success and cfg.end_on_success
            truncated = self.episode_step >= cfg.episode_length or paused or protective is not None
            for key, term in cfg.terminations.items():
                hit = bool(self.view.step_terminations[key][0])
                if term.time_out:
                    truncated |= hit
                else:
                    terminated |= hit
        truncated &= not terminated
        step_info = {"success": np.array([success]), "_success": np.array([True])}
        info: dict[str, Any] = {}
        if terminated or truncated:
            self.counts["episodes"] += 1
            final = np.full(1, None, dtype=object)
            final[0] = {k: v[0] for k, v in obs.items()}
            info["final_obs"], info["_final_obs"] = final, np.array([True])
            info["final_info"], info["_final_info"] = step_info, np.array([True])
            self._reset_robot()
            with self._lock:
                obs = self._observe()
        else:
            info = step_info
        return obs, np.array([reward]), np.array([terminated]), np.array([truncated]), info

    def _protective_stop(self, reason: str) -> None:
        """The safety layer latched ``reason`` at this step: count it; refuse a reset pose that trips it."""
        if self.episode_step == 0:
            raise RobotTrainingError(
                f"--robot ros: the safety layer latched its {reason} stop on the first step after a reset: "
                f"the robot's reset pose is outside the limits of {self.safety_cfg.source} "
                "(geofence, joints); move the reset pose or widen the limits"
            )
        self.counts["protective_stops"] += 1
        count = self.counts["protective_stops"]
        log.warning(
            "episode ended: the safety layer latched its %s stop (%d so far); released at the reset",
            reason,
            count,
        )

    def report(self) -> dict[str, Any]:
        """For the run's summary: steps, episodes, resets, overruns, pauses, safety interventions."""
        return {
            **self.counts,
            "paused_seconds": round(self.paused_seconds, 3),
            "operator_seconds": round(self.operator_seconds, 3),
            "control_hz": 1.0 / self.period,
            "observation_age_ms": _percentiles_ms(self._ages),
            "safety": dict(self.safety.counts),
        }

    def render(self) -> npt.NDArray[np.uint8]:
        raise RobotTrainingError("--robot ros: a robot has no simulated view to render; watch the robot")

    def close(self, **kwargs: Any) -> None:
        """Hold the robot and leave the ROS domain."""
        with contextlib.suppress(Exception):  # the robot may already be gone
            self._hold()
        self._stack.close()


def _percentiles_ms(seconds: collections.deque[float]) -> dict[str, float | None]:
    """p50 and p99 of durations in seconds, in milliseconds (None before there are any)."""
    if not seconds:
        return {"p50": None, "p99": None}
    p50, p99 = np.percentile(seconds, [50, 99]) * 1000
    return {"p50": round(float(p50), 3), "p99": round(float(p99), 3)}
