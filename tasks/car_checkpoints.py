"""car_checkpoints: drive a lap of checkpoints around a loop as fast as possible.

After FastRLAP (Stachowicz et al., 2023, arXiv:2304.09831): the car must pass within
``CHECKPOINT_RADIUS`` of each checkpoint in order; the reward is progress toward the next
checkpoint, a bonus per checkpoint and a time penalty. Each world draws its own course at every
reset: ``NUM_CHECKPOINTS`` points on a jittered ellipse a few metres across, rotated at random and
driven clockwise or counter-clockwise; the car starts at rest on the loop where the lap ends
(the last checkpoint), heading along it.

The car's position is its rear axle centre (``base_link`` of the MIT RACECAR, where its odometry
is reported), and every observation is in the car's own frame (x forward, y left), so a policy
runs on the real car from odometry and a map of the checkpoints alone.
"""

from __future__ import annotations

import numpy as np

from robolearn.sim.backend import BoolArray, FloatArray, IntArray, Marker
from robolearn.sim.scene import CameraCfg, SceneCfg
from robolearn.sim.transforms import quat_from_euler, quat_rotate_inverse
from robolearn.tasks import terms
from robolearn.tasks.core import (
    DomainRandCfg,
    DoneTerm,
    EventTerm,
    Expert,
    Observation,
    ObsTerm,
    RewardTerm,
    StepTerm,
    TaskCfg,
    TaskEnvView,
    TaskError,
)
from robolearn.tasks.robots.racecar import (
    ROBOT_NAME,
    WHEELBASE,
    body_velocity,
    racecar_robot,
    speed_steer_action,
    steering_angle,
    yaw_rate,
)

NUM_CHECKPOINTS = 8
"""Checkpoints per lap."""
CHECKPOINT_RADIUS = 0.4
"""How close (m) the car's rear axle centre must pass to a checkpoint."""
SEMI_AXES_LOW = (1.6, 1.1)
"""Smallest semi-axes of the course's ellipse (m)."""
SEMI_AXES_HIGH = (2.2, 1.6)
"""Largest semi-axes of the course's ellipse (m)."""
RADIAL_JITTER = 0.15
"""Each checkpoint's distance from the centre varies by up to this fraction."""
ANGULAR_JITTER = 0.2
"""Each checkpoint's angle along the loop varies by up to this fraction of the spacing."""
START_YAW_NOISE = 0.3
"""The car starts heading along the loop, give or take this much (rad)."""
ARENA_HALF_SIZE = 4.0
"""The episode ends when the car leaves the square of this half size (m) around the course."""
MAX_TILT = np.radians(60.0)
"""The car counts as flipped when its up axis is tilted more than this (rad)."""


# -- checkpoint bookkeeping -------------------------------------------------------------------
def _car_xy(env: TaskEnvView) -> FloatArray:
    return env.sim.frame_pos(ROBOT_NAME)[:, :2]


def _checkpoint_xy(env: TaskEnvView, offset: int) -> FloatArray:
    """(n, 2) world position of the checkpoint ``offset`` places after the next (the lap wraps)."""
    xp = env.xp
    index = (xp.astype(env.state["next_index"][:, 0], xp.int64) + offset) % NUM_CHECKPOINTS
    return env.state["checkpoints"][xp.arange(env.num_envs, device=env.device), index]


def advance_checkpoints(env: TaskEnvView) -> None:
    """After every step: score progress toward the next checkpoint and move past a reached one.

    Progress is the decrease of the distance to the same checkpoint since the last step, so
    reaching a checkpoint and facing the next, farther one costs nothing.
    """
    state, xp = env.state, env.xp
    racing = state["next_index"][:, 0] < NUM_CHECKPOINTS
    distance = xp.linalg.vector_norm(_checkpoint_xy(env, 0) - _car_xy(env), axis=1)
    reached = racing & (distance < CHECKPOINT_RADIUS)
    state["progress"][:, 0] = xp.where(racing, state["distance"][:, 0] - distance, 0.0)
    state["reached"][:, 0] = reached
    state["next_index"][:, 0] += state["reached"][:, 0]
    fresh = xp.linalg.vector_norm(_checkpoint_xy(env, 0) - _car_xy(env), axis=1)
    state["distance"][:, 0] = xp.where(reached, fresh, distance)


