"""MuJoCo backends: one world on an ``MjData`` (the reference) and N worlds on ``mujoco.batch``.

Both read and write the same (num_worlds, ...) arrays, so everything above this module is shared:
the single-world backend exposes ``MjData`` fields with a leading axis of one, the batched backend
the live views ``mujoco.batch`` binds over all worlds. After every control step the position and
velocity stages are computed at the new state, so frames and sensors describe the state the next
action acts on (and the acceleration stage too, for models whose sensors need it).
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Sequence
from typing import Any

import mujoco
import mujoco.batch
import numpy as np
import numpy.typing as npt

from robolearn.sim.backend import (
    BoolArray,
    CameraView,
    FloatArray,
    IntArray,
    Marker,
    PhysicsParams,
    SimError,
    view_axes,
)
from robolearn.sim.mujoco_model import build_model
from robolearn.sim.scene import CameraCfg, SceneCfg
from robolearn.sim.transforms import quat_rotate_inverse

log = logging.getLogger(__name__)

# Fields whose per-world values domain randomization scales, with the columns scaled.
_RANDOMIZED = {
    "body_mass": "mass",
    "body_inertia": "mass",
    "geom_friction": "friction",
    "dof_damping": "damping",
    "actuator_gainprm": "gain",
    "actuator_biasprm": "gain",
}


_FRAME_WIDTH = {"pos": 3, "quat": 4, "linvel": 3, "angvel": 3}
"""Values of each frame quantity in ``sensordata``, by field of
:class:`~robolearn.sim.mujoco_model.FrameIndex`."""


_SENSOR_OFF = int(mujoco.mjtDisableBit.mjDSBL_SENSOR)


def _log_mujoco_warning(message: str) -> None:
    log.warning("mujoco: %s", message)


mujoco.set_mju_user_warning(_log_mujoco_warning)

_all, _isfinite = np.logical_and.reduce, np.isfinite

_FREE_CAMERA = mujoco.MjvCamera()
"""The camera ``update_scene`` is given for task cameras; :func:`_aim` then replaces its pose."""


def _aim(scn: mujoco.MjvScene, view: CameraView) -> None:
    """Point the scene's (left and right, averaged when not in stereo) OpenGL cameras through a
    pinhole: MuJoCo's free camera has no roll, which a wrist camera needs."""
    eye, forward, up = view_axes(view)
    top = np.tan(np.radians(view.fovy) / 2)
    for gl in scn.camera:
        gl.pos[:], gl.forward[:], gl.up[:] = eye, forward, up
        gl.frustum_center = 0.0
        gl.frustum_width = 0.0  # 0: from the viewport's aspect ratio
        gl.frustum_top = gl.frustum_near * top
        gl.frustum_bottom = -gl.frustum_near * top


def _add_markers(scn: mujoco.MjvScene, markers: Sequence[Marker]) -> None:
    """Draw markers as spheres that exist in the image only."""
    for marker in markers:
        if scn.ngeom >= scn.maxgeom:
            break
        mujoco.mjv_initGeom(
            scn.geoms[scn.ngeom],
            mujoco.mjtGeom.mjGEOM_SPHERE,
            np.full(3, marker.radius),
            np.asarray(marker.pos, dtype=np.float64),
            np.eye(3).ravel(),
            np.asarray(marker.rgba, dtype=np.float32),
        )
        scn.ngeom += 1


