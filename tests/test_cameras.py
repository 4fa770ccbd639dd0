"""Task cameras (issue 13): image observations on every backend, spaces, autoreset, bad definitions."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from robolearn.envs.task_env import TaskEnv
from robolearn.sim.backend import CameraView, SimError, view_axes
from robolearn.sim.scene import CameraSensorCfg
from robolearn.tasks import make_task_cfg
from robolearn.tasks.cameras import image_specs
from robolearn.tasks.core import TaskCfg, TaskError

BACKEND_WORLDS = [("mujoco", 1), ("mujoco_batch", 2), ("pybullet", 2)]


def _pixels(**changes: object) -> TaskCfg:
    """panda_pick_cube_pixels with small cameras (fast on the CPU renderers) and the given changes."""
    cfg = make_task_cfg("panda_pick_cube_pixels")
    cams = {k: dataclasses.replace(c, width=32, height=24) for k, c in cfg.cameras.items()}
    return dataclasses.replace(cfg, **{"cameras": cams, **changes})  # type: ignore[arg-type]


@pytest.mark.parametrize(("backend", "n"), BACKEND_WORLDS)
def test_images_have_the_configured_shape_and_differ_between_worlds(backend: str, n: int) -> None:
    env = TaskEnv(_pixels(), backend, n, seed=3, render_mode=None)
    try:
        obs, _ = env.reset(seed=3)
        assert set(env.image_specs) == {"wrist_rgb", "scene_rgb"}
        for key in env.image_specs:
            assert obs[key].shape == (n, 24, 32, 3) and obs[key].dtype == np.uint8
            assert obs[key].std() > 5  # a picture, not a blank
        # No privileged cube state in the pixel variant.
        assert not {"cube_pos", "cube_from_ee"} & set(obs)
        for i in range(n):
            assert env.single_observation_space.contains({k: v[i] for k, v in obs.items()})
        if n > 1:  # the cube lies elsewhere in each world: the scene camera sees it move
            assert not np.array_equal(obs["scene_rgb"][0], obs["scene_rgb"][1])
        before = obs["wrist_rgb"].copy()
        action = np.tile([0.02, 0.0, -0.02, 0.0], (n, 1))
        for _ in range(3):
            obs, *_ = env.step(action)
        assert not np.array_equal(before, obs["wrist_rgb"])  # the wrist camera moves with the hand
    finally:
        env.close()


def _red_centroid(image: np.ndarray) -> np.ndarray:
    r, g = image[..., 0].astype(int), image[..., 1].astype(int)
    ys, xs = np.nonzero((r > 90) & (r > 2 * g))
    assert len(xs) > 0, "the cube is not in view"
    return np.array([xs.mean(), ys.mean()])


def test_engines_see_the_cube_at_the_same_place_and_depth() -> None:
    """Same pinhole on both engines: the cube's pixels and the depth agree (docs/backends.md)."""
    cfg = make_task_cfg("panda_pick_cube_pixels")
    cams = {k: dataclasses.replace(c, depth=True) for k, c in cfg.cameras.items()}
    cfg = dataclasses.replace(cfg, cameras=cams)
    seen = {}
    for backend in ("mujoco", "pybullet"):
        env = TaskEnv(cfg, backend, 1, seed=5, render_mode=None)
        obs, _ = env.reset(seed=5)
        seen[backend] = obs
        assert obs["scene_depth"].shape == (1, 64, 64, 1) and obs["scene_depth"].dtype == np.float32
        env.close()
    for key in ("wrist_rgb", "scene_rgb"):
        a, b = (_red_centroid(seen[k][key][0]) for k in ("mujoco", "pybullet"))
        assert np.linalg.norm(a - b) < 2.0, (key, a, b)
    for key in ("wrist_depth", "scene_depth"):
        a, b = seen["mujoco"][key][0, ..., 0], seen["pybullet"][key][0, ..., 0]
        near = (a < 3.0) & (b < 3.0)  # the table and robot, not the background
        assert near.mean() > 0.3
        assert np.median(np.abs(a[near] - b[near])) < 0.02  # metres along the optical axis


def test_autoreset_returns_final_images() -> None:
    env = TaskEnv(_pixels(episode_length=2), "mujoco_batch", 2, seed=0, render_mode=None)
    try:
        env.reset(seed=0)
        env.step(np.zeros((2, 4)))
        obs, _, _, truncated, info = env.step(np.zeros((2, 4)))
        assert truncated.all()
        final = info["final_obs"][0]
        assert final["wrist_rgb"].shape == (24, 32, 3) and final["wrist_rgb"].dtype == np.uint8
        assert obs["wrist_rgb"].shape == (2, 24, 32, 3)
    finally:
        env.close()


