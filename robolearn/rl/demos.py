"""Demonstrations for the demonstration buffer: a task's scripted expert rolled out."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from robolearn.envs.task_env import transition_next_obs
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
    kept = attempts = steps = 0
    while kept < episodes:
        if steps >= max_env_steps:
            raise RuntimeError(
                f"the scripted expert gave {kept} successful episodes of {attempts} in {steps} steps"
            )
        action = expert(obs)
        next_obs, reward, terminated, _, info = env.step(action)
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
        if "final_info" in info:
            for i in np.flatnonzero(info["_final_info"]).tolist():
                attempts += 1
                if info["final_info"]["episode_success"][i] and kept < episodes:
                    for transition in pending[i]:
                        buffer.add(transition)
                    kept += 1
                pending[i] = []
        obs = next_obs
    return buffer, attempts
