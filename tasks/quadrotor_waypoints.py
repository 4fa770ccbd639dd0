"""quadrotor_waypoints: a Crazyflie flies through four random waypoints in order.

Each world draws its own course at reset: a start point, then four waypoints each 0.6-1.0 m from
the one before, inside a 3 m x 3 m x 1 m volume. A waypoint counts as passed when the drone comes
within 0.15 m of it; the episode succeeds when the last one is passed, within 10 s, and ends
early on a crash or on leaving the flight box. The policy sees the vectors to the current
and to the next waypoint in the world frame, beside the drone's velocity and attitude, so it can
plan its turn through the current one. Actions are collective thrust and body rates (see
:mod:`robolearn.tasks.robots.crazyflie`) at 50 Hz, physics at 500 Hz.
"""

from __future__ import annotations

from robolearn.sim.backend import FloatArray, IntArray, Marker
from robolearn.tasks import terms
from robolearn.tasks.core import (
    DoneTerm,
    EventTerm,
    Expert,
    ObsTerm,
    RewardTerm,
    StepTerm,
    TaskCfg,
    TaskEnvView,
)
from robolearn.tasks.robots.crazyflie import (
    CONTROL_DT,
    NAME,
    BoolArray,
    Box,
    CascadedCtbrExpert,
    ctbr_action,
    drone_observations,
    drone_penalties,
    drone_randomization,
    drone_scene,
    drone_terminations,
    place_near_state,
)

NUM_WAYPOINTS = 4
"""Waypoints per course."""
RADIUS = 0.15
"""Distance at which a waypoint counts as passed (m)."""
COURSE_LOW = (-1.5, -1.5, 0.5)
COURSE_HIGH = (1.5, 1.5, 1.5)
"""The volume start points and waypoints are drawn in (m)."""
LEG_LENGTH = (0.6, 1.0)
"""Range of the distance from one waypoint to the next (m)."""
FLIGHT_BOX: Box = ((-2.5, -2.5, -1.0), (2.5, 2.5, 2.5))
"""Leaving this box (m) ends the episode."""


# -- course ------------------------------------------------------------------------------------
def sample_course(
    env: TaskEnvView,
    ids: IntArray,
    start_key: str,
    key: str,
    leg_length: tuple[float, float],
    low: tuple[float, float, float],
    high: tuple[float, float, float],
) -> None:
    """Draw a chain of waypoints from a start point: each leg has a random direction (vertical
    component halved, for a course mostly flown level) and a length in ``leg_length`` (m). A leg
    that would leave the volume ``low``-``high`` is turned back along that axis, which keeps its
    length (the result is clipped to the volume for the rare leg that fits neither way)."""
    xp = env.xp
    bounds = (low, high, (1.0, 1.0, 0.5))
    lo, hi, squash = (xp.asarray(v, dtype=env.float_dtype, device=env.device) for v in bounds)
    point = env.state[start_key][ids]
    for k in range(env.state[key].shape[1]):  # a loop over legs; each step covers every world
        direction = env.rng.normal(size=point.shape) * squash
        direction /= xp.linalg.vector_norm(direction, axis=1, keepdims=True)
        leg = direction * env.rng.uniform(*leg_length, size=(len(ids), 1))
        outside = (point + leg > hi) | (point + leg < lo)
        point = xp.clip(point + xp.where(outside, -leg, leg), lo, hi)
        env.state[key][ids, k] = point


def _current(env: TaskEnvView, offset: int) -> FloatArray:
    """(n, 3) the waypoint ``offset`` after the current one, the last one past the end."""
    xp, last = env.xp, env.state["waypoints"].shape[1] - 1
    index = xp.clip(xp.astype(env.state["waypoint_index"], xp.int64) + offset, max=last)
    return env.state["waypoints"][xp.arange(env.num_envs, device=env.device), index]


def to_waypoint(env: TaskEnvView, frame: str, offset: int) -> FloatArray:
    """Vector from a frame to the current waypoint (``offset`` 0) or the next (1), world frame (m)."""
    return _current(env, offset) - env.sim.frame_pos(frame)


