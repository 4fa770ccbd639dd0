"""Soft actor-critic with the RLPD recipe, in PyTorch.

Haarnoja et al., "Soft Actor-Critic Algorithms and Applications" (2018): tanh-Gaussian actor,
automatic temperature. Ball et al., "Efficient Online Reinforcement Learning with Offline Data"
(RLPD, ICML 2023), the recipe SERL and HIL-SERL train with: LayerNorm in the critics, a critic
ensemble whose target takes the minimum over a random subset (REDQ, Chen et al. 2021), a high
update-to-data ratio and symmetric sampling of demonstrations (see :mod:`robolearn.rl.replay`).

The ensemble is one set of stacked weights: every layer of every critic is one batched matmul.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from robolearn.policy.network import Actor
from robolearn.rl.config import SACConfig


class EnsembleLinear(nn.Module):
    """``num`` independent linear layers applied as one batched matmul: (E, B, in) -> (E, B, out)."""

    def __init__(self, num: int, in_features: int, out_features: int) -> None:
        super().__init__()
        bound = 1.0 / math.sqrt(in_features)  # nn.Linear's default initialization, per member
        self.weight = nn.Parameter(torch.empty(num, in_features, out_features).uniform_(-bound, bound))
        self.bias = nn.Parameter(torch.empty(num, 1, out_features).uniform_(-bound, bound))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.baddbmm(self.bias, x, self.weight)


class EnsembleLayerNorm(nn.Module):
    """LayerNorm with a separate affine transform per ensemble member."""

    def __init__(self, num: int, features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(num, 1, features))
        self.bias = nn.Parameter(torch.zeros(num, 1, features))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, x.shape[-1:]) * self.weight + self.bias


class CriticEnsemble(nn.Module):
    """N Q-functions Q(s, a) with stacked weights; returns (N, B)."""

    def __init__(
        self, num: int, obs_dim: int, action_dim: int, hidden: tuple[int, ...], layer_norm: bool
    ) -> None:
        super().__init__()
        self.num = num
        layers: list[nn.Module] = []
        width = obs_dim + action_dim
        for h in hidden:
            layers.append(EnsembleLinear(num, width, h))
            if layer_norm:
                layers.append(EnsembleLayerNorm(num, h))
            layers.append(nn.ReLU())
            width = h
        layers.append(EnsembleLinear(num, width, 1))
        self.net = nn.Sequential(*layers)

    def forward(self, obs: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        x = torch.cat([obs, action], dim=-1).unsqueeze(0).expand(self.num, -1, -1)
        return self.net(x).squeeze(-1)


class SAC(nn.Module):
    """Actor, critic ensemble, target critics, temperature and their optimizers."""

    def __init__(self, obs_dim: int, action_dim: int, cfg: SACConfig, device: torch.device) -> None:
        super().__init__()
        cfg.check()
        self.cfg = cfg
        self.device = device
        self.actor = Actor(obs_dim, action_dim, cfg.hidden)
        self.critic = CriticEnsemble(cfg.num_critics, obs_dim, action_dim, cfg.hidden, cfg.layer_norm)
        self.target_critic = CriticEnsemble(cfg.num_critics, obs_dim, action_dim, cfg.hidden, cfg.layer_norm)
        self.target_critic.load_state_dict(self.critic.state_dict())
        self.target_critic.requires_grad_(False)
        self.log_alpha = nn.Parameter(torch.tensor(math.log(cfg.init_temperature)))
        scale = 1.0 if cfg.target_entropy == "action_dim" else 0.5
        self.target_entropy = -scale * action_dim
        self.to(device)
        # Parameter lists fetched once: the update loops over them every step.
        self._actor_params: list[torch.Tensor] = list(self.actor.parameters())
        self._critic_params: list[torch.Tensor] = list(self.critic.parameters())
        self._target_params: list[torch.Tensor] = list(self.target_critic.parameters())
        # Fused Adam: one kernel per step instead of several per parameter; the same algorithm, rounded
        # slightly differently. Fused kernels exist for CPU and CUDA.
        fused = True if device.type in ("cpu", "cuda") else None
        self.actor_opt = torch.optim.Adam(self._actor_params, lr=cfg.actor_lr, fused=fused)
        self.critic_opt = torch.optim.Adam(self._critic_params, lr=cfg.critic_lr, fused=fused)
        self.alpha_opt = torch.optim.Adam([self.log_alpha], lr=cfg.temperature_lr, fused=fused)
        self.updates = 0

    def optimizer_state(self) -> dict[str, dict[str, object]]:
        return {
            "actor": self.actor_opt.state_dict(),
            "critic": self.critic_opt.state_dict(),
            "alpha": self.alpha_opt.state_dict(),
        }

    def load_optimizer_state(self, state: dict[str, dict[str, object]]) -> None:
        self.actor_opt.load_state_dict(state["actor"])
        self.critic_opt.load_state_dict(state["critic"])
        self.alpha_opt.load_state_dict(state["alpha"])

    def _critic_step(
        self,
        obs: torch.Tensor,
        act: torch.Tensor,
        rew: torch.Tensor,
        next_obs: torch.Tensor,
        term: torch.Tensor,
    ) -> torch.Tensor:
        cfg = self.cfg
        alpha = self.log_alpha.exp().detach()
        with torch.no_grad():
            next_act, next_logp = self.actor.sample(next_obs)
            q_next = self.target_critic(next_obs, next_act)
            if cfg.critic_subsample is not None and cfg.critic_subsample < cfg.num_critics:
                pick = torch.randperm(cfg.num_critics, device=obs.device)[: cfg.critic_subsample]
                q_next = q_next[pick]
            q_next = q_next.min(dim=0).values
            if cfg.backup_entropy:
                q_next = q_next - alpha * next_logp
            target = rew + cfg.gamma * (1.0 - term) * q_next
        q = self.critic(obs, act)
        loss = F.mse_loss(q, target.unsqueeze(0).expand_as(q), reduction="none").mean(dim=1).sum()
        self.critic_opt.zero_grad(set_to_none=True)
        loss.backward()
        self.critic_opt.step()
        with torch.no_grad():
            torch._foreach_lerp_(self._target_params, self._critic_params, cfg.tau)
        return loss.detach()

    def _actor_step(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        alpha = self.log_alpha.exp()
        act, logp = self.actor.sample(obs)
        q = self.critic(obs, act).mean(dim=0)
        actor_loss = (alpha.detach() * logp - q).mean()
        alpha_loss = -(self.log_alpha * (logp.detach() + self.target_entropy)).mean()
        self.actor_opt.zero_grad(set_to_none=True)
        self.alpha_opt.zero_grad(set_to_none=True)
        # One backward pass for both losses, which share no parameters (the actor's sees the temperature
        # detached), into the actor and the temperature only: autograd skips the critics' weight gradients.
        (actor_loss + alpha_loss).backward(inputs=[*self._actor_params, self.log_alpha])
        self.actor_opt.step()
        self.alpha_opt.step()
        return actor_loss.detach(), alpha.detach(), -logp.detach().mean()

    def update(
        self,
        obs: torch.Tensor,
        act: torch.Tensor,
        rew: torch.Tensor,
        next_obs: torch.Tensor,
        term: torch.Tensor,
    ) -> dict[str, float]:
        """``utd_ratio`` critic steps on consecutive slices of the batch, then one actor step.

        The tensors hold ``utd_ratio * batch_size`` transitions, already normalized.
        """
        b = self.cfg.batch_size
        critic_losses = []
        for k in range(self.cfg.utd_ratio):
            s = slice(k * b, (k + 1) * b)
            critic_losses.append(self._critic_step(obs[s], act[s], rew[s], next_obs[s], term[s]))
        actor_loss, alpha, entropy = self._actor_step(obs[-b:])
        self.updates += self.cfg.utd_ratio
        # One device-to-host copy for all metrics (one synchronization on a GPU, not four).
        metrics = torch.stack([torch.stack(critic_losses).mean(), actor_loss, alpha, entropy]).tolist()
        return dict(zip(("critic_loss", "actor_loss", "temperature", "entropy"), metrics, strict=True))
