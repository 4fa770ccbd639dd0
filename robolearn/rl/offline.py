"""Offline pretraining from datasets, before online fine-tuning in the same run.

- Cal-QL: Nakamoto et al., "Cal-QL: Calibrated Offline RL Pre-Training for Efficient Online
  Fine-Tuning" (NeurIPS 2023). Conservative Q-learning (CQL(H), Kumar et al., NeurIPS 2020) whose
  push-down on the policy's actions stops at the Monte-Carlo return of the data: the policy's
  Q-values inside the log-sum-exp are lower-bounded by the return-to-go, so the critic stays
  calibrated and fine-tuning does not begin with an unlearning dip.
- IQL: Kostrikov, Nair and Levine, "Offline Reinforcement Learning with Implicit Q-Learning"
  (ICLR 2022). A state-value network fit by expectile regression to the target Q of dataset
  actions, Q fit to r + gamma V(s'), and the policy extracted by advantage-weighted regression.

Both train the :class:`~robolearn.rl.sac.SAC` agent's own actor and critics, so online fine-tuning
(WSRL's warm-up, Zhou et al., "Efficient Online Reinforcement Learning Fine-Tuning Need Not Retain
Offline Data", ICLR 2025; or RLPD's symmetric sampling) continues from them with ordinary SAC.
"""

from __future__ import annotations

import math
from typing import Protocol

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from robolearn.policy.network import Actor
from robolearn.rl.config import OfflineConfig
from robolearn.rl.replay import LearnerBatch
from robolearn.rl.sac import SAC


class OfflineAlgorithm(Protocol):
    """One gradient step from a batch of dataset transitions with their Monte-Carlo returns (B,)."""

    def update(self, t: LearnerBatch, mc_return: torch.Tensor) -> dict[str, float]: ...


def returns_to_go(
    reward: npt.NDArray[np.floating], episode_end: npt.NDArray[np.bool_], gamma: float
) -> npt.NDArray[np.float32]:
    """Discounted sum of rewards from each transition to the end of its episode.

    ``episode_end`` marks each episode's last transition; transitions are in time order per episode.
    An episode cut off by a time limit counts only the rewards it recorded (a lower bound, as Cal-QL's
    reference value should be).
    """
    out = np.zeros(len(reward), np.float64)
    running = 0.0
    for i in range(len(reward) - 1, -1, -1):
        if episode_end[i]:
            running = 0.0
        running = float(reward[i]) + gamma * running
        out[i] = running
    return out.astype(np.float32)


