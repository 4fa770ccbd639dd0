"""The environment over every task and backend: spaces, autoreset, bad input, randomization."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import robolearn
from robolearn.envs.task_env import TaskEnv, TaskGymEnv
from robolearn.sim.backend import SimError, make_backend
from robolearn.sim.scene import UrdfAsset
from robolearn.tasks import gym_id, make_task_cfg, task_names
from robolearn.tasks.core import EventTerm, TaskError

PAIRS = [(t, b) for t in task_names() for b in make_task_cfg(t).backends]


@pytest.mark.parametrize(("task", "backend"), PAIRS)
def test_every_task_builds_and_steps_on_every_backend(task: str, backend: str) -> None:
    num_envs = 3 if backend == "mujoco_batch" else 1
    env = TaskEnv(task, backend, num_envs, seed=0)
    obs, _ = env.reset(seed=0)
    assert env.observation_space.contains(obs)
    for _ in range(5):
        obs, reward, terminated, truncated, _ = env.step(env.action_space.sample())
        assert env.observation_space.contains(obs)
        assert reward.shape == (num_envs,) and np.isfinite(reward).all()
        assert terminated.dtype == bool and truncated.dtype == bool
    image = env.render()
    assert image.shape == (240, 320, 3) and image.std() > 1.0
    env.close()


@pytest.mark.parametrize(("task", "backend"), [(t, b) for t, b in PAIRS if b != "mujoco_batch"])
def test_single_world_env_passes_gymnasium_checker(task: str, backend: str) -> None:
    env = TaskGymEnv(task, backend)
    check_env(env, skip_render_check=True)
    env.close()


def test_gymnasium_ids_make_single_and_vector_envs() -> None:
    gym.register_envs(robolearn)
    env = gym.make(gym_id("panda_pick_cube"))
    obs, _ = env.reset(seed=1)
    assert set(obs) == set(make_task_cfg("panda_pick_cube").observations)
    vec = gym.make_vec(gym_id("panda_reach"), num_envs=4, vectorization_mode="vector_entry_point")
    obs, _ = vec.reset(seed=1)
    assert obs["ee_pos"].shape == (4, 3)
    env.close()
    vec.close()


def test_batched_worlds_match_the_single_world_reference() -> None:
    single = TaskEnv("panda_pick_cube", "mujoco", 1, seed=3)
    batch = TaskEnv("panda_pick_cube", "mujoco_batch", 4, seed=3)
    expert = single.cfg.expert(single.cfg)  # type: ignore[misc]
    obs_s, _ = single.reset(seed=3)
    batch.reset(seed=3)
    # Every batched world starts from the reference world's state and gets its actions.
    for field in ("qpos", "qvel"):
        batch.sim.mj_field(field)[:] = single.sim.mj_field(field)[0]  # type: ignore[attr-defined]
    batch.sim.forward(np.arange(4))
    lifted = 0.0
    for _ in range(single.cfg.episode_length):
        action = expert(obs_s)
        obs_s, _, terminated, truncated, _ = single.step(action)
        obs_b, *_ = batch.step(np.repeat(action, 4, axis=0))
        if terminated[0] or truncated[0]:  # the next episodes start from different draws
            break
        lifted = max(lifted, float(obs_s["cube_pos"][0, 2]))
        for key in obs_s:
            np.testing.assert_allclose(obs_b[key], np.repeat(obs_s[key], 4, axis=0), atol=1e-5, err_msg=key)
    assert terminated[0] and lifted > 0.05  # the comparison covered a grasp and a lift


def test_same_step_autoreset_reports_final_observation() -> None:
    env = TaskEnv("panda_reach", "mujoco_batch", 2, seed=0)
    obs, _ = env.reset(seed=0)
    expert = env.cfg.expert(env.cfg)  # type: ignore[misc]
    for _ in range(env.cfg.episode_length):
        obs, _, terminated, truncated, info = env.step(expert(obs))
        if (terminated | truncated).any():
            break
    done = terminated | truncated
    assert done.any() and info["_final_obs"].tolist() == done.tolist()
    assert info["final_info"]["episode_success"][done].all()
    i = int(np.flatnonzero(done)[0])
    # The returned observation starts a new episode; the final one ended at the goal.
    assert np.linalg.norm(info["final_obs"]["goal_from_ee"][i]) < 0.03
    assert env.step_count[i] == 0


@pytest.mark.parametrize("backend", ["mujoco", "mujoco_batch", "pybullet"])
def test_non_finite_actions_are_rejected_and_never_reach_the_world(backend: str) -> None:
    n = 2 if backend == "mujoco_batch" else 1
    env = TaskEnv("panda_pick_cube", backend, n, seed=0)
    env.reset(seed=0)
    bad = np.tile([np.nan, np.inf, -np.inf, 0.04], (n, 1))
    for _ in range(20):
        obs, reward, _, _, info = env.step(bad)
        assert info["action_rejected"].all()
        assert all(np.isfinite(v).all() for v in obs.values()) and np.isfinite(reward).all()
    np.testing.assert_allclose(env.action, np.tile(env.cfg.action.neutral, (n, 1)))


def test_out_of_range_actions_are_clipped() -> None:
    env = TaskEnv("panda_reach", "mujoco", 1, seed=0)
    env.reset(seed=0)
    env.step(np.array([[5.0, -5.0, 5.0, 1.0]]))
    np.testing.assert_allclose(env.action[0], [0.02, -0.02, 0.02, 0.08])


def test_wrong_action_shape_names_the_expected_shape() -> None:
    env = TaskEnv("panda_reach", "mujoco", 1, seed=0)
    env.reset()
    with pytest.raises(TaskError, match=r"expected \(1, 4\).*ee_dx"):
        env.step(np.zeros(3))


def test_a_diverged_world_is_reset_and_reported() -> None:
    env = TaskEnv("panda_pick_cube", "mujoco_batch", 3, seed=0)
    env.reset(seed=0)
    env.sim.set_joint_state(np.array([1]), ["panda_joint2"], np.array([[np.nan]]))
    obs, _, _, truncated, info = env.step(np.tile(env.cfg.action.neutral, (3, 1)))
    assert info["sim_unstable"].tolist() == [False, True, False]
    assert truncated[1] and not truncated[0]
    assert all(np.isfinite(v).all() for v in obs.values())
    assert env.step_count[1] == 0


def test_domain_randomization_varies_physics_per_world() -> None:
    env = TaskEnv("panda_pick_cube", "mujoco_batch", 8, seed=0, randomize=True)
    env.reset(seed=0)
    mass = env.sim.batch.expanded("body_mass")  # type: ignore[attr-defined]
    assert mass is not None and np.unique(mass[:, -1]).size == 8
    lo, hi = env.cfg.randomization.mass_scale
    nominal = TaskEnv("panda_pick_cube", "mujoco", 1).sim.model.body_mass  # type: ignore[attr-defined]
    assert ((mass >= nominal * lo - 1e-12) & (mass <= nominal * hi + 1e-12)).all()


def test_action_latency_delays_the_effect_of_an_action() -> None:
    cfg = make_task_cfg("panda_reach")
    late = dataclasses.replace(
        cfg, randomization=dataclasses.replace(cfg.randomization, action_latency_steps=(1, 1))
    )
    env = TaskEnv(late, "mujoco", 1, seed=0, randomize=True)
    env.reset(seed=0)
    first = np.array([[0.02, 0.0, 0.0, 0.08]])
    env.step(first)
    np.testing.assert_allclose(env.action, [env.cfg.action.neutral])
    env.step(np.zeros((1, 4)))
    np.testing.assert_allclose(env.action, first)


def test_seeded_resets_repeat() -> None:
    a = TaskEnv("panda_pick_cube", "mujoco_batch", 4, seed=0)
    b = TaskEnv("panda_pick_cube", "mujoco_batch", 4, seed=0)
    oa, _ = a.reset(seed=11)
    ob, _ = b.reset(seed=11)
    oc, _ = b.reset(seed=12)
    np.testing.assert_array_equal(oa["cube_pos"], ob["cube_pos"])
    assert not np.allclose(oa["cube_pos"], oc["cube_pos"])


def test_unknown_task_and_backend_are_named() -> None:
    with pytest.raises(TaskError, match=r"unknown task 'nope'; tasks: panda_reach"):
        make_task_cfg("nope")
    with pytest.raises(
        SimError, match=r"unknown backend 'gazebo'; choose one of mujoco, mujoco_batch, pybullet"
    ):
        make_backend("gazebo", make_task_cfg("panda_reach").scene, 1)


def test_malformed_task_definitions_are_refused() -> None:
    cfg = make_task_cfg("panda_reach")
    typo = dataclasses.replace(
        cfg, reset_events={"goal": EventTerm(cfg.reset_events["goal"].fn, {"key": "goal", "lo": (0, 0, 0)})}
    )
    with pytest.raises(TaskError, match=r"reset_events.goal gets parameters \['lo'\]"):
        typo.validate()
    short = dataclasses.replace(cfg, action=dataclasses.replace(cfg.action, low=(0.0,)))
    with pytest.raises(TaskError, match=r"action\.low has 1 entries"):
        short.validate()
    with pytest.raises(TaskError, match="not a positive multiple"):
        dataclasses.replace(cfg, control_dt=0.003).validate()


def test_missing_model_file_is_a_clear_error(tmp_path: Path) -> None:
    cfg = make_task_cfg("panda_reach")
    robot = dataclasses.replace(cfg.scene.robot, asset=UrdfAsset(tmp_path / "missing.urdf"))
    broken = dataclasses.replace(cfg, scene=dataclasses.replace(cfg.scene, robot=robot))
    for backend in ("mujoco", "pybullet"):
        with pytest.raises(SimError, match=r"missing\.urdf"):
            TaskEnv(broken, backend, 1)
