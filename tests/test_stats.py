"""Interval estimates: Wilson's interval and Newcombe's interval of a difference of success rates
(the sysid benchmark's transfer gain), checked against published values and by simulation."""

from __future__ import annotations

import numpy as np
import pytest

from robolearn.eval.stats import difference_of_proportions_ci, wilson_interval


def test_wilson_matches_newcombes_published_example() -> None:
    # Newcombe (1998), Statistics in Medicine 17, table I: 81/263 has the interval 0.2553 to 0.3662.
    low, high = wilson_interval(81, 263)
    assert low == pytest.approx(0.2553, abs=5e-4) and high == pytest.approx(0.3662, abs=5e-4)
    # Exactly 0 and 1, not -1e-17 (which the bench's tables printed as "-0.00-0.16").
    assert wilson_interval(0, 20)[0] == 0.0 and wilson_interval(20, 20)[1] == 1.0


def test_difference_matches_newcombes_published_example() -> None:
    # Newcombe (1998), Statistics in Medicine 17, 873-890, example (a): 56/70 - 48/80, method 10
    # gives 0.0524 to 0.3339.
    low, high = difference_of_proportions_ci(56, 70, 48, 80)
    assert low == pytest.approx(0.0524, abs=5e-4) and high == pytest.approx(0.3339, abs=5e-4)


def test_difference_interval_covers_the_truth_about_95_percent_of_the_time() -> None:
    rng = np.random.default_rng(0)
    p1, p0, n = 0.8, 0.6, 30
    k1, k0 = rng.binomial(n, p1, 4000), rng.binomial(n, p0, 4000)
    intervals = [difference_of_proportions_ci(int(a), n, int(b), n) for a, b in zip(k1, k0, strict=True)]
    covered = [lo <= p1 - p0 <= hi for lo, hi in intervals]
    assert 0.93 <= np.mean(covered) <= 0.975