def sample_course(env: TaskEnvView, ids: IntArray) -> None:
    """Draw each world's course and put the car on the loop where the lap ends, at rest."""
    n, rng, xp = len(ids), env.rng, env.xp
    axes = rng.uniform(SEMI_AXES_LOW, SEMI_AXES_HIGH, size=(n, 2))
    direction = rng.choice([-1.0, 1.0], size=(n, 1))
    rotation = xp.exp(1j * rng.uniform(-np.pi, np.pi, size=(n, 1)))
    # Points are complex numbers x + iy. Checkpoint k sits k + 1 spacings along the loop from the
    # start, so the last one is the finish line, next to where the car starts.
    spacing = 2 * np.pi / NUM_CHECKPOINTS
    jitter = rng.uniform(-ANGULAR_JITTER, ANGULAR_JITTER, size=(n, NUM_CHECKPOINTS))
    angle = spacing * (xp.arange(1, NUM_CHECKPOINTS + 1, device=env.device) + jitter)
    scale = 1 + rng.uniform(-RADIAL_JITTER, RADIAL_JITTER, size=(n, NUM_CHECKPOINTS))
    points = rotation * scale * (axes[:, :1] * xp.cos(angle) + 1j * direction * axes[:, 1:] * xp.sin(angle))
    env.state["checkpoints"][ids] = xp.stack([xp.real(points), xp.imag(points)], axis=-1)

    # The start is on the ellipse at angle 0, heading along the loop (the ellipse's tangent there).
    start = (rotation * axes[:, :1])[:, 0]
    heading = rotation[:, 0] * 1j * direction[:, 0]
    noise = rng.uniform(-START_YAW_NOISE, START_YAW_NOISE, size=n)
    yaw = xp.atan2(xp.imag(heading), xp.real(heading)) + noise  # the heading's angle, as numpy's angle
    zero = xp.zeros_like(yaw)
    position = xp.stack([xp.real(start), xp.imag(start), zero], axis=1)
    env.sim.set_root_state(ids, ROBOT_NAME, position, quat_from_euler(zero, zero, yaw))
    env.state["distance"][ids, 0] = xp.abs(points[:, 0] - start)


# -- observations -------------------------------------------------------------------------------
def checkpoint_in_body(env: TaskEnvView, offset: int) -> FloatArray:
    """Vector from the car to the checkpoint ``offset`` places after the next, in the car's frame (m)."""
    xp = env.xp
    offset_xy = _checkpoint_xy(env, offset) - _car_xy(env)
    world = xp.concat([offset_xy, xp.zeros_like(offset_xy[:, :1])], axis=1)
    return quat_rotate_inverse(env.sim.frame_quat(ROBOT_NAME), world)[:, :2]


# -- rewards, success, terminations -----------------------------------------------------------
def checkpoint_progress(env: TaskEnvView) -> FloatArray:
    """Decrease of the distance to the next checkpoint in the last step (m)."""
    return env.state["progress"][:, 0]


def checkpoint_reached(env: TaskEnvView) -> FloatArray:
    """One in the step a checkpoint is reached."""
    return env.state["reached"][:, 0]


def lap_complete(env: TaskEnvView) -> BoolArray:
    """True once every checkpoint has been reached in order."""
    return env.state["next_index"][:, 0] >= NUM_CHECKPOINTS


