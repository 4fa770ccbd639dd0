"""Generic terms shared by tasks: ``fn(env, **params)`` over all worlds, in physical units.

Terms are written once for every backend (issue 14): they compute with ``env.xp``, the array API
namespace of the backend's arrays (numpy itself on the host backends, torch's on MuJoCo Warp's
device), so observations and rewards never leave the device. Task-specific terms live in the task's
own module.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from robolearn.sim.backend import FloatArray, IntArray
from robolearn.sim.transforms import quat_from_euler, quat_rotate_inverse
from robolearn.tasks.core import TaskEnvView

BoolArray = npt.NDArray[np.bool_]


# -- observations ------------------------------------------------------------------------------
def frame_pos(env: TaskEnvView, frame: str) -> FloatArray:
    """World position of a frame (m)."""
    return env.sim.frame_pos(frame)


def frame_linvel(env: TaskEnvView, frame: str) -> FloatArray:
    """World linear velocity of a frame (m/s)."""
    return env.sim.frame_linvel(frame)


def frame_quat(env: TaskEnvView, frame: str) -> FloatArray:
    """World orientation of a frame (w, x, y, z), sign fixed so that w >= 0."""
    q = env.sim.frame_quat(frame)
    return env.xp.where(q[:, :1] < 0, -q, q)


def frame_angvel_body(env: TaskEnvView, frame: str) -> FloatArray:
    """Angular velocity of a frame in its own axes (rad/s), as a gyroscope reads it."""
    return quat_rotate_inverse(env.sim.frame_quat(frame), env.sim.frame_angvel(frame))


def joint_pos(env: TaskEnvView, joints: Sequence[str]) -> FloatArray:
    """Joint positions (rad or m)."""
    return env.sim.joint_pos(joints)


def joint_vel(env: TaskEnvView, joints: Sequence[str]) -> FloatArray:
    """Joint velocities (rad/s or m/s)."""
    return env.sim.joint_vel(joints)


def joint_pos_sum(env: TaskEnvView, joints: Sequence[str]) -> FloatArray:
    """Sum of joint positions, e.g. the opening of a two-finger gripper (m)."""
    return env.xp.sum(env.sim.joint_pos(joints), axis=1, keepdims=True)


def task_state(env: TaskEnvView, key: str) -> FloatArray:
    """A per-world task state entry, such as a goal position."""
    return env.state[key]


def state_minus_frame(env: TaskEnvView, key: str, frame: str) -> FloatArray:
    """Vector from a frame to a per-world target stored in the task state (m)."""
    return env.state[key] - env.sim.frame_pos(frame)


def frame_minus_frame(env: TaskEnvView, target: str, frame: str) -> FloatArray:
    """Vector from one frame to another (m)."""
    return env.sim.frame_pos(target) - env.sim.frame_pos(frame)


def last_action(env: TaskEnvView) -> FloatArray:
    """The command sent in the last step (physical units; under action latency it acts later)."""
    return env.action


# -- rewards -----------------------------------------------------------------------------------
def distance_to_state(env: TaskEnvView, key: str, frame: str) -> FloatArray:
    """Distance from a frame to a per-world target (m)."""
    return env.xp.linalg.vector_norm(env.state[key] - env.sim.frame_pos(frame), axis=1)


def distance_to_state_tanh(env: TaskEnvView, key: str, frame: str, scale: float) -> FloatArray:
    """tanh(d / scale) of the distance d from a frame to a target: steep near the target, where a
    plain distance would barely tell 2 cm from 3 cm (robosuite's reaching reward)."""
    return env.xp.tanh(distance_to_state(env, key, frame) / scale)


def action_rate_l2(env: TaskEnvView) -> FloatArray:
    """Squared change of the action between steps."""
    return env.xp.sum(env.xp.square(env.action - env.prev_action), axis=1)


def constant(env: TaskEnvView) -> FloatArray:
    """One per step (an alive bonus or a time penalty, by its weight's sign)."""
    return env.xp.ones(env.num_envs, dtype=env.float_dtype, device=env.device)


def succeeded(env: TaskEnvView) -> BoolArray:
    """True where the task's success condition held in this step (a success bonus): its value,
    computed once before the rewards."""
    return env.step_success


def not_terminated_by(env: TaskEnvView, termination: str) -> BoolArray:
    """True where the termination term ``termination`` did not hold in this step (an alive bonus,
    Isaac Lab's ``is_alive`` for one term): its value, computed once before the rewards."""
    return ~env.step_terminations[termination]


# -- terminations and success ------------------------------------------------------------------
def within_distance_of_state(env: TaskEnvView, key: str, frame: str, tolerance: float) -> BoolArray:
    """True where a frame is within ``tolerance`` (m) of a per-world target."""
    return distance_to_state(env, key, frame) < tolerance


def tilted(env: TaskEnvView, frame: str, max_tilt: float) -> BoolArray:
    """True where a frame's z axis leans more than ``max_tilt`` (rad) from the world's vertical."""
    q = env.sim.frame_quat(frame)
    x, y = q[:, 1], q[:, 2]
    # The z axis's vertical component: entry (2, 2) of quat_to_mat, without the other eight.
    return 1 - 2 * (x * x + y * y) < np.cos(max_tilt)  # a float: any namespace compares with it


def frame_outside_box(
    env: TaskEnvView, frame: str, low: tuple[float, float, float], high: tuple[float, float, float]
) -> BoolArray:
    """True where a frame left an axis-aligned box (m)."""
    xp, pos = env.xp, env.sim.frame_pos(frame)
    return xp.any((pos < env.constant(low)) | (pos > env.constant(high)), axis=1)


# -- reset events ------------------------------------------------------------------------------
def sample_state_uniform(
    env: TaskEnvView, ids: IntArray, key: str, low: Sequence[float], high: Sequence[float]
) -> None:
    """Draw a per-world task state entry uniformly from a box."""
    env.state[key][ids] = env.rng.uniform(low, high, size=(len(ids), len(low)))


def perturb_joints(env: TaskEnvView, ids: IntArray, joints: Sequence[str], noise: float) -> None:
    """Add uniform noise (rad or m) to the initial positions of joints."""
    pos = env.sim.joint_pos(joints)[ids]
    env.sim.set_joint_state(ids, joints, pos + env.rng.uniform(-noise, noise, size=pos.shape))


def place_uniform(
    env: TaskEnvView,
    ids: IntArray,
    entity: str,
    low: Sequence[float],
    high: Sequence[float],
    yaw_range: tuple[float, float] = (0.0, 0.0),
) -> None:
    """Put a free body at a uniformly drawn position (m) and heading (rad), at rest."""
    n = len(ids)
    pos = env.rng.uniform(low, high, size=(n, 3))
    yaw = env.rng.uniform(*yaw_range, size=n)
    zero = env.xp.zeros_like(yaw)
    env.sim.set_root_state(ids, entity, pos, quat_from_euler(zero, zero, yaw))
