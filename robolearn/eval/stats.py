"""Interval estimates for evaluation results.

Following Agarwal et al., "Deep RL at the Edge of the Statistical Precipice" (NeurIPS 2021):
report percentile-bootstrap confidence intervals, and the interquartile mean across runs.
"""

from __future__ import annotations

import math

import numpy as np
import numpy.typing as npt


def bootstrap_ci(
    values: npt.ArrayLike, confidence: float = 0.95, resamples: int = 2000, seed: int = 0
) -> tuple[float, float]:
    """Percentile-bootstrap confidence interval of the mean."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return (float("nan"), float("nan"))
    rng = np.random.default_rng(seed)
    means = x[rng.integers(0, x.size, size=(resamples, x.size))].mean(axis=1)
    alpha = (1.0 - confidence) / 2
    lo, hi = np.quantile(means, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def interquartile_mean(values: npt.ArrayLike) -> float:
    """Mean of the middle 50% of the values (robust to outlier runs)."""
    x = np.sort(np.asarray(values, dtype=np.float64).ravel())
    if x.size == 0:
        return float("nan")
    lo, hi = int(np.floor(0.25 * x.size)), int(np.ceil(0.75 * x.size))
    return float(x[lo:hi].mean()) if hi > lo else float(x.mean())


def wilson_interval(successes: int, trials: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson's score interval of a success rate (95% by default)."""
    p, z2 = successes / trials, z * z
    centre = (p + z2 / (2 * trials)) / (1 + z2 / trials)
    half = z * math.sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials)) / (1 + z2 / trials)
    # Clamped: at 0 or n successes the bound is exactly 0 or 1, which rounding misses by 1e-17.
    return max(0.0, centre - half), min(1.0, centre + half)


def difference_of_proportions_ci(k1: int, n1: int, k0: int, n0: int) -> tuple[float, float]:
    """95% interval of ``k1/n1 - k0/n0`` by Newcombe's hybrid score method (his method 10: the two
    Wilson intervals combined), which keeps its coverage at rates near 0 or 1, unlike the normal one."""
    (l1, u1), (l0, u0) = wilson_interval(k1, n1), wilson_interval(k0, n0)
    p1, p0 = k1 / n1, k0 / n0
    d = p1 - p0
    return d - math.hypot(p1 - l1, u0 - p0), d + math.hypot(u1 - p1, p0 - l0)
