"""MIT RACECAR, a 1/10 car on a Traxxas Rally chassis, from the URDF that pybullet's data package
ships (its kinematics, masses and the steering hinges' +-1 rad range).

An action is a speed (m/s) and a steering angle (rad) of the equivalent bicycle, as the car's own
drive stack (ackermann_msgs) takes them. The action term turns them into Ackermann steering: the
two hinge angles of a common turning centre on the rear axle line, and per-wheel speeds for that
same centre (an ideal differential) on all four wheels, since the Traxxas Rally is four-wheel
drive.

MuJoCo's URDF importer fuses the fixed links (chassis, inertia link, lidar, camera) into
``base_link`` once the free joint is added (5.89 kg in all, as in the file); the chassis has no
collision shape, only the lidar and camera boxes above it; the wheel cylinders' axes are the
joints' axes. The file's visual meshes are kept (``visual_meshes``) so that videos show the car.
"""

from __future__ import annotations

from pathlib import Path

import pybullet_data

from robolearn.sim.backend import FloatArray
from robolearn.sim.scene import JointPositionCfg, JointVelocityCfg, RobotCfg, UrdfAsset
from robolearn.sim.transforms import namespace_of, quat_rotate_inverse
from robolearn.tasks import terms
from robolearn.tasks.core import ActionCfg, TaskEnvView

WHEEL_JOINTS = (
    "left_rear_wheel_joint",
    "right_rear_wheel_joint",
    "left_front_wheel_joint",
    "right_front_wheel_joint",
)
"""Driven wheels, in control order; a positive velocity rolls the car forward."""
STEERING_JOINTS = ("left_steering_hinge_joint", "right_steering_hinge_joint")
"""Steering hinges, in control order; a positive angle turns the wheel to the left."""

WHEELBASE = 0.325
"""Rear axle to the steering hinges (m), from the URDF."""
TRACK = 0.2
"""Distance between the steering hinges, and between the rear wheel joints (m), from the URDF."""
WHEEL_RADIUS = 0.05
"""Tyre radius (m), from the URDF's collision cylinders."""
TYRE_OFFSET = 0.0225
"""How far each tyre's centre sits outward of its wheel joint (m), from the URDF."""

MAX_SPEED = 3.0
"""Forward speed limit (m/s): what the MIT RACECAR is run at indoors, well under the chassis' top speed."""
MAX_REVERSE = 1.0
"""Reverse speed limit (m/s)."""
MAX_STEER = 0.5
"""Bicycle steering angle limit (rad); the inner hinge then turns 0.58 rad, inside the URDF's +-1 rad."""

ROBOT_NAME = "racecar"
"""Name of the robot and of its root frame: base_link, on the ground under the rear axle centre."""


def racecar_robot(
    wheel_kv: float = 0.3,
    wheel_max_torque: float = 0.6,
    friction: float = 1.0,
) -> RobotCfg:
    """The car standing on the ground at the origin, heading along +x, wheels straight.

    ``wheel_kv`` and ``wheel_max_torque`` are the velocity servo of each wheel (N m s/rad, N m):
    four wheels at 0.6 N m push the 5.9 kg car with up to 48 N (0.8 g), a little under the tyres'
    grip; it reaches 2.7 m/s in about half a second. ``friction`` is the tyres' sliding friction.
    """
    return RobotCfg(
        name=ROBOT_NAME,
        asset=UrdfAsset(Path(pybullet_data.getDataPath()) / "racecar" / "racecar.urdf"),
        fixed_base=False,
        base_pos=(0.0, 0.0, 0.0),
        # Motor and servo rotors seen through their gearboxes (a 1/10 drivetrain reflects 1e-3 to
        # 1e-2 kg m^2 onto the wheels); it also keeps the light hinges' and wheels' servo loops
        # stable at a 2 ms step where they are computed explicitly (PyBullet).
        joint_armature=1e-3,
        actuators=(
            JointVelocityCfg(joints=WHEEL_JOINTS, kv=wheel_kv, max_effort=wheel_max_torque),
            # A hobby steering servo: about 0.1 s for full lock.
            JointPositionCfg(joints=STEERING_JOINTS, kp=20.0, kd=0.5, max_effort=2.0),
        ),
        collision_friction=(friction, 0.005, 0.0001),
        visual_meshes=True,
    )