class _MujocoBase:
    """State access shared by the MuJoCo backends; subclasses supply the arrays and the stepping."""

    name: str
    xp: Any = np
    """Array API namespace of the arrays returned: numpy (MuJoCo Warp's backend: torch's)."""

    def __init__(self, scene: SceneCfg, num_worlds: int) -> None:
        self.scene = scene
        self.num_worlds = num_worlds
        self.model, self.index = build_model(scene)
        self.num_controls = int(self.model.nu)
        self._nominal = {f: getattr(self.model, f).copy() for f in _RANDOMIZED}
        self._renderer: mujoco.Renderer | None = None
        self._view_renderers: dict[tuple[int, int, int, bool], mujoco.Renderer] = {}
        """Task cameras' renderers by (thread, width, height, depth): one per image size, kept. Per
        thread: an EGL context current on one thread cannot be made current on another (a ROS
        node publishes its first sample from the thread that built it, then from its loop)."""
        self._unstable = np.zeros(num_worlds, dtype=bool)
        # Stages computed at the new state after a control step: positions and velocities, and also
        # accelerations when a sensor needs them (MjcfAsset.body_wrenches), under the controls just applied.
        needs_acc = (self.model.sensor_needstage == mujoco.mjtStage.mjSTAGE_ACC).any()
        self._stage = mujoco.mjtStage.mjSTAGE_ACC if needs_acc else mujoco.mjtStage.mjSTAGE_VEL
        # model.opt builds a wrapper on every access: read the options the stepping needs once.
        self._timestep = float(self.model.opt.timestep)
        self._rk4 = self.model.opt.integrator == mujoco.mjtIntegrator.mjINT_RK4
        # Views and addresses resolved on first use and kept: terms read them every step (issue 18).
        self._views: dict[str, npt.NDArray[Any]] = {}
        self._frame_views: dict[str, dict[str, FloatArray]] = {k: {} for k in _FRAME_WIDTH}
        self._joint_cols: dict[tuple[bool, tuple[str, ...]], IntArray] = {}
        self._joint_views: dict[tuple[bool, tuple[str, ...]], FloatArray] = {}

    # Arrays (num_worlds, ...) over MjData and per-world MjModel fields.
    def _data(self, field: str) -> npt.NDArray[Any]:
        view = self._views.get(field)
        if view is None:
            view = self._bind(field)
        return view

    def _bind(self, field: str) -> npt.NDArray[Any]:
        """The (num_worlds, ...) array of an MjData field, kept in ``_views`` when it is a live view."""
        raise NotImplementedError

    def _model_field(self, field: str) -> npt.NDArray[Any]:
        raise NotImplementedError

    def mj_field(self, field: str) -> npt.NDArray[Any]:
        """(num_worlds, ...) MjData field, for MuJoCo-only tasks (Gymnasium's models)."""
        view = self._views.get(field)  # _data's look-up inline: terms read fields several times a step
        return self._bind(field) if view is None else view

    def _frame(self, name: str) -> Any:
        try:
            return self.index.frames[name]
        except KeyError:
            raise SimError(f"unknown frame {name!r}; frames: {sorted(self.index.frames)}") from None

    def _host_joint_addr(self, joints: Sequence[str], dofs: bool) -> IntArray:
        """qpos (or, with ``dofs``, qvel) addresses of joints in numpy, resolved once per joint tuple."""
        key = (dofs, tuple(joints))
        cols = self._joint_cols.get(key)
        if cols is None:
            table = self.index.joint_dof if dofs else self.index.joint_qpos
            try:
                cols = np.array([table[j] for j in key[1]], dtype=np.int64)
            except KeyError as exc:
                raise SimError(f"unknown joint {exc.args[0]!r}; joints: {sorted(table)}") from None
            self._joint_cols[key] = cols
        return cols

    # The addresses that index the backend's arrays: these, here; a device backend's, on its device.
    _joint_addr = _host_joint_addr

    def _frame_view(self, kind: str, name: str) -> FloatArray:
        """The live (num_worlds, k) rows of ``sensordata`` holding one frame quantity."""
        start = getattr(self._frame(name), kind)
        view = self._data("sensordata")[:, start : start + _FRAME_WIDTH[kind]]
        self._frame_views[kind][name] = view
        return view

    # Terms call these several times per step: a dict look-up when the view is already made.
    def frame_pos(self, name: str) -> FloatArray:
        view = self._frame_views["pos"].get(name)
        return self._frame_view("pos", name) if view is None else view

    def frame_quat(self, name: str) -> FloatArray:
        view = self._frame_views["quat"].get(name)
        return self._frame_view("quat", name) if view is None else view

    def frame_linvel(self, name: str) -> FloatArray:
        view = self._frame_views["linvel"].get(name)
        return self._frame_view("linvel", name) if view is None else view

    def frame_angvel(self, name: str) -> FloatArray:
        view = self._frame_views["angvel"].get(name)
        return self._frame_view("angvel", name) if view is None else view

    def _joints(self, joints: Sequence[str], dofs: bool) -> FloatArray:
        """qpos (or qvel) columns of joints: joints whose addresses follow each other (a gripper's
        fingers, an arm's chain) as a live view resolved once, others gathered (a copy)."""
        key = (dofs, tuple(joints))
        view = self._joint_views.get(key)
        if view is not None:
            return view
        field = "qvel" if dofs else "qpos"
        host = self._host_joint_addr(joints, dofs)  # contiguity is read on the host
        if len(host) and (np.diff(host) == 1).all():
            view = self._joint_views[key] = self._data(field)[:, int(host[0]) : int(host[-1]) + 1]
            return view
        return self._data(field)[:, self._joint_addr(joints, dofs)]

    def joint_pos(self, joints: Sequence[str]) -> FloatArray:
        return self._joints(joints, dofs=False)

    def joint_vel(self, joints: Sequence[str]) -> FloatArray:
        return self._joints(joints, dofs=True)

    def set_joint_state(
        self, ids: IntArray, joints: Sequence[str], pos: FloatArray, vel: FloatArray | None = None
    ) -> None:
        qpos, qvel = self._data("qpos"), self._data("qvel")
        qpos[np.ix_(ids, self._joint_addr(joints, dofs=False))] = pos
        qvel[np.ix_(ids, self._joint_addr(joints, dofs=True))] = 0.0 if vel is None else vel

    def set_root_state(
        self,
        ids: IntArray,
        entity: str,
        pos: FloatArray,
        quat: FloatArray | None = None,
        linvel: FloatArray | None = None,
        angvel: FloatArray | None = None,
    ) -> None:
        if entity not in self.index.free_qpos:
            raise SimError(f"{entity!r} is not a free body; free bodies: {sorted(self.index.free_qpos)}")
        q, d = self.index.free_qpos[entity], self.index.free_dof[entity]
        qpos, qvel = self._data("qpos"), self._data("qvel")
        qpos[ids, q : q + 3] = pos
        if quat is not None:
            qpos[ids, q + 3 : q + 7] = quat
        qvel[ids, d : d + 3] = 0.0 if linvel is None else linvel
        if angvel is None:
            qvel[ids, d + 3 : d + 6] = 0.0
        else:
            # A free joint's angular velocity is in the body frame.
            qvel[ids, d + 3 : d + 6] = quat_rotate_inverse(qpos[ids, q + 3 : q + 7], angvel)

    def set_physics_params(self, ids: IntArray, params: PhysicsParams) -> None:
        scales = {
            "mass": params.mass_scale,
            "friction": params.friction_scale,
            "damping": params.damping_scale,
            "gain": params.actuator_gain_scale,
        }
        for field, kind in _RANDOMIZED.items():
            nominal, target = self._nominal[field], self._model_field(field)
            s = scales[kind][:, None]
            if field == "geom_friction":
                target[ids, :, 0] = nominal[None, :, 0] * s
            elif field == "actuator_gainprm":
                target[ids, :, 0] = nominal[None, :, 0] * s
            elif field == "actuator_biasprm":
                target[ids, :, 1:3] = nominal[None, :, 1:3] * s[..., None]
            elif field == "body_inertia":
                target[ids] = nominal[None] * s[..., None]
            else:
                target[ids] = nominal[None] * s
        self._set_const(ids)

    def _set_const(self, ids: IntArray) -> None:
        raise NotImplementedError

    def unstable_worlds(self) -> BoolArray:
        return self._unstable

    def _finite(self) -> BoolArray:
        return np.isfinite(self._data("qpos")).all(axis=1) & np.isfinite(self._data("qvel")).all(axis=1)

    def _check_stability(self, time_before: FloatArray, finite_before: BoolArray, substeps: int) -> None:
        # MuJoCo resets a diverged world to qpos0 by itself and restarts its clock: catch that, a
        # state that was already non-finite when the step began, and any non-finite state left.
        expected = time_before + (substeps - 0.5) * self._timestep
        self._unstable = (self._data("time") < expected) | ~(finite_before & self._finite())

    def render(
        self, world: int, width: int, height: int, camera: CameraCfg, markers: Sequence[Marker] = ()
    ) -> npt.NDArray[np.uint8]:
        model, data = self._world_model_data(world)
        if self._renderer is None or (self._renderer.width, self._renderer.height) != (width, height):
            self._renderer = mujoco.Renderer(model, height=height, width=width)
        cam = mujoco.MjvCamera()
        cam.lookat[:] = camera.lookat
        if camera.track_frame is not None:
            cam.lookat[:] = self.frame_pos(camera.track_frame)[world]
        cam.distance, cam.azimuth, cam.elevation = camera.distance, camera.azimuth, camera.elevation
        self._renderer.update_scene(data, cam)
        _add_markers(self._renderer.scene, markers)
        return self._renderer.render().copy()

    def render_view(
        self, world: int, view: CameraView, markers: Sequence[Marker] = ()
    ) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.float32] | None]:
        model, data = self._world_model_data(world)
        kinds = (False, True) if view.depth else (False,)
        images: list[npt.NDArray[Any]] = []
        for depth in kinds:  # MuJoCo's Renderer reads colour or depth per render, not both
            key = (threading.get_ident(), view.width, view.height, depth)
            renderer = self._view_renderers.get(key)
            if renderer is None:
                renderer = mujoco.Renderer(model, height=view.height, width=view.width)
                if depth:
                    renderer.enable_depth_rendering()
                self._view_renderers[key] = renderer
            # update_scene lays out infinite planes around the scene's camera as it is on entry (the
            # last frame's): aimed first, equal states give equal images whatever was drawn before.
            _aim(renderer.scene, view)
            renderer.update_scene(data, _FREE_CAMERA)
            _aim(renderer.scene, view)
            _add_markers(renderer.scene, markers)
            images.append(renderer.render().copy())
        return images[0], images[1] if view.depth else None

    def _world_model_data(self, world: int) -> tuple[mujoco.MjModel, mujoco.MjData]:
        raise NotImplementedError

    def close(self) -> None:
        if self._renderer is not None:
            self._renderer.close()
            self._renderer = None
        for renderer in self._view_renderers.values():
            renderer.close()
        self._view_renderers.clear()


