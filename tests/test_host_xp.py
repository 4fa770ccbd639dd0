"""The host array namespace (issue 18) gives numpy's results, bit for bit, on what the per-step path
passes it."""

from __future__ import annotations

import numpy as np
import pytest

from robolearn.sim import host_xp
from robolearn.sim.transforms import quat_mul, quat_rotate, quat_rotate_inverse, quat_to_mat

RNG = np.random.default_rng(0)
ARRAYS = [RNG.normal(size=s) * 10 ** RNG.uniform(-3, 3) for s in [(1, 3), (4, 7), (2, 3, 4), (5,)]]


@pytest.mark.parametrize("x", ARRAYS, ids=lambda x: str(x.shape))
def test_reductions_and_norms_match_numpy(x: np.ndarray) -> None:
    for axis in [None, *range(x.ndim)]:
        for keepdims in (False, True):
            for ours, theirs in ((host_xp.sum, np.sum), (host_xp.all, np.all), (host_xp.any, np.any)):
                arg = x if ours is host_xp.sum else x > 0
                a, b = ours(arg, axis=axis, keepdims=keepdims), theirs(arg, axis=axis, keepdims=keepdims)
                assert np.shape(a) == np.shape(b) and np.array_equal(a, b)
        if axis is not None:
            a, b = host_xp.linalg.vector_norm(x, axis=axis), np.linalg.vector_norm(x, axis=axis)
            assert a.dtype == b.dtype and np.array_equal(a, b)
    assert host_xp.linalg.vector_norm(x.astype(np.float32), axis=-1).dtype == np.float32


def test_clip_matches_numpy_including_nan_and_one_sided_bounds() -> None:
    x = np.array([[-2.0, 0.5, np.nan, 3.0, -np.inf]])
    lo, hi = np.array([-1.0, 0.0, 0.0, 0.0, 0.0]), np.array([1.0, 1.0, 1.0, 2.0, 1.0])
    np.testing.assert_array_equal(host_xp.clip(x, lo, hi), np.clip(x, lo, hi))
    np.testing.assert_array_equal(host_xp.clip(x, 0.0, 1.0), np.clip(x, 0.0, 1.0))
    np.testing.assert_array_equal(host_xp.clip(x, min=0.0), np.clip(x, 0.0, None))
    np.testing.assert_array_equal(host_xp.clip(x, max=0.0), np.clip(x, None, 0.0))
    ints = np.array([1, 5, -3])
    assert host_xp.clip(ints, min=0).dtype == np.clip(ints, 0, None).dtype


def test_clip_gives_maximum_and_minimums_bits() -> None:
    """clip by comparisons (numpy's float64 maximum and minimum run AVX-512 kernels that slow the
    engine after them) gives exactly what ``minimum(maximum(x, lo), hi)`` gives, bit for bit: signed
    zeros at a bound, infinities, NaN, values equal to a bound, and numpy's type promotion."""
    rng = np.random.default_rng(0)
    special = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 0.5, -0.5, 2.0])
    x = np.concatenate([special, rng.normal(size=90)]).reshape(10, 10)
    bounds = [(-1.0, 1.0), (0.0, 1.0), (-0.0, 0.0), (0.0, -0.0), (-np.inf, 0.5)]
    for lo, hi in bounds:
        for xx in (x, x.astype(np.float32)):
            for lo_, hi_ in ((lo, hi), (np.float64(lo), np.float64(hi)), (np.full(10, lo), np.full(10, hi))):
                got, want = host_xp.clip(xx, lo_, hi_), np.minimum(np.maximum(xx, lo_), hi_)
                assert got.dtype == want.dtype and got.shape == want.shape
                assert got.tobytes() == want.tobytes(), (lo_, hi_, xx.dtype)
    ints = rng.integers(-5, 5, size=20)
    assert host_xp.clip(ints, -2, 3).tobytes() == np.minimum(np.maximum(ints, -2), 3).tobytes()


def test_reshape_matches_numpy() -> None:
    x = np.arange(12.0).reshape(2, 6)
    for shape in ((2, -1), (3, 4), (-1,)):
        got = host_xp.reshape(x, shape)
        assert np.array_equal(got, np.reshape(x, shape)) and np.shares_memory(got, x)
    assert not np.shares_memory(host_xp.reshape(x, (3, 4), copy=True), x)
    assert host_xp.reshape([1, 2, 3, 4], (2, 2)).shape == (2, 2)


