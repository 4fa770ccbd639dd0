"""The environment over every task and backend: spaces, autoreset, bad input, randomization."""

from __future__ import annotations

import dataclasses
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from gymnasium.wrappers import RescaleAction
from gymnasium.wrappers.vector import RecordEpisodeStatistics

import robolearn
from robolearn.envs.autoreset import step_info
from robolearn.envs.task_env import TaskEnv, TaskGymEnv
from robolearn.sim.backend import HOST_BACKENDS, SimError, make_backend
from robolearn.sim.scene import UrdfAsset
from robolearn.tasks import gym_id, make_task_cfg, task_names, terms
from robolearn.tasks.core import EventTerm, TaskCfg, TaskError
from robolearn.tasks.worlds import TaskWorlds

# MuJoCo Warp compiles kernels for a minute per task: tests/test_mujoco_warp.py covers it.
PAIRS = [(t, b) for t in task_names() for b in make_task_cfg(t).backends if b in HOST_BACKENDS]


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


# What the checkers may still say, and why it stands: observations such as positions and velocities
# have no physical bound (Gymnasium's own MuJoCo environments declare them unbounded too), and
# actions are in physical units (robolearn's SAC scales them to [-1, 1]; Stable-Baselines3's
# supported path is gymnasium's RescaleAction, checked below). Anything else is an error.
ACCEPTED_CHECKER_WARNINGS = (
    r".*A Box observation space (minimum|maximum) value is (-)?infinity",
    r".*For Box action spaces, we recommend using a symmetric and normalized space",
)


@pytest.mark.parametrize(("task", "backend"), [(t, b) for t, b in PAIRS if b != "mujoco_batch"])
def test_single_world_env_passes_gymnasium_and_sb3_checkers(task: str, backend: str) -> None:
    sb3_checker = pytest.importorskip("stable_baselines3.common.env_checker", reason="robolearn[bench]")
    gym.register_envs(robolearn)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for message in ACCEPTED_CHECKER_WARNINGS:
            warnings.filterwarnings("ignore", message=message)
        # Through gym.make, so the checker also remakes it in every declared render mode.
        env = gym.make(gym_id(task), backend=backend, render_mode="rgb_array")
        check_env(env.unwrapped)
        sb3_checker.check_env(RescaleAction(env, np.float32(-1.0), np.float32(1.0)))
    env.close()


