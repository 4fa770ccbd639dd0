"""A serial arm read from its robot description file (URDF or MJCF): joints, limits, tool, gripper.

MuJoCo's compiler reads both formats (the same importer the MuJoCo backend uses), with fixed links
kept as bodies so that every URDF link can be named. From the kinematic tree:

- the **arm** is the chain of hinge and slide joints from the base down to the first body where
  the tree branches into several jointed subtrees (the hand with its fingers) or ends;
- the **end-effector link** is, unless named, a jointless link below that body whose name says
  tool centre point (``tcp``, ``grasp``, ``tool``, ``ee``, ``end_effector``), else that body;
- the **gripper** is, unless named, every other joint below the last arm joint (the fingers).

Limits come from the file: position ranges (MuJoCo ``range``, URDF ``lower``/``upper``), effort
(``actuatorfrcrange``, URDF ``effort``) and, from a URDF, velocity. :class:`ArmKinematics` gives
the tool position of joint positions, and :func:`reachable_box` the box the tool reaches above
the floor, the starting point of a workspace limit for the user to review.
"""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import mujoco
import numpy as np

from robolearn.sim.backend import FloatArray, SimError
from robolearn.sim.mujoco_model import load_robot_spec
from robolearn.sim.scene import MjcfAsset, UrdfAsset

_TOOL_NAME = re.compile(r"(tcp|grasp|tool|(^|_)ee($|_)|end_?effector|flange)", re.IGNORECASE)
_JOINT_KINDS = {int(mujoco.mjtJoint.mjJNT_HINGE): "revolute", int(mujoco.mjtJoint.mjJNT_SLIDE): "prismatic"}


@dataclass(frozen=True)
class JointInfo:
    """One joint of the file with its limits (rad or m)."""

    name: str
    """Joint name in the file."""
    kind: Literal["revolute", "prismatic"]
    """Hinge or slide."""
    low: float
    """Lower position limit (rad or m); -pi for an unlimited (continuous) hinge."""
    high: float
    """Upper position limit; pi for an unlimited hinge."""
    limited: bool
    """The file gives a position range."""
    max_velocity: float | None
    """Velocity limit (rad/s or m/s) from a URDF's ``<limit velocity>``; None where the file has none."""
    max_effort: float | None
    """Torque or force limit (N m or N); None where the file has none."""


@dataclass(frozen=True)
class ArmDescription:
    """A serial arm as its description file gives it."""

    path: Path
    """The URDF or MJCF file."""
    joints: tuple[JointInfo, ...]
    """The arm's joints from the base to the tool, in chain order."""
    ee_link: str
    """The link (body) whose origin is the tool centre point."""
    gripper: tuple[JointInfo, ...]
    """The gripper's joints (empty for an arm without one)."""

    @property
    def joint_names(self) -> tuple[str, ...]:
        return tuple(j.name for j in self.joints)

    @property
    def gripper_names(self) -> tuple[str, ...]:
        return tuple(j.name for j in self.gripper)

    @property
    def asset(self) -> UrdfAsset | MjcfAsset:
        """The file as a scene asset."""
        return MjcfAsset(self.path) if self.path.suffix.lower() == ".xml" else UrdfAsset(self.path)


def _compile(asset: UrdfAsset | MjcfAsset) -> tuple[mujoco.MjSpec, mujoco.MjModel]:
    spec = load_robot_spec(asset)
    spec.compiler.fusestatic = False  # keep every link, so tools and flanges can be named
    try:
        return spec, spec.compile()
    except ValueError as exc:
        raise SimError(f"cannot compile robot model {asset.path}: {exc}".replace("\n", " ")) from exc


def _urdf_velocity_limits(path: Path) -> dict[str, float]:
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError):
        return {}
    limits = {}
    for joint in root.iter("joint"):
        limit = joint.find("limit")
        if limit is not None and limit.get("velocity") is not None:
            try:
                limits[joint.get("name", "")] = float(limit.get("velocity", ""))
            except ValueError:
                continue
    return limits


