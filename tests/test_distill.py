"""DAgger distillation: the student learns the expert's task under randomization, and its run folder
is an ordinary run (load_policy, eval, export read it)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from robolearn.envs.task_env import TaskEnv
from robolearn.errors import ConfigError
from robolearn.eval.evaluation import evaluate
from robolearn.policy.loading import load_policy
from robolearn.rl.checkpoint import load_checkpoint
from robolearn.rl.config import DistillCmd
from robolearn.rl.distill import distill
from robolearn.tasks.core import TaskError


def test_dagger_learns_reach_under_randomization(reach_student: dict[str, Any]) -> None:
    summary = reach_student  # conftest: 3 rounds of 1,600 steps from 8 worlds, a 64x64 student
    # The expert succeeds in every episode; the student in at least 90% of them, on both task variants.
    assert summary["success_rate_randomized"] >= 0.9, summary["evals"]
    assert summary["success_rate_nominal"] >= 0.9, summary["evals"]

    # One growing dataset; the expert's share of the actions halves every round.
    evals = summary["evals"]
    assert [e["beta"] for e in evals] == [1.0, 0.5, 0.25]
    assert [e["samples"] for e in evals] == [1_600, 3_200, 4_800]
    assert evals[-1]["loss"] < evals[0]["loss"]

    run = Path(summary["run_dir"])
    assert (run / "learning_curve.png").stat().st_size > 10_000
    assert json.loads((run / "summary.json").read_text())["success_rate"] == summary["success_rate"]
    assert load_checkpoint(run).state["policy"]["task"] == "panda_reach"

    # load_policy (what eval and export use) rebuilds the student: it solves fresh episodes too.
    policy, meta = load_policy(run)
    assert meta["hidden"] == [64, 64]
    env = TaskEnv("panda_reach", "mujoco_batch", 4, seed=123, randomize=True)
    result = evaluate(env, policy.act, 12, seed=123)
    env.close()
    assert sum(result.successes) >= 11, result.successes


def test_bad_requests_are_refused(tmp_path: Path) -> None:
    with pytest.raises(TaskError, match="no scripted expert"):
        distill(DistillCmd(task="ant", out=tmp_path))
    with pytest.raises(TaskError, match="unknown task"):
        distill(DistillCmd(task="panda_fly", out=tmp_path))
    with pytest.raises(ConfigError, match="--iterations 0: must be at least 1"):
        distill(DistillCmd(task="panda_reach", iterations=0, out=tmp_path))
    with pytest.raises(ConfigError, match="--beta-decay"):
        distill(DistillCmd(task="panda_reach", beta_decay=1.5, out=tmp_path))
    assert not any(tmp_path.iterdir())


@pytest.mark.slow
@pytest.mark.parametrize("task", ["panda_reach", "quadrotor_hover", "car_checkpoints"])
def test_default_distillation_deploys(task: str, tmp_path: Path) -> None:
    """The deployment benchmark's policies: defaults, MuJoCo with randomization, a few CPU minutes."""
    torch.set_num_threads(1)
    start = time.process_time()
    summary = distill(DistillCmd(task=task, out=tmp_path, stop_at_success=None))
    assert summary["success_rate_nominal"] >= 0.9, summary["evals"]
    assert summary["success_rate_randomized"] >= 0.9, summary["evals"]
    assert time.process_time() - start < 5 * 60
