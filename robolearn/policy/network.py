"""A trained policy as one module: observation standardization, actor, action scaling.

This is what evaluation runs and what export writes; it maps a dict observation in physical
units to an action in physical units and needs neither the learner nor a simulator.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import numpy.typing as npt
import torch
import torch.nn.functional as F
from torch import nn

from robolearn.policy.normalization import ObsLayout

LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0


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


class PolicyNetwork(nn.Module):
    """Deterministic (or sampling) policy over flattened observations."""

    obs_mean: torch.Tensor
    obs_std: torch.Tensor
    action_low: torch.Tensor
    action_high: torch.Tensor

    def __init__(
        self,
        layout: ObsLayout,
        actor: Actor,
        obs_mean: npt.ArrayLike,
        obs_std: npt.ArrayLike,
        action_low: npt.ArrayLike,
        action_high: npt.ArrayLike,
        obs_clip: float = 10.0,
    ) -> None:
        super().__init__()
        self.layout = layout
        self.actor = actor
        self.obs_clip = obs_clip
        self.register_buffer("obs_mean", torch.as_tensor(np.asarray(obs_mean), dtype=torch.float32))
        self.register_buffer("obs_std", torch.as_tensor(np.asarray(obs_std), dtype=torch.float32))
        self.register_buffer("action_low", torch.as_tensor(np.asarray(action_low), dtype=torch.float32))
        self.register_buffer("action_high", torch.as_tensor(np.asarray(action_high), dtype=torch.float32))

    def unit_action(self, flat_obs: torch.Tensor, explore: bool = False) -> torch.Tensor:
        """Action in [-1, 1] for (n, dim) raw flattened observations."""
        x = torch.clamp((flat_obs - self.obs_mean) / self.obs_std, -self.obs_clip, self.obs_clip)
        return self.actor.sample(x)[0] if explore else self.actor.act(x)

    def to_physical(self, unit: torch.Tensor) -> torch.Tensor:
        """Map actions in [-1, 1] to the task's physical range."""
        return self.action_low + (unit + 1.0) * 0.5 * (self.action_high - self.action_low)

    def forward(self, flat_obs: torch.Tensor) -> torch.Tensor:
        """Physical action for (n, dim) raw flattened observations (deterministic)."""
        return self.to_physical(self.unit_action(flat_obs))

    @torch.no_grad()
    def act(
        self, obs: Mapping[str, npt.NDArray[np.float32]], explore: bool = False
    ) -> npt.NDArray[np.float64]:
        """Physical actions (n, A) for a dict observation with a leading batch axis."""
        flat = torch.as_tensor(self.layout.flatten(obs), device=self.obs_mean.device)
        return self.to_physical(self.unit_action(flat, explore)).cpu().numpy().astype(np.float64)


def policy_from_weights(
    weights: Mapping[str, npt.NDArray[np.float32]],
    layout: ObsLayout,
    action_low: npt.ArrayLike,
    action_high: npt.ArrayLike,
    hidden: tuple[int, ...],
) -> PolicyNetwork:
    """Rebuild a policy from the weights a learner publishes (or a checkpoint holds)."""
    low = np.asarray(action_low, np.float32)
    actor = Actor(layout.dim, len(low), hidden)
    actor.load_state_dict(
        {k.removeprefix("actor."): torch.as_tensor(v) for k, v in weights.items() if k.startswith("actor.")}
    )
    return PolicyNetwork(layout, actor, weights["obs_mean"], weights["obs_std"], low, action_high)
