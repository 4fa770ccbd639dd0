"""Reward scaling by running return statistics (SimbaV2's; ``--sac.reward-scale returns``): the
statistics, the rewards the learner trains on, checkpoints, refusals, and a run that learns with it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file

from robolearn.data.manifest import write_manifest
from robolearn.errors import ConfigError, CorruptFileError
from robolearn.policy.normalization import ObsLayout, RunningNorm
from robolearn.rl.actor_learner import EpisodeStats, LearnerRole, LocalExchange, Transitions
from robolearn.rl.checkpoint import load_checkpoint, restore_agent, save_checkpoint
from robolearn.rl.config import SACConfig, TrainCfg
from robolearn.rl.drq import PixelTrainCfg
from robolearn.rl.replay import Batch, ReplayBuffer
from robolearn.rl.reward_scale import ReturnScale
from robolearn.rl.sac import SAC
from robolearn.rl.train import train

SCALED = SACConfig(
    hidden=(16, 16), batch_size=8, critic_loss="hl_gauss", reward_scale="returns", value_range=(-5.0, 5.0)
)


def test_each_worlds_return_runs_until_its_episode_terminates() -> None:
    scale = ReturnScale(gamma=0.5, v_max=5.0)
    scale.update(np.array([1.0, 2.0]), np.array([0.0, 0.0]))
    scale.update(np.array([1.0, 2.0]), np.array([0.0, 1.0]))  # the second world's episode ends
    np.testing.assert_allclose(scale.returns, [1.5, 0.0])
    scale.update(np.array([1.0, 2.0]), np.array([0.0, 0.0]))
    np.testing.assert_allclose(scale.returns, [1.75, 2.0])
    # The statistics are those of every return seen: 1, 2, 1.5, 3, 1.75, 2.
    seen = np.array([1.0, 2.0, 1.5, 3.0, 1.75, 2.0])
    assert scale.stats.count == 6
    np.testing.assert_allclose(scale.stats.mean[0], seen.mean())
    np.testing.assert_allclose(scale.stats.var[0], seen.var())


def test_scaled_returns_stay_within_the_value_bound() -> None:
    """Whatever the rewards' units, the scaled discounted return never leaves [-v_max, v_max], and where
    the bound does not bind the divisor is the returns' standard deviation."""
    rng = np.random.default_rng(0)
    for units in (0.01, 1.0, 1_000.0):
        scale = ReturnScale(gamma=0.99, v_max=5.0)
        rewards = units * (3.0 + rng.normal(size=(2_000, 4)))  # long episodes of mostly positive rewards
        for r in rewards:
            scale.update(r, np.zeros(4))
        returns = np.zeros(4)
        for r in rewards:  # the same returns, now of the scaled rewards
            returns = 0.99 * returns + r / scale.divisor
            assert np.all(np.abs(returns) <= 5.0 + 1e-9)
        bound = np.abs(rewards).max() / (0.01 * 5.0)
        assert scale.divisor == pytest.approx(max(scale.stats.std[0], bound))
    # Before any step the rewards pass as they are.
    assert ReturnScale(0.99, 5.0).divisor == 1.0


def _learner(cfg: SACConfig) -> tuple[LearnerRole, LocalExchange]:
    torch.manual_seed(0)
    layout = ObsLayout({"s": (3,)})
    agent = SAC(layout.dim, 2, cfg, torch.device("cpu"))
    exchange = LocalExchange()
    online = ReplayBuffer(100, {"s": (3,)}, 2)
    return LearnerRole(agent, layout, online, None, RunningNorm(layout.dim), exchange, seed=1), exchange


def _send(exchange: LocalExchange, rewards: np.ndarray) -> None:
    n = len(rewards)
    obs = {"s": np.zeros((n, 3), np.float32)}
    batch = Batch(obs, np.zeros((n, 2), np.float32), rewards.astype(np.float32), obs, np.zeros(n, np.float32))
    exchange.send_transitions(Transitions(batch, EpisodeStats(), n, 0))


def test_the_learner_trains_on_rewards_divided_by_the_statistics_of_what_arrived() -> None:
    learner, exchange = _learner(SCALED)
    for step in range(20):
        _send(exchange, np.array([100.0, 300.0]) + step)
    learner.ingest()
    scale = learner.agent.reward_scale
    assert scale is not None
    divisor = scale.divisor
    # The rewards' bound binds here: the largest reward, 319, over (1 - 0.99) * 5.
    assert divisor == pytest.approx(319.0 / 0.05)
    _, _, reward, *_ = learner.sample(16)
    stored = set(np.round(learner.online.reward[:40] / divisor, 5))
    assert set(np.round(reward.numpy(), 5)) <= stored
    assert float(reward.abs().max()) < 0.06
    assert learner.update()["reward_divisor"] == pytest.approx(divisor)
    # Unscaled, the learner trains on the rewards as they arrived.
    plain, exchange = _learner(replace(SCALED, reward_scale="none"))
    _send(exchange, np.array([100.0, 300.0]))
    plain.ingest()
    assert set(plain.sample(8)[2].numpy()) <= {100.0, 300.0}
    assert "reward_divisor" not in plain.update()