def test_astype_and_zeros_like_match_numpy() -> None:
    x = np.array([[1.5, -2.5], [3.0, 0.25]])
    for dtype in (np.int64, np.float32, np.float64, bool):
        got, want = host_xp.astype(x, dtype), np.astype(x, dtype)
        assert got.dtype == want.dtype and np.array_equal(got, want) and not np.shares_memory(got, x)
    assert host_xp.astype(x, np.float64, copy=False) is x  # no copy asked for, none needed
    for a in (x, x[:, :1], x.T, np.arange(3), np.zeros((0, 2), np.float32)):
        for dtype in (None, np.int32):
            got, want = host_xp.zeros_like(a, dtype=dtype), np.zeros_like(a, dtype=dtype)
            assert got.dtype == want.dtype and got.shape == want.shape and not got.any()
            assert got.flags.c_contiguous == want.flags.c_contiguous and not np.shares_memory(got, a)


def test_array_equal_matches_numpy() -> None:
    a = np.array([1.0, 2.0, np.nan])
    for b in (a.copy(), np.array([1.0, 2.0]), np.array([1.0, 2.0, 3.0]), np.array([1.0, 2.0, np.nan])):
        assert host_xp.array_equal(a, b) == np.array_equal(a, b)
    assert host_xp.array_equal(a[:2], np.array([1.0, 2.0]))


def test_everything_else_is_numpy() -> None:
    assert host_xp.zeros is np.zeros and host_xp.float32 is np.float32 and host_xp.where is np.where
    assert host_xp.stack is np.stack and host_xp.concat is np.concat
    assert host_xp.linalg.norm is np.linalg.norm


