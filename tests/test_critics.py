"""Critic and target options (issue 11): HL-Gauss classification, CrossQ's batch renormalization
without a target network, BRO's residual critic, n-step returns."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from robolearn.errors import ConfigError
from robolearn.rl.config import SACConfig
from robolearn.rl.replay import Batch, DeviceBatch, LearnerBatch, ReplayBuffer, take_n_step
from robolearn.rl.sac import SAC, EnsembleBatchRenorm, EnsembleLinear, HLGauss


@pytest.fixture(autouse=True)
def _one_thread() -> Any:
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def test_hl_gauss_targets_are_distributions_centred_on_the_value() -> None:
    hl = HLGauss(-10.0, 10.0, 51)
    values = torch.tensor([-9.0, -2.3, 0.0, 4.71, 9.0])
    probs = hl.target(values)
    torch.testing.assert_close(probs.sum(-1), torch.ones(5))
    torch.testing.assert_close(probs @ hl.centers, values, atol=0.05, rtol=0)
    # Logits equal to the target's log-probabilities read back as the value.
    torch.testing.assert_close(hl.value(probs.clamp_min(1e-12).log()), values, atol=0.05, rtol=0)
    # Beyond the range a value is clipped to the edge.
    assert hl.value(hl.target(torch.tensor([50.0])).clamp_min(1e-12).log()).item() > 9.5


def _fit(cfg: SACConfig, steps: int = 300) -> tuple[SAC, dict[str, float], dict[str, float], torch.Tensor]:
    torch.manual_seed(3)
    agent = SAC(4, 2, cfg, torch.device("cpu"))
    n = cfg.batch_size
    obs, act = torch.randn(n, 4), torch.rand(n, 2) * 2 - 1
    rew, term = obs[:, 0].clone(), torch.ones(n)  # terminal: Q(s, a) should become r(s)
    batch = LearnerBatch.one_step(DeviceBatch(obs, act, rew, obs, term), cfg.gamma)
    first = agent.update(batch)
    for _ in range(steps):
        last = agent.update(batch)
    with torch.no_grad():
        agent.critic.eval()
        error = (agent.q_values(agent.critic, obs, act) - rew).abs().mean()
        agent.critic.train()
    return agent, first, last, error


def test_hl_gauss_critic_fits_a_fixed_batch() -> None:
    cfg = SACConfig(hidden=(64, 64), batch_size=64, critic_loss="hl_gauss", value_range=(-5.0, 5.0))
    _, first, last, error = _fit(cfg)
    assert last["critic_loss"] < 0.7 * first["critic_loss"]
    assert error < 0.25, error


def test_batch_renorm_uses_batch_statistics_in_training_and_running_ones_in_evaluation() -> None:
    torch.manual_seed(0)
    norm = EnsembleBatchRenorm(2, 3, momentum=0.5, warmup=1)
    x = torch.randn(2, 64, 3) * 4 + 7
    y = norm(x)  # first call: plain batch normalization
    torch.testing.assert_close(y.mean(dim=1), torch.zeros(2, 3), atol=1e-5, rtol=0)
    torch.testing.assert_close(y.std(dim=1, unbiased=False), torch.ones(2, 3), atol=1e-3, rtol=0)
    torch.testing.assert_close(norm.running_mean, 0.5 * x.mean(dim=1, keepdim=True))
    # After the warm-up, renormalization: r and d pull towards the running statistics.
    y2 = norm(x)
    std = torch.sqrt(x.var(dim=1, unbiased=False, keepdim=True) + norm.eps)
    mean = x.mean(dim=1, keepdim=True)
    running_mean = 0.5 * mean  # before the second call's update
    running_var = 0.5 * torch.ones_like(std) + 0.5 * x.var(dim=1, unbiased=False, keepdim=True)
    running_std = torch.sqrt(running_var + norm.eps)
    r = (std / running_std).clamp(1 / norm.r_max, norm.r_max)
    d = ((mean - running_mean) / running_std).clamp(-norm.d_max, norm.d_max)
    torch.testing.assert_close(y2, (x - mean) / std * r + d)
    norm.eval()
    expected = (x - norm.running_mean) / torch.sqrt(norm.running_var + norm.eps)
    torch.testing.assert_close(norm(x), expected)


def test_crossq_critic_learns_without_a_target_network() -> None:
    cfg = SACConfig(hidden=(64, 64), batch_size=64, critic_norm="batch_renorm", target_network=False)
    torch.manual_seed(3)
    untouched = SAC(4, 2, cfg, torch.device("cpu")).target_critic.state_dict()
    agent, first, last, error = _fit(cfg)
    assert last["critic_loss"] < 0.2 * first["critic_loss"]
    assert error < 0.3, error
    for k, v in agent.target_critic.state_dict().items():  # never Polyak-updated
        torch.testing.assert_close(v, untouched[k])


def _bro_by_hand(agent: SAC, member: int, x: torch.Tensor) -> torch.Tensor:
    """Member ``member`` of a bro critic, layer by layer from its parameters (Nauman et al. 2024)."""
    p = dict(agent.critic.named_parameters())

    def dense(name: str, h: torch.Tensor) -> torch.Tensor:
        return h @ p[f"{name}.weight"][member] + p[f"{name}.bias"][member]

    def norm(name: str, h: torch.Tensor) -> torch.Tensor:
        h = torch.nn.functional.layer_norm(h, h.shape[-1:])
        return h * p[f"{name}.weight"][member] + p[f"{name}.bias"][member]

    h = torch.relu(norm("net.1", dense("net.0", x)))
    for block in (3, 4):
        inner = torch.relu(norm(f"net.{block}.body.1", dense(f"net.{block}.body.0", h)))
        h = h + norm(f"net.{block}.body.4", dense(f"net.{block}.body.3", inner))
    return dense("net.5", h).squeeze(-1)


def test_bro_critic_is_bronet_and_fits_a_fixed_batch() -> None:
    cfg = SACConfig(hidden=(64, 64), critic_hidden=(32,), batch_size=64, critic_arch="bro", critic_blocks=2)
    torch.manual_seed(0)
    agent = SAC(4, 2, cfg, torch.device("cpu"))
    with torch.no_grad():  # the skip connections perturbed: a net without them would not notice
        for p in agent.critic.parameters():
            p.add_(0.1 * torch.randn_like(p))
    obs, act = torch.randn(16, 4), torch.rand(16, 2) * 2 - 1
    q = agent.critic(obs, act)
    assert q.shape == (2, 16)
    for member in range(2):
        torch.testing.assert_close(q[member], _bro_by_hand(agent, member, torch.cat([obs, act], -1)))
    # BRO's initialization: orthogonal hidden weights (W^T W = 2 I at gain sqrt(2)), zero biases.
    fresh = SAC(4, 2, cfg, torch.device("cpu")).critic.net
    first = fresh[3].body[0]
    assert isinstance(first, EnsembleLinear)
    torch.testing.assert_close(first.weight[1].T @ first.weight[1], 2 * torch.eye(32), atol=1e-4, rtol=0)
    torch.testing.assert_close(fresh[0].bias, torch.zeros(2, 1, 32))
    # The actor keeps its own widths.
    assert agent.actor.mean.in_features == 64
    _, first_metrics, last, error = _fit(cfg)
    assert last["critic_loss"] < 0.2 * first_metrics["critic_loss"]
    assert error < 0.2, error


def _chain_buffer() -> ReplayBuffer:
    """Two worlds side by side (stride 2), rewards 1, 2, 3, ... per world; world 1 ends at its step 2."""
    buf = ReplayBuffer(100, {"x": (1,)}, 1)
    for t in range(5):
        obs = np.array([[t], [100 + t]], np.float32)
        nxt = obs + 1
        term = np.array([0.0, 1.0 if t == 1 else 0.0], np.float32)
        if t == 2:  # world 1 restarted after its terminal step: its obs is no longer the previous next
            obs[1] = 500
            nxt[1] = 501
        buf.add(
            Batch(
                {"x": obs},
                np.zeros((2, 1), np.float32),
                np.array([t + 1, 10 * (t + 1)], np.float32),
                {"x": nxt},
                term,
            )
        )
    return buf


def test_n_step_returns_sum_discounted_rewards_within_an_episode() -> None:
    buf = _chain_buffer()
    g = 0.5
    batch, discount = take_n_step(buf, np.array([0, 1, 4, 8]), 3, g, stride=2)
    # World 0 from t=0: 1 + g 2 + g^2 3, bootstrap from t=2's next observation with g^3.
    assert batch.reward[0] == pytest.approx(1 + g * 2 + g * g * 3)
    assert discount[0] == pytest.approx(g**3) and batch.next_obs["x"][0, 0] == 3
    # World 1 from t=0: its episode terminates at t=1, so two rewards and the terminal flag.
    assert batch.reward[1] == pytest.approx(10 + g * 20)
    assert batch.terminated[1] == 1.0 and discount[1] == pytest.approx(g**2)
    # World 0 from t=2: only t=2, 3, 4 exist.
    assert batch.reward[2] == pytest.approx(3 + g * 4 + g * g * 5)
    # World 0 from t=4: the newest data, one step.
    assert batch.reward[3] == pytest.approx(5) and discount[3] == pytest.approx(g)
    one, d1 = take_n_step(buf, np.array([0]), 1, g, stride=2)
    assert one.reward[0] == 1 and d1[0] == pytest.approx(g)


def test_the_critic_target_bootstraps_with_the_discount_it_is_given() -> None:
    torch.manual_seed(0)
    agent = SAC(3, 1, SACConfig(hidden=(16,), batch_size=8, backup_entropy=False), torch.device("cpu"))
    obs, act, rew, term = torch.randn(8, 3), torch.rand(8, 1) * 2 - 1, torch.randn(8), torch.zeros(8)
    alpha = torch.tensor(1.0)
    with torch.no_grad():
        q = agent.critic(obs, act)
        no_bootstrap, _ = agent.critic_loss(LearnerBatch(obs, act, rew, obs, term, torch.zeros(8)), alpha)
        torch.manual_seed(1)
        a_next, _ = agent.actor.sample(obs)
        v_next = agent.target_critic(obs, a_next).min(dim=0).values
        torch.manual_seed(1)
        halved, _ = agent.critic_loss(LearnerBatch(obs, act, rew, obs, term, torch.full((8,), 0.25)), alpha)
    torch.testing.assert_close(no_bootstrap, (q - rew).square().mean(dim=1).sum())
    torch.testing.assert_close(halved, (q - (rew + 0.25 * v_next)).square().mean(dim=1).sum())


def test_critic_options_are_checked() -> None:
    with pytest.raises(ConfigError, match=r"--sac\.n-step 0"):
        SACConfig(n_step=0).check()
    with pytest.raises(ConfigError, match=r"--sac\.value-range"):
        SACConfig(value_range=(1.0, -1.0)).check()
    with pytest.raises(ConfigError, match=r"--sac\.hl-gauss-bins 1"):
        SACConfig(hl_gauss_bins=1).check()
    with pytest.raises(ConfigError, match=r"bro: its blocks share one width, got widths \[256, 128\]"):
        SACConfig(critic_arch="bro", hidden=(256, 128)).check()
    with pytest.raises(ConfigError, match=r"bro normalizes with LayerNorm, not batch_renorm"):
        SACConfig(critic_arch="bro", critic_norm="batch_renorm").check()
    with pytest.raises(ConfigError, match=r"not none"):
        SACConfig(critic_arch="bro", layer_norm=False).check()
    with pytest.raises(ConfigError, match=r"--sac\.critic-blocks 0"):
        SACConfig(critic_arch="bro", critic_blocks=0).check()
    SACConfig(critic_arch="bro", hidden=(256, 128), critic_hidden=(512,)).check()