# -- scripted expert -----------------------------------------------------------------------------
class PurePursuitExpert:
    """Pure pursuit on the next checkpoint, with a speed schedule that brakes for sharp turns.

    Steering: the arc through the target point (Coulter, 1992, CMU-RI-TR-92-01) has curvature
    2 y / d^2 in the car's frame, and the bicycle angle is atan(wheelbase * curvature). The target
    is the checkpoint moved part of its radius toward the one after, so the car leaves it already
    turning to the next. Speed: on the arc, no more than the lateral acceleration allows; toward
    the checkpoint, no more than lets the car brake to the speed the turn there allows, which
    falls with the angle of that turn. A checkpoint inside the full-lock turning circle cannot be
    reached going forward (the car would circle it): the car then backs up at opposite lock until
    it is outside the circle again, reading from the last action whether it is backing up.

    Parameters: ``lateral_accel`` and ``brake_accel`` (m/s^2) the car is asked for, half a g and
    less, inside the tyres' grip at the low end of the friction randomization; ``corner_speed``
    (m/s) at a 90-degree and at a straight checkpoint; ``cut``, how far toward the next leg the
    target moves, as a fraction of the checkpoint radius; ``reverse_speed`` (m/s).

    ``grip`` scales the tyres' friction the schedule is made for: the accelerations by it and the
    corner speeds by its square root (a corner's speed at the grip's lateral acceleration). For a
    robot whose identified parameters (``robolearn sysid``, or the reality gap of ``robolearn bench
    finetune``) scale the tyres' friction, :func:`_expert` drives within that grip: at half the
    friction and less the nominal schedule slides wide of the checkpoints (measured on the PyBullet
    car at 0.375 of the friction, 30 laps: 0.53 of them finished; within its grip, 1.00).
    """

    def __init__(
        self,
        cfg: TaskCfg,
        lateral_accel: float = 5.0,
        brake_accel: float = 4.0,
        corner_speed: tuple[float, float] = (1.2, 3.0),
        cut: float = 0.6,
        reverse_speed: float = 1.0,
        grip: float = 1.0,
    ) -> None:
        if not grip > 0:
            raise TaskError(f"car_checkpoints expert: grip must be positive, got {grip}")
        self.max_speed, self.max_steer = cfg.action.high
        self.lateral_accel = lateral_accel * grip
        self.brake_accel = brake_accel * grip
        self.corner_speed = (corner_speed[0] * grip**0.5, corner_speed[1] * grip**0.5)
        self.cut = cut * CHECKPOINT_RADIUS
        self.reverse_speed = min(reverse_speed, -cfg.action.low[0])
        self.max_curvature = np.tan(self.max_steer) / WHEELBASE
        # The tyres slip a little at full lock: the circle actually driven is about 10% wider.
        self.turn_radius = 1.1 / self.max_curvature

    def __call__(self, obs: Observation) -> FloatArray:
        checkpoint = obs["next_checkpoint"].astype(np.float64)
        after = obs["checkpoint_after"].astype(np.float64)
        leg = after - checkpoint
        leg_length = np.maximum(np.linalg.norm(leg, axis=1, keepdims=True), 1e-6)
        target = checkpoint + self.cut * leg / leg_length
        dist = np.maximum(np.linalg.norm(target, axis=1), 1e-6)
        side = np.where(target[:, 1] >= 0, 1.0, -1.0)
        # Pure pursuit's arcs to a point behind the car are wide loops: turn at full lock instead.
        curvature = np.where(target[:, 0] > 0, 2 * target[:, 1] / dist**2, side * self.max_curvature)
        steer = np.clip(np.arctan(WHEELBASE * curvature), -self.max_steer, self.max_steer)

        # Turn at the checkpoint: angle between the approach and the leg to the one after.
        cos_turn = np.sum(target * leg, axis=1) / (dist * leg_length[:, 0])
        turn = np.arccos(np.clip(cos_turn, -1.0, 1.0))
        slow, fast = self.corner_speed
        corner = fast - (fast - slow) * np.clip(turn / (np.pi / 2), 0.0, 1.0)
        braking = np.sqrt(corner**2 + 2 * self.brake_accel * np.maximum(dist - CHECKPOINT_RADIUS, 0.0))
        arc = np.sqrt(self.lateral_accel / np.maximum(np.abs(curvature), 1e-6))
        speed = np.minimum.reduce([np.full_like(dist, self.max_speed), braking, arc])

        # Distance of the checkpoint from the centre of the full-lock circle on its side.
        side = np.where(checkpoint[:, 1] >= 0, 1.0, -1.0)
        from_centre = np.hypot(checkpoint[:, 0], checkpoint[:, 1] - side * self.turn_radius)
        backing = obs["last_action"][:, 0] < 0
        limit = np.where(backing, self.turn_radius, self.turn_radius - CHECKPOINT_RADIUS)
        reverse = from_centre < limit
        speed = np.where(reverse, -self.reverse_speed, speed)
        steer = np.where(reverse, -side * self.max_steer, steer)
        return np.stack([speed, steer], axis=1)


