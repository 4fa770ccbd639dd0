"""A task's cameras rendered for every world at once on the device, by MuJoCo Warp's ray tracer (issue 14).

The host backends draw one world per call through OpenGL (:mod:`robolearn.tasks.cameras`). On
``mujoco_warp`` the task's cameras are MuJoCo cameras of the compiled model (``task_<name>``, see
:func:`robolearn.sim.mujoco_model.build_spec`), so their poses in every world come from the physics'
own kinematics, and one launch traces every camera of every world. Images stay on the device:
RGB as (num_worlds, H, W, 3) uint8 and depth as (num_worlds, H, W, 1) float32 metres along the
optical axis, the host renderers' layout, top row first.

What differs from the host renderers (docs/backends.md): a ray tracer with MuJoCo Warp's shading
(no shadows, one sample per pixel, so edges alias), no markers (painted goals exist only in OpenGL
scenes: a camera with ``markers`` is refused here), and where a ray hits nothing the depth is the
model's far clipping distance as OpenGL reports it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import mujoco
import mujoco_warp as mjw
import torch
import warp as wp

from robolearn.sim.backend import SimError
from robolearn.sim.mujoco_model import TASK_CAMERA_PREFIX
from robolearn.sim.scene import DEPTH, RGB, CameraSensorCfg


class WarpCameras:
    """The task cameras of one MuJoCo Warp model, for ``num_worlds`` worlds."""

    def __init__(
        self,
        mjm: mujoco.MjModel,
        num_worlds: int,
        cameras: Sequence[tuple[str, CameraSensorCfg]],
        wp_device: Any,
    ) -> None:
        for name, cam in cameras:
            if cam.markers:
                raise SimError(
                    f"camera {name!r} draws markers, which only the host renderers can: "
                    "render it on mujoco or mujoco_batch, or set markers=False"
                )
        camera = mujoco.mjtObj.mjOBJ_CAMERA
        ids = {name: mujoco.mj_name2id(mjm, camera, TASK_CAMERA_PREFIX + name) for name, _ in cameras}
        missing = [name for name, i in ids.items() if i < 0]
        if missing:  # a bug: TaskWorlds puts the task's cameras into the scene it builds
            raise RuntimeError(f"cameras {missing} are not in the model: its scene was built without them")
        # The render context lists the active cameras in model order; find each task camera there.
        by_id = sorted(cameras, key=lambda c: ids[c[0]])
        self._slots = {name: slot for slot, (name, _) in enumerate(by_id)}
        self._cameras = list(cameras)
        self._num_worlds = num_worlds
        self._far = float(mjm.vis.map.zfar * mjm.stat.extent)
        with wp.ScopedDevice(wp_device):
            self._rc = mjw.create_render_context(
                mjm,
                nworld=num_worlds,
                cam_res=[(cam.width, cam.height) for _, cam in by_id],
                render_rgb=[True] * len(by_id),
                render_depth=[cam.depth for _, cam in by_id],
                cam_active=[TASK_CAMERA_PREFIX + name for name, _ in by_id],
            )
        self._rgb_adr = self._rc.rgb_adr.numpy()
        self._depth_adr = self._rc.depth_adr.numpy()
        self._wp_device = wp_device

    def render(self, m: Any, d: Any) -> dict[str, torch.Tensor]:
        """Every camera's images of every world in the state ``d`` holds (after a forward pass)."""
        with wp.ScopedDevice(self._wp_device):
            mjw.refit_bvh(m, d, self._rc)
            mjw.render(m, d, self._rc)
        n = self._num_worlds
        # Pixels are packed as 0xAABBGGRR read little-endian: bytes B, G, R, A (render_util.py).
        packed = wp.to_torch(self._rc.rgb_data).view(torch.uint8).reshape(n, -1, 4)
        depth_all = wp.to_torch(self._rc.depth_data) if any(c.depth for _, c in self._cameras) else None
        out: dict[str, torch.Tensor] = {}
        for name, cam in self._cameras:
            slot, pixels = self._slots[name], cam.width * cam.height
            adr = int(self._rgb_adr[slot])
            # Indexing copies: the render buffers are overwritten by the next frame.
            out[name + RGB] = packed[:, adr : adr + pixels, [2, 1, 0]].reshape(n, cam.height, cam.width, 3)
            if cam.depth and depth_all is not None:
                adr = int(self._depth_adr[slot])
                depth = depth_all[:, adr : adr + pixels].reshape(n, cam.height, cam.width, 1)
                out[name + DEPTH] = torch.where(depth > 0, depth, self._far)  # a miss is 0 here
        return out
