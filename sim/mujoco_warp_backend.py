"""N worlds on MuJoCo Warp (issue 14): the CPU MuJoCo backends' scene on a CUDA device or Warp's CPU device.

The scene is compiled exactly as for the CPU backends (:func:`~robolearn.sim.mujoco_model.build_model`),
so contacts, the Cartesian impedance controller (site-transmission actuators), the drone's rate loop
and the car's steering are the same MuJoCo actuators, here stepped by MuJoCo Warp's kernels. Every
query returns a torch tensor on the device, a live view of Warp's arrays (zero-copy), and every write
takes tensors on the device: observations, rewards and resets never go through the host. The task
terms run on them through :attr:`MujocoWarpBackend.xp`, the array API namespace of torch.

Differences from the CPU backends, by design of MuJoCo Warp: single precision (trajectories agree
with ``mujoco_batch`` to the tolerance tests/test_mujoco_warp.py states, not bit for bit), contact and
constraint buffers of a fixed size per world, and no automatic reset of a diverged world (a world
whose state turns non-finite is reported by :meth:`unstable_worlds` and reset by the task).

The device is ``wp.get_preferred_device()`` (CUDA when there is one), or ``device`` when given, or
the environment variable ``ROBOLEARN_WARP_DEVICE`` (``cpu`` forces Warp's CPU device). Kernels are
compiled on first use and cached by Warp (about a minute per task on two CPU cores with a fresh cache).

A control step (its substeps and the stages after them), a forward pass and a reset are each
recorded once as a Warp graph and replayed: a CUDA graph on CUDA, and on Warp's CPU device its CPU
graph (Warp 1.19's APIC capture), where launching MuJoCo Warp's hundreds of kernels from Python took
40 times as long as the physics (panda_reach, two worlds: 620 ms a control step launched, 3 ms
replayed, the same state to the bit; tests/test_mujoco_warp.py checks that). A reset or forward pass
of no world does nothing.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import Any, cast

import mujoco
import numpy as np
import numpy.typing as npt

from robolearn.sim.backend import PhysicsParams, SimError
from robolearn.sim.mujoco_backend import _RANDOMIZED, _MujocoBase
from robolearn.sim.scene import CameraSensorCfg

try:
    import array_api_compat.torch as xp_torch
    import mujoco_warp as mjw
    import torch
    import warp as wp
except ImportError as exc:  # the gpu extra is optional
    raise SimError(
        f"backend 'mujoco_warp' needs MuJoCo Warp ({exc.name} is missing): pip install 'robolearn[gpu]'"
    ) from exc

log = logging.getLogger(__name__)

DEVICE_ENV = "ROBOLEARN_WARP_DEVICE"
"""Environment variable naming the Warp device (``cpu``, ``cuda``, ``cuda:1``); unset: the preferred one."""

# Model fields held per world: the randomized ones and the constants set_const derives from the mass.
_PER_WORLD = (*_RANDOMIZED, "body_subtreemass", "body_invweight0", "dof_invweight0", "actuator_acc0")

NJMAX = 128
"""Constraint rows allocated per world. MuJoCo Warp's default guess is 64 for every scene here, and
panda_pick_cube's grasp (fingers, cube and table: contacts of four and six rows) overflowed it within
some substeps of 20 worlds under the scripted expert (measured: "nefc overflow" printed, though the
largest count at the end of a control step was 49); rows past it are dropped with nothing but that
printed line, so the physics would quietly differ from the CPU engine's. At 128 nothing overflowed
(largest count 49, 55 with randomization)."""

# Warp prints a line per kernel module it loads (hundreds); warnings and errors still show.
wp.config.log_level = wp.LOG_WARNING


def warp_device(device: str | None = None) -> Any:
    """The Warp device to simulate on: ``device``, else ``$ROBOLEARN_WARP_DEVICE``, else the preferred one."""
    name = device or os.environ.get(DEVICE_ENV) or None
    try:
        return wp.get_device(name) if name else wp.get_preferred_device()
    except (RuntimeError, ValueError) as exc:
        raise SimError(f"Warp device {name!r} is not available ({exc}); use 'cpu' or 'cuda[:N]'") from exc


class MujocoWarpBackend(_MujocoBase):
    """``num_worlds`` worlds of one scene on MuJoCo Warp; arrays are torch tensors on the device."""

    name = "mujoco_warp"
    xp: Any = xp_torch
    """Array API namespace of every array this backend returns (torch, through array-api-compat)."""

    def __init__(self, scene: Any, num_worlds: int, device: str | None = None, graphs: bool = True) -> None:
        super().__init__(scene, num_worlds)
        self.wp_device = warp_device(device)
        log.info("MuJoCo Warp on %s: kernels compile on first use (cached), a minute on CPU", self.wp_device)
        self.device = wp.device_to_torch(self.wp_device)
        """The torch device of every tensor this backend returns or takes."""
        try:
            with wp.ScopedDevice(self.wp_device):
                self.m = mjw.put_model(self.model, batch_sizes=dict.fromkeys(_PER_WORLD, num_worlds))
                self.d = mjw.make_data(self.model, nworld=num_worlds, njmax=NJMAX)
                self._no_free_body_shortcut_for_site_actuators()
        except NotImplementedError as exc:  # a model feature MuJoCo Warp lacks (user sensors, ...)
            robot = scene.robot.name
            raise SimError(f"MuJoCo Warp cannot simulate the scene of robot {robot}: {exc}") from exc
        t = self._tensor
        self._home = t(self.index.home_qpos)
        self._nominal_t = {f: t(v) for f, v in self._nominal.items()}
        self._reset_mask = torch.zeros(num_worlds, dtype=torch.bool, device=self.device)
        self._reset_mask_wp = wp.from_torch(self._reset_mask)  # the same memory, as Warp sees it
        self._unstable_t = torch.zeros(num_worlds, dtype=torch.bool, device=self.device)
        # The base class types its views as numpy arrays; here they are tensors.
        self._time, self._ctrl, self._qpos, self._qvel = (
            cast(torch.Tensor, self._data(f)) for f in ("time", "ctrl", "qpos", "qvel")
        )
        self._cols: dict[tuple[bool, tuple[str, ...]], torch.Tensor] = {}
        self.graphs = graphs
        """Replay recorded graphs (the default); False launches every kernel from Python each time."""
        self._warm: set[tuple[str, int]] = set()
        self._graphs: dict[tuple[str, int], Any] = {}
        """Graphs of a control step by substep count, and of a forward pass (``("forward", 0)``):
        one launch instead of hundreds of kernels."""
        self._render_data: mujoco.MjData | None = None
        self._cameras: Any = None
        """The task cameras' renderer on the device, made at the first image asked for."""

    def _no_free_body_shortcut_for_site_actuators(self) -> None:
        """Integrate a free body driven through a site (the drone's rate loop) as MuJoCo does.

        MuJoCo Warp's implicit integrators solve a lone free body (six degrees of freedom in its own
        tree) with a shortcut whose damping counts joint-transmission actuators only: the rate loop's
        velocity actuators, site transmissions, were integrated explicitly there, 8% weaker per
        2 ms step than MuJoCo's implicitfast at the Crazyflie's gain (measured in MuJoCo Warp 4.0).
        Such bodies take the general path instead, which includes every actuator's derivative.
        """
        model = self.model
        sites = model.actuator_trnid[model.actuator_trntype == mujoco.mjtTrn.mjTRN_SITE, 0]
        driven = set(model.body_rootid[model.site_bodyid[sites]].tolist())
        free = self.m.body_freeadr.numpy()
        keep = np.array([b for b in free.tolist() if b not in driven], dtype=np.int32)
        if len(keep) < len(free):
            self.m.body_freeadr = wp.array(keep, dtype=wp.int32, device=self.wp_device)

    def _tensor(self, value: Any, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """A tensor on the device: a no-op for a tensor already there."""
        return torch.as_tensor(value, dtype=dtype, device=self.device)

    def _ids(self, ids: Any) -> torch.Tensor:
        return torch.as_tensor(ids, dtype=torch.long, device=self.device)

    # -- state access: live views of Warp's arrays -------------------------------------------
    def _bind(self, field: str) -> Any:
        value = getattr(self.d, field, None)
        if not isinstance(value, wp.array):
            raise SimError(f"MuJoCo Warp's Data has no array {field!r}")
        view = self._views[field] = wp.to_torch(value)
        return view

    def _model_field(self, field: str) -> Any:
        return wp.to_torch(getattr(self.m, field))

    def _joint_addr(self, joints: Sequence[str], dofs: bool) -> Any:
        """qpos (or qvel) addresses as a tensor on the device, resolved once per joint tuple."""
        key = (dofs, tuple(joints))
        cols = self._cols.get(key)
        if cols is None:
            cols = self._cols[key] = self._ids(self._host_joint_addr(joints, dofs))
        return cols

    def set_joint_state(self, ids: Any, joints: Sequence[str], pos: Any, vel: Any | None = None) -> None:
        rows = self._ids(ids)[:, None]
        self._qpos[rows, self._joint_addr(joints, dofs=False)] = self._tensor(pos)
        self._qvel[rows, self._joint_addr(joints, dofs=True)] = 0.0 if vel is None else self._tensor(vel)

    def set_root_state(
        self,
        ids: Any,
        entity: str,
        pos: Any,
        quat: Any | None = None,
        linvel: Any | None = None,
        angvel: Any | None = None,
    ) -> None:
        from robolearn.sim.transforms import quat_rotate_inverse

        if entity not in self.index.free_qpos:
            raise SimError(f"{entity!r} is not a free body; free bodies: {sorted(self.index.free_qpos)}")
        q, d, rows = self.index.free_qpos[entity], self.index.free_dof[entity], self._ids(ids)
        self._qpos[rows, q : q + 3] = self._tensor(pos)
        if quat is not None:
            self._qpos[rows, q + 3 : q + 7] = self._tensor(quat)
        self._qvel[rows, d : d + 3] = 0.0 if linvel is None else self._tensor(linvel)
        if angvel is None:
            self._qvel[rows, d + 3 : d + 6] = 0.0
        else:  # a free joint's angular velocity is in the body frame
            body: Any = quat_rotate_inverse(self._qpos[rows, q + 3 : q + 7], self._tensor(angvel))  # type: ignore[arg-type]
            self._qvel[rows, d + 3 : d + 6] = body

    def set_physics_params(self, ids: Any, params: PhysicsParams) -> None:
        rows, t = self._ids(ids), self._tensor
        scales = {
            "mass": t(params.mass_scale),
            "friction": t(params.friction_scale),
            "damping": t(params.damping_scale),
            "gain": t(params.actuator_gain_scale),
        }
        for field, kind in _RANDOMIZED.items():
            nominal, target, s = self._nominal_t[field], self._model_field(field), scales[kind][:, None]
            if field in ("geom_friction", "actuator_gainprm"):
                target[rows, :, 0] = nominal[None, :, 0] * s
            elif field == "actuator_biasprm":
                target[rows, :, 1:3] = nominal[None, :, 1:3] * s[..., None]
            elif field == "body_inertia":
                target[rows] = nominal[None] * s[..., None]
            else:
                target[rows] = nominal[None] * s
        # Masses change the constants the constraint solver scales by (invweight0): every world's
        # are recomputed at qpos0, the unchanged worlds' to the same values.
        with wp.ScopedDevice(self.wp_device):
            mjw.set_const(self.m, self.d)

    # -- resets and stepping --------------------------------------------------------------
    def reset_worlds(self, ids: Any) -> None:
        rows = self._ids(ids)
        if rows.numel() == 0:  # the size is known on the host: no synchronization
            return
        self._reset_mask.zero_()
        self._reset_mask[rows] = True  # a device-side mask: no host round trip for any subset
        # Replayed: MuJoCo Warp's reset_data defines its kernels anew at every call (about 14 ms of
        # Python a call, measured on the CPU device); the graph reads the mask's contents when replayed.
        self._replay(("reset", 0), lambda: mjw.reset_data(self.m, self.d, reset=self._reset_mask_wp))
        self._qpos[rows] = self._home

    def forward(self, ids: Any) -> None:
        if self._ids(ids).numel() == 0:  # no world reset: every state is as the last step left it
            return
        # Every world: recomputing the others' stages at their unchanged state changes nothing.
        self._replay(("forward", 0), self._forward)

    def _forward(self) -> None:
        """All stages at the current state; with an acceleration-stage sensor, also ``cfrc_ext``.

        MuJoCo's C engine runs ``mj_rnePostConstraint`` for any acceleration-stage sensor, the user
        sensor of :attr:`~robolearn.sim.scene.MjcfAsset.body_wrenches` included; MuJoCo Warp only for
        its built-in ones (accelerometer, force, ...), unless ``opt.run_rne_postconstraint`` asks.
        Asked here only, not in the substeps (and their Runge-Kutta stages), where nothing reads it.
        """
        wrenches = self._stage == mujoco.mjtStage.mjSTAGE_ACC
        self.m.opt.run_rne_postconstraint = wrenches
        mjw.forward(self.m, self.d)
        if wrenches:
            self.m.opt.run_rne_postconstraint = False

    def _finite(self) -> Any:
        return torch.isfinite(self._qpos).all(dim=1) & torch.isfinite(self._qvel).all(dim=1)

    def _advance(self, substeps: int) -> None:
        """``substeps`` physics steps, then the position and velocity stages (and the acceleration
        stage when a sensor needs it) at the new state, as the CPU backends leave them."""
        for _ in range(substeps):
            mjw.step(self.m, self.d)
        if self._stage == mujoco.mjtStage.mjSTAGE_ACC:
            self._forward()
        else:
            mjw.step1(self.m, self.d)

    def _replay(self, key: tuple[str, int], launch: Any) -> None:
        """Run ``launch`` (kernel launches only, no host reads) through its recorded graph.

        A call records the graph (nothing runs while recording) and replays it, as every later call
        does. On CUDA the first call launches directly instead: it loads the kernels, which a CUDA
        capture cannot; Warp's CPU capture loads them while recording (the same state to the bit,
        and one direct step less per world count: 0.5 to 3 s on two busy cores).
        """
        with wp.ScopedDevice(self.wp_device):
            graph = self._graphs.get(key)
            if graph is not None:
                wp.capture_launch(graph)
            elif not self.graphs or (self.wp_device.is_cuda and key not in self._warm):
                launch()
                self._warm.add(key)
            else:
                with wp.ScopedCapture() as capture:
                    launch()
                self._graphs[key] = capture.graph
                wp.capture_launch(capture.graph)

    def step(self, ctrl: Any, substeps: int) -> None:
        time_before, finite_before = self._time.clone(), self._finite()
        self._ctrl[:] = self._tensor(ctrl)
        self._replay(("step", substeps), lambda: self._advance(substeps))
        expected = time_before + (substeps - 0.5) * self._timestep
        self._unstable_t = (self._time < expected) | ~(finite_before & self._finite())

    def unstable_worlds(self) -> Any:
        return self._unstable_t

    # -- cameras on the device ----------------------------------------------------------------
    def render_cameras(self, cameras: Sequence[tuple[str, CameraSensorCfg]]) -> dict[str, torch.Tensor]:
        """Every camera's images of every world, traced and kept on the device
        (:mod:`robolearn.sim.warp_render`; the cameras must be the scene's)."""
        if self._cameras is None:
            from robolearn.sim.warp_render import WarpCameras

            self._cameras = WarpCameras(self.model, self.num_worlds, cameras, self.wp_device)
        return cast(dict[str, torch.Tensor], self._cameras.render(self.m, self.d))

    # -- host copies, for rendering and inspection -----------------------------------------
    def _world_model_data(self, world: int) -> tuple[mujoco.MjModel, mujoco.MjData]:
        if self._render_data is None:
            self._render_data = mujoco.MjData(self.model)
        data = self._render_data
        data.qpos[:] = self._qpos[world].cpu().numpy()
        data.qvel[:] = self._qvel[world].cpu().numpy()
        mujoco.mj_forward(self.model, data)
        return self.model, data

    def host(self, value: Any) -> npt.NDArray[Any]:
        """A numpy copy of a tensor this backend returned (for the Gymnasium boundary, tests, logs)."""
        return value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else np.asarray(value)
