"""Recorded pixel episodes as demonstrations: ``robolearn record panda_pick_cube_pixels`` writes each
camera as an mp4 feature; those frames come back as the task's image observations for training."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from robolearn.data.format import ACTION
from robolearn.data.reader import read_dataset
from robolearn.envs.task_env import TaskEnv
from robolearn.errors import CorruptFileError
from robolearn.hil.config import RecordCmd
from robolearn.hil.record import record
from robolearn.policy.normalization import ActionScaler
from robolearn.rl.pixel_replay import FrameReplay, load_image_demos
from robolearn.tasks import make_task_cfg

TASK = "panda_pick_cube_pixels"


@pytest.fixture(scope="module")
def pixel_demos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two successful scripted episodes of the pixel task, recorded through ``robolearn record``."""
    out = tmp_path_factory.mktemp("pixel-demos") / "pick"
    summary = record(RecordCmd(TASK, policy="scripted", episodes=2, out=out, display="none"))
    assert summary["successes"] == 2
    return out


def _inputs() -> tuple[ActionScaler, dict[str, tuple[int, ...]], dict[str, str]]:
    """The task's observation shapes (frames and state terms) and its cameras, as DrQ sees them."""
    env = TaskEnv(TASK, "mujoco", 1, seed=0, render_mode=None)
    try:
        shapes = {k: tuple(s.shape or ()) for k, s in env.single_observation_space.items()}
        cameras = {key: spec.camera for key, spec in env.image_specs.items()}
    finally:
        env.close()
    cfg = make_task_cfg(TASK)
    return ActionScaler(cfg.action.low, cfg.action.high), shapes, cameras


def _load(root: Path, cameras: dict[str, str] | None = None) -> FrameReplay:
    scaler, shapes, task_cameras = _inputs()
    return load_image_demos(root, scaler, shapes, cameras or task_cameras, 4_096)


def test_recorded_cameras_become_image_observations(pixel_demos: Path) -> None:
    ds = read_dataset(pixel_demos)
    lengths = [e.length for e in ds.episodes]
    replay = _load(pixel_demos)
    # Both episodes ended in success (terminal): every frame starts a transition.
    assert len(replay) == sum(lengths) and replay.filled == sum(lengths)
    assert replay.obs["wrist_rgb"].dtype == np.uint8 and replay.obs["wrist_rgb"].shape[1:] == (64, 64, 3)
    first = replay.take(np.arange(lengths[0] - 1))
    for key, camera in (("wrist_rgb", "wrist"), ("scene_rgb", "scene")):
        video = ds.video_frames(0, f"observation.images.{camera}")
        np.testing.assert_array_equal(first.obs[key], video[:-1])
        np.testing.assert_array_equal(first.next_obs[key], video[1:])  # stored once, read as successor
    frames = ds.episode_frames(0)
    scaler = _inputs()[0]
    np.testing.assert_allclose(first.action, scaler.to_unit(frames[ACTION][:-1]), atol=1e-6)
    np.testing.assert_allclose(first.obs["ee_pos"], frames["observation.ee_pos"][:-1], atol=1e-6)
    last = replay.take(np.array([lengths[0] - 1]))
    assert last.terminated[0] == 1.0


def test_train_a_pixel_task_from_a_recorded_dataset(
    pixel_demos: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``robolearn train panda_pick_cube_pixels --demos DATASET``: DrQ with the recording as its
    demonstration half; the run's policy is written."""
    from robolearn.cli import main

    torch.set_num_threads(1)
    argv = ["train", TASK, "--demos", str(pixel_demos), "--steps", "24", "--learning-starts", "16"]
    argv += ["--out", str(tmp_path), "--name", "demo-run", "--sac.batch-size", "8"]
    main(argv)
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["env_steps"] == 24
    assert (Path(summary["policy"]) / "policy.json").is_file()
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--demos", str(pixel_demos), str(pixel_demos)])
    assert exit_info.value.code == 2
    assert "--demos: a task with cameras takes one dataset, got 2" in capsys.readouterr().err


def test_damaged_or_missing_videos_name_the_file_and_episode(pixel_demos: Path, tmp_path: Path) -> None:
    import shutil

    root = tmp_path / "copy"
    shutil.copytree(pixel_demos, root)
    ds = read_dataset(root)
    video = ds.meta.path(ds.meta.video_file(ds.meta.episodes[1], "observation.images.scene"))
    data = bytearray(video.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 64] = bytes(64)
    video.write_bytes(bytes(data))
    with pytest.raises(CorruptFileError, match=rf"^{video}: .*\(episode 1, camera 'scene'\)$"):
        _load(root)
    video.unlink()
    with pytest.raises(CorruptFileError, match=rf"^{video}: missing \(episode 1\b"):  # found when opened
        _load(root)
    with pytest.raises(CorruptFileError, match="no camera 'side' for wrist_rgb; it records cameras"):
        _load(pixel_demos, {"wrist_rgb": "side", "scene_rgb": "scene"})
