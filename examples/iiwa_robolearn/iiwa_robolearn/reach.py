"""iiwa_reach: bring the iiwa's flange within 3 cm of a goal drawn in front of it.

Declared from robolearn's generic parts: the arm's tool-displacement action and impedance target
(:mod:`robolearn.tasks.robots.arm`) and the shared terms (:mod:`robolearn.tasks.terms`).
"""

from __future__ import annotations

import numpy as np

from iiwa_robolearn.robot import WORKSPACE_HIGH, WORKSPACE_LOW, description, iiwa_robot
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
from robolearn.tasks.robots.arm import ee_delta_action, ee_target_offset, servo_step

GOAL_LOW = (0.5, -0.2, 0.2)
GOAL_HIGH = (0.7, 0.2, 0.45)
TOLERANCE = 0.03


class ReachExpert:
    """Move straight to the goal."""

    def __init__(self, cfg: TaskCfg) -> None:
        self.max_step = cfg.action.high[0]

    def __call__(self, obs: Observation) -> FloatArray:
        goal, vel = obs["goal_from_ee"].astype(np.float64), obs["ee_vel"].astype(np.float64)
        return servo_step(goal, vel, self.max_step)


def _expert(cfg: TaskCfg) -> Expert:
    return ReachExpert(cfg)


def _markers(env: TaskEnvView, world: int) -> list[Marker]:
    return [Marker(tuple(env.state["goal"][world]), TOLERANCE, (0.1, 0.9, 0.2, 0.6))]


def make_cfg() -> TaskCfg:
    """The ``robolearn.tasks`` entry point."""
    joints = description().joint_names
    return TaskCfg(
        name="iiwa_reach",
        embodiment="arm",
        description="KUKA iiwa: move the flange to a random goal (3 cm tolerance).",
        scene=SceneCfg(robot=iiwa_robot(), camera=CameraCfg((0.4, 0.0, 0.3), 1.8, 150.0, -25.0)),
        control_dt=0.02,
        episode_length=100,
        action=ee_delta_action(WORKSPACE_LOW, WORKSPACE_HIGH),
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
            "reached": RewardTerm(
                terms.within_distance_of_state, 1.0, {"key": "goal", "frame": "ee", "tolerance": TOLERANCE}
            ),
        },
        success=DoneTerm(
            terms.within_distance_of_state, {"key": "goal", "frame": "ee", "tolerance": TOLERANCE}
        ),
        reset_events={
            "arm": EventTerm(terms.perturb_joints, {"joints": joints, "noise": 0.05}),
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