class MujocoBackend(_MujocoBase):
    """Reference backend: worlds stepped one after another with ``mj_step``."""

    name = "mujoco"
    live_views = True
    """A state query that returns the same array at every call returns a live view of this world's
    MjData, which lives as long as the backend: one world's compiled terms read it directly
    (:mod:`robolearn.tasks.one_world`). Gathered joints and arena fields are new arrays each call."""

    def __init__(self, scene: SceneCfg, num_worlds: int = 1) -> None:
        super().__init__(scene, num_worlds)
        if num_worlds != 1:
            raise SimError(f"backend 'mujoco' simulates one world; use 'mujoco_batch' for {num_worlds}")
        self.data = mujoco.MjData(self.model)
        self._qpos, self._qvel = self.data.qpos, self.data.qvel
        self._opt = self.model.opt  # a view of the model's options, made once (see _MujocoBase)
        self._ctrl = self._data("ctrl")  # the kept (1, nu) view: MjData makes a new array at every access
        # The stages computed at the new state (see _MujocoBase): the full forward pass or step1.
        acc = self._stage == mujoco.mjtStage.mjSTAGE_ACC
        self._finish_step = mujoco.mj_forward if acc else mujoco.mj_step1
        # A step's outcome as one of two read-only arrays: nothing to allocate, nothing to copy.
        self._stable_flags, self._unstable_flags = np.array([False]), np.array([True])
        for flags in (self._stable_flags, self._unstable_flags):
            flags.flags.writeable = False

    def _bind(self, field: str) -> npt.NDArray[Any]:
        value = getattr(self.data, field)
        if not isinstance(value, np.ndarray):
            return np.array([value])  # a scalar such as time: a copy, there is nothing to view
        view = value[None]
        # Arena fields (efc_*, contacts, islands) change size every step: only the rest are kept.
        if field in mujoco.batch.DATA_FIELDS:
            self._views[field] = view
        return view

    def _model_field(self, field: str) -> npt.NDArray[Any]:
        return getattr(self.model, field)[None]

    def _set_const(self, ids: IntArray) -> None:
        mujoco.mj_setConst(self.model, self.data)

    def reset_worlds(self, ids: IntArray) -> None:
        mujoco.mj_resetData(self.model, self.data)
        self.data.qpos[:] = self.index.home_qpos

    def forward(self, ids: IntArray) -> None:
        mujoco.mj_forward(self.model, self.data)

    def _state_finite(self) -> bool:
        # A finite sum proves every term finite (inf and NaN never sum to a finite value): MuJoCo's
        # own sums over qpos and qvel are two C calls instead of numpy's copy, test and reduction,
        # twice a step (issue 18). A sum that is not finite (or overflowed) is checked exactly.
        if math.isfinite(mujoco.mju_sum(self._qpos) + mujoco.mju_sum(self._qvel)):
            return True
        return bool(_all(_isfinite(self._qpos)) and _all(_isfinite(self._qvel)))

    def step(self, ctrl: FloatArray, substeps: int) -> None:
        model, data = self.model, self.data
        # One world: the stability check of _check_stability on Python scalars, in the same arithmetic.
        time_before, finite_before = data.time, self._state_finite()
        self._ctrl[:] = ctrl
        # Sensors are read only at the new state, computed below: inside the control step MuJoCo
        # would compute them at every substep for nothing (for a model with an acceleration-stage
        # sensor, such as ant's body_wrenches, an mj_rnePostConstraint each time; issue 18). The
        # dynamics do not read sensors, so the trajectory is the same bit for bit.
        opt = self._opt
        flags = opt.disableflags
        opt.disableflags = flags | _SENSOR_OFF
        try:
            # The stages up to velocity ran at the end of the last call (or mj_forward at reset):
            # finish that step with the new control, then take the rest.
            if self._rk4:
                # mj_step2 integrates with Euler under RK4 (MuJoCo's docs): take mj_step's first step
                # by its parts, skipping the position and velocity stages that are already current.
                self._rk4_step_from_velocity_stage(time_before)
            else:
                mujoco.mj_step2(model, data)
            mujoco.mj_step(model, data, nstep=substeps - 1)
        finally:
            opt.disableflags = flags
        self._finish_step(model, data)
        expected = time_before + (substeps - 0.5) * self._timestep
        unstable = data.time < expected or not (finite_before and self._state_finite())
        self._unstable = self._unstable_flags if unstable else self._stable_flags

    def _rk4_step_from_velocity_stage(self, time_before: float) -> None:
        """One ``mj_step`` under RK4 from current position and velocity stages: its checks, the
        acceleration stage under the new control (sensors are recomputed before anyone reads
        them), and the integrator. Bit-identical to ``mj_step`` (tests/test_equivalence.py)."""
        model, data = self.model, self.data
        mujoco.mj_checkPos(model, data)
        mujoco.mj_checkVel(model, data)
        # The checks reset a diverged state, and its clock to 0: then nothing computed before holds.
        # At time 0 that cannot be told from a fresh episode, which takes the full forward pass too.
        if time_before == 0.0 or data.time != time_before:
            mujoco.mj_forward(model, data)
        else:
            mujoco.mj_forwardSkip(model, data, mujoco.mjtStage.mjSTAGE_VEL, 1)
        mujoco.mj_checkAcc(model, data)
        mujoco.mj_RungeKutta(model, data, 4)

    def _world_model_data(self, world: int) -> tuple[mujoco.MjModel, mujoco.MjData]:
        return self.model, self.data


