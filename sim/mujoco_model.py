"""Compile a scene description into one MuJoCo model.

A URDF robot is read by MuJoCo's own URDF importer, the same file PyBullet loads; controllers
become MuJoCo actuators so that they run at the physics rate inside the engine (and inside
``mujoco.batch``'s thread pool) with no Python per substep:

- Cartesian impedance: six position actuators with a site transmission relative to a reference
  site; MuJoCo applies ``J^T (kp (target - x) - kd xdot)``. Gravity compensation is MuJoCo's
  ``gravcomp``.
- Thrust and body rates: a motor along the body z axis and three velocity actuators about the
  body axes, i.e. a proportional rate loop.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

import mujoco
import numpy as np

from robolearn.sim.backend import CameraView, SimError, view_axes
from robolearn.sim.scene import (
    CartesianImpedanceCfg,
    IdentifiedDynamics,
    JointPositionCfg,
    JointVelocityCfg,
    MjcfAsset,
    SceneCfg,
    ThrustBodyRateCfg,
    UrdfAsset,
)
from robolearn.sim.transforms import quat_to_mat

_SITE = mujoco.mjtObj.mjOBJ_SITE


@dataclass(frozen=True)
class FrameIndex:
    """Where a frame's pose and velocity sit in ``sensordata``."""

    pos: int
    quat: int
    linvel: int
    angvel: int


@dataclass(frozen=True)
class ModelIndex:
    """Addresses the backends need to read and write a compiled model."""

    frames: dict[str, FrameIndex]
    joint_qpos: dict[str, int]
    joint_dof: dict[str, int]
    free_qpos: dict[str, int]
    """First qpos address of each free joint, by entity (object name or robot name)."""
    free_dof: dict[str, int]
    home_qpos: np.ndarray


def load_robot_spec(asset: UrdfAsset | MjcfAsset, visual_meshes: bool = False) -> mujoco.MjSpec:
    """The robot file as a MuJoCo spec (URDF through MuJoCo's importer); raises :class:`SimError`."""
    path = Path(asset.path)
    if not path.is_file():
        raise SimError(f"robot model file not found: {path}")
    try:
        if isinstance(asset, MjcfAsset):
            return mujoco.MjSpec.from_file(str(path))
        # MuJoCo has no ROS package resolver; pybullet_data's URDFs use package:// for their own folder.
        text = path.read_text().replace("package://", "")
        if visual_meshes:
            # MuJoCo's URDF importer reads its compiler options from a <mujoco> element in the file.
            keep = r'\1<mujoco><compiler discardvisual="false"/></mujoco>'
            text = re.sub(r"(<robot\b[^>]*>)", keep, text, count=1)
        spec = mujoco.MjSpec.from_string(text)
    except (ValueError, OSError) as exc:  # MuJoCo reports parse errors as ValueError
        raise SimError(f"cannot read robot model {path}: {exc}".replace("\n", " ")) from exc
    spec.meshdir = str(path.parent)
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    return spec


def _add_frame_sensors(spec: mujoco.MjSpec, site: str) -> None:
    for kind in ("framepos", "framequat", "framelinvel", "frameangvel"):
        spec.add_sensor(
            name=f"{site}:{kind}",
            type=getattr(mujoco.mjtSensor, f"mjSENS_{kind.upper()}"),
            objtype=_SITE,
            objname=site,
        )


