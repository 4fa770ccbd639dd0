"""Replay buffers: ring semantics, persistence, damaged files, symmetric sampling."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from robolearn.errors import CorruptFileError
from robolearn.rl.replay import Batch, ReplayBuffer, sample_symmetric

SHAPES = {"pos": (3,), "grip": (1,)}


def batch(n: int, start: float, reward: float = 0.0) -> Batch:
    values = start + np.arange(n, dtype=np.float32)
    obs = {"pos": np.repeat(values[:, None], 3, axis=1), "grip": values[:, None]}
    return Batch(
        obs, np.tile(values[:, None], (1, 2)), np.full(n, reward, np.float32), obs, np.zeros(n, np.float32)
    )


def test_ring_buffer_keeps_the_newest_transitions() -> None:
    buf = ReplayBuffer(5, SHAPES, 2)
    buf.add(batch(3, 0))
    buf.add(batch(4, 3))
    assert len(buf) == 5 and buf.total_added == 7
    assert sorted(buf.obs["grip"][:, 0].tolist()) == [2, 3, 4, 5, 6]
    buf.add(batch(12, 100))
    assert sorted(buf.obs["grip"][:, 0].tolist()) == [107, 108, 109, 110, 111]


def test_save_and_load_round_trip(tmp_path: Path) -> None:
    buf = ReplayBuffer(10, SHAPES, 2)
    buf.add(batch(13, 0, reward=0.5))
    buf.save(tmp_path / "b.npz")
    again = ReplayBuffer.load(tmp_path / "b.npz")
    assert (again.pos, again.size, again.total_added) == (buf.pos, buf.size, buf.total_added)
    for k in SHAPES:
        np.testing.assert_array_equal(again.obs[k], buf.obs[k])
    np.testing.assert_array_equal(again.action, buf.action)
    rng_a, rng_b = np.random.default_rng(1), np.random.default_rng(1)
    np.testing.assert_array_equal(again.sample(8, rng_a).action, buf.sample(8, rng_b).action)


@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_damaged_buffer_file_is_refused(tmp_path: Path, damage: str) -> None:
    buf = ReplayBuffer(10, SHAPES, 2)
    buf.add(batch(10, 0))
    path = tmp_path / "b.npz"
    buf.save(path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2] if damage == "truncate" else b"not a buffer" * 10)
    with pytest.raises(CorruptFileError, match=r"b\.npz is damaged"):
        ReplayBuffer.load(path)


def test_symmetric_sampling_draws_half_from_each_buffer() -> None:
    online, demos = ReplayBuffer(100, SHAPES, 2), ReplayBuffer(100, SHAPES, 2)
    online.add(batch(50, 0, reward=0.0))
    demos.add(batch(20, 0, reward=1.0))
    rng = np.random.default_rng(0)
    for size in (256, 255):
        drawn = sample_symmetric(online, demos, size, 0.5, rng)
        assert len(drawn.reward) == size
        assert int(drawn.reward.sum()) == round(size * 0.5)
    only_online = sample_symmetric(online, None, 64, 0.5, rng)
    assert only_online.reward.sum() == 0