def awr_log_likelihood(actor: Actor, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
    """log N(a; tanh(mean), std) up to a constant: IQL's policy, a Gaussian around the squashed mean.

    Kostrikov et al.'s code fits this form rather than the tanh-squashed Gaussian's likelihood, whose
    atanh diverges at the action bounds where demonstrations often sit; measured here on 8 scripted
    panda_reach episodes, the squashed form plateaued at a mean squared action error of 0.07.
    """
    mean, log_std = actor(obs)
    return (-0.5 * ((action - torch.tanh(mean)) / log_std.exp()) ** 2 - log_std).sum(-1)


class CalQL:
    """Cal-QL on the SAC agent's networks: SAC's TD loss plus the calibrated CQL regularizer."""

    def __init__(self, agent: SAC, cfg: OfflineConfig) -> None:
        self.agent = agent
        self.cfg = cfg

    def _regularizer(self, obs: torch.Tensor, act: torch.Tensor, mc_return: torch.Tensor) -> torch.Tensor:
        """CQL(H): logsumexp of Q over random and policy actions (importance-weighted) minus Q(data)."""
        agent, k = self.agent, self.cfg.cql_samples
        b, a_dim = act.shape
        rep = obs.unsqueeze(0).expand(k, -1, -1).reshape(k * b, -1)
        with torch.no_grad():
            pi, logp = agent.actor.sample(rep)
        uniform = torch.rand(k * b, a_dim, device=obs.device) * 2.0 - 1.0
        # One critic forward for the random, the policy's and the data's actions.
        q_all = agent.q_values(agent.critic, torch.cat([rep, rep, obs]), torch.cat([uniform, pi, act]))
        e = q_all.shape[0]
        q_rand = q_all[:, : k * b].reshape(e, k, b)
        q_pi = q_all[:, k * b : 2 * k * b].reshape(e, k, b)
        q_data = q_all[:, 2 * k * b :]
        # Cal-QL's one change to CQL: the policy's values are pushed down no further than the
        # Monte-Carlo return of the behaviour policy (Nakamoto et al., eq. 5).
        q_pi = torch.maximum(q_pi, mc_return.view(1, 1, b))
        log_uniform = a_dim * math.log(0.5)  # the uniform density on [-1, 1]^A
        cat = torch.cat([q_rand - log_uniform, q_pi - logp.view(1, k, b)], dim=1)
        lse = torch.logsumexp(cat, dim=1) - math.log(2 * k)
        return self.cfg.cql_alpha * (lse - q_data).mean(dim=1).sum()

    def update(self, t: LearnerBatch, mc_return: torch.Tensor) -> dict[str, float]:
        agent = self.agent
        regularizer: list[torch.Tensor] = []

        def extra(o: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
            regularizer.append(self._regularizer(o, a, mc_return))
            return regularizer[0]

        total = agent.critic_step(t, extra=extra)
        actor_loss, alpha, entropy = agent.scheduled_actor_step(t.obs)
        agent.updates += 1
        reg = regularizer[0].detach()
        metrics = agent.metrics(total - reg, actor_loss, alpha, entropy)  # critic_loss: the TD part
        metrics["cql_regularizer"] = float(reg)
        return metrics


class IQL(nn.Module):
    """IQL on the SAC agent's actor and critics, with a state-value network of its own."""

    def __init__(self, agent: SAC, obs_dim: int, cfg: OfflineConfig) -> None:
        super().__init__()
        self.agent = agent
        self.cfg = cfg
        layers: list[nn.Module] = []
        width = obs_dim
        for h in agent.cfg.hidden:
            layers += [nn.Linear(width, h), nn.LayerNorm(h), nn.ReLU()]
            width = h
        layers.append(nn.Linear(width, 1))
        self.value = nn.Sequential(*layers).to(agent.device)
        fused = True if agent.device.type in ("cpu", "cuda") else None
        self.value_opt = torch.optim.Adam(self.value.parameters(), lr=agent.cfg.critic_lr, fused=fused)

    def update(self, t: LearnerBatch, mc_return: torch.Tensor) -> dict[str, float]:
        agent, cfg = self.agent, self.cfg
        obs, act = t.obs, t.action
        with torch.no_grad():
            q_target = agent.q_values(agent.target_critic, obs, act).min(dim=0).values
        # Expectile regression of V(s) towards Q(s, a) of the data: an upper expectile, not a max
        # over actions the data never took.
        v = self.value(obs).squeeze(-1)
        diff = q_target - v
        weight = torch.where(diff > 0, cfg.expectile, 1.0 - cfg.expectile)
        value_loss = (weight * diff.square()).mean()
        self.value_opt.zero_grad(set_to_none=True)
        value_loss.backward()
        self.value_opt.step()

        with torch.no_grad():
            target = t.reward + t.discount * (1.0 - t.terminated) * self.value(t.next_obs).squeeze(-1)
        out = agent.critic(obs, act)
        critic_loss = agent._td_loss(out, target)
        agent.critic_opt.zero_grad(set_to_none=True)
        critic_loss.backward()
        agent.critic_opt.step()
        with torch.no_grad():
            torch._foreach_lerp_(agent._target_params, agent._critic_params, agent.cfg.tau)

        # Advantage-weighted regression; the weights are clipped as in the paper's code (at 100).
        with torch.no_grad():
            adv = q_target - v.detach()
            w = torch.exp(cfg.awr_temperature * adv).clamp(max=100.0)
        actor_loss = -(w * awr_log_likelihood(agent.actor, obs, act)).mean()
        # The temperature follows the actor's entropy as in SAC, so online fine-tuning starts from a
        # temperature that fits the pretrained policy instead of SAC's initial one.
        _, logp = agent.actor.sample(obs)
        alpha_loss = -(agent.log_alpha * (logp.detach() + agent.target_entropy)).mean()
        agent.actor_opt.zero_grad(set_to_none=True)
        agent.alpha_opt.zero_grad(set_to_none=True)
        (actor_loss + alpha_loss).backward(inputs=[*agent._actor_params, agent.log_alpha])
        agent.actor_opt.step()
        agent.alpha_opt.step()
        agent.updates += 1
        metrics = agent.metrics(
            critic_loss.detach(), actor_loss.detach(), agent.log_alpha.detach().exp(), -logp.detach().mean()
        )
        metrics["value_loss"] = float(value_loss.detach())
        return metrics


def make_offline_algorithm(algo: str, agent: SAC, obs_dim: int, cfg: OfflineConfig) -> OfflineAlgorithm:
    """The pretraining algorithm ``algo`` names (``calql`` or ``iql``), on ``agent``'s networks."""
    if algo == "iql":
        return IQL(agent, obs_dim, cfg)
    return CalQL(agent, cfg)
