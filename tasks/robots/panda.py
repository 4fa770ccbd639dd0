"""Franka Emika Panda, from the URDF that pybullet's data package ships (Franka's own kinematics,
joint limits and effort limits; link inertias as the file gives them).

The end effector is driven by the generic arm's Cartesian impedance controller
(:mod:`robolearn.tasks.robots.arm`) at the physics rate with gravity compensated, as in SERL's
franka_sim, so an action is a displacement of the tool centre point. What is the Panda's own: its
poses, gains tuned to it, the Franka Hand's grip force, its workspace and its published kinematics.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pybullet_data

from robolearn.sim.backend import FloatArray
from robolearn.sim.scene import CartesianImpedanceCfg, FrameCfg, JointPositionCfg, RobotCfg, UrdfAsset
from robolearn.tasks.core import ActionCfg
from robolearn.tasks.robots import arm
from robolearn.tasks.robots.arm import TOOL_DOWN

ARM_JOINTS = tuple(f"panda_joint{i}" for i in range(1, 8))
FINGER_JOINTS = ("panda_finger_joint1", "panda_finger_joint2")
# Franka's "ready" pose: tool pointing down, 0.31 m in front of the base, 0.49 m up.
HOME = (0.0, -0.785, 0.0, -2.356, 0.0, 1.571, 0.785)
# Tool pointing down 0.28 m above the table, 0.46 m in front: where pick tasks start, as in SERL.
HOME_LOW = (0.0, -0.19, 0.0, -2.42, 0.0, 2.23, 0.785)
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
        arm_joints=ARM_JOINTS,
        gripper_joints=FINGER_JOINTS,
    )


def ee_delta_action(max_step: float = 0.02) -> ActionCfg:
    """End-effector displacement per control step (m) plus gripper opening (m), inside the Panda's
    workspace (the generic arm action, :func:`~robolearn.tasks.robots.arm.ee_delta_action`).

    Tasks using it declare ``state={"ee_target": (3,)}``.
    """
    return arm.ee_delta_action(WORKSPACE_LOW, WORKSPACE_HIGH, max_step, gripper_opening=MAX_OPENING)


# -- kinematics ------------------------------------------------------------------------------------
# Joint origins of panda.urdf (Franka's published kinematics): translation from the parent
# joint (m) and roll about the parent's x axis (rad); every joint turns about its own z axis.
JOINT_ORIGINS = (
    ((0.0, 0.0, 0.333), 0.0),
    ((0.0, 0.0, 0.0), -math.pi / 2),
    ((0.0, -0.316, 0.0), math.pi / 2),
    ((0.0825, 0.0, 0.0), math.pi / 2),
    ((-0.0825, 0.384, 0.0), -math.pi / 2),
    ((0.0, 0.0, 0.0), math.pi / 2),
    ((0.088, 0.0, 0.0), math.pi / 2),
)
TOOL_OFFSET = 0.107 + 0.105
"""Flange, then the grasp target between the fingertips, along link 7's z axis (m)."""


def tool_position(joint_pos: FloatArray) -> FloatArray:
    """(3,) tool centre point position (m, base frame) of seven Panda joint positions (rad)."""
    rot, pos = np.eye(3), np.zeros(3)
    for (offset, roll), angle in zip(JOINT_ORIGINS, joint_pos, strict=True):
        pos = pos + rot @ np.asarray(offset)
        cr, sr, ca, sa = math.cos(roll), math.sin(roll), math.cos(angle), math.sin(angle)
        rot = (
            rot
            @ np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
            @ np.array([[ca, -sa, 0], [sa, ca, 0], [0, 0, 1]])
        )
    return pos + rot[:, 2] * TOOL_OFFSET