def _add_actuators(spec: mujoco.MjSpec, scene: SceneCfg) -> None:
    for i, act in enumerate(scene.robot.actuators):
        if isinstance(act, CartesianImpedanceCfg):
            ref_pos, ref_rot = f"ref_pos_{i}", f"ref_rot_{i}"
            spec.worldbody.add_site(name=ref_pos)
            spec.worldbody.add_site(name=ref_rot, quat=list(act.target_quat))
            for axis in range(6):
                gear = [0.0] * 6
                gear[axis] = 1.0
                rot = axis >= 3
                a = spec.add_actuator(
                    name=f"{act.frame}_cart{axis}",
                    trntype=mujoco.mjtTrn.mjTRN_SITE,
                    target=act.frame,
                    refsite=ref_rot if rot else ref_pos,
                    gear=gear,
                )
                a.set_to_position(kp=act.kp_rot if rot else act.kp_pos, kv=act.kd_rot if rot else act.kd_pos)
                limit = act.max_torque if rot else act.max_force
                a.forcelimited = True
                a.forcerange = [-limit, limit]
        elif isinstance(act, JointPositionCfg | JointVelocityCfg):
            for joint in act.joints:
                a = spec.add_actuator(name=f"{joint}_servo", trntype=mujoco.mjtTrn.mjTRN_JOINT, target=joint)
                if isinstance(act, JointPositionCfg):
                    a.set_to_position(kp=act.kp, kv=act.kd)
                else:
                    a.set_to_velocity(kv=act.kv)
                a.forcelimited = True
                a.forcerange = [-act.max_effort, act.max_effort]
        elif isinstance(act, ThrustBodyRateCfg):
            thrust = spec.add_actuator(
                name="thrust", trntype=mujoco.mjtTrn.mjTRN_SITE, target=act.frame, gear=[0, 0, 1, 0, 0, 0]
            )
            thrust.set_to_motor()
            thrust.ctrllimited = True
            thrust.ctrlrange = [0.0, act.max_thrust]
            for axis in range(3):
                gear = [0.0] * 6
                gear[3 + axis] = 1.0
                a = spec.add_actuator(
                    name=f"rate{'xyz'[axis]}", trntype=mujoco.mjtTrn.mjTRN_SITE, target=act.frame, gear=gear
                )
                a.set_to_velocity(kv=act.rate_gain[axis])
                a.forcelimited = True
                a.forcerange = [-act.max_torque[axis], act.max_torque[axis]]


def apply_identified(
    spec: mujoco.MjSpec, dyn: IdentifiedDynamics, robot_bodies: set[str], objects: Collection[str] = ()
) -> None:
    """Write identified dynamics into a spec holding the robot's actuators (all but the command delay);
    ``objects`` names the free objects the object scales apply to.

    Scales are taken from the spec's current values, so apply once per spec (``robolearn sysid``
    applies them to a fresh copy for every candidate it simulates).
    """
    joints = {j.name: j for j in spec.joints}
    actuators = {a.name: a for a in spec.actuators}
    named = (dyn.joint_armature | dyn.joint_damping | dyn.joint_frictionloss).keys()
    for name in named:
        if name not in joints:
            raise SimError(
                f"identified dynamics name joint {name!r}, which the robot lacks; joints: {sorted(joints)}"
            )
    for name in dyn.actuator_gain_scale:
        if name not in actuators:
            raise SimError(
                f"identified dynamics name actuator {name!r}, which the scene lacks; "
                f"actuators: {sorted(actuators)}"
            )
    for name, value in dyn.joint_armature.items():
        joints[name].armature = value
    for name, value in dyn.joint_damping.items():
        joints[name].damping = [value, 0.0, 0.0]
    for name, value in dyn.joint_frictionloss.items():
        joints[name].frictionloss = value
    for name, scale in dyn.actuator_gain_scale.items():
        act = actuators[name]
        # The whole output scales: force = gain * ctrl + bias(q, qdot), as domain randomization's gain.
        act.gainprm = [act.gainprm[0] * scale, *act.gainprm[1:]]
        act.biasprm = [*(b * scale for b in act.biasprm[:3]), *act.biasprm[3:]]
    if dyn.mass_scale != 1.0:
        for body in spec.bodies:
            if body.name not in robot_bodies or body.name == "world":
                continue
            if body.explicitinertial or body.mass > 0:
                body.mass *= dyn.mass_scale
                body.inertia = [i * dyn.mass_scale for i in body.inertia]
                body.fullinertia = [i * dyn.mass_scale for i in body.fullinertia]
            for geom in body.geoms:  # links whose inertia MuJoCo infers from their shapes
                geom.mass *= dyn.mass_scale
                geom.density *= dyn.mass_scale
    for body in spec.bodies:
        is_robot = body.name in robot_bodies and body.name != "world"
        friction = dyn.robot_friction_scale if is_robot else dyn.object_friction_scale
        if not is_robot and body.name not in objects:
            continue
        for geom in body.geoms:
            if not is_robot:
                geom.mass *= dyn.object_mass_scale  # an object's inertia follows its box's mass
            if friction != 1.0:
                # MuJoCo takes the larger coefficient of a contact's two geoms unless one has priority:
                # the scaled side decides, so a lowered coefficient is not hidden by the other side's.
                geom.friction = [geom.friction[0] * friction, *geom.friction[1:]]
                geom.priority = 1
    if dyn.payload_link:
        if dyn.payload_link not in robot_bodies:
            raise SimError(f"payload link {dyn.payload_link!r} is not a link of the robot")
        # A small sphere's inertia keeps the payload a physical body however light it is fitted.
        inertia = 0.4 * dyn.payload_mass * 0.03**2
        spec.body(dyn.payload_link).add_body(
            name="payload", mass=dyn.payload_mass, inertia=[inertia] * 3, explicitinertial=True
        )


