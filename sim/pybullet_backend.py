"""PyBullet backend: every world is its own PyBullet physics server (``p.DIRECT``), stepped in turn.

It builds the scene MuJoCo builds (:mod:`robolearn.sim.mujoco_model`) from the same URDF and means
the same by every query. The controllers MuJoCo runs as actuators inside its engine are computed
here in Python at every physics substep, with the same control laws and limits, as numpy arrays over
all worlds; only the PyBullet calls loop over worlds. docs/backends.md lists what still differs.

PyBullet conventions this module converts: quaternions are (x, y, z, w); a base's pose and
velocity are those of its centre of mass, not of its URDF frame; a link's state is that of its
inertial frame, and ``calculateJacobian`` takes points in that frame.
"""

from __future__ import annotations

import contextlib
import os
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pybullet as p
import pybullet_data
from pybullet_utils.bullet_client import BulletClient

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
from robolearn.sim.scene import (
    ActuatorCfg,
    CameraCfg,
    CartesianImpedanceCfg,
    IdentifiedDynamics,
    JointPositionCfg,
    JointVelocityCfg,
    SceneCfg,
    ThrustBodyRateCfg,
    UrdfAsset,
    actuator_width,
)
from robolearn.sim.transforms import (
    quat_conjugate,
    quat_mul,
    quat_rotate,
    quat_rotate_inverse,
    quat_to_mat,
    quat_to_rotvec,
)

GRAVITY = 9.81
"""Gravitational acceleration (m/s^2), as in MuJoCo's default."""
MAX_STATE = 1e10
"""A position or velocity beyond this counts as diverged (MuJoCo's ``mjMAXVAL`` check)."""
FOVY = 45.0
"""Vertical field of view of the video camera (degrees), MuJoCo's default."""
_HIDDEN = (0.0, 0.0, -100.0)
"""Where unused marker spheres wait, out of view."""


def _wxyz(xyzw: Sequence[float]) -> list[float]:
    return [xyzw[3], xyzw[0], xyzw[1], xyzw[2]]


def _xyzw(wxyz: Sequence[float]) -> list[float]:
    return [wxyz[1], wxyz[2], wxyz[3], wxyz[0]]


@contextlib.contextmanager
def _stdout_silenced() -> Iterator[None]:
    """Send the process's file descriptor 1 to /dev/null: C code's prints bypass sys.stdout."""
    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        yield
    finally:
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


@dataclass(frozen=True)
class _Frame:
    """A frame as PyBullet sees it: a point and orientation fixed in a link's inertial frame."""

    body: int
    """PyBullet body id (the same in every world)."""
    link: int
    """Link index, -1 for the base."""
    pos: FloatArray
    """(3,) offset from the link's centre of mass, in its inertial frame."""
    quat: FloatArray
    """(4,) orientation relative to the inertial frame (w, x, y, z)."""


@dataclass(frozen=True)
class _FrameState:
    """A frame's pose and velocity in every world, as the Backend protocol reports them."""

    pos: FloatArray
    """(n, 3) world position (m)."""
    quat: FloatArray
    """(n, 4) world orientation (w, x, y, z)."""
    linvel: FloatArray
    """(n, 3) world velocity of the frame's origin (m/s)."""
    angvel: FloatArray
    """(n, 3) world angular velocity (rad/s)."""


@dataclass(frozen=True)
class _Nominal:
    """Parameters read at build time, which domain randomization multiplies."""

    links: tuple[tuple[int, int], ...]
    """(body, link) of every body part with mass or friction."""
    mass: FloatArray
    """(parts,) masses (kg)."""
    inertia: FloatArray
    """(parts, 3) principal moments of inertia (kg m^2), without armature."""
    friction: FloatArray
    """(parts,) sliding friction coefficients."""
    damping: FloatArray
    """(ndof,) viscous damping of each movable joint."""