class MujocoBatchBackend(_MujocoBase):
    """N worlds on ``mujoco.batch``: one C call steps them all on a thread pool, GIL released."""

    name = "mujoco_batch"

    def __init__(self, scene: SceneCfg, num_worlds: int, nthread: int = 0) -> None:
        super().__init__(scene, num_worlds)
        self.batch = mujoco.batch.Batch(self.model, num_worlds, nthread=nthread, persistent=True)
        self._render_model: mujoco.MjModel | None = None
        self._render_data: mujoco.MjData | None = None
        # qpos and qvel lie side by side in a state row (mj_getState's order), so one check covers both.
        start = mujoco.mj_stateSize(self.model, mujoco.mjtState.mjSTATE_TIME)
        self._qpos_qvel = self.batch.state[:, start : start + self.model.nq + self.model.nv]
        self._time, self._ctrl = self._data("time"), self._data("ctrl")

    def _bind(self, field: str) -> npt.NDArray[Any]:
        view = self._views[field] = self.batch.bind(field)
        return view

    def _model_field(self, field: str) -> npt.NDArray[Any]:
        return self.batch.expand(field)

    def _set_const(self, ids: IntArray) -> None:
        self.batch.set_const(ids)

    def reset_worlds(self, ids: IntArray) -> None:
        self.batch.reset(ids, stage=mujoco.mjtStage.mjSTAGE_NONE)
        self._data("qpos")[ids] = self.index.home_qpos

    def forward(self, ids: IntArray) -> None:
        self.batch.forward(ids)

    def _finite(self) -> BoolArray:
        return np.isfinite(self._qpos_qvel).all(axis=1)

    def step(self, ctrl: FloatArray, substeps: int) -> None:
        time_before, finite_before = self._time.copy(), self._finite()
        self._ctrl[:] = ctrl
        try:
            self.batch.step(nstep=substeps, stage=self._stage)
        except mujoco.batch.SimulationError as exc:  # the failed worlds are in status; reset below
            log.warning("mujoco.batch: %s", str(exc).splitlines()[0])
        self._check_stability(time_before, finite_before, substeps)
        self._unstable |= np.asarray(self.batch.status) != 0

    def _world_model_data(self, world: int) -> tuple[mujoco.MjModel, mujoco.MjData]:
        self._render_model = self.batch.get_model(world, self._render_model)
        self._render_data = self.batch.get_data(world, self._render_data)
        return self._render_model, self._render_data