def test_render_modes_are_declared_on_the_classes() -> None:
    """gym.make reads ``metadata`` from the class before making the env (issue 12)."""
    gym.register_envs(robolearn)
    assert TaskGymEnv.metadata["render_modes"] == ["rgb_array"] == TaskEnv.metadata["render_modes"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env = gym.make(gym_id("panda_reach"), render_mode="rgb_array")
        vec = gym.make_vec(
            gym_id("panda_reach"), 2, vectorization_mode="vector_entry_point", render_mode="rgb_array"
        )
    env.reset(seed=0)
    vec.reset(seed=0)
    assert env.render().shape == vec.render().shape == (240, 320, 3)  # type: ignore[union-attr]
    env.close()
    vec.close()
    with pytest.raises(TaskError, match=r"render_mode 'human' is not supported; use rgb_array or None"):
        TaskGymEnv("panda_reach", render_mode="human")


def _assert_same(ours: Any, reference: Any, where: str) -> None:
    """Equal values of equal types, dtypes and shapes, recursing into dicts and object arrays."""
    assert type(ours) is type(reference), f"{where}: {type(ours)} vs {type(reference)}"
    if isinstance(ours, dict):
        assert set(ours) == set(reference), f"{where}: keys {sorted(ours)} vs {sorted(reference)}"
        for key in ours:
            _assert_same(ours[key], reference[key], f"{where}[{key!r}]")
    elif isinstance(ours, tuple):
        assert len(ours) == len(reference), where
        for i, (a, b) in enumerate(zip(ours, reference, strict=True)):
            _assert_same(a, b, f"{where}[{i}]")
    elif isinstance(ours, np.ndarray) and ours.dtype == object:
        assert ours.shape == reference.shape, where
        for i, (a, b) in enumerate(zip(ours, reference, strict=True)):
            _assert_same(a, b, f"{where}[{i}]")
    elif isinstance(ours, np.ndarray):
        assert (ours.dtype, ours.shape) == (reference.dtype, reference.shape), f"{where}: {ours.dtype}"
        np.testing.assert_array_equal(ours, reference, err_msg=where)
    else:
        assert ours == reference, where


def _fixed_reach() -> TaskCfg:
    """panda_reach from one start to one goal: worlds seeded apart still start alike."""
    cfg = make_task_cfg("panda_reach")
    goal = (0.5, 0.1, 0.3)
    event = EventTerm(terms.sample_state_uniform, {"key": "goal", "low": goal, "high": goal})
    return dataclasses.replace(cfg, episode_length=40, reset_events={"goal": event})


@pytest.mark.parametrize(
    ("task", "speeds", "randomize"),
    [
        # Four worlds at different speeds: episodes end at different steps, two worlds together,
        # by success or by the time limit.
        (_fixed_reach(), (1.0, 0.5, 0.25, 1.0), False),
        # One randomized world: the same random streams on both sides, every end ends all worlds.
        (dataclasses.replace(make_task_cfg("panda_reach"), episode_length=30), (1.0,), True),
    ],
    ids=["four-worlds", "one-randomized-world"],
)
def test_steps_match_gymnasiums_sync_vector_env_over_the_one_world_env(
    task: TaskCfg, speeds: tuple[float, ...], randomize: bool
) -> None:
    """Same-step autoreset exactly as Gymnasium's own vector env gives it (issue 12)."""
    n = len(speeds)
    ours = TaskEnv(task, "mujoco_batch", n, randomize=randomize)
    reference = SyncVectorEnv(
        [lambda: TaskGymEnv(task, "mujoco_batch", randomize=randomize) for _ in range(n)],
        autoreset_mode=AutoresetMode.SAME_STEP,
    )
    assert ours.metadata["autoreset_mode"] == reference.metadata["autoreset_mode"]
    seed = 5 if n == 1 else [5] * n  # one-world envs seeded alike; the worlds' starts are fixed
    obs, info = ours.reset(seed=5)
    ref_obs, ref_info = reference.reset(seed=seed)
    _assert_same((obs, info), (ref_obs, ref_info), "reset")
    expert = task.expert(task)  # type: ignore[misc]
    speed = np.asarray(speeds)[:, None]
    ends: list[tuple[int, ...]] = []
    for step in range(120):
        action = (expert(obs) * speed).astype(np.float32)
        result = ours.step(action)
        _assert_same(result, reference.step(action), f"step {step}")
        obs, _, terminated, truncated, info = result
        if (terminated | truncated).any():
            ends.append(tuple(np.flatnonzero(terminated | truncated)))
    if n > 1:  # the comparison covered ends alone and together, by success and by time
        assert {(0, 3), (1,), (2,)} <= set(ends)
    assert len(ends) >= 3
    ours.close()
    reference.close()


def test_without_autoreset_steps_match_a_vector_env_that_never_resets() -> None:
    ours = TaskEnv("panda_pick_cube", "mujoco_batch", 2, seed=0, autoreset=False)
    reference = SyncVectorEnv(
        [lambda: TaskGymEnv("panda_pick_cube", "mujoco_batch") for _ in range(2)],
        autoreset_mode=AutoresetMode.DISABLED,
    )
    assert ours.metadata["autoreset_mode"] == AutoresetMode.DISABLED
    ours.reset(seed=0)
    reference.reset(seed=0)
    action = np.tile(ours.cfg.action.neutral, (2, 1)).astype(np.float32)
    _, _, _, _, info = ours.step(action)
    _assert_same(info, reference.step(action)[4], "info")


def test_gymnasiums_episode_statistics_wrapper_counts_our_episodes() -> None:
    """Code written for Gymnasium wraps the env for ``info["episode"]``; robolearn adds none."""
    env = RecordEpisodeStatistics(TaskEnv(_fixed_reach(), "mujoco_batch", 2, seed=0))
    obs, _ = env.reset(seed=0)
    expert = env.unwrapped.cfg.expert(env.unwrapped.cfg)  # type: ignore[attr-defined]
    for _ in range(40):
        obs, _, terminated, truncated, info = env.step(expert(obs) * np.array([[1.0], [0.25]]))
        if (terminated | truncated).any():
            break
    assert info["_episode"].tolist() == [True, False] and info["episode"]["l"][0] == 27
    assert info["final_info"]["success"].tolist() == [True, False]
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
    assert info["final_info"]["_success"].tolist() == done.tolist()
    assert info["final_info"]["success"][done].all()
    i = int(np.flatnonzero(done)[0])
    # The returned observation starts a new episode; the final one ended at the goal.
    assert np.linalg.norm(info["final_obs"][i]["goal_from_ee"]) < 0.03
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
    # World 1's episode ended in this step: its step info is Gymnasium's final_info.
    assert step_info(info, "sim_unstable", 3)[0].tolist() == [False, True, False]
    assert info["final_info"]["sim_unstable"][1] and info["_final_info"].tolist() == [False, True, False]
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
    np.testing.assert_allclose(env.delayed_action, [env.cfg.action.neutral])
    env.step(np.zeros((1, 4)))
    np.testing.assert_allclose(env.delayed_action, first)


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


def test_task_worlds_run_the_task_without_gymnasium_and_match_the_env() -> None:
    """TaskWorlds is the task's execution (what the simulated robots run); TaskEnv adds only
    spaces and autoreset, so under the same seed and actions both see the same worlds."""
    worlds = TaskWorlds("quadrotor_hover", "mujoco_batch", 3, seed=4, randomize=True)
    env = TaskEnv("quadrotor_hover", "mujoco_batch", 3, seed=4, randomize=True, autoreset=False)
    worlds.reset_worlds(np.arange(3))
    env_obs, _ = env.reset()
    for key, value in worlds.observe().items():
        np.testing.assert_array_equal(value, env_obs[key])
    rng = np.random.default_rng(0)
    for _ in range(260):  # past the episode length: an ended episode is reported, never reset
        action = rng.uniform(env.single_action_space.low, env.single_action_space.high, (3, 4))
        result = worlds.advance(action)
        env_obs, reward, terminated, truncated, info = env.step(action)
        np.testing.assert_array_equal(result.reward, reward)
        np.testing.assert_array_equal(result.terminated, terminated)
        np.testing.assert_array_equal(result.truncated, truncated)
        np.testing.assert_array_equal(result.success, info["success"])
        for key, value in worlds.observe().items():  # sensor noise included: same streams
            np.testing.assert_array_equal(value, env_obs[key])
    assert np.all(worlds.step_count == 260) and (result.truncated | result.terminated).all()
    worlds.reset_worlds(np.array([1]))  # a subset: the others keep their episode
    assert worlds.step_count.tolist() == [260, 0, 260] and worlds.episode_return[1] == 0.0
    assert worlds.observation_sizes == {k: s.shape[0] for k, s in env.single_observation_space.items()}
    worlds.close()
    env.close()


def test_a_list_of_seeds_seeds_the_worlds_by_every_element() -> None:
    """Gymnasium's ``reset(seed=[...])``: the same list resets alike, a change to a later seed changes
    the reset (only the first was read before), and a list of the wrong length is one clear error."""
    env = TaskEnv("panda_pick_cube", "mujoco_batch", 3, seed=0)
    first = env.reset(seed=[1, 2, 3])[0]["cube_pos"].copy()
    again = env.reset(seed=list(np.arange(1, 4)))[0]["cube_pos"]  # numpy's ints are ints too
    changed = env.reset(seed=[1, 2, 4])[0]["cube_pos"]
    np.testing.assert_array_equal(first, again)
    assert not np.allclose(first, changed)
    with pytest.raises(TaskError, match=r"one non-negative int per world \(3\)") as err:
        env.reset(seed=[1, 2])
    assert "\n" not in str(err.value)
    env.close()
