"""Any serial arm from its robot description file: the simulated robot and its action terms.

:func:`arm_robot` builds the :class:`~robolearn.sim.scene.RobotCfg` of an arm read with
:func:`~robolearn.sim.robot_description.read_arm`: the file's joints, a tool frame ``ee`` on its
end-effector link and one of two generic n-joint controllers:

- ``cartesian``: a Cartesian impedance controller on the tool at the physics rate with gravity
  compensated (as in SERL's franka_sim), driven by :func:`ee_delta_action`, a displacement of the
  tool per control step. The arm tasks' action, and what the ROS 2 side and the safety layer know.
- ``joint``: a PD servo per joint, driven by :func:`joint_delta_action`, a displacement of each
  joint target per control step, kept inside the file's limits.

The gripper, when the file has one, is a position servo per gripper joint, each driven to an equal
share of the commanded opening (two fingers: half each). A robot module such as
:mod:`robolearn.tasks.robots.panda` keeps only what really differs: its pose, gains and workspace.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

import numpy as np

from robolearn.sim.backend import FloatArray
from robolearn.sim.robot_description import ArmDescription, ArmKinematics
from robolearn.sim.scene import (
    ActuatorCfg,
    CartesianImpedanceCfg,
    FrameCfg,
    JointPositionCfg,
    RobotCfg,
)
from robolearn.tasks.core import ActionCfg, GripperCfg, TaskEnvView, TaskError

TOOL_DOWN = (0.0, 1.0, 0.0, 0.0)
"""Tool z axis pointing down (w, x, y, z): half a turn about x."""

Controller = Literal["cartesian", "joint"]


def arm_robot(
    desc: ArmDescription,
    name: str,
    home: Sequence[float],
    *,
    controller: Controller = "cartesian",
    tool_quat: tuple[float, float, float, float] | None = None,
    tool_offset: tuple[float, float, float] = (0.0, 0.0, 0.0),
    kp_pos: float = 2000.0,
    kd_pos: float = 180.0,
    joint_kp: float = 400.0,
    joint_kd: float = 40.0,
    joint_damping: float = 1.0,
    gripper_kp: float = 400.0,
    gripper_kd: float = 20.0,
    gripper_open: float | None = None,
) -> RobotCfg:
    """The arm on the world origin in pose ``home`` (one value per arm joint), gripper open.

    ``tool_quat`` is the orientation the Cartesian controller holds (None: the tool's orientation
    at ``home``, so the controller starts without a rotation error); ``tool_offset`` puts the tool
    centre point off the end-effector link's origin (in its frame). The defaults suit a 1 m arm of
    about 20 kg (Panda, iiwa): stiff enough to track 1 m/s, critically damped for ~4 kg at the tool.
    """
    if len(home) != len(desc.joints):
        raise TaskError(f"robot {name}: home has {len(home)} values for {len(desc.joints)} joints")
    for joint, q in zip(desc.joints, home, strict=True):
        if not joint.low <= q <= joint.high:
            raise TaskError(
                f"robot {name}: home {q} of joint {joint.name} is outside its limits "
                f"[{joint.low}, {joint.high}]"
            )
    actuators: list[ActuatorCfg] = []
    if controller == "cartesian":
        if tool_quat is None:
            kinematics = ArmKinematics(desc.asset, desc.joint_names, desc.ee_link, tool_offset)
            tool_quat = kinematics.tool_quat(np.asarray(home, dtype=np.float64))
        actuators.append(CartesianImpedanceCfg("ee", tool_quat, kp_pos=kp_pos, kd_pos=kd_pos))
    else:
        effort = min((j.max_effort for j in desc.joints if j.max_effort), default=100.0)
        actuators.append(JointPositionCfg(desc.joint_names, kp=joint_kp, kd=joint_kd, max_effort=effort))
    open_pos = {}
    if desc.gripper:
        effort = min((j.max_effort for j in desc.gripper if j.max_effort), default=20.0)
        actuators.append(JointPositionCfg(desc.gripper_names, gripper_kp, gripper_kd, max_effort=effort))
        open_pos = {j.name: j.high if gripper_open is None else gripper_open for j in desc.gripper}
    return RobotCfg(
        name=name,
        asset=desc.asset,
        fixed_base=True,
        init_joint_pos=dict(zip(desc.joint_names, home, strict=True)) | open_pos,
        joint_damping=dict.fromkeys(desc.joint_names, joint_damping),
        frames=(FrameCfg("ee", desc.ee_link, pos=tool_offset),),
        actuators=tuple(actuators),
        gravity_compensation=True,
        arm_joints=desc.joint_names,
        gripper_joints=desc.gripper_names,
    )


def max_opening(desc: ArmDescription) -> float | None:
    """The gripper's full opening (the sum of its joints' upper limits, m), None without a gripper."""
    return sum(j.high for j in desc.gripper) if desc.gripper else None


# -- Cartesian: tool displacement ------------------------------------------------------------------
def ee_delta_to_controls(
    env: TaskEnvView,
    action: FloatArray,
    workspace_low: tuple[float, float, float],
    workspace_high: tuple[float, float, float],
    max_lead: float = 0.06,
) -> FloatArray:
    """Tool displacement (m) and, with a gripper, its opening (m) to impedance and finger targets.

    As in SERL's franka_sim, the displacement moves the commanded target (not the measured pose),
    so a constant action is a constant velocity. The target stays within ``max_lead`` of the
    measured tool, so pushing against the table cannot wind up force, and inside the workspace.
    Orientation is held at the controller's ``target_quat``.
    """
    xp, ee = env.xp, env.sim.frame_pos("ee")
    target = xp.where((env.step_count == 0)[:, None], ee, env.state["ee_target"]) + action[:, :3]
    # Parameters as env.constant's cached arrays: a Python number costs numpy a conversion per use.
    low, high, lead = env.constant(workspace_low), env.constant(workspace_high), env.constant(max_lead)
    target = xp.clip(xp.clip(target, ee - lead, ee + lead), low, high)
    env.state["ee_target"] = target
    # Controls: impedance target position (3), rotation vector from the nominal orientation (3, held
    # at zero), then each finger's opening.
    fingers = len(env.cfg.scene.robot.gripper_joints)
    controls = xp.zeros((env.num_envs, 6 + fingers), dtype=target.dtype, device=env.device)
    controls[:, :3] = target
    if fingers:
        controls[:, 6:] = action[:, 3:4] / env.constant(fingers)
    return controls


def ee_delta_action(
    workspace_low: tuple[float, float, float],
    workspace_high: tuple[float, float, float],
    max_step: float = 0.02,
    gripper_opening: float | None = None,
    max_lead: float = 0.06,
) -> ActionCfg:
    """End-effector displacement per control step (m), plus the gripper opening (m) for an arm with
    a gripper of full opening ``gripper_opening``. Tasks using it declare ``state={"ee_target": (3,)}``."""
    names, units = ["ee_dx", "ee_dy", "ee_dz"], ["m"] * 3
    low, high, neutral = [-max_step] * 3, [max_step] * 3, [0.0] * 3
    gripper = None
    if gripper_opening is not None:
        names.append("gripper_opening")
        units.append("m")
        low.append(0.0)
        high.append(gripper_opening)
        neutral.append(gripper_opening)
        # Open above 80% of the full opening: measured on the Panda, one closing step (20 ms) takes
        # the fingers from 8 to 6.1 cm, so a single close command already reads as closed; a held
        # 4 cm cube reads as closed with margin.
        open_above = 0.8 * gripper_opening
        gripper = GripperCfg("gripper_opening", 0.0, gripper_opening, "gripper_opening", open_above)
    return ActionCfg(
        names=tuple(names),
        units=tuple(units),
        low=tuple(low),
        high=tuple(high),
        neutral=tuple(neutral),
        to_controls=ee_delta_to_controls,
        params={"workspace_low": workspace_low, "workspace_high": workspace_high, "max_lead": max_lead},
        gripper=gripper,
    )


def ee_target_offset(env: TaskEnvView) -> FloatArray:
    """Where the impedance target is relative to the tool (m): the commanded pose, which the robot knows.

    Without it the spring's stretch, and so the coming motion, would be hidden from a policy.
    """
    offset = env.state["ee_target"] - env.sim.frame_pos("ee")
    return env.xp.where((env.step_count == 0)[:, None], env.constant(0.0), offset)


def servo_step(
    offset: FloatArray, ee_vel: FloatArray, max_step: float, gain: float = 0.5, lag: float = 0.09
) -> FloatArray:
    """Displacement action that brings the tool to ``offset`` from where it is, without overshoot.

    The action moves the impedance target, which leads the tool by about ``lag`` (kd / kp, s)
    times its velocity; subtracting that lead is what damps the scripted experts.
    """
    return np.clip(gain * offset - lag * ee_vel, -max_step, max_step)


def target_servo_step(
    offset: FloatArray, target_offset: FloatArray, max_step: float, gain: float = 0.3
) -> FloatArray:
    """Displacement action that brings the impedance target to ``offset`` from the tool.

    It servoes the commanded target (``target_offset``: the ``ee_target_offset`` observation, which
    the robot knows) rather than the measured tool, as :func:`servo_step` does: the tool's lag behind
    its target then stays out of the loop, and late observations do not make it oscillate. Measured
    on pick-cube's expert with observations 0 to 4 control steps late (PyBullet and MuJoCo, sensor
    noise on): :func:`servo_step` fails every episode from 2 steps (40 ms) on; this, at gain 0.3,
    succeeds in every one up to 4 (80 ms), gain 0.4 up to 3.
    """
    return np.clip(gain * (offset - target_offset), -max_step, max_step)


# -- joints: joint-target displacement -------------------------------------------------------------
def joint_delta_to_controls(
    env: TaskEnvView, action: FloatArray, low: tuple[float, ...], high: tuple[float, ...]
) -> FloatArray:
    """Joint-target displacements (rad or m) to joint targets, kept inside the joint limits.

    The targets start at the measured joints at an episode's first step. Tasks using it declare
    ``state={"joint_target": (n,)}``.
    """
    joints = env.cfg.scene.robot.arm_joints
    measured = env.sim.joint_pos(joints)
    start = (env.step_count == 0)[:, None]
    target = np.clip(np.where(start, measured, env.state["joint_target"]) + action, low, high)
    env.state["joint_target"] = target
    robot = env.cfg.scene.robot
    if not robot.gripper_joints:
        return target
    # The gripper holds its initial (open) position under joint control.
    grip = np.array([robot.init_joint_pos.get(j, 0.0) for j in robot.gripper_joints])
    return np.concatenate([target, np.broadcast_to(grip, (env.num_envs, len(grip)))], axis=1)


def joint_delta_action(desc: ArmDescription, max_step: float = 0.02) -> ActionCfg:
    """A displacement per control step (rad or m) of each arm joint's position target (for a robot
    built with ``controller="joint"``); the gripper, if any, stays open."""
    n = len(desc.joints)
    return ActionCfg(
        names=tuple(f"{j}_delta" for j in desc.joint_names),
        units=tuple("rad" if j.kind == "revolute" else "m" for j in desc.joints),
        low=(-max_step,) * n,
        high=(max_step,) * n,
        neutral=(0.0,) * n,
        to_controls=joint_delta_to_controls,
        params={"low": tuple(j.low for j in desc.joints), "high": tuple(j.high for j in desc.joints)},
    )
