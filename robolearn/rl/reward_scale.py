"""Reward scaling by running return statistics (SimbaV2's, Lee et al., "Hyperspherical Normalization
for Scalable Deep Reinforcement Learning", ICML 2025).

The learner divides every reward it trains on by

    max( std(G), max|r| / ((1 - gamma) * v_max) )

where G is each world's running discounted return (``G = gamma * G + r``, reset where an episode
terminates, as Gymnasium's ``NormalizeReward``), its standard deviation taken over all the steps seen,
and max|r| the largest reward seen. The first term gives returns of about unit scale whatever the
task's units; the second bounds every discounted return by ``v_max``, so a critic whose values must
lie in a fixed range (HL-Gauss bins over [-v_max, v_max]) holds every task's. Statistics come from
the transitions the learner receives, as they arrive; checkpoints carry them.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import numpy.typing as npt

from robolearn.policy.normalization import RunningNorm


class ReturnScale:
    """Running statistics of the discounted return, and the reward divisor they give."""

    def __init__(self, gamma: float, v_max: float) -> None:
        self.gamma = gamma
        self.v_max = v_max
        self.returns = np.zeros(0)
        """Each world's running discounted return (one entry per transition of an arriving step)."""
        self.stats = RunningNorm(1, eps=1e-8)
        self.abs_max = 0.0

    def update(self, reward: npt.NDArray[np.floating], terminated: npt.NDArray[np.floating]) -> None:
        """Fold one step of the worlds' rewards in (one entry per world, in the same order every step)."""
        reward = np.asarray(reward, np.float64)
        if reward.shape != self.returns.shape:  # the first step, or a different number of worlds
            self.returns = np.zeros_like(reward)
        self.returns = self.gamma * self.returns + reward
        self.stats.update(self.returns[:, None])
        self.abs_max = max(self.abs_max, float(np.abs(reward).max(initial=0.0)))
        self.returns[np.asarray(terminated) > 0] = 0.0

    @property
    def divisor(self) -> float:
        """What rewards are divided by: 1 before any step has arrived."""
        if self.stats.count == 0:
            return 1.0
        bound = self.abs_max / ((1.0 - self.gamma) * self.v_max)
        return float(max(self.stats.std[0], bound, 1e-8))

    def state(self) -> dict[str, npt.NDArray[np.float64]]:
        s = {f"stats.{k}": v for k, v in self.stats.state().items()}
        return s | {"returns": self.returns.copy(), "abs_max": np.array([self.abs_max])}

    def load_state(self, state: Mapping[str, npt.NDArray[np.floating]]) -> None:
        """Statistics as :meth:`state` gave them; ValueError for any that could not have been (a
        negative or non-finite variance would make every reward NaN)."""
        stats = {k.removeprefix("stats."): v for k, v in state.items() if k.startswith("stats.")}
        returns = np.asarray(state["returns"], np.float64)
        abs_max = np.asarray(state["abs_max"], np.float64).ravel()
        values = [returns.ravel(), abs_max, *(np.asarray(v, np.float64).ravel() for v in stats.values())]
        if not all(np.isfinite(v).all() for v in values) or abs_max.size != 1 or abs_max[0] < 0:
            raise ValueError("reward scale statistics hold non-finite or negative values")
        if stats.get("var", np.zeros(1)).min() < 0 or stats.get("count", np.zeros(1)).min() < 0:
            raise ValueError("reward scale statistics hold a negative variance or count")
        self.stats.load_state(stats)
        self.returns = returns.copy()
        self.abs_max = float(abs_max[0])
