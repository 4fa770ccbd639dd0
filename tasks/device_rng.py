"""Random streams drawn on a torch device, with the part of numpy's ``Generator`` interface terms use.

Reset and randomization terms call ``env.rng.uniform(low, high, size=...)`` and the like; on a device
backend (issue 14) ``env.rng`` is a :class:`DeviceGenerator`, so resets of any subset of worlds draw
their states where the worlds are, with no host round trip. Each stream is seeded from its own
``SeedSequence`` child, as the host streams are, so one seed reproduces a run on one device
(the draws differ from numpy's: the host and device backends do not share reset distributions'
samples, only the distributions).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

Size = int | Sequence[int] | None
"""numpy's ``size``: None for one draw, an int or a shape."""


class DeviceGenerator:
    """Uniform, normal and integer draws as tensors on ``device``, from one seeded torch generator."""

    def __init__(self, seed: np.random.SeedSequence, device: torch.device, dtype: torch.dtype) -> None:
        self.device, self.dtype = device, dtype
        self._gen = torch.Generator(device=device)
        self._gen.manual_seed(int(seed.generate_state(1, np.uint64)[0] >> np.uint64(1)))

    def _shape(self, size: Size) -> tuple[int, ...]:
        if size is None:
            return ()
        return (int(size),) if isinstance(size, int | np.integer) else tuple(int(k) for k in size)

    def _tensor(self, value: Any) -> torch.Tensor:
        return torch.as_tensor(value, dtype=self.dtype, device=self.device)

    def uniform(self, low: Any = 0.0, high: Any = 1.0, size: Size = None) -> torch.Tensor:
        """Draws in [low, high), broadcast as numpy's ``Generator.uniform``."""
        u = torch.rand(self._shape(size), generator=self._gen, device=self.device, dtype=self.dtype)
        low_t = self._tensor(low)
        return low_t + (self._tensor(high) - low_t) * u

    def normal(self, loc: Any = 0.0, scale: Any = 1.0, size: Size = None) -> torch.Tensor:
        """Gaussian draws, as numpy's ``Generator.normal``."""
        z = torch.randn(self._shape(size), generator=self._gen, device=self.device, dtype=self.dtype)
        return self._tensor(loc) + self._tensor(scale) * z

    def standard_normal(self, size: Size = None) -> torch.Tensor:
        """Draws from N(0, 1), as numpy's ``Generator.standard_normal``."""
        return self.normal(0.0, 1.0, size)

    def choice(self, a: Sequence[float], size: Size = None) -> torch.Tensor:
        """Values drawn uniformly, with replacement, from the 1-D sequence ``a``, as numpy's
        ``Generator.choice`` of a sequence."""
        index = torch.randint(0, len(a), self._shape(size), generator=self._gen, device=self.device)
        return self._tensor(a)[index]

    def integers(self, low: int, high: int, size: Size = None) -> torch.Tensor:
        """Integers in [low, high), as numpy's ``Generator.integers``."""
        shape = self._shape(size)
        return torch.randint(low, high, shape, generator=self._gen, device=self.device, dtype=torch.int64)
