"""The learner's parts: a batched critic ensemble equal to separate critics, log-probabilities, updates."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from torch.distributions import Normal, TanhTransform, TransformedDistribution

from robolearn.errors import ConfigError
from robolearn.rl.config import SACConfig
from robolearn.rl.replay import DeviceBatch, LearnerBatch
from robolearn.rl.sac import SAC, CriticEnsemble, EnsembleLayerNorm, EnsembleLinear


def test_batched_ensemble_equals_each_critic_alone() -> None:
    torch.manual_seed(0)
    critic = CriticEnsemble(5, 7, 3, (32, 32), layer_norm=True)
    obs, act = torch.randn(16, 7), torch.randn(16, 3)
    together = critic(obs, act)
    assert together.shape == (5, 16)
    x = torch.cat([obs, act], dim=-1)
    for i in range(5):
        h = x
        for layer in critic.net:
            if isinstance(layer, EnsembleLinear):
                h = h @ layer.weight[i] + layer.bias[i]
            elif isinstance(layer, EnsembleLayerNorm):
                h = torch.nn.functional.layer_norm(h, h.shape[-1:]) * layer.weight[i] + layer.bias[i]
            else:
                h = layer(h)
        torch.testing.assert_close(together[i], h.squeeze(-1))


def test_actor_log_probability_matches_torch_distributions() -> None:
    torch.manual_seed(1)
    agent = SAC(6, 2, SACConfig(hidden=(16,)), torch.device("cpu"))
    obs = torch.randn(64, 6)
    torch.manual_seed(2)
    action, logp = agent.actor.sample(obs)
    mean, log_std = agent.actor(obs)
    dist = TransformedDistribution(Normal(mean, log_std.exp()), [TanhTransform(cache_size=1)])
    expected = dist.log_prob(action.clamp(-1 + 1e-6, 1 - 1e-6)).sum(-1)
    torch.testing.assert_close(logp, expected, atol=2e-3, rtol=1e-3)
    assert action.abs().max() <= 1.0


def test_updates_fit_a_fixed_batch_and_tune_the_temperature() -> None:
    torch.manual_seed(3)
    cfg = SACConfig(hidden=(64, 64), batch_size=64, utd_ratio=2, num_critics=4, critic_subsample=2)
    agent = SAC(4, 2, cfg, torch.device("cpu"))
    n = cfg.batch_size * cfg.utd_ratio
    obs, act = torch.randn(n, 4), torch.rand(n, 2) * 2 - 1
    rew, term = obs[:, 0].clone(), torch.ones(n)  # terminal: Q(s, a) should become r(s)
    batch = LearnerBatch.one_step(DeviceBatch(obs, act, rew, obs, term), cfg.gamma)
    first = agent.update(batch)
    for _ in range(300):
        last = agent.update(batch)
    assert last["critic_loss"] < 0.1 * first["critic_loss"]
    assert agent.updates == 301 * cfg.utd_ratio
    assert last["temperature"] != pytest.approx(first["temperature"])
    assert math.isfinite(last["actor_loss"])


def test_every_critic_step_and_the_actor_see_demonstrations_and_online_data() -> None:
    """RLPD's symmetric batches: a sampler puts the demonstrations first; with several critic steps
    per update each one (and the actor's) must still get both halves."""
    torch.manual_seed(4)
    cfg = SACConfig(hidden=(16,), batch_size=8, utd_ratio=4)
    agent = SAC(3, 2, cfg, torch.device("cpu"))
    n = cfg.batch_size * cfg.utd_ratio
    obs, act = torch.randn(n, 3), torch.rand(n, 2) * 2 - 1
    rew = torch.cat([torch.zeros(n // 2), torch.ones(n // 2)])  # demonstrations 0, online 1
    critic_rewards: list[torch.Tensor] = []
    actor_rows: list[torch.Tensor] = []
    critic_step, actor_step = agent.critic_step, agent.actor_step

    def watched_critic(t: LearnerBatch) -> Any:
        critic_rewards.append(t.reward.clone())
        return critic_step(t)

    def watched_actor(o: torch.Tensor) -> Any:
        actor_rows.append(o.clone())
        return actor_step(o)

    agent.critic_step = watched_critic  # type: ignore[method-assign]
    agent.actor_step = watched_actor  # type: ignore[method-assign]
    agent.update(LearnerBatch.one_step(DeviceBatch(obs, act, rew, obs, torch.zeros(n)), cfg.gamma))
    assert len(critic_rewards) == cfg.utd_ratio
    assert all(len(r) == cfg.batch_size and r.mean().item() == 0.5 for r in critic_rewards), critic_rewards
    demo_rows = {tuple(row.tolist()) for row in obs[: n // 2]}
    in_actor = [tuple(row.tolist()) in demo_rows for row in actor_rows[0]]
    assert len(in_actor) == cfg.batch_size and sum(in_actor) == cfg.batch_size // 2


def test_policy_delay_steps_the_actor_at_every_kth_update_only() -> None:
    """actor_every (TD3's and CrossQ's policy delay): the critics learn at every update, the actor
    and the temperature at every k-th; in between an update reports the last actor step's figures."""
    torch.manual_seed(5)
    cfg = SACConfig(hidden=(16,), batch_size=8, actor_every=3, adam_beta1=0.5)
    agent = SAC(3, 2, cfg, torch.device("cpu"))
    assert all(
        g["betas"] == (0.5, 0.999) for g in (*agent.actor_opt.param_groups, *agent.critic_opt.param_groups)
    )
    obs, act = torch.randn(8, 3), torch.rand(8, 2) * 2 - 1
    rew, term = obs[:, 0].clone(), torch.zeros(8)
    batch = LearnerBatch.one_step(DeviceBatch(obs, act, rew, obs, term), cfg.gamma)

    def flat(module: torch.nn.Module) -> torch.Tensor:
        return torch.cat([p.detach().flatten() for p in module.parameters()])

    actor_moved, critic_moved, reported = [], [], []
    for _ in range(7):
        actor, critic, alpha = flat(agent.actor), flat(agent.critic), agent.log_alpha.item()
        metrics = agent.update(batch)
        actor_moved.append(not torch.equal(actor, flat(agent.actor)))
        assert actor_moved[-1] == (agent.log_alpha.item() != alpha)  # the temperature with the actor
        critic_moved.append(not torch.equal(critic, flat(agent.critic)))
        reported.append(metrics["actor_loss"])
    assert actor_moved == [True, False, False, True, False, False, True]
    assert all(critic_moved)
    assert reported[1] == reported[2] == reported[0] and reported[3] != reported[0]
    assert agent.updates == 7


def test_inconsistent_settings_are_refused() -> None:
    with pytest.raises(ConfigError, match=r"--sac.critic-subsample 3: must be in \[1, 2\]"):
        SACConfig(num_critics=2, critic_subsample=3).check()
    with pytest.raises(ConfigError, match="utd-ratio"):
        SACConfig(utd_ratio=0).check()
    with pytest.raises(ConfigError, match=r"--sac\.actor-every 0"):
        SACConfig(actor_every=0).check()
    with pytest.raises(ConfigError, match=r"--sac\.adam-beta1 1"):
        SACConfig(adam_beta1=1.0).check()


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_learner_runs_on_cuda() -> None:
    agent = SAC(4, 2, SACConfig(hidden=(32,), batch_size=8), torch.device("cuda"))
    dev = torch.device("cuda")
    x = torch.randn(8, 4, device=dev)
    zeros = torch.zeros(8, device=dev)
    out = agent.update(
        LearnerBatch.one_step(DeviceBatch(x, torch.zeros(8, 2, device=dev), zeros, x, zeros), 0.99)
    )
    assert math.isfinite(out["critic_loss"])