@pytest.mark.parametrize("size", [1, 8, host_xp.SMALL, host_xp.SMALL + 1, 300])
def test_all_finite_and_any_true_are_numpys_answers_on_small_and_large_arrays(size: int) -> None:
    """Python numbers below SMALL values, numpy's reduction above: the same answer either way, for
    float32 and float64, every kind of non-finite value in every place, and no overflow."""
    for dtype in (np.float32, np.float64):
        x = RNG.normal(size=(1, size)).astype(dtype)
        assert host_xp.all_finite(x) is True
        assert host_xp.all_finite(np.full((1, size), np.finfo(dtype).max, dtype=dtype)) is True
        for bad in (np.nan, np.inf, -np.inf):
            for where in {0, size // 2, size - 1}:
                y = x.copy()
                y[0, where] = bad
                assert host_xp.all_finite(y) is False
    flags = np.zeros(size, dtype=bool)
    assert host_xp.any_true(flags) is False
    for where in {0, size - 1}:
        hit = flags.copy()
        hit[where] = True
        assert host_xp.any_true(hit) is True


def _reference_matrix(quat: np.ndarray) -> np.ndarray:
    """The rotation matrices as they were computed before issue 18's one-world path (row by row)."""
    w, x, y, z = quat[:, 0], quat[:, 1], quat[:, 2], quat[:, 3]
    rows = [
        [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
        [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
        [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
    ]
    return np.stack([np.stack(row, axis=-1) for row in rows], axis=-2)


@pytest.mark.parametrize("n", [1, 3, 64])
def test_rotations_match_the_matrix_and_einsum_bit_for_bit(n: int) -> None:
    """One world computes on Python floats, more on arrays without building matrices: both give
    what the matrix and einsum (and the stacked Hamilton product) gave, bit for bit (unit and
    non-unit quaternions, tiny to large)."""
    rng = np.random.default_rng(n)
    for scale in (1e-3, 1.0, 1e3):
        quat = rng.normal(size=(n, 4)) * scale
        quat[: n // 2 + 1] /= np.linalg.norm(quat[: n // 2 + 1], axis=1, keepdims=True)
        vec = rng.normal(size=(n, 3)) * scale
        matrix = _reference_matrix(quat)
        assert np.array_equal(quat_to_mat(quat), matrix)
        assert np.array_equal(quat_rotate_inverse(quat, vec), np.einsum("nji,nj->ni", matrix, vec))
        assert np.array_equal(quat_rotate(quat, vec), np.einsum("nij,nj->ni", matrix, vec))
        other = rng.normal(size=(n, 4))
        aw, ax, ay, az = (quat[:, i] for i in range(4))
        bw, bx, by, bz = (other[:, i] for i in range(4))
        product = np.stack(
            [
                aw * bw - ax * bx - ay * by - az * bz,
                aw * bx + ax * bw + ay * bz - az * by,
                aw * by - ax * bz + ay * bw + az * bx,
                aw * bz + ax * by - ay * bx + az * bw,
            ],
            -1,
        )
        assert np.array_equal(quat_mul(quat, other), product)
    # float32 keeps numpy's arithmetic and type (no float path).
    q32, v32 = quat.astype(np.float32), vec.astype(np.float32)
    assert quat_rotate_inverse(q32, v32).dtype == np.float32
    assert np.array_equal(quat_rotate_inverse(q32, v32), np.einsum("nji,nj->ni", _reference_matrix(q32), v32))


def test_maximum_and_minimum_give_numpys_bits() -> None:
    """By comparisons and ``where`` (no AVX-512 kernel): numpy's values, NaN in either argument,
    signed zeros (of two equal values the second), type promotion and broadcasting alike."""
    special = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 0.5])
    a, b = np.meshgrid(special, special)
    for x1, x2 in (
        (a, b),
        (a.astype(np.float32), b),
        (a, 0.0),
        (a, -0.0),
        (a[:, :1], b),
        (a, np.float64(np.nan)),
    ):
        for ours, theirs in ((host_xp.maximum, np.maximum), (host_xp.minimum, np.minimum)):
            got, want = ours(x1, x2), theirs(x1, x2)
            assert got.dtype == want.dtype and got.shape == want.shape
            assert np.array_equal(np.isnan(got), np.isnan(want))
            finite = ~np.isnan(want)
            assert got[finite].tobytes() == want[finite].tobytes(), (ours, x1, x2)
    ints = np.arange(-3, 4)
    assert host_xp.maximum(ints, 0).tobytes() == np.maximum(ints, 0).tobytes()


@pytest.mark.parametrize("name", ["exp", "tanh", "tan", "atan", "arctan"])
def test_one_worlds_transcendentals_are_within_two_ulps_of_numpys(name: str) -> None:
    """Up to SMALL float64 values go through ``math`` (no AVX-512 kernel): within two ulps of numpy
    (numpy's SIMD tanh is 2 ulps from the correctly rounded value here), special values exact;
    float32, complex, large arrays and overflows are numpy's own."""
    ours, theirs = getattr(host_xp, name), getattr(np, name)
    x = np.concatenate([np.linspace(-3.0, 3.0, 55), [0.0, -0.0, np.nan, 1e-300, -1e-300, 700.0, -745.0]])
    x = x.reshape(2, -1)
    got, want = ours(x), theirs(x)
    assert got.dtype == want.dtype == np.float64 and got.shape == want.shape
    np.testing.assert_array_max_ulp(got, want, maxulp=2)
    assert np.array_equal(np.signbit(got[x == 0]), np.signbit(want[x == 0]))
    for other in (x.astype(np.float32), np.linspace(-1.0, 1.0, host_xp.SMALL + 1), x + 0j):
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(ours(other), theirs(other))
    special = np.array([np.inf, -np.inf, 1000.0])  # math refuses tan(inf) and exp(1000): numpy's own
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(ours(special), theirs(special))


def test_one_worlds_arctan2_is_within_an_ulp_of_numpys() -> None:
    y = np.array([[0.0, -0.0, 1.0, -1.0, np.inf, np.nan, 0.3]])
    x = np.array([[-0.0, -1.0, 0.0, 2.0, np.inf, 1.0, -0.7]])
    for ours in (host_xp.arctan2, host_xp.atan2):
        got, want = ours(y, x), np.arctan2(y, x)
        np.testing.assert_array_max_ulp(got, want, maxulp=1)
        assert np.array_equal(np.signbit(got[~np.isnan(got)]), np.signbit(want[~np.isnan(want)]))
    np.testing.assert_array_equal(host_xp.atan2(y, 1.0), np.arctan2(y, 1.0))  # broadcast: numpy's own
