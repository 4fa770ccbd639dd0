"""The racecar and car_checkpoints: Ackermann geometry, driving physics, checkpoints, the expert."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from robolearn.envs.autoreset import EpisodeStatistics
from robolearn.envs.task_env import TaskEnv
from robolearn.sim.transforms import quat_from_euler, yaw_of
from robolearn.tasks import car_checkpoints as car
from robolearn.tasks.core import TaskError
from robolearn.tasks.robots import racecar
from robolearn.tasks.sim_params import IdentifiedParam, SimParams, save_sim_params

BACKENDS = [
    "mujoco_batch",
    pytest.param(
        "pybullet",
        marks=pytest.mark.skipif(
            importlib.util.find_spec("robolearn.sim.pybullet_backend") is None, reason="no PyBullet backend"
        ),
    ),
]


def _drive(backend: str, action: tuple[float, float], seconds: float) -> dict[str, np.ndarray]:
    """Put the car at the origin heading +x, hold an action, and return the last observation."""
    env = TaskEnv("car_checkpoints", backend, 2, seed=0, autoreset=False)
    env.reset()
    ids = np.arange(2)
    zero = np.zeros(2)
    env.sim.set_root_state(ids, racecar.ROBOT_NAME, np.zeros((2, 3)), quat_from_euler(zero, zero, zero))
    env.sim.forward(ids)
    for _ in range(round(seconds / env.cfg.control_dt)):
        obs, _, terminated, truncated, _ = env.step(np.tile(action, (2, 1)))
        assert not (terminated | truncated).any()
    obs["pos"] = env.sim.frame_pos(racecar.ROBOT_NAME).copy()
    obs["yaw"] = yaw_of(env.sim.frame_quat(racecar.ROBOT_NAME))
    env.close()
    return obs


def test_ackermann_geometry() -> None:
    steer = np.array([-0.5, -0.1, 0.0, 0.2, 0.5])
    hinges = racecar.ackermann_hinge_angles(steer)
    # The inner wheel turns more; both turn the way the car turns; within the URDF's +-1 rad.
    inner = np.where(steer > 0, hinges[:, 0], hinges[:, 1])
    outer = np.where(steer > 0, hinges[:, 1], hinges[:, 0])
    turning = steer != 0
    assert np.all(np.abs(inner[turning]) > np.abs(outer[turning]))
    assert np.all(np.sign(hinges) == np.sign(steer)[:, None])
    assert np.abs(hinges).max() < 1.0
    # Both wheels' axles point at one turning centre on the rear axle line, WHEELBASE / tan(steer) away.
    radius = racecar.WHEELBASE / np.tan(steer[turning])
    for side, hinge in ((1, hinges[turning, 0]), (-1, hinges[turning, 1])):
        np.testing.assert_allclose(racecar.WHEELBASE / np.tan(hinge), radius - side * racecar.TRACK / 2)
    np.testing.assert_allclose(racecar.steering_from_hinges(hinges), steer, atol=1e-12)

    speeds = racecar.ackermann_wheel_speeds(np.full(5, 2.0), steer)
    np.testing.assert_allclose(speeds[2], 2.0 / racecar.WHEEL_RADIUS)
    # Turning left, the right (outer) wheels roll faster than the left ones.
    assert np.all(speeds[3, [1, 3]] > speeds[3, [0, 2]])


def test_spaces_have_documented_names_and_units() -> None:
    env = TaskEnv("car_checkpoints", "mujoco_batch", 2, seed=0)
    cfg = env.cfg
    assert cfg.action.names == ("speed", "steering_angle")
    assert cfg.action.units == ("m/s", "rad")
    assert cfg.action.high == (racecar.MAX_SPEED, racecar.MAX_STEER)
    assert 1.0 < racecar.MAX_SPEED <= 5.0 and 0.0 < racecar.MAX_STEER < 1.0
    expected = {
        "next_checkpoint": ("m", 2),
        "checkpoint_after": ("m", 2),
        "body_velocity": ("m/s", 2),
        "yaw_rate": ("rad/s", 1),
        "steering_angle": ("rad", 1),
        "last_action": ("m/s, rad", 2),
    }
    space = env.single_observation_space
    assert {k: (t.units, space[k].shape[0]) for k, t in cfg.observations.items()} == expected
    assert all(t.noise_std > 0 for k, t in cfg.observations.items() if k != "last_action")
    obs, _ = env.reset()
    assert set(obs) == set(expected)
    # The car starts at rest, wheels straight, its first checkpoint ahead and out of reach.
    np.testing.assert_allclose(obs["body_velocity"], 0.0, atol=1e-3)
    assert np.all(obs["next_checkpoint"][:, 0] > 0)
    assert np.all(np.linalg.norm(obs["next_checkpoint"], axis=1) > car.CHECKPOINT_RADIUS)
    env.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_full_speed_straight_drives_forward_at_the_commanded_speed(backend: str) -> None:
    obs = _drive(backend, (racecar.MAX_SPEED, 0.0), 1.2)
    forward, lateral = obs["body_velocity"][:, 0], obs["body_velocity"][:, 1]
    np.testing.assert_allclose(forward, racecar.MAX_SPEED, rtol=0.1)
    assert np.all(np.abs(lateral) < 0.1)
    # Along +x, where it was heading. (PyBullet's faceted wheel cylinders make the yaw rate
    # wobble by about 0.2 rad/s, so the heading is checked, not the rate.)
    assert np.all(obs["pos"][:, 0] > 2.0) and np.all(np.abs(obs["pos"][:, 1]) < 0.1)
    assert np.all(np.abs(obs["yaw"]) < 0.05)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("steer", [0.3, -0.3])
def test_steering_left_turns_left(backend: str, steer: float) -> None:
    obs = _drive(backend, (1.0, steer), 1.0)
    kinematic = 1.0 * np.tan(steer) / racecar.WHEELBASE
    # Turning at about the rate of a car that does not slide (positive yaw rate is to the left).
    np.testing.assert_allclose(obs["yaw_rate"][:, 0], kinematic, rtol=0.25)
    np.testing.assert_allclose(obs["steering_angle"][:, 0], steer, atol=0.05)


def test_checkpoints_advance_in_order_and_pay_a_bonus() -> None:
    env = TaskEnv("car_checkpoints", "mujoco_batch", 2, seed=1, autoreset=False)
    env.reset()
    ids = np.arange(2)
    zero = np.zeros(2)
    # World 0 is put on its second checkpoint (out of order: nothing happens), world 1 on its first.
    pos = np.column_stack([env.state["checkpoints"][ids, [1, 0]], zero])
    env.sim.set_root_state(ids, racecar.ROBOT_NAME, pos, quat_from_euler(zero, zero, zero))
    env.sim.forward(ids)
    _, reward, terminated, _, _ = env.step(np.zeros((2, 2)))
    np.testing.assert_array_equal(env.state["next_index"][:, 0], [0, 1])
    assert reward[1] > reward[0] + 0.5
    assert not terminated.any()
    env.close()


def test_the_lap_succeeds_and_leaving_the_arena_terminates() -> None:
    env = TaskEnv("car_checkpoints", "mujoco_batch", 2, seed=2)
    env.reset()
    env.state["next_index"][0] = car.NUM_CHECKPOINTS - 1
    env.state["checkpoints"][0, -1] = env.sim.frame_pos(racecar.ROBOT_NAME)[0, :2]
    # World 0 stands on its last checkpoint; world 1 is put outside the arena.
    outside = np.array([[car.ARENA_HALF_SIZE + 1.0, 0.0, 0.0]])
    env.sim.set_root_state(np.array([1]), racecar.ROBOT_NAME, outside)
    env.sim.forward(np.arange(2))
    _, _, terminated, _, info = env.step(np.zeros((2, 2)))
    assert terminated.all()
    np.testing.assert_array_equal(info["final_info"]["success"], [True, False])
    env.close()


def test_expert_completes_laps_on_mujoco_batch() -> None:
    env = TaskEnv("car_checkpoints", "mujoco_batch", 32, seed=7)
    expert = env.cfg.expert(env.cfg)
    obs, _ = env.reset()
    stats = EpisodeStatistics(32)
    first_episode = np.full(32, -1)
    lap_steps = np.zeros(32)
    for _ in range(env.cfg.episode_length):
        obs, reward, terminated, truncated, info = env.step(expert(obs))
        ended = stats.step(reward, terminated, truncated, info)
        new = first_episode[ended.worlds] < 0
        assert ended.successes is not None
        first_episode[ended.worlds[new]] = ended.successes[new]
        lap_steps[ended.worlds[new]] = ended.lengths[new]
        if (first_episode >= 0).all():
            break
    assert (first_episode >= 0).all()
    assert first_episode.mean() >= 0.95
    # A lap takes the expert a few seconds, well inside the episode.
    assert lap_steps[first_episode == 1].max() < 0.8 * env.cfg.episode_length
    env.close()


def test_expert_drives_within_the_identified_grip(tmp_path: Path) -> None:
    # A robot whose tyres grip at 0.375 of nominal (bench finetune's car gap at strength 1.25): the
    # nominal schedule slides wide of its checkpoints; the expert of the identified robot does not.
    params = SimParams("racecar", {"robot_friction_scale": IdentifiedParam(0.375, 0.0, 1.0)})
    save_sim_params(params, tmp_path / "grip.yaml")
    env = TaskEnv("car_checkpoints", "mujoco_batch", 32, seed=7, sim_params=tmp_path / "grip.yaml")
    assert env.cfg.scene.robot.identified is not None
    assert env.cfg.expert is not None
    experts = {"identified": env.cfg.expert(env.cfg), "nominal": car.PurePursuitExpert(env.cfg)}
    first_laps = {}
    for name, expert in experts.items():
        obs, _ = env.reset(seed=7)
        stats, first = EpisodeStatistics(32), np.full(32, -1)
        for _ in range(env.cfg.episode_length):
            obs, reward, terminated, truncated, info = env.step(expert(obs))
            ended = stats.step(reward, terminated, truncated, info)
            assert ended.successes is not None
            new = first[ended.worlds] < 0
            first[ended.worlds[new]] = ended.successes[new]
        first_laps[name] = first.mean()
    env.close()
    assert first_laps["identified"] >= 0.95
    assert first_laps["nominal"] <= 0.6  # measured 0.22: the gap this expert is for
    with pytest.raises(TaskError, match="grip must be positive"):
        car.PurePursuitExpert(env.cfg, grip=0.0)
