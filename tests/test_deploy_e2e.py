"""End to end over real DDS: a trained policy exported, then deployed from a launch file.

A DAgger student of panda_reach is trained on MuJoCo under domain randomization, exported, and
``sim_to_sim.launch.xml`` starts a PyBullet ``sim_robot_node`` and ``policy_node`` in one namespace;
success is measured on the robot's side (the simulator's episode summary).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from robolearn.cli.launch import LaunchCmd, run_launch
from robolearn.hardware.ros._rclpy import ROS_ENV_DEFAULTS
from robolearn.hardware.ros.harness import private_domain
from robolearn.policy.export import export_policy

pytestmark = pytest.mark.ros


def test_trained_policy_deployed_from_a_launch_file_succeeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, reach_student: dict[str, Any]
) -> None:
    pytest.importorskip("rclpy")
    for key, value in ROS_ENV_DEFAULTS.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("ROS_DOMAIN_ID", str(private_domain()))

    assert reach_student["success_rate_randomized"] >= 0.9
    policy = export_policy(Path(reach_student["run_dir"]), tmp_path / "policy")

    summary_path = tmp_path / "robot.json"
    code = run_launch(
        LaunchCmd(
            "sim_to_sim.launch.xml",
            (
                "task:=panda_reach",
                "embodiment:=arm",
                f"policy:={policy}",
                "backend:=pybullet",
                "episodes:=5",
                "seed:=11",
                f"summary_path:={summary_path}",
            ),
        )
    )
    assert code == 0
    robot_side = json.loads(summary_path.read_text())
    assert robot_side["episodes"] == 5
    assert robot_side["success_rate"] >= 0.8, robot_side
