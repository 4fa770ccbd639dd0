"""Action latency per world, and the latency-free path that skips the action history."""

from __future__ import annotations

import dataclasses

import numpy as np

from robolearn.envs.task_env import TaskEnv
from robolearn.tasks import make_task_cfg


def test_each_world_acts_on_the_action_sent_its_latency_ago() -> None:
    cfg = make_task_cfg("panda_reach")
    randomization = dataclasses.replace(cfg.randomization, action_latency_steps=(0, 2))
    late = dataclasses.replace(cfg, randomization=randomization)
    env = TaskEnv(late, "mujoco_batch", 3, seed=0, randomize=True)
    env.reset(seed=0)
    env._latency[:] = [0, 1, 2]  # one world per latency
    neutral = np.asarray(cfg.action.neutral)
    sent = [np.full((3, 4), 0.002 * (t + 1)) for t in range(5)]  # inside the action bounds
    for t, action in enumerate(sent):
        env.step(action)
        for world, latency in enumerate([0, 1, 2]):
            expected = sent[t - latency][world] if t >= latency else neutral
            np.testing.assert_allclose(env.action[world], expected, err_msg=f"step {t}, world {world}")


def test_without_latency_the_applied_action_is_the_clipped_one() -> None:
    env = TaskEnv("panda_reach", "mujoco_batch", 2, seed=0)
    env.reset(seed=0)
    action = np.array([[0.5, -0.01, 0.0, 0.04], [0.0, 0.0, 0.0, 0.0]])
    env.step(action)
    np.testing.assert_allclose(env.action, np.clip(action, env.cfg.action.low, env.cfg.action.high))
    assert not np.shares_memory(env.action, action)
    previous = env.action
    env.step(np.zeros((2, 4)))
    assert env.prev_action is previous
