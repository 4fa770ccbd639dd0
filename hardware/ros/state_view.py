"""A task's view of a robot known only through messages, so its own observation terms run remotely.

Observation terms (``tasks/core.py``) read the world through a :class:`~robolearn.tasks.core.TaskEnvView`:
``env.sim.frame_pos(name)`` and friends, ``env.state``, ``env.step_count``, ``env.action``.
:class:`RemoteStateView` serves the same reads from the newest ROS 2 messages, one world, so the
policy node computes exactly the observation the policy was trained on with the task's own code.

:func:`probe_reads` finds out which frames and joints each observation term reads by running it
once on a recording stand-in: the robot side publishes those, the policy side waits for them.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from robolearn.hardware.robots import ArmState, RobotState, robot_state
from robolearn.hardware.ros.messages import (
    TaskStateLayout,
    read_joint_state,
    read_joint_state_cdr,
    read_odometry,
    read_odometry_cdr,
    read_task_state_cdr,
    stamp_seconds,
)
from robolearn.sim import host_xp
from robolearn.sim.backend import FloatArray
from robolearn.tasks import one_world
from robolearn.tasks.core import Observation, ObsTerm, TaskCfg, TermConstants


@dataclass
class TermReads:
    """The frames and joints one observation term reads, with the fields of each."""

    frames: dict[str, set[str]] = field(default_factory=dict)
    """Frame name to the fields read: ``pos``, ``quat``, ``linvel``, ``angvel``."""
    joints: dict[str, set[str]] = field(default_factory=dict)
    """Joint name to the fields read: ``pos``, ``vel``."""


class _ProbeSim:
    """Answers every read with a neutral value (origin, identity, at rest) and records it."""

    def __init__(self) -> None:
        self.reads = TermReads()

    def _frame(self, name: str, what: str, value: FloatArray) -> FloatArray:
        self.reads.frames.setdefault(name, set()).add(what)
        return value

    def frame_pos(self, name: str) -> FloatArray:
        return self._frame(name, "pos", np.zeros((1, 3)))

    def frame_quat(self, name: str) -> FloatArray:
        return self._frame(name, "quat", np.array([[1.0, 0.0, 0.0, 0.0]]))

    def frame_linvel(self, name: str) -> FloatArray:
        return self._frame(name, "linvel", np.zeros((1, 3)))

    def frame_angvel(self, name: str) -> FloatArray:
        return self._frame(name, "angvel", np.zeros((1, 3)))

    def _joints(self, joints: Sequence[str], what: str) -> FloatArray:
        for j in joints:
            self.reads.joints.setdefault(j, set()).add(what)
        return np.zeros((1, len(joints)))

    def joint_pos(self, joints: Sequence[str]) -> FloatArray:
        return self._joints(joints, "pos")

    def joint_vel(self, joints: Sequence[str]) -> FloatArray:
        return self._joints(joints, "vel")


def _probe(cfg: TaskCfg, fn: Callable[[RemoteStateView], object]) -> TermReads:
    view = RemoteStateView(cfg, frames=(), joints=())
    probe = _ProbeSim()
    view.sim = probe  # type: ignore[assignment]
    with np.errstate(all="ignore"):  # neutral values may divide by zero; only the reads matter
        fn(view)
    return probe.reads


def probe_reads(cfg: TaskCfg) -> dict[str, TermReads]:
    """For each observation term of ``cfg``, the frames and joints it reads."""
    return {k: _probe(cfg, functools.partial(_run_term, t)) for k, t in cfg.observations.items()}


def _run_term(term: ObsTerm, view: RemoteStateView) -> object:
    return term.fn(view, **term.params)


def tracked_frames(cfg: TaskCfg) -> list[str]:
    """The frames a deployment needs: those the observation terms and :func:`robot_state` read."""
    reads = [*probe_reads(cfg).values(), _probe(cfg, lambda v: robot_state(v, 0.0))]
    return list(dict.fromkeys(f for r in reads for f in r.frames))


def tracked_joints(cfg: TaskCfg) -> list[str]:
    """The joints a deployment needs: those the observation terms and :func:`robot_state` read."""
    reads = [*probe_reads(cfg).values(), _probe(cfg, lambda v: robot_state(v, 0.0))]
    return list(dict.fromkeys(j for r in reads for j in r.joints))


def completes_sample(stamps: Mapping[str, float], required: Sequence[str], after: float) -> bool:
    """Whether the newest messages make a complete new sample: every required topic stamped alike (a
    robot stamps one step's messages with that step's time), later than ``after``. What the
    observation trigger of ``policy_node`` and of the training environment waits for."""
    newest = stamps[required[0]]
    return newest > after and all(stamps[s] == newest for s in required)


def required_sources(cfg: TaskCfg) -> list[str]:
    """The topics (relative names) without which the policy side cannot act: every tracked frame,
    ``task_state``, and ``joint_states`` only where an observation term reads a joint.

    Elsewhere the joints feed only :func:`robot_state` fields the safety layer does not limit by
    (the arm's joint angles; its gripper opening, which a hold keeps at the last command), so a
    robot may leave them out; :class:`RemoteStateView` takes them when they come.
    """
    reads_joints = any(r.joints for r in probe_reads(cfg).values())
    frames = [f"frames/{f}" for f in tracked_frames(cfg)]
    return [*frames, *(["joint_states"] if reads_joints else []), "task_state"]


class RemoteSim:
    """The read side of a one-world backend, filled from messages.

    Reads return the stored arrays themselves (observation terms do not write to what they read).
    """

    name = "ros"
    num_worlds = 1
    live_views = True
    """The frame arrays are kept and filled in place by each message: compiled terms read them
    directly (``Backend.live_views``); joints are gathered, a new array at each read."""

    def __init__(self, frames: Sequence[str], joints: Sequence[str]) -> None:
        self.pos = {f: np.zeros((1, 3)) for f in frames}
        self.quat = {f: np.array([[1.0, 0.0, 0.0, 0.0]]) for f in frames}
        self.linvel = {f: np.zeros((1, 3)) for f in frames}
        self.angvel = {f: np.zeros((1, 3)) for f in frames}
        self.joint_names = list(joints)
        self.joint_index = {j: i for i, j in enumerate(self.joint_names)}
        self.jpos = np.zeros(len(self.joint_names))
        self.jvel = np.zeros(len(self.joint_names))
        self._index_cache: dict[tuple[str, ...], npt.NDArray[np.intp]] = {}

    def frame_pos(self, name: str) -> FloatArray:
        return self.pos[name]

    def frame_quat(self, name: str) -> FloatArray:
        return self.quat[name]

    def frame_linvel(self, name: str) -> FloatArray:
        return self.linvel[name]

    def frame_angvel(self, name: str) -> FloatArray:
        return self.angvel[name]

    def _index(self, joints: Sequence[str]) -> npt.NDArray[np.intp]:
        key = tuple(joints)
        if key not in self._index_cache:
            self._index_cache[key] = np.array([self.joint_index[j] for j in key], dtype=np.intp)
        return self._index_cache[key]

    def joint_pos(self, joints: Sequence[str]) -> FloatArray:
        return self.jpos[None, self._index(joints)]

    def joint_vel(self, joints: Sequence[str]) -> FloatArray:
        return self.jvel[None, self._index(joints)]


class RemoteStateView(TermConstants):
    """One world of a task as observation terms see it, filled from messages (see the module doc).

    ``action`` and ``prev_action`` are the last two commands this side sent; they go back to the
    task's neutral action when a new episode starts, as they do in the simulator.
    """

    def __init__(self, cfg: TaskCfg, frames: Sequence[str], joints: Sequence[str]) -> None:
        self.cfg = cfg
        self.num_envs = 1
        # The host's arrays, as the simulator's host backends have them (terms compute with xp).
        self.xp: Any = host_xp
        self.device: Any = None
        self.float_dtype: Any = np.float64
        self.sim = RemoteSim(frames, joints)
        self.state = {k: np.zeros((1, *shape)) for k, shape in cfg.state.items()}
        self.step_count = np.zeros(1, dtype=np.int64)
        self.neutral = np.asarray(cfg.action.neutral, dtype=np.float64)
        self.action = self.neutral[None].copy()
        self.prev_action = self.action.copy()
        self._stateful = [t.fn for t in cfg.observations.values() if hasattr(t.fn, "reset")]
        self.layout = TaskStateLayout(cfg)
        self.sources = [f"frames/{f}" for f in frames] + (["joint_states"] if joints else []) + ["task_state"]
        """The topics (relative names) the view is filled from."""
        self.step_success = np.zeros(1, dtype=bool)
        self.step_terminations = {k: np.zeros(1, dtype=bool) for k in cfg.terminations}
        self.joints_measured = False
        """Whether a ``joint_states`` message has been taken in (until then joints read 0)."""
        # The observation terms compiled to Python on floats, as one simulated world's (issue 18).
        self._compiled = one_world.CompiledGroups(self, not self._stateful, f"task {cfg.name} (ros)")

    def read(self, source: str, m: Any) -> float:
        """Take in a message of one of :attr:`sources`; returns its stamp (s). Raises
        :class:`~robolearn.hardware.ros.messages.MessageError` for a message that does not fit."""
        sim = self.sim
        if source == "task_state":
            return self.layout.read(m, self.state, self.step_count)
        if source == "joint_states":
            stamp = read_joint_state(m, sim.joint_index, sim.jpos, sim.jvel)
            self.joints_measured = True
            return stamp
        frame = source.removeprefix("frames/")
        return read_odometry(m, sim.pos[frame], sim.quat[frame], sim.linvel[frame], sim.angvel[frame])

    def read_cdr(self, source: str, buf: bytes) -> float:
        """:meth:`read` of a serialized message (from a subscription with ``raw=True``)."""
        sim = self.sim
        if source == "task_state":
            return read_task_state_cdr(buf, self.layout, self.state, self.step_count)
        if source == "joint_states":
            stamp = read_joint_state_cdr(buf, sim.joint_index, sim.jpos, sim.jvel)
            self.joints_measured = True
            return stamp
        frame = source.removeprefix("frames/")
        return read_odometry_cdr(buf, sim.pos[frame], sim.quat[frame], sim.linvel[frame], sim.angvel[frame])

    def stamp_of(self, source: str, m: Any) -> float:
        """A message's stamp (s) without taking it in (``-inf`` for a task state without data)."""
        if source == "task_state":
            return float(m.data[0]) if len(m.data) else -math.inf
        return stamp_seconds(m.header.stamp)

    def record_action(self, action: FloatArray) -> None:
        """The command just sent becomes ``action``; the one before, ``prev_action``."""
        self.prev_action[0] = self.action[0]
        self.action[0] = action

    def new_episode(self) -> None:
        """Forget the last episode's commands and the memory of stateful observation terms."""
        self.action[0] = self.neutral
        self.prev_action[0] = self.neutral
        ids = np.zeros(1, dtype=np.int64)
        for term in self._stateful:
            term.reset(self, ids)

    def score_step(self) -> tuple[float, bool]:
        """The reward and success of the step that led to the current state, in the simulator's
        order: the success and termination conditions first, then the rewards (which may read them)."""
        cfg = self.cfg
        self.step_success[:] = np.asarray(cfg.success.fn(self, **cfg.success.params), dtype=bool)
        for key, term in cfg.terminations.items():
            self.step_terminations[key][:] = np.asarray(term.fn(self, **term.params), dtype=bool)
        reward = sum(t.weight * float(np.asarray(t.fn(self, **t.params))[0]) for t in cfg.rewards.values())
        return reward, bool(self.step_success[0])

    def observe(self) -> Observation:
        """The task's observation of this world, each entry without the batch axis (float32)."""
        compiled = self._compiled.run("observation", self._record_observation)
        if compiled is not None:
            return {
                key: np.array(v, dtype=np.float32)
                for key, v in zip(self.cfg.observations, compiled, strict=True)
            }
        obs: dict[str, Any] = {}
        for key, term in self.cfg.observations.items():
            obs[key] = np.asarray(term.fn(self, **term.params), dtype=np.float32).reshape(-1)
        return obs

    def _record_observation(self, view: Any, _: Any) -> list[Any]:
        return [term.fn(view, **term.params) for term in self.cfg.observations.values()]

    def robot_state(self, stamp: float) -> RobotState:
        """The robot's state as the safety layer reads it (see :func:`robot_state`).

        Before any ``joint_states`` (a robot that need not publish them, see
        :func:`required_sources`) an arm's gripper opening is the task's neutral one, which a hold
        before the first command keeps, as the safety layer does without a state: not the 0 m
        (closed) of joints nobody measured.
        """
        state = robot_state(self, stamp)
        if isinstance(state, ArmState) and not self.joints_measured:
            opening = self.neutral[list(self.cfg.action.names).index("gripper_opening")]
            state = dataclasses.replace(state, gripper_opening=float(opening))
        return state
