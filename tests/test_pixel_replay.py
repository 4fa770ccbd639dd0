"""Replay of image observations (issue 13): frames once per step, memory budget, recorded cameras."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from robolearn.data.format import DatasetError
from robolearn.data.writer import DatasetWriter
from robolearn.errors import ConfigError
from robolearn.policy.normalization import ActionScaler
from robolearn.rl.pixel_replay import (
    FrameReplay,
    TensorBatch,
    capacity_for_budget,
    load_image_demos,
    slot_bytes,
)

SHAPES = {"wrist_rgb": (16, 16, 3), "pos": (3,)}
IMAGE_BYTES = 16 * 16 * 3


def _obs(n: int, step: int) -> dict[str, np.ndarray]:
    """An observation whose every value tells the world and the step it came from."""
    world = np.arange(n)
    image = np.zeros((n, 16, 16, 3), np.uint8)
    image[..., 0] = (10 * world + step)[:, None, None] % 256
    pos = np.stack([world, np.full(n, step), np.zeros(n)], axis=1).astype(np.float32)
    return {"wrist_rgb": image, "pos": pos}


def _run(buf: FrameReplay, n: int, steps: int, episode: int) -> None:
    """n worlds stepping, each episode ``episode`` steps long (ending as a time-out)."""
    t = 0
    obs = _obs(n, 0)
    for step in range(steps):
        t += 1
        final = _obs(n, 1000 + step) if t == episode else _obs(n, step + 1)
        ended = np.full(n, t == episode)
        buf.add(
            obs,
            np.full((n, 2), step, np.float32),
            np.full(n, step, np.float32),
            final,
            np.zeros(n, bool),
            ended,
        )
        obs = _obs(n, 10_000 + step) if t == episode else final  # a reset starts a new episode
        t = 0 if t == episode else t


def test_frames_are_stored_once_per_step() -> None:
    n, steps = 4, 30
    buf = FrameReplay(1_000, SHAPES, 2)
    _run(buf, n, steps, episode=100)  # no episode ends
    # One slot per world per step, plus the first observations: the frames of next_obs are not copied.
    assert buf.filled == n * (steps + 1)
    assert len(buf) == n * steps
    assert buf.bytes_per_slot == slot_bytes(SHAPES, 2)
    assert IMAGE_BYTES < buf.bytes_per_slot < 1.2 * IMAGE_BYTES  # well under two images a transition
    assert buf.obs["wrist_rgb"].dtype == np.uint8 and buf.obs["pos"].dtype == np.float32


def test_next_observation_is_the_successor_across_episode_ends() -> None:
    n, episode = 3, 5
    buf = FrameReplay(500, SHAPES, 2)
    _run(buf, n, 20, episode)
    # An ended episode costs one extra slot: its final observation.
    assert buf.filled == n * (20 + 20 // episode)
    batch = buf.take(np.flatnonzero(buf.valid))
    step = batch.action[:, 0].astype(int)
    world = batch.obs["pos"][:, 0].astype(int)
    ends = (step + 1) % episode == 0
    expected = np.where(ends, 1000 + step, step + 1)
    assert np.array_equal(batch.next_obs["pos"][:, 1].astype(int), expected)
    assert np.array_equal(batch.next_obs["wrist_rgb"][:, 0, 0, 0], (10 * world + expected) % 256)
    starts = step % episode == 0
    first = np.where(step == 0, 0, 10_000 + step - 1)
    assert np.array_equal(batch.obs["pos"][starts, 1].astype(int), first[starts])


def test_ring_wraps_without_stale_transitions() -> None:
    buf = FrameReplay(40, SHAPES, 2)
    _run(buf, 2, 200, episode=7)
    assert buf.filled == 40
    batch = buf.sample(256, np.random.default_rng(0))
    step = batch.action[:, 0].astype(int)
    assert step.min() >= 200 - 40  # only recent transitions survive
    expected = np.where((step + 1) % 7 == 0, 1000 + step, step + 1)
    assert np.array_equal(batch.next_obs["pos"][:, 1].astype(int), expected)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_batches_gathered_on_the_device_match_the_hosts(device: str) -> None:
    if device == "cuda" and not torch.cuda.is_available():
        pytest.skip("needs CUDA")
    dev = torch.device(device)
    buf = FrameReplay(40, SHAPES, 2)
    _run(buf, 2, 9, episode=7)  # some frames before the copy is made, then the ring wraps
    buf.keep_on(dev)
    _run(buf, 2, 31, episode=5)
    buf.add_episode(_obs(6, 77), np.zeros((6, 2), np.float32), np.arange(6.0), terminal=True)
    idx = buf.sample_slots(64, np.random.default_rng(1))
    gathered, expected = buf.take_tensors(idx, dev), TensorBatch.of(buf.take(idx), dev)
    # The copy is the device's own memory: an old frame overwritten on the host only would show.
    assert all(v.device.type == dev.type for v in gathered.obs.values())
    for field in ("obs", "next_obs"):
        for key in SHAPES:
            assert torch.equal(getattr(gathered, field)[key], getattr(expected, field)[key]), (field, key)
    for field in ("action", "reward", "terminated"):
        assert torch.equal(getattr(gathered, field), getattr(expected, field)), field
    assert gathered.obs["wrist_rgb"].dtype == torch.uint8


def test_capacity_from_a_memory_budget() -> None:
    per = slot_bytes(SHAPES, 2)
    assert capacity_for_budget(1000 * per, SHAPES, 2) == 1000
    with pytest.raises(ConfigError, match="holds 3 steps") as err:
        capacity_for_budget(3 * per, SHAPES, 2)
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="below 3 slots per world"):
        FrameReplay(20, SHAPES, 2).add(
            _obs(8, 0),
            np.zeros((8, 2), np.float32),
            np.zeros(8),
            _obs(8, 1),
            np.zeros(8, bool),
            np.zeros(8, bool),
        )


# -- recorded cameras ------------------------------------------------------------------------------
def _record(root: Path, image_shape: tuple[int, int, int], lengths: tuple[int, ...] = (6, 5)) -> None:
    writer = DatasetWriter.create(
        root,
        repo_id="test/pixels",
        fps=50,
        robot_type="panda",
        obs_shapes={"pos": (3,)},
        obs_names=None,
        action_names=["dx", "grip"],
        image_shape=image_shape,
        camera="wrist",
    )
    for e, length in enumerate(lengths):
        for t in range(length):
            image = np.zeros(image_shape, np.uint8)
            image[..., 1] = 20 * t  # a brightness ramp survives lossy encoding
            writer.add_frame(
                {"pos": np.array([e, t, 0.0])},
                np.array([0.1, 0.0]),
                float(t),
                False,
                e == 0 and t == length - 1,
                False,
                image,
            )
        writer.save_episode("pick")
    writer.close()


def test_recorded_camera_frames_become_image_observations(tmp_path: Path) -> None:
    _record(tmp_path / "ds", (16, 16, 3))
    scaler = ActionScaler([-1.0, -1.0], [1.0, 1.0])
    buf = load_image_demos(tmp_path / "ds", scaler, SHAPES, {"wrist_rgb": "wrist"}, 100)
    # Episode 0 (terminal): 6 transitions; episode 1 (truncated): 4; 11 frames stored once each.
    assert len(buf) == 10 and buf.filled == 11
    batch = buf.take(np.flatnonzero(buf.valid))
    t = batch.obs["pos"][:, 1].astype(int)
    assert np.allclose(batch.obs["wrist_rgb"][:, 8, 8, 1], 20 * t, atol=6)
    last = batch.terminated == 1.0
    assert last.sum() == 1 and t[last][0] == 5
    ok = ~last
    assert np.array_equal(batch.next_obs["pos"][ok, 1].astype(int), t[ok] + 1)


def test_recorded_camera_with_another_resolution_is_one_line(tmp_path: Path) -> None:
    _record(tmp_path / "ds", (24, 32, 3), lengths=(3,))
    scaler = ActionScaler([-1.0, -1.0], [1.0, 1.0])
    with pytest.raises(DatasetError, match=r"camera 'wrist' records 24x32x3 frames; .* 16x16x3") as err:
        load_image_demos(tmp_path / "ds", scaler, SHAPES, {"wrist_rgb": "wrist"}, 100)
    assert "\n" not in str(err.value)
    with pytest.raises(
        DatasetError, match=r"no camera 'scene' for scene_rgb; it records cameras \['wrist'\]"
    ):
        load_image_demos(tmp_path / "ds", scaler, {"scene_rgb": (24, 32, 3)}, {"scene_rgb": "scene"}, 100)


def test_corrupted_recorded_frames_are_one_line(tmp_path: Path) -> None:
    _record(tmp_path / "ds", (16, 16, 3), lengths=(4,))
    video = next((tmp_path / "ds").glob("videos/*/*/*.mp4"))
    data = bytearray(video.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 64] = b"\xff" * 64
    video.write_bytes(bytes(data))
    scaler = ActionScaler([-1.0, -1.0], [1.0, 1.0])
    with pytest.raises(DatasetError) as err:
        load_image_demos(tmp_path / "ds", scaler, SHAPES, {"wrist_rgb": "wrist"}, 100)
    assert "\n" not in str(err.value) and video.name in str(err.value)


def test_batches_joined_in_groups_mix_their_parts_in_every_group() -> None:
    """Each critic step's slice of a DrQ batch holds demonstrations and online data in the batch's
    proportions (RLPD), not all demonstrations first."""
    dev = torch.device("cpu")
    demos, online = FrameReplay(40, SHAPES, 2), FrameReplay(40, SHAPES, 2)
    _run(demos, 1, 10, episode=100)
    _run(online, 1, 10, episode=100)
    demos.reward[:], online.reward[:] = 0.0, 1.0  # tell the two apart
    rng = np.random.default_rng(0)
    steps, batch = 4, 8
    parts = [buf.take_tensors(buf.sample_slots(m * steps, rng), dev) for buf, m in ((demos, 3), (online, 5))]
    joined = TensorBatch.cat(parts, groups=steps)
    assert len(joined.reward) == steps * batch
    for s in range(steps):
        rewards = joined.reward[s * batch : (s + 1) * batch]
        assert rewards.tolist() == [0.0] * 3 + [1.0] * 5, (s, rewards)
        frames = joined.obs["wrist_rgb"][s * batch : (s + 1) * batch]
        assert torch.equal(frames[3:], parts[1].obs["wrist_rgb"][s * 5 : (s + 1) * 5])
