"""Action latency per world, and the latency-free path that skips the action history."""

from __future__ import annotations

import dataclasses

import numpy as np

from robolearn.envs.task_env import TaskEnv
from robolearn.tasks import make_task_cfg


def late_env(task: str, latency: tuple[int, int], backend: str, num_envs: int) -> TaskEnv:
    """``task`` randomized with only its action latency changed, reset."""
    cfg = make_task_cfg(task)
    randomization = dataclasses.replace(cfg.randomization, action_latency_steps=latency)
    late = dataclasses.replace(cfg, randomization=randomization)
    env = TaskEnv(late, backend, num_envs, seed=0, randomize=True)
    env.reset(seed=0)
    return env


def test_each_world_acts_on_the_action_sent_its_latency_ago() -> None:
    env = late_env("panda_reach", (0, 2), "mujoco_batch", 3)
    cfg = env.cfg
    env._latency[:] = [0, 1, 2]  # one world per latency
    neutral = np.asarray(cfg.action.neutral)
    sent = [np.full((3, 4), 0.002 * (t + 1)) for t in range(5)]  # inside the action bounds
    for t, action in enumerate(sent):
        env.step(action)
        for world, latency in enumerate([0, 1, 2]):
            expected = sent[t - latency][world] if t >= latency else neutral
            where = f"step {t}, world {world}"
            np.testing.assert_allclose(env.delayed_action[world], expected, err_msg=where)
            # What the terms read is the command sent, as on a robot (policy_node's state view).
            np.testing.assert_allclose(env.action[world], action[world])


def test_without_latency_the_delayed_action_is_the_clipped_one() -> None:
    env = TaskEnv("panda_reach", "mujoco_batch", 2, seed=0)
    env.reset(seed=0)
    action = np.array([[0.5, -0.01, 0.0, 0.04], [0.0, 0.0, 0.0, 0.0]])
    env.step(action)
    np.testing.assert_allclose(env.action, np.clip(action, env.cfg.action.low, env.cfg.action.high))
    assert env.delayed_action is env.action
    assert not np.shares_memory(env.action, action)
    previous = env.action
    env.step(np.zeros((2, 4)))
    assert env.prev_action is previous


def test_under_latency_the_drone_observes_the_commands_it_sent() -> None:
    # On the robot the "last command" observations hold what the policy sent (the state view never
    # learns what the robot applied); under simulated latency they held the applied one, a
    # difference a latency-trained policy would meet only on the robot.
    env = late_env("quadrotor_hover", (2, 2), "mujoco", 1)
    cfg = env.cfg
    neutral = np.asarray(cfg.action.neutral)
    sent = np.clip(neutral + np.array([0.05, 0.3, -0.2, 0.1]), cfg.action.low, cfg.action.high)
    obs, *_ = env.step(sent[None])
    np.testing.assert_allclose(obs["last_thrust"][0], sent[:1], atol=1e-6)
    np.testing.assert_allclose(obs["last_body_rates"][0], sent[1:], atol=1e-6)
    np.testing.assert_allclose(env.delayed_action[0], neutral)  # the motors still get the neutral command
    # Both commands in flight are observed: the one before moves to prev_*.
    second = np.clip(neutral + np.array([-0.05, -0.1, 0.2, 0.0]), cfg.action.low, cfg.action.high)
    obs, *_ = env.step(second[None])
    np.testing.assert_allclose(obs["prev_thrust"][0], sent[:1], atol=1e-6)
    np.testing.assert_allclose(obs["prev_body_rates"][0], sent[1:], atol=1e-6)
    np.testing.assert_allclose(obs["last_thrust"][0], second[:1], atol=1e-6)
    np.testing.assert_allclose(env.delayed_action[0], neutral)
