"""The Gymnasium adapter: any Box-space Gymnasium id as a robolearn task for SAC."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from robolearn.envs.autoreset import EpisodeStatistics, transition_next_obs
from robolearn.envs.gym_adapter import GymVectorTask, gym_env_id
from robolearn.eval.evaluation import evaluate
from robolearn.tasks.core import TaskError


class _Target(gym.Env[np.ndarray, np.ndarray]):
    """Reports Gymnasium-Robotics' ``is_success``: the episode ends once the action passes 0.5."""

    def __init__(self, render_mode: str | None = None) -> None:
        self.render_mode = render_mode
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action: Any) -> Any:
        hit = bool(action[0] > 0.5)
        return np.full(2, action[0], np.float32), float(hit), hit, False, {"is_success": hit}


gym.register("robolearn-test/Target-v0", entry_point=_Target, max_episode_steps=5)


def test_ids_are_recognised() -> None:
    assert gym_env_id("gym:Pendulum-v1") == "Pendulum-v1"
    assert gym_env_id("panda_reach") is None


def test_episodes_end_with_their_final_observation_and_statistics() -> None:
    env = GymVectorTask("Pendulum-v1", num_envs=2)
    assert env.single_observation_space["obs"].shape == (3,)
    assert env.metadata["autoreset_mode"] == AutoresetMode.SAME_STEP
    env.reset(seed=0)
    stats = EpisodeStatistics(2)
    total = np.zeros(2)
    for _ in range(200):  # Pendulum's time limit
        action = np.full((2, 1), 0.5, np.float32)
        nxt, reward, terminated, truncated, info = env.step(action)
        total += reward
        ended = stats.step(reward, terminated, truncated, info)
        last = transition_next_obs(nxt, info)
        # Pendulum's observation is (cos, sin, angular velocity): always on the unit circle.
        np.testing.assert_allclose(np.hypot(last["obs"][:, 0], last["obs"][:, 1]), 1.0, atol=1e-5)
    assert truncated.all() and not terminated.any()
    np.testing.assert_allclose(ended.returns, total)
    assert ended.lengths.tolist() == [200, 200] and ended.worlds.tolist() == [0, 1]
    assert ended.successes is None  # Pendulum has no notion of success
    env.close()


def test_info_is_gymnasiums_with_dict_observations() -> None:
    """Only the observation changes (to ``{"obs": ...}``, in ``final_obs`` too); the info keys,
    masks and ``final_info`` are the Gymnasium vector env's own."""
    env = GymVectorTask("robolearn-test/Target-v0", num_envs=3)
    plain = gym.make_vec(
        "robolearn-test/Target-v0", 3, vectorization_mode="sync", vector_kwargs={"autoreset_mode": "SameStep"}
    )
    env.reset(seed=0)
    plain.reset(seed=0)
    action = np.array([[0.9], [0.0], [0.7]], np.float32)
    obs, _, terminated, _, info = env.step(action)
    plain_obs, _, _, _, plain_info = plain.step(action)
    assert terminated.tolist() == [True, False, True]
    np.testing.assert_array_equal(obs["obs"], plain_obs)
    assert (
        set(info)
        == set(plain_info)
        == {"final_obs", "_final_obs", "final_info", "_final_info"}
        | {
            "is_success",
            "_is_success",
        }
    )
    assert info["final_obs"][1] is None and info["final_obs"][2]["obs"].tolist() == [np.float32(0.7)] * 2
    assert info["final_info"]["is_success"].tolist() == [True, False, True]
    np.testing.assert_array_equal(info["_is_success"], plain_info["_is_success"])
    env.close()
    plain.close()


def test_success_is_counted_where_the_env_reports_it() -> None:
    env = GymVectorTask("robolearn-test/Target-v0", num_envs=2)
    steps = iter([0.0, 0.9])
    result = evaluate(env, lambda obs: np.full((2, 1), next(steps, 0.0)), 4, seed=0)
    # Each world: one success (second step), then one time-out (5 steps without a hit).
    assert sorted(result.successes) == [False, False, True, True] and sorted(result.lengths) == [2, 2, 5, 5]
    assert result.summary()["success_defined"]
    env.close()


def test_training_shows_success_only_where_the_task_reports_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Pendulum has no notion of success: no rate in the progress bar or summary, not 0 (issue 12)."""
    from robolearn.cli.train import run_train
    from robolearn.rl.config import SACConfig, TrainCfg

    cfg = TrainCfg(
        task="gym:Pendulum-v1",
        num_envs=1,
        steps=400,
        out=tmp_path,
        learning_starts=200,
        random_steps=200,
        eval_every=10_000,
        eval_episodes=1,
        final_eval_episodes=1,
        checkpoint_every=10_000,
        video=False,
        sac=SACConfig(hidden=(16, 16), batch_size=32),
    )
    run_train(cfg)
    out, err = capsys.readouterr()
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["success_rate"] is None and summary["success_rate_ci95"] is None
    assert "gym:Pendulum-v1: return " in out and "ret=" in err and "success" not in err


def test_spaces_sac_cannot_use_are_refused() -> None:
    with pytest.raises(TaskError, match="needs Box observations and actions"):
        GymVectorTask("CartPole-v1", num_envs=1)
    with pytest.raises(TaskError, match="cannot make Gymnasium env"):
        GymVectorTask("NoSuchEnv-v0", num_envs=1)
