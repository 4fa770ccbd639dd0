"""A policy that acts from cameras and state terms: observation encoder, actor, action scaling.

The pixel counterpart of :class:`~robolearn.policy.network.PolicyNetwork` (issue 13): its input is
one tensor per observation key in :attr:`PixelPolicy.keys` order, camera frames as the uint8
(B, H, W, 3) bytes a camera driver delivers, so preprocessing is inside what export writes.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from robolearn.policy.encoders import ObservationEncoder
from robolearn.policy.network import Actor


class PixelPolicy(nn.Module):
    """Deterministic (or sampling) policy over images and state terms."""

    action_low: torch.Tensor
    action_high: torch.Tensor

    def __init__(
        self, encoder: ObservationEncoder, actor: Actor, action_low: npt.ArrayLike, action_high: npt.ArrayLike
    ) -> None:
        super().__init__()
        self.encoder = encoder
        self.actor = actor
        self.keys = list(encoder.keys)
        self.register_buffer("action_low", torch.as_tensor(np.asarray(action_low), dtype=torch.float32))
        self.register_buffer("action_high", torch.as_tensor(np.asarray(action_high), dtype=torch.float32))

    def to_physical(self, unit: torch.Tensor) -> torch.Tensor:
        """Map actions in [-1, 1] to the task's physical range."""
        return self.action_low + (unit + 1.0) * 0.5 * (self.action_high - self.action_low)

    def forward(self, inputs: list[torch.Tensor]) -> torch.Tensor:
        """Physical action (B, A) from one tensor per key (deterministic)."""
        return self.to_physical(self.actor.act(self.encoder.encode(inputs)))

    @torch.no_grad()
    def act(
        self, obs: Mapping[str, npt.NDArray[np.generic]], explore: bool = False
    ) -> npt.NDArray[np.float64]:
        """Physical actions (n, A) for a dict observation with a leading batch axis."""
        inputs = self.encoder.tensors(obs, self.action_low.device)
        features = self.encoder.encode(inputs)
        unit = self.actor.sample(features)[0] if explore else self.actor.act(features)
        return self.to_physical(unit).cpu().numpy().astype(np.float64)
