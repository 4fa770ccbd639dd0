"""The one interface every simulator backend implements.

All state is batched: a backend holds ``num_worlds`` worlds of one scene and every query returns an
array whose first axis is the world. Positions are in metres, angles in radians, quaternions
(w, x, y, z), velocities in the world frame unless a name says otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, get_args

import numpy as np
import numpy.typing as npt

from robolearn.errors import RobolearnError
from robolearn.sim.scene import CameraCfg, SceneCfg

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]


class SimError(RobolearnError):
    """A scene or backend request that cannot be honoured; the message says what is wrong."""


@dataclass(frozen=True)
class Marker:
    """A sphere drawn in videos only (a goal, a checkpoint); it has no physics."""

    pos: tuple[float, float, float]
    radius: float
    rgba: tuple[float, float, float, float]


@dataclass(frozen=True)
class CameraView:
    """A pinhole camera in the world for one render: where it is, what it looks at, its image."""

    eye: tuple[float, float, float]
    """Camera position (m)."""
    target: tuple[float, float, float]
    """A point on the optical axis (m)."""
    up: tuple[float, float, float]
    """A direction that points up in the image (need not be orthogonal to the axis)."""
    fovy: float
    """Vertical field of view (degrees)."""
    width: int
    """Image width (pixels)."""
    height: int
    """Image height (pixels)."""
    depth: bool = False
    """Also return depth along the optical axis (m)."""


def view_axes(view: CameraView) -> tuple[FloatArray, FloatArray, FloatArray]:
    """The eye, the unit viewing direction and the unit up direction orthogonal to it, which every
    engine's renderer is given (so both draw the same pinhole)."""
    eye = np.asarray(view.eye, dtype=np.float64)
    forward = np.asarray(view.target, dtype=np.float64) - eye
    norm = float(np.linalg.norm(forward))
    up = np.asarray(view.up, dtype=np.float64)
    up = up - (up @ forward) * forward / max(norm * norm, 1e-300)
    up_norm = np.linalg.norm(up)
    if norm < 1e-9 or up_norm < 1e-9:
        raise SimError(
            f"camera at {view.eye} looking at {view.target} with up {view.up}: the target must differ "
            "from the eye and up must not lie along the optical axis"
        )
    return eye, forward / norm, up / up_norm


@dataclass(frozen=True)
class PhysicsParams:
    """Per-world multipliers on nominal physical parameters, for domain randomization."""

    mass_scale: FloatArray
    """(n,) multiplier on every body's mass and inertia."""
    friction_scale: FloatArray
    """(n,) multiplier on every sliding friction coefficient."""
    damping_scale: FloatArray
    """(n,) multiplier on every joint's damping."""
    actuator_gain_scale: FloatArray
    """(n,) multiplier on every actuator's gain (stiffness, damping, force per input)."""


