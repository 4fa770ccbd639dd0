"""Interval estimates for evaluation results.

Following Agarwal et al., "Deep RL at the Edge of the Statistical Precipice" (NeurIPS 2021):
report percentile-bootstrap confidence intervals, and the interquartile mean across runs.
"""

from __future__ import annotations

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
