"""Demonstrations for the demonstration buffer: a task's scripted expert rolled out, or recorded episodes."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from robolearn.data.format import ACTION, DONE, INTERVENTION, OBS, REWARD, SUCCESS, TERMINATED, DatasetError
from robolearn.data.reader import read_dataset
from robolearn.envs.autoreset import EpisodeStatistics, transition_next_obs
from robolearn.policy.normalization import ActionScaler
from robolearn.rl.replay import Batch, ReplayBuffer


def collect_scripted_demos(
    env: Any,
    expert: Callable[[dict[str, npt.NDArray[np.float32]]], npt.NDArray[np.float64]],
    episodes: int,
    scaler: ActionScaler,
    capacity: int,
    seed: int,
    max_env_steps: int = 1_000_000,
) -> tuple[ReplayBuffer, int]:
    """Record ``episodes`` successful expert episodes; returns the buffer and the attempts made.

    Failed episodes are dropped, as SERL keeps only successful demonstrations.
    """
    shapes = {k: tuple(s.shape) for k, s in env.single_observation_space.items()}
    buffer = ReplayBuffer(capacity, shapes, len(scaler.low))
    pending: list[list[Batch]] = [[] for _ in range(env.num_envs)]
    obs, _ = env.reset(seed=seed)
    stats = EpisodeStatistics(env.num_envs)
    kept = attempts = steps = 0
    while kept < episodes:
        if steps >= max_env_steps:
            raise RuntimeError(
                f"the scripted expert gave {kept} successful episodes of {attempts} in {steps} steps"
            )
        action = expert(obs)
        next_obs, reward, terminated, truncated, info = env.step(action)
        steps += env.num_envs
        final_next = transition_next_obs(next_obs, info)
        unit = scaler.to_unit(action)
        for i in range(env.num_envs):
            pending[i].append(
                Batch(
                    {k: v[i : i + 1] for k, v in obs.items()},
                    unit[i : i + 1],
                    np.asarray(reward[i : i + 1], np.float32),
                    {k: v[i : i + 1] for k, v in final_next.items()},
                    np.asarray(terminated[i : i + 1], np.float32),
                )
            )
        ended = stats.step(reward, terminated, truncated, info)
        for j, i in enumerate(ended.worlds.tolist()):
            attempts += 1
            if ended.successes is not None and ended.successes[j] and kept < episodes:
                for transition in pending[i]:
                    buffer.add(transition)
                kept += 1
            pending[i] = []
        obs = next_obs
    return buffer, attempts


class DemoBuffer(ReplayBuffer):
    """Transitions from recorded episodes, and which of them a human drove."""

    def __init__(self, capacity: int, obs_shapes: dict[str, tuple[int, ...]], action_dim: int) -> None:
        super().__init__(capacity, obs_shapes, action_dim)
        self.is_intervention = np.zeros(capacity, bool)
        """Per slot: the action came from a human (HIL-SERL's intervention), not the policy."""
        self.episode_end = np.zeros(capacity, bool)
        """Per slot: the last transition kept of its episode (for returns-to-go)."""


def load_demo_buffer(
    root: Path,
    scaler: ActionScaler,
    obs_shapes: Mapping[str, tuple[int, ...]],
    capacity: int,
    *,
    successful_only: bool = False,
) -> DemoBuffer:
    """Recorded episodes as transitions for the demonstration buffer.

    A transition's next observation is the next frame's. An episode's last frame becomes a
    transition only if it ended in a terminal state (its next observation is then never used);
    a truncated episode's last frame has no recorded successor and is left out. Actions are mapped
    to [-1, 1] by ``scaler``. ``successful_only`` keeps episodes in which ``next.success`` held.
    """
    ds = read_dataset(Path(root))
    for key, shape in obs_shapes.items():
        feature = ds.features.get(OBS + key)
        if feature is None or int(np.prod(feature["shape"])) != int(np.prod(shape)):
            have = {k: tuple(ds.features[OBS + k]["shape"]) for k in ds.obs_keys}
            raise DatasetError(f"{ds.root}: no observation {key!r} of shape {shape}; it records {have}")
    action_dim = len(scaler.low)
    if ds.features.get(ACTION, {}).get("shape") != [action_dim]:
        raise DatasetError(
            f"{ds.root}: actions are {ds.features.get(ACTION, {}).get('shape')}, the task's have {action_dim}"
        )
    frames = ds.frames()
    n = len(frames["index"])
    episode = frames["episode_index"].astype(np.int64)
    last = np.r_[episode[1:] != episode[:-1], True] if n else np.zeros(0, bool)
    terminated = frames[TERMINATED if TERMINATED in frames else DONE].astype(bool)
    keep = ~last | terminated
    if successful_only:
        success = np.bincount(episode, weights=frames[SUCCESS].astype(float), minlength=len(ds.episodes)) > 0
        keep &= success[episode]
    idx = np.flatnonzero(keep)
    nxt = np.where(last[idx], idx, idx + 1)
    obs = {k: frames[OBS + k].reshape(n, *shape).astype(np.float32) for k, shape in obs_shapes.items()}
    buffer = DemoBuffer(capacity, dict(obs_shapes), action_dim)
    if len(idx):
        buffer.add(
            Batch(
                {k: v[idx] for k, v in obs.items()},
                scaler.to_unit(frames[ACTION][idx]),
                frames[REWARD][idx].astype(np.float32),
                {k: v[nxt] for k, v in obs.items()},
                terminated[idx].astype(np.float32),
            )
        )
        flags = frames[INTERVENTION][idx].astype(bool) if INTERVENTION in frames else np.zeros(len(idx), bool)
        buffer.is_intervention[: len(buffer)] = flags[-len(buffer) :]
        ends = np.r_[episode[idx][1:] != episode[idx][:-1], True]
        buffer.episode_end[: len(buffer)] = ends[-len(buffer) :]
    return buffer
