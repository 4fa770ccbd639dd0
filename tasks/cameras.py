"""Image observations: a task's named cameras rendered for every world (issue 13).

A task lists its cameras in ``TaskCfg.cameras``; each one adds the observation ``<name>_rgb``,
(H, W, 3) uint8, and with ``depth`` also ``<name>_depth``, (H, W, 1) float32 metres along the optical
axis. Poses are computed for all worlds at once from the backend's frame queries; the renders
themselves go one world at a time (an OpenGL context draws one image per call on the CPU; the GPU
simulation issue batches them on the device).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import numpy.typing as npt

from robolearn.sim.backend import DEVICE_BACKENDS, CameraView
from robolearn.sim.scene import DEPTH, RGB, CameraSensorCfg
from robolearn.sim.transforms import quat_to_mat
from robolearn.tasks.core import TaskCfg, TaskEnvView


class ImageSpec(NamedTuple):
    """One image observation: which camera, what it holds, its shape and type for one world."""

    camera: str
    kind: str
    """``rgb`` or ``depth``."""
    shape: tuple[int, int, int]
    """(height, width, channels)."""
    dtype: type[np.generic]


def image_specs(cfg: TaskCfg) -> dict[str, ImageSpec]:
    """The image observation keys of a task, in camera order (colour before depth)."""
    specs: dict[str, ImageSpec] = {}
    for name, cam in cfg.cameras.items():
        specs[name + RGB] = ImageSpec(name, "rgb", (cam.height, cam.width, 3), np.uint8)
        if cam.depth:
            specs[name + DEPTH] = ImageSpec(name, "depth", (cam.height, cam.width, 1), np.float32)
    return specs


def camera_views(env: TaskEnvView, cam: CameraSensorCfg) -> list[CameraView]:
    """Where the camera is in every world (a mounted camera follows its frame)."""
    pts = np.array([cam.pos, cam.target], dtype=np.float64)
    up = np.asarray(cam.up, dtype=np.float64)
    n = env.num_envs
    if cam.frame is None:
        world_pts, world_up = np.broadcast_to(pts, (n, 2, 3)), np.broadcast_to(up, (n, 3))
    else:
        rot = quat_to_mat(env.sim.frame_quat(cam.frame))  # (n, 3, 3)
        origin = env.sim.frame_pos(cam.frame)
        world_pts = origin[:, None, :] + np.einsum("nij,kj->nki", rot, pts)
        world_up = np.einsum("nij,j->ni", rot, up)
    return [
        CameraView(
            tuple(world_pts[i, 0]),
            tuple(world_pts[i, 1]),
            tuple(world_up[i]),
            cam.fovy,
            cam.width,
            cam.height,
            cam.depth,
        )
        for i in range(n)
    ]


def render_cameras(env: TaskEnvView) -> dict[str, npt.NDArray[np.generic]]:
    """Every camera's images of every world: ``<name>_rgb`` (n, H, W, 3) uint8 and, for a depth
    camera, ``<name>_depth`` (n, H, W, 1) float32."""
    cfg = env.cfg
    if env.sim.name in DEVICE_BACKENDS:  # every world in one launch, the images left on the device
        return env.sim.render_cameras(tuple(cfg.cameras.items()))  # type: ignore[attr-defined]
    out: dict[str, npt.NDArray[np.generic]] = {}
    for name, cam in cfg.cameras.items():
        rgb = np.empty((env.num_envs, cam.height, cam.width, 3), np.uint8)
        depth = np.empty((env.num_envs, cam.height, cam.width, 1), np.float32) if cam.depth else None
        for i, view in enumerate(camera_views(env, cam)):
            markers = cfg.markers(env, i) if cam.markers and cfg.markers is not None else ()
            rgb[i], d = env.sim.render_view(i, view, markers)
            if depth is not None and d is not None:
                depth[i, :, :, 0] = d
        out[name + RGB] = rgb
        if depth is not None:
            out[name + DEPTH] = depth
    return out