def build_spec(scene: SceneCfg) -> mujoco.MjSpec:
    """The scene as a MuJoCo spec, before compiling (system identification edits and recompiles it)."""
    robot = scene.robot
    spec = load_robot_spec(robot.asset, robot.visual_meshes)
    spec.option.timestep = scene.physics_dt
    world = spec.worldbody
    root = world.first_body()
    if root is None:
        raise SimError(f"robot model {robot.asset.path} has no bodies")
    root.pos = list(robot.base_pos)
    if not robot.fixed_base and isinstance(robot.asset, UrdfAsset):
        root.add_freejoint(name=f"{robot.name}_root")

    body_names = {b.name for b in spec.bodies}
    for body in spec.bodies:
        if body.name != "world" and robot.gravity_compensation:
            body.gravcomp = 1.0
    joint_names = {j.name for j in spec.joints}
    for name in robot.init_joint_pos | robot.joint_damping:
        if name not in joint_names:
            raise SimError(f"robot {robot.name} has no joint {name!r}; joints: {sorted(joint_names - {''})}")
    for joint in spec.joints:
        if joint.name in robot.joint_damping:
            joint.damping = [robot.joint_damping[joint.name], 0.0, 0.0]
        if robot.joint_armature and joint.type == mujoco.mjtJoint.mjJNT_HINGE:
            joint.armature = robot.joint_armature
    if robot.collision_friction is not None:
        for geom in spec.geoms:
            geom.friction = list(robot.collision_friction)

    for frame in robot.frames:
        if frame.link not in body_names:
            raise SimError(f"frame {frame.name!r} names link {frame.link!r}, which robot {robot.name} lacks")
        spec.body(frame.link).add_site(name=frame.name, pos=list(frame.pos), quat=list(frame.quat))
        _add_frame_sensors(spec, frame.name)
    if not robot.fixed_base:
        root.add_site(name=robot.name)
        _add_frame_sensors(spec, robot.name)

    for obj in scene.objects:
        body = world.add_body(name=obj.name, pos=list(obj.pos))
        body.add_freejoint(name=f"{obj.name}_root")
        body.add_geom(
            type=mujoco.mjtGeom.mjGEOM_BOX,
            size=list(obj.half_size),
            mass=obj.mass,
            rgba=list(obj.rgba),
            friction=[obj.friction, 0.005, 0.0001],
            condim=4,
        )
        body.add_site(name=obj.name)
        _add_frame_sensors(spec, obj.name)

    if scene.ground:
        tex = spec.add_texture(
            name="grid",
            type=mujoco.mjtTexture.mjTEXTURE_2D,
            builtin=mujoco.mjtBuiltin.mjBUILTIN_CHECKER,
            width=256,
            height=256,
            rgb1=[0.25, 0.3, 0.35],
            rgb2=[0.35, 0.4, 0.45],
        )
        mat = spec.add_material(name="grid", texrepeat=[8, 8])
        mat.textures[mujoco.mjtTextureRole.mjTEXROLE_RGB] = tex.name
        world.add_geom(
            name="ground",
            type=mujoco.mjtGeom.mjGEOM_PLANE,
            size=[0.0, 0.0, 0.05],
            material="grid",
            friction=[scene.ground_friction, 0.005, 0.0001],
        )
        world.add_light(pos=[0, 0, 4], dir=[0, 0, -1], castshadow=False)
    if isinstance(robot.asset, MjcfAsset) and robot.asset.body_wrenches:
        # An acceleration-stage sensor makes mj_forward run mj_rnePostConstraint, which fills cfrc_ext;
        # a user sensor computes nothing else (with no mjcb_sensor installed it reads zero).
        acc = mujoco.mjtStage.mjSTAGE_ACC
        spec.add_sensor(name="body_wrenches", type=mujoco.mjtSensor.mjSENS_USER, needstage=acc, dim=1)
    _add_actuators(spec, scene)
    _add_cameras(spec, scene)
    if robot.identified is not None:
        apply_identified(spec, robot.identified, body_names, [o.name for o in scene.objects])
    spec.visual.global_.offwidth = 1280
    spec.visual.global_.offheight = 960
    return spec


