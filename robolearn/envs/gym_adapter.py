"""Any Gymnasium environment id as a robolearn training environment (``gym:Pendulum-v1``).

The adapter gives a Gymnasium vector env robolearn's dict observations (``{"obs": ...}``, in
``info["final_obs"]`` too) and keeps everything else Gymnasium's own: same-step autoreset with
``final_obs``/``final_info`` as :class:`robolearn.envs.task_env.TaskEnv` returns them, and the
env's info keys unchanged (success is Gymnasium-Robotics' ``is_success`` where the env reports
it; an env without it has no success notion).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium.vector import AutoresetMode, VectorEnv

from robolearn.tasks.core import TaskError

PREFIX = "gym:"


def gym_env_id(task: str) -> str | None:
    """The Gymnasium id in ``gym:<id>``, or None for a robolearn task name."""
    return task[len(PREFIX) :] if task.startswith(PREFIX) else None


class GymVectorTask(VectorEnv):
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
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, num_envs)
        self.single_action_space = act_space
        self.action_space = self.vec.action_space
        self.render_mode = self.vec.render_mode
        self.metadata = {
            "autoreset_mode": AutoresetMode.SAME_STEP,
            "render_fps": self.vec.metadata.get("render_fps", 30),
        }

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, npt.NDArray[np.float32]], dict[str, Any]]:
        obs, info = self.vec.reset(seed=seed, options=options)
        return {"obs": np.asarray(obs, np.float32)}, info

    def step(
        self, action: npt.ArrayLike
    ) -> tuple[dict[str, npt.NDArray[np.float32]], Any, Any, Any, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.vec.step(np.asarray(action, np.float32))
        if "final_obs" in info:
            final = np.full(self.num_envs, None, dtype=object)
            for i in np.flatnonzero(info["_final_obs"]):
                final[i] = {"obs": np.asarray(info["final_obs"][i], np.float32)}
            info = info | {"final_obs": final}
        return {"obs": np.asarray(obs, np.float32)}, reward, terminated, truncated, info

    def render(self) -> npt.NDArray[np.uint8]:  # type: ignore[override]
        frames = self.vec.render()
        return np.asarray(frames[0] if isinstance(frames, tuple | list) else frames, np.uint8)

    def close(self, **kwargs: Any) -> None:
        self.vec.close()
