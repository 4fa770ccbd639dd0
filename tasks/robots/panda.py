"""Franka Emika Panda, from the URDF that pybullet's data package ships (Franka's own kinematics,
joint limits and effort limits; link inertias as the file gives them).

The end effector is driven by a Cartesian impedance controller at the physics rate with gravity
compensated, as in SERL's franka_sim, so an action is a displacement of the tool centre point.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pybullet_data

from robolearn.sim.backend import FloatArray
from robolearn.sim.scene import CartesianImpedanceCfg, FrameCfg, JointPositionCfg, RobotCfg, UrdfAsset
from robolearn.tasks.core import ActionCfg, TaskEnvView

ARM_JOINTS = tuple(f"panda_joint{i}" for i in range(1, 8))
FINGER_JOINTS = ("panda_finger_joint1", "panda_finger_joint2")
# Franka's "ready" pose: tool pointing down, 0.31 m in front of the base, 0.49 m up.
HOME = (0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785)
# Tool pointing down 0.28 m above the table, 0.46 m in front: where pick tasks start, as in SERL.
HOME_LOW = (0.0, -0.19, 0.0, -2.42, 0.0, 2.23, 0.785)
TOOL_DOWN = (0.0, 1.0, 0.0, 0.0)
MAX_OPENING = 0.08
"""Distance between the fingers fully open (m)."""

# Where the tool centre point may be sent (m): in front of the robot, above the table.
WORKSPACE_LOW = (0.2, -0.4, 0.005)
WORKSPACE_HIGH = (0.75, 0.4, 0.6)


def panda_robot(home: tuple[float, ...] = HOME) -> RobotCfg:
    """The arm on the world origin, hand open, in a given pose (the ready pose by default)."""
    return RobotCfg(
        name="panda",
        asset=UrdfAsset(Path(pybullet_data.getDataPath()) / "franka_panda" / "panda.urdf"),
        fixed_base=True,
        init_joint_pos=dict(zip(ARM_JOINTS, home, strict=True)) | dict.fromkeys(FINGER_JOINTS, 0.04),
        joint_damping=dict.fromkeys(ARM_JOINTS, 1.0) | dict.fromkeys(FINGER_JOINTS, 5.0),
        frames=(FrameCfg("ee", "panda_grasptarget"),),
        actuators=(
            # Within the Franka Cartesian impedance controller's stiffness range, critically damped for
            # the ~4 kg the tool reflects: an underdamped arm turns one step of latency into a limit cycle.
            CartesianImpedanceCfg(frame="ee", target_quat=TOOL_DOWN, kp_pos=2000.0, kd_pos=180.0),
            # Franka Hand: 70 N continuous grip force, shared by two fingers.
            JointPositionCfg(joints=FINGER_JOINTS, kp=400.0, kd=20.0, max_effort=35.0),
        ),
        gravity_compensation=True,
        collision_friction=(1.5, 0.005, 0.0001),
    )


def ee_delta_to_controls(env: TaskEnvView, action: FloatArray, max_lead: float = 0.06) -> FloatArray:
    """Tool displacement (m) and gripper opening (m) to impedance target and finger targets.

    As in SERL's franka_sim, the displacement moves the commanded target (not the measured pose),
    so a constant action is a constant velocity. The target stays within ``max_lead`` of the
    measured tool, so pushing against the table cannot wind up force, and inside the workspace.
    Orientation is held pointing down.
    """
    ee = env.sim.frame_pos("ee")
    target = np.where((env.step_count == 0)[:, None], ee, env.state["ee_target"]) + action[:, :3]
    target = np.clip(np.clip(target, ee - max_lead, ee + max_lead), WORKSPACE_LOW, WORKSPACE_HIGH)
    env.state["ee_target"] = target
    fingers = np.repeat(action[:, 3:4] / 2.0, 2, axis=1)
    return np.concatenate([target, np.zeros((env.num_envs, 3)), fingers], axis=1)


def ee_target_offset(env: TaskEnvView) -> FloatArray:
    """Where the impedance target is relative to the tool (m): the commanded pose, which the robot knows.

    Without it the spring's stretch, and so the coming motion, would be hidden from a policy.
    """
    offset = env.state["ee_target"] - env.sim.frame_pos("ee")
    return np.where((env.step_count == 0)[:, None], 0.0, offset)


def ee_delta_action(max_step: float = 0.02) -> ActionCfg:
    """End-effector displacement per control step (m) plus gripper opening (m).

    Tasks using it declare ``state={"ee_target": (3,)}``.
    """
    return ActionCfg(
        names=("ee_dx", "ee_dy", "ee_dz", "gripper_opening"),
        units=("m", "m", "m", "m"),
        low=(-max_step, -max_step, -max_step, 0.0),
        high=(max_step, max_step, max_step, MAX_OPENING),
        neutral=(0.0, 0.0, 0.0, MAX_OPENING),
        to_controls=ee_delta_to_controls,
    )


def servo_step(
    offset: FloatArray, ee_vel: FloatArray, max_step: float, gain: float = 0.5, lag: float = 0.09
) -> FloatArray:
    """Displacement action that brings the tool to ``offset`` from where it is, without overshoot.

    The action moves the impedance target, which leads the tool by about ``lag`` (kd / kp, s)
    times its velocity; subtracting that lead is what damps the scripted experts.
    """
    return np.clip(gain * offset - lag * ee_vel, -max_step, max_step)