TASK_CAMERA_PREFIX = "task_"
"""Model cameras made from a task's cameras are named ``task_<name>``."""


def _add_cameras(spec: mujoco.MjSpec, scene: SceneCfg) -> None:
    """The task's cameras as MuJoCo cameras on the bodies their frames belong to (a camera looks
    along its -z axis with +y up in the image, hence the axes below)."""
    robot = scene.robot
    identity = ((0.0, 0.0, 0.0), (1.0, 0.0, 0.0, 0.0))
    mounts = {f.name: (f.link, (f.pos, f.quat)) for f in robot.frames}
    mounts |= {obj.name: (obj.name, identity) for obj in scene.objects}
    if not robot.fixed_base:
        root = spec.worldbody.first_body()
        mounts[robot.name] = (root.name, identity)
    for name, cam in scene.cameras:
        view = CameraView(cam.pos, cam.target, cam.up, cam.fovy, cam.width, cam.height, cam.depth)
        eye, forward, up = view_axes(view)
        axes = np.column_stack([np.cross(forward, up), up, -forward])
        body, (pos, quat) = spec.worldbody, identity
        if cam.frame is not None:
            if cam.frame not in mounts:
                known = sorted(mounts)
                raise SimError(f"camera {name!r} is on an unknown frame {cam.frame!r}; frames: {known}")
            link, (pos, quat) = mounts[cam.frame]
            body = spec.body(link)
        mount = quat_to_mat(np.asarray([quat], dtype=np.float64))[0]
        cam_quat = np.empty(4)
        mujoco.mju_mat2Quat(cam_quat, (mount @ axes).ravel())
        body.add_camera(
            name=TASK_CAMERA_PREFIX + name,
            pos=list(np.asarray(pos) + mount @ eye),
            quat=list(cam_quat),
            fovy=cam.fovy,
        )


def build_model(scene: SceneCfg) -> tuple[mujoco.MjModel, ModelIndex]:
    """Compile the scene; return the model and the addresses of frames and joints."""
    robot = scene.robot
    spec = build_spec(scene)
    try:
        model = spec.compile()
    except ValueError as exc:
        raise SimError(f"cannot compile the scene of robot {robot.name}: {exc}".replace("\n", " ")) from exc

    frames: dict[str, dict[str, int]] = {}
    for i in range(model.nsensor):
        site, _, kind = model.sensor(i).name.partition(":")
        frames.setdefault(site, {})[kind] = int(model.sensor_adr[i])
    kinds = ("framepos", "framequat", "framelinvel", "frameangvel")
    # Other sensors (an MJCF file's own, body_wrenches) are not frames.
    frame_index = {
        s: FrameIndex(*(k[kind] for kind in kinds)) for s, k in frames.items() if set(kinds) <= k.keys()
    }
    joint_qpos: dict[str, int] = {}
    joint_dof: dict[str, int] = {}
    free_qpos: dict[str, int] = {}
    free_dof: dict[str, int] = {}
    for j in range(model.njnt):
        name = model.joint(j).name
        if model.jnt_type[j] == mujoco.mjtJoint.mjJNT_FREE:
            entity = name.removesuffix("_root") or robot.name
            free_qpos[entity], free_dof[entity] = int(model.jnt_qposadr[j]), int(model.jnt_dofadr[j])
        else:
            joint_qpos[name], joint_dof[name] = int(model.jnt_qposadr[j]), int(model.jnt_dofadr[j])
    home = model.qpos0.copy()
    for name, value in robot.init_joint_pos.items():
        home[joint_qpos[name]] = value
    return model, ModelIndex(frame_index, joint_qpos, joint_dof, free_qpos, free_dof, home)
