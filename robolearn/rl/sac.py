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
from dataclasses import dataclass
from typing import Literal

import torch
import torch.nn.functional as F
from torch import nn

LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0


@dataclass(frozen=True)
class SACConfig:
    """Learner hyperparameters; defaults follow SERL and RLPD."""

    hidden: tuple[int, ...] = (256, 256)
    """Hidden layer widths of actor and critics."""
    batch_size: int = 256
    """Transitions per gradient step."""
    actor_lr: float = 3e-4
    """Actor learning rate."""
    critic_lr: float = 3e-4
    """Critic learning rate."""
    temperature_lr: float = 3e-4
    """Learning rate of the entropy temperature."""
    gamma: float = 0.99
    """Discount."""
    tau: float = 0.005
    """Polyak rate of the target critics."""
    num_critics: int = 2
    """Critic ensemble size N (RLPD uses 10)."""
    critic_subsample: int | None = None
    """Size M of the random subset whose minimum forms the target (REDQ); None takes all N."""
    layer_norm: bool = True
    """LayerNorm after every hidden layer of the critics (RLPD)."""
    utd_ratio: int = 1
    """Critic updates per transition collected (update-to-data ratio)."""
    init_temperature: float = 1.0
    """Initial entropy temperature."""
    target_entropy: Literal["action_dim", "half_action_dim"] = "action_dim"
    """Target entropy: -|A| (SAC), or -|A|/2 (RLPD's option)."""
    backup_entropy: bool = True
    """Include the entropy term in the critic's target (RLPD turns it off)."""
    demo_fraction: float = 0.5
    """Share of every batch drawn from the demonstration buffer (RLPD's symmetric sampling)."""

    def check(self) -> None:
        """Refuse inconsistent settings with a message naming them."""
        if self.num_critics < 1:
            raise ValueError(f"num_critics must be at least 1, got {self.num_critics}")
        if self.critic_subsample is not None and not 1 <= self.critic_subsample <= self.num_critics:
            raise ValueError(
                f"critic_subsample must be between 1 and num_critics={self.num_critics}, "
                f"got {self.critic_subsample}"
            )
        if self.utd_ratio < 1:
            raise ValueError(f"utd_ratio must be at least 1, got {self.utd_ratio}")
        if not 0.0 <= self.demo_fraction < 1.0:
            raise ValueError(f"demo_fraction must be in [0, 1), got {self.demo_fraction}")


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


class Actor(nn.Module):
    """Tanh-squashed Gaussian policy over actions in [-1, 1]."""

    def __init__(self, obs_dim: int, action_dim: int, hidden: tuple[int, ...]) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        width = obs_dim
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        self.trunk = nn.Sequential(*layers)
        self.mean = nn.Linear(width, action_dim)
        self.log_std = nn.Linear(width, action_dim)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.trunk(obs)
        # Squash log-std smoothly into its range rather than clipping (no dead gradients).
        log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (torch.tanh(self.log_std(h)) + 1.0)
        return self.mean(h), log_std

    def sample(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Reparameterized action and its log-probability (with the tanh correction)."""
        mean, log_std = self(obs)
        std = log_std.exp()
        u = mean + std * torch.randn_like(mean)
        log_prob = (-0.5 * ((u - mean) / std) ** 2 - log_std - 0.5 * math.log(2 * math.pi)).sum(-1)
        # log |d tanh(u)/du| = 2 (log 2 - u - softplus(-2u)), the numerically stable form.
        log_prob = log_prob - (2.0 * (math.log(2.0) - u - F.softplus(-2.0 * u))).sum(-1)
        return torch.tanh(u), log_prob

    def act(self, obs: torch.Tensor) -> torch.Tensor:
        """The deterministic action (tanh of the mean), for evaluation and deployment."""
        return torch.tanh(self(obs)[0])


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
