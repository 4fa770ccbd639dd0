"""quadrotor_hover: a Crazyflie starts near a random target, tilted and moving, and must hold it.

The drone starts within 0.5 m of the target with up to 0.3 rad of roll and pitch, any heading,
up to 0.5 m/s and 1 rad/s. An episode lasts 5 s and succeeds if over its final second the drone
stayed within 0.1 m of the target, slower than 0.2 m/s. It ends early on a crash (below 5 cm or
tilted past 80 degrees) or on leaving the flight box. Actions are collective thrust and body rates
(see :mod:`robolearn.tasks.robots.crazyflie`) at 50 Hz, physics at 500 Hz.
"""

from __future__ import annotations

import numpy as np

from robolearn.sim.backend import IntArray, Marker
from robolearn.tasks import terms
from robolearn.tasks.core import (
    DoneTerm,
    EventTerm,
    Expert,
    ObsTerm,
    RewardTerm,
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

TARGET_LOW = (-0.5, -0.5, 0.75)
TARGET_HIGH = (0.5, 0.5, 1.25)
START_RADIUS = 0.5
"""Largest initial distance from the target (m)."""
TOLERANCE = 0.1
"""Distance from the target that counts as holding it (m)."""
MAX_SPEED = 0.2
"""Speed below which the drone counts as holding still (m/s)."""
HOLD_TIME = 1.0
"""Time the drone must hold the target at the end of an episode (s)."""
TARGET = {"key": "target", "frame": NAME}
"""Where the target is kept (``env.state``) and which frame must reach it."""
FLIGHT_BOX: Box = ((-2.0, -2.0, -1.0), (2.0, 2.0, 2.5))
"""Leaving this box (m) ends the episode."""


# -- success -----------------------------------------------------------------------------------
class HeldAtEpisodeEnd:
    """True at an episode's last step if the frame held a per-world target for the final stretch.

    Holding means within ``tolerance`` (m) of the target and slower than ``max_speed`` (m/s) at
    every control step of the last ``hold_time`` (s). One instance belongs to one environment.
    """

    def __init__(self) -> None:
        self._held: IntArray = np.zeros(0, dtype=np.int64)

    def _ensure(self, env: TaskEnvView) -> None:
        # The counters live where the worlds are, as the step counters: numpy, or a device tensor.
        if len(self._held) != env.num_envs or type(self._held) is not type(env.step_count):
            self._held = env.xp.zeros(env.num_envs, dtype=env.xp.int64, device=env.device)

    def reset(self, env: TaskEnvView, ids: IntArray) -> None:
        self._ensure(env)
        self._held[ids] = 0

    def __call__(
        self, env: TaskEnvView, key: str, frame: str, tolerance: float, max_speed: float, hold_time: float
    ) -> BoolArray:
        self._ensure(env)
        xp = env.xp
        holding = terms.within_distance_of_state(env, key, frame, tolerance) & (
            xp.linalg.vector_norm(env.sim.frame_linvel(frame), axis=1) < max_speed
        )
        self._held = xp.where(holding, self._held + 1, 0)
        needed = round(hold_time / env.cfg.control_dt)
        return (self._held >= needed) & (env.step_count >= env.cfg.episode_length)


# -- expert ------------------------------------------------------------------------------------
def _expert(cfg: TaskCfg) -> Expert:
    return CascadedCtbrExpert(cfg)


def _markers(env: TaskEnvView, world: int) -> list[Marker]:
    x, y, z = (float(v) for v in env.state["target"][world])  # host floats from either backend
    return [Marker((x, y, z), TOLERANCE, (0.1, 0.9, 0.2, 0.4))]


def make_cfg() -> TaskCfg:
    return TaskCfg(
        name="quadrotor_hover",
        embodiment="drone",
        description="Crazyflie: fly to a target 0.5 m away and hold it within 0.1 m (thrust and body rates).",
        scene=drone_scene(camera_distance=0.8, camera_elevation=-20.0),
        control_dt=CONTROL_DT,
        episode_length=250,
        action=ctbr_action(),
        observations={
            "to_target": ObsTerm(terms.state_minus_frame, "m", TARGET, noise_std=0.005),
            **drone_observations(),
        },
        rewards={
            "alive": RewardTerm(terms.constant, 1.0),
            "distance": RewardTerm(terms.distance_to_state, -1.0, TARGET),
            # Steep within the success tolerance, where -distance is nearly flat: without it a
            # policy settles at a still hover 0.1 m off as readily as on the target.
            "precision": RewardTerm(terms.distance_to_state_tanh, -1.0, {**TARGET, "scale": TOLERANCE}),
            **drone_penalties(FLIGHT_BOX),
        },
        success=DoneTerm(
            HeldAtEpisodeEnd(),
            {**TARGET, "tolerance": TOLERANCE, "max_speed": MAX_SPEED, "hold_time": HOLD_TIME},
        ),
        terminations=drone_terminations(FLIGHT_BOX),
        reset_events={
            "target": EventTerm(
                terms.sample_state_uniform, {"key": "target", "low": TARGET_LOW, "high": TARGET_HIGH}
            ),
            "drone": EventTerm(
                place_near_state,
                {"key": "target", "radius": START_RADIUS, "max_tilt": 0.3, "max_speed": 0.5, "max_rate": 1.0},
            ),
        },
        state={"target": (3,)},
        randomization=drone_randomization(),
        end_on_success=False,
        expert=_expert,
        markers=_markers,
    )