def _joint_info(model: mujoco.MjModel, j: int, velocity: dict[str, float]) -> JointInfo:
    name = model.joint(j).name
    limited = bool(model.jnt_limited[j])
    low, high = (float(v) for v in model.jnt_range[j]) if limited else (-math.pi, math.pi)
    effort = float(model.jnt_actfrcrange[j][1]) if model.jnt_actfrclimited[j] else None
    kind = _JOINT_KINDS[int(model.jnt_type[j])]
    return JointInfo(name, kind, low, high, limited, velocity.get(name), effort)  # type: ignore[arg-type]


def read_arm(
    path: str | Path, ee_link: str | None = None, gripper_joints: tuple[str, ...] | None = None
) -> ArmDescription:
    """Read a serial arm from a URDF (``.urdf``) or MJCF (``.xml``) file (see the module docstring).

    ``ee_link`` names the tool link and ``gripper_joints`` the gripper's joints where the defaults
    guess wrong; a name the file lacks raises :class:`SimError` listing the file's names.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".urdf", ".xml"):
        raise SimError(f"robot description {path}: expected a .urdf or an MJCF .xml file")
    asset: UrdfAsset | MjcfAsset = MjcfAsset(path) if suffix == ".xml" else UrdfAsset(path)
    _, model = _compile(asset)
    velocity = _urdf_velocity_limits(path) if suffix == ".urdf" else {}
    bodies = [model.body(b).name for b in range(model.nbody)]
    parent = [int(p) for p in model.body_parentid]
    moving = [j for j in range(model.njnt) if int(model.jnt_type[j]) in _JOINT_KINDS]
    if not moving:
        raise SimError(f"robot description {path} has no hinge or slide joints")
    joints_of: dict[int, list[int]] = {}
    for j in moving:
        joints_of.setdefault(int(model.jnt_bodyid[j]), []).append(j)

    def ancestors(b: int) -> list[int]:
        chain = []
        while b > 0:
            chain.append(b)
            b = parent[b]
        return chain[::-1]

    def subtree(b: int) -> list[int]:
        return [c for c in range(model.nbody) if b in ancestors(c)]

    def jointed(b: int) -> bool:
        return any(c in joints_of for c in subtree(b))

    def moves(c: int, below: int) -> bool:
        """A joint between body ``below`` and its descendant ``c`` (so ``c`` is no rigid tool)."""
        chain = ancestors(c)
        return any(x in joints_of for x in chain[chain.index(below) + 1 :])

    if ee_link is not None:
        if ee_link not in bodies:
            links = ", ".join(bodies[1:])
            raise SimError(f"robot description {path} has no link {ee_link!r}; links: {links}")
        path_bodies = ancestors(bodies.index(ee_link))
    else:
        b, path_bodies = 0, []
        while True:
            children = [c for c in range(model.nbody) if parent[c] == b and c != b and jointed(c)]
            if len(children) != 1:
                break
            b = children[0]
            path_bodies.append(b)
        tools = [c for c in subtree(b) if c != b and _TOOL_NAME.search(bodies[c]) and not moves(c, b)]
        ee_link = bodies[tools[0]] if tools else bodies[b]
    chain = [j for b in path_bodies for j in joints_of.get(b, [])]
    names = [model.joint(j).name for j in moving]
    if gripper_joints is not None:
        unknown = [g for g in gripper_joints if g not in names]
        if unknown:
            raise SimError(f"robot description {path} has no joints {unknown}; joints: {', '.join(names)}")
        grip = [names.index(g) for g in gripper_joints]
        gripper = [moving[i] for i in grip]
        chain = [j for j in chain if j not in gripper]
    else:
        last = int(model.jnt_bodyid[chain[-1]]) if chain else 0
        gripper = [j for j in moving if j not in chain and int(model.jnt_bodyid[j]) in subtree(last)]
    if not chain:
        raise SimError(f"robot description {path}: no joints between the base and link {ee_link!r}")
    return ArmDescription(
        path=path,
        joints=tuple(_joint_info(model, j, velocity) for j in chain),
        ee_link=ee_link,
        gripper=tuple(_joint_info(model, j, velocity) for j in gripper),
    )


class ArmKinematics:
    """Tool position of arm joint positions: MuJoCo's forward kinematics of the description file.

    The base stands at ``base_pos``; joints other than the arm's stay at their file defaults (the
    tool link is above the gripper, so they do not move it).
    """

    def __init__(
        self,
        asset: UrdfAsset | MjcfAsset,
        joints: tuple[str, ...],
        link: str,
        offset: tuple[float, float, float] = (0.0, 0.0, 0.0),
        base_pos: tuple[float, float, float] = (0.0, 0.0, 0.0),
    ) -> None:
        spec = load_robot_spec(asset)
        spec.compiler.fusestatic = False
        if link not in {b.name for b in spec.bodies}:
            raise SimError(f"robot model {asset.path} has no link {link!r} to put the tool on")
        spec.body(link).add_site(name="_tool", pos=list(offset))
        try:
            self.model = spec.compile()
        except ValueError as exc:
            raise SimError(f"cannot compile robot model {asset.path}: {exc}".replace("\n", " ")) from exc
        self.data = mujoco.MjData(self.model)
        try:
            self.qpos_adr = np.array([self.model.joint(j).qposadr[0] for j in joints], dtype=np.int64)
        except KeyError as exc:
            raise SimError(f"robot model {asset.path} has no joint {exc.args[0]!r}") from None
        self.site = self.model.site("_tool").id
        self.base = np.asarray(base_pos, dtype=np.float64)

    def tool_position(self, joint_pos: FloatArray) -> FloatArray:
        """(3,) tool position (m, world frame) of the arm's joint positions (rad or m)."""
        self.data.qpos[self.qpos_adr] = joint_pos
        mujoco.mj_kinematics(self.model, self.data)
        return self.data.site_xpos[self.site].copy() + self.base

    def tool_quat(self, joint_pos: FloatArray) -> tuple[float, float, float, float]:
        """Tool orientation (w, x, y, z, world frame) at the arm's joint positions."""
        self.tool_position(joint_pos)
        quat = np.zeros(4)
        mujoco.mju_mat2Quat(quat, self.data.site_xmat[self.site])
        w, x, y, z = (round(float(v), 6) for v in quat)
        return (w, x, y, z)

    def tool_positions(self, joint_pos: FloatArray) -> FloatArray:
        """(n, 3) tool positions of (n, k) joint positions."""
        return np.stack([self.tool_position(q) for q in joint_pos])


def reachable_box(
    desc: ArmDescription,
    samples: int = 4000,
    floor: float = 0.05,
    quantiles: tuple[float, float] = (0.05, 0.95),
    seed: int = 0,
) -> tuple[tuple[float, float, float], tuple[float, float, float]]:
    """A box of tool positions the arm reaches above ``floor`` (m, base frame): the ``quantiles`` of
    tool positions at joint positions drawn uniformly within the file's limits. A first guess of a
    workspace, to be narrowed by the user to the cell the robot works in."""
    kin = ArmKinematics(desc.asset, desc.joint_names, desc.ee_link)
    rng = np.random.default_rng(seed)
    low = np.array([j.low for j in desc.joints])
    high = np.array([j.high for j in desc.joints])
    points = kin.tool_positions(rng.uniform(low, high, (samples, len(desc.joints))))
    points = points[points[:, 2] >= floor]
    if len(points) < 10:
        raise SimError(f"robot description {desc.path}: the tool hardly reaches above z = {floor} m")
    lo, hi = np.quantile(points, quantiles, axis=0)
    lo[2] = max(lo[2], floor)
    return tuple(round(float(v), 3) for v in lo), tuple(round(float(v), 3) for v in hi)  # type: ignore[return-value]
