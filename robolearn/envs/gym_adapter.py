"""Any Gymnasium environment id as a robolearn training environment (``gym:Pendulum-v1``).

The adapter gives a Gymnasium vector env the conventions of :class:`robolearn.envs.task_env.TaskEnv`: dict
observations, same-step autoreset with ``final_obs``, and ``final_info`` carrying each episode's
return, length and success (Gymnasium's ``is_success`` where the env reports it).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium.vector import AutoresetMode

from robolearn.tasks.core import TaskError

PREFIX = "gym:"


def gym_env_id(task: str) -> str | None:
    """The Gymnasium id in ``gym:<id>``, or None for a robolearn task name."""
    return task[len(PREFIX) :] if task.startswith(PREFIX) else None


class GymVectorTask:
    """A Gymnasium vector environment with Box observations and actions, seen as a robolearn task."""

    def __init__(self, env_id: str, num_envs: int, render: bool = False) -> None:
        try:
            self.vec = gym.make_vec(
                env_id,
                num_envs=num_envs,
                vectorization_mode="sync",
                vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
                render_mode="rgb_array" if render else None,
            )
        except gym.error.Error as exc:
            raise TaskError(f"cannot make Gymnasium env {env_id!r}: {exc}") from None
        obs_space, act_space = self.vec.single_observation_space, self.vec.single_action_space
        if not isinstance(obs_space, gym.spaces.Box) or not isinstance(act_space, gym.spaces.Box):
            raise TaskError(f"Gymnasium env {env_id!r} needs Box observations and actions for SAC")
        self.name = PREFIX + env_id
        self.backend_name = "gymnasium"
        self.num_envs = num_envs
        self.single_observation_space = gym.spaces.Dict({"obs": obs_space})
        self.single_action_space = act_space
        self.metadata = {"render_fps": self.vec.metadata.get("render_fps", 30)}
        self._return = np.zeros(num_envs)
        self._length = np.zeros(num_envs, dtype=np.int64)
        self._success = np.zeros(num_envs, dtype=bool)

    def reset(self, seed: int | None = None) -> tuple[dict[str, npt.NDArray[np.float32]], dict[str, Any]]:
        obs, info = self.vec.reset(seed=seed)
        self._return[:], self._length[:], self._success[:] = 0.0, 0, False
        return {"obs": np.asarray(obs, np.float32)}, info

    def step(
        self, action: npt.ArrayLike
    ) -> tuple[dict[str, npt.NDArray[np.float32]], Any, Any, Any, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.vec.step(np.asarray(action, np.float32))
        self._return += reward
        self._length += 1
        if "is_success" in info:
            self._success |= np.asarray(info["is_success"], bool)
        out: dict[str, Any] = {}
        done = np.asarray(terminated | truncated)
        if done.any():
            final = np.stack(
                [
                    np.asarray(o, np.float32) if d else np.zeros_like(obs[0])
                    for o, d in zip(info.get("final_obs", obs), done, strict=True)
                ]
            )
            out["final_obs"], out["_final_obs"] = {"obs": final}, done
            out["final_info"] = {
                "episode_return": self._return.copy(),
                "episode_length": self._length.copy(),
                "episode_success": self._success.copy(),
            }
            out["_final_info"] = done
            self._return[done], self._length[done], self._success[done] = 0.0, 0, False
        return {"obs": np.asarray(obs, np.float32)}, reward, terminated, truncated, out

    def render(self) -> npt.NDArray[np.uint8]:
        frames = self.vec.render()
        return np.asarray(frames[0] if isinstance(frames, tuple | list) else frames, np.uint8)

    def close(self) -> None:
        self.vec.close()