class PybulletBackend:
    """``num_worlds`` PyBullet worlds of one scene, with MuJoCo's controllers computed in Python."""

    name = "pybullet"
    xp: Any = np
    """Arrays are numpy arrays (the array API namespace terms compute with)."""

    def __init__(self, scene: SceneCfg, num_worlds: int) -> None:
        robot = scene.robot
        if not isinstance(robot.asset, UrdfAsset):
            raise SimError(
                f"robot {robot.name}: backend 'pybullet' reads URDF files only, got {robot.asset.path}"
            )
        if not Path(robot.asset.path).is_file():
            raise SimError(f"robot model file not found: {robot.asset.path}")
        if robot.identified is not None and robot.identified.payload_link:
            raise SimError(
                f"robot {robot.name}: an identified payload (robolearn sysid) runs on the MuJoCo backends "
                "(mujoco, mujoco_batch), not on 'pybullet'"
            )
        self.scene = scene
        self.num_worlds = num_worlds
        self.num_controls = sum(actuator_width(a) for a in robot.actuators)
        self._clients = [self._build_world() for _ in range(num_worlds)]
        self._markers: list[dict[tuple[float, tuple[float, ...]], list[int]]] = [
            {} for _ in range(num_worlds)
        ]
        self._index_robot()
        self._scales = np.ones((num_worlds, 4))
        """Per-world mass, friction, damping and actuator-gain multipliers in force."""
        for w in range(num_worlds):
            self._configure(w)
        self._unstable = np.zeros(num_worlds, dtype=bool)
        self._joint_cache: tuple[FloatArray, FloatArray] | None = None
        self._frame_cache: dict[str, _FrameState] = {}
        self.reset_worlds(np.arange(num_worlds))

    # -- building ----------------------------------------------------------------------------
    def _build_world(self) -> BulletClient:
        """A new physics server holding the scene; body ids come out the same in every world."""
        scene, robot = self.scene, self.scene.robot
        with _stdout_silenced():  # the engine prints "argv[0]=" on connecting, over our output
            c = BulletClient(p.DIRECT)
        c.setAdditionalSearchPath(pybullet_data.getDataPath())
        c.setGravity(0.0, 0.0, -GRAVITY)
        c.setPhysicsEngineParameter(fixedTimeStep=scene.physics_dt, deterministicOverlappingPairs=1)
        # File inertias, as MuJoCo reads them (PyBullet would otherwise derive them from the
        # collision shapes); self-collision, as MuJoCo collides every pair of non-adjacent bodies.
        flags = p.URDF_USE_INERTIA_FROM_FILE | p.URDF_USE_SELF_COLLISION
        try:
            body = c.loadURDF(
                str(robot.asset.path), basePosition=robot.base_pos, useFixedBase=robot.fixed_base, flags=flags
            )
        except p.error as exc:
            raise SimError(f"cannot read robot model {robot.asset.path}: {exc}") from exc
        self._robot = body
        links = range(-1, c.getNumJoints(body))
        for link in links:
            # PyBullet damps every link's motion by default; MuJoCo does not.
            c.changeDynamics(body, link, linearDamping=0.0, angularDamping=0.0)
            # MuJoCo's URDF importer drops the inertia of a massless link; PyBullet would keep it.
            if link >= 0 and c.getDynamicsInfo(body, link)[0] == 0.0:
                c.changeDynamics(body, link, localInertiaDiagonal=[0.0, 0.0, 0.0])
            if robot.collision_friction is not None:
                lateral, spinning, rolling = robot.collision_friction
                c.changeDynamics(
                    body, link, lateralFriction=lateral, spinningFriction=spinning, rollingFriction=rolling
                )
        self._filter_collisions_like_mujoco(c, body)
        self._add_mimic_constraints(c, body)

        self._objects: dict[str, int] = {}
        for obj in scene.objects:
            shape = c.createCollisionShape(p.GEOM_BOX, halfExtents=obj.half_size)
            visual = c.createVisualShape(p.GEOM_BOX, halfExtents=obj.half_size, rgbaColor=obj.rgba)
            oid = c.createMultiBody(obj.mass, shape, visual, basePosition=obj.pos)
            # MuJoCo's torsional and rolling coefficients for the box (mujoco_model.build_model).
            c.changeDynamics(
                oid,
                -1,
                lateralFriction=obj.friction,
                spinningFriction=0.005,
                rollingFriction=0.0001,
                linearDamping=0.0,
                angularDamping=0.0,
            )
            self._objects[obj.name] = oid
        self._ground: int | None = None
        if scene.ground:
            self._ground = c.loadURDF("plane.urdf")
            # Bullet combines torsional and rolling coefficients as s_a mu_b + s_b mu_a (MuJoCo takes
            # the larger of s_a and s_b); with none on the ground, a ground contact uses the
            # object's own, times the ground's sliding friction.
            c.changeDynamics(
                self._ground,
                -1,
                lateralFriction=scene.ground_friction,
                spinningFriction=0.0,
                rollingFriction=0.0,
            )
        return c

    def _filter_collisions_like_mujoco(self, c: BulletClient, body: int) -> None:
        """Exclude the self-contacts MuJoCo excludes.

        MuJoCo fuses links joined by fixed joints into one body and ignores contacts within a body
        and between a body and its parent; PyBullet keeps every link and only skips parent-child.
        """
        n = c.getNumJoints(body)
        parent = {j: c.getJointInfo(body, j)[16] for j in range(n)}
        fixed = {j: c.getJointInfo(body, j)[2] == p.JOINT_FIXED for j in range(n)}

        def group(link: int) -> int:
            while link >= 0 and fixed[link]:
                link = parent[link]
            return link

        groups = {link: group(link) for link in range(-1, n)}
        parent_group = {g: (group(parent[g]) if g >= 0 else None) for g in set(groups.values())}
        for a in range(-1, n):
            for b in range(a + 1, n):
                ga, gb = groups[a], groups[b]
                if ga == gb or parent_group[ga] == gb or parent_group[gb] == ga:
                    c.setCollisionFilterPair(body, body, a, b, 0)

    def _add_mimic_constraints(self, c: BulletClient, body: int) -> None:
        """Couple URDF mimic joints, as MuJoCo's importer does with an equality constraint."""
        index = {c.getJointInfo(body, j)[1].decode(): j for j in range(c.getNumJoints(body))}
        for joint in ET.parse(self.scene.robot.asset.path).getroot().iter("joint"):
            mimic = joint.find("mimic")
            if mimic is None:
                continue
            leader, follower = index[mimic.attrib["joint"]], index[joint.attrib["name"]]
            cid = c.createConstraint(
                body, leader, body, follower, p.JOINT_GEAR, [1, 0, 0], [0, 0, 0], [0, 0, 0]
            )
            # The gear constraint holds gearRatio * q_leader + q_follower at the target.
            c.changeConstraint(
                cid,
                gearRatio=-float(mimic.attrib.get("multiplier", 1.0)),
                relativePositionTarget=float(mimic.attrib.get("offset", 0.0)),
                erp=0.2,
                maxForce=1000.0,
            )

    def _index_robot(self) -> None:
        robot, c, body = self.scene.robot, self._clients[0], self._robot
        infos = [c.getJointInfo(body, j) for j in range(c.getNumJoints(body))]
        self._link_index = {info[12].decode(): info[0] for info in infos}
        self._link_index[c.getBodyInfo(body)[0].decode()] = -1
        movable = [info for info in infos if info[2] != p.JOINT_FIXED]
        self._movable = [info[0] for info in movable]
        self._dof = {info[1].decode(): k for k, info in enumerate(movable)}
        ndof = len(movable)
        for name in robot.init_joint_pos | robot.joint_damping:
            if name not in self._dof:
                raise SimError(f"robot {robot.name} has no joint {name!r}; joints: {sorted(self._dof)}")
        # MuJoCo turns URDF effort limits into limits on the joints' total actuator force.
        effort = np.array([info[10] for info in movable], dtype=np.float64)
        self._effort = np.where(effort > 0, effort, np.inf)
        self._home = np.zeros(ndof)
        for name, value in robot.init_joint_pos.items():
            self._home[self._dof[name]] = value
        damping = np.array([robot.joint_damping.get(info[1].decode(), info[6]) for info in movable])
        dyn = robot.identified or IdentifiedDynamics()
        unknown = sorted(
            (dyn.joint_armature | dyn.joint_damping | dyn.joint_frictionloss).keys() - self._dof.keys()
        )
        if unknown:
            raise SimError(f"identified dynamics name joints {unknown}, which robot {robot.name} lacks")
        for name, value in dyn.joint_damping.items():
            damping[self._dof[name]] = value
        self._joint_friction = np.zeros(ndof)
        """Dry friction of each movable joint (N m or N): a velocity motor toward rest with this force
        limit, PyBullet's counterpart of MuJoCo's ``frictionloss``; it acts beside the torque drive."""
        for name, value in dyn.joint_frictionloss.items():
            self._joint_friction[self._dof[name]] = value

        self._frames: dict[str, _Frame] = {}
        for frame in robot.frames:
            if frame.link not in self._link_index:
                raise SimError(
                    f"frame {frame.name!r} names link {frame.link!r}, which robot {robot.name} lacks"
                )
            self._frames[frame.name] = self._inertial_frame(
                body, self._link_index[frame.link], frame.pos, frame.quat
            )
        self._free = dict(self._objects)
        if not robot.fixed_base:
            self._free[robot.name] = body
            self._frames[robot.name] = self._inertial_frame(body, -1, (0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0))
        for name, oid in self._objects.items():
            self._frames[name] = _Frame(oid, -1, np.zeros(3), np.array([1.0, 0.0, 0.0, 0.0]))

        self._actuators: list[tuple[ActuatorCfg, slice]] = []
        self._references: dict[tuple[float, ...], tuple[FloatArray, FloatArray]] = {}
        self._ctrl_gain = np.ones(self.num_controls)
        """Identified gain of each control input's actuator (MuJoCo's actuator names)."""
        gain_columns: dict[str, int] = {}
        start = 0
        for act in robot.actuators:
            width = actuator_width(act)
            if isinstance(act, CartesianImpedanceCfg):
                gain_columns |= {f"{act.frame}_cart{a}": start + a for a in range(6)}
            elif isinstance(act, JointPositionCfg | JointVelocityCfg):
                gain_columns |= {f"{j}_servo": start + k for k, j in enumerate(act.joints)}
            else:  # MuJoCo's names: a thrust motor (a drone's motor constant) and three rate loops
                gain_columns |= {"thrust": start} | {f"rate{a}": start + 1 + k for k, a in enumerate("xyz")}
            if isinstance(act, JointPositionCfg | JointVelocityCfg):
                self._dof_columns(act.joints)
            else:
                target = self._frames.get(act.frame)
                if target is None or target.body != body:
                    own = sorted(k for k, f in self._frames.items() if f.body == body)
                    raise SimError(
                        f"actuator frame {act.frame!r} is not a frame of robot {robot.name}; frames: {own}"
                    )
                if isinstance(act, CartesianImpedanceCfg) and target.link < 0:
                    raise SimError(
                        f"Cartesian impedance frame {act.frame!r} sits on the base, which no joint moves"
                    )
            self._actuators.append((act, slice(start, start + width)))
            start += width
        for name, scale in dyn.actuator_gain_scale.items():
            if name not in gain_columns:
                raise SimError(
                    f"identified dynamics scale actuator {name!r}; on 'pybullet' robot {robot.name} has "
                    f"gains of {sorted(gain_columns)}"
                )
            self._ctrl_gain[gain_columns[name]] = scale

        parts = [(body, link) for link in range(-1, c.getNumJoints(body))]
        parts += [(oid, -1) for oid in self._objects.values()]
        if self._ground is not None:
            parts.append((self._ground, -1))
        infos_dyn = [c.getDynamicsInfo(b, link) for b, link in parts]
        # The identified scales are part of the nominal scene; randomization multiplies on top.
        # Bullet multiplies a contact's two coefficients, so scaling one side scales its contacts.
        objects = set(self._objects.values())
        robot_scale = np.array(
            [
                dyn.mass_scale if b == body else dyn.object_mass_scale if b in objects else 1.0
                for b, _ in parts
            ]
        )
        friction_scale = np.array(
            [
                dyn.robot_friction_scale if b == body else dyn.object_friction_scale if b in objects else 1.0
                for b, _ in parts
            ]
        )
        self._nominal = _Nominal(
            links=tuple(parts),
            mass=np.array([d[0] for d in infos_dyn]) * robot_scale,
            inertia=np.array([d[2] for d in infos_dyn]) * robot_scale[:, None],
            friction=np.array([d[1] for d in infos_dyn]) * friction_scale,
            damping=damping,
        )
        self._mass_parts = [k for k, (b, _) in enumerate(parts) if b == body]
        self._armature = np.zeros((len(parts), 3))
        """Inertia added to links about their hinge axes, unscaled by domain randomization."""
        # PyBullet has no rotor inertia; the closest is to add it to the child link's inertia
        # about the hinge axis (exact for an axis along a principal axis of the link).
        for info in movable:
            armature = dyn.joint_armature.get(info[1].decode(), robot.joint_armature)
            if info[2] == p.JOINT_REVOLUTE and armature:
                iquat = np.array([_wxyz(c.getDynamicsInfo(body, info[0])[4])])
                axis = quat_rotate_inverse(iquat, np.array([info[13]], dtype=np.float64))[0]
                self._armature[parts.index((body, info[0]))] = armature * axis**2

    def _inertial_frame(self, body: int, link: int, pos: Sequence[float], quat: Sequence[float]) -> _Frame:
        """A frame given in a URDF link frame, re-expressed in that link's inertial frame."""
        info = self._clients[0].getDynamicsInfo(body, link)
        ipos, iquat = np.array([info[3]]), np.array([_wxyz(info[4])])
        inv = quat_conjugate(iquat)
        return _Frame(
            body,
            link,
            quat_rotate(inv, np.array([pos], dtype=np.float64) - ipos)[0],
            quat_mul(inv, np.array([quat], dtype=np.float64))[0],
        )

    def _configure(self, w: int) -> None:
        """Set a freshly built world's drives and its physical parameters."""
        if self._movable:
            # PyBullet drives every joint with a velocity motor by default; ours are the only drive,
            # the motor's force limit left as the joint's identified dry friction (0 without).
            self._clients[w].setJointMotorControlArray(
                self._robot,
                self._movable,
                p.VELOCITY_CONTROL,
                targetVelocities=[0.0] * len(self._movable),
                forces=self._joint_friction.tolist(),
            )
        self._apply_params(w)

    # -- names -------------------------------------------------------------------------------
    def _dof_columns(self, joints: Sequence[str]) -> list[int]:
        try:
            return [self._dof[j] for j in joints]
        except KeyError as exc:
            raise SimError(f"unknown joint {exc.args[0]!r}; joints: {sorted(self._dof)}") from None

    def _frame(self, name: str) -> _Frame:
        try:
            return self._frames[name]
        except KeyError:
            raise SimError(f"unknown frame {name!r}; frames: {sorted(self._frames)}") from None

    # -- state reads -------------------------------------------------------------------------
    def _invalidate(self) -> None:
        self._joint_cache = None
        self._frame_cache = {}

    def _joints(self) -> tuple[FloatArray, FloatArray]:
        if self._joint_cache is None:
            n, ndof = self.num_worlds, len(self._movable)
            q, qd = np.zeros((n, ndof)), np.zeros((n, ndof))
            if ndof:
                for w, c in enumerate(self._clients):
                    states = c.getJointStates(self._robot, self._movable)
                    q[w] = [s[0] for s in states]
                    qd[w] = [s[1] for s in states]
            self._joint_cache = (q, qd)
        return self._joint_cache

    def _frame_state(self, name: str) -> _FrameState:
        state = self._frame_cache.get(name)
        if state is None:
            self._read_body_frames(self._frame(name).body)
            state = self._frame_cache[name]
        return state

    def _read_body_frames(self, body: int) -> None:
        """Compute every frame on one body, all worlds, from one PyBullet call per world."""
        names = [k for k, f in self._frames.items() if f.body == body]
        links = sorted({self._frames[k].link for k in names})
        arm_links = [link for link in links if link >= 0]
        n, k = self.num_worlds, len(links)
        com = np.zeros((n, k, 3))
        com_quat = np.zeros((n, k, 4))
        vel = np.zeros((n, k, 3))
        omega = np.zeros((n, k, 3))
        col = {link: i for i, link in enumerate(links)}
        for w, c in enumerate(self._clients):
            if -1 in col:
                pos, orn = c.getBasePositionAndOrientation(body)
                v, om = c.getBaseVelocity(body)
                i = col[-1]
                com[w, i], com_quat[w, i], vel[w, i], omega[w, i] = pos, _wxyz(orn), v, om
            if arm_links:
                states = c.getLinkStates(body, arm_links, computeLinkVelocity=1, computeForwardKinematics=1)
                for link, s in zip(arm_links, states, strict=True):
                    i = col[link]
                    com[w, i], com_quat[w, i], vel[w, i], omega[w, i] = s[0], _wxyz(s[1]), s[6], s[7]
        for name in names:
            f = self._frames[name]
            i = col[f.link]
            pos, quat, linvel = com[:, i], com_quat[:, i], vel[:, i]
            # Controllers read frames every substep; most sit at their link's centre of mass.
            if f.pos.any():
                offset = quat_rotate(quat, np.broadcast_to(f.pos, (n, 3)))
                pos, linvel = pos + offset, linvel + np.cross(omega[:, i], offset)
            if (f.quat[1:] != 0.0).any():
                quat = quat_mul(quat, np.broadcast_to(f.quat, (n, 4)))
            self._frame_cache[name] = _FrameState(pos, quat, linvel, omega[:, i])

    def frame_pos(self, name: str) -> FloatArray:
        return self._frame_state(name).pos

    def frame_quat(self, name: str) -> FloatArray:
        return self._frame_state(name).quat

    def frame_linvel(self, name: str) -> FloatArray:
        return self._frame_state(name).linvel

    def frame_angvel(self, name: str) -> FloatArray:
        return self._frame_state(name).angvel

    def joint_pos(self, joints: Sequence[str]) -> FloatArray:
        return self._joints()[0][:, self._dof_columns(joints)]

    def joint_vel(self, joints: Sequence[str]) -> FloatArray:
        return self._joints()[1][:, self._dof_columns(joints)]

    # -- state writes ------------------------------------------------------------------------
    def reset_worlds(self, ids: IntArray) -> None:
        n = len(ids)
        for w in ids:
            c = self._clients[w]
            for joint, q in zip(self._movable, self._home, strict=True):
                c.resetJointState(self._robot, joint, float(q), 0.0)
        identity = np.tile([1.0, 0.0, 0.0, 0.0], (n, 1))
        for obj in self.scene.objects:
            self.set_root_state(ids, obj.name, np.tile(obj.pos, (n, 1)), identity)
        if not self.scene.robot.fixed_base:
            self.set_root_state(
                ids, self.scene.robot.name, np.tile(self.scene.robot.base_pos, (n, 1)), identity
            )
        self._invalidate()

    def set_joint_state(
        self, ids: IntArray, joints: Sequence[str], pos: FloatArray, vel: FloatArray | None = None
    ) -> None:
        cols = self._dof_columns(joints)
        pos = np.broadcast_to(pos, (len(ids), len(cols)))
        vel = np.zeros_like(pos) if vel is None else np.broadcast_to(vel, pos.shape)
        for row, w in enumerate(ids):
            c = self._clients[w]
            for k, col in enumerate(cols):
                c.resetJointState(self._robot, self._movable[col], float(pos[row, k]), float(vel[row, k]))
        self._invalidate()

    def set_root_state(
        self,
        ids: IntArray,
        entity: str,
        pos: FloatArray,
        quat: FloatArray | None = None,
        linvel: FloatArray | None = None,
        angvel: FloatArray | None = None,
    ) -> None:
        if entity not in self._free:
            raise SimError(f"{entity!r} is not a free body; free bodies: {sorted(self._free)}")
        body, frame, n = self._free[entity], self._frames[entity], len(ids)
        if quat is None:
            quat = self.frame_quat(entity)[ids]
        zero = np.zeros((n, 3))
        linvel = zero if linvel is None else np.broadcast_to(linvel, (n, 3))
        angvel = zero if angvel is None else np.broadcast_to(angvel, (n, 3))
        # The entity's frame is its URDF frame; PyBullet places and moves the centre of mass.
        com_quat = quat_mul(
            np.asarray(quat, dtype=np.float64), quat_conjugate(np.broadcast_to(frame.quat, (n, 4)))
        )
        to_com = -quat_rotate(com_quat, np.broadcast_to(frame.pos, (n, 3)))
        com = np.asarray(pos, dtype=np.float64) + to_com
        com_vel = linvel + np.cross(angvel, to_com)
        for row, w in enumerate(ids):
            c = self._clients[w]
            c.resetBasePositionAndOrientation(body, com[row].tolist(), _xyzw(com_quat[row]))
            c.resetBaseVelocity(body, com_vel[row].tolist(), angvel[row].tolist())
        self._invalidate()

    def forward(self, ids: IntArray) -> None:
        """Nothing to do: reads are computed on demand from the state last written or stepped."""

    def set_physics_params(self, ids: IntArray, params: PhysicsParams) -> None:
        self._scales[ids] = np.stack(
            [params.mass_scale, params.friction_scale, params.damping_scale, params.actuator_gain_scale],
            axis=1,
        )
        for w in ids.tolist():
            self._apply_params(w)

    def _apply_params(self, w: int) -> None:
        c, nom = self._clients[w], self._nominal
        mass, friction, damping, _ = self._scales[w]
        # Bullet multiplies the two bodies' coefficients in a contact (MuJoCo takes the larger), so
        # each side gets the square root: a contact's friction then scales by the drawn factor.
        friction = float(np.sqrt(friction))
        for (body, link), m, inertia, armature, mu in zip(
            nom.links, nom.mass, nom.inertia, self._armature, nom.friction, strict=True
        ):
            c.changeDynamics(
                body,
                link,
                mass=float(m * mass),
                localInertiaDiagonal=(inertia * mass + armature).tolist(),
                lateralFriction=float(mu * friction),
            )
        for joint, d in zip(self._movable, nom.damping, strict=True):
            c.changeDynamics(self._robot, joint, jointDamping=float(d * damping))

    # -- stepping ----------------------------------------------------------------------------
    def step(self, ctrl: FloatArray, substeps: int) -> None:
        ctrl = np.asarray(ctrl, dtype=np.float64).reshape(self.num_worlds, self.num_controls)
        gain = self._scales[:, 3]
        for _ in range(substeps):
            torque = np.zeros((self.num_worlds, len(self._movable)))
            wrenches: list[tuple[int, FloatArray, FloatArray, FloatArray]] = []
            for act, cols in self._actuators:
                u = ctrl[:, cols]
                scale = gain[:, None] * self._ctrl_gain[cols]  # randomized times identified
                if isinstance(act, CartesianImpedanceCfg):
                    torque += self._cartesian_impedance(act, u, scale)
                elif isinstance(act, JointPositionCfg):
                    q, qd = self._joints()
                    k = self._dof_columns(act.joints)
                    effort = scale * (act.kp * (u - q[:, k]) - act.kd * qd[:, k])
                    torque[:, k] += np.clip(effort, -act.max_effort, act.max_effort)
                elif isinstance(act, JointVelocityCfg):
                    k = self._dof_columns(act.joints)
                    effort = scale * act.kv * (u - self._joints()[1][:, k])
                    torque[:, k] += np.clip(effort, -act.max_effort, act.max_effort)
                else:
                    wrenches.append(self._thrust_body_rate(act, u, scale))
            torque = np.clip(torque, -self._effort, self._effort)
            if self._gravcomp_joints:
                torque += self._gravity_torques()
            forces = self._gravity_forces() if self._gravcomp_links else []
            for w, c in enumerate(self._clients):
                if self._movable:
                    c.setJointMotorControlArray(
                        self._robot, self._movable, p.TORQUE_CONTROL, forces=torque[w].tolist()
                    )
                for link, force, at, moment in wrenches:
                    c.applyExternalForce(self._robot, link, force[w].tolist(), at[w].tolist(), p.WORLD_FRAME)
                    c.applyExternalTorque(self._robot, link, moment[w].tolist(), p.WORLD_FRAME)
                for body, link, force, at in forces:
                    c.applyExternalForce(body, link, force[w].tolist(), at[w].tolist(), p.WORLD_FRAME)
                c.stepSimulation()
            self._invalidate()
        self._check_stability()

    @property
    def _gravcomp_joints(self) -> bool:
        """Gravity compensation by joint torques: a fixed-base robot's joints carry its links."""
        return self.scene.robot.gravity_compensation and self.scene.robot.fixed_base and bool(self._movable)

    @property
    def _gravcomp_links(self) -> bool:
        """Gravity compensation by a lifting force on every link: a free base has no joint to carry it."""
        return self.scene.robot.gravity_compensation and not self.scene.robot.fixed_base

    def _cartesian_impedance(self, act: CartesianImpedanceCfg, u: FloatArray, gain: FloatArray) -> FloatArray:
        """MuJoCo's six position actuators with a site transmission relative to reference sites;
        ``gain`` (n, 6) scales each one's output.

        Translation is measured in the world (the position reference sits at the origin); rotation
        is the rotation vector of the frame relative to ``target_quat``, in that reference's axes
        (``mju_subQuat``), and its rate is the angular velocity in the same axes.
        """
        frame, state = self._frames[act.frame], self._frame_state(act.frame)
        ref_inverse, ref_to_world = self._reference(act.target_quat)
        rot = quat_to_rotvec(quat_mul(ref_inverse, state.quat))
        force = gain[:, :3] * (act.kp_pos * (u[:, :3] - state.pos) - act.kd_pos * state.linvel)
        moment = gain[:, 3:] * (act.kp_rot * (u[:, 3:] - rot) - act.kd_rot * state.angvel @ ref_to_world)
        force = np.clip(force, -act.max_force, act.max_force)
        moment = np.clip(moment, -act.max_torque, act.max_torque) @ ref_to_world.T
        jac_pos, jac_rot = self._jacobians(frame)
        return np.einsum("nij,ni->nj", jac_pos, force) + np.einsum("nij,ni->nj", jac_rot, moment)

    def _reference(self, target_quat: tuple[float, float, float, float]) -> tuple[FloatArray, FloatArray]:
        """An impedance actuator's reference orientation as the controller uses it every substep:
        its inverse (1, 4) and its matrix (3, 3), made on first use."""
        reference = self._references.get(target_quat)
        if reference is None:
            quat = np.array([target_quat], dtype=np.float64)
            reference = self._references[target_quat] = (quat_conjugate(quat), quat_to_mat(quat)[0])
        return reference

    def _jacobians(self, frame: _Frame) -> tuple[FloatArray, FloatArray]:
        """(n, 3, ndof) translational and rotational Jacobians of a frame on the robot."""
        q = self._joints()[0]
        ndof = len(self._movable)
        jac_pos, jac_rot = np.zeros((self.num_worlds, 3, ndof)), np.zeros((self.num_worlds, 3, ndof))
        zero = [0.0] * ndof
        for w, c in enumerate(self._clients):
            lin, ang = c.calculateJacobian(
                self._robot, frame.link, frame.pos.tolist(), q[w].tolist(), zero, zero
            )
            # A free base adds six columns in front of the joints'.
            jac_pos[w] = np.asarray(lin)[:, -ndof:]
            jac_rot[w] = np.asarray(ang)[:, -ndof:]
        return jac_pos, jac_rot

    def _thrust_body_rate(
        self, act: ThrustBodyRateCfg, u: FloatArray, gain: FloatArray
    ) -> tuple[int, FloatArray, FloatArray, FloatArray]:
        """A motor along the frame's z axis and a proportional rate loop about its axes, as world vectors;
        ``gain`` (n, 4) scales the thrust and each axis' loop (randomized times identified)."""
        state = self._frame_state(act.frame)
        n = self.num_worlds
        thrust = gain[:, 0] * np.clip(u[:, 0], 0.0, act.max_thrust)
        rate = quat_rotate_inverse(state.quat, state.angvel)
        limit = np.asarray(act.max_torque)
        moment = np.clip(gain[:, 1:] * np.asarray(act.rate_gain) * (u[:, 1:] - rate), -limit, limit)
        body_force = np.zeros((n, 3))
        body_force[:, 2] = thrust
        # Applied in the world frame: PyBullet's link-frame option reads a base's forces inconsistently.
        return (
            self._frames[act.frame].link,
            quat_rotate(state.quat, body_force),
            state.pos,
            quat_rotate(state.quat, moment),
        )

    def _gravity_torques(self) -> FloatArray:
        """(n, ndof) joint torques holding the arm against gravity at rest (MuJoCo's ``gravcomp``)."""
        q = self._joints()[0]
        zero = [0.0] * len(self._movable)
        return np.array(
            [
                c.calculateInverseDynamics(self._robot, q[w].tolist(), zero, zero)
                for w, c in enumerate(self._clients)
            ]
        )

    def _gravity_forces(self) -> list[tuple[int, int, FloatArray, FloatArray]]:
        """Upward forces at every link's centre of mass cancelling its weight, for a free-base robot."""
        n, body = self.num_worlds, self._robot
        mass = self._nominal.mass[self._mass_parts][None] * self._scales[:, :1]
        links = [link for _, link in (self._nominal.links[k] for k in self._mass_parts)]
        com = np.zeros((n, len(links), 3))
        for w, c in enumerate(self._clients):
            com[w, 0] = c.getBasePositionAndOrientation(body)[0]
            if len(links) > 1:
                com[w, 1:] = [s[0] for s in c.getLinkStates(body, links[1:], computeForwardKinematics=1)]
        lift = np.zeros((n, len(links), 3))
        lift[..., 2] = mass * GRAVITY
        return [(body, link, lift[:, i], com[:, i]) for i, link in enumerate(links)]

    def _check_stability(self) -> None:
        """Mark worlds whose state is non-finite or beyond MuJoCo's bound, and rebuild them."""
        parts = list(self._joints())
        for name in self._free:
            s = self._frame_state(name)
            parts += [s.pos, s.quat, s.linvel, s.angvel]
        state = np.concatenate(parts, axis=1)
        diverged = ~np.isfinite(state) | (np.abs(state) >= MAX_STATE)
        self._unstable = np.asarray(diverged.any(axis=1))
        ids = np.flatnonzero(self._unstable)
        for w in ids.tolist():
            # A state reset does not clear a NaN from PyBullet's collision structures (a reset cube
            # then falls through the ground); a new server is clean.
            self._clients[w].disconnect()
            self._clients[w] = self._build_world()
            self._markers[w] = {}
            self._configure(w)
        if len(ids):
            self.reset_worlds(ids)

    def unstable_worlds(self) -> BoolArray:
        return self._unstable

    # -- rendering ---------------------------------------------------------------------------
    def render(
        self, world: int, width: int, height: int, camera: CameraCfg, markers: Sequence[Marker] = ()
    ) -> npt.NDArray[np.uint8]:
        c = self._clients[world]
        self._place_markers(world, markers)
        lookat = np.asarray(camera.lookat, dtype=np.float64)
        if camera.track_frame is not None:
            lookat = self.frame_pos(camera.track_frame)[world]
        # MuJoCo's orbit camera: it looks along (cos el cos az, cos el sin az, sin el) at the point.
        az, el = np.radians(camera.azimuth), np.radians(camera.elevation)
        forward = np.array([np.cos(el) * np.cos(az), np.cos(el) * np.sin(az), np.sin(el)])
        eye = lookat - camera.distance * forward
        up = [0.0, 0.0, 1.0] if abs(forward[2]) < 0.999 else [np.cos(az), np.sin(az), 0.0]
        view = c.computeViewMatrix(eye.tolist(), lookat.tolist(), up)
        proj = c.computeProjectionMatrixFOV(FOVY, width / height, 0.01, 100.0)
        image = c.getCameraImage(width, height, view, proj, shadow=0, renderer=p.ER_TINY_RENDERER)[2]
        return np.asarray(image, dtype=np.uint8).reshape(height, width, 4)[:, :, :3].copy()

    def render_view(
        self, world: int, view: CameraView, markers: Sequence[Marker] = ()
    ) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.float32] | None]:
        c = self._clients[world]
        self._place_markers(world, markers)
        eye, forward, up = view_axes(view)
        # MuJoCo's clipping planes for the same scene would depend on its extent; these cover a room.
        near, far = 0.01, 100.0
        matrix = c.computeViewMatrix(eye.tolist(), (eye + forward).tolist(), up.tolist())
        proj = c.computeProjectionMatrixFOV(view.fovy, view.width / view.height, near, far)
        _, _, rgba, depth_buffer, _ = c.getCameraImage(
            view.width, view.height, matrix, proj, shadow=0, renderer=p.ER_TINY_RENDERER
        )
        rgb = np.asarray(rgba, dtype=np.uint8).reshape(view.height, view.width, 4)[:, :, :3].copy()
        if not view.depth:
            return rgb, None
        # OpenGL's depth buffer in [0, 1] back to distance along the optical axis (m).
        z = np.asarray(depth_buffer, dtype=np.float64).reshape(view.height, view.width)
        return rgb, (far * near / (far - (far - near) * z)).astype(np.float32)

    def _place_markers(self, world: int, markers: Sequence[Marker]) -> None:
        """Move visual-only spheres to the markers, creating those a world lacks."""
        c, pool = self._clients[world], self._markers[world]
        used: dict[tuple[float, tuple[float, ...]], int] = {}
        for marker in markers:
            key = (marker.radius, tuple(marker.rgba))
            bodies = pool.setdefault(key, [])
            i = used.get(key, 0)
            if i == len(bodies):
                shape = c.createVisualShape(p.GEOM_SPHERE, radius=marker.radius, rgbaColor=marker.rgba)
                bodies.append(c.createMultiBody(0.0, -1, shape, basePosition=marker.pos))
            c.resetBasePositionAndOrientation(bodies[i], marker.pos, (0.0, 0.0, 0.0, 1.0))
            used[key] = i + 1
        for key, bodies in pool.items():
            for body in bodies[used.get(key, 0) :]:
                c.resetBasePositionAndOrientation(body, _HIDDEN, (0.0, 0.0, 0.0, 1.0))

    def close(self) -> None:
        for c in self._clients:
            c.disconnect()
        self._clients = []