def ackermann_hinge_angles(steer: FloatArray) -> FloatArray:
    """(n,) bicycle steering angles (rad) to (n, 2) left and right hinge angles (rad).

    Ackermann geometry: both front wheels point square to lines from one turning centre on the rear
    axle line, at ``WHEELBASE / tan(steer)`` from the car's centre line; the inner wheel turns more.
    """
    xp = namespace_of(steer)
    curvature = xp.tan(steer) / WHEELBASE
    half = curvature * TRACK / 2
    return xp.stack(
        [xp.atan2(curvature * WHEELBASE, 1 - half), xp.atan2(curvature * WHEELBASE, 1 + half)], axis=1
    )


def steering_from_hinges(hinges: FloatArray) -> FloatArray:
    """(n, 2) left and right hinge angles (rad) to the (n,) bicycle angle they steer (rad).

    Inverts :func:`ackermann_hinge_angles` for each wheel and averages the two curvatures, so a
    measured steering angle reads the same as the commanded one.
    """
    xp = namespace_of(hinges)
    tan_left, tan_right = xp.tan(hinges[:, 0]), xp.tan(hinges[:, 1])
    left = tan_left / (WHEELBASE + tan_left * TRACK / 2)
    right = tan_right / (WHEELBASE - tan_right * TRACK / 2)
    return xp.atan((left + right) / 2 * WHEELBASE)


def ackermann_wheel_speeds(speed: FloatArray, steer: FloatArray) -> FloatArray:
    """(n,) speed of the rear axle centre (m/s) and steering angle (rad) to (n, 4) wheel speeds (rad/s).

    Each tyre rolls on a circle about the same turning centre as the car, so its speed is the
    car's speed times its distance to that centre over the rear axle centre's: no wheel scrubs.
    """
    xp = namespace_of(steer)
    curvature = xp.tan(steer) / WHEELBASE
    lateral = TRACK / 2 + TYRE_OFFSET
    rear_left, rear_right = 1 - curvature * lateral, 1 + curvature * lateral
    front = curvature * WHEELBASE
    ratios = xp.stack(
        [rear_left, rear_right, xp.hypot(front, rear_left), xp.hypot(front, rear_right)], axis=1
    )
    return speed[:, None] * ratios / WHEEL_RADIUS


def speed_steer_to_controls(env: TaskEnvView, action: FloatArray) -> FloatArray:
    """Speed (m/s) and steering angle (rad) to four wheel speeds and two hinge angles."""
    speed, steer = action[:, 0], action[:, 1]
    return env.xp.concat([ackermann_wheel_speeds(speed, steer), ackermann_hinge_angles(steer)], axis=1)


def speed_steer_action() -> ActionCfg:
    """Speed of the rear axle centre (m/s, negative reverses) and bicycle steering angle (rad, + left)."""
    return ActionCfg(
        names=("speed", "steering_angle"),
        units=("m/s", "rad"),
        low=(-MAX_REVERSE, -MAX_STEER),
        high=(MAX_SPEED, MAX_STEER),
        neutral=(0.0, 0.0),
        to_controls=speed_steer_to_controls,
    )


# -- state: what the car's odometry and steering report, from a simulated world or a real robot's view --
def body_velocity(env: TaskEnvView) -> FloatArray:
    """Forward and leftward velocity of the rear axle centre in the car's frame (m/s)."""
    return quat_rotate_inverse(env.sim.frame_quat(ROBOT_NAME), env.sim.frame_linvel(ROBOT_NAME))[:, :2]


def yaw_rate(env: TaskEnvView) -> FloatArray:
    """Turn rate about the car's up axis (rad/s, positive to the left)."""
    return terms.frame_angvel_body(env, ROBOT_NAME)[:, 2:]


def steering_angle(env: TaskEnvView) -> FloatArray:
    """Bicycle steering angle the front hinges currently steer (rad, positive to the left)."""
    return steering_from_hinges(env.sim.joint_pos(STEERING_JOINTS))[:, None]
