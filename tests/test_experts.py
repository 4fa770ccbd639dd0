"""Every task's scripted expert solves the nominal task in at least 95% of episodes, on every backend.

Later issues rely on these experts for demonstrations and tests, so this is a contract.
"""

from __future__ import annotations

import pytest

from robolearn.envs.task_env import TaskEnv
from robolearn.eval.evaluation import evaluate, make_policy
from robolearn.sim.backend import HOST_BACKENDS
from robolearn.tasks import make_task_cfg, task_names

# Episodes per backend in the default run; the batched backend is cheap enough for 100.
EPISODES = {"mujoco_batch": 100, "mujoco": 20, "pybullet": 20}
PAIRS = [
    (t, b)
    for t in task_names()
    if make_task_cfg(t).expert is not None
    for b in make_task_cfg(t).backends
    if b in HOST_BACKENDS  # MuJoCo Warp's experts: tests/test_mujoco_warp.py (slow on its CPU device)
]


@pytest.mark.parametrize(("task", "backend"), PAIRS)
def test_scripted_expert_succeeds(task: str, backend: str) -> None:
    num_envs = 20 if backend == "mujoco_batch" else 1
    env = TaskEnv(task, backend, num_envs, seed=7)
    policy = make_policy("scripted", env.cfg, num_envs)
    summary = evaluate(env, policy, EPISODES[backend], seed=7).summary()
    env.close()
    assert summary["success_rate"] >= 0.95, summary


@pytest.mark.slow
@pytest.mark.parametrize(("task", "backend"), PAIRS)
def test_scripted_expert_succeeds_under_domain_randomization(task: str, backend: str) -> None:
    num_envs = 20 if backend == "mujoco_batch" else 1
    env = TaskEnv(task, backend, num_envs, seed=8, randomize=True)
    summary = evaluate(env, make_policy("scripted", env.cfg, num_envs), 100, seed=8).summary()
    env.close()
    assert summary["success_rate"] >= 0.8, summary
