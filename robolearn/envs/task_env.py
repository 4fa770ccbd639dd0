"""The environment: a task definition run on a backend, all worlds at once.

:class:`TaskEnv` is a Gymnasium ``VectorEnv`` with same-step autoreset: when a world's episode
ends, ``info["final_obs"]`` holds its last observation and the returned observation is already the
first of its next episode. Every per-world computation (actions, observations, rewards, resets,
randomization) is an array operation over worlds. :class:`TaskGymEnv` is the single-world
``gymnasium.Env`` over the same machinery.
"""

from __future__ import annotations

import copy
import logging
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium.vector import AutoresetMode, VectorEnv

from robolearn.sim.backend import FloatArray, IntArray, PhysicsParams, make_backend
from robolearn.tasks import make_task_cfg
from robolearn.tasks.core import Observation, TaskCfg, TaskError

log = logging.getLogger(__name__)


def _finite_box(k: int) -> gym.spaces.Box:
    return gym.spaces.Box(-np.inf, np.inf, shape=(k,), dtype=np.float32)


def transition_next_obs(next_obs: Observation, info: dict[str, Any]) -> Observation:
    """The next state of each world's transition under same-step autoreset.

    Where an episode ended, the returned observation is already the next episode's first; the
    transition's next state is ``info["final_obs"]``.
    """
    if "final_obs" not in info:
        return next_obs
    done = info["_final_obs"]
    return {k: np.where(done[:, None], info["final_obs"][k], v) for k, v in next_obs.items()}


