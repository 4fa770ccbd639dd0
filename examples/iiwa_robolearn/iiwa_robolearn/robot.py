"""The KUKA LBR iiwa 7 R800 as robolearn simulates and deploys it.

Everything about the arm comes from the URDF that PyBullet bundles (``kuka_iiwa/model.urdf``):
joint names and limits, the tool link (the flange, ``lbr_iiwa_link_7``; no gripper) and the
kinematics, read by :func:`robolearn.sim.robot_description.read_arm`. What is ours: the pose it
starts in, where its tool may go, and the safety limits in ``iiwa.yaml`` (derived with
``robolearn robots --describe ... --safety-out`` and reviewed).
"""

from __future__ import annotations

import functools
from pathlib import Path

import pybullet_data

from robolearn.hardware.registry import RobotSpec
from robolearn.sim.robot_description import ArmDescription, read_arm
from robolearn.sim.scene import RobotCfg
from robolearn.tasks.robots.arm import arm_robot

NAME = "iiwa"
URDF = Path(pybullet_data.getDataPath()) / "kuka_iiwa" / "model.urdf"
HOME = (0.0, 0.733, 0.0, -1.485, 0.0, 0.923, 0.0)
"""Flange pointing down 0.35 m above the floor, 0.6 m in front of the base (the elbow well inside
its +-120 degree range, which a closer or lower pose nears)."""
WORKSPACE_LOW = (0.4, -0.35, 0.1)
"""Lower corner of the box the controller keeps the tool in (m)."""
WORKSPACE_HIGH = (0.8, 0.35, 0.65)
"""Upper corner of that box (m)."""


@functools.cache
def description() -> ArmDescription:
    """The arm as its URDF describes it (read once per process)."""
    return read_arm(URDF)


def iiwa_robot() -> RobotCfg:
    """The arm on the world origin at :data:`HOME`, its flange under Cartesian impedance control."""
    return arm_robot(description(), NAME, HOME)


def robot_spec() -> RobotSpec:
    """The ``robolearn.robots`` entry point."""
    return RobotSpec(
        name=NAME,
        embodiment="arm",
        description="KUKA LBR iiwa 7 R800, 7 joints, no gripper (pybullet_data's URDF).",
        safety_config=Path(__file__).with_name("iiwa.yaml"),
        make_robot=iiwa_robot,
        model=URDF,
    )
