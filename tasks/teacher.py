"""A privileged teacher: a state task's scripted expert driving the worlds of a task that hides that state.

A pixel task (``panda_pick_cube_pixels``) observes no object pose, so it has no scripted expert of
its own. Its scene is its state task's (``panda_pick_cube``), so that task's expert can act on its
own observation terms evaluated on the pixel task's worlds: privileged state the learner never sees,
as a teacher in simulation. Recording (``robolearn record ... --policy scripted``) and DrQ's scripted
demonstrations both drive pixel tasks this way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np

from robolearn.errors import ConfigError
from robolearn.tasks import make_task_cfg, task_names
from robolearn.tasks.core import Observation, TaskCfg, TaskEnvView

PIXELS_SUFFIX = "_pixels"


def teacher_task(cfg: TaskCfg, name: str | None = None) -> TaskCfg:
    """The state task whose expert demonstrates ``cfg``: ``name``, or ``cfg``'s name without ``_pixels``,
    with ``cfg``'s identified robot where it runs the same robot.

    :class:`ConfigError` where that is no task, has no expert, or acts with other action terms.
    """
    name = name or cfg.name.removesuffix(PIXELS_SUFFIX)
    if name not in task_names():
        raise ConfigError(f"expert task {name!r} is not a task (tasks: {', '.join(task_names())})")
    teacher = make_task_cfg(name)
    if teacher.expert is None:
        raise ConfigError(f"task {name} has no scripted expert to demonstrate {cfg.name}")
    if tuple(teacher.action.names) != tuple(cfg.action.names):
        raise ConfigError(
            f"task {name} acts with {list(teacher.action.names)}, {cfg.name} with {list(cfg.action.names)}"
        )
    identified = cfg.scene.robot.identified
    if identified is not None and teacher.scene.robot.name == cfg.scene.robot.name:
        # The expert of the robot simulated (an identified one, --sim-params): the car's drives
        # within its tyres' grip.
        robot = replace(teacher.scene.robot, identified=identified)
        teacher = replace(teacher, scene=replace(teacher.scene, robot=robot))
    return teacher


def privileged_observations(teacher: TaskCfg, env: TaskEnvView) -> Observation:
    """The teacher task's observation terms, (num_envs, D) float32, evaluated on ``env``'s worlds."""
    n = env.num_envs
    return {
        k: np.asarray(t.fn(env, **t.params)).reshape(n, -1).astype(np.float32)
        for k, t in teacher.observations.items()
    }


def privileged_expert(teacher: TaskCfg, env: TaskEnvView) -> Callable[[Observation], np.ndarray]:
    """A policy for ``env``'s task: ignores its observations, acts as the teacher's expert on the
    teacher's terms read from the same worlds (call it after each step, as any policy)."""
    assert teacher.expert is not None  # teacher_task checked it
    expert = teacher.expert(teacher)

    def act(_obs: Observation) -> np.ndarray:
        return np.asarray(expert(privileged_observations(teacher, env)), np.float64)

    return act