def _expert(cfg: TaskCfg) -> Expert:
    """The expert of the robot ``cfg`` describes: within its tyres' identified grip, if known."""
    identified = cfg.scene.robot.identified
    return PurePursuitExpert(cfg, grip=1.0 if identified is None else identified.robot_friction_scale)


def _markers(env: TaskEnvView, world: int) -> list[Marker]:
    """Every checkpoint as a disc-like sphere: passed ones grey, the next one bright green."""
    next_index = int(env.state["next_index"][world, 0])
    markers = []
    for k, (x, y) in enumerate(env.state["checkpoints"][world].tolist()):  # host floats
        if k < next_index:
            rgba = (0.5, 0.5, 0.5, 0.2)
        elif k == next_index:
            rgba = (0.1, 0.9, 0.2, 0.5)
        else:
            rgba = (0.9, 0.7, 0.1, 0.3)
        markers.append(Marker((float(x), float(y), 0.0), CHECKPOINT_RADIUS, rgba))
    return markers


def make_cfg() -> TaskCfg:
    return TaskCfg(
        name="car_checkpoints",
        embodiment="car",
        description=f"MIT RACECAR: drive a lap of {NUM_CHECKPOINTS} random checkpoints around a loop, fast.",
        scene=SceneCfg(
            robot=racecar_robot(),
            camera=CameraCfg((0.0, 0.0, 0.0), 8.0, 90.0, -89.0),
        ),
        control_dt=0.02,
        # 10 s: the scripted expert laps in about 4 s, 5 s at most.
        episode_length=500,
        action=speed_steer_action(),
        observations={
            "next_checkpoint": ObsTerm(checkpoint_in_body, "m", {"offset": 0}, noise_std=0.02),
            "checkpoint_after": ObsTerm(checkpoint_in_body, "m", {"offset": 1}, noise_std=0.02),
            "body_velocity": ObsTerm(body_velocity, "m/s", noise_std=0.05),
            "yaw_rate": ObsTerm(yaw_rate, "rad/s", noise_std=0.02),
            "steering_angle": ObsTerm(steering_angle, "rad", noise_std=0.01),
            "last_action": ObsTerm(terms.last_action, "m/s, rad"),
        },
        # A lap earns about 8 (metres of progress) plus 8 (checkpoints); the time penalty, 0.5 per
        # second, makes a faster lap worth more.
        rewards={
            "progress": RewardTerm(checkpoint_progress, 1.0),
            "checkpoint": RewardTerm(checkpoint_reached, 1.0),
            "time": RewardTerm(terms.constant, -0.01),
        },
        success=DoneTerm(lap_complete),
        terminations={
            "flipped": DoneTerm(terms.tilted, {"frame": ROBOT_NAME, "max_tilt": MAX_TILT}),
            "out_of_bounds": DoneTerm(
                terms.frame_outside_box,
                {
                    "frame": ROBOT_NAME,
                    "low": (-ARENA_HALF_SIZE, -ARENA_HALF_SIZE, -1.0),
                    "high": (ARENA_HALF_SIZE, ARENA_HALF_SIZE, 1.0),
                },
            ),
        },
        reset_events={"course": EventTerm(sample_course)},
        updates={"checkpoints": StepTerm(advance_checkpoints)},
        state={
            "checkpoints": (NUM_CHECKPOINTS, 2),  # world x, y (m), in the order to pass them
            "next_index": (1,),  # checkpoints passed so far
            "distance": (1,),  # to the next checkpoint after the last step (m)
            "progress": (1,),  # decrease of that distance in the last step (m)
            "reached": (1,),  # 1 in the step a checkpoint was passed
        },
        # Mass: battery and payload. Friction: floors from polished concrete to carpet. Gain: battery
        # voltage. Latency: one control step of radio and motor controller delay.
        randomization=DomainRandCfg(
            mass_scale=(0.8, 1.25),
            friction_scale=(0.7, 1.2),
            actuator_gain_scale=(0.8, 1.2),
            action_latency_steps=(0, 1),
        ),
        expert=_expert,
        markers=_markers,
    )
