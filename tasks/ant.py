"""ant: Gymnasium's Ant-v5 (the model, observation, reward, termination and reset distribution).

The model is the ``ant.xml`` Gymnasium ships, with its own floor, actuators and RK4 integrator;
five physics steps make one control step, and the physics is bit-identical to Gymnasium's. The
observation is Ant-v5's default vector split into three terms, in order: ``qpos[2:]``, ``qvel``,
and ``cfrc_ext[1:]`` clipped to [-1, 1] (105 numbers).

One difference, by construction: Gymnasium calls ``mj_rnePostConstraint`` after ``mj_step``, when
the derived fields are those of the last Runge-Kutta stage evaluation of the last substep (an
intermediate state), and it reads the torso position for the forward reward from there too. Here
``cfrc_ext`` and the torso position are those of the observed state itself: the model carries an
acceleration-stage sensor (``MjcfAsset.body_wrenches``), so both MuJoCo backends compute the
forward dynamics, and with it ``cfrc_ext``, at the new state after every control step.
Gymnasium's observation of that state (after ``mj_forward`` and ``mj_rnePostConstraint``)
equals this one; the clipped contact forces of its own ``step`` differ in a few percent of the
entries on steps with contact.

MuJoCo only (the CPU backends and MuJoCo Warp): there is no URDF of this model, and PyBullet has
no ``cfrc_ext``. The terms compute with ``env.xp`` (numpy, or torch on MuJoCo Warp's device), their
numbers as ``env.constant``'s cached arrays (numpy converts a Python number at every use).

On ``mujoco_warp`` the ant is the same model under a differently turned friction pyramid: MuJoCo
Warp gives a capsule-plane contact the same normal as MuJoCo but a fixed tangent basis (MuJoCo turns
it with the capsule), and ant.xml keeps MuJoCo's default pyramidal cone, which is not invariant to
turning the tangents. At a foot impact the friction forces differ by tens of percent (a joint speed
by 0.5 rad/s in one 10 ms step, measured with MuJoCo Warp 4.0, Euler and RK4 alike), so trajectories
match ``mujoco_batch`` only until a foot first touches the floor (tests/test_mujoco_warp.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium
import numpy.typing as npt

from robolearn.sim.backend import BoolArray, FloatArray, IntArray
from robolearn.sim.scene import CameraCfg, FrameCfg, MjcfAsset, RobotCfg, SceneCfg
from robolearn.tasks import terms
from robolearn.tasks.core import (
    ActionCfg,
    DoneTerm,
    EventTerm,
    ObsTerm,
    RewardTerm,
    StepTerm,
    TaskCfg,
    TaskEnvView,
)

ANT_XML = Path(gymnasium.__file__).parent / "envs" / "mujoco" / "assets" / "ant.xml"
"""The model file of Gymnasium's Ant-v5."""
PHYSICS_DT = 0.01
"""The timestep ant.xml sets (s); the scene must repeat it, since the scene's step overrides the file's."""
FRAME_SKIP = 5
"""Physics steps per control step, as Ant-v5's ``frame_skip``."""
ACTUATED = ("hip_4", "ankle_4", "hip_1", "ankle_1", "hip_2", "ankle_2", "hip_3", "ankle_3")
"""The joints of ant.xml's motors, in actuator order."""
HEALTHY_Z = (0.2, 1.0)
"""Torso heights (m) outside which the ant has fallen or jumped: Ant-v5's ``healthy_z_range``."""
CONTACT_FORCE_RANGE = (-1.0, 1.0)
"""Clip of every ``cfrc_ext`` component, Ant-v5's ``contact_force_range``."""
RESET_NOISE = 0.1
"""Half-width of the uniform qpos noise and std of the normal qvel noise, Ant-v5's ``reset_noise_scale``."""


def mj_field(env: TaskEnvView, name: str) -> npt.NDArray[Any]:
    """A raw MjData field over all worlds, (num_envs, ...) (a tensor on MuJoCo Warp); MuJoCo backends only."""
    return env.sim.mj_field(name)  # type: ignore[attr-defined]


# -- observations ------------------------------------------------------------------------------
def qpos_without_xy(env: TaskEnvView) -> FloatArray:
    """All generalized positions but the torso's x and y: z (m), quaternion, hinge angles (rad)."""
    return mj_field(env, "qpos")[:, 2:]


def generalized_velocities(env: TaskEnvView) -> FloatArray:
    """All of qvel: torso linear (m/s, world) and angular (rad/s, body) velocity, hinge rates (rad/s)."""
    return mj_field(env, "qvel")


def clipped_contact_forces(env: TaskEnvView, first_body: int = 1) -> FloatArray:
    """Each body's external wrench ``cfrc_ext`` (N m, N), clipped, bodies ``first_body`` on, flattened."""
    wrench = mj_field(env, "cfrc_ext")[:, first_body:]
    low, high = (env.constant(bound) for bound in CONTACT_FORCE_RANGE)
    return env.xp.reshape(env.xp.clip(wrench, low, high), (env.num_envs, -1))


