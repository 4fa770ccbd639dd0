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
TOOL_DOWN = (0.0, 1.0, 0.0, 0.0)
MAX_OPENING = 0.08
"""Distance between the fingers fully open (m)."""

# Where the tool centre point may be sent (m): in front of the robot, above the table.
WORKSPACE_LOW = (0.2, -0.4, 0.005)
WORKSPACE_HIGH = (0.75, 0.4, 0.6)


def panda_robot() -> RobotCfg:
    """The arm on the world origin, hand open, in the ready pose."""
    return RobotCfg(
        name="panda",
        asset=UrdfAsset(Path(pybullet_data.getDataPath()) / "franka_panda" / "panda.urdf"),
        fixed_base=True,
        init_joint_pos=dict(zip(ARM_JOINTS, HOME, strict=True)) | dict.fromkeys(FINGER_JOINTS, 0.04),
        joint_damping=dict.fromkeys(ARM_JOINTS, 1.0) | dict.fromkeys(FINGER_JOINTS, 5.0),
        frames=(FrameCfg("ee", "panda_grasptarget"),),
        actuators=(
            CartesianImpedanceCfg(frame="ee", target_quat=TOOL_DOWN),
            # Franka Hand: 70 N continuous grip force, shared by two fingers.
            JointPositionCfg(joints=FINGER_JOINTS, kp=400.0, kd=20.0, max_effort=35.0),
        ),
        gravity_compensation=True,
        collision_friction=(1.5, 0.005, 0.0001),
    )


def ee_delta_to_controls(env: TaskEnvView, action: FloatArray) -> FloatArray:
    """Tool displacement (m) and gripper opening (m) to impedance target and finger targets.

    The target is the measured tool position plus the displacement, kept inside the workspace, as
    SERL does; orientation is held pointing down.
    """
    target = np.clip(env.sim.frame_pos("ee") + action[:, :3], WORKSPACE_LOW, WORKSPACE_HIGH)
    fingers = np.repeat(action[:, 3:4] / 2.0, 2, axis=1)
    return np.concatenate([target, np.zeros((env.num_envs, 3)), fingers], axis=1)


def ee_delta_action(max_step: float = 0.03) -> ActionCfg:
    """End-effector displacement per control step (m) plus gripper opening (m)."""
    return ActionCfg(
        names=("ee_dx", "ee_dy", "ee_dz", "gripper_opening"),
        units=("m", "m", "m", "m"),
        low=(-max_step, -max_step, -max_step, 0.0),
        high=(max_step, max_step, max_step, MAX_OPENING),
        neutral=(0.0, 0.0, 0.0, MAX_OPENING),
        to_controls=ee_delta_to_controls,
    )
