"""panda_reach: bring the Panda's tool centre point within 3 cm of a goal drawn in its workspace."""

from __future__ import annotations

import numpy as np

from robolearn.sim.backend import FloatArray, Marker
from robolearn.sim.scene import CameraCfg, SceneCfg
from robolearn.tasks import terms
from robolearn.tasks.core import (
    DomainRandCfg,
    DoneTerm,
    EventTerm,
    Expert,
    Observation,
    ObsTerm,
    RewardTerm,
    TaskCfg,
    TaskEnvView,
)
from robolearn.tasks.robots.arm import ee_target_offset, servo_step
from robolearn.tasks.robots.panda import (
    ARM_JOINTS,
    MAX_OPENING,
    ee_delta_action,
    panda_robot,
)

GOAL_LOW = (0.3, -0.25, 0.1)
GOAL_HIGH = (0.6, 0.25, 0.45)
TOLERANCE = 0.03


class ReachExpert:
    """Move straight to the goal, hand open."""

    def __init__(self, cfg: TaskCfg) -> None:
        self.max_step = cfg.action.high[0]

    def __call__(self, obs: Observation) -> FloatArray:
        delta = servo_step(
            obs["goal_from_ee"].astype(np.float64), obs["ee_vel"].astype(np.float64), self.max_step
        )
        return np.concatenate([delta, np.full((len(delta), 1), MAX_OPENING)], axis=1)


def _expert(cfg: TaskCfg) -> Expert:
    return ReachExpert(cfg)


def _markers(env: TaskEnvView, world: int) -> list[Marker]:
    x, y, z = (float(v) for v in env.state["goal"][world])
    return [Marker((x, y, z), TOLERANCE, (0.1, 0.9, 0.2, 0.6))]


def make_cfg() -> TaskCfg:
    return TaskCfg(
        name="panda_reach",
        embodiment="arm",
        description="Franka Panda: move the tool centre point to a random goal (3 cm tolerance).",
        scene=SceneCfg(robot=panda_robot(), camera=CameraCfg((0.4, 0.0, 0.25), 1.6, 150.0, -25.0)),
        control_dt=0.02,
        episode_length=100,
        action=ee_delta_action(),
        observations={
            "ee_pos": ObsTerm(terms.frame_pos, "m", {"frame": "ee"}, noise_std=0.001),
            "ee_vel": ObsTerm(terms.frame_linvel, "m/s", {"frame": "ee"}, noise_std=0.005),
            "ee_target_offset": ObsTerm(ee_target_offset, "m"),
            "goal_from_ee": ObsTerm(
                terms.state_minus_frame, "m", {"key": "goal", "frame": "ee"}, noise_std=0.001
            ),
        },
        rewards={
            "distance": RewardTerm(
                terms.distance_to_state_tanh, -1.0, {"key": "goal", "frame": "ee", "scale": 0.1}
            ),
            "reached": RewardTerm(terms.succeeded, 1.0),  # the success condition, within TOLERANCE
        },
        success=DoneTerm(
            terms.within_distance_of_state, {"key": "goal", "frame": "ee", "tolerance": TOLERANCE}
        ),
        reset_events={
            "arm": EventTerm(terms.perturb_joints, {"joints": ARM_JOINTS, "noise": 0.05}),
            "goal": EventTerm(
                terms.sample_state_uniform, {"key": "goal", "low": GOAL_LOW, "high": GOAL_HIGH}
            ),
        },
        state={"goal": (3,), "ee_target": (3,)},
        randomization=DomainRandCfg(
            mass_scale=(0.8, 1.2),
            friction_scale=(0.8, 1.2),
            damping_scale=(0.7, 1.3),
            actuator_gain_scale=(0.8, 1.2),
            action_latency_steps=(0, 1),
        ),
        expert=_expert,
        markers=_markers,
    )
