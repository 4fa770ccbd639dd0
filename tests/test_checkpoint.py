"""Checkpoints: exact round trips, and refusal of damaged or tampered files without running their code."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from robolearn.errors import CorruptFileError
from robolearn.policy.normalization import RunningNorm
from robolearn.rl.checkpoint import (
    checkpoint_steps,
    checkpoints,
    load_checkpoint,
    restore_agent,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from robolearn.rl.config import SACConfig
from robolearn.rl.replay import Batch, DeviceBatch, LearnerBatch, ReplayBuffer
from robolearn.rl.sac import SAC

CFG = SACConfig(hidden=(32, 32), batch_size=16, num_critics=3)


def _parts(seed: int) -> tuple[SAC, RunningNorm, ReplayBuffer, ReplayBuffer]:
    torch.manual_seed(seed)
    agent = SAC(5, 2, CFG, torch.device("cpu"))
    x = torch.randn(16, 5)
    batch = DeviceBatch(x, torch.zeros(16, 2), torch.ones(16), x, torch.zeros(16))
    agent.update(LearnerBatch.one_step(batch, 0.99))  # optimizer state exists
    norm = RunningNorm(5)
    norm.update(np.random.default_rng(seed).normal(size=(40, 5)))
    online, demos = ReplayBuffer(50, {"s": (5,)}, 2), ReplayBuffer(50, {"s": (5,)}, 2)
    obs = {"s": np.random.default_rng(seed).normal(size=(30, 5)).astype(np.float32)}
    online.add(
        Batch(obs, np.zeros((30, 2), np.float32), np.ones(30, np.float32), obs, np.zeros(30, np.float32))
    )
    demos.add(
        Batch(obs, np.ones((30, 2), np.float32), np.zeros(30, np.float32), obs, np.ones(30, np.float32))
    )
    return agent, norm, online, demos


def _save(root: Path, steps: int = 100, keep: int = 2) -> Path:
    agent, norm, online, demos = _parts(0)
    rng = np.random.default_rng(7)
    rng.normal(size=3)
    state = {"rng": rng_state(rng)}
    return save_checkpoint(
        root, steps, agent=agent, obs_norm=norm, online=online, demos=demos, state=state, keep=keep
    )


def _rehash(ckpt: Path, name: str) -> None:
    manifest = json.loads((ckpt / "manifest.json").read_text())
    data = (ckpt / name).read_bytes()
    manifest[name] = {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}
    (ckpt / "manifest.json").write_text(json.dumps(manifest))


def test_round_trip_restores_everything(tmp_path: Path) -> None:
    agent, norm, online, _ = _parts(0)
    ckpt = _save(tmp_path / "checkpoints")
    assert (tmp_path / "checkpoints" / "latest").read_text() == ckpt.name
    fresh, fresh_norm, _, _ = _parts(1)
    loaded = load_checkpoint(tmp_path)
    restore_agent(fresh, fresh_norm, loaded)
    for a, b in zip(agent.state_dict().values(), fresh.state_dict().values(), strict=True):
        torch.testing.assert_close(a, b)
    assert (
        fresh.critic_opt.state_dict()["state"][0]["step"] == agent.critic_opt.state_dict()["state"][0]["step"]
    )
    np.testing.assert_array_equal(fresh_norm.mean, norm.mean)
    back = loaded.replay("online")
    assert back is not None and back.size == online.size
    np.testing.assert_array_equal(back.obs["s"], online.obs["s"])
    rng = np.random.default_rng(0)
    set_rng_state(rng, loaded.state["rng"])
    expected = np.random.default_rng(7)
    expected.normal(size=3)
    assert rng.normal() == expected.normal()


def test_only_the_newest_checkpoints_are_kept(tmp_path: Path) -> None:
    for steps in (10, 20, 30):
        _save(tmp_path, steps)
    assert sorted(p.name for p in tmp_path.glob("ckpt-*")) == ["ckpt-0000000020", "ckpt-0000000030"]
    assert not list(tmp_path.glob(".*tmp*"))
    # --keep-checkpoints: a run's last policies, to evaluate or export each.
    for steps in (40, 50, 60):
        _save(tmp_path, steps, keep=3)
    assert sorted(p.name for p in tmp_path.glob("ckpt-*")) == [f"ckpt-00000000{s}" for s in (40, 50, 60)]
    # Their steps, oldest first, read back from the folders' names.
    assert [checkpoint_steps(p) for p in checkpoints(tmp_path)] == [40, 50, 60]
    with pytest.raises(ValueError, match=r"latest is not a checkpoint folder \(expected ckpt-<env steps>\)"):
        checkpoint_steps(tmp_path / "latest")
    with pytest.raises(ValueError, match=r"ckpt-x1 is not a checkpoint folder"):
        checkpoint_steps(tmp_path / "ckpt-x1")


@pytest.mark.parametrize("name", ["model.safetensors", "replay_online.npz", "optimizer.pt", "state.json"])
def test_a_modified_or_truncated_file_is_named(tmp_path: Path, name: str) -> None:
    ckpt = _save(tmp_path)
    data = (ckpt / name).read_bytes()
    (ckpt / name).write_bytes(data[: len(data) // 2])
    with pytest.raises(CorruptFileError, match=rf"{name} does not match its manifest"):
        load_checkpoint(ckpt)


class _Payload:
    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (os.system, (f"touch {os.environ['ROBOLEARN_TEST_MARKER']}",))


def test_code_in_a_checkpoint_is_never_executed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = tmp_path / "pwned"
    monkeypatch.setenv("ROBOLEARN_TEST_MARKER", str(marker))
    ckpt = _save(tmp_path / "c")
    torch.save({"actor": _Payload()}, ckpt / "optimizer.pt")
    _rehash(ckpt, "optimizer.pt")  # an attacker who also rewrites the manifest
    loaded = load_checkpoint(ckpt)
    with pytest.raises(CorruptFileError, match=r"optimizer\.pt refused"):
        restore_agent(*_parts(2)[:2], loaded)
    assert not marker.exists()


def test_a_folder_that_is_not_a_checkpoint_is_named(tmp_path: Path) -> None:
    with pytest.raises(CorruptFileError, match="is not a robolearn run or checkpoint"):
        load_checkpoint(tmp_path)
