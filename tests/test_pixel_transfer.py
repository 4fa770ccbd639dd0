"""The pixel row of ``robolearn bench transfer`` (issue 13) end to end, at its smallest: a pixel
policy deployed over ROS 2 to a PyBullet robot that renders its cameras, in lockstep."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

pytest.importorskip("rclpy", reason="needs rclpy: install robolearn[ros] or source a ROS 2 installation")

from robolearn.bench.config import TransferBenchCfg
from robolearn.bench.deploy import make_pixel_policy
from robolearn.bench.transfer import format_transfer_table, lockstep, run_transfer_bench
from robolearn.tasks import make_task_cfg

pytestmark = [pytest.mark.ros, pytest.mark.filterwarnings("ignore::DeprecationWarning:lark")]


def test_only_tasks_with_cameras_run_in_lockstep() -> None:
    assert lockstep("panda_pick_cube_pixels")
    assert not lockstep("panda_reach")


@pytest.mark.slow  # 90 s on 2 busy cores: two nodes start (torch, rclpy), 100 lockstep steps
def test_pixel_row_steps_the_pybullet_robot_once_per_command(tmp_path: Path) -> None:
    """One episode: the robot renders and publishes both cameras every step and steps only on a
    command, so the whole episode was driven by the policy node through ROS 2, with no overrun (the
    real-time row overran nearly every step: PyBullet renders slower than the control period)."""
    policy = make_pixel_policy("panda_pick_cube_pixels", (32, 32), tmp_path)
    cfg = TransferBenchCfg(
        pixel_policy=str(policy),
        embodiments=("arm_pixels",),
        episodes=1,
        mujoco_episodes=1,
        work_dir=tmp_path,
    )
    rows, summary = run_transfer_bench(cfg)
    task = make_task_cfg("panda_pick_cube_pixels")
    counts = summary["robot_counts_arm_pixels"]
    robot = json.loads((tmp_path / "panda_pick_cube_pixels-pybullet-summary.json").read_text())
    assert robot["params"]["realtime"] is False and summary["robot_realtime_arm_pixels"] is False
    assert robot["episodes"] == 1 and robot["per_episode"][0]["length"] == task.episode_length
    assert counts["steps"] == task.episode_length  # each step answered a command
    assert counts["commands"] >= counts["steps"] and counts["overruns"] == 0
    assert counts["rejected_commands"] == 0
    # An untrained policy: success is whatever it is; the figures exist and the ratio is defined
    # exactly where MuJoCo succeeded.
    source = summary["success_mujoco_arm_pixels"]
    assert 0.0 <= source <= 1.0 and 0.0 <= summary["success_ros_pybullet_arm_pixels"] <= 1.0
    assert math.isnan(summary["transfer_ratio_arm_pixels"]) == (source == 0)
    assert rows[0]["robot"] == "lockstep" and "lockstep" in format_transfer_table(rows)
