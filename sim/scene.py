"""What a simulator is asked to build: a robot, scene objects, frames and controllers.

These descriptions are engine-neutral. Every backend builds the same scene from them, so a task
never names a simulator. Robots come from one description file (URDF) that both engines read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class UrdfAsset:
    """A robot description file read by every engine."""

    path: Path
    """The URDF file; mesh paths inside it are resolved relative to its folder."""


@dataclass(frozen=True)
class MjcfAsset:
    """A MuJoCo-only model file (used for Gymnasium's models in benchmarks)."""

    path: Path
    """The MJCF XML file."""
    body_wrenches: bool = False
    """Keep each body's external wrench (MuJoCo's ``cfrc_ext``, read with ``mj_field``) current at every
    observed state. MuJoCo computes it only for acceleration-stage sensors, so one is added, and the
    backends then also run the acceleration stage at the new state after each control step."""


@dataclass(frozen=True)
class FrameCfg:
    """A named frame rigidly attached to a link, whose pose and velocity tasks observe."""

    name: str
    """Name the task uses to read the frame."""
    link: str
    """The link (URDF link name, or MJCF body name) the frame is attached to."""
    pos: tuple[float, float, float] = (0.0, 0.0, 0.0)
    """Offset from the link origin, in the link frame (m)."""
    quat: tuple[float, float, float, float] = (1.0, 0.0, 0.0, 0.0)
    """Orientation relative to the link frame (w, x, y, z)."""


@dataclass(frozen=True)
class CartesianImpedanceCfg:
    """Cartesian impedance control of a frame: a spring-damper pulls it to a target pose.

    Inputs (6): target position (m) in the world, then target rotation vector (rad) relative to
    ``target_quat``. The wrench is mapped to joint torques through the frame's Jacobian at the
    physics rate; gravity is compensated. As in SERL's franka_sim operational-space controller.
    """

    frame: str
    """The controlled frame (the tool centre point)."""
    target_quat: tuple[float, float, float, float]
    """Nominal orientation of the frame in the world (w, x, y, z); rotation inputs are relative to it."""
    kp_pos: float = 600.0
    """Translational stiffness (N/m)."""
    kd_pos: float = 60.0
    """Translational damping (N s/m)."""
    kp_rot: float = 40.0
    """Rotational stiffness (N m/rad)."""
    kd_rot: float = 4.0
    """Rotational damping (N m s/rad)."""
    max_force: float = 100.0
    """Limit on each force component (N)."""
    max_torque: float = 20.0
    """Limit on each torque component (N m)."""


@dataclass(frozen=True)
class JointPositionCfg:
    """PD servo of joints to position targets. Inputs: one target (m or rad) per joint."""

    joints: tuple[str, ...]
    """Joints driven, in input order."""
    kp: float
    """Stiffness (N/m or N m/rad)."""
    kd: float
    """Damping (N s/m or N m s/rad)."""
    max_effort: float
    """Force or torque limit of each servo (N or N m)."""


@dataclass(frozen=True)
class JointVelocityCfg:
    """Velocity servo of joints. Inputs: one target (m/s or rad/s) per joint."""

    joints: tuple[str, ...]
    """Joints driven, in input order."""
    kv: float
    """Gain from velocity error to effort (N s/m or N m s/rad)."""
    max_effort: float
    """Force or torque limit of each servo (N or N m)."""


@dataclass(frozen=True)
class ThrustBodyRateCfg:
    """Collective thrust along the body z axis plus a body-rate loop closed at the physics rate.

    Inputs (4): collective thrust (N), then roll, pitch and yaw rate targets (rad/s) in the body
    frame. The rate loop is a proportional controller whose torque is limited per axis, standing
    in for the flight controller's inner loop (500 Hz on a Crazyflie).
    """

    frame: str
    """The body frame at the centre of mass."""
    max_thrust: float
    """Upper limit of the collective thrust (N); the lower limit is 0."""
    rate_gain: tuple[float, float, float]
    """Torque per rate error about body x, y, z (N m s/rad)."""
    max_torque: tuple[float, float, float]
    """Torque limits about body x, y, z (N m)."""


ActuatorCfg = CartesianImpedanceCfg | JointPositionCfg | JointVelocityCfg | ThrustBodyRateCfg


def actuator_width(cfg: ActuatorCfg) -> int:
    """Number of control inputs an actuator takes."""
    if isinstance(cfg, CartesianImpedanceCfg):
        return 6
    if isinstance(cfg, ThrustBodyRateCfg):
        return 4
    return len(cfg.joints)


@dataclass(frozen=True)
class IdentifiedDynamics:
    """Dynamics fitted on the real robot by system identification (``robolearn sysid``, issue 19).

    Values replace the description file's (armature, damping, dry friction per joint) or scale them
    (masses and inertias of the robot's links, actuator gains); a joint or actuator not named keeps
    the file's value. Every backend applies them (a payload: the MuJoCo ones only); the command
    delay is applied by the task's control loop, in whole control periods. The object and
    contact-friction scales describe the robot's surroundings (the cube it handles, the floor its
    tyres grip): the reality gap of issue 10.
    """

    joint_armature: dict[str, float] = field(default_factory=dict)
    """Reflected rotor inertia per joint (kg m^2 or kg)."""
    joint_damping: dict[str, float] = field(default_factory=dict)
    """Viscous damping per joint (N m s/rad or N s/m)."""
    joint_frictionloss: dict[str, float] = field(default_factory=dict)
    """Dry (Coulomb) friction per joint (N m or N)."""
    actuator_gain_scale: dict[str, float] = field(default_factory=dict)
    """Multiplier on an actuator's whole output (stiffness, damping, force per input), by the
    compiled model's actuator name (``<joint>_servo``, ``<frame>_cart<axis>``, or the MJCF file's)."""
    mass_scale: float = 1.0
    """Multiplier on the mass and inertia of every link of the robot."""
    payload_link: str = ""
    """The link carrying the payload (empty: no payload)."""
    payload_mass: float = 0.0
    """Point mass rigidly attached at the payload link's origin (kg)."""
    command_delay: float = 0.0
    """Time from a command to its effect (s)."""
    object_mass_scale: float = 1.0
    """Multiplier on the mass and inertia of every free object (the cube a task picks)."""
    object_friction_scale: float = 1.0
    """Multiplier on the sliding friction of the contacts free objects make (the cube's grip)."""
    robot_friction_scale: float = 1.0
    """Multiplier on the sliding friction of the contacts the robot's collision shapes make (a car's
    tyres on the ground, an arm's fingers). PyBullet multiplies the two sides' coefficients, so this
    scales every such contact; MuJoCo takes the larger side's, so a scaled side is given priority
    and its own scaled coefficient decides the contact (the same where it was the larger one, as
    for the cube and the car's tyres)."""


@dataclass(frozen=True)
class RobotCfg:
    """A robot: its description file, how it stands in the world and how it is driven."""

    name: str
    """Short name (shown in listings)."""
    asset: UrdfAsset | MjcfAsset
    """Where the kinematics, inertias and limits come from."""
    fixed_base: bool
    """True for a robot bolted to the world (an arm); False for a free-flying or driving base."""
    base_pos: tuple[float, float, float] = (0.0, 0.0, 0.0)
    """Nominal base position in the world (m)."""
    init_joint_pos: dict[str, float] = field(default_factory=dict)
    """Joint positions at reset (rad or m); joints not named start at 0."""
    joint_damping: dict[str, float] = field(default_factory=dict)
    """Viscous damping per joint (N m s/rad or N s/m)."""
    joint_armature: float = 0.0
    """Reflected rotor inertia added to every actuated hinge (kg m^2)."""
    frames: tuple[FrameCfg, ...] = ()
    """Frames tasks observe or control."""
    actuators: tuple[ActuatorCfg, ...] = ()
    """Controllers, in control-input order. Empty: the MJCF file's own actuators."""
    gravity_compensation: bool = False
    """Cancel gravity on the robot's links (a torque-controlled arm's firmware does this)."""
    collision_friction: tuple[float, float, float] | None = None
    """Sliding, torsional and rolling friction for the robot's collision shapes; None keeps the file's."""
    visual_meshes: bool = False
    """Also build the URDF's visual shapes (drawn only: no contacts, no mass). MuJoCo drops them by
    default; turn on for a robot whose look lives in visual meshes MuJoCo reads (STL, OBJ)."""
    identified: IdentifiedDynamics | None = None
    """Dynamics identified on the real robot (``robolearn sysid``), applied over the file's own."""
    arm_joints: tuple[str, ...] = ()
    """An arm's joints from base to tool, in the order joint states and joint commands list them
    (what :func:`robolearn.sim.robot_description.read_arm` reads from the file); empty for other robots."""
    gripper_joints: tuple[str, ...] = ()
    """An arm's gripper joints, each driven to an equal share of the commanded opening; empty: no gripper."""


@dataclass(frozen=True)
class BoxObjectCfg:
    """A free rigid box, such as the cube to pick."""

    name: str
    """Name tasks use; its frame is the box centre."""
    half_size: tuple[float, float, float]
    """Half extents (m)."""
    mass: float
    """Mass (kg)."""
    pos: tuple[float, float, float]
    """Nominal position of the centre (m)."""
    rgba: tuple[float, float, float, float] = (0.8, 0.2, 0.2, 1.0)
    """Colour for rendering."""
    friction: float = 1.0
    """Sliding friction coefficient."""


@dataclass(frozen=True)
class CameraCfg:
    """An orbit camera, the same parameters on every engine."""

    lookat: tuple[float, float, float]
    """Point the camera looks at (m)."""
    distance: float
    """Distance from the point (m)."""
    azimuth: float
    """Azimuth (degrees, about the world z axis)."""
    elevation: float
    """Elevation (degrees, negative looks down)."""
    track_frame: str | None = None
    """Follow this frame's position instead of a fixed point."""


RGB, DEPTH = "_rgb", "_depth"
"""Suffixes of a camera's observation keys: ``<name>_rgb`` and ``<name>_depth``."""


@dataclass(frozen=True)
class CameraSensorCfg:
    """A camera a task observes through (issue 13): a pinhole fixed in the world or on a frame.

    The pose is given by an eye point, a point looked at and an up direction, all in the frame's
    axes (the world's when ``frame`` is None), so a wrist camera moves and turns with the hand.
    Every engine renders the same pinhole; docs/backends.md lists what their renderers still draw
    differently (lighting, shadows, textures).
    """

    width: int
    """Image width (pixels)."""
    height: int
    """Image height (pixels)."""
    fovy: float = 45.0
    """Vertical field of view (degrees)."""
    frame: str | None = None
    """The frame the camera is mounted on (a robot frame or a free object); None: fixed in the world."""
    pos: tuple[float, float, float] = (0.0, 0.0, 0.0)
    """Eye position in the frame (m)."""
    target: tuple[float, float, float] = (1.0, 0.0, 0.0)
    """A point on the optical axis, in the frame (m)."""
    up: tuple[float, float, float] = (0.0, 0.0, 1.0)
    """The direction that points up in the image, in the frame's axes."""
    depth: bool = False
    """Also observe depth: distance along the optical axis (m), float32."""
    markers: bool = False
    """Draw the task's markers (goals, checkpoints) in this camera's images, as painted targets a
    real camera would see; off, the image holds only the physical scene."""


@dataclass(frozen=True)
class SceneCfg:
    """Everything a backend builds: robot, objects, ground, timing."""

    robot: RobotCfg
    """The robot."""
    objects: tuple[BoxObjectCfg, ...] = ()
    """Free objects."""
    physics_dt: float = 0.002
    """Physics time step (s)."""
    ground: bool = True
    """Add a ground plane at z = 0."""
    ground_friction: float = 1.0
    """Sliding friction of the ground."""
    camera: CameraCfg = field(default_factory=lambda: CameraCfg((0.0, 0.0, 0.0), 2.0, 90.0, -30.0))
    """Camera used for videos."""
    cameras: tuple[tuple[str, CameraSensorCfg], ...] = ()
    """A task's named cameras (:class:`~robolearn.tasks.worlds.TaskWorlds` fills them in), compiled into
    MuJoCo models as cameras ``task_<name>``: a batched renderer on the device (MuJoCo Warp's) reads
    their poses from every world's kinematics. The host renderers aim their own pinholes instead."""