class TaskEnv(VectorEnv):
    """``num_envs`` worlds of one task on one backend."""

    def __init__(
        self,
        task: str | TaskCfg,
        backend: str = "mujoco_batch",
        num_envs: int = 1,
        *,
        seed: int | None = None,
        randomize: bool = False,
        autoreset: bool = True,
        render_size: tuple[int, int] = (320, 240),
        nthread: int = 0,
    ) -> None:
        # A private copy: terms with memory (small classes) must not be shared between environments.
        self.cfg = make_task_cfg(task) if isinstance(task, str) else copy.deepcopy(task)
        if backend not in self.cfg.backends:
            raise TaskError(
                f"task {self.cfg.name} does not run on backend {backend!r}; "
                f"it runs on {', '.join(self.cfg.backends)}"
            )
        self.num_envs = num_envs
        self.randomize = randomize
        self.autoreset = autoreset
        self.render_mode = "rgb_array"
        self.render_size = render_size
        self.sim = make_backend(backend, self.cfg.scene, num_envs, nthread=nthread)
        self.name, self.backend_name = self.cfg.name, self.sim.name
        self.metadata = {
            "autoreset_mode": AutoresetMode.SAME_STEP,
            "render_modes": ["rgb_array"],
            "render_fps": round(1.0 / self.cfg.control_dt),
        }

        act = self.cfg.action
        self._act_low = np.asarray(act.low, dtype=np.float64)
        self._act_high = np.asarray(act.high, dtype=np.float64)
        self._neutral = np.asarray(act.neutral, dtype=np.float64)
        self.single_action_space = gym.spaces.Box(
            self._act_low.astype(np.float32), self._act_high.astype(np.float32), dtype=np.float32
        )
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, num_envs)

        n = num_envs
        self.state = {k: np.zeros((n, *shape)) for k, shape in self.cfg.state.items()}
        self.step_count = np.zeros(n, dtype=np.int64)
        self.action = np.tile(self._neutral, (n, 1))
        self.prev_action = self.action.copy()
        self.episode_return = np.zeros(n)
        self.episode_success = np.zeros(n, dtype=bool)
        max_latency = self.cfg.randomization.action_latency_steps[1] if randomize else 0
        self._action_history = np.tile(self._neutral, (max_latency + 1, n, 1))
        self._latency = np.zeros(n, dtype=np.int64)
        self._world_ids = np.arange(n)
        self._stateful_terms = [
            t.fn
            for group in (self.cfg.observations, self.cfg.rewards, self.cfg.terminations)
            for t in group.values()
            if hasattr(t.fn, "reset")
        ] + ([self.cfg.success.fn] if hasattr(self.cfg.success.fn, "reset") else [])
        self._seed(seed)

        # Observation sizes come from the terms themselves, evaluated on the nominal state.
        all_ids = np.arange(n)
        self.sim.reset_worlds(all_ids)
        self.sim.forward(all_ids)
        sizes = {
            k: self._term(t.fn, t.params).reshape(n, -1).shape[1] for k, t in self.cfg.observations.items()
        }
        self.single_observation_space = gym.spaces.Dict({k: _finite_box(s) for k, s in sizes.items()})
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, num_envs)

    # -- seeding -----------------------------------------------------------------------------
    def _seed(self, seed: int | None) -> None:
        # Separate streams, so turning sensor noise on does not change the reset distribution.
        reset_seq, dr_seq, noise_seq = np.random.SeedSequence(seed).spawn(3)
        self.rng = np.random.default_rng(reset_seq)
        self._dr_rng = np.random.default_rng(dr_seq)
        self._noise_rng = np.random.default_rng(noise_seq)

    # -- terms -------------------------------------------------------------------------------
    def _term(self, fn: Any, params: Any) -> npt.NDArray[Any]:
        return np.asarray(fn(self, **params))

    def _observe(self) -> Observation:
        obs: Observation = {}
        noise = self.randomize and self.cfg.randomization.sensor_noise
        for key, term in self.cfg.observations.items():
            value = self._term(term.fn, term.params).reshape(self.num_envs, -1)
            if noise and term.noise_std > 0:
                value = value + self._noise_rng.normal(0.0, term.noise_std, value.shape)
            obs[key] = value.astype(np.float32)
        return obs

    # -- resets ------------------------------------------------------------------------------
    def _reset_worlds(self, ids: IntArray) -> None:
        if self.randomize:  # first: recomputing derived model constants may overwrite the state
            self._randomize(ids)
        self.sim.reset_worlds(ids)
        self.step_count[ids] = 0
        self.action[ids] = self._neutral
        self.prev_action[ids] = self._neutral
        self._action_history[:, ids] = self._neutral
        self.episode_return[ids] = 0.0
        self.episode_success[ids] = False
        for key in self.state:
            self.state[key][ids] = 0
        for event in self.cfg.reset_events.values():
            event.fn(self, ids, **event.params)
        for term in self._stateful_terms:
            term.reset(self, ids)
        self.sim.forward(ids)

    def _randomize(self, ids: IntArray) -> None:
        dr, k = self.cfg.randomization, len(ids)
        params = PhysicsParams(
            mass_scale=self._dr_rng.uniform(*dr.mass_scale, size=k),
            friction_scale=self._dr_rng.uniform(*dr.friction_scale, size=k),
            damping_scale=self._dr_rng.uniform(*dr.damping_scale, size=k),
            actuator_gain_scale=self._dr_rng.uniform(*dr.actuator_gain_scale, size=k),
        )
        self.sim.set_physics_params(ids, params)
        lo, hi = dr.action_latency_steps
        self._latency[ids] = self._dr_rng.integers(lo, hi + 1, size=k)

    def reset(
        self, *, seed: int | list[int] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        """Reset every world, or (Gymnasium's ``options={"reset_mask": ...}``) only the masked ones."""
        if seed is not None:
            self._seed(seed if isinstance(seed, int) else seed[0])
        mask = None if options is None else options.get("reset_mask")
        ids = np.arange(self.num_envs) if mask is None else np.flatnonzero(mask)
        self._reset_worlds(ids)
        return self._observe(), {}

    # -- stepping ----------------------------------------------------------------------------
    def _sanitize(self, action: Any) -> tuple[FloatArray, npt.NDArray[np.bool_]]:
        act = np.asarray(action, dtype=np.float64)
        shape = (self.num_envs, len(self._neutral))
        if act.size != shape[0] * shape[1]:
            raise TaskError(
                f"task {self.cfg.name}: action has shape {act.shape}, expected {shape} "
                f"({', '.join(self.cfg.action.names)})"
            )
        act = act.reshape(shape)
        # A non-finite action never reaches the physics: that world holds the neutral action.
        rejected = ~np.isfinite(act).all(axis=1)
        if rejected.any():
            act = act.copy()
            act[rejected] = self._neutral
            log.warning("rejected non-finite actions in worlds %s", np.flatnonzero(rejected).tolist())
        return np.clip(act, self._act_low, self._act_high), np.asarray(rejected)

    def step(
        self, actions: Any
    ) -> tuple[Observation, FloatArray, npt.NDArray[np.bool_], npt.NDArray[np.bool_], dict[str, Any]]:
        act, rejected = self._sanitize(actions)
        if len(self._action_history) == 1:
            applied = act  # no latency possible: the history would only echo the action
        else:
            # Action latency: world i acts on the action it was sent latency[i] steps ago.
            self._action_history[1:] = self._action_history[:-1]
            self._action_history[0] = act
            applied = self._action_history[self._latency, self._world_ids]
        self.prev_action = self.action
        self.action = applied
        ctrl = self.cfg.action.to_controls(self, applied, **self.cfg.action.params)
        self.sim.step(ctrl, self.cfg.substeps)
        self.step_count += 1
        unstable = self.sim.unstable_worlds().copy()
        for update in self.cfg.updates.values():
            update.fn(self, **update.params)

        reward = np.zeros(self.num_envs)
        for term in self.cfg.rewards.values():
            reward += term.weight * self._term(term.fn, term.params)
        success = self._term(self.cfg.success.fn, self.cfg.success.params).astype(bool)
        terminated = success & self.cfg.end_on_success
        truncated = (self.step_count >= self.cfg.episode_length) | unstable
        for done_term in self.cfg.terminations.values():
            hit = self._term(done_term.fn, done_term.params).astype(bool)
            if done_term.time_out:
                truncated |= hit
            else:
                terminated |= hit
        truncated &= ~terminated
        if unstable.any():
            log.warning("worlds %s became unstable and are reset", np.flatnonzero(unstable).tolist())
        self.episode_return += reward
        self.episode_success |= success

        obs = self._observe()
        info: dict[str, Any] = {"success": success, "action_rejected": rejected, "sim_unstable": unstable}
        done = terminated | truncated
        if self.autoreset and done.any():
            ids = np.flatnonzero(done)
            info["final_obs"], info["_final_obs"] = obs, done
            info["final_info"] = {
                "episode_return": self.episode_return.copy(),
                "episode_length": self.step_count.copy(),
                "episode_success": self.episode_success.copy(),
            }
            info["_final_info"] = done
            self._reset_worlds(ids)
            fresh = self._observe()
            obs = {k: np.where(done[:, None], fresh[k], v) for k, v in obs.items()}
        return obs, reward, terminated, truncated, info

    def render(self) -> npt.NDArray[np.uint8]:  # type: ignore[override]
        """World 0 seen by the task's camera, with its markers."""
        markers = self.cfg.markers(self, 0) if self.cfg.markers is not None else []
        width, height = self.render_size
        return self.sim.render(0, width, height, self.cfg.scene.camera, markers)

    def close(self, **kwargs: Any) -> None:
        self.sim.close()


class TaskGymEnv(gym.Env):
    """One world of a task as a ``gymnasium.Env`` (the caller resets at episode ends)."""

    def __init__(
        self,
        task: str | TaskCfg,
        backend: str = "mujoco",
        *,
        randomize: bool = False,
        render_mode: str | None = None,
        render_size: tuple[int, int] = (320, 240),
    ) -> None:
        self.vec = TaskEnv(task, backend, 1, randomize=randomize, autoreset=False, render_size=render_size)
        self.observation_space = self.vec.single_observation_space
        self.action_space = self.vec.single_action_space
        self.render_mode = render_mode
        self.metadata = {"render_modes": ["rgb_array"], "render_fps": self.vec.metadata["render_fps"]}
        self.spec_task = self.vec.cfg

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Observation, dict[str, Any]]:
        super().reset(seed=seed)
        obs, _ = self.vec.reset(seed=seed)
        return {k: v[0] for k, v in obs.items()}, {}

    def step(self, action: Any) -> tuple[Observation, float, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.vec.step(np.asarray(action)[None])
        return (
            {k: v[0] for k, v in obs.items()},
            float(reward[0]),
            bool(terminated[0]),
            bool(truncated[0]),
            {k: bool(v[0]) for k, v in info.items()},
        )

    def render(self) -> npt.NDArray[np.uint8]:
        return self.vec.render()

    def close(self) -> None:
        self.vec.close()
