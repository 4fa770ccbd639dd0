"""The environment: a task definition run on a backend, all worlds at once, for Gymnasium.

:class:`TaskEnv` is a Gymnasium ``VectorEnv`` with same-step autoreset over
:class:`~robolearn.tasks.worlds.TaskWorlds` (the task's execution), returning exactly what
Gymnasium's own ``SyncVectorEnv`` returns over the one-world :class:`TaskGymEnv`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium.vector import AutoresetMode, VectorEnv

from robolearn.sim.backend import BoolArray, FloatArray
from robolearn.tasks.cameras import ImageSpec
from robolearn.tasks.core import Observation, TaskCfg, TaskError
from robolearn.tasks.worlds import TaskWorlds

RENDER_MODES = ("rgb_array",)


def _finite_box(k: int) -> gym.spaces.Box:
    return gym.spaces.Box(-np.inf, np.inf, shape=(k,), dtype=np.float32)


def _image_box(spec: ImageSpec) -> gym.spaces.Box:
    """Colour: Box(0, 255, (H, W, 3), uint8); depth: metres, (H, W, 1) float32."""
    if spec.kind == "rgb":
        return gym.spaces.Box(0, 255, shape=spec.shape, dtype=np.uint8)
    return gym.spaces.Box(0.0, np.inf, shape=spec.shape, dtype=np.float32)


def _check_render_mode(render_mode: str | None) -> None:
    if render_mode is not None and render_mode not in RENDER_MODES:
        raise TaskError(
            f"render_mode {render_mode!r} is not supported; use {', '.join(RENDER_MODES)} or None"
        )


def _masked(values: dict[str, BoolArray], mask: BoolArray) -> dict[str, Any]:
    """Per-world info entries where ``mask`` holds, each key followed by its ``_key`` mask."""
    out: dict[str, Any] = {}
    for key, value in values.items():
        out[key], out[f"_{key}"] = np.where(mask, value, np.zeros_like(value)), mask.copy()
    return out


class TaskEnv(TaskWorlds, VectorEnv):
    """``num_envs`` worlds of one task on one backend, as a Gymnasium vector environment.

    The task's execution (seeding, terms, resets, randomization, latency, stepping) is
    :class:`~robolearn.tasks.worlds.TaskWorlds`; this class adds spaces, autoreset and the info.

    ``step`` returns what ``gymnasium.vector.SyncVectorEnv`` returns over :class:`TaskGymEnv`
    with ``autoreset_mode=SAME_STEP`` (``DISABLED`` for ``autoreset=False``), key for key:

    - each step's info has ``success`` (the task's success condition holds), ``action_rejected``
      (a non-finite action was replaced by the neutral one) and ``sim_unstable`` (the physics
      diverged), (num_envs,) bool arrays each with its ``_``-prefixed mask;
    - where an episode ends, the world is reset in the same step: the returned observation starts
      its next episode, ``info["final_obs"]`` is an object array holding that world's last
      observation (a dict of (k,) arrays; None elsewhere), ``info["final_info"]`` holds the
      step's info for those worlds, both marked by ``info["_final_obs"]`` and
      ``info["_final_info"]``; at the top level, those worlds' entries are False and unmasked
      (Gymnasium puts the reset's info there, and ``reset`` reports none), and the keys are
      absent when every world ended. :func:`robolearn.envs.autoreset.step_info` reads a key for
      all worlds.

    Episode statistics are not in the info, so that code written for Gymnasium wraps this env as
    any other: ``gymnasium.wrappers.vector.RecordEpisodeStatistics`` adds ``info["episode"]``
    (return ``r``, length ``l``, time ``t``) with its ``_episode`` mask, and an episode's success
    is the ``success`` of its steps (``info["final_info"]["success"]`` at its last one; every
    task that ends on success succeeds there). robolearn's own loops count them beside the env
    with :class:`~robolearn.envs.autoreset.EpisodeStatistics`: return, length, and whether the
    success condition held at any step. The task's own counters (``episode_return``,
    ``step_count``, ``episode_success``) already belong to the next episode when an ended one is
    reported.
    """

    # On the class: gym.make and make_vec read the render modes before making an env (issue 12).
    metadata = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": list(RENDER_MODES)}  # noqa: RUF012

    def __init__(
        self,
        task: str | TaskCfg,
        backend: str = "mujoco_batch",
        num_envs: int = 1,
        *,
        seed: int | None = None,
        randomize: bool = False,
        autoreset: bool = True,
        render_mode: str | None = "rgb_array",
        render_size: tuple[int, int] = (320, 240),
        nthread: int = 0,
        sim_params: str | Path | None = None,
    ) -> None:
        _check_render_mode(render_mode)
        super().__init__(
            task, backend, num_envs, seed=seed, randomize=randomize, nthread=nthread, sim_params=sim_params
        )
        self.autoreset = autoreset
        self.render_mode = render_mode
        self.render_size = render_size
        self.metadata = {
            **type(self).metadata,
            "autoreset_mode": AutoresetMode.SAME_STEP if autoreset else AutoresetMode.DISABLED,
            "render_fps": round(1.0 / self.cfg.control_dt),
        }
        self.single_action_space = gym.spaces.Box(
            self._act_low.astype(np.float32), self._act_high.astype(np.float32), dtype=np.float32
        )
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, num_envs)
        spaces: dict[str, gym.Space[Any]] = {k: _finite_box(s) for k, s in self.observation_sizes.items()}
        spaces |= {k: _image_box(spec) for k, spec in self.image_specs.items()}
        self.single_observation_space = gym.spaces.Dict(spaces)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, num_envs)

    def reset(
        self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """Reset every world, or (Gymnasium's ``options={"reset_mask": ...}``) only the masked ones.

        ``seed``: an int, or Gymnasium's list of one seed per world. The worlds draw from shared
        streams, so a list seeds them as a whole: the same list resets the same way, and a change to
        any of its seeds changes the reset (its first alone did before)."""
        if isinstance(seed, (list, tuple)):
            whole = all(isinstance(s, (int, np.integer)) and not isinstance(s, bool) and s >= 0 for s in seed)
            if len(seed) != self.num_envs or not whole:
                raise TaskError(
                    f"reset(seed=...): a list needs one non-negative int per world ({self.num_envs}); "
                    f"got {seed!r}"
                )
            self.reseed([int(s) for s in seed])
        elif seed is not None:
            self.reseed(seed)
        mask = None if options is None else options.get("reset_mask")
        ids = np.arange(self.num_envs) if mask is None else np.flatnonzero(mask)
        self.reset_worlds(ids)
        return self.observe_numpy(), {}

    # -- stepping ----------------------------------------------------------------------------
    def step(
        self, actions: Any
    ) -> tuple[Observation, FloatArray, npt.NDArray[np.bool_], npt.NDArray[np.bool_], dict[str, Any]]:
        # numpy at Gymnasium's boundary: a copy from the device on a device backend (issue 14).
        reward, success, terminated, truncated, unstable, rejected = self.advance_numpy(actions)
        obs = self.observe_numpy()
        step_info = {"success": success, "action_rejected": rejected, "sim_unstable": unstable}
        ended = (terminated | truncated) if self.autoreset else np.zeros(self.num_envs, dtype=bool)
        info: dict[str, Any] = {}
        if ended.any():
            ids = np.flatnonzero(ended)
            final_obs = np.full(self.num_envs, None, dtype=object)
            for i in ids:  # Gymnasium's format: one observation dict per ended world
                final_obs[i] = {k: v[i] for k, v in obs.items()}
            info["final_obs"], info["_final_obs"] = final_obs, ended.copy()
            info["final_info"], info["_final_info"] = _masked(step_info, ended), ended.copy()
            self.reset_worlds(ids)
            fresh = self.observe_numpy()
            obs = {k: np.where(ended.reshape(-1, *[1] * (v.ndim - 1)), fresh[k], v) for k, v in obs.items()}
        if not ended.all():
            info |= _masked(step_info, ~ended)
        return obs, reward, terminated, truncated, info

    def render(self) -> npt.NDArray[np.uint8]:  # type: ignore[override]
        """World 0 seen by the task's camera, with its markers."""
        markers = self.cfg.markers(self, 0) if self.cfg.markers is not None else []
        width, height = self.render_size
        return self.sim.render(0, width, height, self.cfg.scene.camera, markers)

    def close(self, **kwargs: Any) -> None:
        TaskWorlds.close(self)


class TaskGymEnv(gym.Env):
    """One world of a task as a ``gymnasium.Env`` (the caller resets at episode ends).

    Its info is :class:`TaskEnv`'s for one world: ``success``, ``action_rejected`` and
    ``sim_unstable`` as Python bools.
    """

    # On the class: gym.make reads the render modes before making the env (issue 12).
    metadata = {"render_modes": list(RENDER_MODES)}  # noqa: RUF012

    def __init__(
        self,
        task: str | TaskCfg,
        backend: str = "mujoco",
        *,
        randomize: bool = False,
        render_mode: str | None = None,
        render_size: tuple[int, int] = (320, 240),
    ) -> None:
        _check_render_mode(render_mode)
        self.vec = TaskEnv(task, backend, 1, randomize=randomize, autoreset=False, render_size=render_size)
        self.observation_space = self.vec.single_observation_space
        self.action_space = self.vec.single_action_space
        self.render_mode = render_mode
        self.metadata = {**type(self).metadata, "render_fps": self.vec.metadata["render_fps"]}
        self.spec_task = self.vec.cfg

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        super().reset(seed=seed)
        obs, _ = self.vec.reset(seed=seed)
        return {k: v[0] for k, v in obs.items()}, {}

    def step(self, action: Any) -> tuple[Observation, float, bool, bool, dict[str, Any]]:
        # The worlds directly, not TaskEnv.step: one world never autoresets, so the vector info's
        # masks would only be built to be taken apart again (issue 18: the per-step path).
        vec = self.vec
        result = vec.advance_numpy(np.asarray(action)[None])
        reward, success, terminated, truncated, unstable, rejected = result
        # item(): a one-element array's Python scalar directly, without a numpy scalar in between.
        info = {
            "success": success.item(),
            "action_rejected": rejected.item(),
            "sim_unstable": unstable.item(),
        }
        return vec.observe_world(0), reward.item(), terminated.item(), truncated.item(), info

    def render(self) -> npt.NDArray[np.uint8]:
        return self.vec.render()

    def close(self) -> None:
        self.vec.close()
