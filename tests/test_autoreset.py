"""Reading same-step autoreset output: per-step info, transitions' next states, episode statistics."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.wrappers.vector import RecordEpisodeStatistics

from robolearn.envs.autoreset import EpisodeStatistics, step_info, step_success, transition_next_obs
from robolearn.envs.task_env import TaskEnv


def _ended_step(success: list[bool], ended: list[bool]) -> dict[str, Any]:
    """Gymnasium's info for a step where the worlds in ``ended`` were reset (reset info: none)."""
    done, kept = np.array(ended), ~np.array(ended)
    info: dict[str, Any] = {
        "final_obs": np.array([{"x": np.array([9.0], np.float32)} if d else None for d in ended], object),
        "_final_obs": done,
        "final_info": {"success": np.array(success) & done, "_success": done},
        "_final_info": done,
    }
    if kept.any():
        info |= {"success": np.array(success) & kept, "_success": kept}
    return info


def test_step_info_reads_ended_worlds_from_final_info() -> None:
    info = _ended_step([True, True, False], [False, True, True])
    values, present = step_info(info, "success", 3)
    assert values.tolist() == [True, True, False] and present.all()
    assert not step_info({}, "is_success", 3)[1].any()
    # Every world ended: Gymnasium's top level has no step keys at all.
    assert step_info(_ended_step([True, False], [True, True]), "success", 2)[0].tolist() == [True, False]


def test_success_is_read_under_either_name() -> None:
    gymnasium_robotics = {"is_success": np.array([False, True]), "_is_success": np.array([True, True])}
    success, reported = step_success(gymnasium_robotics, 2)
    assert success.tolist() == [False, True] and reported.all()
    assert step_success(_ended_step([True, False], [False, True]), 2)[0].tolist() == [True, False]
    assert not step_success({}, 2)[1].any()


def test_next_states_of_ended_transitions_are_their_final_observations() -> None:
    info = _ended_step([False, False], [False, True])
    nxt = {"x": np.array([[1.0], [2.0]], np.float32)}
    assert transition_next_obs(nxt, info)["x"].tolist() == [[1.0], [9.0]]
    assert nxt["x"].tolist() == [[1.0], [2.0]]  # the returned observation is left alone
    assert transition_next_obs(nxt, {}) is nxt


def test_an_episode_succeeds_if_any_of_its_steps_did() -> None:
    stats = EpisodeStatistics(2)
    quiet = {"success": np.array([True, False]), "_success": np.ones(2, bool)}
    assert stats.step([1.0, 2.0], [False, False], [False, False], quiet).worlds.size == 0
    # World 0 succeeded earlier (a task that does not end on success) and now times out.
    ended = stats.step([1.0, 2.0], [False, False], [True, False], _ended_step([False, False], [True, False]))
    assert ended.worlds.tolist() == [0] and ended.returns.tolist() == [2.0] and ended.lengths.tolist() == [2]
    assert ended.successes is not None and ended.successes.tolist() == [True]
    # A verdict from outside the env (a human's mark) ends world 1 as a failure.
    forced = stats.end(np.array([False, True]), np.array([False, False]))
    assert forced.returns.tolist() == [4.0] and forced.successes is not None and not forced.successes.any()
    assert stats.lengths.tolist() == [0, 0]


def test_an_env_without_success_reports_none() -> None:
    stats = EpisodeStatistics(1)
    ended = stats.step([1.0], [True], [False], {"_final_info": np.ones(1, bool), "final_info": {}})
    assert ended.lengths.tolist() == [1] and ended.successes is None


def test_returns_and_lengths_match_gymnasiums_record_episode_statistics() -> None:
    env = RecordEpisodeStatistics(TaskEnv("panda_reach", "mujoco_batch", 3, seed=0))
    stats = EpisodeStatistics(3)
    base = env.unwrapped
    obs, _ = env.reset(seed=0)
    expert = base.cfg.expert(base.cfg)  # type: ignore[attr-defined]
    seen = 0
    for _ in range(150):
        obs, reward, terminated, truncated, info = env.step(expert(obs) * np.array([[1.0], [0.4], [0.1]]))
        ended = stats.step(reward, terminated, truncated, info)
        assert ended.worlds.tolist() == np.flatnonzero(info.get("_episode", np.zeros(3, bool))).tolist()
        if ended.worlds.size:
            np.testing.assert_allclose(ended.returns, info["episode"]["r"][ended.worlds])
            np.testing.assert_array_equal(ended.lengths, info["episode"]["l"][ended.worlds])
            assert ended.successes is not None
            np.testing.assert_array_equal(ended.successes, info["final_info"]["success"][ended.worlds])
            seen += ended.worlds.size
    assert seen >= 4
    env.close()
