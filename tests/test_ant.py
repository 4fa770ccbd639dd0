"""The ant task against Gymnasium's Ant-v5: same physics, same observation and reward of a state."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import mujoco
import numpy as np
import pytest

from robolearn.envs.task_env import TaskEnv
from robolearn.tasks import make_task_cfg
from robolearn.tasks.core import TaskError

STEPS = 120


def _gym_obs_of_state(ant: Any) -> np.ndarray:
    """Gymnasium's observation of its current state, with cfrc_ext computed at that state."""
    mujoco.mj_forward(ant.model, ant.data)
    mujoco.mj_rnePostConstraint(ant.model, ant.data)
    return np.asarray(ant._get_obs())


def _flat(obs: dict[str, np.ndarray], world: int) -> np.ndarray:
    return np.concatenate([obs["qpos"][world], obs["qvel"][world], obs["contact_forces"][world]])


@pytest.mark.parametrize("backend", ["mujoco", "mujoco_batch"])
def test_ant_matches_gymnasium_from_the_same_state(backend: str) -> None:
    ant = gym.make("Ant-v5").unwrapped
    ant.reset(seed=3)
    n = 2 if backend == "mujoco_batch" else 1
    env = TaskEnv("ant", backend, n, seed=0)
    env.reset()
    # Every world starts from Gymnasium's reset state (its whole integration state).
    for field in ("qpos", "qvel", "qacc_warmstart", "time"):
        env.sim.mj_field(field)[:] = getattr(ant.data, field)  # type: ignore[attr-defined]
    ids = np.arange(n)
    env.sim.forward(ids)
    env.cfg.reset_events["torso_x"].fn(env, ids)

    rng = np.random.default_rng(1)
    steps_with_contact = 0
    for step in range(STEPS):
        action = rng.uniform(-1.0, 1.0, 8)
        x_before = ant.data.qpos[0]
        _, _, gym_terminated, _, _ = ant.step(action)
        obs, reward, terminated, _, _ = env.step(np.tile(action, (n, 1)))
        expected = _gym_obs_of_state(ant)
        contact = np.clip(ant.data.cfrc_ext, -1.0, 1.0)
        expected_reward = (
            float(0.2 <= ant.data.qpos[2] <= 1.0)
            + (ant.data.qpos[0] - x_before) / ant.dt
            - 0.5 * np.sum(action**2)
            - 5e-4 * np.sum(contact**2)
        )
        steps_with_contact += bool(np.any(expected[27:]))
        for w in range(n):
            # float32 observations: compare at float32 resolution.
            np.testing.assert_allclose(_flat(obs, w), expected, rtol=1e-6, atol=1e-6, err_msg=f"step {step}")
        np.testing.assert_allclose(reward, expected_reward, rtol=1e-9, atol=1e-9, err_msg=f"step {step}")
        assert (terminated == gym_terminated).all(), f"step {step}"
        if gym_terminated:
            break
    assert steps_with_contact >= 10, "the comparison should cover steps with ground contact"


def test_ant_reset_distribution_and_termination() -> None:
    n = 512
    env = TaskEnv("ant", "mujoco_batch", n, seed=0)
    env.reset()
    qpos, qvel = env.sim.mj_field("qpos"), env.sim.mj_field("qvel")  # type: ignore[attr-defined]
    deviation = qpos - env.sim.model.qpos0  # type: ignore[attr-defined]
    assert np.abs(deviation).max() <= 0.1
    assert np.abs(deviation).max() > 0.09
    assert abs(qvel.std() - 0.1) < 0.01
    assert qpos.shape == (n, 15) and qvel.shape == (n, 14)

    qpos[0, 2] = 1.5  # the torso too high: unhealthy (Ant-v5 ends episodes above 1 m)
    env.sim.forward(np.arange(n))
    _, _, terminated, truncated, info = env.step(np.zeros((n, 8)))
    assert terminated[0] and not truncated[0]
    assert "final_obs" in info and info["_final_obs"][0]
    assert env.sim.mj_field("qpos")[0, 2] > 0.6  # type: ignore[attr-defined]


def test_ant_is_mujoco_only_and_has_no_expert() -> None:
    cfg = make_task_cfg("ant")
    assert cfg.expert is None
    assert cfg.substeps == 5
    env = TaskEnv(cfg, "mujoco", 1, seed=0)
    assert sum(s.shape[0] for s in env.single_observation_space.values()) == 105
    with pytest.raises(TaskError, match="pybullet"):
        TaskEnv("ant", "pybullet", 1)
