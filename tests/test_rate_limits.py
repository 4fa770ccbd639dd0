"""Training under a robot's rate limits (``robolearn train --rate-limits``): the simulated worlds
limit each command's change per control period as the robot's safety layer will."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from robolearn.envs.task_env import TaskEnv
from robolearn.errors import ConfigError
from robolearn.hardware.registry import load_safety_config, rate_limited_task
from robolearn.hardware.safety_config import SafetyConfigError
from robolearn.rl.config import TrainCfg
from robolearn.rl.train import make_train_env
from robolearn.tasks import make_task_cfg
from robolearn.tasks.core import TaskError


def test_the_car_is_limited_by_the_racecars_safety_config() -> None:
    car = rate_limited_task(make_task_cfg("car_checkpoints"))
    safety = load_safety_config("racecar")
    assert car.action.max_rate == tuple(safety.action[n].max_rate for n in car.action.names)
    assert car.action.max_rate == (8.0, 5.0)  # hardware/config/racecar.yaml: speed, steering_angle


@pytest.mark.parametrize("backend", ["mujoco", "mujoco_batch"])
def test_no_command_changes_faster_than_the_limit_and_a_reset_starts_from_neutral(backend: str) -> None:
    cfg = rate_limited_task(make_task_cfg("car_checkpoints"))
    env = TaskEnv(cfg, backend, 1, seed=0, autoreset=False)
    env.reset(seed=0)
    step = np.asarray(cfg.action.max_rate) * cfg.control_dt  # 0.16 m/s and 0.1 rad a period
    low, high = np.asarray(cfg.action.low), np.asarray(cfg.action.high)
    rng = np.random.default_rng(0)
    previous = np.asarray(cfg.action.neutral)
    reached_high = False
    for t in range(60):
        # Full speed and lock first (0 -> 3 m/s takes 19 periods), then random jumps.
        wanted = high if t < 30 else rng.uniform(low, high)
        env.step(wanted[None])
        applied = np.asarray(env.action[0])
        assert np.all(np.abs(applied - previous) <= step + 1e-12), (t, applied, previous)
        assert np.all(applied >= low) and np.all(applied <= high)
        reached_high |= bool(np.allclose(applied, high))
        previous = applied
    assert reached_high  # the limit slows commands down, it does not stop them
    env.reset(seed=1)
    np.testing.assert_array_equal(env.action[0], cfg.action.neutral)
    env.step(high[None])
    np.testing.assert_allclose(env.action[0], np.minimum(np.asarray(cfg.action.neutral) + step, high))


def test_without_limits_the_command_jumps() -> None:
    cfg = make_task_cfg("car_checkpoints")
    env = TaskEnv(cfg, "mujoco_batch", 1, seed=0)
    env.reset(seed=0)
    env.step(np.asarray(cfg.action.high)[None])
    np.testing.assert_array_equal(env.action[0], cfg.action.high)


def test_limits_act_before_the_latency() -> None:
    cfg = rate_limited_task(make_task_cfg("car_checkpoints"))
    randomization = dataclasses.replace(cfg.randomization, action_latency_steps=(1, 1))
    late = dataclasses.replace(cfg, randomization=randomization)
    env = TaskEnv(late, "mujoco_batch", 1, seed=0, randomize=True)
    env.reset(seed=0)
    step = np.asarray(cfg.action.max_rate) * cfg.control_dt
    high = np.asarray(cfg.action.high)
    first = np.asarray(cfg.action.neutral) + step
    env.step(high[None])
    np.testing.assert_array_equal(env.delayed_action[0], cfg.action.neutral)  # one period late
    np.testing.assert_allclose(env.action[0], first)  # sent, limited
    env.step(high[None])
    np.testing.assert_allclose(env.delayed_action[0], first)  # the first command
    np.testing.assert_allclose(env.action[0], first + step)


def test_a_bad_rate_in_a_task_definition_is_named() -> None:
    cfg = make_task_cfg("car_checkpoints")
    for rate in ((1.0,), (1.0, 0.0)):
        bad = dataclasses.replace(cfg, action=dataclasses.replace(cfg.action, max_rate=rate))
        with pytest.raises(TaskError, match=r"action\.max_rate needs 2 positive entries"):
            bad.validate()


def test_a_safety_config_without_the_tasks_actions_is_refused(tmp_path: Path) -> None:
    # The drone's limits name collective thrust and body rates, not the car's speed and steering.
    with pytest.raises(SafetyConfigError, match="no action limits for speed, steering_angle"):
        rate_limited_task(make_task_cfg("car_checkpoints"), "crazyflie")


def test_train_options(tmp_path: Path) -> None:
    run = TrainCfg(task="car_checkpoints", rate_limits=True, out=tmp_path)
    run.check()
    env = make_train_env(run, 2, 0)
    assert env.cfg.action.max_rate == (8.0, 5.0)
    env.close()
    assert make_train_env(dataclasses.replace(run, rate_limits=False), 1, 0).cfg.action.max_rate is None
    with pytest.raises(ConfigError, match="--rate-limits need a robolearn task"):
        TrainCfg(task="gym:Pendulum-v1", rate_limits=True).check()
    with pytest.raises(ConfigError, match="with --robot ros that layer itself"):
        TrainCfg(task="car_checkpoints", rate_limits=True, robot="ros", num_envs=1).check()
    with pytest.raises(SafetyConfigError, match="unknown safety config 'nobody'"):
        TrainCfg(task="car_checkpoints", rate_limits=True, robot_safety="nobody").check()


def test_a_run_trained_under_the_limits_says_so_to_its_evaluation(tmp_path: Path) -> None:
    from robolearn.policy.loading import load_policy
    from robolearn.rl.config import SACConfig
    from robolearn.rl.train import train

    run = TrainCfg(
        task="car_checkpoints",
        rate_limits=True,
        num_envs=2,
        steps=200,
        random_steps=100,
        learning_starts=100,
        eval_every=10_000,
        eval_episodes=1,
        final_eval_episodes=1,
        checkpoint_every=200,
        video=False,
        out=tmp_path,
        name="limited",
        sac=SACConfig(hidden=(32, 32), batch_size=32),
    )
    train(run)
    _, meta = load_policy(tmp_path / "limited")
    assert meta["rate_limits"] is True
    train(dataclasses.replace(run, rate_limits=False, name="free"))
    assert "rate_limits" not in load_policy(tmp_path / "free")[1]
