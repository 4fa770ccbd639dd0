"""Task cameras traced on the device by MuJoCo Warp (issue 14), checked on Warp's CPU device.

The host's OpenGL images are the reference for what a camera sees: same pinhole, same pose, same
objects. Shading differs by renderer (docs/backends.md), so the test compares geometry: where the
red cube lies in each camera's image of each world.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mujoco_warp")
torch = pytest.importorskip("torch")

from robolearn.sim.backend import SimError  # noqa: E402
from robolearn.tasks import make_task_cfg  # noqa: E402
from robolearn.tasks.worlds import TaskWorlds  # noqa: E402

TASK = "panda_pick_cube_pixels"


@pytest.fixture(autouse=True)
def _warp_on_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROBOLEARN_WARP_DEVICE", "cpu")


def _cube_mask(rgb: np.ndarray) -> np.ndarray:
    """Pixels of the red cube: strongly red, little green or blue (under either renderer's shading)."""
    r, g, b = (rgb[..., i].astype(int) for i in range(3))
    return (r > 100) & (r > 2 * g) & (r > 2 * b)


def test_device_images_match_the_host_renderer_geometrically() -> None:
    device = TaskWorlds(TASK, "mujoco_warp", 2, seed=3)
    host = TaskWorlds(TASK, "mujoco_batch", 2, seed=3)
    try:
        device.reset_worlds(np.arange(2))
        host.reset_worlds(np.arange(2))
        for _ in range(3):  # move the arm: the wrist camera follows the hand
            device.advance(np.tile([0.02, 0.0, -0.02, 0.04], (2, 1)))
        # The host worlds take the device worlds' state, so both renderers see the same scene.
        host.sim._data("qpos")[:] = device.sim.host(device.sim._qpos)  # type: ignore[attr-defined]
        host.sim._data("qvel")[:] = device.sim.host(device.sim._qvel)  # type: ignore[attr-defined]
        host.sim.forward(np.arange(2))
        seen, reference = device.observe(), host.observe()
    finally:
        device.close()
        host.close()

    for key in ("wrist_rgb", "scene_rgb"):
        image = seen[key]
        assert isinstance(image, torch.Tensor) and image.dtype == torch.uint8
        assert tuple(image.shape) == (2, 64, 64, 3) and image.device == torch.device(device.sim.device)  # type: ignore[attr-defined]
    scene = seen["scene_rgb"].cpu().numpy()
    assert not np.array_equal(scene[0], scene[1])  # two worlds, two cube positions
    for w in range(2):  # a few pixels at 64x64: where it lies, to a pixel, not its exact outline
        ours, theirs = _cube_mask(scene[w]), _cube_mask(reference["scene_rgb"][w])
        assert theirs.sum() >= 4 and ours.sum() >= 4, "the scene camera should see the cube"
        offset = np.argwhere(ours).mean(axis=0) - np.argwhere(theirs).mean(axis=0)
        assert np.abs(offset).max() < 1.0, (w, offset)
    # The wrist camera looks down at the table between the fingers: mostly the same picture.
    wrist, wrist_ref = seen["wrist_rgb"].cpu().numpy().astype(float), reference["wrist_rgb"].astype(float)
    blocks = [x.reshape(2, 8, 8, 8, 8, 3).mean(axis=(2, 4, 5)) for x in (wrist, wrist_ref)]
    assert np.corrcoef(blocks[0].ravel(), blocks[1].ravel())[0, 1] > 0.8


def test_a_marker_camera_is_refused_on_the_device() -> None:
    import dataclasses

    cfg = make_task_cfg(TASK)
    cams = dict(cfg.cameras, scene=dataclasses.replace(cfg.cameras["scene"], markers=True))
    worlds = TaskWorlds(dataclasses.replace(cfg, cameras=cams), "mujoco_warp", 1, seed=0)
    try:
        worlds.reset_worlds(np.arange(1))
        with pytest.raises(SimError, match="draws markers") as err:
            worlds.observe()
        assert "\n" not in str(err.value)
    finally:
        worlds.close()


def test_device_depth_matches_the_host_renderer() -> None:
    """Depth images (metres along the optical axis, (worlds, H, W, 1) float32 on the device) agree with
    OpenGL's at the same state: the table and the cube to a few millimetres where both renderers see
    them away from edges, and a ray that hits nothing reads the far clipping distance, as on the host."""
    import dataclasses

    cfg = make_task_cfg(TASK)
    cams = {k: dataclasses.replace(c, depth=True) for k, c in cfg.cameras.items()}
    depth_cfg = dataclasses.replace(cfg, cameras=cams)
    device = TaskWorlds(depth_cfg, "mujoco_warp", 2, seed=3)
    host = TaskWorlds(depth_cfg, "mujoco_batch", 2, seed=3)
    try:
        device.reset_worlds(np.arange(2))
        host.reset_worlds(np.arange(2))
        host.sim._data("qpos")[:] = device.sim.host(device.sim._qpos)  # type: ignore[attr-defined]
        host.sim.forward(np.arange(2))
        seen, reference = device.observe(), host.observe()
        far = device.sim._cameras._far  # type: ignore[attr-defined]
    finally:
        device.close()
        host.close()

    for key in ("wrist_depth", "scene_depth"):
        depth = seen[key]
        assert isinstance(depth, torch.Tensor) and depth.dtype == torch.float32
        assert tuple(depth.shape) == (2, 64, 64, 1)
        ours, theirs = depth.cpu().numpy()[..., 0], np.asarray(reference[key])[..., 0]
        hit = (ours < 0.99 * far) & (theirs < 0.99 * far)
        # Away from depth edges (a pixel's ray may graze another object in the other renderer).
        smooth = np.ones_like(hit)
        for axis in (1, 2):
            jump = np.abs(np.diff(theirs, axis=axis)) > 0.02
            pad = [(0, 0)] * 3
            pad[axis] = (1, 0)
            smooth &= ~np.pad(jump, pad) & ~np.pad(jump, [(a, b) for b, a in pad])
        inner = hit & smooth
        assert inner.mean() > 0.5, key  # most of each image is the table, the robot and the cube
        assert np.median(np.abs(ours - theirs)[inner]) < 2e-3, key
        assert np.percentile(np.abs(ours - theirs)[inner], 95) < 1e-2, key
        assert (ours > 0).all() and (ours <= far * 1.0001).all(), key
    # The scene camera looks down at the table: it sees nothing beyond it only past the table's edge.
    scene = seen["scene_depth"].cpu().numpy()[..., 0]
    np.testing.assert_allclose(scene.min(), np.asarray(reference["scene_depth"])[..., 0].min(), atol=1e-2)
