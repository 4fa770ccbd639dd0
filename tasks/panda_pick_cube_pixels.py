"""panda_pick_cube_pixels: pick-cube seen through a wrist and a scene camera (issue 13).

The task of :mod:`robolearn.tasks.panda_pick_cube` without the cube's privileged pose: the policy
observes the hand's proprioception (tool position, velocity, target offset, gripper opening) and two
64x64 RGB cameras, one on the Franka Hand looking between the fingers, one fixed in front of the
table, as SERL's and HIL-SERL's pick tasks do. Rewards and success still read the simulator.
"""

from __future__ import annotations

import dataclasses

from robolearn.sim.backend import HOST_BACKENDS
from robolearn.sim.scene import CameraSensorCfg
from robolearn.tasks import panda_pick_cube
from robolearn.tasks.core import TaskCfg

PROPRIOCEPTION = ("ee_pos", "ee_vel", "ee_target_offset", "gripper_opening")
"""The state terms kept: what the arm measures about itself."""

WRIST_CAMERA = CameraSensorCfg(
    width=64,
    height=64,
    fovy=70.0,
    frame="ee",
    # On the side of the hand, 8 cm up the tool axis from the grasp point and 10 cm off it, looking
    # past the fingertips at the table below them.
    pos=(0.1, 0.0, -0.08),
    target=(0.0, 0.0, 0.06),
    up=(1.0, 0.0, 0.0),
)
SCENE_CAMERA = CameraSensorCfg(
    width=64,
    height=64,
    fovy=45.0,
    pos=(1.25, 0.0, 0.55),
    target=(0.45, 0.0, 0.05),
)


def make_cfg() -> TaskCfg:
    base = panda_pick_cube.make_cfg()
    return dataclasses.replace(
        base,
        name="panda_pick_cube_pixels",
        description="Franka Panda: pick up and lift a 4 cm cube, seen by a wrist and a scene camera.",
        observations={k: base.observations[k] for k in PROPRIOCEPTION},
        cameras={"wrist": WRIST_CAMERA, "scene": SCENE_CAMERA},
        expert=None,  # the scripted expert reads the cube's pose, which this task does not observe
        # On mujoco_warp the cameras are traced on the device for every world (sim/warp_render.py).
        backends=(*HOST_BACKENDS, "mujoco_warp"),
    )
