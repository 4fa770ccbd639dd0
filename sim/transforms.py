"""Batched rotation helpers on (n, ...) arrays; quaternions are (w, x, y, z).

They take numpy arrays or, for MuJoCo Warp's backend, torch tensors, and compute in the namespace of
what they are given (issue 14).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from robolearn.sim import host_xp

FloatArray = npt.NDArray[np.float64]


def namespace_of(x: Any) -> Any:
    """numpy for numpy arrays, else the array API namespace of ``x`` (array-api-compat, from the gpu
    extra, imported only then)."""
    if isinstance(x, np.ndarray | np.generic | float | int):
        return np
    from array_api_compat import array_namespace

    return array_namespace(x)


def _matrix_entries(w: Any, x: Any, y: Any, z: Any) -> tuple[Any, ...]:
    """The nine entries of the rotation matrix of quaternions (w, x, y, z), row by row: (n,) arrays of
    any namespace, or Python floats, in the same operations."""
    return (
        1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y),
        2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
        2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y),
    )  # fmt: skip


def _one_float64_world(*arrays: Any) -> bool:
    """Whether each array is numpy float64 with one row. Such a world computes on Python floats: the
    same IEEE operations, one value each, as numpy's on the row, at a twentieth of numpy's cost per
    operation on one value (issue 18: a body-frame rotation took 53 us on one world)."""
    for a in arrays:  # a loop, not all() over a generator: this runs several times a step
        if type(a) is not np.ndarray or a.dtype != np.float64 or a.shape[0] != 1:
            return False
    return True


def quat_to_mat(quat: FloatArray) -> FloatArray:
    """(n, 4) unit quaternions to (n, 3, 3) rotation matrices (body to world)."""
    if _one_float64_world(quat):
        return np.array(_matrix_entries(*quat[0].tolist())).reshape(1, 3, 3)
    xp = namespace_of(quat)
    entries = _matrix_entries(quat[:, 0], quat[:, 1], quat[:, 2], quat[:, 3])
    return xp.reshape(xp.stack(entries, axis=-1), (-1, 3, 3))


def quat_rotate(quat: FloatArray, vec: FloatArray) -> FloatArray:
    """Rotate (n, 3) body-frame vectors into the world frame."""
    return namespace_of(quat).einsum("nij,nj->ni", quat_to_mat(quat), vec)


def _transposed_times(r: tuple[Any, ...], v0: Any, v1: Any, v2: Any) -> tuple[Any, Any, Any]:
    """R^T v from R's entries row by row, each sum in the order einsum's ``nji,nj->ni`` takes it."""
    r00, r01, r02, r10, r11, r12, r20, r21, r22 = r
    return (
        r00 * v0 + r10 * v1 + r20 * v2,
        r01 * v0 + r11 * v1 + r21 * v2,
        r02 * v0 + r12 * v1 + r22 * v2,
    )


def quat_rotate_inverse(quat: FloatArray, vec: FloatArray) -> FloatArray:
    """Rotate (n, 3) world-frame vectors into the body frame (the transposed matrix times the vector,
    component by component: no (n, 3, 3) matrix is built)."""
    if _one_float64_world(quat, vec):
        return np.array([_transposed_times(_matrix_entries(*quat[0].tolist()), *vec[0].tolist())])
    xp = namespace_of(quat)
    r = _matrix_entries(quat[:, 0], quat[:, 1], quat[:, 2], quat[:, 3])
    return xp.stack(_transposed_times(r, vec[:, 0], vec[:, 1], vec[:, 2]), axis=-1)


def quat_from_euler(roll: FloatArray, pitch: FloatArray, yaw: FloatArray) -> FloatArray:
    """(n,) roll, pitch, yaw (rad, extrinsic x-y-z) to (n, 4) quaternions."""
    xp = namespace_of(yaw)
    cr, sr = xp.cos(roll / 2), xp.sin(roll / 2)
    cp, sp = xp.cos(pitch / 2), xp.sin(pitch / 2)
    cy, sy = xp.cos(yaw / 2), xp.sin(yaw / 2)
    return xp.stack(
        [
            cr * cp * cy + sr * sp * sy,
            sr * cp * cy - cr * sp * sy,
            cr * sp * cy + sr * cp * sy,
            cr * cp * sy - sr * sp * cy,
        ],
        axis=-1,
    )


def yaw_of(quat: FloatArray) -> FloatArray:
    """(n,) heading angle about the world z axis."""
    w, x, y, z = quat[:, 0], quat[:, 1], quat[:, 2], quat[:, 3]
    return host_xp.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))  # no AVX-512 kernel: host_xp


def _hamilton(aw: Any, ax: Any, ay: Any, az: Any, bw: Any, bx: Any, by: Any, bz: Any) -> tuple[Any, ...]:
    """The components (w, x, y, z) of the Hamilton product of two quaternions' components: (n,)
    arrays or Python floats, in the same operations."""
    return (
        aw * bw - ax * bx - ay * by - az * bz,
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
    )


def quat_mul(a: FloatArray, b: FloatArray) -> FloatArray:
    """(n, 4) Hamilton products ``a * b`` (apply ``b``, then ``a``)."""
    if _one_float64_world(a, b):
        return np.array([_hamilton(*a[0].tolist(), *b[0].tolist())])
    return np.stack(_hamilton(*(a[:, i] for i in range(4)), *(b[:, i] for i in range(4))), -1)


def quat_conjugate(quat: FloatArray) -> FloatArray:
    """(n, 4) inverse rotations of unit quaternions."""
    return quat * np.array([1.0, -1.0, -1.0, -1.0])


def quat_to_rotvec(quat: FloatArray) -> FloatArray:
    """(n, 4) unit quaternions to (n, 3) rotation vectors (axis times angle, angle in [0, pi])."""
    q = np.where(quat[:, :1] < 0, -quat, quat)
    sin_half = np.linalg.norm(q[:, 1:], axis=1)
    angle = 2.0 * host_xp.arctan2(sin_half, q[:, 0])
    # angle / sin(angle / 2) tends to 2 / w as the angle vanishes.
    scale = np.where(sin_half > 1e-12, angle / host_xp.maximum(sin_half, 1e-12), 2.0 / q[:, 0])
    return q[:, 1:] * scale[:, None]