def advance_waypoint(env: TaskEnvView, frame: str, radius: float) -> None:
    """Move on to the next waypoint where the frame came within ``radius`` (m) of the current one."""
    left = env.state["waypoint_index"] < env.state["waypoints"].shape[1]
    passed = left & (env.xp.linalg.vector_norm(to_waypoint(env, frame, 0), axis=1) < radius)
    env.state["waypoint_passed"] = env.xp.astype(passed, env.float_dtype)
    env.state["waypoint_index"] += env.state["waypoint_passed"]


def waypoint_passed(env: TaskEnvView) -> FloatArray:
    """1 where a waypoint was passed in this step, else 0."""
    return env.state["waypoint_passed"]


def speed_to_waypoint(env: TaskEnvView, frame: str) -> FloatArray:
    """Velocity component towards the current waypoint (m/s): the rate at which the gap closes."""
    xp, gap = env.xp, to_waypoint(env, frame, 0)
    direction = gap / xp.maximum(xp.linalg.vector_norm(gap, axis=1, keepdims=True), 1e-6)
    return xp.einsum("ni,ni->n", env.sim.frame_linvel(frame), direction)


def course_done(env: TaskEnvView) -> BoolArray:
    """True where every waypoint has been passed."""
    return env.state["waypoint_index"] >= env.state["waypoints"].shape[1]


# -- expert, markers ---------------------------------------------------------------------------
def _expert(cfg: TaskCfg) -> Expert:
    # The hover controller aimed at the current waypoint, allowed to fly faster.
    return CascadedCtbrExpert(cfg, error_key="to_waypoint", max_speed=1.5)


def _markers(env: TaskEnvView, world: int) -> list[Marker]:
    """Passed waypoints grey, the current one green, those after it blue."""
    index = int(env.state["waypoint_index"][world])
    passed, current, ahead = (0.5, 0.5, 0.5, 0.3), (0.1, 0.9, 0.2, 0.6), (0.2, 0.5, 0.9, 0.5)
    waypoints = [tuple(float(v) for v in pos) for pos in env.state["waypoints"][world]]  # host floats
    return [
        Marker(pos, RADIUS, passed if k < index else current if k == index else ahead)  # type: ignore[arg-type]
        for k, pos in enumerate(waypoints)
    ]


def make_cfg() -> TaskCfg:
    return TaskCfg(
        name="quadrotor_waypoints",
        embodiment="drone",
        description="Crazyflie: fly through four random waypoints in order, 0.15 m radius.",
        scene=drone_scene(camera_distance=2.5, camera_elevation=-25.0),
        control_dt=CONTROL_DT,
        episode_length=500,
        action=ctbr_action(),
        observations={
            "to_waypoint": ObsTerm(to_waypoint, "m", {"frame": NAME, "offset": 0}, noise_std=0.005),
            "to_next_waypoint": ObsTerm(to_waypoint, "m", {"frame": NAME, "offset": 1}, noise_std=0.005),
            **drone_observations(),
        },
        rewards={
            "progress": RewardTerm(speed_to_waypoint, 1.0, {"frame": NAME}),
            "waypoint": RewardTerm(waypoint_passed, 10.0),
            **drone_penalties(FLIGHT_BOX),
        },
        updates={"course": StepTerm(advance_waypoint, {"frame": NAME, "radius": RADIUS})},
        success=DoneTerm(course_done),
        terminations=drone_terminations(FLIGHT_BOX),
        reset_events={
            "start": EventTerm(
                terms.sample_state_uniform, {"key": "start", "low": COURSE_LOW, "high": COURSE_HIGH}
            ),
            "drone": EventTerm(
                place_near_state,
                {"key": "start", "radius": 0.1, "max_tilt": 0.1, "max_speed": 0.1, "max_rate": 0.3},
            ),
            "course": EventTerm(
                sample_course,
                {
                    "start_key": "start",
                    "key": "waypoints",
                    "leg_length": LEG_LENGTH,
                    "low": COURSE_LOW,
                    "high": COURSE_HIGH,
                },
            ),
        },
        state={"start": (3,), "waypoints": (NUM_WAYPOINTS, 3), "waypoint_index": (), "waypoint_passed": ()},
        randomization=drone_randomization(),
        expert=_expert,
        markers=_markers,
    )
