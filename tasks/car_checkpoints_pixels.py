"""car_checkpoints_pixels: the checkpoint lap driven from an onboard camera (issue 13).

The task of :mod:`robolearn.tasks.car_checkpoints` without the checkpoints' positions in the
observation: the car sees them, drawn as coloured targets on the floor (the next one green), through
a 64x48 camera on its front, as a real car sees cones; it measures its own velocity, yaw rate,
steering angle and last command.
"""

from __future__ import annotations

import dataclasses

from robolearn.sim.backend import HOST_BACKENDS
from robolearn.sim.scene import CameraSensorCfg
from robolearn.tasks import car_checkpoints
from robolearn.tasks.core import TaskCfg
from robolearn.tasks.robots.racecar import ROBOT_NAME

PROPRIOCEPTION = ("body_velocity", "yaw_rate", "steering_angle", "last_action")
"""The state terms kept: what the car measures about itself."""

ONBOARD_CAMERA = CameraSensorCfg(
    width=64,
    height=48,
    fovy=70.0,
    frame=ROBOT_NAME,
    # On a mast above the front axle, looking ahead and down at the floor.
    pos=(0.2, 0.0, 0.3),
    target=(1.5, 0.0, -0.2),
    markers=True,
)


def make_cfg() -> TaskCfg:
    base = car_checkpoints.make_cfg()
    return dataclasses.replace(
        base,
        name="car_checkpoints_pixels",
        description="MIT RACECAR: drive a lap of random checkpoints seen by an onboard camera.",
        observations={k: base.observations[k] for k in PROPRIOCEPTION},
        cameras={"front": ONBOARD_CAMERA},
        expert=None,  # the pure-pursuit expert reads the checkpoints' positions
        # Not mujoco_warp: the camera sees the checkpoints as painted markers, which only the host's
        # OpenGL renderers draw (MuJoCo Warp's ray tracer refuses them, sim/warp_render.py).
        backends=HOST_BACKENDS,
    )
