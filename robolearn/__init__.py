"""robolearn: sim-to-real robot learning.

Importing the package registers every task with Gymnasium as ``robolearn/<CamelName>-v0`` (for
example ``gymnasium.make("robolearn/PandaPickCube-v0")``), Gymnasium's convention for
third-party environments (``gymnasium.register_envs(robolearn)`` makes the import explicit).
"""

from __future__ import annotations

import gymnasium

from robolearn.tasks import gym_id, task_names

__version__ = "0.1.0"


def register_gym_envs() -> None:
    """Register every task id with Gymnasium: ``make`` gives one world, ``make_vec`` a batch."""
    for name in task_names():
        if gym_id(name) in gymnasium.registry:
            continue
        gymnasium.register(
            id=gym_id(name),
            entry_point="robolearn.envs.task_env:TaskGymEnv",
            vector_entry_point="robolearn.envs.task_env:TaskEnv",
            kwargs={"task": name},
            disable_env_checker=False,
        )


register_gym_envs()