def test_car_pixels_render_on_both_engines() -> None:
    cfg = make_task_cfg("car_checkpoints_pixels")
    assert list(image_specs(cfg)) == ["front_rgb"]
    assert "next_checkpoint" not in cfg.observations
    for backend in ("mujoco_batch", "pybullet"):
        env = TaskEnv(cfg, backend, 1, seed=1, render_mode=None)
        obs, _ = env.reset(seed=1)
        assert obs["front_rgb"].shape == (1, 48, 64, 3)
        green = (obs["front_rgb"][0, ..., 1] > 120) & (obs["front_rgb"][0, ..., 0] < 80)
        assert green.any(), f"{backend}: the next checkpoint is not drawn for the camera"
        env.close()


@pytest.mark.parametrize(
    ("camera", "message"),
    [
        (CameraSensorCfg(0, 64), "width and height must lie in"),
        (CameraSensorCfg(64, 2000), "width and height must lie in"),
        (CameraSensorCfg(64, 64, fovy=180.0), "fovy 180.0 must lie strictly between"),
    ],
)
def test_bad_camera_definitions_are_refused(camera: CameraSensorCfg, message: str) -> None:
    cfg = dataclasses.replace(make_task_cfg("panda_pick_cube_pixels"), cameras={"wrist": camera})
    with pytest.raises(TaskError, match=message) as err:
        cfg.validate()
    assert "\n" not in str(err.value) and "camera 'wrist'" in str(err.value)


def test_camera_name_clash_and_bad_name_are_refused() -> None:
    base = make_task_cfg("panda_pick_cube_pixels")
    clash = dataclasses.replace(base, cameras={"ee_pos": CameraSensorCfg(8, 8)})
    clash.observations["ee_pos_rgb"] = clash.observations["ee_pos"]
    with pytest.raises(TaskError, match="also a state observation term"):
        clash.validate()
    with pytest.raises(TaskError, match="must be an identifier"):
        dataclasses.replace(base, cameras={"wrist cam": CameraSensorCfg(8, 8)}).validate()


def test_camera_on_an_unknown_frame_is_one_line() -> None:
    cfg = _pixels()
    cams = dict(cfg.cameras, wrist=dataclasses.replace(cfg.cameras["wrist"], frame="no_such_frame"))
    # Found when the scene is compiled (its cameras are part of the MuJoCo model), not at a render.
    with pytest.raises(SimError, match="unknown frame 'no_such_frame'") as err:
        TaskEnv(dataclasses.replace(cfg, cameras=cams), "mujoco", 1, render_mode=None)
    assert "\n" not in str(err.value)


def test_degenerate_view_is_refused() -> None:
    with pytest.raises(SimError, match="target must differ"):
        view_axes(CameraView((0.0, 0.0, 1.0), (0.0, 0.0, 1.0), (0.0, 0.0, 1.0), 45.0, 8, 8))
    with pytest.raises(SimError, match="up must not lie along"):
        view_axes(CameraView((0.0, 0.0, 1.0), (0.0, 0.0, 0.0), (0.0, 0.0, 1.0), 45.0, 8, 8))


def test_bench_sim_has_a_rendering_table() -> None:
    from robolearn.bench.render import RENDER_BACKENDS, RESOLUTIONS, render_rows

    rows = render_rows(num_envs=2, seconds=0.05, seed=0)
    assert [(r["backend"], r["resolution"]) for r in rows] == [
        (b, f"{w}x{h}") for b in RENDER_BACKENDS for w, h in RESOLUTIONS
    ]
    for row in rows:
        assert row["frames_per_s"] > 0 and row["frame_bytes"] == 3 * int(
            np.prod([int(x) for x in row["resolution"].split("x")])
        )
        assert row["num_envs"] == (1 if row["backend"] == "mujoco" else 2)


def test_robolearn_tasks_shows_each_pixel_task_s_image_terms(capsys: pytest.CaptureFixture[str]) -> None:
    """``robolearn tasks``: an ``images:`` line under each task with cameras (key, height x width x
    channels, dtype, camera), none under a state task."""
    from robolearn.cli.tasks import TasksCmd, run_tasks

    run_tasks(TasksCmd())
    lines = capsys.readouterr().out.splitlines()

    def block(task: str) -> list[str]:
        start = next(i for i, line in enumerate(lines) if line.startswith(f"{task}  ["))
        end = next((i for i in range(start + 1, len(lines)) if not lines[i].startswith("    ")), len(lines))
        return lines[start + 1 : end]

    assert (
        "    images:      wrist_rgb 64x64x3 uint8 (wrist camera), scene_rgb 64x64x3 uint8 (scene camera)"
        in block("panda_pick_cube_pixels")
    )
    assert "    images:      front_rgb 48x64x3 uint8 (front camera)" in block("car_checkpoints_pixels")
    assert not any(line.startswith("    images:") for line in block("panda_pick_cube"))