class Backend(Protocol):
    """A batch of simulated worlds of one scene.

    The state queries (``frame_*``, ``joint_*``) may return live views of the engine's state,
    resolved once and kept (issue 18): they change with the next step or reset, so copy what you
    keep, and write state only through the ``set_*`` methods. A backend whose class sets
    ``live_views = True`` promises more: a query that returns the same array at every call returns
    a view that tracks the state for the backend's whole life (one world's compiled terms then read
    that array without calling the query: :mod:`robolearn.tasks.one_world`); one that refills a
    cached array at each call must not set it."""

    name: str
    num_worlds: int
    scene: SceneCfg
    num_controls: int
    xp: Any
    """Array API namespace of the arrays it returns and takes: numpy itself for the host backends,
    ``array_api_compat.torch`` for a device backend (tensors on its ``device``)."""

    def reset_worlds(self, ids: IntArray) -> None:
        """Put worlds back in the nominal state: robot at its initial joints, objects at rest."""
        ...

    def set_joint_state(
        self, ids: IntArray, joints: Sequence[str], pos: FloatArray, vel: FloatArray | None = None
    ) -> None:
        """Write joint positions (n, k) and optionally velocities of the given worlds."""
        ...

    def set_root_state(
        self,
        ids: IntArray,
        entity: str,
        pos: FloatArray,
        quat: FloatArray | None = None,
        linvel: FloatArray | None = None,
        angvel: FloatArray | None = None,
    ) -> None:
        """Write the pose (n, 3), (n, 4) and velocity of a free object or of a free-base robot."""
        ...

    def forward(self, ids: IntArray) -> None:
        """Recompute frames and velocities after state writes, before the next observation or step
        (the MuJoCo backends start a step from the stages computed here or at the last step's end)."""
        ...

    def set_physics_params(self, ids: IntArray, params: PhysicsParams) -> None:
        """Apply per-world physical parameter multipliers (domain randomization)."""
        ...

    def step(self, ctrl: FloatArray, substeps: int) -> None:
        """Hold control inputs (num_worlds, num_controls) for ``substeps`` physics steps."""
        ...

    def unstable_worlds(self) -> BoolArray:
        """(num_worlds,) worlds whose state became non-finite or that the engine reset in the last step.

        An array the backend never writes again (a new one each step, or a read-only one): callers
        keep it without copying (issue 18)."""
        ...

    def frame_pos(self, name: str) -> FloatArray:
        """(num_worlds, 3) world position of a frame or object."""
        ...

    def frame_quat(self, name: str) -> FloatArray:
        """(num_worlds, 4) world orientation of a frame or object (w, x, y, z)."""
        ...

    def frame_linvel(self, name: str) -> FloatArray:
        """(num_worlds, 3) linear velocity of a frame's origin in the world frame."""
        ...

    def frame_angvel(self, name: str) -> FloatArray:
        """(num_worlds, 3) angular velocity of a frame in the world frame."""
        ...

    def joint_pos(self, joints: Sequence[str]) -> FloatArray:
        """(num_worlds, k) joint positions."""
        ...

    def joint_vel(self, joints: Sequence[str]) -> FloatArray:
        """(num_worlds, k) joint velocities."""
        ...

    def render(
        self, world: int, width: int, height: int, camera: CameraCfg, markers: Sequence[Marker] = ()
    ) -> npt.NDArray[np.uint8]:
        """An RGB image (height, width, 3) of one world."""
        ...

    def render_view(
        self, world: int, view: CameraView, markers: Sequence[Marker] = ()
    ) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.float32] | None]:
        """One world seen through a pinhole: RGB (height, width, 3) uint8 and, when ``view.depth``,
        depth along the optical axis (height, width) float32 in metres (else None)."""
        ...

    def close(self) -> None:
        """Release engine resources."""
        ...


BackendName = Literal["mujoco", "mujoco_batch", "pybullet", "mujoco_warp"]
BACKENDS: tuple[str, ...] = get_args(BackendName)
"""Backend names accepted everywhere a backend is chosen."""
DEVICE_BACKENDS: tuple[str, ...] = ("mujoco_warp",)
"""Backends whose arrays are torch tensors on a device (``backend.xp`` is torch's array namespace)."""
HOST_BACKENDS: tuple[str, ...] = tuple(b for b in BACKENDS if b not in DEVICE_BACKENDS)
"""Backends whose arrays are numpy arrays in host memory."""


def make_backend(name: str, scene: SceneCfg, num_worlds: int, nthread: int = 0) -> Backend:
    """Build a backend by name; engines are imported only when asked for."""
    if num_worlds < 1:
        raise SimError(f"num_worlds must be at least 1, got {num_worlds}")
    if name == "mujoco":
        from robolearn.sim.mujoco_backend import MujocoBackend

        return MujocoBackend(scene, num_worlds)
    if name == "mujoco_batch":
        from robolearn.sim.mujoco_backend import MujocoBatchBackend

        return MujocoBatchBackend(scene, num_worlds, nthread=nthread)
    if name == "pybullet":
        from robolearn.sim.pybullet_backend import PybulletBackend

        return PybulletBackend(scene, num_worlds)
    if name == "mujoco_warp":
        from robolearn.sim.mujoco_warp_backend import MujocoWarpBackend

        return MujocoWarpBackend(scene, num_worlds)
    raise SimError(f"unknown backend {name!r}; choose one of {', '.join(BACKENDS)}")