# -- rewards -----------------------------------------------------------------------------------
def healthy(env: TaskEnvView) -> BoolArray:
    """True where the state is finite and the torso height lies in ``HEALTHY_Z`` (the reward reads
    it from the ``unhealthy`` termination, which runs first)."""
    xp, qpos = env.xp, mj_field(env, "qpos")
    finite = xp.all(xp.isfinite(qpos), axis=1) & xp.all(xp.isfinite(mj_field(env, "qvel")), axis=1)
    z = qpos[:, 2]
    return finite & (z >= env.constant(HEALTHY_Z[0])) & (z <= env.constant(HEALTHY_Z[1]))


def unhealthy(env: TaskEnvView) -> BoolArray:
    """True where the ant fell over, jumped too high or its state diverged."""
    return ~healthy(env)


def action_l2(env: TaskEnvView) -> FloatArray:
    """Sum of squared components of the applied (clipped) action."""
    return env.xp.sum(env.xp.square(env.action), axis=1)


def contact_force_l2(env: TaskEnvView) -> FloatArray:
    """Sum of squared clipped external wrench components over all bodies, as Ant-v5's contact cost."""
    return env.xp.sum(env.xp.square(clipped_contact_forces(env, first_body=0)), axis=1)


def never(env: TaskEnvView) -> BoolArray:
    """False everywhere: locomotion has no success state."""
    return env.xp.zeros(env.num_envs, dtype=env.xp.bool, device=env.device)


# -- actions and resets ------------------------------------------------------------------------
def motor_commands(env: TaskEnvView, action: FloatArray) -> FloatArray:
    """The action is the motors' normalized torque (150 N m per unit, ant.xml's gear)."""
    return action


def track_torso_x(env: TaskEnvView) -> None:
    """After a step: the torso's x velocity over it (Ant-v5's forward reward) and its new x position."""
    x = mj_field(env, "qpos")[:, 0]
    env.state["forward_velocity"][:] = (x - env.state["torso_x"]) / env.constant(env.cfg.control_dt)
    env.state["torso_x"][:] = x


def record_torso_x(env: TaskEnvView, ids: IntArray) -> None:
    """At a reset: the torso's x position the first step's velocity starts from."""
    env.state["torso_x"][ids] = mj_field(env, "qpos")[ids, 0]


def perturb_state(env: TaskEnvView, ids: IntArray, noise: float) -> None:
    """Ant-v5's reset noise: uniform in [-noise, noise] on every qpos, normal with std ``noise`` on qvel."""
    qpos, qvel = mj_field(env, "qpos"), mj_field(env, "qvel")
    qpos[ids] += env.rng.uniform(-noise, noise, size=(len(ids), qpos.shape[1]))
    qvel[ids] = noise * env.rng.standard_normal((len(ids), qvel.shape[1]))


def make_cfg() -> TaskCfg:
    return TaskCfg(
        name="ant",
        embodiment="legged",
        description="Gymnasium's Ant-v5: a four-legged robot runs forward along x.",
        scene=SceneCfg(
            robot=RobotCfg(
                name="ant",
                asset=MjcfAsset(ANT_XML, body_wrenches=True),
                # The file has its own free joint: the builder must not add one.
                fixed_base=True,
                base_pos=(0.0, 0.0, 0.75),  # the torso's position in ant.xml
                frames=(FrameCfg("torso", "torso"),),
            ),
            physics_dt=PHYSICS_DT,
            ground=False,  # ant.xml has its own floor
            camera=CameraCfg((0.0, 0.0, 0.5), 4.0, 90.0, -20.0, track_frame="torso"),
        ),
        control_dt=FRAME_SKIP * PHYSICS_DT,
        episode_length=1000,
        action=ActionCfg(
            names=ACTUATED,
            units=("1",) * len(ACTUATED),
            low=(-1.0,) * len(ACTUATED),
            high=(1.0,) * len(ACTUATED),
            neutral=(0.0,) * len(ACTUATED),
            to_controls=motor_commands,
        ),
        observations={
            "qpos": ObsTerm(qpos_without_xy, "m (z), 1 (quaternion), rad (hinges)"),
            "qvel": ObsTerm(generalized_velocities, "m/s, rad/s"),
            "contact_forces": ObsTerm(clipped_contact_forces, "N m, N (clipped)"),
        },
        rewards={
            "healthy": RewardTerm(terms.not_terminated_by, 1.0, {"termination": "unhealthy"}),
            "forward": RewardTerm(terms.task_state, 1.0, {"key": "forward_velocity"}),
            "ctrl_cost": RewardTerm(action_l2, -0.5),
            "contact_cost": RewardTerm(contact_force_l2, -5e-4),
        },
        success=DoneTerm(never),
        terminations={"unhealthy": DoneTerm(unhealthy)},
        reset_events={
            "noise": EventTerm(perturb_state, {"noise": RESET_NOISE}),
            "torso_x": EventTerm(record_torso_x),
        },
        updates={"torso_x": StepTerm(track_torso_x)},
        state={"torso_x": (), "forward_velocity": ()},
        end_on_success=False,
        # Not pybullet: Gymnasium's MJCF model, and PyBullet has no cfrc_ext.
        backends=("mujoco", "mujoco_batch", "mujoco_warp"),
    )