def _saved(tmp_path: Path, cfg: SACConfig) -> tuple[LearnerRole, Path]:
    learner, exchange = _learner(cfg)
    for step in range(30):
        _send(exchange, np.array([1.0, -2.0]) * step)
    learner.ingest()
    learner.update()
    save_checkpoint(
        tmp_path,
        30,
        agent=learner.agent,
        obs_norm=learner.obs_norm,
        online=learner.online,
        demos=None,
        state={},
    )
    return learner, tmp_path


def test_checkpoints_carry_the_statistics_and_refuse_a_run_without_them(tmp_path: Path) -> None:
    learner, ckpt = _saved(tmp_path / "scaled", SCALED)
    fresh, _ = _learner(SCALED)
    restore_agent(fresh.agent, fresh.obs_norm, load_checkpoint(ckpt))
    saved, back = learner.agent.reward_scale, fresh.agent.reward_scale
    assert saved is not None and back is not None
    assert back.divisor == saved.divisor and back.abs_max == saved.abs_max
    np.testing.assert_array_equal(back.returns, saved.returns)
    # Statistics no run could have saved (a NaN variance would make every reward NaN) are refused.
    path = load_checkpoint(ckpt).path
    tensors = load_file(str(path / "model.safetensors"))
    tensors["reward_scale.stats.var"] = torch.tensor([float("nan")], dtype=torch.float64)
    save_file(tensors, str(path / "model.safetensors"))
    write_manifest(path, "manifest.json")  # a consistent manifest: the values themselves are refused
    with pytest.raises(CorruptFileError, match=r"does not fit this configuration: .*non-finite"):
        restore_agent(fresh.agent, fresh.obs_norm, load_checkpoint(ckpt))
    # A checkpoint of a run without the scaling does not fit one that scales: named, one line.
    _, plain = _saved(tmp_path / "plain", replace(SCALED, reward_scale="none"))
    with pytest.raises(CorruptFileError, match=r"does not fit this configuration: .*reward scale statistics"):
        restore_agent(fresh.agent, fresh.obs_norm, load_checkpoint(plain))


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"offline": (Path("data"),), "offline_steps": 10}, r"--sac\.reward-scale returns: offline"),
        ({"exchange": "ray", "actors": 2}, r"follows one actor's worlds; --exchange ray has 2 actors"),
        ({"task": "panda_reach", "backend": "mujoco_warp"}, r"--sac\.reward-scale returns is not available"),
        (
            {"task": "panda_pick_cube", "sac": replace(SCALED, gripper_critic=True)},
            r"--gripper-penalty is in the task's reward units",
        ),
    ],
)
def test_reward_scaling_is_refused_where_it_cannot_follow_the_returns(
    tmp_path: Path, options: dict[str, object], message: str
) -> None:
    cfg = TrainCfg(task="gym:Pendulum-v1", out=tmp_path, sac=replace(SACConfig(), reward_scale="returns"))
    with pytest.raises(ConfigError, match=message):
        replace(cfg, **options).check()  # type: ignore[arg-type]


def test_pixel_training_refuses_reward_scaling() -> None:
    with pytest.raises(ConfigError, match=r"pixel training \(DrQ\) takes rewards as they are"):
        PixelTrainCfg(sac=replace(SACConfig(), reward_scale="returns")).check()


def test_pendulum_is_learned_by_an_hl_gauss_critic_over_scaled_returns(tmp_path: Path) -> None:
    """Pendulum's returns reach about -800 discounted: bins over (-5, 5) would clip all of them, the
    scaled returns fit (the check that the scaling reaches the critic's targets)."""
    cfg = TrainCfg(
        task="gym:Pendulum-v1",
        num_envs=1,
        steps=5_000,
        out=tmp_path,
        learning_starts=500,
        random_steps=500,
        eval_every=10_000,
        eval_episodes=2,
        final_eval_episodes=10,
        checkpoint_every=5_000,
        video=False,
        sac=replace(SCALED, hidden=(64, 64), batch_size=SACConfig.batch_size),
    )
    summary = train(cfg)
    # Random actions score about -1200; a swung-up, balanced pendulum about -150.
    assert summary["return_mean"] > -400, summary["evals"]
