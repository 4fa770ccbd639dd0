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


SMALL_PIXELS = "panda_pick_cube_pixels_24"


def _small_pixels() -> Any:
    import dataclasses

    from robolearn.tasks import make_task_cfg

    cfg = make_task_cfg("panda_pick_cube_pixels")
    cams = {k: dataclasses.replace(c, width=24, height=24) for k, c in cfg.cameras.items()}
    return dataclasses.replace(cfg, name=SMALL_PIXELS, cameras=cams)


def test_dagger_from_cameras_exports_a_pixel_policy(tmp_path: Path) -> None:
    """A task with cameras: its state task's expert labels it from privileged state; the student
    sees only the cameras and proprioception, and the run holds a deployable pixel policy."""
    import numpy as np

    from robolearn.policy.runtime import load_exported
    from robolearn.tasks import register_task, task_names

    if SMALL_PIXELS not in task_names():
        register_task(SMALL_PIXELS, _small_pixels)
    torch.set_num_threads(1)
    cmd = DistillCmd(
        SMALL_PIXELS,
        expert_task="panda_pick_cube",
        num_envs=2,
        iterations=2,
        steps_per_iteration=200,
        updates_per_iteration=60,
        batch_size=32,
        hidden=(32, 32),
        encoder_channels=8,
        eval_episodes=2,
        final_eval_episodes=2,
        randomize=False,
        out=tmp_path,
        name="pixels",
    )
    summary = distill(cmd)
    evals = summary["evals"]
    assert [e["samples"] for e in evals] == [200, 400]
    assert evals[1]["loss"] < evals[0]["loss"]  # warm-started on one growing dataset: the fit improves
    assert "checkpoint" not in summary
    deployed = load_exported(Path(summary["policy_dir"]))
    assert [c.name for c in deployed.meta.cameras] == ["wrist_rgb", "scene_rgb"]
    env = TaskEnv(_small_pixels(), "mujoco_batch", 1, seed=0)
    try:
        obs, _ = env.reset(seed=0)
        assert "cube_pos" not in obs  # the student never saw the privileged state
        assert deployed.act_batch(obs).shape == (1, 4) and np.isfinite(deployed.act_batch(obs)).all()
    finally:
        env.close()
    # The run exports again, to ONNX too, from the weights it kept (robolearn export RUN --onnx).
    from robolearn.cli.export import ExportCmd, run_export

    run_dir = Path(summary["policy_dir"]).parent
    run_export(ExportCmd(run_dir, out=tmp_path / "again", onnx=True))
    again = load_exported(tmp_path / "again", runtime="onnx")
    np.testing.assert_allclose(again.act_batch(obs), deployed.act_batch(obs), atol=1e-4)


def test_distilling_a_pixel_task_without_a_teacher_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="is not a task"):
        DistillCmd("panda_pick_cube_pixels", expert_task="no_such_task", out=tmp_path).check()
