"""Observation and action normalization that travels with a policy.

Observations are dicts of named vectors; the learner sees them flattened in key order and
standardized by running statistics. Actions are learned in [-1, 1] per component and mapped to
the task's physical range at the edge.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


class ObsLayout:
    """The order and sizes of observation keys, to flatten a dict into one vector."""

    def __init__(self, shapes: Mapping[str, tuple[int, ...]]) -> None:
        self.keys = list(shapes)
        self.sizes = [int(np.prod(s)) for s in shapes.values()]
        self.dim = sum(self.sizes)

    def flatten(self, obs: Mapping[str, npt.NDArray[np.float32]]) -> npt.NDArray[np.float32]:
        """(n, dim) float32 from a dict of (n, ...) arrays."""
        n = len(obs[self.keys[0]])
        return np.concatenate([np.asarray(obs[k], np.float32).reshape(n, -1) for k in self.keys], axis=1)


def merge_moments(
    mean: Any, var: Any, count: float, batch_mean: Any, batch_var: Any, n: int
) -> tuple[Any, Any, float]:
    """Mean, variance and count of the data so far merged with a batch's (Chan et al.'s parallel
    update), for numpy arrays and torch tensors alike (the device loop's normalizer, issue 14)."""
    total = count + n
    delta = batch_mean - mean
    merged_mean = mean + delta * n / total
    merged_var = (var * count + batch_var * n + delta**2 * count * n / total) / total
    return merged_mean, merged_var, total


class RunningNorm:
    """Running mean and variance (Chan et al.'s parallel update), for standardizing observations."""

    def __init__(self, dim: int, clip: float = 10.0, eps: float = 1e-6) -> None:
        self.mean = np.zeros(dim)
        self.var = np.ones(dim)
        self.count = 0.0
        self.clip = clip
        self.eps = eps

    def update(self, x: npt.NDArray[np.floating]) -> None:
        """Fold a batch (n, dim) into the statistics."""
        x = np.asarray(x, np.float64)
        n = x.shape[0]
        if n == 0:
            return
        self.mean, self.var, self.count = merge_moments(
            self.mean, self.var, self.count, x.mean(axis=0), x.var(axis=0), n
        )

    @property
    def std(self) -> FloatArray:
        return np.sqrt(self.var + self.eps)

    def __call__(self, x: npt.NDArray[np.floating]) -> npt.NDArray[np.float32]:
        return np.clip((x - self.mean) / self.std, -self.clip, self.clip).astype(np.float32)

    def state(self) -> dict[str, FloatArray]:
        return {"mean": self.mean.copy(), "var": self.var.copy(), "count": np.array([self.count])}

    def load_state(self, state: Mapping[str, npt.NDArray[np.floating]]) -> None:
        self.mean = np.asarray(state["mean"], np.float64).copy()
        self.var = np.asarray(state["var"], np.float64).copy()
        self.count = float(np.asarray(state["count"]).ravel()[0])


class ActionScaler:
    """Maps [-1, 1] per component to a physical range and back."""

    def __init__(self, low: npt.ArrayLike, high: npt.ArrayLike) -> None:
        self.low = np.asarray(low, np.float64)
        self.high = np.asarray(high, np.float64)

    def to_unit(self, action: npt.ArrayLike) -> npt.NDArray[np.float32]:
        a = np.asarray(action, np.float64)
        return np.clip(2.0 * (a - self.low) / (self.high - self.low) - 1.0, -1.0, 1.0).astype(np.float32)

    def to_physical(self, unit: npt.ArrayLike) -> FloatArray:
        u = np.clip(np.asarray(unit, np.float64), -1.0, 1.0)
        return self.low + (u + 1.0) * 0.5 * (self.high - self.low)
