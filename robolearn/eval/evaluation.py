"""Rolling out a policy on a task and summarizing what happened."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from robolearn.envs.autoreset import EpisodeStatistics
from robolearn.envs.gym_adapter import GymVectorTask
from robolearn.envs.task_env import TaskEnv
from robolearn.eval.stats import bootstrap_ci
from robolearn.sim.backend import FloatArray
from robolearn.tasks.core import Observation, TaskCfg, TaskError

PolicyFn = Callable[[Observation], FloatArray]

POLICIES = ("scripted", "random")
"""Policies ``robolearn eval TASK --policy`` builds from the task alone."""


def make_policy(name: str, cfg: TaskCfg, num_envs: int, seed: int = 0) -> PolicyFn:
    """The task's scripted expert, or uniform random actions."""
    if name == "scripted":
        if cfg.expert is None:
            raise TaskError(f"task {cfg.name} has no scripted expert; use --policy random")
        return cfg.expert(cfg)
    if name == "random":
        rng = np.random.default_rng(seed)
        low, high = np.asarray(cfg.action.low), np.asarray(cfg.action.high)
        return lambda obs: rng.uniform(low, high, size=(num_envs, len(low)))
    raise TaskError(f"unknown policy {name!r}; choose one of {', '.join(POLICIES)}")


@dataclass
class EvalResult:
    """Per-episode outcomes of an evaluation."""

    task: str
    backend: str
    returns: list[float] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    successes: list[bool] = field(default_factory=list)
    """Per episode, where the environment reports success (a Gymnasium env may not)."""
    env_steps: int = 0
    sim_seconds: float = 0.0
    """Wall-clock time spent stepping (policy included, rendering excluded)."""
    frames: list[npt.NDArray[np.uint8]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        """Success rate and return with 95% bootstrap intervals, lengths and speed."""
        lo, hi = bootstrap_ci(np.asarray(self.successes, dtype=float))
        rlo, rhi = bootstrap_ci(self.returns)
        return {
            "task": self.task,
            "backend": self.backend,
            "episodes": len(self.returns),
            "success_rate": float(np.mean(self.successes)) if self.successes else float("nan"),
            "success_rate_ci95": [lo, hi],
            "success_defined": bool(self.successes),
            "return_mean": float(np.mean(self.returns)) if self.returns else float("nan"),
            "return_ci95": [rlo, rhi],
            "episode_length_mean": float(np.mean(self.lengths)) if self.lengths else float("nan"),
            "env_steps": self.env_steps,
            "steps_per_second": self.env_steps / self.sim_seconds if self.sim_seconds > 0 else float("nan"),
        }


def evaluate(
    env: TaskEnv | GymVectorTask,
    policy: PolicyFn,
    episodes: int,
    *,
    seed: int = 0,
    record_episodes: int = 0,
    on_episode: Callable[[int], None] | None = None,
) -> EvalResult:
    """Run ``episodes`` episodes, spread evenly over the worlds, and collect their outcomes.

    Each world runs a fixed quota of episodes, so worlds that finish quickly do not crowd out
    slow (often failing) episodes and bias the success rate. World 0's first ``record_episodes``
    episodes are rendered.
    """
    n = env.num_envs
    quota = np.full(n, episodes // n) + (np.arange(n) < episodes % n)
    done_count = np.zeros(n, dtype=np.int64)
    result = EvalResult(env.name, env.backend_name)
    obs, _ = env.reset(seed=seed)
    stats = EpisodeStatistics(n)
    if record_episodes > 0:
        result.frames.append(env.render())
    while (done_count < quota).any():
        start = time.perf_counter()
        obs, reward, terminated, truncated, info = env.step(policy(obs))
        result.sim_seconds += time.perf_counter() - start
        ended = stats.step(reward, terminated, truncated, info)
        result.env_steps += n
        if record_episodes > 0 and done_count[0] < record_episodes:
            frame = env.render()
            result.frames.append(frame)
        for j, i in enumerate(ended.worlds):
            if done_count[i] < quota[i]:
                result.returns.append(float(ended.returns[j]))
                result.lengths.append(int(ended.lengths[j]))
                if ended.successes is not None:
                    result.successes.append(bool(ended.successes[j]))
                if on_episode is not None:
                    on_episode(len(result.returns))
        done_count[ended.worlds] += 1
    return result
