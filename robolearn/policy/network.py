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


GRIPPER_ACTIONS = ("close", "stay", "open")
"""The discrete gripper's actions, in the order of its Q-values."""
CLOSE, STAY, OPEN = range(3)


class GripperHead(nn.Module):
    """HIL-SERL's discrete gripper (Luo et al., "Precise and Dexterous Robotic Manipulation via
    Human-in-the-Loop Reinforcement Learning", 2024): Q-values of close, stay and open, acted on
    greedily (epsilon-greedy while exploring) beside the continuous actor.

    The task's gripper command is absolute (an opening), so ``stay`` resolves to the state the
    gripper is measured in: the open command where the measured opening is above ``open_above``,
    the closed one otherwise. That keeps the policy a function of its observation alone, so an
    exported graph needs no memory of its last command. Commands are in the actor's [-1, 1] units.
    """

    spec: torch.Tensor

    def __init__(
        self,
        obs_dim: int,
        hidden: tuple[int, ...],
        *,
        action_index: int,
        obs_index: int,
        open_above: float,
        closed: float,
        opened: float,
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        width = obs_dim
        for h in hidden:  # LayerNorm as in the critics (RLPD; HIL-SERL's grasp critic is one of them)
            layers += [nn.Linear(width, h), nn.LayerNorm(h), nn.ReLU()]
            width = h
        layers.append(nn.Linear(width, len(GRIPPER_ACTIONS)))
        self.q = nn.Sequential(*layers)
        self.action_index, self.obs_index = action_index, obs_index
        self.open_above, self.closed, self.opened = open_above, closed, opened
        # Saved with the weights, so a checkpoint or published weights rebuild the head alone.
        spec = [action_index, obs_index, open_above, closed, opened]
        self.register_buffer("spec", torch.tensor(spec, dtype=torch.float64))

    @classmethod
    def from_spec(cls, obs_dim: int, hidden: tuple[int, ...], spec: npt.ArrayLike) -> GripperHead:
        """The head a ``spec`` buffer describes; a spec no observation or action fits is a ValueError."""
        values = np.asarray(spec, np.float64)
        if values.shape != (5,) or not np.all(np.isfinite(values)):
            raise ValueError(f"gripper spec must be 5 finite numbers, got {values.tolist()}")
        action_index, obs_index = int(values[0]), int(values[1])
        if action_index != values[0] or action_index < 0:
            raise ValueError(f"gripper spec names action component {values[0]}")
        if obs_index != values[1] or not 0 <= obs_index < obs_dim:
            raise ValueError(f"gripper spec indexes observation {values[1]} of {obs_dim}")
        if not -1.0 <= values[3] <= 1.0 or not -1.0 <= values[4] <= 1.0:
            raise ValueError(f"gripper commands {values[3]}, {values[4]} are outside [-1, 1]")
        return cls(
            obs_dim,
            hidden,
            action_index=action_index,
            obs_index=obs_index,
            open_above=float(values[2]),
            closed=float(values[3]),
            opened=float(values[4]),
        )

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Q-values (n, 3) of close, stay, open for normalized observations."""
        return self.q(obs)

    def commands(self, raw_obs: torch.Tensor) -> torch.Tensor:
        """(n, 3): the command each action sends, from the measured gripper in raw observations."""
        measured = raw_obs[:, self.obs_index : self.obs_index + 1]
        is_open = (measured > self.open_above).to(raw_obs.dtype)
        stay = self.closed + (self.opened - self.closed) * is_open
        # The constant commands as columns built from ``stay``: arithmetic an exported graph allows.
        return torch.cat([stay * 0.0 + self.closed, stay, stay * 0.0 + self.opened], dim=1)

    def act(
        self, obs: torch.Tensor, raw_obs: torch.Tensor, explore: bool = False, epsilon: float = 0.0
    ) -> torch.Tensor:
        """The command (n, 1): the greedy action's, or with ``explore`` a random action's with
        probability ``epsilon``."""
        choice = self(obs).argmax(dim=-1, keepdim=True)
        if explore and epsilon > 0.0:
            random = torch.randint_like(choice, len(GRIPPER_ACTIONS))
            choice = torch.where(torch.rand(choice.shape, device=obs.device) < epsilon, random, choice)
        return self.commands(raw_obs).gather(1, choice)


class Actor(nn.Module):
    """Tanh-squashed Gaussian policy over actions in [-1, 1].

    With a :class:`GripperHead` (``gripper``) the Gaussian covers the other action components and
    the head commands the gripper; the head is saved and published with the actor, being part of
    the policy, but trained as a critic (:mod:`robolearn.rl.gripper`).
    """

    gripper: GripperHead | None

    def __init__(self, obs_dim: int, action_dim: int, hidden: tuple[int, ...]) -> None:
        super().__init__()
        self.register_module("gripper", None)
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
        self.gripper_epsilon = 0.0
        """With a gripper head: chance of a random gripper action while exploring (training only)."""
        self.register_buffer("obs_mean", torch.as_tensor(np.asarray(obs_mean), dtype=torch.float32))
        self.register_buffer("obs_std", torch.as_tensor(np.asarray(obs_std), dtype=torch.float32))
        self.register_buffer("action_low", torch.as_tensor(np.asarray(action_low), dtype=torch.float32))
        self.register_buffer("action_high", torch.as_tensor(np.asarray(action_high), dtype=torch.float32))

    def unit_action(self, flat_obs: torch.Tensor, explore: bool = False) -> torch.Tensor:
        """Action in [-1, 1] for (n, dim) raw flattened observations."""
        x = torch.clamp((flat_obs - self.obs_mean) / self.obs_std, -self.obs_clip, self.obs_clip)
        unit = self.actor.sample(x)[0] if explore else self.actor.act(x)
        head = self.actor.gripper
        if head is None:
            return unit
        grip = head.act(x, flat_obs, explore, self.gripper_epsilon)
        i = head.action_index
        return torch.cat([unit[:, :i], grip.to(unit.dtype), unit[:, i:]], dim=1)

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
    """Rebuild a policy from the weights a learner publishes (or a checkpoint holds); weights with a
    gripper head (``actor.gripper.*``) give a policy whose gripper comes from it. A head that does
    not fit the observation or action is a ValueError."""
    low = np.asarray(action_low, np.float32)
    spec = weights.get("actor.gripper.spec")
    actor = Actor(layout.dim, len(low) - (spec is not None), hidden)
    if spec is not None:
        actor.gripper = GripperHead.from_spec(layout.dim, hidden, spec)
        if actor.gripper.action_index >= len(low):
            raise ValueError(f"gripper head commands action {actor.gripper.action_index} of {len(low)}")
    actor.load_state_dict(
        {k.removeprefix("actor."): torch.as_tensor(v) for k, v in weights.items() if k.startswith("actor.")}
    )
    return PolicyNetwork(layout, actor, weights["obs_mean"], weights["obs_std"], low, action_high)
